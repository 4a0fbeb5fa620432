"""``fit``: the training loop (optax, one jit step, logs, checkpoints, early stopping)."""

from __future__ import annotations

import dataclasses
import math
import os
import time
import warnings
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, NoReturn

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from tqdm import tqdm

from ._loader import BatchSource, as_source
from ._log import MetricsLog, plot_history
from ._manager import Checkpoints
from ._step import (
    Monitor,
    TrainingDiverged,
    all_finite,
    make_eval_step,
    make_replay_step,
    make_train_step,
    metric_names,
)

__all__ = ["EarlyStopping", "FitResult", "Guard", "evaluate", "fit"]

#: how ``fit`` guards against NaN/Inf (see :func:`fit`)
Guard = Literal["replay", "step", "off"]
_GUARDS: tuple[Guard, ...] = ("replay", "step", "off")


@dataclasses.dataclass
class EarlyStopping:
    """Stop when ``metric`` has not improved for ``patience`` evaluations (epochs).

    Args:
        metric: a history column, e.g. ``"eval_loss"`` or ``"eval_accuracy"``.
        patience: evaluations without improvement before stopping.
        mode: ``"min"`` or ``"max"``; default ``"min"`` for losses, ``"max"`` otherwise.
        min_delta: the smallest change that counts as an improvement.
        restore_best: return the parameters of the best evaluation, not the last.

    Example:
        >>> ax.train.fit(..., early_stopping=ax.train.EarlyStopping("eval_accuracy", 2))
    """

    metric: str = "eval_loss"
    patience: int = 3
    mode: Literal["min", "max"] | None = None
    min_delta: float = 0.0
    restore_best: bool = True
    best: float | None = None
    wait: int = 0

    def update(self, value: float) -> tuple[bool, bool]:
        """Record a value; return ``(improved, stop)``."""
        sign = -1.0 if (self.mode or ("min" if "loss" in self.metric else "max")) == "min" else 1.0
        if self.best is None or sign * (value - self.best) > self.min_delta:
            self.best, self.wait = value, 0
            return True, False
        self.wait += 1
        return False, self.wait >= self.patience

    def state(self) -> dict[str, Any]:
        return {"best": self.best, "wait": self.wait}


class FitResult(NamedTuple):
    """What :func:`fit` returns."""

    model: Any
    opt_state: Any
    step: int
    history: list[dict[str, Any]]
    stopped_early: bool
    seconds: float


def evaluate(model: Any, loss_fn: Callable[..., Any], data: Any,
             _step: Callable[..., Any] | None = None) -> dict[str, float]:
    """Mean loss and metrics of ``loss_fn`` over all batches of ``data`` (weighted by size).

    The model is put in inference mode first (``eqx.nn.inference_mode``: dropout off), and
    a ``loss_fn`` with a ``key`` parameter gets ``key=None``.

    Example:
        >>> ax.train.evaluate(model, loss_fn, test_loader)
        {'loss': 0.071, 'accuracy': 0.978}
    """
    model = eqx.nn.inference_mode(model)
    params, static = eqx.partition(model, eqx.is_array)
    step = _step or make_eval_step(loss_fn, static)
    sums: dict[str, jax.Array] | None = None
    names: tuple[str, ...] = ()
    for batch in as_source(data).epoch(0):
        if sums is None:
            names = metric_names(loss_fn, model, batch)
            sums = {n: jnp.zeros((), jnp.float32) for n in (*names, "count")}
        sums = step(params, sums, batch)
    if sums is None:
        return {}
    host = jax.device_get(sums)
    return {k: float(host[k] / host["count"]) for k in names}


def _position(epoch: int, batch: int, per_epoch: int) -> tuple[int, int]:
    return (epoch + 1, 0) if batch >= per_epoch else (epoch, batch)


class _Snapshot(NamedTuple):
    """The last state checked finite, and where the data stood then."""

    params: Any
    opt_state: Any
    step: int
    epoch: int
    batch: int


