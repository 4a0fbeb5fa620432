"""Pooling layers over named spatial axes: windowed max/mean, and global pooling.

Windows slide over the named axes only, whatever their position; batch and channel axes
are untouched. A windowed pool keeps the axes (only their sizes change), so its call is
typed exactly, ``Tensor[D, *Axes] -> Tensor[D, *Axes]``. ``MaxPool2D((H, W), 2)`` is a
``MaxPool2D[H, W]`` (``MaxPool1D[T]``, ``AvgPool1D``, ``AvgPool2D`` alike): the mypy plugin
runs the pool on the input's type, so an input without ``H`` is an error statically; other
checkers find it when the layer runs. Global pooling removes axes from anywhere, which a
type cannot say: it is gradual.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVarTuple

import equinox as eqx
import jax
from typing_extensions import TypeVar

from ..core import AnyTensor, Axis, DType, Tensor
from ..ops import avg_pool, max_pool
from ..ops import max as reduce_max
from ..ops import mean as reduce_mean
from ..ops._internal import Padding, normalize_padding, per_axis
from ._registry import register_layer
from ._util import AxisArg, as_axes

__all__ = [
    "MaxPool",
    "AvgPool",
    "MaxPool1D",
    "MaxPool2D",
    "AvgPool1D",
    "AvgPool2D",
    "GlobalMaxPool",
    "GlobalAvgPool",
]

D = TypeVar("D", bound=DType)
Axes = TypeVarTuple("Axes")
Ints = int | Sequence[int]
# the pooled axes of the 1-d and 2-d pools; a bare `MaxPool2D` is `MaxPool2D[Any, Any]`
S1 = TypeVar("S1", bound=Axis, default=Any)
S2 = TypeVar("S2", bound=Axis, default=Any)

# Every class below defines its own __init__: Equinox modules are dataclass transforms, so
# a type checker would otherwise synthesise a subclass's constructor from the fields.


class _Pool(eqx.Module):
    spatial: tuple[type[Axis], ...] = eqx.field(static=True)
    window: int | tuple[int, ...] = eqx.field(static=True)
    stride: int | tuple[int, ...] | None = eqx.field(static=True)
    padding: str | tuple[tuple[int, int], ...] = eqx.field(static=True)

    def __init__(
        self, spatial: AxisArg, window: Ints, stride: Ints | None = None, padding: Padding = "VALID"
    ) -> None:
        self.spatial = as_axes(spatial, type(self).__name__)
        where, n = type(self).__name__, len(self.spatial)
        windows = per_axis(window, n, "window", where)  # one int each, checked
        self.window = windows if isinstance(window, Sequence) else windows[0]
        strides = None if stride is None else per_axis(stride, n, "stride", where)
        self.stride = strides if isinstance(stride, Sequence) or strides is None else strides[0]
        pads = normalize_padding(padding, n, where)
        self.padding = padding if isinstance(padding, str) else pads


@register_layer(typed="signature")
class MaxPool(_Pool):
    """Maximum over windows of the named axes (stride defaults to the window).

    Example:
        >>> pool = ax.nn.MaxPool((Height, Width), window=2)
        >>> pool(maps)     # [Batch, Height=28, Width=28, Feature] -> Height=14, Width=14
    """

    def __init__(
        self, spatial: AxisArg, window: Ints, stride: Ints | None = None, padding: Padding = "VALID"
    ) -> None:
        super().__init__(spatial, window, stride, padding)

    def __call__(self, x: Tensor[D, *Axes], *, key: jax.Array | None = None) -> Tensor[D, *Axes]:
        """Pool ``x`` (the same axes, smaller sizes); ``key`` is ignored."""
        return max_pool(x, self.spatial, self.window, self.stride, self.padding)


@register_layer(typed="signature")
class AvgPool(_Pool):
    """Mean over windows of the named axes (padding counts as zeros in the mean).

    Example:
        >>> ax.nn.AvgPool((Height, Width), window=2)(maps)
    """

    def __init__(
        self, spatial: AxisArg, window: Ints, stride: Ints | None = None, padding: Padding = "VALID"
    ) -> None:
        super().__init__(spatial, window, stride, padding)

    def __call__(self, x: Tensor[D, *Axes], *, key: jax.Array | None = None) -> Tensor[D, *Axes]:
        """Pool ``x`` (the same axes, smaller sizes); ``key`` is ignored."""
        return avg_pool(x, self.spatial, self.window, self.stride, self.padding)


@register_layer()
class MaxPool1D(MaxPool, Generic[S1]):
    """:class:`MaxPool` over one axis: ``ax.nn.MaxPool1D(Time, 2)``, a ``MaxPool1D[Time]``."""

    def __init__(
        self,
        spatial: type[S1],
        window: Ints,
        stride: Ints | None = None,
        padding: Padding = "VALID",
    ) -> None:
        super().__init__(spatial, window, stride, padding)


@register_layer()
class MaxPool2D(MaxPool, Generic[S1, S2]):
    """:class:`MaxPool` over two axes: ``ax.nn.MaxPool2D((Height, Width), 2)``, a
    ``MaxPool2D[Height, Width]``."""

    def __init__(
        self,
        spatial: tuple[type[S1], type[S2]],
        window: Ints,
        stride: Ints | None = None,
        padding: Padding = "VALID",
    ) -> None:
        super().__init__(spatial, window, stride, padding)


@register_layer()
class AvgPool1D(AvgPool, Generic[S1]):
    """:class:`AvgPool` over one axis: ``ax.nn.AvgPool1D(Time, 2)``, an ``AvgPool1D[Time]``."""

    def __init__(
        self,
        spatial: type[S1],
        window: Ints,
        stride: Ints | None = None,
        padding: Padding = "VALID",
    ) -> None:
        super().__init__(spatial, window, stride, padding)


@register_layer()
class AvgPool2D(AvgPool, Generic[S1, S2]):
    """:class:`AvgPool` over two axes: ``ax.nn.AvgPool2D((Height, Width), 2)``, an
    ``AvgPool2D[Height, Width]``."""

    def __init__(
        self,
        spatial: tuple[type[S1], type[S2]],
        window: Ints,
        stride: Ints | None = None,
        padding: Padding = "VALID",
    ) -> None:
        super().__init__(spatial, window, stride, padding)


@register_layer(typed="signature")
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


@register_layer(typed="signature")
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
