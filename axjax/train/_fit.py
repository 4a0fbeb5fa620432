"""``fit``: the training loop (optax, one jit step, logs, checkpoints, early stopping)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import warnings
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from ..core import Axis
from ..core._internal import (
    PyTree,
    block_until_ready,
    check_axis_label,
)
from ..nn import Policy, Selector
from ..nn._internal import Selection
from ..parallel import Parallel
from ..parallel._internal import queue_bound
from ._axes import Batch
from ._early_stopping import EarlyStopping
from ._fit_checkpoint import FitCheckpoints, Schedule, start_run
from ._fit_log import FitLog
from ._guard import GUARDS, FlatSteps, Guard, NanGuard
from ._loader import BatchSource, as_source
from ._loggers import Logger, check_loggers
from ._manager import Checkpoints
from ._precision import Optimizer, check_guard
from ._run_state import RunState, copy_tree
from ._setup import Prepared, prepare
from ._step import (
    Monitor,
    TrainingDiverged,
    all_finite,
    make_checked_eval_step,
    make_flat_train_step,
    make_replay_step,
    metric_names,
)

__all__ = ["FitResult", "Guard", "evaluate", "fit"]

M = TypeVar("M")


class FitResult(NamedTuple, Generic[M]):
    """What :func:`fit` returns: ``model`` has the type of the model given to it."""

    model: M
    opt_state: PyTree
    step: int
    history: list[dict[str, Any]]
    stopped_early: bool
    seconds: float


def batch_axis_of(data: object, batch_axis: type[Axis] | None) -> type[Axis]:
    """``batch_axis`` if given, else the first of a :class:`Loader`'s ``axes`` (its batch
    axis), else :class:`Batch`."""
    if batch_axis is not None:
        return check_axis_label(batch_axis, "evaluate: batch_axis")
    axes = getattr(data, "axes", None)
    if isinstance(axes, tuple) and axes and isinstance(axes[0], type):
        found: type[Axis] = axes[0]
        return found
    return Batch


def evaluate(
    model: PyTree,
    loss_fn: Callable[..., Any],
    data: object,
    _step: Callable[..., Any] | None = None,
    *,
    batch_axis: type[Axis] | None = None,
) -> dict[str, float]:
    """Mean loss and metrics of ``loss_fn`` over all batches of ``data``, each batch weighted
    by its number of examples: the size of ``batch_axis`` in its Tensors, wherever that axis
    stands (time-major data included).

    The model is put in inference mode first (``eqx.nn.inference_mode``: dropout off), and
    a ``loss_fn`` with a ``key`` parameter gets ``key=None``.

    Args:
        batch_axis: the axis that counts examples (default: a :class:`Loader`'s first axis,
            otherwise :class:`axjax.train.Batch`).

    Ids and labels out of range in the data are named after the pass (the step is traced
    inside ``ax.checkify_indices``; it would otherwise clamp them), except for parameters
    placed over several devices, where traced values keep the clamp rule.

    Raises:
        ValueError: a batch has no Tensor with ``batch_axis`` (the message shows the batch),
            a batch of no examples, data of no batches, or an id or label out of range.

    Example:
        >>> ax.train.evaluate(model, loss_fn, test_loader)
        {'loss': 0.071, 'accuracy': 0.978}
    """
    model = eqx.nn.inference_mode(model)
    params, static = eqx.partition(model, eqx.is_array)
    step = _step or make_checked_eval_step(loss_fn, static, batch_axis_of(data, batch_axis))
    sums: dict[str, jax.Array] | None = None
    names: tuple[str, ...] = ()
    errors: list[Any] = []  # checkify's, one per batch: thrown once the pass is done
    sync_every = queue_bound(params)  # simulated CPU devices: docs/parallel.md
    for i, batch in enumerate(as_source(data, "evaluate: data").epoch(0)):
        if sums is None:
            names = metric_names(loss_fn, model, batch)
            sums = {n: jnp.zeros((), jnp.float32) for n in (*names, "count")}
        error, sums = step(params, sums, batch)
        if error is not None:
            errors.append(error)
        if sync_every and (i + 1) % sync_every == 0:  # bound the queued steps
            block_until_ready(sums)
    if sums is None:
        raise ValueError("evaluate: data gave no batches (an empty pass has no mean loss)")
    host = jax.device_get(sums)
    for i, error in enumerate(errors):  # an id or label out of range: named, not clamped
        try:
            error.throw()
        except ValueError as e:
            text = str(e).removesuffix(" (`check` failed)")
            raise ValueError(f"evaluate: batch {i}: {text}") from None
    return {k: float(host[k] / host["count"]) for k in names}


def fit(
    model: M,
    optimizer: optax.GradientTransformation,
    loss_fn: Callable[..., Any],
    data: BatchSource | Any,
    *,
    epochs: int = 1,
    max_steps: int | None = None,
    key: jax.Array | None = None,
    eval_data: object = None,
    log_every: int = 100,
    logdir: str | os.PathLike[str] | None = None,
    checkpoints: Checkpoints | None = None,
    resume: bool = False,
    early_stopping: EarlyStopping | None = None,
    progress: bool = True,
    guard: Guard = "replay",
    precision: Policy | None = None,
    parallel: Parallel | None = None,
    batch_axis: type[Axis] | None = None,
    trainable: Selection | None = None,
    loggers: list[Logger] | None = None,
) -> FitResult[M]:
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
        logdir: writes ``metrics.jsonl``, ``metrics.csv``, ``curves.png``, ``tensorboard/``.
        checkpoints: saved every ``checkpoints.every`` steps, after each epoch and at the end.
        resume: continue from the newest checkpoint in ``checkpoints``, if any.
        early_stopping: an :class:`EarlyStopping` rule checked after each evaluation.
        progress: show a tqdm progress bar with the live loss and metrics.
        guard: what NaN or Inf does: ``"replay"`` (default, as fast as a hand-written step:
            the state is checked at log points, epoch ends and checkpoints; on NaN the steps
            since are replayed to raise what ``"step"`` would), ``"step"`` (every step
            checked: slower) or ``"off"`` (no check). Details: docs/training.md, "NaN/Inf guard".
        precision: an ``ax.nn.Policy`` (compute, output and param dtypes); under loss scaling
            (f16) an overflowing step is skipped, the scale halved (not with ``guard="step"``).
        parallel: an :class:`axjax.train.Parallel`: model, optimizer state and batches sharded
            by its rules (docs/parallel.md); only process 0 writes ``logdir`` and shows the bar.
        batch_axis: the axis that counts examples in ``eval_data``, weighting its ``eval_*``
            means (default: a :class:`Loader`'s first axis, else :class:`axjax.train.Batch`).
        trainable: the parameters to train (default: every floating-point array); the others
            are frozen, bit for bit, with no optimizer state: a selector (``by_path``,
            ``by_axes``, combined with ``&``, ``|``, ``~``), a path pattern, a tuple of these
            (their union) or a predicate ``(path, leaf) -> bool`` on each floating-point
            leaf's dotted path. Details: docs/training.md, "Freezing parameters".
        loggers: :class:`axjax.train.Logger` objects: each row goes to ``log(step, metrics)``.

    Raises:
        TrainingDiverged: the loss, gradient or (``"replay"``) updated state became NaN/Inf:
            says at which step, keeps the state before it (``error.model``, ``error.opt_state``).
        ValueError: an unknown ``guard``, a number below 1, a ``trainable`` freezing all,
            ``early_stopping`` without ``eval_data``, an ``eval_data`` batch without ``batch_axis``.
        TypeError: a ``trainable`` or logger of another kind, a predicate giving a non-bool.

    Example:
        >>> result = ax.train.fit(model, optax.adam(1e-3), loss_fn, train, epochs=10,
        ...                       eval_data=test, logdir="runs/mnist")
        >>> result.history[-1]["eval_accuracy"]
        0.981
    """
    schedule, listeners = Schedule.checked(epochs, max_steps, log_every), check_loggers(loggers)
    _check_options(guard, early_stopping, eval_data, precision)
    p = prepare(model, optimizer, loss_fn, precision, parallel, as_source(data), trainable)
    run = start_run(p, key, checkpoints if resume else None, early_stopping, schedule)
    log = FitLog.for_run(run, schedule.epochs, logdir, progress, parallel, listeners)
    saver = FitCheckpoints(checkpoints, early_stopping, schedule)
    loop = _Loop.start(p, run, log, saver, schedule, guard, eval_data, batch_axis, early_stopping)
    return loop.run(run, p.unwrap)


