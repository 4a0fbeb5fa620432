"""``LayerNorm`` and ``RMSNorm`` over named axes.

Both normalise over the axes they are given (one or several, wherever they sit in the
input) and scale by a learned weight over those axes; every other axis is a batch axis.

Typing: ``LayerNorm(Hidden, 64)`` is a ``LayerNorm[F32, Hidden]`` (``RMSNorm`` likewise);
its call keeps the input's type, which must have the layer's dtype and, for one axis, that
axis among its first two or last three axes (every position up to rank 5; the mypy plugin
runs the layer's own check at any rank, for any number of axes).
"""

# the call's overloads spell "the axis at any position": they overlap where two agree
# mypy: disable-error-code="overload-overlap,overload-cannot-match"
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, overload

import equinox as eqx
import jax
from typing_extensions import TypeVar, TypeVarTuple, Unpack

from ..core import F32, AnyTensor, Axis, DType, Tensor
from ..core._internal import axes_names, fail, positive_float, positive_int
from ..ops import broadcast, mean, rsqrt, var
from ..ops._internal import narrowed, widened
from . import _init
from ._registry import register_layer
from ._util import AxisArg, as_axes, require

__all__ = ["LayerNorm", "RMSNorm"]

# a layer's dtype and normalised axes; a bare `LayerNorm` is `LayerNorm[F32, *tuple[Any, ...]]`
D = TypeVar("D", bound=DType, default=F32)
N = TypeVarTuple("N", default=Unpack[tuple[Any, ...]])
DI = TypeVar("DI", bound=DType)  # the dtype a constructor is given
A0 = TypeVar("A0", bound=Axis)
A1 = TypeVar("A1", bound=Axis)
T0 = TypeVar("T0", bound=Axis)
T1 = TypeVar("T1", bound=Axis)
T2 = TypeVar("T2", bound=Axis)
T3 = TypeVar("T3", bound=Axis)
T4 = TypeVar("T4", bound=Axis)
T5 = TypeVar("T5", bound=Axis)
Axes = TypeVarTuple("Axes")
Rest = TypeVarTuple("Rest")
Sizes = int | Sequence[int]


def _params(
    axes: tuple[type[Axis], ...], sizes: int | Sequence[int], where: str
) -> dict[type[Axis], int]:
    items = tuple(sizes) if isinstance(sizes, Sequence) else (sizes,)
    ns = tuple(positive_int(where, "sizes", n) for n in items)
    if len(ns) != len(axes):
        raise ValueError(f"{where}: {len(axes)} axes ({axes_names(axes)}) but {len(ns)} sizes")
    return dict(zip(axes, ns, strict=True))


def _check(name: str, x: AnyTensor, sizes: dict[type[Axis], int], weight: AnyTensor | None) -> None:
    for a, n in sizes.items():
        require(name, (x,), x, a, n)
    if weight is not None and x.dtype is not weight.dtype:
        raise fail(
            name,
            (x,),
            f"the input is {x.dtype.__name__}, the layer's parameters "
            f"{weight.dtype.__name__} (convert the input with astype, or cast the layer)",
        )


