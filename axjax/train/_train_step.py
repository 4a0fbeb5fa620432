"""``TrainStep``: the training step of ``fit`` as an object, for hand-written loops.

A hand-written loop that calls its own ``jax.jit`` step with the model and the optimizer
state pays, on every call, the Python flatten and unflatten of every Equinox module (and
Tensor) in both: about 60 µs more per call than a step over a list of arrays for the MNIST
MLP with Adam (``python -m benchmarks.host_overhead``). :class:`TrainStep` keeps
``(params, opt_state, monitor)`` and the step number as one flat list of arrays between
calls (the jitted step of :func:`make_flat_train_step`, which ``fit`` runs), so a call
flattens only the batch; the model is put back together only when it is asked for
(:attr:`TrainStep.model`).

Example:
    >>> step = ax.train.TrainStep(model, optax.adam(1e-3), loss_fn)
    >>> for x, y in loader.epoch(0):
    ...     step(x, y)
    >>> step.metrics()            # the means since the last read: one host sync
    {'loss': 0.31, 'accuracy': 0.91}
    >>> model = step.model        # the trained model, of the type you passed in
    >>> ax.train.TrainStep(model, optax.adam(1e-3), loss_fn, precision=ax.nn.Policy.mixed())
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..core._internal import PyTree, block_until_ready, prng_key
from ..nn import Policy
from ..nn._internal import Selection
from ..parallel import Parallel
from ..parallel._internal import queue_bound
from ._precision import check_guard
from ._run_state import copy_tree
from ._setup import prepare
from ._step import (
    LossFn,
    Monitor,
    TrainingDiverged,
    make_flat_train_step,
    metric_names,
    takes_key,
)

__all__ = ["TrainStep"]

M = TypeVar("M")

_WHERE = "TrainStep"


class TrainStep(Generic[M]):
    """One optax update of a model per call; it keeps the parameters, the optimizer state
    and the running means of the loss and metrics between calls.

    The step is the one ``ax.train.fit`` runs: loss, gradient and optax update in one
    ``jax.jit``, on the floating-point arrays of the model (integer arrays pass through
    unchanged). Between calls the state is one flat list of arrays, so a call costs what a
    hand-written ``jax.jit`` step over a list of arrays costs: no Python flatten and
    unflatten of the model's modules. ``step.model`` rebuilds the model (typed as the one
    you passed in) only when you ask, and keeps it until the next call.

    Args:
        model: an Equinox module (fields are Tensors, arrays, or static config). It is not
            consumed: the step works on its own copies of the arrays.
        optimizer: any ``optax.GradientTransformation``.
        loss_fn: as in ``fit``: ``loss_fn(model, *batch)`` returning a scalar loss, or
            ``(loss, {"accuracy": ..., ...})``; with a ``key`` parameter it gets
            ``key=jax.random.fold_in(key, step)`` at each step.
        key: the PRNG key of the run (default ``jax.random.key(0)``), used only by a
            ``loss_fn`` that takes one.
        opt_state: the optimizer state to start from (to resume); default
            ``optimizer.init(eqx.filter(model, eqx.is_inexact_array))``.
        guard: ``False`` (default): the update and the running sums only, the cost of a
            hand-written step; a NaN or infinite loss goes into the model and makes
            ``metrics()["loss"]`` non-finite. ``True``: the step of
            ``fit(guard="step")``: it also computes the global gradient norm, and from the
            first step whose loss or gradient norm is not finite the parameters and the
            optimizer state stop changing; the next :meth:`metrics`, ``model`` or
            ``opt_state`` read raises :class:`TrainingDiverged` with that step, its loss and
            gradient norm, and the last finite model and optimizer state.
        donate: ``True`` (default): the step updates its arrays in place
            (``donate_argnums``). The model and ``opt_state`` handed in are copied once, and
            the ``model`` / ``opt_state`` you read stay valid: the next call copies the
            state first (once per read). ``False``: no donation, no copies.
        precision: an ``ax.nn.Policy``, as in ``fit``: the step runs the model and the
            floating inputs in its compute dtype, the loss in its output dtype, and updates
            the parameters in its param dtype; with loss scaling (f16) an overflowing step
            is skipped and the scale moves (``guard=True`` is refused then). ``model`` is
            the model as passed in, its parameters in the param dtype.
        parallel: an :class:`axjax.train.Parallel`, as in ``fit``: the model and optimizer
            state are placed by its parameter rules, each batch by its compute rules, and
            the step runs over the whole mesh.
        trainable: the parameters to train, as in ``fit`` (a selector such as
            ``ax.train.by_path("head")``, a pattern, a tuple of them, or a predicate
            ``(path, leaf) -> bool``); the others stay as they are and get no optimizer
            state.

    Raises:
        TypeError: an ``optimizer`` that is not an optax transformation, a ``loss_fn`` that
            is not callable, a ``key`` that is not a PRNG key, a ``guard`` or ``donate``
            that is not a bool, a ``trainable`` that is not a selector, pattern or
            predicate (or a predicate that answers something other than a bool).
        ValueError: a model without floating-point arrays (nothing to train), a
            ``trainable`` that freezes all of them, or ``guard=True`` under a policy with
            loss scaling.

    Example:
        >>> step = ax.train.TrainStep(model, optax.adam(1e-3), loss_fn)
        >>> for epoch in range(3):
        ...     for x, y in loader.epoch(epoch):
        ...         step(x, y)
        ...     print(epoch, step.metrics())
        >>> ax.train.evaluate(step.model, loss_fn, test)
    """

    def __init__(
        self,
        model: M,
        optimizer: optax.GradientTransformation,
        loss_fn: LossFn,
        *,
        key: jax.Array | None = None,
        opt_state: PyTree = None,
        guard: bool = False,
        donate: bool = True,
        precision: Policy | None = None,
        parallel: Parallel | None = None,
        trainable: Selection | None = None,
    ) -> None:
        if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
            raise TypeError(
                f"{_WHERE}: optimizer must be an optax.GradientTransformation "
                f"(optax.adam(1e-3), ...), got {_what(optimizer)}"
            )
        if not callable(loss_fn):
            raise TypeError(
                f"{_WHERE}: loss_fn must be a function loss_fn(model, *batch) returning the "
                f"loss (or the loss and a dict of metrics), got {_what(loss_fn)}"
            )
        # the set-up, in two places: here (validate, prepare the pieces under the policy
        # and the layout, split the model once, copy, flatten) and in _build at the first
        # batch (the monitor, the jitted flat step)
        self._guard = _flag("guard", guard)
        self._donate = _flag("donate", donate)
        key = _prng_key(key)
        check_guard(_WHERE, precision, stepwise=self._guard)
        self._model_type = type(model).__name__
        params = eqx.filter(model, eqx.is_array)
        if not jax.tree.leaves(eqx.filter(params, eqx.is_inexact_array)):
            raise ValueError(
                f"{_WHERE}: the model holds no floating-point array to train (arrays "
                f"found: {_count(params)}, none floating-point); pass the module itself, "
                "with its Tensors, not its static part"
            )
        p = prepare(
            model,
            optimizer,
            loss_fn,
            precision=precision,
            parallel=parallel,
            opt_state=opt_state,
            trainable=trainable,
            where=_WHERE,
        )
        self._select = p.select
        self._optimizer, self._loss_fn, self._unwrap = p.optimizer, p.loss_fn, p.unwrap
        self._parallel = parallel
        # a typed key is a pytree node that JAX flattens in Python: passed only when used
        self._key: jax.Array | None = key if takes_key(p.loss_fn) else None
        params, static = eqx.partition(p.model, eqx.is_array)
        opt_state = p.opt_state
        if self._donate:  # the step updates these in place: never the caller's arrays
            params, opt_state = copy_tree((params, opt_state))
        #: simulated CPU devices: one step queued at a time (``queue_bound``)
        self._sync = queue_bound(params) if parallel is not None else None
        self._static: PyTree = static
        leaves, self._params_def = jax.tree.flatten(params)
        opt_leaves, self._opt_def = jax.tree.flatten(opt_state)
        self._n_params = len(leaves)
        self._n_state = len(leaves) + len(opt_leaves)
        #: ``(params, opt_state, monitor)`` and the step number (an int32 scalar) as one
        #: list of arrays; the monitor's from the first call on, when the metric names
        #: are known
        self._leaves: list[jax.Array] = leaves + opt_leaves
        self._mon_def: Any = None  # a jax.tree_util.PyTreeDef (no stub pyright can use)
        self._jit: Callable[..., list[jax.Array]] | None = None
        self._model: M | None = None
        self._lent_params = False  # the arrays of a model handed out: copy before donating
        self._lent_opt = False
        self._steps = 0
        self._traces = 0

    # ------------------------------------------------------------------ the step
    def __call__(self, *batch: PyTree) -> None:
        """One update on ``batch``: ``step(x, y)`` or ``step((x, y))`` call
        ``loss_fn(model, x, y)``. Returns at once (asynchronous dispatch)."""
        data = batch[0] if len(batch) == 1 else batch
        if self._parallel is not None:
            return self._call_placed(self._parallel, data)
        step = self._jit if self._jit is not None else self._build(data)
        if self._lent_params or self._lent_opt:
            self._take_back()
        self._leaves = step(self._leaves, data, self._key)
        self._steps += 1
        self._model = None
        return None

    def _call_placed(self, parallel: Parallel, data: PyTree) -> None:
        """The call under a :class:`Parallel`: the batch placed by its compute rules, the
        step run in its mesh (and waited for on simulated CPU devices)."""
        with parallel.placement():
            step = self._jit if self._jit is not None else self._build(data)
            if self._lent_params or self._lent_opt:
                self._take_back()
            self._leaves = step(self._leaves, parallel.place_batch(data), self._key)
            if self._sync:
                block_until_ready(self._leaves)
        self._steps += 1
        self._model = None

    def _build(self, batch: PyTree) -> Callable[..., list[jax.Array]]:
        """The monitor (its metric names found by tracing ``loss_fn`` abstractly on the first
        batch) and the jitted flat step."""
        model = eqx.combine(self._params(), self._static)
        names = metric_names(self._loss_fn, model, batch)
        mon_leaves, self._mon_def = jax.tree.flatten(Monitor.zero(names, guarded=self._guard))
        self._leaves = [*self._leaves, *mon_leaves, jnp.asarray(self._steps, jnp.int32)]
        treedef = jax.tree_util.treedef_tuple((self._params_def, self._opt_def, self._mon_def))
        out = None
        if self._parallel is not None:  # the state stays where the parameter rules put it
            state = (jax.tree.unflatten(treedef, self._leaves[:-1]), self._leaves[-1])
            out = jax.tree.leaves(self._parallel.state_sharding(state))
        self._jit = step = make_flat_train_step(
            self._counted(self._loss_fn),
            self._optimizer,
            self._static,
            treedef,
            donate=self._donate,
            guard=self._guard,
            out_shardings=out,
            carry_step=True,
            select=self._select,
        )
        return step

    def _counted(self, loss_fn: LossFn) -> LossFn:
        """``loss_fn``, counting the traces (its signature, ``key`` included, kept)."""

        @functools.wraps(loss_fn)
        def counted(*args: Any, **kwargs: Any) -> Any:
            self._traces += 1
            return loss_fn(*args, **kwargs)

        return counted

    def _take_back(self) -> None:
        """Copy the arrays handed out by ``model`` / ``opt_state`` before a donating call
        reuses their buffers (one jitted copy)."""
        lo = 0 if self._lent_params else self._n_params
        hi = self._n_state if self._lent_opt else self._n_params
        leaves = self._leaves
        self._leaves = leaves[:lo] + copy_tree(leaves[lo:hi]) + leaves[hi:]
        self._lent_params = self._lent_opt = False

    # ------------------------------------------------------------------ reading the state
    @property
    def steps(self) -> int:
        """The updates done so far."""
        return self._steps

    @property
    def trace_count(self) -> int:
        """How many times JAX traced the step (once per distinct batch shape and dtype)."""
        return self._traces

    @property
    def model(self) -> M:
        """The model with the current parameters, of the type passed in (kept until the next
        call). With ``guard=True``, raises :class:`TrainingDiverged` if a step was not
        finite."""
        self._check()
        return self._current_model()

    @property
    def opt_state(self) -> PyTree:
        """The current optimizer state (with ``guard=True``, checked as :attr:`model`)."""
        self._check()
        return self._current_opt_state()

    def metrics(self, *, reset: bool = True) -> dict[str, float]:
        """The means of the loss and metrics over the steps since the last reset (one host
        sync; ``{}`` before the first step). ``reset=True`` (default) starts new sums.

        Raises:
            TrainingDiverged: with ``guard=True``, a step's loss or gradient norm was not
                finite.
        """
        reset = _flag("reset", reset)
        if self._mon_def is None:
            return {}
        monitor = self._monitor()
        means, bad = monitor.read()
        if bad is not None:
            raise self._diverged(*bad)
        if reset:
            new = jax.tree.leaves(monitor.reset())
            self._leaves = [*self._leaves[: self._n_state], *new, self._leaves[-1]]
        return means

    def block_until_ready(self) -> TrainStep[M]:
        """Wait until the queued steps are done (for timing a loop); returns the step."""
        block_until_ready(self._leaves)
        return self

    def lower(self, *batch: PyTree) -> jax.stages.Lowered:
        """The step lowered for this batch (nothing runs): ``.as_text()`` is its StableHLO,
        ``.compile().cost_analysis()`` its cost."""
        data = batch[0] if len(batch) == 1 else batch
        if self._parallel is not None:
            data = self._parallel.place_batch(data)
        step = self._jit if self._jit is not None else self._build(data)
        jitted = cast(Any, step)  # a jax.jit function: it has .lower
        lowered: jax.stages.Lowered = jitted.lower(self._leaves, data, self._key)
        return lowered

    def __repr__(self) -> str:
        return (
            f"TrainStep({self._model_type}, steps={self._steps}, guard={self._guard}, "
            f"donate={self._donate})"
        )

    # ------------------------------------------------------------------ helpers
    def _params(self) -> PyTree:
        return jax.tree.unflatten(self._params_def, self._leaves[: self._n_params])

    def _current_model(self) -> M:
        """The model (cached until the next call); its arrays are lent out from here on."""
        if self._model is None:
            self._model = cast(M, self._unwrap(eqx.combine(self._params(), self._static)))
        self._lent_params = self._donate
        return self._model

    def _current_opt_state(self) -> PyTree:
        """The optimizer state; its arrays are lent out from here on."""
        self._lent_opt = self._donate
        return jax.tree.unflatten(self._opt_def, self._leaves[self._n_params : self._n_state])

    def _monitor(self) -> Monitor:
        monitor: Monitor = jax.tree.unflatten(self._mon_def, self._leaves[self._n_state : -1])
        return monitor

    def _check(self) -> None:
        """With ``guard=True``: raise :class:`TrainingDiverged` if the monitor recorded a bad
        step (one host sync)."""
        if not self._guard or self._mon_def is None:
            return
        _, bad = self._monitor().read()
        if bad is not None:
            raise self._diverged(*bad)

    def _diverged(self, step: int, loss: float, grad_norm: float) -> TrainingDiverged:
        """The error of a recorded bad step, with the state from before it (the guarded
        step froze it there)."""
        model, opt_state = self._current_model(), self._current_opt_state()
        return TrainingDiverged(step, loss, grad_norm, model, opt_state)


def _what(value: object) -> str:
    return f"an object of type {type(value).__name__}"


def _count(params: PyTree) -> int:
    return len(jax.tree.leaves(params))


def _flag(name: str, value: object) -> bool:
    """``value`` if it is a bool; else a ``TypeError`` naming the argument."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise TypeError(f"{_WHERE}: {name} must be True or False, got {value!r}")


def _prng_key(key: object) -> jax.Array:
    """``key``, or ``jax.random.key(0)`` for ``None``; a ``TypeError`` for anything but a
    PRNG key (a typed key, or a legacy ``uint32[2]`` one)."""
    if key is None:
        return jax.random.key(0)
    checked: jax.Array = prng_key(_WHERE, "key", key)
    return checked