def _flat_step(
    run: RunState,
    parallel: Parallel | None,
    loss_fn: Callable[..., Any],
    optimizer: Optimizer,
    treedef: Any,  # a jax.tree_util.PyTreeDef: jaxlib has no stub pyright can use
    *,
    donate: bool,
    guard: bool,
    select: Selector | None,
) -> Callable[..., list[jax.Array]]:
    """The jitted step on the leaves of ``treedef``; under a :class:`Parallel`, its outputs
    pinned to the parameter rules' shardings (the state it updates: ``run.hot``)."""
    out = None
    if parallel is not None and run.hot is not None:
        state = jax.tree.unflatten(treedef, run.hot)
        out = jax.tree.leaves(parallel.state_sharding(state))
    return make_flat_train_step(
        loss_fn,
        optimizer,
        run.static,
        treedef,
        donate=donate,
        guard=guard,
        out_shardings=out,
        select=select,
    )


def _compiled_steps(
    p: Prepared, run: RunState, guard: Guard, *, donate: bool
) -> tuple[FlatSteps, NanGuard]:
    """The run's compiled step, one per tree structure, for the loop and the guard's
    replay alike; and the NaN guard, whose first snapshot holds the run's arrays as they
    are now (build it before they are copied for a donating step: never donated)."""
    flat_steps: FlatSteps = functools.cache(
        functools.partial(
            _flat_step,
            run,
            p.parallel,
            p.loss_fn,
            p.optimizer,
            donate=donate,
            guard=guard == "step",
            select=p.select,
        )
    )
    make_replay = functools.partial(make_replay_step, p.loss_fn, p.optimizer, run.static, p.select)
    nan_guard = NanGuard(
        guard, run, p.batches(), donate=donate, make_replay=make_replay, flat_steps=flat_steps
    )
    return flat_steps, nan_guard


