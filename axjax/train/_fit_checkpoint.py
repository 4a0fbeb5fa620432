"""The checkpoints of :func:`axjax.train.fit`: start (or resume) a run, and save it.

Besides the model, the optimizer state and the key, a checkpoint of ``fit`` holds where the
run stands (epoch, batch, seconds, the early-stopping state), the run's *schedule* (epochs,
``max_steps``, batches per epoch), and, under ``EarlyStopping(restore_best=True)``, the
parameters of the best evaluation so far, so that a resumed run ends as the uninterrupted
one would.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, NamedTuple

import equinox as eqx
import jax

from ..core._internal import optional_positive_int, positive_int
from ._checkpoint import CheckpointError, CheckpointMismatchError
from ._log import plain_row
from ._manager import Checkpoints, Restored
from ._run_state import RunState

if TYPE_CHECKING:
    from ._early_stopping import EarlyStopping
    from ._setup import Prepared

__all__ = ["FitCheckpoints", "Schedule", "start_run"]

#: the metadata keys every checkpoint written by ``fit`` has
_POSITION = ("epoch", "batch")
#: the schedule settings a resume must keep (``max_steps`` may grow: stopping a run early
#: with it and resuming with a larger one is how a run is continued in pieces)
_COMPARED = ("epochs", "per_epoch")


class Schedule(NamedTuple):
    """How long a run trains (``epochs``; ``max_steps`` total updates stop it earlier,
    ``None``: no limit) and how often it logs (``log_every`` steps).

    Example:
        >>> Schedule.checked(epochs=3, max_steps=None, log_every=100).saved(per_epoch=469)
        {'epochs': 3, 'max_steps': None, 'per_epoch': 469}
    """

    epochs: int
    max_steps: int | None
    log_every: int

    @classmethod
    def checked(cls, epochs: int, max_steps: int | None, log_every: int) -> Schedule:
        """``fit``'s settings, each checked (a ``ValueError`` names one below 1)."""
        epochs = positive_int("fit", "epochs", epochs)
        log_every = positive_int("fit", "log_every", log_every)
        max_steps = optional_positive_int("fit", "max_steps", max_steps)
        return cls(epochs, max_steps, log_every)

    def saved(self, per_epoch: int) -> dict[str, Any]:
        """The settings that fix a run's length and data order (saved with each checkpoint)."""
        return {"epochs": self.epochs, "max_steps": self.max_steps, "per_epoch": per_epoch}


def _keeps_best(early_stopping: EarlyStopping | None) -> bool:
    return early_stopping is not None and early_stopping.restore_best


def _restore(checkpoints: Checkpoints, state: dict[str, Any], with_best: bool) -> Restored:
    """The newest checkpoint, read with or without the ``best`` parameters (as the run that
    wrote it kept them or not: the other layout is tried when the first does not fit)."""
    first = {**state, "best": state["model"]} if with_best else state
    try:
        return checkpoints.restore(first)
    except CheckpointMismatchError as mismatch:
        other = state if with_best else {**state, "best": state["model"]}
        try:
            return checkpoints.restore(other)
        except CheckpointMismatchError:
            raise mismatch from None


