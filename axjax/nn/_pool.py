"""Pooling layers over named spatial axes: windowed max/mean, and global pooling.

Windows slide over the named axes only, whatever their position; batch and channel axes
are untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax

from ..core import Axis, Tensor, avg_pool, max_pool
from ..core import max as reduce_max
from ..core import mean as reduce_mean
from ..core._conv import Padding
from ._util import AxisArg, as_axes

__all__ = ["MaxPool", "AvgPool", "MaxPool1D", "MaxPool2D", "AvgPool1D", "AvgPool2D",
           "GlobalMaxPool", "GlobalAvgPool"]

AnyTensor = Tensor[Any, *tuple[Any, ...]]


class _Pool(eqx.Module):
    spatial: tuple[type[Axis], ...] = eqx.field(static=True)
    window: int | tuple[int, ...] = eqx.field(static=True)
    # defaults as in __init__: type checkers synthesise the subclasses' constructors from these
    stride: int | tuple[int, ...] | None = eqx.field(static=True, default=None)
    padding: Any = eqx.field(static=True, default="VALID")

    def __init__(self, spatial: AxisArg, window: int | Sequence[int],
                 stride: int | Sequence[int] | None = None, padding: Padding = "VALID") -> None:
        self.spatial = as_axes(spatial, type(self).__name__)
        self.window = window if isinstance(window, int) else tuple(window)
        self.stride = stride if stride is None or isinstance(stride, int) else tuple(stride)
        self.padding = padding if isinstance(padding, str | int) else tuple(
            p if isinstance(p, int) else tuple(p) for p in padding)


class MaxPool(_Pool):
    """Maximum over windows of the named axes (stride defaults to the window).

    Example:
        >>> pool = ax.nn.MaxPool((Height, Width), window=2)
        >>> pool(maps)     # [Batch, Height=28, Width=28, Feature] -> Height=14, Width=14
    """

    def __call__(self, x: AnyTensor, *, key: jax.Array | None = None) -> AnyTensor:
        """Pool ``x``; ``key`` is ignored."""
        return max_pool(x, self.spatial, self.window, self.stride, self.padding)


class AvgPool(_Pool):
    """Mean over windows of the named axes (padding counts as zeros in the mean).

    Example:
        >>> ax.nn.AvgPool((Height, Width), window=2)(maps)
    """

    def __call__(self, x: AnyTensor, *, key: jax.Array | None = None) -> AnyTensor:
        """Pool ``x``; ``key`` is ignored."""
        return avg_pool(x, self.spatial, self.window, self.stride, self.padding)


class MaxPool1D(MaxPool):
    """:class:`MaxPool` over one axis: ``ax.nn.MaxPool1D(Time, 2)``."""


class MaxPool2D(MaxPool):
    """:class:`MaxPool` over two axes: ``ax.nn.MaxPool2D((Height, Width), 2)``."""


class AvgPool1D(AvgPool):
    """:class:`AvgPool` over one axis: ``ax.nn.AvgPool1D(Time, 2)``."""


class AvgPool2D(AvgPool):
    """:class:`AvgPool` over two axes: ``ax.nn.AvgPool2D((Height, Width), 2)``."""


class GlobalMaxPool(eqx.Module):
    """Maximum over the whole of the named axes, which are removed.

    Example:
        >>> ax.nn.GlobalMaxPool((Height, Width))(maps)   # [Batch, H, W, F] -> [Batch, F]
    """

    spatial: tuple[type[Axis], ...] = eqx.field(static=True)

    def __init__(self, spatial: AxisArg) -> None:
        self.spatial = as_axes(spatial, "GlobalMaxPool")

    def __call__(self, x: AnyTensor, *, key: jax.Array | None = None) -> AnyTensor:
        """Reduce ``x``; ``key`` is ignored."""
        return reduce_max(x, self.spatial)


class GlobalAvgPool(eqx.Module):
    """Mean over the whole of the named axes, which are removed.

    Example:
        >>> ax.nn.GlobalAvgPool((Height, Width))(maps)   # [Batch, H, W, F] -> [Batch, F]
    """

    spatial: tuple[type[Axis], ...] = eqx.field(static=True)

    def __init__(self, spatial: AxisArg) -> None:
        self.spatial = as_axes(spatial, "GlobalAvgPool")

    def __call__(self, x: AnyTensor, *, key: jax.Array | None = None) -> AnyTensor:
        """Reduce ``x``; ``key`` is ignored."""
        return reduce_mean(x, self.spatial)
