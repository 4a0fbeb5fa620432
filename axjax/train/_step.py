"""The jitted training and evaluation steps, and the NaN/Inf checks they carry.

One training step is one ``jax.jit`` region: loss, gradient, optax update. The model is
split once with ``eqx.partition`` into arrays (traced) and the rest (closed over), so
calling the step is a plain ``jax.jit`` dispatch: it returns at once (asynchronous
dispatch) and the host never waits for the device, except when the loop logs.

Each step also updates a small :class:`Monitor` on the device: running sums of the loss
and metrics. The *guarded* step (``make_train_step(..., guard=True)``) adds the global
gradient norm and records the first step whose loss or gradient norm was NaN or infinite;
from that step on the parameters and optimizer state stop changing, so when the loop next
looks it can stop with the step, the values and the last finite model. The *fast* step
(``guard=False``) is just the update and the sums, as cheap as a hand-written step; ``fit``
checks its state at log points and, when something is not finite, replays the steps since
the last good state with :func:`make_replay_step` to find the same answer.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike

from ..core import AnyTensor, Axis, AxisError, NonFiniteReport, Tensor, checkify_indices
from ..core._internal import PyTree, axis_name, check_not_donated, check_state, describe, is_inexact
from ..nn import LossScaled, Selector
from ..nn._internal import Selection, leaves_with_paths, selector
from ._axes import Batch
from ._precision import Optimizer

__all__ = [
    "Monitor",
    "TrainingDiverged",
    "all_finite",
    "batch_size",
    "call_loss",
    "make_eval_step",
    "make_flat_train_step",
    "make_replay_step",
    "make_train_step",
    "train_step_fn",
    "trainable",
    "update_step",
]

LossFn = Callable[..., Any]


class TrainingDiverged(FloatingPointError):
    """The loss, the gradient or the updated model became NaN or infinite.

    Attributes:
        step: the update that produced it (1 is the first update).
        loss: the loss at that step; ``grad_norm``: the global gradient norm.
        model, opt_state: the last finite ones (from before that step).
        report: with ``guard="replay"``, the :class:`~axjax.NonFiniteReport` of the first op
            whose forward or backward result was not finite when the step was replayed op
            by op (``None`` if none was: the optimizer's update made the state non-finite).
    """

    __module__ = "axjax.train"

    def __init__(
        self,
        step: int,
        loss: float,
        grad_norm: float,
        model: PyTree = None,
        opt_state: PyTree = None,
        report: NonFiniteReport | None = None,
    ) -> None:
        self.step: int = step
        self.loss: float = loss
        self.grad_norm: float = grad_norm
        self.model: PyTree = model
        self.opt_state: PyTree = opt_state
        self.report: NonFiniteReport | None = report
        if not math.isfinite(loss):
            what = f"the loss is {loss}"
        elif not math.isfinite(grad_norm):
            what = f"the gradient norm is {grad_norm} (loss {loss})"
        else:
            what = (
                f"the update made the parameters or optimizer state non-finite (loss "
                f"{loss}, gradient norm {grad_norm})"
            )
        super().__init__(
            f"training stopped at step {step}: {what}. The model and optimizer state from "
            "before that step are kept (error.model, error.opt_state). Lower the learning "
            "rate, clip gradients (optax.clip_by_global_norm), or look for NaN in the data."
            + (f"\nReplayed op by op, {report}" if report is not None else "")
        )


class Monitor(eqx.Module):
    """Device-side running sums of the loss and metrics, plus the first non-finite step.

    The ``bad_*`` fields are ``None`` in a monitor for the unguarded step (``guarded=False``
    in :meth:`zero`): it never sets them, and leaving them out keeps the step lean.
    """

    sums: dict[str, jax.Array]
    count: jax.Array
    bad_step: jax.Array | None
    bad_loss: jax.Array | None
    bad_grad_norm: jax.Array | None
    names: tuple[str, ...] = eqx.field(static=True)  # "loss" first, then the metrics

    @staticmethod
    def zero(names: tuple[str, ...], *, guarded: bool = True) -> Monitor:
        # one buffer per field: the step may donate them, and a buffer is donated only once
        if not guarded:
            return Monitor({n: _zero() for n in names}, _zero(), None, None, None, names)
        return Monitor(
            {n: _zero() for n in names},
            _zero(),
            jnp.asarray(-1, jnp.int32),
            _zero(),
            _zero(),
            names,
        )

    def reset(self) -> Monitor:
        """Clear the sums; keep the guard."""
        return Monitor(
            {n: _zero() for n in self.names},
            _zero(),
            self.bad_step,
            self.bad_loss,
            self.bad_grad_norm,
            self.names,
        )

    def read(self) -> tuple[dict[str, float], tuple[int, float, float] | None]:
        """The means since the last reset, and ``(step, loss, grad_norm)`` of the first
        non-finite step or ``None``: one host sync."""
        means, bad, _ = self.read_with(None)
        return means, bad

    def read_with(
        self, extra: PyTree
    ) -> tuple[dict[str, float], tuple[int, float, float] | None, Any]:
        """:meth:`read`, plus ``extra`` (device values) fetched in the same host sync."""
        (sums, count, step, loss, gnorm), host = jax.device_get(
            ((self.sums, self.count, self.bad_step, self.bad_loss, self.bad_grad_norm), extra)
        )
        means = {k: float(sums[k] / count) for k in self.names} if count else {}
        bad = None if step is None or step < 0 else (int(step), float(loss), float(gnorm))
        return means, bad, host


def _zero() -> jax.Array:
    return jnp.zeros((), jnp.float32)


def _array(x: AnyTensor | ArrayLike, what: str) -> jax.Array:
    if isinstance(x, Tensor):
        if x.axes:
            raise AxisError(
                f"the {what} must be a scalar, got {describe(x)} (reduce the "
                "remaining axes with ax.mean or ax.sum)"
            )
        return x.array
    arr = jnp.asarray(x)
    if arr.ndim:
        raise TypeError(f"the {what} must be a scalar, got an array of shape {arr.shape}")
    return arr


def takes_key(loss_fn: LossFn) -> bool:
    """Whether ``loss_fn`` has a ``key`` parameter (it then gets a fresh key per step)."""
    try:
        return "key" in inspect.signature(loss_fn).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return False


def call_loss(
    loss_fn: LossFn, model: PyTree, batch: PyTree, key: jax.Array | None, with_key: bool
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Call ``loss_fn(model, *batch[, key=key])``; return the scalar loss and metrics."""
    args = batch if isinstance(batch, tuple) else (batch,)
    out = loss_fn(model, *args, key=key) if with_key else loss_fn(model, *args)
    loss, metrics = out if isinstance(out, tuple) else (out, {})
    if not isinstance(metrics, dict):
        raise TypeError(
            "loss_fn must return a loss or (loss, dict of metrics), got a "
            f"{type(metrics).__name__} beside the loss"
        )
    reserved = [k for k in metrics if k in RESERVED]
    if reserved:
        raise ValueError(
            f"loss_fn returned a metric named {reserved[0]!r}: that name is reserved "
            f"({RESERVED[reserved[0]]}); rename the metric (e.g. {reserved[0] + '_metric'!r})"
        )
    value = _array(loss, "loss")
    if not jnp.issubdtype(value.dtype, jnp.floating):
        raise TypeError(
            f"loss_fn returned a loss of dtype {value.dtype}: a loss to differentiate must be "
            "floating (convert it, e.g. with ax.astype(loss, ax.F32); an integer count "
            "belongs among the metrics)"
        )
    return value, {k: _array(v, f"metric {k!r}") for k, v in metrics.items()}


#: metric names that ``fit`` and ``evaluate`` use themselves, and what for
RESERVED = {
    "loss": "the loss's own column: fit's history has train_loss and eval_loss",
    "count": "evaluate's count of examples",
}


def check_metric_names(where: str, expected: Iterable[str], metrics: Mapping[str, object]) -> None:
    """Raise unless ``metrics`` has the names of the first batch (``expected``, the loss
    left out): the sums are kept per name, so a batch may not add or drop one."""
    want = tuple(n for n in expected if n not in RESERVED)
    if set(metrics) != set(want):
        raise ValueError(
            f"{where}: loss_fn returned the metrics ({', '.join(sorted(metrics)) or 'none'}) "
            f"for this batch and ({', '.join(sorted(want)) or 'none'}) for the first; every "
            "batch must return the same metric names (return each one for every batch)"
        )


def _keep_if(ok: jax.Array, new: PyTree, old: PyTree) -> PyTree:
    return jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, old)


