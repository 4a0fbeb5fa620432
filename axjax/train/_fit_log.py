"""Where :func:`axjax.train.fit` reports: history rows, log files, progress bar, summaries."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ..core._internal import Feature
from ._log import MetricsLog, plot_history
from ._loggers import Logger, fit_tensorboard
from ._run_state import RunState

if TYPE_CHECKING:
    from tqdm import tqdm

    from ..parallel import Parallel

__all__ = ["FitLog"]

_BAR = Feature("tqdm", "fit(progress=True)")
# without matplotlib the run goes on: the logs are written, the drawing is skipped
_CURVES = Feature("matplotlib", "fit(logdir=...)'s curves.png", missing="warn")


class FitLog:
    """The history of a run (mirrored to ``logdir`` when given) and its progress bar.

    The CSV is rewritten at the end of every epoch; ``curves.png`` is drawn once, when the
    run stops (:meth:`close`).

    Every process of a run keeps the same rows: a resumed run starts from the rows its
    checkpoint carries (``earlier``), in every process, whether or not it writes ``logdir``.

    Args:
        logdir: where :class:`MetricsLog` writes its files and ``curves.png``, or ``None``.
        resume_at: the step the run starts from (later rows in ``logdir`` are dropped).
        earlier: the rows before ``resume_at``, from the checkpoint (``None``: a fresh run,
            or a checkpoint written before checkpoints carried them: then the rows of
            ``logdir``'s file).
        epochs: the number of epochs (for the bar's and the summaries' "epoch e/n").
        progress: show the bar and the per-epoch summary lines.
        loggers: more places each row goes (``log(step, metrics)``; closed with the run).
    """

    def __init__(
        self,
        logdir: str | os.PathLike[str] | None,
        *,
        resume_at: int,
        epochs: int,
        progress: bool,
        earlier: list[dict[str, Any]] | None = None,
        loggers: list[Logger] | None = None,
    ) -> None:
        self.log = (
            MetricsLog(logdir, resume_at=resume_at, rows=earlier) if logdir is not None else None
        )
        self.history: list[dict[str, Any]] = (
            self.log.rows if self.log is not None else list(earlier or [])
        )
        self.epochs = epochs
        self.progress = progress
        self.bar: tqdm[NoReturn] | None = None
        self.loggers: list[Logger] = list(loggers or [])

    @classmethod
    def for_run(
        cls,
        run: RunState,
        epochs: int,
        logdir: str | os.PathLike[str] | None,
        progress: bool,
        parallel: Parallel | None,
        loggers: list[Logger] | None = None,
    ) -> FitLog:
        """The log of ``run``: from its step on, after the rows its checkpoint carries. In
        a run of several processes (``parallel``) only process 0 writes ``logdir``, shows
        the bar and calls the ``loggers``; with a ``logdir`` they get a
        :class:`axjax.train.TensorBoardLogger` on its ``tensorboard`` folder (with
        tensorboardX installed)."""
        if parallel is not None and not parallel.is_main:
            logdir, progress, loggers = None, False, None
        loggers = list(loggers or [])
        if logdir is not None:
            tensorboard = fit_tensorboard(Path(logdir) / "tensorboard", run.step)
            loggers += [tensorboard] if tensorboard is not None else []
        return cls(
            logdir,
            resume_at=run.step,
            epochs=epochs,
            progress=progress,
            earlier=run.history,
            loggers=loggers,
        )

    def record(self, run: RunState, prefix: str, means: Mapping[str, float]) -> None:
        """Add a row of ``{prefix}_{name}`` columns at the run's step, epoch and time."""
        row: dict[str, Any] = {
            "step": run.step,
            "epoch": run.epoch_fraction(),
            "time": round(run.seconds(), 3),
        }
        row |= {f"{prefix}_{k}": v for k, v in means.items()}
        if self.log is None:
            self.history.append(row)
        else:
            self.log.append(row)
        for logger in self.loggers:
            logger.log(run.step, {k: v for k, v in row.items() if k != "step"})

    def open_bar(self, run: RunState) -> None:
        """A progress bar for the run's current epoch, from the batch it stands at."""
        if not self.progress:
            return
        _BAR.require()
        from tqdm import tqdm

        self.bar = tqdm(
            total=run.per_epoch,
            initial=run.batch,
            desc=f"epoch {run.epoch + 1}/{self.epochs}",
            dynamic_ncols=True,
            mininterval=0.5,
        )

    def advance(self) -> None:
        """One more batch on the bar."""
        if self.bar is not None:
            self.bar.update(1)

    def show(self, means: Mapping[str, float]) -> None:
        """Put the latest means beside the bar."""
        if self.bar is not None:
            self.bar.set_postfix({k: f"{v:.4g}" for k, v in means.items()}, refresh=False)

    def close_bar(self) -> None:
        """Close the current bar, if any."""
        if self.bar is not None:
            self.bar.close()

    def summary(self, run: RunState, train: Mapping[str, float]) -> str:
        """The start of an epoch's summary line: the step and the train means."""
        text = f"epoch {run.epoch + 1}/{self.epochs}: step {run.step}"
        return text + "".join(f", train {k} {v:.4g}" for k, v in train.items())

    def write(self, run: RunState, summary: str) -> None:
        """Print an epoch's summary line (with the time) when ``progress`` is on."""
        if self.progress:
            _BAR.require()
            from tqdm import tqdm

            tqdm.write(summary + f" [{run.seconds():.1f} s]")

    def finish(self) -> None:
        """Rewrite the CSV (with a ``logdir``)."""
        if self.log is not None:
            self.log.flush()

    def draw(self) -> None:
        """Draw ``curves.png`` (with a ``logdir``; without matplotlib, warn once and skip)."""
        if self.log is not None and self.history and _CURVES.load() is not None:
            plot_history(self.history, self.log.logdir / "curves.png")

    def close(self) -> None:
        """Close the bar, write the files, draw the curves and close the loggers: the run
        stops here."""
        self.close_bar()
        self.finish()
        self.draw()
        loggers, self.loggers = self.loggers, []
        for logger in loggers:
            logger.close()
