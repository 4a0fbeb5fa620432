"""Small helpers shared by the layers: messages, axis arguments, key splitting."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax

from ..core import AnyTensor, Axis, AxisError
from ..core._internal import (
    axes_names,
    axis_name,
    check_axis_label,
    fail,
    flatten,
    is_symbolic,
    is_tensor,
    unflatten,
    wrap,
)

__all__ = [
    "AxisArg",
    "as_axes",
    "distinct",
    "flatten",
    "forbid",
    "is_symbolic",
    "is_tensor",
    "known_size",
    "require",
    "size_of",
    "split",
    "tensors",
    "unflatten",
    "wrap",
]

AxisArg = type[Axis] | tuple[type[Axis], ...]


def as_axes(arg: AxisArg, where: str) -> tuple[type[Axis], ...]:
    """One axis or a tuple of axes -> a checked tuple."""
    axes = arg if isinstance(arg, tuple) else (arg,)
    if not axes:
        raise TypeError(f"{where}: name at least one axis")
    return tuple(check_axis_label(a, where) for a in axes)


def size_of(x: AnyTensor, axis: type[Axis]) -> int | None:
    """The size of ``axis`` in a Tensor or graph node (``None`` when not yet known)."""
    return dict(zip(x.axes, x.shape, strict=True)).get(axis)


def known_size(t: AnyTensor, axis: type[Axis]) -> int:
    """The size of ``axis``; a graph node with an open size raises the standard "Cannot read
    the size" error."""
    n = dict(zip(t.axes, t.shape, strict=True))[axis]
    if n is None:  # a graph node with an open size
        return t.size(axis)  # raises the standard "Cannot read the size" error
    return int(n)


def tensors(
    layer: str, xs: Sequence[object], x: object, what: str, axes: Sequence[type[Axis]] = ()
) -> None:
    """``TypeError`` unless ``x`` and the other operands ``xs`` are Tensors (or graph nodes):
    a layer reads axes by name, which a raw ``jax.Array`` does not have."""
    for t in (x, *xs):
        if is_tensor(t) or is_symbolic(t):
            continue
        shape = getattr(t, "shape", None)
        got = (
            "a jax.Array"
            if isinstance(t, jax.Array)
            else f"a {type(t).__module__.split('.')[0]}.{type(t).__name__}"
            if shape is not None
            else f"a {type(t).__name__}"
        )
        got += "" if shape is None else f" of shape {tuple(shape)}"
        role = what if t is x else "operand"
        reads = f" (it reads axis {axes_names(axes)})" if axes else ""
        raise TypeError(
            f"{layer} takes a Tensor as its {role}, got {got}: a layer reads axes by name"
            f"{reads}, so wrap the array with ax.tensor(array, *axes), one axis label per "
            "dimension"
        )


def require(
    layer: str,
    xs: Sequence[Any],
    x: AnyTensor,
    axis: type[Axis],
    size: int | None,
    what: str = "input",
) -> None:
    """``AxisError`` unless ``x`` has ``axis`` (of ``size``, when both are known); a
    ``TypeError`` if ``x`` or an operand is not a Tensor (a raw array)."""
    tensors(layer, xs, x, what, (axis,))
    if axis not in x.axes:
        raise fail(
            layer,
            xs,
            f"{axis_name(axis)} is not an axis of the {what} (the layer "
            f"reads {axis_name(axis)}; rename or transpose the {what} first)",
            subject=x,
        )
    n = size_of(x, axis)
    if size is not None and n is not None and n != size:
        raise fail(
            layer,
            xs,
            f"axis {axis_name(axis)} of the {what} has size {n}, the layer expects {size}",
            subject=x,
        )


def forbid(
    layer: str, xs: Sequence[Any], x: AnyTensor, axes: Sequence[type[Axis]], what: str = "input"
) -> None:
    """``AxisError`` if ``x`` already has one of ``axes`` (the layer would add it twice); a
    ``TypeError`` if ``x`` or an operand is not a Tensor."""
    tensors(layer, xs, x, what)
    clash = [a for a in axes if a in x.axes]
    if clash:
        raise fail(
            layer,
            xs,
            f"the {what} already has axis {axis_name(clash[0])}, which the "
            f"layer produces (rename it first; a tensor never has an axis twice)",
            subject=x,
        )


def distinct(where: str, axes: Sequence[type[Axis]]) -> None:
    """``AxisError`` if a layer is configured with the same axis twice."""
    if len(set(axes)) != len(axes):
        raise AxisError(
            f"{where}: the axes ({axes_names(axes)}) must all differ (a weight "
            "cannot have the same axis twice; use a distinct label such as "
            "Hidden2 for the second one)"
        )


def split(key: jax.Array | None, n: int) -> list[jax.Array | None]:
    """``n`` keys from ``key`` (or ``n`` Nones)."""
    if key is None:
        return [None] * n
    return list(jax.random.split(key, n))
