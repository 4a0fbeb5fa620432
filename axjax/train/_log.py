"""Training logs: rows of metrics appended to JSONL, mirrored to CSV, drawn as a PNG."""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core._internal import Feature, non_negative_int

__all__ = ["MetricsLog", "plain_row", "plot_history"]

Row = dict[str, Any]
_PLOT = Feature("matplotlib", "ax.train.plot_history")


class MetricsLog:
    """Rows of metrics in ``logdir/metrics.jsonl`` (appended) and ``logdir/metrics.csv``.

    Each row is a dict such as ``{"step": 100, "epoch": 0, "time": 3.2, "train_loss": 0.4}``.
    The CSV is rewritten from all rows (one column per key seen) when :meth:`flush` is called.

    Example:
        >>> log = ax.train.MetricsLog("runs/mnist")
        >>> log.append({"step": 1, "train_loss": 2.3}); log.flush()
    """

    def __init__(
        self,
        logdir: str | os.PathLike[str],
        *,
        resume_at: int | None = None,
        rows: Sequence[Row] | None = None,
    ) -> None:
        """Start the files: empty, or from ``rows`` (the history a resumed run carries), or
        from the file's own rows up to step ``resume_at``."""
        if resume_at is not None:
            resume_at = non_negative_int("MetricsLog", "resume_at", resume_at)
        self.logdir: Path = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        self.jsonl: Path = self.logdir / "metrics.jsonl"
        self.csv: Path = self.logdir / "metrics.csv"
        self.rows: list[Row] = []
        if rows is not None:
            self.rows = [plain_row(r) for r in rows]
        elif resume_at is not None and self.jsonl.is_file():
            # keep the rows up to the checkpoint; later ones are about to be recomputed
            self.rows = [r for r in read_jsonl(self.jsonl) if r.get("step", 0) <= resume_at]
        with open(self.jsonl, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in self.rows)

    def append(self, row: Row) -> None:
        """Add one row (written to the JSONL file at once)."""
        clean = plain_row(row)
        self.rows.append(clean)
        with open(self.jsonl, "a") as f:
            f.write(json.dumps(clean) + "\n")

    def flush(self) -> None:
        """Rewrite the CSV from all rows."""
        columns: list[str] = []
        for r in self.rows:
            columns += [k for k in r if k not in columns]
        tmp = self.csv.with_suffix(".csv.tmp")
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=columns)
            w.writeheader()
            w.writerows(self.rows)
        os.replace(tmp, self.csv)


def plain_row(row: Row) -> Row:
    """``row`` with plain JSON values: Python numbers, and ``"nan"``/``"inf"`` as strings
    (what ``metrics.jsonl`` and a checkpoint's metadata hold)."""
    return {k: _plain(v) for k, v in row.items()}


def _plain(v: object) -> object:
    item = getattr(v, "item", None)
    if item is not None:
        v = item()
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def read_jsonl(path: str | os.PathLike[str]) -> list[Row]:
    """The rows of a metrics JSONL file (a damaged last line is ignored)."""
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return rows


def plot_history(
    history: Sequence[Row] | str | os.PathLike[str],
    path: str | os.PathLike[str],
    *,
    title: str = "",
) -> Path:
    """Draw the training curves (losses, then the other metrics) against the step as a PNG.

    Args:
        history: rows as returned in ``FitResult.history``, or a ``metrics.jsonl`` path.
        path: where to write the PNG.

    Example:
        >>> ax.train.plot_history(result.history, "runs/mnist/curves.png")
    """
    _PLOT.require()
    from matplotlib.figure import Figure  # no pyplot: no global backend state

    rows = read_jsonl(history) if isinstance(history, (str, os.PathLike)) else list(history)
    keys = sorted(
        {k for r in rows for k in r if k not in ("step", "epoch", "time")},
        key=lambda k: (not k.startswith("train"), k),
    )
    losses = [k for k in keys if "loss" in k]
    others = [k for k in keys if "loss" not in k]
    panels = [p for p in (losses, others) if p]
    fig = Figure(figsize=(5.5 * max(len(panels), 1), 4))
    axes = fig.subplots(1, max(len(panels), 1))
    axes = list(axes) if hasattr(axes, "__len__") else [axes]
    for ax, names in zip(axes, panels, strict=False):
        for k in names:
            pts = [(r["step"], r[k]) for r in rows if isinstance(r.get(k), (int, float))]
            if pts:
                xs, ys = zip(*pts, strict=True)
                ax.plot(
                    xs,
                    ys,
                    marker="o" if k.startswith("eval") else None,
                    markersize=4,
                    label=k.replace("_", " "),
                )
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend()
        if names is losses and all(
            r[k] > 0 for r in rows for k in names if isinstance(r.get(k), (int, float))
        ):
            ax.set_yscale("log")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return out
