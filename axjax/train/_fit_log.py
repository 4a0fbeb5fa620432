"""Where :func:`axjax.train.fit` reports: history rows, log files, progress bar, summaries."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NoReturn

from tqdm import tqdm

from ._log import MetricsLog, plot_history
from ._run_state import RunState

__all__ = ["FitLog"]


class FitLog:
    """The history of a run (mirrored to ``logdir`` when given) and its progress bar.

    Args:
        logdir: where :class:`MetricsLog` writes its files and ``curves.png``, or ``None``.
        resume_at: the step the run starts from (later rows in ``logdir`` are dropped).
        epochs: the number of epochs (for the bar's and the summaries' "epoch e/n").
        progress: show the bar and the per-epoch summary lines.
    """

    def __init__(
        self, logdir: str | os.PathLike[str] | None, *, resume_at: int, epochs: int, progress: bool
    ) -> None:
        self.log = MetricsLog(logdir, resume_at=resume_at) if logdir is not None else None
        self.history: list[dict[str, Any]] = self.log.rows if self.log is not None else []
        self.epochs = epochs
        self.progress = progress
        self.bar: tqdm[NoReturn] | None = None

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

    def open_bar(self, run: RunState) -> None:
        """A progress bar for the run's current epoch, from the batch it stands at."""
        self.bar = tqdm(
            total=run.per_epoch,
            initial=run.batch,
            desc=f"epoch {run.epoch + 1}/{self.epochs}",
            disable=not self.progress,
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
            tqdm.write(summary + f" [{run.seconds():.1f} s]")

    def finish(self) -> None:
        """Rewrite the CSV and draw ``curves.png`` (with a ``logdir``)."""
        if self.log is not None:
            self.log.flush()
            if self.history:
                plot_history(self.history, self.log.logdir / "curves.png")

    def close(self) -> None:
        """Close the bar and write the files: the run stops here."""
        self.close_bar()
        self.finish()
