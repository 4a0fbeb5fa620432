"""Selecting along a named axis: index, slice, take (gather), one_hot."""

from __future__ import annotations

import builtins
from typing import Any, TypeVar, TypeVarTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..core import F32, AnyTensor, Axis, DType, Integer, Op, Tensor, TensorType
from ..core._internal import (
    HasType,
    axes_names,
    axis_name,
    cached,
    check_axis_label,
    check_indices,
    describe,
    dtype_marker,
    index_int,
    positive_int,
    register_op,
    trusted_tensor,
)

D = TypeVar("D", bound=DType)
DI = TypeVar("DI", bound=Integer)  # indices: integers (Take's rule)
Array = jax.Array
AnyOf = Tensor[D, *tuple[Any, ...]]
Axes = TypeVarTuple("Axes")
# Remaining Any: a position or slice bound of any kind checked at run time, and the
# dtype/axes parameters of the public Tensor aliases.


def _require(op: Op, x: HasType, axis: type[Axis]) -> int:
    if axis not in x.axes:
        raise op.fail(
            (x,),
            f"{axis_name(axis)} is not an axis of the tensor (name one of {axes_names(x.axes)})",
        )
    return int(x.axes.index(axis))


@register_op("index", kind="axis")
class Index(Op):
    """Pick entry ``i`` along axis ``X`` (which is removed); backward scatters ``dy`` back.

    A static position is a Python int (checked against the size, negative counts from the
    end). A dynamic position is a second operand, a rank-0 integer Tensor (it may be traced;
    it is clamped into range as ``jax.lax.dynamic_index_in_dim`` does), so that no traced
    value is hidden in the op's parameters.
    """

    def __init__(self, axis: type[Axis], i: int | None = None) -> None:
        self.axis, self.i = check_axis_label(axis, "Index"), i

    def describe(self) -> str:
        return f"Index({axis_name(self.axis)}, {'i' if self.i is None else self.i})"

    def infer(self, x: HasType, *pos: HasType) -> TensorType:
        p = _require(self, x, self.axis)
        n = x.shape[p]
        if self.i is None:
            if len(pos) != 1 or pos[0].axes or not jnp.issubdtype(pos[0].dtype.numpy, jnp.integer):
                raise self.fail((x, *pos), "the position must be one rank-0 integer tensor")
        elif pos:
            raise self.fail((x, *pos), "a static position takes no position operand")
        elif n is not None and not -n <= self.i < n:
            raise self.fail(
                (x,),
                f"index {self.i} out of range for {axis_name(self.axis)} of "
                f"size {n} (use -{n} to {n - 1})",
            )
        return TensorType(x.dtype, x.axes[:p] + x.axes[p + 1 :], x.shape[:p] + x.shape[p + 1 :])

    def _at(self, x: AnyTensor, pos: tuple[AnyTensor, ...]) -> Array | int:
        if self.i is None:
            return pos[0].array
        return self.i % x.array.shape[x.axes.index(self.axis)]

    def forward(self, x: AnyTensor, *pos: AnyTensor) -> Array:
        p = x.axes.index(self.axis)
        if self.i is None:
            picked: Array = jax.lax.dynamic_index_in_dim(x.array, pos[0].array, p, keepdims=False)
            return picked
        return jax.lax.index_in_dim(x.array, self.i % x.array.shape[p], p, keepdims=False)

    def backward(
        self, dy: AnyTensor, y: AnyTensor, x: AnyTensor, *pos: AnyTensor
    ) -> tuple[Array | None, ...]:
        p = x.axes.index(self.axis)
        zeros = jnp.zeros(x.array.shape, dy.array.dtype)
        g = jnp.expand_dims(dy.array, p)
        dx = jax.lax.dynamic_update_slice_in_dim(zeros, g, self._at(x, pos), p)
        return (dx,) + (None,) * len(pos)


def index(x: AnyOf[D], axis: type[Axis], i: int | Any) -> AnyOf[D]:
    """Entry ``i`` along ``axis``; the axis is removed: ``ax.index(seq, Time, 0)``.

    ``i`` is a Python int (checked against the size), or a rank-0 integer Tensor (checked
    when concrete; traced, it is clamped into range as ``jax.lax.dynamic_index_in_dim``
    does, unless traced inside ``ax.checkify_indices``).
    """
    if isinstance(i, int | float | np.number | np.bool_):  # a static position: an int
        return cached(Index, axis, index_int("index", "i", i))(x)
    pos = i
    if not isinstance(i, Tensor) and getattr(i, "ndim", None) == 0:
        pos = trusted_tensor(i, ())
    if not isinstance(pos, Tensor) or pos.axes or not jnp.issubdtype(pos.dtype.numpy, jnp.integer):
        got = describe(pos) if isinstance(pos, Tensor) else repr(i)
        raise TypeError(
            f"index: the position must be an int or a rank-0 integer Tensor, "
            f"got {got} (gather many positions with ax.take)"
        )
    op = Index(axis)
    _check_positions("index", x, op.axis, pos, low_wraps=True)
    return op(x, pos)


