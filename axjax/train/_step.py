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
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from ..core import AxisError, NonFiniteReport, Tensor
from ..core._internal import describe

__all__ = [
    "Monitor",
    "TrainingDiverged",
    "all_finite",
    "call_loss",
    "make_eval_step",
    "make_flat_train_step",
    "make_replay_step",
    "make_train_step",
    "train_step_fn",
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
        model: Any = None,
        opt_state: Any = None,
        report: NonFiniteReport | None = None,
    ) -> None:
        self.step: int = step
        self.loss: float = loss
        self.grad_norm: float = grad_norm
        self.model: Any = model
        self.opt_state: Any = opt_state
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
        self, extra: Any
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


def _array(x: Any, what: str) -> jax.Array:
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
    loss_fn: LossFn, model: Any, batch: Any, key: Any, with_key: bool
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
    return _array(loss, "loss"), {k: _array(v, f"metric {k!r}") for k, v in metrics.items()}


def _keep_if(ok: jax.Array, new: Any, old: Any) -> Any:
    return jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, old)


def _is_float(x: Any) -> bool:
    return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jnp.inexact)


@jax.jit
def all_finite(tree: Any) -> jax.Array:
    """Whether every floating-point array in ``tree`` is finite (one jitted reduction)."""
    leaves = [jnp.isfinite(x).all() for x in jax.tree.leaves(tree) if _is_float(x)]
    return jnp.stack(leaves).all() if leaves else jnp.asarray(True)


def _loss_of(loss_fn: LossFn, static: Any) -> Callable[..., Any]:
    with_key = takes_key(loss_fn)

    def loss_of(params: Any, batch: Any, key: Any) -> tuple[jax.Array, dict[str, jax.Array]]:
        return call_loss(loss_fn, eqx.combine(params, static), batch, key, with_key)

    return loss_of


def make_train_step(
    loss_fn: LossFn,
    optimizer: optax.GradientTransformation,
    static: Any,
    *,
    donate: bool = True,
    guard: bool = True,
) -> Callable[..., Any]:
    """The jitted step ``(params, opt_state, monitor, batch, key, step) -> (params,
    opt_state, monitor)`` for a model split as ``eqx.partition(model, eqx.is_array)``.

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
        >>> params, opt_state, mon = step(jax.tree.map(jnp.copy, params), opt.init(params),
        ...                               mon, (x, y), jax.random.key(0), 0)
    """
    return jax.jit(
        train_step_fn(loss_fn, optimizer, static, guard=guard),
        donate_argnums=(0, 1, 2) if donate else (),
    )


def make_flat_train_step(
    loss_fn: LossFn,
    optimizer: optax.GradientTransformation,
    static: Any,
    treedef: Any,
    *,
    donate: bool = True,
    guard: bool = True,
    out_shardings: Any = None,
) -> Callable[..., Any]:
    """:func:`make_train_step` on the leaves of ``(params, opt_state, monitor)``: the jitted
    ``(leaves, batch, key, step) -> leaves`` for that ``treedef``. A list of arrays crosses
    ``jax.jit`` without the Python flatten and unflatten of every Equinox module in the
    model and the optimizer state, which ``fit``'s loop would otherwise pay on every step.
    ``out_shardings`` (one per leaf) pins where the updated state lives (``fit`` under a
    :class:`Parallel`: the parameter rules)."""
    step = train_step_fn(loss_fn, optimizer, static, guard=guard)

    def flat(
        leaves: list[jax.Array], batch: Any, key: jax.Array, step_no: jax.Array
    ) -> list[jax.Array]:
        params, opt_state, mon = jax.tree.unflatten(treedef, leaves)
        return jax.tree.leaves(step(params, opt_state, mon, batch, key, step_no))

    return jax.jit(flat, donate_argnums=(0,) if donate else (), out_shardings=out_shardings)


