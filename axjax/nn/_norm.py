"""``LayerNorm`` and ``RMSNorm`` over named axes.

Both normalise over the axes they are given (one or several, wherever they sit in the
input) and scale by a learned weight over those axes; every other axis is a batch axis.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar, TypeVarTuple

import equinox as eqx
import jax

from ..core import F32, Axis, DType, Tensor
from ..core.internal import axes_names
from ..ops import broadcast, mean, rsqrt, var
from . import _init
from ._util import AxisArg, as_axes, require

__all__ = ["LayerNorm", "RMSNorm"]

D = TypeVar("D", bound=DType)
Axes = TypeVarTuple("Axes")
AnyTensor = Tensor[Any, *tuple[Any, ...]]


def _params(axes: tuple[type[Axis], ...], sizes: int | Sequence[int], where: str
            ) -> dict[type[Axis], int]:
    ns = (sizes,) if isinstance(sizes, int) else tuple(sizes)
    if len(ns) != len(axes):
        raise ValueError(f"{where}: {len(axes)} axes ({axes_names(axes)}) but {len(ns)} sizes")
    return dict(zip(axes, ns, strict=True))


def _check(name: str, x: Any, sizes: dict[type[Axis], int]) -> None:
    for a, n in sizes.items():
        require(name, (x,), x, a, n)


class LayerNorm(eqx.Module):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the named axes.

    Args:
        axes: the axis (or tuple of axes) normalised over, e.g. ``Embed``.
        sizes: their sizes (an int, or one per axis).
        eps: added to the variance.
        use_weight, use_bias: learn a scale (ones) and a shift (zeros) over ``axes``.
        dtype: parameter dtype.

    Example:
        >>> norm = ax.nn.LayerNorm(Embed, 64)
        >>> norm(h)                  # Tensor[F32, Batch, Time, Embed], same axes out
    """

    weight: AnyTensor | None
    bias: AnyTensor | None
    axes: tuple[type[Axis], ...] = eqx.field(static=True)
    sizes: tuple[int, ...] = eqx.field(static=True)
    eps: float = eqx.field(static=True)

    def __init__(self, axes: AxisArg, sizes: int | Sequence[int], *, eps: float = 1e-5,
                 use_weight: bool = True, use_bias: bool = True,
                 dtype: type[DType] = F32) -> None:
        self.axes = as_axes(axes, "LayerNorm")
        shape = _params(self.axes, sizes, "LayerNorm")
        self.sizes = tuple(shape.values())
        key = jax.random.key(0)  # unused by the constant initialisers
        self.weight = _init.ones()(key, shape, dtype=dtype) if use_weight else None
        self.bias = _init.zeros()(key, shape, dtype=dtype) if use_bias else None
        self.eps = float(eps)

    def __call__(self, x: Tensor[D, *Axes], *, key: jax.Array | None = None
                 ) -> Tensor[D, *Axes]:
        """Normalise ``x``; ``key`` is ignored."""
        _check(f"LayerNorm({axes_names(self.axes)})", x, dict(zip(self.axes, self.sizes)))
        centred = x - broadcast(mean(x, self.axes), x)
        out = centred * broadcast(rsqrt(var(x, self.axes) + self.eps), x)
        if self.weight is not None:
            out = out * broadcast(self.weight, x)
        if self.bias is not None:
            out = out + broadcast(self.bias, x)
        return out


class RMSNorm(eqx.Module):
    """``x / sqrt(mean(x²) + eps) * weight`` over the named axes.

    Example:
        >>> ax.nn.RMSNorm(Embed, 64)(h)       # same axes out
    """

    weight: AnyTensor | None
    axes: tuple[type[Axis], ...] = eqx.field(static=True)
    sizes: tuple[int, ...] = eqx.field(static=True)
    eps: float = eqx.field(static=True)

    def __init__(self, axes: AxisArg, sizes: int | Sequence[int], *, eps: float = 1e-5,
                 use_weight: bool = True, dtype: type[DType] = F32) -> None:
        self.axes = as_axes(axes, "RMSNorm")
        shape = _params(self.axes, sizes, "RMSNorm")
        self.sizes = tuple(shape.values())
        self.weight = _init.ones()(jax.random.key(0), shape, dtype=dtype) if use_weight else None
        self.eps = float(eps)

    def __call__(self, x: Tensor[D, *Axes], *, key: jax.Array | None = None
                 ) -> Tensor[D, *Axes]:
        """Normalise ``x``; ``key`` is ignored."""
        _check(f"RMSNorm({axes_names(self.axes)})", x, dict(zip(self.axes, self.sizes)))
        out = x * broadcast(rsqrt(mean(x * x, self.axes) + self.eps), x)
        if self.weight is not None:
            out = out * broadcast(self.weight, x)
        return out

