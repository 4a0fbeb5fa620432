"""``RunState``: what changes while :func:`axjax.train.fit` trains, in one object."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from ..core._internal import PyTree  # the one alias: a JAX pytree (core/_jax_typed.py)
from ._step import Monitor, all_finite

__all__ = ["PyTree", "RunState", "copy_tree", "finite_and_copy"]


@jax.jit
def copy_tree(tree: PyTree) -> PyTree:
    """A device copy of every array in ``tree`` (kept safe from a donating step), made by
    one jitted call."""
    return jax.tree.map(jnp.copy, tree)


@jax.jit
def finite_and_copy(tree: PyTree) -> tuple[jax.Array, PyTree]:
    """``(all_finite(tree), copy_tree(tree))`` in one jitted call: the NaN guard's check
    and its snapshot of a state that a donating step will overwrite."""
    return all_finite(tree), jax.tree.map(jnp.copy, tree)


@dataclasses.dataclass
class RunState:
    """The training state of one ``fit`` run and where it stands in the data.

    ``params`` and ``static`` are ``eqx.partition(model, eqx.is_array)``; ``epoch`` and
    ``batch`` count the epochs done and the batches done in the current one (``batch`` may
    equal ``per_epoch`` until the epoch is closed).
    """

    params: PyTree
    static: PyTree
    opt_state: PyTree
    key: jax.Array
    per_epoch: int
    step: int = 0
    epoch: int = 0
    batch: int = 0
    elapsed0: float = 0.0  # seconds spent before a resume
    t0: float = 0.0  # the clock's zero, set by start_clock
    monitor: Monitor | None = None  # running sums since the last log row, once built
    last: dict[str, float] = dataclasses.field(default_factory=dict[str, float])
    best: PyTree = None  # parameters of the best evaluation (EarlyStopping.restore_best)
    done: bool = False
    stopped_early: bool = False
    checked_at: int = -1  # the step of the last guard check (one check per step is enough)
    #: ``(params, opt_state, monitor)`` as a list of leaves while the steps run (``hot``
    #: is ``None`` otherwise): a list crosses ``jax.jit`` without Python flattening
    hot: list[jax.Array] | None = None
    hot_def: Any = None
    #: the history rows a resumed run's checkpoint carries (``None``: a fresh run, or a
    #: checkpoint saved without them)
    history: list[dict[str, Any]] | None = None

    def pack(self) -> list[jax.Array]:
        """The leaves of ``(params, opt_state, monitor)`` for the step (flattened once)."""
        if self.hot is None:
            self.hot, self.hot_def = jax.tree.flatten((self.params, self.opt_state, self.monitor))
        return self.hot

    def unpack(self) -> None:
        """Put the step's leaves back into ``params``, ``opt_state`` and ``monitor``."""
        if self.hot is not None:
            self.params, self.opt_state, self.monitor = jax.tree.unflatten(self.hot_def, self.hot)
            self.hot = None

    @classmethod
    def create(
        cls,
        model: Any,
        opt_state: PyTree,
        key: jax.Array,
        per_epoch: int,
        *,
        step: int = 0,
        epoch: int = 0,
        batch: int = 0,
        seconds: float = 0.0,
    ) -> RunState:
        """Split ``model`` into arrays and the rest; start at ``(step, epoch, batch)``."""
        params, static = eqx.partition(model, eqx.is_array)
        return cls(params, static, opt_state, key, per_epoch, step, epoch, batch, seconds)

    def model(self) -> Any:
        """The model of the current parameters."""
        return eqx.combine(self.params, self.static)

    def start_clock(self) -> None:
        """Count :meth:`seconds` from now, on top of the time before a resume."""
        self.t0 = time.perf_counter() - self.elapsed0

    def seconds(self) -> float:
        """Seconds of training so far (including those before a resume)."""
        return time.perf_counter() - self.t0

    def position(self) -> tuple[int, int]:
        """``(epoch, batch)`` to continue from: the next epoch's start after a full one."""
        if self.batch >= self.per_epoch:
            return self.epoch + 1, 0
        return self.epoch, self.batch

    def epoch_fraction(self) -> float:
        """Epochs done, with the current one as a fraction (the ``epoch`` log column)."""
        return round(self.epoch + self.batch / self.per_epoch, 4)
