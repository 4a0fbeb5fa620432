"""Reductions over named axes, and numerically stable softmax / log_softmax.

``ax.sum(t, Batch)`` sums axis ``Batch`` wherever it is; ``ax.sum(t, (H, W))`` sums both.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar, TypeVarTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..core import I32, AnyTensor, Axis, Bool, DType, Op, Tensor, TensorType
from ..core._internal import (
    FLOATING,
    HasType,
    axes_names,
    axis_name,
    cached,
    check_axis_label,
    register_op,
    require_floating,
    softmax_role_problem,
)

D = TypeVar("D", bound=DType)
Axes = TypeVarTuple("Axes")
Array = jax.Array
AxisArg = type[Axis] | tuple[type[Axis], ...]

# Remaining Any: the dtype/axes parameters of the Tensor aliases.


def _as_axes(over: AxisArg, where: str) -> tuple[type[Axis], ...]:
    axes = over if isinstance(over, tuple) else (over,)
    if not axes:
        raise TypeError(f"{where}: name at least one axis")
    return tuple(check_axis_label(a, where) for a in axes)


_INEXACT = frozenset(np.dtype(m.numpy) for m in FLOATING)  # jnp.sum keeps these dtypes


class AxisOp(Op):
    """Base of ops parameterised by one or more axes of their operand."""

    def __init__(self, over: AxisArg) -> None:
        self.over = _as_axes(over, type(self).__name__)
        if len(set(self.over)) != len(self.over):
            raise TypeError(f"{type(self).__name__}: axis named twice in ({axes_names(self.over)})")

    def describe(self) -> str:
        return f"{self.name}({axes_names(self.over)})"

    def check_present(self, x: HasType) -> None:
        for a in self.over:
            if a not in x.axes:
                raise self.fail(
                    (x,),
                    f"{axis_name(a)} is not an axis of the tensor "
                    f"(name one of {axes_names(x.axes)})",
                )

    def positions(self, x: HasType) -> tuple[int, ...]:
        return tuple(x.axes.index(a) for a in self.over)

    def axis(self, x: HasType) -> int | tuple[int, ...]:
        """``positions`` as ``jax.numpy`` takes them fastest: an int for a single axis
        (a tuple costs about 8 µs more per eager ``jnp.sum``; the lowering is the same)."""
        return x.axes.index(self.over[0]) if len(self.over) == 1 else self.positions(x)


class Reduction(AxisOp):
    """Base of reductions: the named axes are removed. F16/BF16 operands are reduced in
    float32 and the result cast back (``Op.accumulates``)."""

    floating_only = False
    accumulates = True

    def infer(self, x: HasType) -> TensorType:
        self.check_present(x)
        if self.floating_only:
            require_floating(self, (x,))
        keep = [i for i, a in enumerate(x.axes) if a not in self.over]
        return TensorType(x.dtype, tuple(x.axes[i] for i in keep), tuple(x.shape[i] for i in keep))

    def expand(self, g: Array, x: HasType) -> Array:
        """Re-insert the reduced axes (size 1) so ``g`` broadcasts against ``x``."""
        return jnp.expand_dims(g, self.positions(x))

    def spread(self, g: Array, x: AnyTensor) -> Array:
        """Broadcast ``g`` (the result's axes) back to ``x``'s shape: one primitive."""
        pos = self.positions(x)
        keep = tuple(i for i in range(x.array.ndim) if i not in pos)
        return jax.lax.broadcast_in_dim(g, x.array.shape, keep)


@register_op(
    "sum",
    kind="axis",
    doc="""Sum over the named axis (or tuple of axes), which is removed.

    Example:
        >>> ax.sum(ax.ones((2, 3), Batch, Pixel), Pixel)
        Tensor[F32, Batch=2]([3., 3.])
    """,
)
class Sum(Reduction):
    """Sum over axes, in the operand's dtype; backward broadcasts ``dy`` back."""

    def infer(self, x: HasType) -> TensorType:
        if x.dtype is Bool:
            raise self.fail(
                (x,), "cannot sum Bool values (count them with ax.sum(t.astype(ax.I32), ...))"
            )
        return super().infer(x)

    def forward(self, x: AnyTensor) -> Array:
        a = x.array  # dtype= only where jnp.sum would widen (small ints); it costs ~20 µs
        dtype = None if a.dtype in _INEXACT else a.dtype
        return jnp.sum(a, axis=self.axis(x), dtype=dtype)

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        return (self.spread(dy.array, x),)


@register_op("mean", kind="axis", doc="Mean over the named axis (or axes), which is removed.")
class Mean(Reduction):
    """Mean over axes; backward ``dy / n`` broadcast back."""

    floating_only = True

    def forward(self, x: AnyTensor) -> Array:
        return jnp.mean(x.array, axis=self.axis(x))

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        n = math.prod(x.array.shape[i] for i in self.positions(x))
        return (self.spread(dy.array / n, x),)


def _nonempty(op: AxisOp, x: HasType, what: str) -> None:
    """``AxisError`` if an axis ``op`` reduces has size 0 (no max, min or argmax there)."""
    for a in op.over:
        n = dict(zip(x.axes, x.shape, strict=True)).get(a)
        if n == 0:
            raise op.fail(
                (x,),
                f"cannot take the {what} over {axis_name(a)} of size 0 (an "
                f"empty axis has no {what}: make sure {axis_name(a)} has at least "
                "one entry, e.g. skip empty batches, or concatenate a fill value "
                "such as -inf / +inf first)",
            )


class _Chooser(Reduction):
    def infer(self, x: HasType) -> TensorType:
        out = super().infer(x)
        _nonempty(self, x, self.name.lower())
        return out

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        mask = (x.array == self.expand(y.array, x)).astype(dy.array.dtype)
        count = jnp.sum(mask, axis=self.positions(x), keepdims=True)
        return (self.expand(dy.array, x) * mask / count,)


@register_op("max", kind="axis", doc="Maximum over the named axis (or axes), which is removed.")
class Max(_Chooser):
    """Maximum over axes; ties share the gradient equally."""

    def forward(self, x: AnyTensor) -> Array:
        return jnp.max(x.array, axis=self.axis(x))


@register_op("min", kind="axis", doc="Minimum over the named axis (or axes), which is removed.")
class Min(_Chooser):
    """Minimum over axes; ties share the gradient equally."""

    def forward(self, x: AnyTensor) -> Array:
        return jnp.min(x.array, axis=self.axis(x))


@register_op(
    "logsumexp",
    kind="axis",
    doc="``log(sum(exp(x)))`` over the named axis (or axes), computed stably.",
)
class LogSumExp(Reduction):
    """``log(sum(exp(x)))`` over axes, stable; backward ``dy * exp(x - y)``."""

    floating_only = True

    def forward(self, x: AnyTensor) -> Array:
        return jax.nn.logsumexp(x.array, axis=self.axis(x))

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        return (self.expand(dy.array, x) * jnp.exp(x.array - self.expand(y.array, x)),)


@register_op("var", kind="axis", doc="Population variance over the named axis (or axes).")
class Var(Reduction):
    """Population variance over axes; backward ``dy * 2 (x - mean) / n``."""

    floating_only = True

    def forward(self, x: AnyTensor) -> Array:
        return jnp.var(x.array, axis=self.positions(x))

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        pos = self.positions(x)
        n = math.prod(x.array.shape[i] for i in pos)
        centred = x.array - jnp.mean(x.array, axis=pos, keepdims=True)
        return (self.expand(dy.array, x) * (2.0 / n) * centred,)


@register_op(
    "argmax", kind="axis", doc="Index (I32) of the largest value along ``over``, which is removed."
)
class ArgMax(AxisOp):
    """Index of the maximum along one axis (I32, no gradient)."""

    def __init__(self, over: type[Axis]) -> None:
        super().__init__(over)

    def infer(self, x: HasType) -> TensorType:
        if len(self.over) != 1:
            raise self.fail((x,), "argmax takes exactly one axis")
        self.check_present(x)
        _nonempty(self, x, "argmax")
        keep = [i for i, a in enumerate(x.axes) if a not in self.over]
        return TensorType(I32, tuple(x.axes[i] for i in keep), tuple(x.shape[i] for i in keep))

    def forward(self, x: AnyTensor) -> Array:
        return jnp.argmax(x.array, axis=self.positions(x)[0]).astype(jnp.int32)

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[None]:
        return (None,)


class _Normalise(AxisOp):
    """A normalisation over axes. On attention scores that hold a key role
    (``ax.KeyOf[Pos]``) a normalisation over its query axis ``Pos`` is refused unless
    ``allow_query=True``: attention normalises over the keys."""

    accumulates = True  # the sum of exp(x): in float32 for F16/BF16 operands

    def __init__(self, over: AxisArg, allow_query: bool = False) -> None:
        super().__init__(over)
        self.allow_query = bool(allow_query)

    def describe(self) -> str:
        extra = ", allow_query=True" if self.allow_query else ""
        return f"{self.name}({axes_names(self.over)}{extra})"

    def infer(self, x: HasType) -> TensorType:
        self.check_present(x)
        why = None if self.allow_query else softmax_role_problem(tuple(x.axes), self.over)
        if why is not None:
            raise self.fail((x,), why)
        require_floating(self, (x,))
        return TensorType(x.dtype, x.axes, x.shape)


@register_op(
    "softmax",
    kind="axis",
    doc="""Softmax along the named axis (or axes), stable; axes unchanged.

    Example:
        >>> p = ax.softmax(logits, Class)   # sums to 1 along Class
    """,
)
class Softmax(_Normalise):
    """``exp(x) / sum(exp(x))`` along axes; backward ``y * (dy - sum(dy * y))``."""

    def forward(self, x: AnyTensor) -> Array:
        return jax.nn.softmax(x.array, axis=self.axis(x))

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        g, p = dy.array, y.array
        return (p * (g - jnp.sum(g * p, axis=self.positions(x), keepdims=True)),)


@register_op(
    "log_softmax",
    kind="axis",
    doc="``x - logsumexp(x, over)`` along the named axis (or axes), stable.",
)
class LogSoftmax(_Normalise):
    """``x - logsumexp(x)`` along axes; backward ``dy - exp(y) * sum(dy)``."""

    def forward(self, x: AnyTensor) -> Array:
        return jax.nn.log_softmax(x.array, axis=self.axis(x))

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        g = dy.array
        return (g - jnp.exp(y.array) * jnp.sum(g, axis=self.positions(x), keepdims=True),)


# BEGIN GENERATED by tools/gen_overloads.py: the declared ops' functions (do not edit)
def sum(x: Tensor[D, *tuple[Any, ...]], over: AxisArg) -> Tensor[D, *tuple[Any, ...]]:
    """Sum over the named axis (or tuple of axes), which is removed.

    Example:
        >>> ax.sum(ax.ones((2, 3), Batch, Pixel), Pixel)
        Tensor[F32, Batch=2]([3., 3.])
    """
    return cached(Sum, over)(x)


def mean(x: Tensor[D, *tuple[Any, ...]], over: AxisArg) -> Tensor[D, *tuple[Any, ...]]:
    """Mean over the named axis (or axes), which is removed."""
    return cached(Mean, over)(x)


def max(x: Tensor[D, *tuple[Any, ...]], over: AxisArg) -> Tensor[D, *tuple[Any, ...]]:
    """Maximum over the named axis (or axes), which is removed."""
    return cached(Max, over)(x)


def min(x: Tensor[D, *tuple[Any, ...]], over: AxisArg) -> Tensor[D, *tuple[Any, ...]]:
    """Minimum over the named axis (or axes), which is removed."""
    return cached(Min, over)(x)


def logsumexp(x: Tensor[D, *tuple[Any, ...]], over: AxisArg) -> Tensor[D, *tuple[Any, ...]]:
    """``log(sum(exp(x)))`` over the named axis (or axes), computed stably."""
    return cached(LogSumExp, over)(x)


def var(x: Tensor[D, *tuple[Any, ...]], over: AxisArg) -> Tensor[D, *tuple[Any, ...]]:
    """Population variance over the named axis (or axes)."""
    return cached(Var, over)(x)


def argmax(x: Tensor[Any, *tuple[Any, ...]], over: type[Axis]) -> Tensor[I32, *tuple[Any, ...]]:
    """Index (I32) of the largest value along ``over``, which is removed."""
    return cached(ArgMax, over)(x)


def softmax(x: Tensor[D, *Axes], over: AxisArg, allow_query: bool = False) -> Tensor[D, *Axes]:
    """Softmax along the named axis (or axes), stable; axes unchanged.

    Example:
        >>> p = ax.softmax(logits, Class)   # sums to 1 along Class
    """
    return cached(Softmax, over, allow_query).same_type(x)


def log_softmax(x: Tensor[D, *Axes], over: AxisArg, allow_query: bool = False) -> Tensor[D, *Axes]:
    """``x - logsumexp(x, over)`` along the named axis (or axes), stable."""
    return cached(LogSoftmax, over, allow_query).same_type(x)


# END GENERATED
