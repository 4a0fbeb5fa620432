"""Shape ops, by axis and never by position: expand_dims, squeeze, transpose, rename,
broadcast, tile, concat, stack, unstack, flatten, unflatten.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, TypeVar, TypeVarTuple, cast

import jax
import jax.numpy as jnp

from ..core import AnyTensor, Axis, DType, Op, Tensor, TensorType
from ..core._internal import (
    HasType,
    axes_names,
    axis_name,
    cached,
    check_axis_label,
    check_unique_axes,
    index_int,
    non_negative_int,
    positive_int,
    positive_sizes,
    register_op,
    result_dtype,
)

D = TypeVar("D", bound=DType)
Axes = TypeVarTuple("Axes")
Array = jax.Array
AnyOf = Tensor[D, *tuple[Any, ...]]
# Remaining Any: the dtype/axes parameters of the public Tensor aliases.


def _missing(op: Op[Any], x: HasType, axis: type[Axis]) -> None:
    if axis not in x.axes:
        raise op.fail(
            (x,),
            f"{axis_name(axis)} is not an axis of the tensor (name one of {axes_names(x.axes)})",
        )


def _present(op: Op[Any], x: HasType, axis: type[Axis]) -> None:
    if axis in x.axes:
        raise op.fail(
            (x,),
            f"axis {axis_name(axis)} already present (a tensor never has the "
            "same axis twice; rename one)",
        )


def _perm(src: Sequence[type[Axis]], dst: Sequence[type[Axis]]) -> tuple[int, ...]:
    return tuple(src.index(a) for a in dst)


def _transpose(arr: Array, perm: tuple[int, ...]) -> Array:
    """``jnp.transpose`` that emits nothing for the identity permutation."""
    return arr if perm == tuple(range(len(perm))) else jnp.transpose(arr, perm)


# ----------------------------------------------------------------------------- expand/squeeze
@register_op(
    "expand_dims",
    kind="positional",
    doc="Insert a new axis of size 1 at position ``at`` (negative counts from the end).",
)
class ExpandDims(Op):
    """Insert a new size-1 axis ``X`` at position ``at``; backward squeezes it."""

    def __init__(self, axis: type[Axis], at: int = 0) -> None:
        self.axis = check_axis_label(axis, "ExpandDims")
        self.at = index_int("expand_dims", "at", at)

    def describe(self) -> str:
        return f"ExpandDims({axis_name(self.axis)}, at={self.at})"

    def _index(self, x: HasType) -> int:
        r = len(x.axes)
        return self.at if self.at >= 0 else r + 1 + self.at

    def infer(self, x: HasType) -> TensorType:
        r = len(x.axes)
        if not -r - 1 <= self.at <= r:
            raise self.fail(
                (x,), f"index {self.at} out of range for rank {r} (use {-r - 1} to {r})"
            )
        _present(self, x, self.axis)
        i = self._index(x)
        return TensorType(
            x.dtype, x.axes[:i] + (self.axis,) + x.axes[i:], x.shape[:i] + (1,) + x.shape[i:]
        )

    def forward(self, x: AnyTensor) -> Array:
        return jnp.expand_dims(x.array, self._index(x))

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        return (jnp.squeeze(dy.array, self._index(x)),)


@register_op("squeeze", kind="axis", doc="Remove the size-1 axis ``axis``.")
class Squeeze(Op):
    """Remove a size-1 axis ``X``; backward re-inserts it."""

    def __init__(self, axis: type[Axis]) -> None:
        self.axis = check_axis_label(axis, "Squeeze")

    def describe(self) -> str:
        return f"Squeeze({axis_name(self.axis)})"

    def infer(self, x: HasType) -> TensorType:
        _missing(self, x, self.axis)
        i = x.axes.index(self.axis)
        if x.shape[i] not in (1, None):
            raise self.fail(
                (x,),
                f"axis {axis_name(self.axis)} has size {x.shape[i]}, not 1 "
                "(reduce it with ax.sum/ax.mean or pick one entry with ax.index)",
            )
        return TensorType(x.dtype, x.axes[:i] + x.axes[i + 1 :], x.shape[:i] + x.shape[i + 1 :])

    def forward(self, x: AnyTensor) -> Array:
        return jnp.squeeze(x.array, x.axes.index(self.axis))

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        return (jnp.expand_dims(dy.array, x.axes.index(self.axis)),)


# ----------------------------------------------------------------------------- transpose/rename
@register_op("transpose", kind="axis")
class Transpose(Op):
    """Reorder the axes to the given permutation; backward applies the inverse."""

    def __init__(self, axes: tuple[type[Axis], ...]) -> None:
        self.axes = tuple(check_axis_label(a, "Transpose") for a in axes)

    def describe(self) -> str:
        return f"Transpose({axes_names(self.axes)})"

    def infer(self, x: HasType) -> TensorType:
        if (
            len(self.axes) != len(x.axes)
            or set(self.axes) != set(x.axes)
            or len(set(self.axes)) != len(self.axes)
        ):
            raise self.fail(
                (x,),
                f"({axes_names(self.axes)}) is not a permutation of the "
                f"tensor's axes (name each of {axes_names(x.axes)} once)",
            )
        sizes = dict(zip(x.axes, x.shape, strict=True))
        return TensorType(x.dtype, self.axes, tuple(sizes[a] for a in self.axes))

    def forward(self, x: AnyTensor) -> Array:
        return _transpose(x.array, _perm(x.axes, self.axes))

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        return (_transpose(dy.array, _perm(self.axes, x.axes)),)


def transpose(x: AnyOf[D], *axes: type[Axis]) -> AnyOf[D]:
    """Reorder the axes: ``ax.transpose(t, Width, Height)`` (a permutation of t's axes)."""
    if x.axes == axes:
        return x
    return cached(Transpose, axes)(x)


@register_op("rename", kind="axis", doc="Relabel one axis: ``ax.rename(t, Hidden, In)``.")
class Rename(Op):
    """Relabel axis ``old`` as ``new`` (no data movement); backward renames back."""

    def __init__(self, old: type[Axis], new: type[Axis]) -> None:
        self.old, self.new = check_axis_label(old, "Rename"), check_axis_label(new, "Rename")

    def describe(self) -> str:
        return f"Rename({axis_name(self.old)} -> {axis_name(self.new)})"

    def infer(self, x: HasType) -> TensorType:
        _missing(self, x, self.old)
        if self.new is not self.old:
            _present(self, x, self.new)
        return TensorType(x.dtype, tuple(self.new if a is self.old else a for a in x.axes), x.shape)

    def forward(self, x: AnyTensor) -> Array:
        return x.array

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        return (dy.array,)


# ----------------------------------------------------------------------------- broadcast/tile
@register_op("broadcast", kind="axis")
class Broadcast(Op):
    """Broadcast to ``axes`` with ``sizes`` (a superset of the operand's axes, any order).

    Backward sums the added axes and transposes back.
    """

    def __init__(self, axes: tuple[type[Axis], ...], shape: tuple[int | None, ...]) -> None:
        self.axes = tuple(check_axis_label(a, "Broadcast") for a in axes)
        check_unique_axes(self.axes, "Broadcast")
        self.shape = tuple(shape)

    def describe(self) -> str:
        return f"Broadcast({axes_names(self.axes)})"

    def infer(self, x: HasType) -> TensorType:
        target = TensorType(x.dtype, self.axes, self.shape)
        for a, n in zip(x.axes, x.shape, strict=True):
            if a not in self.axes:
                raise self.fail(
                    (x, target),
                    f"{axis_name(a)} is not an axis of the target "
                    "(broadcast only adds axes; reduce or index it away first)",
                )
            m = self.shape[self.axes.index(a)]
            if n is not None and m is not None and n != m:
                raise self.fail(
                    (x, target), f"axis {axis_name(a)} has size {n}, the target has {m}"
                )
        return target

    def forward(self, x: AnyTensor) -> Array:
        order = [a for a in self.axes if a in x.axes]
        arr = _transpose(x.array, _perm(x.axes, order))
        kept = tuple(i for i, a in enumerate(self.axes) if a in x.axes)
        return jax.lax.broadcast_in_dim(arr, self.shape, kept)

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        new = tuple(i for i, a in enumerate(self.axes) if a not in x.axes)
        g = jnp.sum(dy.array, axis=new) if new else dy.array
        order = [a for a in self.axes if a in x.axes]
        return (_transpose(g, _perm(order, x.axes)),)


def broadcast(
    x: AnyOf[D], to: HasType | tuple[type[Axis], ...], sizes: dict[type[Axis], int] | None = None
) -> AnyOf[D]:
    """Broadcast explicitly to the axes (and sizes) of ``to``.

    ``to`` is a Tensor (its axes and sizes), or a tuple of axes with ``sizes`` giving the
    size of every axis that ``x`` lacks. The result has ``to``'s axis order.

    Example:
        >>> ax.broadcast(bias, like)                        # Tensor[F32, Out] -> like's axes
        >>> ax.broadcast(bias, (Batch, Out), sizes={Batch: 32})
    """
    if isinstance(to, tuple):
        have = dict(zip(x.axes, x.shape, strict=True))
        have.update(positive_sizes("broadcast", "sizes", sizes or {}, zero_ok=True))
        missing = [a for a in to if a not in have]
        if missing:
            raise TypeError(f"broadcast: give the size of {axes_names(missing)} in sizes=")
        return cached(Broadcast, to, tuple(have[a] for a in to))(x)
    if x.axes == to.axes:
        return x
    if getattr(type(to), "_is_symbolic", False) and None in tuple(to.shape):
        return BroadcastLike()(x, to)
    return cached(Broadcast, tuple(to.axes), tuple(to.shape))(x)


@register_op(kind="internal")
class BroadcastLike(Op):
    """Broadcast the first operand to the axes and sizes of the second, which gets no
    gradient. ``broadcast(t, node)`` uses it when the graph node's sizes are known only
    when the graph runs (an ``ax.Input`` with an open batch size).
    """

    def infer(self, x: HasType, like: HasType) -> TensorType:
        return Broadcast(like.axes, like.shape).infer(x)

    def forward(self, x: AnyTensor, like: AnyTensor) -> Array:
        return Broadcast(like.axes, like.array.shape).forward(x)

    def backward(
        self, dy: AnyTensor, y: AnyTensor, x: AnyTensor, like: AnyTensor
    ) -> tuple[Array, None]:
        return Broadcast(like.axes, like.array.shape).backward(dy, y, x)[0], None


@register_op("tile", kind="axis")
class Tile(Op):
    """Repeat the whole tensor ``n`` times along axis ``X``; backward sums the copies."""

    def __init__(self, axis: type[Axis], n: int) -> None:
        self.axis, self.n = check_axis_label(axis, "Tile"), positive_int("tile", "n", n)

    def describe(self) -> str:
        return f"Tile({axis_name(self.axis)}, {self.n})"

    def infer(self, x: HasType) -> TensorType:
        _missing(self, x, self.axis)
        i = x.axes.index(self.axis)
        n = x.shape[i]
        size = None if n is None else n * self.n
        return TensorType(x.dtype, x.axes, x.shape[:i] + (size,) + x.shape[i + 1 :])

    def forward(self, x: AnyTensor) -> Array:
        reps = [1] * x.array.ndim
        reps[x.axes.index(self.axis)] = self.n
        return jnp.tile(x.array, reps)

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        i = x.axes.index(self.axis)
        g = dy.array
        g = g.reshape(g.shape[:i] + (self.n, x.array.shape[i]) + g.shape[i + 1 :])
        return (jnp.sum(g, axis=i),)


def tile(x: Tensor[D, *Axes], axis: type[Axis], n: int) -> Tensor[D, *Axes]:
    """Repeat ``x`` ``n`` times along ``axis`` (its size becomes ``n`` times larger)."""
    return Tile(axis, n).same_type(x)


# ----------------------------------------------------------------------------- concat/stack
@register_op("concat", kind="axis")
class Concat(Op):
    """Join operands with identical axes along existing axis ``X``; backward splits."""

    def __init__(self, axis: type[Axis]) -> None:
        self.axis = check_axis_label(axis, "Concat")

    def describe(self) -> str:
        return f"Concat({axis_name(self.axis)})"

    def infer(self, *xs: HasType) -> TensorType:
        if not xs:
            raise TypeError("concat: give at least one tensor")
        dtype = result_dtype(self, xs)
        first = xs[0]
        for x in xs:
            _missing(self, x, self.axis)
            if x.axes != first.axes:
                raise self.fail(
                    xs,
                    "axes differ (concat needs identical axes in identical order; transpose first)",
                )
        i = first.axes.index(self.axis)
        for x in xs:
            for j, (n, m) in enumerate(zip(x.shape, first.shape, strict=True)):
                if j != i and n is not None and m is not None and n != m:
                    raise self.fail(
                        xs,
                        f"axis {axis_name(first.axes[j])} has sizes {m} and {n} "
                        f"(only {axis_name(self.axis)} may differ)",
                    )
        sizes = [x.shape[i] for x in xs]
        total = None if None in sizes else sum(cast(list[int], sizes))
        return TensorType(dtype, first.axes, first.shape[:i] + (total,) + first.shape[i + 1 :])

    def forward(self, *xs: AnyTensor) -> Array:
        return jnp.concatenate([x.array for x in xs], axis=xs[0].axes.index(self.axis))

    def backward(self, dy: AnyTensor, y: AnyTensor, *xs: AnyTensor) -> tuple[Array, ...]:
        i = xs[0].axes.index(self.axis)
        bounds = list(itertools.accumulate(x.array.shape[i] for x in xs))[:-1]
        return tuple(jnp.split(dy.array, bounds, axis=i))


def concat(xs: Sequence[Tensor[D, *Axes]], axis: type[Axis]) -> Tensor[D, *Axes]:
    """Join tensors with identical axes along ``axis``."""
    if not xs:
        raise TypeError("concat: give at least one tensor")
    return Concat(axis).same_type(xs[0], *xs[1:])


@register_op("stack", kind="positional")
class Stack(Op):
    """Stack operands with identical axes and sizes along a new axis ``X`` at ``at``."""

    def __init__(self, axis: type[Axis], at: int = 0) -> None:
        self.axis, self.at = check_axis_label(axis, "Stack"), index_int("stack", "at", at)

    def describe(self) -> str:
        return f"Stack({axis_name(self.axis)}, at={self.at})"

    def infer(self, *xs: HasType) -> TensorType:
        if not xs:
            raise TypeError("stack: give at least one tensor")
        dtype = result_dtype(self, xs)
        first = xs[0]
        for x in xs:
            if x.axes != first.axes:
                raise self.fail(
                    xs,
                    "axes differ (stack needs identical axes in identical order; transpose first)",
                )
            if any(
                n != m and None not in (n, m) for n, m in zip(x.shape, first.shape, strict=True)
            ):
                raise self.fail(xs, "sizes differ (stack needs equal sizes)")
        _present(self, first, self.axis)
        r = len(first.axes)
        if not -r - 1 <= self.at <= r:
            raise self.fail(
                xs[:1], f"index {self.at} out of range for rank {r} (use {-r - 1} to {r})"
            )
        i = self.at if self.at >= 0 else r + 1 + self.at
        return TensorType(
            dtype,
            first.axes[:i] + (self.axis,) + first.axes[i:],
            first.shape[:i] + (len(xs),) + first.shape[i:],
        )

    def _index(self, x: HasType) -> int:
        return self.at if self.at >= 0 else len(x.axes) + 1 + self.at

    def forward(self, *xs: AnyTensor) -> Array:
        return jnp.stack([x.array for x in xs], axis=self._index(xs[0]))

    def backward(self, dy: AnyTensor, y: AnyTensor, *xs: AnyTensor) -> tuple[Array, ...]:
        i = self._index(xs[0])
        return tuple(jnp.take(dy.array, k, axis=i) for k in range(len(xs)))


def stack(xs: Sequence[AnyOf[D]], axis: type[Axis], at: int = 0) -> AnyOf[D]:
    """Stack tensors with identical axes along a new axis ``axis`` at position ``at``."""
    return Stack(axis, at)(*xs)


@register_op("unstack", kind="other")
class Unstack(Op[tuple[AnyTensor, ...]]):
    """The entries of ``x`` along axis ``X``, one tensor each (``X`` removed): the inverse of
    :class:`Stack`, and the op with several results.

    ``infer`` returns one type per entry and ``forward`` one array per entry. The backward
    joins the cotangents with one ``concatenate`` (over ``X`` merged with the axes after
    it): ``n`` separate :class:`Index` ops would each pad their cotangent into a zero
    tensor of ``x``'s size and add the ``n`` of them up, which XLA compiles to a slower
    loop (an LSTM's gate split, inside ``lax.scan``).
    """

    def __init__(self, axis: type[Axis]) -> None:
        self.axis = check_axis_label(axis, "Unstack")

    def describe(self) -> str:
        return f"Unstack({axis_name(self.axis)})"

    def infer(self, x: HasType) -> tuple[TensorType, ...]:
        _missing(self, x, self.axis)
        i = x.axes.index(self.axis)
        n: int | None = x.shape[i]
        if n is None:
            raise self.fail(
                (x,),
                f"the size of {axis_name(self.axis)} is not known (unstack "
                f"makes one tensor per entry: give {axis_name(self.axis)} a size)",
            )
        if n == 0:
            raise self.fail(
                (x,), f"{axis_name(self.axis)} has size 0 (unstack makes one tensor per entry)"
            )
        return (
            TensorType(x.dtype, x.axes[:i] + x.axes[i + 1 :], x.shape[:i] + x.shape[i + 1 :]),
        ) * n

    def forward(self, x: AnyTensor) -> tuple[Array, ...]:
        i, a = x.axes.index(self.axis), x.array
        return tuple(jax.lax.index_in_dim(a, k, i, keepdims=False) for k in range(a.shape[i]))

    def backward(
        self, dy: tuple[AnyTensor, ...], y: tuple[AnyTensor, ...], x: AnyTensor
    ) -> tuple[Array]:
        # [*pre, post] pieces joined along the merged [X, *post] axis: XLA emits one
        # concatenate of the pieces as computed, as for a split of a matrix's last axis
        i, shape = x.axes.index(self.axis), x.array.shape
        merged = (*shape[:i], math.prod(shape[i + 1 :]))
        parts = [d.array.reshape(merged) for d in dy]
        return (jnp.concatenate(parts, axis=i).reshape(shape),)


def unstack(x: AnyOf[D], axis: type[Axis]) -> tuple[AnyOf[D], ...]:
    """The entries of ``x`` along ``axis``, each without that axis (the inverse of ``stack``).

    Example:
        >>> i, f, g, o = ax.unstack(z, Gate)   # z [Batch, Gate=4, Hidden] -> 4 x [Batch, Hidden]

    One op whose backward concatenates the cotangents; ``ax.index`` once per entry gives the
    same values, but its backward pads each cotangent to ``x``'s size.
    """
    return cached(Unstack, axis)(x)


# ----------------------------------------------------------------------------- flatten
@register_op(
    "flatten",
    kind="axis",
    doc="""Merge ``axes`` (first = major) into the new axis ``into``.

    Example:
        >>> ax.flatten(images, (Height, Width), Pixel)   # [Batch, Height, Width] -> [Batch, Pixel]
    """,
)
class Flatten(Op):
    """Merge axes (in the given order, first = major) into one new axis.

    The new axis takes the place of the first merged axis; the operand is transposed first
    only when the merged axes are not already adjacent and in order.
    """

    def __init__(self, axes: tuple[type[Axis], ...], into: type[Axis]) -> None:
        self.merged = tuple(check_axis_label(a, "Flatten") for a in axes)
        self.into = check_axis_label(into, "Flatten")

    def describe(self) -> str:
        return f"Flatten(({axes_names(self.merged)}) -> {axis_name(self.into)})"

    def _layout(self, x: HasType) -> tuple[list[type[Axis]], int]:
        first = min(x.axes.index(a) for a in self.merged)
        rest = [a for a in x.axes if a not in self.merged]
        at = sum(1 for a in x.axes[:first] if a not in self.merged)
        return rest, at

    def infer(self, x: HasType) -> TensorType:
        if len(self.merged) < 1 or len(set(self.merged)) != len(self.merged):
            raise self.fail((x,), "name each merged axis once")
        for a in self.merged:
            _missing(self, x, a)
        if self.into not in self.merged:
            _present(self, x, self.into)
        rest, at = self._layout(x)
        sizes = dict(zip(x.axes, x.shape, strict=True))
        merged = [sizes[a] for a in self.merged]
        n = None if None in merged else math.prod(cast(list[int], merged))
        axes = rest[:at] + [self.into] + rest[at:]
        shape = [sizes[a] for a in rest[:at]] + [n] + [sizes[a] for a in rest[at:]]
        return TensorType(x.dtype, tuple(axes), tuple(shape))

    def _order(self, x: HasType) -> list[type[Axis]]:
        rest, at = self._layout(x)
        return rest[:at] + list(self.merged) + rest[at:]

    def forward(self, x: AnyTensor) -> Array:
        out = self.infer(x)
        return _transpose(x.array, _perm(x.axes, self._order(x))).reshape(out.shape)

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        order = self._order(x)
        sizes = dict(zip(x.axes, x.array.shape, strict=True))
        g = dy.array.reshape(tuple(sizes[a] for a in order))
        return (_transpose(g, _perm(order, x.axes)),)


@register_op(
    "unflatten",
    kind="axis",
    doc="Split ``axis`` into ``axes`` of the given ``sizes`` (first = major).",
)
class Unflatten(Op):
    """Split axis ``X`` into ``axes`` with ``sizes`` (first = major); inverse of Flatten."""

    def __init__(
        self, axis: type[Axis], axes: tuple[type[Axis], ...], sizes: tuple[int, ...]
    ) -> None:
        self.axis = check_axis_label(axis, "Unflatten")
        self.axes = tuple(check_axis_label(a, "Unflatten") for a in axes)
        self.sizes = tuple(non_negative_int("unflatten", "sizes", n) for n in sizes)
        if len(self.sizes) != len(self.axes):
            raise TypeError(f"unflatten: {len(self.axes)} axes but {len(self.sizes)} sizes")

    def describe(self) -> str:
        return f"Unflatten({axis_name(self.axis)} -> ({axes_names(self.axes)}))"

    def infer(self, x: HasType) -> TensorType:
        _missing(self, x, self.axis)
        i = x.axes.index(self.axis)
        for a in self.axes:
            if a is not self.axis:
                _present(self, x, a)
        if len(set(self.axes)) != len(self.axes):
            raise self.fail(
                (x,),
                f"an axis occurs twice in ({axes_names(self.axes)}) (a tensor "
                "never has the same axis twice; name each new axis once)",
            )
        n = x.shape[i]
        if n is not None and math.prod(self.sizes) != n:
            raise self.fail(
                (x,),
                f"sizes {self.sizes} multiply to {math.prod(self.sizes)}, but "
                f"{axis_name(self.axis)} has size {n}",
            )
        return TensorType(
            x.dtype,
            x.axes[:i] + self.axes + x.axes[i + 1 :],
            x.shape[:i] + self.sizes + x.shape[i + 1 :],
        )

    def forward(self, x: AnyTensor) -> Array:
        i = x.axes.index(self.axis)
        s = x.array.shape
        return x.array.reshape(s[:i] + self.sizes + s[i + 1 :])

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        return (dy.array.reshape(x.array.shape),)


# BEGIN GENERATED by tools/gen_overloads.py: the declared ops' functions (do not edit)
def expand_dims(
    x: Tensor[D, *tuple[Any, ...]], axis: type[Axis], at: int = 0
) -> Tensor[D, *tuple[Any, ...]]:
    """Insert a new axis of size 1 at position ``at`` (negative counts from the end)."""
    return cached(ExpandDims, axis, at)(x)


def squeeze(x: Tensor[D, *tuple[Any, ...]], axis: type[Axis]) -> Tensor[D, *tuple[Any, ...]]:
    """Remove the size-1 axis ``axis``."""
    return cached(Squeeze, axis)(x)


def rename(
    x: Tensor[D, *tuple[Any, ...]], old: type[Axis], new: type[Axis]
) -> Tensor[D, *tuple[Any, ...]]:
    """Relabel one axis: ``ax.rename(t, Hidden, In)``."""
    return cached(Rename, old, new)(x)


def flatten(
    x: Tensor[D, *tuple[Any, ...]], axes: tuple[type[Axis], ...], into: type[Axis]
) -> Tensor[D, *tuple[Any, ...]]:
    """Merge ``axes`` (first = major) into the new axis ``into``.

    Example:
        >>> ax.flatten(images, (Height, Width), Pixel)   # [Batch, Height, Width] -> [Batch, Pixel]
    """
    return cached(Flatten, axes, into)(x)


def unflatten(
    x: Tensor[D, *tuple[Any, ...]],
    axis: type[Axis],
    axes: tuple[type[Axis], ...],
    sizes: tuple[int, ...],
) -> Tensor[D, *tuple[Any, ...]]:
    """Split ``axis`` into ``axes`` of the given ``sizes`` (first = major)."""
    return cached(Unflatten, axis, axes, sizes)(x)


# END GENERATED