@register_op("slice", kind="axis")
class Slice(Op):
    """Entries ``start:stop:step`` along axis ``X`` (static bounds); backward pads."""

    def __init__(
        self, axis: type[Axis], start: int | None, stop: int | None, step: int = 1
    ) -> None:
        self.axis = check_axis_label(axis, "Slice")
        self.start, self.stop = _slice_bound("start", start), _slice_bound("stop", stop)
        self.step = _slice_bound("step", step, none_ok=False)

    def describe(self) -> str:

        def s(v: int | None) -> str:
            return "" if v is None else str(v)

        step = "" if self.step == 1 else f":{self.step}"
        return f"Slice({axis_name(self.axis)}, {s(self.start)}:{s(self.stop)}{step})"

    def infer(self, x: HasType) -> TensorType:
        p = _require(self, x, self.axis)
        n = x.shape[p]
        if self.step is None or self.step <= 0:
            raise self.fail((x,), "slice step must be positive")
        bounds = builtins.slice(self.start, self.stop, self.step)
        size = None if n is None else len(range(*bounds.indices(n)))
        return TensorType(x.dtype, x.axes, x.shape[:p] + (size,) + x.shape[p + 1 :])

    def _key(self, x: AnyTensor) -> tuple[builtins.slice, ...]:
        p: int = x.axes.index(self.axis)
        return (builtins.slice(None),) * p + (builtins.slice(self.start, self.stop, self.step),)

    def forward(self, x: AnyTensor) -> Array:
        return x.array[self._key(x)]

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        return (jnp.zeros(x.array.shape, dy.array.dtype).at[self._key(x)].set(dy.array),)


def slice(
    x: Tensor[D, *Axes],
    axis: type[Axis],
    start: int | None = None,
    stop: int | None = None,
    step: int = 1,
) -> Tensor[D, *Axes]:
    """Entries ``start:stop:step`` along ``axis`` (kept, with its new size).

    The bounds are Python ints (or ``None``); a float or a traced value is a ``TypeError``
    (for a position known only at run time use ``jax.lax.dynamic_slice_in_dim`` on
    ``x.array``, or ``ax.index`` / ``ax.take``).
    """
    return Slice(axis, start, stop, step).same_type(x)


def _slice_bound(name: str, v: object, none_ok: bool = True) -> int | None:
    """``v`` as an int bound of ``ax.slice``, or the one ``TypeError`` for anything else."""
    if v is None and none_ok:
        return None
    return index_int(
        "slice",
        name,
        v,
        what=f"an int{' or None' if none_ok else ''}",
        fix="slice bounds are static Python ints; convert with int(), or for a position "
        "known only at run time use ax.index, ax.take or jax.lax.dynamic_slice_in_dim",
    )


@register_op("take", kind="axis")
class Take(Op):
    """Gather along axis ``X`` by an integer index tensor, whose axes replace ``X``.

    ``take(table[Vocab, Embed], Vocab, ids[Batch, Time]) -> [Batch, Time, Embed]``.
    Backward scatter-adds ``dy`` into the rows that were read.
    """

    def __init__(self, axis: type[Axis]) -> None:
        self.axis = check_axis_label(axis, "Take")

    def describe(self) -> str:
        return f"Take({axis_name(self.axis)})"

    def infer(self, x: HasType, idx: HasType) -> TensorType:
        p = _require(self, x, self.axis)
        if not jnp.issubdtype(idx.dtype.numpy, jnp.integer):
            raise self.fail((x, idx), f"indices must be integers, got {idx.dtype.__name__}")
        clash = [a for a in idx.axes if a in x.axes and a is not self.axis]
        if clash or self.axis in idx.axes:
            a = (clash or [self.axis])[0]
            raise self.fail(
                (x, idx),
                f"axis {axis_name(a)} would occur twice in the result (rename it in the indices)",
            )
        return TensorType(
            x.dtype,
            x.axes[:p] + idx.axes + x.axes[p + 1 :],
            x.shape[:p] + idx.shape + x.shape[p + 1 :],
        )

    def forward(self, x: AnyTensor, idx: AnyTensor) -> Array:
        return jnp.take(x.array, idx.array, axis=x.axes.index(self.axis), mode="clip")

    def backward(
        self, dy: AnyTensor, y: AnyTensor, x: AnyTensor, idx: AnyTensor
    ) -> tuple[Array, None]:
        p, k = x.axes.index(self.axis), idx.array.ndim
        g = jnp.moveaxis(dy.array, tuple(range(p, p + k)), tuple(range(k)))
        zeros = jnp.zeros(
            (x.array.shape[p],) + tuple(n for i, n in enumerate(x.array.shape) if i != p),
            dy.array.dtype,
        )
        n = x.array.shape[p]
        table = zeros.at[jnp.clip(idx.array, 0, n - 1)].add(g)
        return jnp.moveaxis(table, 0, p), None