def train_step_fn(
    loss_fn: LossFn, optimizer: optax.GradientTransformation, static: Any, *, guard: bool
) -> Callable[..., tuple[Any, Any, Monitor]]:
    """The step of :func:`make_train_step` before ``jax.jit``."""
    with_key = takes_key(loss_fn)
    loss_of = _loss_of(loss_fn, static)

    def update(
        params: Any, opt_state: Any, batch: Any, key: jax.Array, step_no: jax.Array
    ) -> tuple[jax.Array, dict[str, jax.Array], Any, Any, Any]:
        k = jax.random.fold_in(key, step_no) if with_key else None
        (loss, metrics), grads = jax.value_and_grad(loss_of, has_aux=True)(params, batch, k)
        updates, new_opt = optimizer.update(grads, opt_state, params)
        return loss, metrics, grads, optax.apply_updates(params, updates), new_opt

    def fast(
        params: Any, opt_state: Any, mon: Monitor, batch: Any, key: jax.Array, step_no: jax.Array
    ) -> tuple[Any, Any, Monitor]:
        loss, metrics, _, new_params, new_opt = update(params, opt_state, batch, key, step_no)
        sums = {"loss": mon.sums["loss"] + loss} | {n: mon.sums[n] + v for n, v in metrics.items()}
        mon = Monitor(
            sums, mon.count + 1.0, mon.bad_step, mon.bad_loss, mon.bad_grad_norm, mon.names
        )
        return new_params, new_opt, mon

    def guarded(
        params: Any, opt_state: Any, mon: Monitor, batch: Any, key: jax.Array, step_no: jax.Array
    ) -> tuple[Any, Any, Monitor]:
        loss, metrics, grads, new_params, new_opt = update(params, opt_state, batch, key, step_no)
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


def make_replay_step(
    loss_fn: LossFn, optimizer: optax.GradientTransformation, static: Any
) -> Callable[..., Any]:
    """The jitted checking step ``(params, opt_state, batch, key, step) -> (params,
    opt_state, loss, grad_norm, finite)``: the update of :func:`make_train_step`, the
    global gradient norm, and whether the new parameters and optimizer state are all
    finite. ``fit`` runs it (without donation) to find the first bad step of a replay."""
    with_key = takes_key(loss_fn)
    loss_of = _loss_of(loss_fn, static)

    def step(
        params: Any, opt_state: Any, batch: Any, key: jax.Array, step_no: jax.Array
    ) -> tuple[Any, Any, jax.Array, jax.Array, jax.Array]:
        k = jax.random.fold_in(key, step_no) if with_key else None
        (loss, _), grads = jax.value_and_grad(loss_of, has_aux=True)(params, batch, k)
        updates, new_opt = optimizer.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        finite = all_finite((new_params, new_opt))
        return (
            new_params,
            new_opt,
            loss.astype(jnp.float32),
            optax.tree.norm(grads).astype(jnp.float32),
            finite,
        )

    return jax.jit(step)


def make_eval_step(loss_fn: LossFn, static: Any) -> Callable[..., Any]:
    """The jitted ``(params, sums, batch) -> sums`` adding batch-size-weighted metrics."""
    with_key = takes_key(loss_fn)

    def step(params: Any, sums: dict[str, jax.Array], batch: Any) -> dict[str, jax.Array]:
        loss, metrics = call_loss(loss_fn, eqx.combine(params, static), batch, None, with_key)
        n = jnp.asarray(jax.tree.leaves(batch)[0].shape[0], jnp.float32)
        out = {"loss": sums["loss"] + n * loss, "count": sums["count"] + n}
        return out | {k: sums[k] + n * v for k, v in metrics.items()}

    return jax.jit(step)


def metric_names(loss_fn: LossFn, model: Any, batch: Any) -> tuple[str, ...]:
    """``("loss", *metrics)``, found by tracing ``loss_fn`` abstractly (no computation)."""
    with_key = takes_key(loss_fn)
    key = jax.random.key(0) if with_key else None
    _, metrics = eqx.filter_eval_shape(
        lambda m, b: call_loss(loss_fn, m, b, key, with_key), model, batch
    )
    return ("loss", *metrics)