def start_run(
    p: Prepared,
    key: jax.Array | None,
    checkpoints: Checkpoints | None,
    early_stopping: EarlyStopping | None,
    schedule: Schedule,
) -> RunState:
    """A fresh run of the prepared model and optimizer state, over the batches of
    ``p.data``, with ``key`` (default ``jax.random.key(0)``); or the newest checkpoint's
    run in ``checkpoints`` (``None``: no resume).

    A resumed run gets the model, optimizer state, key, step, data position, time and
    history rows of the checkpoint, and ``early_stopping`` gets back its best value, wait
    count and best parameters. A checkpoint saved under another ``schedule`` (epochs, or
    batches per epoch) resumes with a ``UserWarning`` saying what changed.

    Raises:
        CheckpointError: the newest loadable checkpoint was not written by ``fit`` (its
            metadata has no epoch and batch).
    """
    key = jax.random.key(0) if key is None else key
    per_epoch = len(p.batches())
    if checkpoints is None or checkpoints.latest() is None:
        return RunState.create(p.model, p.opt_state, key, per_epoch)
    state = {"model": p.model, "opt_state": p.opt_state, "key": key}
    r = _restore(checkpoints, state, _keeps_best(early_stopping))
    meta = r.metadata
    missing = [k for k in _POSITION if not isinstance(meta.get(k), int)]
    if missing:
        raise CheckpointError(
            f"fit: cannot resume from {r.path}: its metadata has no integer "
            f"{' or '.join(missing)} (it was not saved by fit); load it with "
            "Checkpoints.restore and pass the model to fit without resume=True"
        )
    _warn_if_rescheduled(r, meta.get("schedule"), schedule.saved(per_epoch))
    if early_stopping is not None and meta.get("early_stopping"):
        early_stopping.best = meta["early_stopping"]["best"]
        early_stopping.wait = meta["early_stopping"]["wait"]
    run = RunState.create(
        r.tree["model"],
        r.tree["opt_state"],
        r.tree["key"],
        per_epoch,
        step=r.step,
        epoch=meta["epoch"],
        batch=meta["batch"],
        seconds=meta.get("seconds", 0.0),
    )
    history = meta.get("history")
    if isinstance(history, list):  # the rows up to the checkpoint, the same in every process
        run.history = [row for row in history if isinstance(row, dict)]
    if _keeps_best(early_stopping) and "best" in r.tree and meta.get("has_best"):
        run.best = eqx.partition(r.tree["best"], eqx.is_array)[0]
    elif _keeps_best(early_stopping) and early_stopping and early_stopping.best is not None:
        warnings.warn(
            f"fit: {r.path} holds no best parameters (it was saved without "
            "EarlyStopping(restore_best=True)); the run returns the best of the "
            "evaluations after the resume, or the last parameters",
            stacklevel=3,
        )
    return run


def _warn_if_rescheduled(r: Restored, saved: object, now: dict[str, Any]) -> None:
    """Warn when the checkpoint's run had another length or data order than this one."""
    if not isinstance(saved, dict):
        return  # written before schedules were saved: nothing to compare
    changed = [
        f"{k}={saved.get(k)!r} then, {now[k]!r} now"
        for k in _COMPARED
        if k in now and saved.get(k) != now[k]
    ]
    if not changed:
        return
    warnings.warn(
        f"fit: resuming from {r.path} (step {r.step}) under another schedule than the one "
        f"it was saved with ({'; '.join(changed)}): the run now ends at another step, an "
        "optax learning-rate schedule sized for the old length no longer matches the "
        "steps, and with other batches per epoch the saved data position points at other "
        "examples. Resume with the same settings (and optimizer), or start a new run.",
        stacklevel=3,
    )


class FitCheckpoints:
    """Saves a run to ``checkpoints`` (if any): every ``checkpoints.every`` steps inside
    an epoch, and at each epoch end; the metadata says where to resume."""

    def __init__(
        self,
        checkpoints: Checkpoints | None,
        early_stopping: EarlyStopping | None,
        schedule: Schedule,
    ) -> None:
        self.checkpoints = checkpoints
        self.early_stopping = early_stopping
        self.schedule = schedule

    def due(self, run: RunState) -> bool:
        """Whether a step inside an epoch (not its last) is a ``checkpoints.every`` one."""
        every = self.checkpoints.every if self.checkpoints is not None else None
        if not every:
            return False
        return run.step % every == 0 and run.batch < run.per_epoch

    def save(self, run: RunState, history: list[dict[str, Any]]) -> None:
        """Write the run's model, optimizer state and key at its step (and, under
        ``restore_best``, the best parameters: the current ones until an evaluation), with
        the ``history`` rows so far: a resumed run gives them back in every process."""
        if self.checkpoints is None:
            return
        epoch, batch = run.position()
        stopping = self.early_stopping.state() if self.early_stopping else None
        meta: dict[str, Any] = {
            "epoch": epoch,
            "batch": batch,
            "seconds": run.seconds(),
            "early_stopping": stopping,
            "schedule": self.schedule.saved(run.per_epoch),
            "history": [plain_row(r) for r in history],  # JSON: NaN as "nan"
        }
        state = {"model": run.model(), "opt_state": run.opt_state, "key": run.key}
        if _keeps_best(self.early_stopping):
            meta["has_best"] = run.best is not None
            best = run.best if run.best is not None else run.params
            state["best"] = eqx.combine(best, run.static)
        self.checkpoints.save(run.step, state, meta)
