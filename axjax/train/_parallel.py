"""``Parallel``: train over a device mesh, sharded by axis name.

``fit(..., parallel=ax.train.Parallel(mesh, rules, param_rules=None))`` places the model
(and so the optimizer state) by the parameter rules and every batch by the compute rules;
the jitted step then runs on global arrays and JAX inserts the collectives. With
``Loader(..., parallel=...)`` each process builds only the rows of each batch that its
devices hold.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator, Mapping
from typing import Any, final

import jax
from jax.sharding import Mesh, NamedSharding

from ..core import Axis, AxisRules, TensorType, axis_rules, shard, sharding

__all__ = ["Parallel"]


@final
class Parallel:
    """A mesh and the rules that shard a training run over it.

    Args:
        mesh: a ``jax.sharding.Mesh`` (``jax.make_mesh((4, 2), ("data", "model"))``).
        rules: compute rules ``{Axis: mesh axis | tuple | None}`` for batches and
            activations (data parallel: ``{Batch: "data"}``).
        param_rules: rules for parameters and optimizer state (tensor parallel:
            ``{Hidden: "model"}``; FSDP: ``{Hidden: "data"}``); default ``rules``.

    Raises:
        AxisError: a rule names a mesh axis the mesh lacks.

    Example:
        >>> mesh = jax.make_mesh((8,), ("data",))
        >>> par = ax.train.Parallel(mesh, {Batch: "data"})
        >>> ax.train.fit(model, optax.adam(1e-3), loss_fn, loader, parallel=par)
    """

    __slots__ = ("axis_rules",)

    def __init__(
        self,
        mesh: Mesh,
        rules: Mapping[type[Axis], Any],
        *,
        param_rules: Mapping[type[Axis], Any] | None = None,
    ) -> None:
        self.axis_rules: AxisRules = AxisRules(mesh, rules, param_rules, "Parallel")

    @property
    def mesh(self) -> Mesh:
        return self.axis_rules.mesh

    @property
    def is_main(self) -> bool:
        """``True`` in the process that writes logs and prunes checkpoints (process 0)."""
        return jax.process_index() == 0

    @contextlib.contextmanager
    def active(self) -> Generator[AxisRules, None, None]:
        """Enter the mesh and make the rules current (:func:`axjax.axis_rules`)."""
        r = self.axis_rules
        with axis_rules(r.mesh, r.rules, param_rules=r.param_rules) as state:
            yield state

    def place_params(self, tree: Any) -> Any:
        """``tree`` (a model, an optimizer state) placed by the parameter rules."""
        return shard(tree, self.axis_rules, params=True)

    def state_sharding(self, tree: Any) -> Any:
        """The shardings of a training state (model, optimizer state, running sums) by the
        parameter rules: a ``NamedSharding`` per Tensor, bare arrays replicated."""
        return sharding(tree, self.axis_rules, params=True)

    def place_batch(self, batch: Any) -> Any:
        """A batch placed by the compute rules (a global array over the whole mesh)."""
        return shard(batch, self.axis_rules)

    def batch_sharding(self, t: TensorType) -> NamedSharding:
        """The sharding of a batch tensor of type ``t`` (its sizes must divide evenly)."""
        return self.axis_rules.named(t, where="Parallel")

    def prepare(self, model: Any, source: Any) -> tuple[Any, Any]:
        """The model placed by the parameter rules, and ``source`` with every batch placed by
        the compute rules (a source that already builds global batches is kept)."""
        model = self.place_params(model)
        if getattr(source, "parallel", None) is self:
            return model, source
        return model, _Placed(source, self)

    def __repr__(self) -> str:
        return f"Parallel({self.axis_rules!r})"


class _Placed:
    """A batch source whose batches are placed by a :class:`Parallel`'s compute rules."""

    def __init__(self, source: Any, parallel: Parallel) -> None:
        self.source, self.parallel = source, parallel

    def __len__(self) -> int:
        return len(self.source)

    def epoch(self, epoch: int, start: int = 0) -> Iterator[Any]:
        for batch in self.source.epoch(epoch, start):
            yield self.parallel.place_batch(batch)