def take(x: AnyOf[D], axis: type[Axis], indices: Tensor[DI, *tuple[Any, ...]]) -> AnyOf[D]:
    """Gather entries along ``axis`` by integer ``indices``; their axes replace ``axis``.

    Raises:
        ValueError: an index outside ``[0, size)`` when the indices are concrete. Traced
            indices (under ``jax.jit``) are not checked: an index out of range is clamped
            into it, unless the call is traced inside ``ax.checkify_indices``.
    """
    op = Take(axis)
    _check_positions("take", x, op.axis, indices, low_wraps=False)
    return op(x, indices)


def _check_positions(
    where: str, x: object, axis: type[Axis], pos: object, *, low_wraps: bool
) -> None:
    """The index rule for positions along ``axis`` of ``x`` (``low_wraps``: ``-n..-1``
    count from the end, as ``jax.lax.dynamic_index_in_dim`` does)."""
    if not isinstance(pos, Tensor) or not jnp.issubdtype(pos.dtype.numpy, jnp.integer):
        return  # the op's type rule reports it
    if not isinstance(x, Tensor) or axis not in x.axes:
        return
    n = x.shape[x.axes.index(axis)]
    if n is None:
        return
    check_indices(
        where,
        pos,
        n,
        low=-n if low_wraps else 0,
        of=f"for {axis_name(axis)} of size {n}",
    )


@register_op("one_hot", kind="axis")
class OneHot(Op):
    """Integer labels -> one-hot vectors along a new last axis ``X`` of size ``n``."""

    def __init__(self, axis: type[Axis], n: int, dtype: type[DType] = F32) -> None:
        self.axis, self.n = check_axis_label(axis, "OneHot"), positive_int("one_hot", "n", n)
        self.dtype = dtype_marker(dtype)

    def describe(self) -> str:
        return f"OneHot({axis_name(self.axis)}, {self.n})"

    def infer(self, idx: HasType) -> TensorType:
        if not jnp.issubdtype(idx.dtype.numpy, jnp.integer):
            raise self.fail((idx,), f"labels must be integers, got {idx.dtype.__name__}")
        if self.axis in idx.axes:
            raise self.fail(
                (idx,),
                f"axis {axis_name(self.axis)} already present (a tensor "
                "never has the same axis twice; rename one)",
            )
        return TensorType(self.dtype, idx.axes + (self.axis,), idx.shape + (self.n,))

    def forward(self, idx: AnyTensor) -> Array:
        return jax.nn.one_hot(idx.array, self.n, dtype=self.dtype.numpy)

    def backward(self, dy: AnyTensor, y: AnyTensor, idx: AnyTensor) -> tuple[None]:
        return (None,)


def one_hot(
    labels: Tensor[Any, *tuple[Any, ...]], axis: type[Axis], n: int, dtype: type[DType] = F32
) -> AnyTensor:
    """One-hot encode integer ``labels`` along a new last axis ``axis`` of size ``n``.

    Raises:
        ValueError: a label outside ``[0, n)`` when the labels' values are known (a
            concrete Tensor). Under ``jax.jit`` they are not: there such a label, negative
            ones included, gives an all-zero row (``ax.checkify_indices`` checks them).
    """
    op = cached(OneHot, axis, n, dtype)
    check_labels("one_hot", labels, op.n, op.axis)
    return op(labels)


def check_labels(
    where: str,
    labels: AnyTensor,
    n: int,
    axis: type[Axis],
    too_large: str = "pass n={top} if they are right",
) -> None:
    """The index rule (core's ``check_indices``) for class labels along ``axis`` of size
    ``n``: a ``ValueError`` naming the first label outside ``[0, n)`` when the labels are
    concrete; traced labels are checked only inside ``ax.checkify_indices``. ``too_large``
    is the fix offered for a label ``>= n`` (``{top}`` becomes the largest label + 1)."""
    check_indices(
        where,
        labels,
        n,
        what="label",
        noun="a class",
        of=f"for {axis_name(axis)} of size {n}",
        fix_high="fix the labels, or " + too_large,
        fix_low="negative labels are not class indices: drop or mask those examples",
    )
