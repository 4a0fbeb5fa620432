"""Where ``fit``'s rows go besides its own files: the ``Logger`` protocol, and TensorBoard.

A logger is any object with ``log(step, metrics)`` and ``close()``: ``fit(loggers=[...])``
hands it every history row as it is made (``metrics``: the row's numbers but ``step``),
and closes it when the run stops. ``fit(logdir=...)`` adds a :class:`TensorBoardLogger`
on ``logdir/tensorboard`` (with tensorboardX installed: ``pip install "axjax[tensorboard]"``). The
JSONL file stays the record a resumed run reads; the loggers only receive.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np

from ..core._internal import Feature, non_negative_int

__all__ = ["Logger", "TensorBoardLogger", "check_loggers", "fit_tensorboard"]

_TENSORBOARD = Feature("tensorboardX", "TensorBoard logs (ax.train.TensorBoardLogger)")
#: fit(logdir=...) writes TensorBoard files when it can; without tensorboardX it warns once
_FIT_TENSORBOARD = Feature("tensorboardX", "fit(logdir=...)'s TensorBoard files", missing="warn")


@runtime_checkable
class Logger(Protocol):
    """What ``fit(loggers=[...])`` calls: ``log`` with each history row's step and numbers
    (``train_loss``, ``eval_accuracy``, ``epoch``, ``time``...), ``close`` when the run
    stops (also when it diverges). Only process 0 of a multi-process run calls them.

    Example (Weights & Biases, docs/training.md):
        >>> class WandbLogger:
        ...     def __init__(self, run): self.run = run        # wandb.init(...)
        ...     def log(self, step, metrics): self.run.log(metrics, step=step)
        ...     def close(self): self.run.finish()
    """

    def log(self, step: int, metrics: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


def check_loggers(loggers: object) -> list[Logger]:
    """``fit``'s ``loggers=`` as a list, each with ``log`` and ``close`` (else ``TypeError``)."""
    if loggers is None:
        return []
    if isinstance(loggers, str | bytes) or not isinstance(loggers, Iterable):
        raise TypeError(f"fit: loggers must be a list of loggers, got {type(loggers).__name__}")
    out: list[Logger] = []
    for i, logger in enumerate(cast(Iterable[object], loggers)):
        if not isinstance(logger, Logger):
            raise TypeError(
                f"fit: loggers[{i}] ({type(logger).__name__}) has no log(step, metrics) and "
                "close() methods (the ax.train.Logger protocol)"
            )
        out.append(logger)
    return out


class TensorBoardLogger:
    """Writes each row's numbers as TensorBoard scalars (tensorboardX's ``SummaryWriter``)
    into ``logdir``, tagged by column name (``train_loss``, ``eval_accuracy``...).

    ``purge_step``: TensorBoard drops the events of this step and later that an earlier
    run wrote in ``logdir`` (``fit`` resumed at step ``s`` passes ``s + 1``).

    Example:
        >>> ax.train.fit(..., loggers=[ax.train.TensorBoardLogger("runs/tb")])
        # tensorboard --logdir runs/tb
    """

    def __init__(self, logdir: str | os.PathLike[str], *, purge_step: int | None = None) -> None:
        if purge_step is not None:
            purge_step = non_negative_int("TensorBoardLogger", "purge_step", purge_step)
        tbx = _TENSORBOARD.require()
        self.logdir = os.fspath(logdir)
        self.writer: Any = tbx.SummaryWriter(self.logdir, purge_step=purge_step)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """One scalar per number, tagged by its column (``TypeError``: a value that is not
        a number)."""
        step = non_negative_int("TensorBoardLogger.log", "step", step)
        for name, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, int | float | np.number):
                raise TypeError(
                    f"TensorBoardLogger.log: metrics[{name!r}] must be a number, got "
                    f"{type(value).__name__}"
                )
            self.writer.add_scalar(name, float(value), step)

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.close()


def fit_tensorboard(logdir: str | os.PathLike[str], resume_at: int) -> TensorBoardLogger | None:
    """The logger ``fit(logdir=...)`` adds (``None``, after one warning, without
    tensorboardX); a resumed run purges the events after ``resume_at`` (TensorBoard drops
    those at ``purge_step`` and later; the rows at ``resume_at`` are the checkpoint's)."""
    if _FIT_TENSORBOARD.load() is None:
        return None
    return TensorBoardLogger(logdir, purge_step=resume_at + 1 if resume_at else None)