class _Norm(eqx.Module, Generic[D, *N]):
    """The call of the norms: ``Tensor[D, *Axes] -> Tensor[D, *Axes]``, the axes normalised
    over among the input's (checked statically for one axis, see the module doc)."""

    @overload
    def __call__(
        self: _Norm[D, A0], x: Tensor[D, *Axes, A0], *, key: jax.Array | None = None
    ) -> Tensor[D, *Axes, A0]: ...
    @overload
    def __call__(
        self: _Norm[D, A0], x: Tensor[D, *Axes, A0, T0], *, key: jax.Array | None = None
    ) -> Tensor[D, *Axes, A0, T0]: ...
    @overload
    def __call__(
        self: _Norm[D, A0], x: Tensor[D, *Axes, A0, T0, T1], *, key: jax.Array | None = None
    ) -> Tensor[D, *Axes, A0, T0, T1]: ...
    @overload
    def __call__(
        self: _Norm[D, A0], x: Tensor[D, A0, *Axes], *, key: jax.Array | None = None
    ) -> Tensor[D, A0, *Axes]: ...
    @overload
    def __call__(
        self: _Norm[D, A0], x: Tensor[D, T0, A0, *Axes], *, key: jax.Array | None = None
    ) -> Tensor[D, T0, A0, *Axes]: ...
    @overload
    def __call__(
        self: _Norm[D, A0],
        x: Tensor[D, T0, T1, T2, T3, T4, T5, *Axes],
        *,
        key: jax.Array | None = None,
    ) -> Tensor[D, *tuple[Any, ...]]: ...
    @overload
    def __call__(
        self: _Norm[D, A0, A1, *Rest], x: Tensor[D, *Axes], *, key: jax.Array | None = None
    ) -> Tensor[D, *Axes]: ...
    def __call__(self, x: AnyTensor, *, key: jax.Array | None = None) -> AnyTensor:
        """Normalise ``x``; ``key`` is ignored."""
        return self._apply(x)

    def _apply(self, x: AnyTensor) -> AnyTensor:
        raise NotImplementedError


