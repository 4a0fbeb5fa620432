"""The axis labels the data loaders name their batches with (pass your own to override)."""

from __future__ import annotations

from typing import final

from ..core import Axis

__all__ = ["Batch", "Class", "Height", "Pixel", "Pos", "Width"]


@final
class Batch(Axis):
    """Examples in a batch."""


@final
class Pixel(Axis):
    """Pixels of a flattened image (784 for MNIST)."""


@final
class Height(Axis):
    """Image rows."""


@final
class Width(Axis):
    """Image columns."""


@final
class Class(Axis):
    """Classes of a classifier's output (10 for MNIST)."""


@final
class Pos(Axis):
    """Token positions in a window of a language model's batch (``TokenWindows``)."""