def _is_float(x: object) -> bool:
    return isinstance(x, jax.Array) and is_inexact(x)


@jax.jit
def all_finite(tree: PyTree) -> jax.Array:
    """Whether every floating-point array in ``tree`` is finite (one jitted reduction)."""
    leaves = [jnp.isfinite(x).all() for x in jax.tree.leaves(tree) if _is_float(x)]
    return jnp.stack(leaves).all() if leaves else jnp.asarray(True)


def _loss_of(loss_fn: LossFn, static: PyTree) -> Callable[..., Any]:
    """``loss_of(trained, rest, batch, key)``: the loss of the model put back together from
    its floating-point arrays ``trained`` (differentiated), the other arrays ``rest`` and
    ``static``."""
    with_key = takes_key(loss_fn)

    def loss_of(
        trained: PyTree, rest: PyTree, batch: PyTree, key: jax.Array | None
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        return call_loss(loss_fn, eqx.combine(trained, rest, static), batch, key, with_key)

    return loss_of


def trainable(params: PyTree, select: Selector | None = None) -> tuple[PyTree, PyTree]:
    """``(trained, rest)``: the floating-point arrays of ``params`` that ``select`` picks
    (all of them for ``None``): what the gradient and the optimizer see, as
    ``eqx.filter_grad`` differentiates; and the others (frozen arrays, integer counters,
    masks, keys), which pass through the step unchanged. ``select`` is asked about each
    floating-point leaf by its dotted path; under loss scaling (a ``LossScaled`` model) it
    is asked about the model's own leaves, and the scale is always trained.

    Example:
        >>> opt_state = optimizer.init(trainable(params, ax.train.by_path("head"))[0])
    """
    if select is None:
        trained, rest = eqx.partition(params, eqx.is_inexact_array)
        return trained, rest
    if isinstance(params, LossScaled):
        t, r = trainable(params.model, select)
        return LossScaled(t, params.scale, params.good), LossScaled(r, None, None)  # type: ignore[arg-type]  # None: the other side
    spec = jax.tree_util.tree_map_with_path(
        lambda p, x: _decide(select, jax.tree_util.keystr(p, simple=True, separator="."), x),
        params,
        is_leaf=_is_tensor,
    )
    trained, rest = eqx.partition(params, spec)
    return trained, rest


def _is_tensor(x: object) -> bool:
    return isinstance(x, Tensor)


def _decide(select: Selector, path: str, leaf: object) -> bool:
    """Whether the leaf at ``path`` is trained: a floating-point array that ``select``
    picks (it is asked about floating-point leaves only)."""
    array = leaf.array if isinstance(leaf, Tensor) else leaf
    return eqx.is_inexact_array(array) and select(path, leaf)


def check_trainable(where: str, params: PyTree, select: Selector | None) -> None:
    """``ValueError`` when ``select`` leaves nothing to train (at set-up, before any
    step): name what it was given and the model's floating-point leaves."""
    if select is None:
        return
    inner = params.model if isinstance(params, LossScaled) else params
    trained = jax.tree.leaves(trainable(inner, select)[0])
    if trained:
        return
    floating = [p for p, x in leaves_with_paths(inner) if _decide(_ALL, p, x)]
    more = f", ... ({len(floating)} in all)" if len(floating) > 8 else ""
    shown = ", ".join(floating[:8]) + more
    raise ValueError(
        f"{where}: trainable={select} freezes every parameter of the model (it selects none "
        f"of its floating-point leaves: {shown or 'none'}); select the leaves to train by "
        "their dotted path, e.g. trainable=ax.train.by_path('head') or 'blocks.*.attn'"
    )


_ALL = Selector(lambda p, x: True, "all")


#: what an optimizer state handed to a step must fit, and how to make one that does
OPT_STATE_REMEDY = (
    "the optimizer state fits the arrays the step trains (the model's floating-point arrays "
    "that trainable= selects; integer and frozen arrays pass through unchanged): build it "
    "with optimizer.init(eqx.filter(model, eqx.is_inexact_array)) of this optimizer and "
    "model, or leave opt_state out so that the step builds it"
)


def check_opt_state(where: str, optimizer: Optimizer, opt_state: PyTree, trained: PyTree) -> None:
    """``opt_state`` against what ``optimizer.init(trained)`` makes (structure, shapes and
    dtypes, from the shapes only: ``jax.eval_shape``): a ``TypeError`` naming ``where``'s
    ``opt_state`` argument, what it was made for and what it got, or a ``ValueError`` for
    a donated buffer. Run where the state enters: at set-up, and at a jitted step's trace
    (once per new structure, never per step)."""
    want = jax.eval_shape(optimizer.init, trained)
    check_state(
        where,
        "opt_state",
        opt_state,
        want,
        fits="this step's optimizer and model",
        remedy=OPT_STATE_REMEDY,
    )


def make_train_step(
    loss_fn: LossFn,
    optimizer: optax.GradientTransformation,
    static: PyTree,
    *,
    donate: bool = True,
    guard: bool = True,
    trainable: Selection | None = None,
) -> Callable[..., Any]:
    """The jitted step ``(params, opt_state, monitor, batch, key, step) -> (params,
    opt_state, monitor)`` for a model split as ``eqx.partition(model, eqx.is_array)``.

    Only the floating-point arrays of ``params`` are differentiated and updated; integer
    ones pass through unchanged, so the optimizer state is
    ``optimizer.init(eqx.filter(params, eqx.is_inexact_array))`` (a ``TypeError`` says so
    when it was built on the integer arrays too). ``trainable`` (a selector such as
    ``ax.train.by_path("head")``, a pattern string, or a predicate ``(path, leaf) ->
    bool``) narrows that to the floating-point leaves it selects; the others are frozen,
    and the optimizer state is then built on the selected leaves alone.

    ``guard=True``: the monitor records the first step whose loss or global gradient norm
    is not finite, and from then on the parameters and optimizer state are kept as they
    were (a gradient norm and a selection over both trees per step). ``guard=False``: the
    update and the running sums only; a non-finite loss makes the loss sum non-finite.

    ``donate=True`` (default): the step updates ``params``, ``opt_state`` and ``monitor``
    in place (``donate_argnums``; faster on CPU too, ``python -m benchmarks.fit_loop``), so
    the arrays passed in are deleted by the call. Pass copies
    (``jax.tree.map(jnp.copy, params)``) of anything you still need, or ``donate=False``.

    Example:
        >>> params, static = eqx.partition(model, eqx.is_array)
        >>> step = ax.train.make_train_step(loss_fn, opt, static, guard=False)
        >>> mon = ax.train.Monitor.zero(("loss",), guarded=False)
        >>> opt_state = opt.init(eqx.filter(params, eqx.is_inexact_array))
        >>> params, opt_state, mon = step(jax.tree.map(jnp.copy, params), opt_state,
        ...                               mon, (x, y), jax.random.key(0), 0)
    """
    select = None if trainable is None else selector(trainable, "make_train_step: trainable")
    where = "make_train_step's step"
    jitted = jax.jit(
        train_step_fn(loss_fn, optimizer, static, guard=guard, select=select, where=where),
        donate_argnums=(0, 1, 2) if donate else (),
    )
    return StateChecked(jitted, where, ("params", "opt_state", "monitor"))


#: the remedy for state a donating step deleted
DONATED_REMEDY = (
    "a donating step (donate=True) deletes the arrays it is given: pass the state the "
    "previous step returned, copies (jax.tree.map(jnp.copy, tree)) of what you still need, "
    "or build the step with donate=False"
)


class StateChecked:
    """A jitted step whose failure is translated after the fact: when the call raises, the
    state arguments (``names``, the first positional ones) are checked for donated buffers,
    and one is reported by its argument with the remedy; a successful call does no host work
    of its own. ``lower`` is the jitted function's."""

    def __init__(self, jitted: Any, where: str, names: tuple[str, ...]) -> None:
        self._jitted, self._where, self._names = jitted, where, names
        self.lower = jitted.lower

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._jitted(*args, **kwargs)
        except (ValueError, RuntimeError) as e:
            for name, tree in zip(self._names, args, strict=False):
                try:
                    check_not_donated(self._where, name, tree, DONATED_REMEDY)
                except ValueError as named:
                    raise named from e
            raise


def make_flat_train_step(
    loss_fn: LossFn,
    optimizer: Optimizer,
    static: PyTree,
    treedef: Any,  # a jax.tree_util.PyTreeDef: jaxlib has no stub pyright can use
    *,
    donate: bool = True,
    guard: bool = True,
    out_shardings: list[jax.sharding.Sharding] | None = None,
    carry_step: bool = False,
    select: Selector | None = None,
) -> Callable[..., Any]:
    """:func:`make_train_step` on the leaves of ``(params, opt_state, monitor)``: the jitted
    ``(leaves, batch, key, step) -> leaves`` for that ``treedef``. A list of arrays crosses
    ``jax.jit`` without the Python flatten and unflatten of every Equinox module in the
    model and the optimizer state, which ``fit``'s loop would otherwise pay on every step.
    ``out_shardings`` (one per leaf) pins where the updated state lives (``fit`` under a
    :class:`Parallel`: the parameter rules).

    ``carry_step=True``: the step number rides on the device as one more leaf, an int32
    scalar after the state's leaves, which each call increments: the jitted function is
    ``(leaves, batch, key) -> leaves``, and no Python number crosses to the device per call
    (:class:`TrainStep`). ``select``: the trained leaves (:func:`trainable`)."""
    step = train_step_fn(loss_fn, optimizer, static, guard=guard, select=select)

    def flat(
        leaves: list[jax.Array], batch: PyTree, key: jax.Array, step_no: jax.Array
    ) -> list[jax.Array]:
        params, opt_state, mon = jax.tree.unflatten(treedef, leaves)
        return jax.tree.leaves(step(params, opt_state, mon, batch, key, step_no))

    def counted(leaves: list[jax.Array], batch: PyTree, key: jax.Array) -> list[jax.Array]:
        step_no = leaves[-1]
        return [*flat(leaves[:-1], batch, key, step_no), step_no + 1]

    return jax.jit(
        counted if carry_step else flat,
        donate_argnums=(0,) if donate else (),
        out_shardings=out_shardings,
    )


def train_step_fn(
    loss_fn: LossFn,
    optimizer: Optimizer,
    static: PyTree,
    *,
    guard: bool,
    select: Selector | None = None,
    where: str = "train step",
) -> Callable[..., tuple[PyTree, PyTree, Monitor]]:
    """The step of :func:`make_train_step` before ``jax.jit``."""
    with_key = takes_key(loss_fn)
    loss_of = _loss_of(loss_fn, static)

    def update(
        params: PyTree, opt_state: PyTree, batch: PyTree, key: jax.Array, step_no: jax.Array
    ) -> tuple[jax.Array, dict[str, jax.Array], PyTree, PyTree, PyTree]:
        return update_step(
            loss_of, optimizer, with_key, params, opt_state, batch, key, step_no, select, where
        )

    def fast(
        params: PyTree,
        opt_state: PyTree,
        mon: Monitor,
        batch: PyTree,
        key: jax.Array,
        step_no: jax.Array,
    ) -> tuple[PyTree, PyTree, Monitor]:
        loss, metrics, _, new_params, new_opt = update(params, opt_state, batch, key, step_no)
        check_metric_names("fit", mon.names, metrics)
        sums = {"loss": mon.sums["loss"] + loss} | {n: mon.sums[n] + v for n, v in metrics.items()}
        mon = Monitor(
            sums, mon.count + 1.0, mon.bad_step, mon.bad_loss, mon.bad_grad_norm, mon.names
        )
        return new_params, new_opt, mon

    def guarded(
        params: PyTree,
        opt_state: PyTree,
        mon: Monitor,
        batch: PyTree,
        key: jax.Array,
        step_no: jax.Array,
    ) -> tuple[PyTree, PyTree, Monitor]:
        loss, metrics, grads, new_params, new_opt = update(params, opt_state, batch, key, step_no)
        check_metric_names("fit", mon.names, metrics)
        if mon.bad_step is None or mon.bad_loss is None or mon.bad_grad_norm is None:
            raise ValueError("the guarded step needs a Monitor.zero(names, guarded=True)")
        gnorm = optax.tree.norm(grads)
        finite = jnp.isfinite(loss) & jnp.isfinite(gnorm)
        ok = finite & (mon.bad_step < 0)
        first_bad = (~finite) & (mon.bad_step < 0)
        sums = {"loss": mon.sums["loss"] + jnp.where(ok, loss, 0.0)}
        sums |= {n: mon.sums[n] + jnp.where(ok, v, 0.0) for n, v in metrics.items()}
        mon = Monitor(
            sums,
            mon.count + ok.astype(jnp.float32),
            jnp.where(first_bad, (step_no + 1).astype(jnp.int32), mon.bad_step),
            jnp.where(first_bad, loss.astype(jnp.float32), mon.bad_loss),
            jnp.where(first_bad, gnorm.astype(jnp.float32), mon.bad_grad_norm),
            mon.names,
        )
        return _keep_if(ok, new_params, params), _keep_if(ok, new_opt, opt_state), mon

    return guarded if guard else fast


def update_step(
    loss_of: Callable[..., Any],
    optimizer: Optimizer,
    with_key: bool,
    params: PyTree,
    opt_state: PyTree,
    batch: PyTree,
    key: jax.Array,
    step_no: jax.Array,
    select: Selector | None = None,
    where: str = "train step",
) -> tuple[jax.Array, dict[str, jax.Array], PyTree, PyTree, PyTree]:
    """One update: ``(loss, metrics, grads, new_params, new_opt_state)``. Only the
    floating-point arrays that ``select`` picks are differentiated and updated
    (:func:`trainable`)."""
    k = jax.random.fold_in(key, step_no) if with_key else None
    trained, rest = trainable(params, select)
    check_opt_state(where, optimizer, opt_state, trained)
    (loss, metrics), grads = jax.value_and_grad(loss_of, has_aux=True)(trained, rest, batch, k)
    updates: PyTree  # a LossScaled under loss scaling: a tree optax applies alike
    updates, new_opt = optimizer.update(grads, opt_state, trained)
    return loss, metrics, grads, eqx.combine(optax.apply_updates(trained, updates), rest), new_opt


def make_replay_step(
    loss_fn: LossFn, optimizer: Optimizer, static: PyTree, select: Selector | None = None
) -> Callable[..., Any]:
    """The jitted checking step ``(params, opt_state, batch, key, step) -> (params,
    opt_state, loss, grad_norm, finite)``: the update of :func:`make_train_step`, the
    global gradient norm, and whether the new parameters and optimizer state are all
    finite. ``fit`` runs it (without donation) to find the first bad step of a replay."""
    with_key = takes_key(loss_fn)
    loss_of = _loss_of(loss_fn, static)

    def step(
        params: PyTree, opt_state: PyTree, batch: PyTree, key: jax.Array, step_no: jax.Array
    ) -> tuple[Any, Any, jax.Array, jax.Array, jax.Array]:
        loss, _, grads, new_params, new_opt = update_step(
            loss_of, optimizer, with_key, params, opt_state, batch, key, step_no, select
        )
        finite = all_finite((new_params, new_opt))
        return (
            new_params,
            new_opt,
            loss.astype(jnp.float32),
            optax.tree.norm(grads).astype(jnp.float32),
            finite,
        )

    return jax.jit(step)


def batch_size(batch: PyTree, batch_axis: type[Axis], where: str = "evaluate") -> int:
    """The size of ``batch_axis`` in the Tensors of ``batch`` (the examples it holds).

    Raises:
        ValueError: no Tensor of the batch has that axis, or two give it different sizes.

    Example:
        >>> batch_size((x, y), Batch)   # x: Tensor[F32, Time=20, Batch=8, Embed=4]
        8
    """
    tensors = [
        t
        for t in jax.tree.leaves(batch, is_leaf=lambda t: isinstance(t, Tensor))
        if isinstance(t, Tensor)
    ]
    sizes = {
        int(t.shape[-len(t.axes) :][t.axes.index(batch_axis)])
        for t in tensors
        if batch_axis in t.axes
    }
    if len(sizes) == 1:
        return sizes.pop()
    shown = ", ".join(
        _show_leaf(x) for x in jax.tree.leaves(batch, is_leaf=lambda t: isinstance(t, Tensor))
    )
    name = axis_name(batch_axis)
    if not sizes:
        raise ValueError(
            f"{where}: no Tensor of the batch has the batch axis {name}, which weights each "
            f"batch's mean by its number of examples (the batch holds {shown or 'no arrays'}); "
            f"name the batch axis {name} in the data, or pass batch_axis=<your batch axis>"
        )
    raise ValueError(
        f"{where}: the batch's Tensors give the batch axis {name} different sizes "
        f"({', '.join(map(str, sorted(sizes)))}) in {shown}; every Tensor of a batch must "
        "hold the same examples"
    )


def _show_leaf(x: AnyTensor | ArrayLike) -> str:
    if isinstance(x, Tensor):
        return describe(x) if x.array.ndim == len(x.axes) else repr(x)
    return f"an array of shape {tuple(jnp.shape(x))}"


def make_eval_step(
    loss_fn: LossFn, static: PyTree, batch_axis: type[Axis] = Batch
) -> Callable[..., Any]:
    """The jitted ``(params, sums, batch) -> sums`` adding the loss and metrics weighted by
    the batch's number of examples: the size of ``batch_axis`` in its Tensors (checked
    while tracing, :func:`batch_size`), whatever the axis's position (time-major data)."""
    return jax.jit(_eval_fn(loss_fn, static, batch_axis))


def make_checked_eval_step(
    loss_fn: LossFn, static: PyTree, batch_axis: type[Axis] = Batch
) -> CheckedEvalStep:
    """:func:`make_eval_step`'s step traced inside ``ax.checkify_indices``: the jitted
    ``(params, sums, batch) -> (error, sums)``, so that ``evaluate`` reports an id or label
    out of range in the data (which the plain step would clamp) once the pass is done,
    with no host sync per batch."""
    return CheckedEvalStep(_eval_fn(loss_fn, static, batch_axis))


class CheckedEvalStep:
    """The evaluation step with the index checks on (``(params, sums, batch) -> (error,
    sums)``), or off (``error`` ``None``) for parameters placed over several devices:
    checkify cannot slice sharded labels, so there traced ids keep the clamp rule. Decided
    once per parameter tree (by identity: an ``evaluate`` pass calls it with one)."""

    def __init__(self, fn: Callable[..., dict[str, jax.Array]]) -> None:
        self._checked = jax.jit(checkify_indices(fn))
        self._plain = jax.jit(fn)
        self._params_id: int | None = None
        self._sharded = False

    def __call__(self, params: PyTree, sums: dict[str, jax.Array], batch: PyTree) -> Any:
        if id(params) != self._params_id:
            self._params_id, self._sharded = id(params), _spans_devices(params)
        if self._sharded:
            return None, self._plain(params, sums, batch)
        return self._checked(params, sums, batch)


def _spans_devices(tree: PyTree) -> bool:
    """Whether an array of ``tree`` is placed over more than one device."""
    for leaf in jax.tree.leaves(tree):
        sharding = getattr(leaf, "sharding", None)
        if sharding is not None and len(sharding.device_set) > 1:
            return True
    return False


def _eval_fn(
    loss_fn: LossFn, static: PyTree, batch_axis: type[Axis]
) -> Callable[..., dict[str, jax.Array]]:
    with_key = takes_key(loss_fn)

    def step(params: PyTree, sums: dict[str, jax.Array], batch: PyTree) -> dict[str, jax.Array]:
        size = batch_size(batch, batch_axis)
        if size == 0:  # the empty-data rule of fit and Loader: an error, never a NaN mean
            raise ValueError(
                f"evaluate: a batch has no examples ({axis_name(batch_axis)}=0): its mean "
                "loss is undefined; leave empty batches out of the data"
            )
        loss, metrics = call_loss(loss_fn, eqx.combine(params, static), batch, None, with_key)
        check_metric_names("evaluate", sums, metrics)
        n = jnp.asarray(size, jnp.float32)
        out = {"loss": sums["loss"] + n * loss, "count": sums["count"] + n}
        return out | {k: sums[k] + n * v for k, v in metrics.items()}

    return step


def metric_names(loss_fn: LossFn, model: PyTree, batch: PyTree) -> tuple[str, ...]:
    """``("loss", *metrics)``, found by tracing ``loss_fn`` abstractly (no computation)."""
    with_key = takes_key(loss_fn)
    key = jax.random.key(0) if with_key else None
    _, metrics = eqx.filter_eval_shape(
        lambda m, b: call_loss(loss_fn, m, b, key, with_key), model, batch
    )
    return ("loss", *metrics)
