"""``EarlyStopping``: the rule ``fit`` checks after each evaluation (its state is saved with
``fit``'s checkpoints)."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Literal

from ..core._internal import check_choice, finite_float, non_negative_float, non_negative_int

__all__ = ["EarlyStopping", "Mode"]


#: Whether a smaller (``"min"``) or a larger (``"max"``) value of the metric is better
Mode = Literal["min", "max"]


@dataclasses.dataclass
class EarlyStopping:
    """Stop when ``metric`` has not improved for ``patience`` evaluations (epochs).

    Args:
        metric: a history column, e.g. ``"eval_loss"`` or ``"eval_accuracy"``.
        patience: evaluations without improvement before stopping.
        mode: ``"min"`` or ``"max"``; default ``"min"`` for losses, ``"max"`` otherwise
            (any other string is a ``ValueError``).
        min_delta: the smallest change that counts as an improvement.
        restore_best: at the end of the run (stopped early or not), return the parameters
            of the best evaluation, not the last.

    Example:
        >>> ax.train.fit(..., early_stopping=ax.train.EarlyStopping("eval_accuracy", 2))
    """

    metric: str = "eval_loss"
    patience: int = 3
    mode: Mode | None = None
    min_delta: float = 0.0
    restore_best: bool = True
    best: float | None = None
    wait: int = 0

    def __post_init__(self) -> None:
        self.patience = non_negative_int("EarlyStopping", "patience", self.patience)
        self.min_delta = non_negative_float("EarlyStopping", "min_delta", self.min_delta)
        self.wait = non_negative_int("EarlyStopping", "wait", self.wait)
        if self.best is not None:
            self.best = finite_float("EarlyStopping", "best", self.best)
        if self.mode is not None:
            check_choice("EarlyStopping", "mode", self.mode, typing.get_args(Mode))

    @property
    def direction(self) -> Mode:
        """``mode``, or its default: ``"min"`` for a metric named like a loss, else ``"max"``."""
        return self.mode or ("min" if "loss" in self.metric else "max")

    def update(self, value: float) -> tuple[bool, bool]:
        """Record a value; return ``(improved, stop)``."""
        sign = -1.0 if self.direction == "min" else 1.0
        if self.best is None or sign * (value - self.best) > self.min_delta:
            self.best, self.wait = value, 0
            return True, False
        self.wait += 1
        return False, self.wait >= self.patience

    def state(self) -> dict[str, Any]:
        return {"best": self.best, "wait": self.wait}
