"""Axis labels shared by the tests (an axis's printed name is its class name)."""

from typing import final

import axjax as ax

__all__ = ["Batch", "Class", "Hidden", "Hidden1", "Hidden2", "In", "Out", "Pixel", "Time"]


@final
class Batch(ax.Axis): ...


@final
class Pixel(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


@final
class Hidden1(ax.Axis): ...


@final
class Hidden2(ax.Axis): ...


@final
class Time(ax.Axis): ...


@final
class Class(ax.Axis): ...


@final
class In(ax.Axis): ...


@final
class Out(ax.Axis): ...
