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
from typing import Any, Protocol, TypeVar, final

import jax
import jax.core  # jax.core.Tracer: imported by name for type checkers
from jax.sharding import Mesh, NamedSharding

from ..core import Axis, TensorType
from ..core._internal import PyTree, is_tensor, pspec
from ._rules import AxisRules, axis_rules, shard, sharding

T = TypeVar("T")  # a tree placed keeps its type

__all__ = ["Parallel", "queue_bound"]

_REPLICATED = pspec()


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

    def placement(self) -> contextlib.AbstractContextManager[Any]:
        """The mesh context ``fit`` runs in (``jax.set_mesh``): its jitted step, the NaN
        guard's replay and op-by-op report, evaluation and checkpoints all see one mesh.

        Only the mesh is entered, not the rules: inside the step each op keeps the mesh
        axes its operands have (the rules placed the model and the batches)."""
        return jax.set_mesh(self.mesh)

    def place_params(self, tree: T) -> T:
        """``tree`` (a model, an optimizer state) placed by the parameter rules: each
        Tensor by its axes, each bare array (Adam's step count) replicated over the mesh,
        as :meth:`state_sharding` says (so a restore into this tree's shardings, and the
        jitted step, see every leaf on the whole mesh)."""
        replicated = NamedSharding(self.mesh, _REPLICATED)

        def bare(x: object) -> object:
            if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
                return jax.device_put(x, replicated)
            return x

        placed: T = jax.tree.map(bare, shard(tree, self.axis_rules, params=True), is_leaf=is_tensor)
        return placed

    def state_sharding(self, tree: PyTree) -> PyTree:
        """The shardings of a training state (model, optimizer state, running sums) by the
        parameter rules: a ``NamedSharding`` per Tensor, bare arrays replicated."""
        return sharding(tree, self.axis_rules, params=True)

    def place_batch(self, batch: T) -> T:
        """A batch placed by the compute rules (a global array over the whole mesh)."""
        return shard(batch, self.axis_rules)

    def batch_sharding(self, t: TensorType) -> NamedSharding:
        """The sharding of a batch tensor of type ``t`` (its sizes must divide evenly)."""
        return self.axis_rules.named(t, where="Parallel")

    def prepare(self, model: T, source: BatchSource) -> tuple[T, BatchSource]:
        """The model placed by the parameter rules, and ``source`` with every batch placed by
        the compute rules (a source that already builds global batches is kept)."""
        model = self.place_params(model)
        if getattr(source, "parallel", None) is self:
            return model, source
        return model, _Placed(source, self)

    def __repr__(self) -> str:
        return f"Parallel({self.axis_rules!r})"


class BatchSource(Protocol):
    """A source of batches as ``fit`` iterates it (``ax.train``'s ``BatchSource``):
    ``len()`` batches per epoch, in a fixed order."""

    def __len__(self) -> int: ...

    def epoch(self, epoch: int, start: int = 0) -> Iterator[PyTree]: ...


class _Placed:
    """A batch source whose batches are placed by a :class:`Parallel`'s compute rules."""

    def __init__(self, source: BatchSource, parallel: Parallel) -> None:
        self.source, self.parallel = source, parallel

    def __len__(self) -> int:
        return len(self.source)

    def epoch(self, epoch: int, start: int = 0) -> Iterator[PyTree]:
        for batch in self.source.epoch(epoch, start):
            yield self.parallel.place_batch(batch)


def queue_bound(tree: PyTree) -> int | None:
    """How many steps may be queued between host syncs for arrays like ``tree``'s: ``1``
    when an array is sharded over several CPU devices, ``None`` (no bound) otherwise.

    JAX dispatches steps asynchronously. XLA:CPU does not run one device's programs in
    order as a GPU stream does: the queued steps of simulated CPU devices (and of CPU
    processes joined by ``jax.distributed``) run at once on a shared thread pool, and
    their collectives wait for participants that have no thread left. On 8 simulated
    devices over 2 cores, a full MNIST epoch of ``fit`` (469 steps, a sync every 100 at
    the log points) stopped in XLA's rendezvous ("may be stuck", then SIGABRT); with a
    sync after every step it finishes, at no measurable cost (24.3 s against 24.0 s with a
    sync every 8 steps): a CPU step is computed as it is dispatched anyway. GPUs and TPUs
    run each device's programs in order, so their queue needs no bound.
    """
    for leaf in jax.tree.leaves(tree, is_leaf=is_tensor):
        a = leaf.array if is_tensor(leaf) else leaf
        sharding = getattr(a, "sharding", None)
        if isinstance(a, jax.Array) and sharding is not None:
            devices = sharding.device_set
            if len(devices) > 1 and all(d.platform == "cpu" for d in devices):
                return 1
    return None
