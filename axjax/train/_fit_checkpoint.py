"""The checkpoints of :func:`axjax.train.fit`: start (or resume) a run, and save it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax

from ._manager import Checkpoints
from ._run_state import PyTree, RunState

if TYPE_CHECKING:
    from ._fit import EarlyStopping

__all__ = ["FitCheckpoints", "start_run"]


def start_run(
    model: Any,
    opt_state: PyTree,
    key: jax.Array,
    per_epoch: int,
    checkpoints: Checkpoints | None,
    early_stopping: EarlyStopping | None,
) -> RunState:
    """A fresh run, or the newest checkpoint's in ``checkpoints`` (``None``: no resume).

    A resumed run gets the model, optimizer state, key, step, data position and time of
    the checkpoint, and ``early_stopping`` gets back its best value and wait count.
    """
    if checkpoints is None or checkpoints.latest() is None:
        return RunState.create(model, opt_state, key, per_epoch)
    r = checkpoints.restore({"model": model, "opt_state": opt_state, "key": key})
    meta = r.metadata
    if early_stopping is not None and meta.get("early_stopping"):
        early_stopping.best = meta["early_stopping"]["best"]
        early_stopping.wait = meta["early_stopping"]["wait"]
    return RunState.create(
        r.tree["model"],
        r.tree["opt_state"],
        r.tree["key"],
        per_epoch,
        step=r.step,
        epoch=meta["epoch"],
        batch=meta["batch"],
        seconds=meta.get("seconds", 0.0),
    )


class FitCheckpoints:
    """Saves a run to ``checkpoints`` (if any): every ``checkpoints.every`` steps inside
    an epoch, and at each epoch end; the metadata says where to resume."""

    def __init__(
        self, checkpoints: Checkpoints | None, early_stopping: EarlyStopping | None
    ) -> None:
        self.checkpoints = checkpoints
        self.early_stopping = early_stopping

    def due(self, run: RunState) -> bool:
        """Whether a step inside an epoch (not its last) is a ``checkpoints.every`` one."""
        every = self.checkpoints.every if self.checkpoints is not None else None
        if not every:
            return False
        return run.step % every == 0 and run.batch < run.per_epoch

    def save(self, run: RunState) -> None:
        """Write the run's model, optimizer state and key at its step."""
        if self.checkpoints is None:
            return
        epoch, batch = run.position()
        stopping = self.early_stopping.state() if self.early_stopping else None
        meta = {
            "epoch": epoch,
            "batch": batch,
            "seconds": run.seconds(),
            "early_stopping": stopping,
        }
        state = {"model": run.model(), "opt_state": run.opt_state, "key": run.key}
        self.checkpoints.save(run.step, state, meta)
