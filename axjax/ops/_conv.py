"""``conv``: N-d convolution over named spatial axes (the paper's §6.2 Conv2D primitive).

The kernel's axes say what it does. Its spatial axes carry the same labels as the input's
(``Height`` in a kernel is "the kernel's extent along Height"); the one other axis it
shares with the input is the input channel axis, summed away; its last axis, absent from
the input, is the output channel, which takes the input channel's place in the result::

    x: Tensor[F32, Batch, Height, Width, Chan]         (any order)
    w: Tensor[F32, Feature, Chan, Height, Width]       (any order)
    conv(x, w, spatial=(Height, Width)) -> Tensor[F32, Batch, Height', Width', Feature]

The XLA dimension numbers are read from the axis positions, so no operand is transposed
(one batch axis, or none, needs no data movement at all; several batch axes are merged by a
reshape). The backward is the op's own method, built from ``jax.vjp`` of the
``lax.conv_general_dilated`` forward (the transposed convolutions).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeVar, cast, overload

import jax
import jax.numpy as jnp
from jax import lax

from ..core import AnyTensor, Axis, DType, Op, Tensor, TensorType
from ..core._internal import (
    HasType,
    axes_names,
    axis_name,
    check_axis_label,
    non_negative_int,
    positive_int,
    positive_ints,
    register_op,
    require_floating,
    result_dtype,
)

__all__ = [
    "Conv",
    "conv",
    "Padding",
    "per_axis",
    "normalize_padding",
    "resolve_padding",
    "window_out",
]

# Remaining Any: the dtype/axes parameters of the public Tensor aliases.

D = TypeVar("D", bound=DType)
Array = jax.Array
AnyOf = Tensor[D, *tuple[Any, ...]]
#: ``"SAME"``, ``"VALID"``, one int for every side, an int per axis, or ``(lo, hi)`` per axis.
Padding = str | int | Sequence[int] | Sequence[tuple[int, int]]


def per_axis(value: int | Sequence[int], n: int, what: str, where: str = "Conv") -> tuple[int, ...]:
    """One positive int per spatial axis (a window, a stride, a dilation)."""
    return positive_ints(where, what, value, n)


def normalize_padding(
    padding: Padding, n: int, where: str = "Conv"
) -> str | tuple[tuple[int, int], ...]:
    """``"SAME"``/``"VALID"``, or explicit non-negative ``(lo, hi)`` pads per axis."""
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "VALID"):
            raise ValueError(
                f"{where}: padding must be 'SAME', 'VALID' or explicit, got {padding!r}"
            )
        return padding.upper()
    if not isinstance(padding, Sequence):
        p = non_negative_int(where, "padding", padding)
        return ((p, p),) * n
    pads: list[Any] = list(padding)
    if len(pads) != n:
        raise ValueError(
            f"{where}: padding needs one entry per spatial axis ({n}), got {padding!r}"
        )
    out: list[tuple[int, int]] = []
    for p in pads:
        lo, hi = (p, p) if not isinstance(p, Sequence) or isinstance(p, str) else tuple(p)
        out.append((non_negative_int(where, "padding", lo), non_negative_int(where, "padding", hi)))
    return tuple(out)


@overload
def resolve_padding(
    padding: str | tuple[tuple[int, int], ...],
    sizes: Sequence[int],
    windows: Sequence[int],
    strides: Sequence[int],
) -> list[tuple[int, int]]: ...
@overload
def resolve_padding(
    padding: str | tuple[tuple[int, int], ...],
    sizes: Sequence[int | None],
    windows: Sequence[int],
    strides: Sequence[int],
) -> Sequence[tuple[int, int] | None]: ...
def resolve_padding(
    padding: str | tuple[tuple[int, int], ...],
    sizes: Sequence[int | None],
    windows: Sequence[int],
    strides: Sequence[int],
) -> Sequence[tuple[int, int] | None]:
    """Explicit ``(lo, hi)`` pads per axis (``None`` where a ``SAME`` size is unknown: never
    when every size is known, as on arrays). ``padding`` is as :func:`normalize_padding`
    leaves it: ``"VALID"``, ``"SAME"`` or the pads."""
    if padding == "VALID":
        return [(0, 0)] * len(sizes)
    if isinstance(padding, str):  # "SAME"
        out: list[tuple[int, int] | None] = []
        for n, k, s in zip(sizes, windows, strides, strict=True):
            if n is None:
                out.append(None)
                continue
            total = max((-(-n // s) - 1) * s + k - n, 0)
            out.append((total // 2, total - total // 2))
        return out
    return list(padding)


def window_out(n: int | None, k: int, s: int, pad: tuple[int, int] | None) -> int | None:
    """Output length of a window of (effective) size ``k``, stride ``s`` over ``n``."""
    if n is None or pad is None:
        return None
    return (n + pad[0] + pad[1] - k) // s + 1


@register_op("conv", kind="axis")
class Conv(Op):
    """Convolution over the named ``spatial`` axes; see the module docstring."""

    def __init__(
        self,
        spatial: tuple[type[Axis], ...],
        stride: int | Sequence[int] = 1,
        padding: Padding = "VALID",
        dilation: int | Sequence[int] = 1,
        groups: int = 1,
    ) -> None:
        self.spatial: tuple[type[Axis], ...] = tuple(check_axis_label(a, "Conv") for a in spatial)
        n = len(self.spatial)
        if n == 0 or len(set(self.spatial)) != n:
            raise ValueError(f"Conv: spatial must name distinct axes, got ({axes_names(spatial)})")
        self.stride: tuple[int, ...] = per_axis(stride, n, "stride", "conv")
        self.dilation: tuple[int, ...] = per_axis(dilation, n, "dilation", "conv")
        self.padding: str | tuple[tuple[int, int], ...] = normalize_padding(padding, n, "conv")
        self.groups: int = positive_int("conv", "groups", groups)

    def describe(self) -> str:
        return f"Conv{len(self.spatial)}D({axes_names(self.spatial)})"

    def channels(self, x: HasType, w: HasType) -> tuple[type[Axis], type[Axis]]:
        """The input and output channel axes, read from the kernel's axes."""
        if len(w.axes) != len(self.spatial) + 2:
            raise self.fail(
                (x, w),
                f"the kernel needs {len(self.spatial) + 2} axes: "
                f"{axes_names(self.spatial)}, an input and an output channel",
            )
        for a in self.spatial:
            if a not in x.axes or a not in w.axes:
                which = "input" if a not in x.axes else "kernel"
                raise self.fail(
                    (x, w), f"spatial axis {axis_name(a)} is not an axis of the {which}"
                )
        rest = [a for a in w.axes if a not in self.spatial]
        shared = [a for a in rest if a in x.axes]
        if len(shared) != 1:
            raise self.fail(
                (x, w),
                "the kernel must share exactly one non-spatial axis with "
                "the input (the input channel axis), not "
                f"{len(shared)}{': ' + axes_names(shared) if shared else ''}",
            )
        return shared[0], next(a for a in rest if a is not shared[0])

    def infer(self, x: HasType, w: HasType) -> TensorType:
        dtype = result_dtype(self, (x, w))
        require_floating(self, (x, w))
        cin, cout = self.channels(x, w)
        xs, ws = dict(zip(x.axes, x.shape, strict=True)), dict(zip(w.axes, w.shape, strict=True))
        n_in, k_in, k_out = xs[cin], ws[cin], ws[cout]
        if n_in is not None and k_in is not None and n_in != k_in * self.groups:
            raise self.fail(
                (x, w),
                f"the input has {n_in} {axis_name(cin)} channels but the "
                f"kernel reads {k_in} x {self.groups} groups",
            )
        if k_out is not None and k_out % self.groups:
            raise self.fail(
                (x, w), f"{k_out} output channels do not split into {self.groups} groups"
            )
        sizes = {a: xs[a] for a in self.spatial}
        eff = [
            (cast(int, ws[a]) - 1) * d + 1 for a, d in zip(self.spatial, self.dilation, strict=True)
        ]
        pads = resolve_padding(self.padding, list(sizes.values()), eff, self.stride)
        out: dict[type[Axis], int | None] = {}
        for a, k, s, p in zip(self.spatial, eff, self.stride, pads, strict=True):
            m = window_out(sizes[a], k, s, p)
            if m is not None and m < 1:
                raise self.fail(
                    (x, w),
                    f"the kernel (extent {k}) is larger than the padded "
                    f"{axis_name(a)} axis (size {sizes[a]})",
                )
            out[a] = m
        axes = tuple(cout if a is cin else a for a in x.axes)
        shape = tuple(
            k_out if a is cin else out.get(a, n) for a, n in zip(x.axes, x.shape, strict=True)
        )
        return TensorType(dtype, axes, shape)

    def run(
        self, xa: Array, wa: Array, x_axes: tuple[type[Axis], ...], w_axes: tuple[type[Axis], ...]
    ) -> Array:
        """The convolution on raw arrays laid out as ``x_axes`` and ``w_axes``."""
        cin = next(a for a in w_axes if a in x_axes and a not in self.spatial)
        cout = next(a for a in w_axes if a not in x_axes)
        axes: list[type[Axis] | None] = list(x_axes)
        batch = [i for i, a in enumerate(axes) if a not in self.spatial and a is not cin]
        perm: list[int] | None = None
        bshape: tuple[int, ...] = ()
        if len(batch) != 1:  # merge several batch axes (or add one) by a reshape
            if batch and batch != list(range(batch[0], batch[0] + len(batch))):
                perm = batch + [i for i in range(len(axes)) if i not in batch]
                xa, axes = jnp.transpose(xa, perm), [axes[i] for i in perm]
                batch = list(range(len(batch)))
            b0 = batch[0] if batch else 0
            bshape = tuple(xa.shape[i] for i in batch)
            xa = xa.reshape(xa.shape[:b0] + (math.prod(bshape),) + xa.shape[b0 + len(batch) :])
            axes = axes[:b0] + [None] + axes[b0 + len(batch) :]
        lhs = (
            axes.index(None) if len(batch) != 1 else batch[0],
            axes.index(cin),
            *[axes.index(a) for a in self.spatial],
        )
        rhs = (w_axes.index(cout), w_axes.index(cin), *[w_axes.index(a) for a in self.spatial])
        eff = [
            (wa.shape[w_axes.index(a)] - 1) * d + 1
            for a, d in zip(self.spatial, self.dilation, strict=True)
        ]
        pads = resolve_padding(self.padding, [xa.shape[i] for i in lhs[2:]], eff, self.stride)
        ya = lax.conv_general_dilated(
            xa,
            wa,
            self.stride,
            pads,
            rhs_dilation=self.dilation,
            dimension_numbers=lax.ConvDimensionNumbers(lhs, rhs, lhs),
            feature_group_count=self.groups,
        )
        if len(batch) != 1:
            b0 = lhs[0]
            ya = ya.reshape(ya.shape[:b0] + bshape + ya.shape[b0 + 1 :])
            if perm is not None:
                ya = jnp.transpose(ya, [perm.index(i) for i in range(len(perm))])
        return ya

    def forward(self, x: AnyTensor, w: AnyTensor) -> Array:
        return self.run(x.array, w.array, x.axes, w.axes)

    def backward(
        self, dy: AnyTensor, y: AnyTensor, x: AnyTensor, w: AnyTensor
    ) -> tuple[Array, Array]:
        def run(xa: Array, wa: Array) -> Array:
            return self.run(xa, wa, x.axes, w.axes)

        _, vjp = jax.vjp(run, x.array, w.array)
        grads: tuple[Array, Array] = vjp(dy.array)
        return grads


def conv(
    x: AnyOf[D],
    kernel: AnyOf[D],
    spatial: type[Axis] | tuple[type[Axis], ...],
    stride: int | Sequence[int] = 1,
    padding: Padding = "VALID",
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
) -> AnyOf[D]:
    """Convolve ``x`` with ``kernel`` over the named ``spatial`` axes.

    The kernel has the spatial axes, the input channel axis (shared with ``x``) and an
    output channel axis (new), in any order; the output channel replaces the input channel.
    Every other axis of ``x`` is a batch axis. ``padding`` is ``"SAME"``, ``"VALID"``, an
    int, or ``(lo, hi)`` per spatial axis; ``dilation`` spaces the kernel taps; ``groups``
    splits the channels (``groups = channels`` is a depthwise convolution).

    Example:
        >>> w = ax.normal(key, (32, 1, 3, 3), Feature, Chan, Height, Width)
        >>> ax.conv(images, w, spatial=(Height, Width), padding="SAME")
        Tensor[F32, Batch=128, Height=28, Width=28, Feature=32]
    """
    axes = spatial if isinstance(spatial, tuple) else (spatial,)
    return Conv(axes, stride, padding, dilation, groups)(x, kernel)