def _eval_step(
    run: RunState, loss_fn: Callable[..., Any], eval_data: object, batch_axis: type[Axis] | None
) -> Callable[..., Any] | None:
    """The step that :func:`evaluate` runs on ``eval_data`` (``None`` without it), built
    once for the run's model in inference mode."""
    if eval_data is None:
        return None
    static = eqx.partition(eqx.nn.inference_mode(run.model()), eqx.is_array)[1]
    return make_checked_eval_step(loss_fn, static, batch_axis_of(eval_data, batch_axis))


def _check_options(
    guard: Guard,
    early_stopping: EarlyStopping | None,
    eval_data: object,
    precision: Policy | None,
) -> None:
    """The ``ValueError`` of an unknown guard or an impossible setting (the schedule's
    numbers: :meth:`Schedule.checked`)."""
    if guard not in GUARDS:
        raise ValueError(
            f"fit: guard must be 'replay' (check at log points, replay on NaN), "
            f"'step' (check every step) or 'off', got {guard!r}"
        )
    if early_stopping is not None and eval_data is None:
        raise ValueError("fit: early_stopping compares evaluations; pass eval_data too")
    if eval_data is not None:
        as_source(eval_data, "fit: eval_data")  # an empty list: say so now, by its name
    check_guard("fit", precision, stepwise=guard == "step")