@register_layer()
class LayerNorm(_Norm[D, *N]):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the named axes.

    Args:
        axes: the axis (or tuple of axes) normalised over, e.g. ``Embed``.
        sizes: their sizes (an int, or one per axis).
        eps: added to the variance.
        use_weight, use_bias: learn a scale (ones) and a shift (zeros) over ``axes``.
        dtype: parameter dtype.

    Example:
        >>> norm = ax.nn.LayerNorm(Embed, 64)   # LayerNorm[F32, Embed]
        >>> norm(h)                  # Tensor[F32, Batch, Time, Embed], same axes out
    """

    weight: AnyTensor | None
    bias: AnyTensor | None
    axes: tuple[type[Axis], ...] = eqx.field(static=True)
    sizes: tuple[int, ...] = eqx.field(static=True)
    eps: float = eqx.field(static=True)

    # BEGIN GENERATED by tools/gen_overloads.py: the constructor's types (do not edit)
    @overload
    def __init__(
        self: LayerNorm[F32, A0],
        axes: type[A0],
        sizes: Sizes,
        *,
        eps: float = ...,
        use_weight: bool = ...,
        use_bias: bool = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: LayerNorm[DI, A0],
        axes: type[A0],
        sizes: Sizes,
        *,
        eps: float = ...,
        use_weight: bool = ...,
        use_bias: bool = ...,
        dtype: type[DI],
    ) -> None: ...
    @overload
    def __init__(
        self: LayerNorm[F32, A0, A1],
        axes: tuple[type[A0], type[A1]],
        sizes: Sizes,
        *,
        eps: float = ...,
        use_weight: bool = ...,
        use_bias: bool = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: LayerNorm[DI, A0, A1],
        axes: tuple[type[A0], type[A1]],
        sizes: Sizes,
        *,
        eps: float = ...,
        use_weight: bool = ...,
        use_bias: bool = ...,
        dtype: type[DI],
    ) -> None: ...
    @overload
    def __init__(
        self: LayerNorm[Any, *tuple[Any, ...]],
        axes: AxisArg,
        sizes: Sizes,
        *,
        eps: float = ...,
        use_weight: bool = ...,
        use_bias: bool = ...,
        dtype: type[DType] = ...,
    ) -> None: ...
    # END GENERATED
    def __init__(
        self,
        axes: AxisArg,
        sizes: Sizes,
        *,
        eps: float = 1e-5,
        use_weight: bool = True,
        use_bias: bool = True,
        dtype: type[DType] = F32,
    ) -> None:
        self.axes = as_axes(axes, "LayerNorm")
        shape = _params(self.axes, sizes, "LayerNorm")
        self.sizes = tuple(shape.values())
        key = jax.random.key(0)  # unused by the constant initialisers
        self.weight = _init.ones()(key, shape, dtype=dtype) if use_weight else None
        self.bias = _init.zeros()(key, shape, dtype=dtype) if use_bias else None
        self.eps = positive_float("LayerNorm", "eps", eps)

    def _apply(self, x: AnyTensor) -> AnyTensor:
        _check(
            f"LayerNorm({axes_names(self.axes)})", x, dict(zip(self.axes, self.sizes)), self.weight
        )
        # the statistics and their combination in float32 for F16/BF16, cast back once: the
        # variance of F16 values ±400 (160 000) does not fit F16
        wide = widened(x)
        centred = wide - broadcast(mean(wide, self.axes), wide)
        out = centred * broadcast(rsqrt(var(wide, self.axes) + self.eps), wide)
        if self.weight is not None:
            out = out * broadcast(widened(self.weight), wide)
        if self.bias is not None:
            out = out + broadcast(widened(self.bias), wide)
        return narrowed(out, x.dtype)


@register_layer()
class RMSNorm(_Norm[D, *N]):
    """``x / sqrt(mean(x²) + eps) * weight`` over the named axes.

    Example:
        >>> ax.nn.RMSNorm(Embed, 64)(h)       # RMSNorm[F32, Embed]; same axes out
    """

    weight: AnyTensor | None
    axes: tuple[type[Axis], ...] = eqx.field(static=True)
    sizes: tuple[int, ...] = eqx.field(static=True)
    eps: float = eqx.field(static=True)

    # BEGIN GENERATED by tools/gen_overloads.py: the constructor's types (do not edit)
    @overload
    def __init__(
        self: RMSNorm[F32, A0],
        axes: type[A0],
        sizes: Sizes,
        *,
        eps: float = ...,
        use_weight: bool = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: RMSNorm[DI, A0],
        axes: type[A0],
        sizes: Sizes,
        *,
        eps: float = ...,
        use_weight: bool = ...,
        dtype: type[DI],
    ) -> None: ...
    @overload
    def __init__(
        self: RMSNorm[F32, A0, A1],
        axes: tuple[type[A0], type[A1]],
        sizes: Sizes,
        *,
        eps: float = ...,
        use_weight: bool = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: RMSNorm[DI, A0, A1],
        axes: tuple[type[A0], type[A1]],
        sizes: Sizes,
        *,
        eps: float = ...,
        use_weight: bool = ...,
        dtype: type[DI],
    ) -> None: ...
    @overload
    def __init__(
        self: RMSNorm[Any, *tuple[Any, ...]],
        axes: AxisArg,
        sizes: Sizes,
        *,
        eps: float = ...,
        use_weight: bool = ...,
        dtype: type[DType] = ...,
    ) -> None: ...
    # END GENERATED
    def __init__(
        self,
        axes: AxisArg,
        sizes: Sizes,
        *,
        eps: float = 1e-5,
        use_weight: bool = True,
        dtype: type[DType] = F32,
    ) -> None:
        self.axes = as_axes(axes, "RMSNorm")
        shape = _params(self.axes, sizes, "RMSNorm")
        self.sizes = tuple(shape.values())
        self.weight = _init.ones()(jax.random.key(0), shape, dtype=dtype) if use_weight else None
        self.eps = positive_float("RMSNorm", "eps", eps)

    def _apply(self, x: AnyTensor) -> AnyTensor:
        _check(
            f"RMSNorm({axes_names(self.axes)})", x, dict(zip(self.axes, self.sizes)), self.weight
        )
        wide = widened(x)  # the mean square in float32 for F16/BF16 (400² does not fit F16)
        out = wide * broadcast(rsqrt(mean(wide * wide, self.axes) + self.eps), wide)
        if self.weight is not None:
            out = out * broadcast(widened(self.weight), wide)
        return narrowed(out, x.dtype)