def fit(
    model: Any,
    optimizer: optax.GradientTransformation,
    loss_fn: Callable[..., Any],
    data: BatchSource | Any,
    *,
    epochs: int = 1,
    max_steps: int | None = None,
    key: jax.Array | None = None,
    eval_data: Any = None,
    log_every: int = 100,
    logdir: str | os.PathLike[str] | None = None,
    checkpoints: Checkpoints | None = None,
    resume: bool = False,
    early_stopping: EarlyStopping | None = None,
    progress: bool = True,
    guard: Guard = "replay",
) -> FitResult:
    """Train ``model`` with ``optimizer`` on ``loss_fn`` over ``data``.

    Args:
        model: an Equinox module (fields are Tensors, arrays, or static config).
        optimizer: any ``optax.GradientTransformation``.
        loss_fn: ``loss_fn(model, *batch)`` returning a scalar loss, or
            ``(loss, {"accuracy": ..., ...})``; with a ``key`` parameter it also gets
            ``key=fold_in(key, step)`` in training and ``key=None`` in evaluation.
        data: a :class:`Loader` (or anything with ``epoch(e, start)`` and ``len`` that gives
            the same batches each time it is asked), or a list of batches used every epoch.
        epochs: passes over ``data``; ``max_steps`` stops earlier (total updates).
        key: the run's PRNG key (default ``jax.random.key(0)``).
        eval_data: evaluated after every epoch (``eval_*`` columns).
        log_every: steps between log rows; the only host syncs happen there.
        logdir: writes ``metrics.jsonl``, ``metrics.csv`` and ``curves.png``.
        checkpoints: saved every ``checkpoints.every`` steps, after each epoch and at the end.
        resume: continue from the newest checkpoint in ``checkpoints``, if any.
        early_stopping: an :class:`EarlyStopping` rule checked after each evaluation.
        progress: show a tqdm progress bar with the live loss and metrics.
        guard: what a NaN or infinite value does.

            - ``"replay"`` (default): the step is as fast as a hand-written one. At each log
              point, epoch end and checkpoint, ``fit`` checks that the loss sum, parameters
              and optimizer state are finite, and keeps that state (a reference on CPU, a
              device copy where the step donates its buffers). If something is not finite it
              replays the steps since then (same batches, same keys) with a checking step
              and raises the ``TrainingDiverged`` that ``"step"`` would raise (two edge
              cases differ: docs/training.md, "NaN/Inf guard").
            - ``"step"``: every step computes the gradient norm and keeps the old
              parameters and optimizer state when it or the loss is not finite (slower, no
              extra memory).
            - ``"off"``: no check; NaN goes into the model, the logs and checkpoints.

    Raises:
        TrainingDiverged: the loss, the gradient (or, with ``guard="replay"``, the updated
            parameters or optimizer state) became NaN/Inf; says at which step, and keeps the
            model and optimizer state from before it (``error.model``, ``error.opt_state``).
        ValueError: an unknown ``guard``, ``log_every`` below 1, or ``early_stopping``
            without ``eval_data``.

    Example:
        >>> result = ax.train.fit(model, optax.adam(1e-3), loss_fn, train, epochs=10,
        ...                       eval_data=test, logdir="runs/mnist")
        >>> result.history[-1]["eval_accuracy"]
        0.981
    """
    if guard not in _GUARDS:
        raise ValueError(f"fit: guard must be 'replay' (check at log points, replay on NaN), "
                         f"'step' (check every step) or 'off', got {guard!r}")
    if log_every < 1:
        raise ValueError(f"fit: log_every must be at least 1, got {log_every}")
    if early_stopping is not None and eval_data is None:
        raise ValueError("fit: early_stopping compares evaluations; pass eval_data too")
    source = as_source(data)
    per_epoch = len(source)
    key = jax.random.key(0) if key is None else key
    opt_state = optimizer.init(eqx.filter(model, eqx.is_array))
    step, epoch0, batch0, elapsed0 = 0, 0, 0, 0.0
    if resume and checkpoints is not None and checkpoints.latest() is not None:
        r = checkpoints.restore({"model": model, "opt_state": opt_state, "key": key})
        model, opt_state, key = r.tree["model"], r.tree["opt_state"], r.tree["key"]
        step, epoch0, batch0 = r.step, r.metadata["epoch"], r.metadata["batch"]
        elapsed0 = r.metadata.get("seconds", 0.0)
        if early_stopping is not None and r.metadata.get("early_stopping"):
            early_stopping.best = r.metadata["early_stopping"]["best"]
            early_stopping.wait = r.metadata["early_stopping"]["wait"]
    params, static = eqx.partition(model, eqx.is_array)
    donate = jax.default_backend() != "cpu"
    # the first snapshot: never donated (the step gets copies when it donates)
    snap = _Snapshot(params, opt_state, step, epoch0, batch0) if guard == "replay" else None
    if donate:  # the caller's arrays must survive the donation of the step's inputs
        params, opt_state = jax.tree.map(jnp.copy, (params, opt_state))
    train_step = make_train_step(loss_fn, optimizer, static, donate=donate,
                                 guard=guard == "step")
    replay_step: Callable[..., Any] | None = None  # built on the first replay only
    eval_static = eqx.partition(eqx.nn.inference_mode(model), eqx.is_array)[1]
    eval_step = make_eval_step(loss_fn, eval_static) if eval_data is not None else None
    log = MetricsLog(logdir, resume_at=step) if logdir is not None else None
    history: list[dict[str, Any]] = log.rows if log is not None else []
    best = None
    mon: Monitor | None = None
    t0 = time.perf_counter() - elapsed0
    stopped_early = False
    bar: Any = None

    def record(row: dict[str, Any]) -> None:
        if log is None:
            history.append(row)
        else:
            log.append(row)

    last: dict[str, float] = {}

    def halt(error: TrainingDiverged) -> NoReturn:
        if bar is not None:
            bar.close()
        finish()
        raise error

    def replay() -> tuple[Any, Any]:
        """Run the steps since the snapshot again, checking each; raise at the first bad
        one. Return the replayed state if none is bad (a non-deterministic device)."""
        nonlocal replay_step
        assert snap is not None
        if replay_step is None:
            replay_step = make_replay_step(loss_fn, optimizer, static)
        p, s = snap.params, snap.opt_state
        batches = source.epoch(snap.epoch, snap.batch)
        for k, batch in zip(range(snap.step, step), batches, strict=False):
            new_p, new_s, loss, gnorm, finite = replay_step(p, s, batch, key, k)
            loss, gnorm, finite = jax.device_get((loss, gnorm, finite))
            if not (math.isfinite(loss) and math.isfinite(gnorm) and finite):
                halt(TrainingDiverged(k + 1, float(loss), float(gnorm),
                                      model=eqx.combine(p, static), opt_state=s))
            p, s = new_p, new_s
        warnings.warn(f"fit: steps {snap.step + 1}-{step} left a non-finite loss or state, "
                      "but replaying them gave finite values throughout (a non-deterministic "
                      "computation?); training goes on from the replayed state", stacklevel=3)
        return p, s

    def check(epoch: int, i: int) -> dict[str, float]:
        """One host sync: the monitor's means, and whether the state is good. ``"step"``:
        raise at a recorded bad step. ``"replay"``: replay when the loss sum or the state is
        not finite, else keep the state as the snapshot."""
        nonlocal params, opt_state, snap, mon
        assert mon is not None
        flag = all_finite((params, opt_state)) if guard == "replay" else None
        means, bad, finite = mon.read_with(flag)
        if guard == "step" and bad is not None:
            halt(TrainingDiverged(*bad, model=eqx.combine(params, static), opt_state=opt_state))
        if guard == "replay":
            if not (finite and math.isfinite(means.get("loss", 0.0))):
                params, opt_state = replay()
                means, mon = {}, mon.reset()  # the sums held the discarded run's values
            kept = jax.tree.map(jnp.copy, (params, opt_state)) if donate else (params, opt_state)
            e, b = _position(epoch, i, per_epoch)
            snap = _Snapshot(kept[0], kept[1], step, e, b)
        return means

    def flush_train(epoch: int, i: int) -> dict[str, float]:
        nonlocal mon, last
        if mon is None:
            return last
        means = check(epoch, i)
        if means:
            record({"step": step, "epoch": round(epoch + i / per_epoch, 4),
                    "time": round(time.perf_counter() - t0, 3)}
                   | {f"train_{k}": v for k, v in means.items()})
            if bar is not None:
                bar.set_postfix({k: f"{v:.4g}" for k, v in means.items()}, refresh=False)
        mon = mon.reset()
        last = means or last
        return last

    def save(epoch: int, batch: int, checked: bool) -> None:
        if checkpoints is None:
            return
        if not checked and guard != "off" and mon is not None:
            check(epoch, batch)  # never save a non-finite state, nor one a bad step froze
        e, b = _position(epoch, batch, per_epoch)
        meta = {"epoch": e, "batch": b, "seconds": time.perf_counter() - t0,
                "early_stopping": early_stopping.state() if early_stopping else None}
        state = {"model": eqx.combine(params, static), "opt_state": opt_state, "key": key}
        checkpoints.save(step, state, meta)

    def finish() -> None:
        if log is not None:
            log.flush()
            if history:
                plot_history(history, log.logdir / "curves.png")

    epoch = epoch0
    done = max_steps is not None and step >= max_steps
    while epoch < epochs and not done:
        bar = tqdm(total=per_epoch, initial=batch0, desc=f"epoch {epoch + 1}/{epochs}",
                   disable=not progress, dynamic_ncols=True, mininterval=0.5)
        i = batch0
        for batch in source.epoch(epoch, batch0):
            if mon is None:
                names = metric_names(loss_fn, eqx.combine(params, static), batch)
                mon = Monitor.zero(names, guarded=guard == "step")
            params, opt_state, mon = train_step(params, opt_state, mon, batch, key, step)
            step, i = step + 1, i + 1
            bar.update(1)
            if step % log_every == 0:
                flush_train(epoch, i)
            if checkpoints is not None and checkpoints.every and step % checkpoints.every == 0 \
                    and i < per_epoch:
                save(epoch, i, checked=step % log_every == 0)
            if max_steps is not None and step >= max_steps:
                done = True
                break
        train = flush_train(epoch, i)
        bar.close()
        batch0 = 0
        summary = f"epoch {epoch + 1}/{epochs}: step {step}"
        summary += "".join(f", train {k} {v:.4g}" for k, v in train.items())
        if eval_step is not None and (i >= per_epoch or done):
            ev = evaluate(eqx.combine(params, static), loss_fn, eval_data, eval_step)
            record({"step": step, "epoch": round(epoch + i / per_epoch, 4),
                    "time": round(time.perf_counter() - t0, 3)}
                   | {f"eval_{k}": v for k, v in ev.items()})
            summary += "".join(f", eval {k} {v:.4g}" for k, v in ev.items())
            if early_stopping is not None:
                name = early_stopping.metric.removeprefix("eval_")
                if name not in ev:
                    raise ValueError(f"EarlyStopping: the evaluation reports no "
                                     f"{early_stopping.metric!r}; it has "
                                     f"{', '.join('eval_' + k for k in ev)}")
                value = ev[name]
                improved, stop = early_stopping.update(value)
                if improved and early_stopping.restore_best:
                    best = jax.tree.map(jnp.copy, params) if donate else params
                if stop:
                    stopped_early = done = True
                    summary += f" (early stop: no better {early_stopping.metric} for " \
                               f"{early_stopping.patience} evaluations)"
        if progress:
            tqdm.write(summary + f" [{time.perf_counter() - t0:.1f} s]")
        save(epoch, i, checked=True)
        finish()
        epoch = epoch + 1 if i >= per_epoch else epoch
    if stopped_early and best is not None:
        params = best
    return FitResult(eqx.combine(params, static), opt_state, step, history, stopped_early,
                     time.perf_counter() - t0)
