"""``max_pool`` and ``avg_pool``: windowed reductions over named spatial axes.

Windows slide over the named axes only; every other axis (batch, channels) is left alone,
in any position, so no layout change is ever needed. Lowered to one
``lax.reduce_window``; the backward is the op's own method, built from ``jax.vjp`` of that
forward (``select_and_scatter_add`` for max, a padded window sum for mean).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal, TypeVar, TypeVarTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..core import AnyTensor, Axis, DType, Op, Tensor, TensorType
from ..core._internal import (
    HasType,
    axes_names,
    axis_name,
    check_axis_label,
    register_op,
    require_floating,
)
from ._conv import Padding, normalize_padding, per_axis, resolve_padding, window_out

__all__ = ["Pool", "max_pool", "avg_pool"]

# Remaining Any: the dtype/axes parameters of the public Tensor aliases.

D = TypeVar("D", bound=DType)
Array = jax.Array
AnyOf = Tensor[D, *tuple[Any, ...]]
Axes = TypeVarTuple("Axes")


@register_op("max_pool", "avg_pool", kind="axis")
class Pool(Op):
    """Max or mean over windows of the named ``spatial`` axes.

    The mean divides by the full window size, padding included (as Equinox and Flax do).
    """

    def __init__(
        self,
        kind: Literal["max", "avg"],
        spatial: tuple[type[Axis], ...],
        window: int | Sequence[int],
        stride: int | Sequence[int] | None = None,
        padding: Padding = "VALID",
    ) -> None:
        if kind not in ("max", "avg"):
            raise ValueError(f"Pool: kind must be 'max' or 'avg', got {kind!r}")
        self.kind = kind
        self.spatial: tuple[type[Axis], ...] = tuple(check_axis_label(a, "Pool") for a in spatial)
        n = len(self.spatial)
        if n == 0 or len(set(self.spatial)) != n:
            raise ValueError(f"Pool: spatial must name distinct axes, got ({axes_names(spatial)})")
        where = f"{kind}_pool"
        self.window: tuple[int, ...] = per_axis(window, n, "window", where)
        self.stride: tuple[int, ...] = (
            self.window if stride is None else per_axis(stride, n, "stride", where)
        )
        self.padding: str | tuple[tuple[int, int], ...] = normalize_padding(padding, n, where)

    @property
    def accumulates(self) -> bool:  # type: ignore[override]  # a property over Op's attribute
        """An average sums its window: in float32 for F16/BF16 operands (a max does not)."""
        return self.kind == "avg"

    def describe(self) -> str:
        name = "MaxPool" if self.kind == "max" else "AvgPool"
        return f"{name}({axes_names(self.spatial)}, window={self.window})"

    def infer(self, x: HasType) -> TensorType:
        require_floating(self, (x,))
        for a in self.spatial:
            if a not in x.axes:
                raise self.fail((x,), f"{axis_name(a)} is not an axis of the tensor")
        sizes = dict(zip(x.axes, x.shape, strict=True))
        pads = resolve_padding(
            self.padding, [sizes[a] for a in self.spatial], self.window, self.stride
        )
        out = dict(sizes)
        for a, k, s, p in zip(self.spatial, self.window, self.stride, pads, strict=True):
            m = window_out(sizes[a], k, s, p)
            if m is not None and m < 1:
                raise self.fail(
                    (x,),
                    f"the window ({k}) is larger than the padded "
                    f"{axis_name(a)} axis (size {sizes[a]})",
                )
            out[a] = m
        return TensorType(x.dtype, x.axes, tuple(out[a] for a in x.axes))

    def run(self, xa: Array, axes: tuple[type[Axis], ...]) -> Array:
        """The pooling on a raw array laid out as ``axes``."""
        pos = {a: i for i, a in enumerate(axes)}
        pads = resolve_padding(
            self.padding, [xa.shape[pos[a]] for a in self.spatial], self.window, self.stride
        )
        dims, strides = [1] * xa.ndim, [1] * xa.ndim
        padding: list[tuple[int, int]] = [(0, 0)] * xa.ndim
        for a, k, s, p in zip(self.spatial, self.window, self.stride, pads, strict=True):
            dims[pos[a]], strides[pos[a]], padding[pos[a]] = k, s, p
        # numpy inits: a jnp array made inside jax.jit is a tracer, and lax.reduce_window
        # then cannot see the monoid (max/-inf, add/0) and builds a non-differentiable window
        if self.kind == "max":
            init = np.array(-np.inf, xa.dtype)
            peak: Array = lax.reduce_window(xa, init, lax.max, dims, strides, padding)
            return peak
        total: Array = lax.reduce_window(xa, np.array(0, xa.dtype), lax.add, dims, strides, padding)
        return total / jnp.array(math.prod(self.window), xa.dtype)

    def forward(self, x: AnyTensor) -> Array:
        return self.run(x.array, x.axes)

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        def run(xa: Array) -> Array:
            return self.run(xa, x.axes)

        _, vjp = jax.vjp(run, x.array)
        grads: tuple[Array] = vjp(dy.array)
        return grads


def _spatial(spatial: type[Axis] | tuple[type[Axis], ...]) -> tuple[type[Axis], ...]:
    return spatial if isinstance(spatial, tuple) else (spatial,)


def max_pool(
    x: Tensor[D, *Axes],
    spatial: type[Axis] | tuple[type[Axis], ...],
    window: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: Padding = "VALID",
) -> Tensor[D, *Axes]:
    """Maximum over windows of the named axes (stride defaults to the window).

    Example:
        >>> ax.max_pool(feature_maps, (Height, Width), window=2)   # 28x28 -> 14x14
    """
    return Pool("max", _spatial(spatial), window, stride, padding).same_type(x)


def avg_pool(
    x: Tensor[D, *Axes],
    spatial: type[Axis] | tuple[type[Axis], ...],
    window: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: Padding = "VALID",
) -> Tensor[D, *Axes]:
    """Mean over windows of the named axes (padding counts as zeros in the mean).

    Example:
        >>> ax.avg_pool(feature_maps, (Height, Width), window=2)
    """
    return Pool("avg", _spatial(spatial), window, stride, padding).same_type(x)
