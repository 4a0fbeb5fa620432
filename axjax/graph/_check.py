"""Checking what nodes are given: the sizes an ``Input`` is declared with, and concrete
values against a node's type (a Param's new value, a compiled graph's arguments)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import jax

from ..core import AnyTensor, Axis, AxisError, Tensor, TensorType
from ..core._internal import axis_name, describe, is_symbolic, non_negative_int

if TYPE_CHECKING:
    from ._nodes import AnyNode

__all__ = ["input_sizes", "check_value", "mismatch"]


def input_sizes(
    axes: tuple[type[Axis], ...],
    sizes: Mapping[type[Axis], int | None] | Sequence[int | None] | None,
) -> tuple[int | None, ...]:
    """The shape of an ``Input`` over ``axes`` from its ``sizes=`` (``None`` where open)."""
    if sizes is None:
        return (None,) * len(axes)
    if isinstance(sizes, Mapping):
        for a in sizes:
            if a not in axes:
                raise AxisError(
                    f"Input: sizes names axis {axis_name(a)}, which is not one of "
                    f"its axes ({', '.join(axis_name(b) for b in axes)})"
                )
        shape = tuple(sizes.get(a) for a in axes)
    else:
        shape = tuple(sizes)
        if len(shape) != len(axes):
            raise TypeError(
                f"Input: {len(shape)} sizes for {len(axes)} axes (give one int or "
                "None per axis, or a dict {Axis: size})"
            )
    return tuple(None if n is None else non_negative_int("Input", "sizes", n) for n in shape)


def check_value(node: AnyNode, value: object, where: str) -> None:
    """Raise unless ``value`` is a Tensor with the node's dtype, axes and known sizes."""
    if not isinstance(value, Tensor) or is_symbolic(value):  # a node has no value
        raise TypeError(
            f"{where}: the value of {node.label()} must be a Tensor, got {type(value).__name__}"
        )
    why = mismatch(node.type, value)
    if why:
        raise AxisError(
            f"{where}: {node.label()} is {describe(node.type)}, got {describe(value)}: {why}"
        )


def mismatch(want: TensorType, got: AnyTensor) -> str:
    """Why a concrete Tensor does not fit a node's type ('' when it fits)."""
    if got.axes != want.axes:
        if set(got.axes) == set(want.axes) and len(got.axes) == len(want.axes):
            return "same axes in a different order (transpose it first)"
        return "the axes differ"
    if got.dtype is not want.dtype:
        numpy_dtype = want.dtype.numpy
        if jax.dtypes.canonicalize_dtype(numpy_dtype) != numpy_dtype:  # 64-bit, x64 off
            return (
                f"the Input is declared {want.dtype.__name__}, and its data became "
                f"{got.dtype.__name__} because jax_enable_x64 is off (JAX makes no "
                f"{want.dtype.__name__} then: enable it with "
                'jax.config.update("jax_enable_x64", True) before building the data, or '
                f"declare the Input {got.dtype.__name__})"
            )
        return (
            f"dtype {got.dtype.__name__} differs (convert it with astype(ax.{want.dtype.__name__}))"
        )
    for a, n, m in zip(want.axes, want.shape, got.shape, strict=True):
        if n is not None and n != m:
            return f"axis {axis_name(a)} has size {m}, expected {n}"
    return ""