def _warn_if_not_finite(run: RunState, ev: dict[str, float], train: dict[str, float]) -> None:
    """Warn (``RuntimeWarning``) when an evaluation gives NaN or Inf: the guard watches
    training only, so NaN in ``eval_data`` would otherwise be logged without a word."""
    bad = [f"eval_{k} {v}" for k, v in ev.items() if not math.isfinite(v)]
    if not bad:
        return
    finite = bool(all_finite(run.params))
    train_finite = finite and all(math.isfinite(v) for v in train.values())
    where = f"the evaluation after epoch {run.epoch + 1} (step {run.step}) gave {', '.join(bad)}"
    if train_finite:
        why = (
            "while training was finite (the model's parameters and the training loss are "
            "finite): look for NaN or Inf in eval_data, or in what loss_fn computes in "
            "evaluation (key=None, inference mode)"
        )
    else:
        why = (
            "and the model's parameters or the training loss are not finite: training "
            "diverged (with guard='off' nothing stops it; use guard='replay' or 'step')"
        )
    warnings.warn(f"fit: {where}, {why}", RuntimeWarning, stacklevel=6)


@dataclasses.dataclass(frozen=True)
class _Loop:
    """What stays fixed in a ``fit`` run; its methods advance a :class:`RunState`."""

    source: BatchSource
    parallel: Parallel | None
    loss_fn: Callable[..., Any]
    flat_step: FlatSteps
    donate: bool
    guard: NanGuard
    log: FitLog
    saver: FitCheckpoints
    schedule: Schedule
    eval_data: object
    eval_step: Callable[..., Any] | None
    early_stopping: EarlyStopping | None
    sync_every: int | None = None

    @classmethod
    def start(
        cls,
        p: Prepared,
        run: RunState,
        log: FitLog,
        saver: FitCheckpoints,
        schedule: Schedule,
        guard: Guard,
        eval_data: object,
        batch_axis: type[Axis] | None,
        early_stopping: EarlyStopping | None,
    ) -> _Loop:
        """The loop of ``run``: its compiled steps, NaN guard and evaluation step, with
        its ``log`` and checkpoint ``saver``. The run's arrays are copied first when the
        step donates them (the caller's must survive)."""
        donate = True  # in place on every backend: faster on CPU too (benchmarks.fit_loop)
        flat_steps, nan_guard = _compiled_steps(p, run, guard, donate=donate)
        if donate:  # the caller's arrays must survive the donation of the step's inputs
            run.params, run.opt_state = copy_tree((run.params, run.opt_state))
        return cls(
            source=p.batches(),
            parallel=p.parallel,
            loss_fn=p.loss_fn,
            flat_step=flat_steps,
            donate=donate,
            guard=nan_guard,
            log=log,
            saver=saver,
            schedule=schedule,
            eval_data=eval_data,
            eval_step=_eval_step(run, p.loss_fn, eval_data, batch_axis),
            early_stopping=early_stopping,
            sync_every=queue_bound(run.params),
        )

    def run(self, run: RunState, unwrap: Callable[[PyTree], PyTree]) -> FitResult[Any]:
        """Train until ``epochs``, ``max_steps`` or early stopping; then, with
        ``restore_best``, take the best evaluation's parameters. A ``TrainingDiverged``
        closes the bar and writes the logs on its way out. The result's model is
        ``unwrap`` of the run's (the model as given to ``fit``).

        The step, the guard's replay and its op-by-op report, evaluation and checkpoints
        all run in one placement context: the mesh under a Parallel (ops run eagerly by the
        report would otherwise mix the mesh's arrays with one-device constants)."""
        parallel, max_steps = self.parallel, self.schedule.max_steps
        with parallel.placement() if parallel is not None else contextlib.nullcontext():
            run.start_clock()
            run.done = max_steps is not None and run.step >= max_steps
            try:
                while run.epoch < self.schedule.epochs and not run.done:
                    self._train_epoch(run)
                    self._end_epoch(run)
            except TrainingDiverged:
                self.log.close()
                raise
            self.log.close()  # the curves: drawn once per run
            rule = self.early_stopping
            if rule is not None and rule.restore_best and run.best is not None:
                run.params = run.best
        history, seconds = self.log.history, run.seconds()
        model = unwrap(run.model())
        return FitResult(model, run.opt_state, run.step, history, run.stopped_early, seconds)

    def _train_epoch(self, run: RunState) -> None:
        """The steps of the current epoch, from the batch the run stands at."""
        self.log.open_bar(run)
        try:
            for batch in self.source.epoch(run.epoch, run.batch):
                self._train_batch(run, batch)
                if self.schedule.max_steps is not None and run.step >= self.schedule.max_steps:
                    run.done = True
                    break
        finally:
            run.unpack()

    def _train_batch(self, run: RunState, batch: PyTree) -> None:
        """One step; a log row every ``log_every`` steps, a checkpoint when one is due."""
        if run.monitor is None:
            names = metric_names(self.loss_fn, run.model(), batch)
            run.monitor = Monitor.zero(names, guarded=self.guard.mode == "step")
        leaves = run.pack()  # the steps run on leaves: no Python flattening per step
        run.hot = self.flat_step(run.hot_def)(leaves, batch, run.key, run.step)
        run.step, run.batch = run.step + 1, run.batch + 1
        if self.sync_every and run.step % self.sync_every == 0:  # bound the queue (CPU meshes)
            block_until_ready(run.hot)
        self.log.advance()
        logged = run.step % self.schedule.log_every == 0
        due = self.saver.due(run)
        if logged or due:
            run.unpack()
        if logged:
            self._flush_train(run)
        if due:
            self._save(run, checked=logged)

    def _flush_train(self, run: RunState) -> dict[str, float]:
        """Check the state, log the train means since the last row; return the latest."""
        if run.monitor is None or run.checked_at == run.step:  # checked at this step
            return run.last
        means = self.guard.check(run)
        run.checked_at = run.step
        if means:
            self.log.record(run, "train", means)
            self.log.show(means)
        run.monitor = run.monitor.reset()
        run.last = means or run.last
        return run.last

    def _save(self, run: RunState, *, checked: bool) -> None:
        """Save a checkpoint; check the state first unless that was just done (never save
        a non-finite state, nor one that a bad step froze)."""
        if self.saver.checkpoints is None:
            return
        if not checked and self.guard.mode != "off" and run.monitor is not None:
            self.guard.check(run)
        self.saver.save(run, self.log.history)

    def _end_epoch(self, run: RunState) -> None:
        """Log, evaluate (at a full epoch or the last step), summarise, save; then move to
        the next epoch if this one is full."""
        train = self._flush_train(run)
        self.log.close_bar()
        summary = self.log.summary(run, train)
        if self.eval_step is not None and (run.batch >= run.per_epoch or run.done):
            summary += self._evaluate(run, self.eval_step)
        self.log.write(run, summary)
        self._save(run, checked=True)
        self.log.finish()
        run.epoch = run.epoch + 1 if run.batch >= run.per_epoch else run.epoch
        run.batch = 0

    def _evaluate(self, run: RunState, eval_step: Callable[..., Any]) -> str:
        """Evaluate, log the ``eval_*`` row, apply early stopping; return the summary."""
        ev = evaluate(run.model(), self.loss_fn, self.eval_data, eval_step)
        self.log.record(run, "eval", ev)
        _warn_if_not_finite(run, ev, train=run.last)
        summary = "".join(f", eval {k} {v:.4g}" for k, v in ev.items())
        if self.early_stopping is not None:
            summary += self._early_stop(run, self.early_stopping, ev)
        return summary

    def _early_stop(self, run: RunState, rule: EarlyStopping, ev: dict[str, float]) -> str:
        """Update ``rule`` with this evaluation: keep the best parameters, stop the run
        when it says so (returning the note for the summary line)."""
        name = rule.metric.removeprefix("eval_")
        if name not in ev:
            raise ValueError(
                f"EarlyStopping: the evaluation reports no {rule.metric!r}; it "
                f"has {', '.join('eval_' + k for k in ev)}"
            )
        improved, stop = rule.update(ev[name])
        if improved and rule.restore_best:
            run.best = copy_tree(run.params) if self.donate else run.params
        if not stop:
            return ""
        run.stopped_early = run.done = True
        return f" (early stop: no better {rule.metric} for {rule.patience} evaluations)"
