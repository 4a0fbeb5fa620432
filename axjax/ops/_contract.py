"""``matmul`` (``@``) and natural contraction ``contract`` (the paper's ⋈).

``contract(a, b)`` sums every axis the operands share and keeps the symmetric difference
(a's remaining axes in order, then b's). ``contract(a, b, over=X)`` sums only ``X`` and keeps
the other shared axes once, batched. Either lowers to one ``einsum`` (one ``dot_general``);
the backward is the paper's ``∇A = ∇(A ⋈ B) ⋈ B``, again one einsum per operand.
"""

from __future__ import annotations

import functools
import math
from typing import Any, TypeVar, TypeVarTuple

import jax
import jax.numpy as jnp

from ..core import AnyTensor, Axis, DType, Op, Tensor, TensorType
from ..core.internal import (
    HasType,
    axes_names,
    axis_name,
    cached,
    check_axis_label,
    register_op,
    result_dtype,
    same_sizes,
)

# Remaining Any: the dtype/axes parameters of the public Tensor aliases.

D = TypeVar("D", bound=DType)
I = TypeVar("I")  # noqa: E741
J = TypeVar("J")
K = TypeVar("K")
Bs = TypeVarTuple("Bs")
Array = jax.Array
#: ``dot_general`` dimension numbers: ``((contract_x, contract_y), (batch_x, batch_y))``.
Dims = tuple[tuple[tuple[int, ...], tuple[int, ...]], tuple[tuple[int, ...], tuple[int, ...]]]


class MatMul(Op):
    """``Tensor[D, *B, I, J] @ Tensor[D, *B, J, K] -> Tensor[D, *B, I, K]``.

    Backward: ``da = dy @ bᵀ``, ``db = aᵀ @ dy`` (each one ``dot_general``, no transpose).
    """

    def infer(self, a: HasType, b: HasType) -> TensorType:
        if len(a.axes) < 2 or len(b.axes) < 2:
            raise self.fail((a, b), "both operands need at least 2 axes (use ax.contract for "
                            "vectors)")
        dtype = result_dtype(self, (a, b))
        if a.axes[-1] is not b.axes[-2]:
            raise self.fail((a, b), f"inner axes {axis_name(a.axes[-1])} and "
                            f"{axis_name(b.axes[-2])} differ (rename one, or use ax.contract)")
        if a.axes[:-2] != b.axes[:-2]:
            raise self.fail((a, b), f"batch axes [{axes_names(a.axes[:-2])}] and "
                            f"[{axes_names(b.axes[:-2])}] differ (transpose one operand first)")
        same_sizes(self, (a, b))
        axes = a.axes[:-1] + b.axes[-1:]
        if len(set(axes)) != len(axes):
            raise self.fail((a, b), f"the result would have axis {axis_name(b.axes[-1])} twice "
                            "(rename one operand's axis first)")
        return TensorType(dtype, axes, a.shape[:-1] + b.shape[-1:])

    def forward(self, a: AnyTensor, b: AnyTensor) -> Array:
        return jnp.matmul(a.array, b.array)

    def backward(self, dy: AnyTensor, y: AnyTensor, a: AnyTensor,
                 b: AnyTensor) -> tuple[Array, Array]:
        # one dot_general each, contracting the right dimensions directly: no transposes
        g, n = dy.array, dy.array.ndim
        lead = tuple(range(n - 2))
        batch = (lead, lead)
        da = jax.lax.dot_general(g, b.array, (((n - 1,), (n - 1,)), batch))
        db = jax.lax.dot_general(a.array, g, (((n - 2,), (n - 2,)), batch))
        return da, db


_MATMUL = MatMul()


def matmul(a: Tensor[D, *Bs, I, J], b: Tensor[D, *Bs, J, K]) -> Tensor[D, *Bs, I, K]:
    """Batched matrix product over the last two axes; leading batch axes must match.

    Example:
        >>> x: ax.Tensor[ax.F32, Batch, In]; w: ax.Tensor[ax.F32, In, Out]
        >>> ax.matmul(x, w)          # Tensor[F32, Batch, Out]
    """
    return _MATMUL(a, b)


class Contract(Op):
    """Natural contraction ⋈ (``over=None``) or contraction over the named shared axes."""

    def __init__(self, over: type[Axis] | tuple[type[Axis], ...] | None = None) -> None:
        if over is None:
            self.over: tuple[type[Axis], ...] | None = None
        else:
            axes = over if isinstance(over, tuple) else (over,)
            self.over = tuple(check_axis_label(a, "Contract") for a in axes)
            if len(set(self.over)) != len(self.over) or not self.over:
                raise TypeError(f"Contract: name each summed axis once, got "
                                f"over=({axes_names(self.over)})")

    def describe(self) -> str:
        return "Contract" if self.over is None else f"Contract(over={axes_names(self.over)})"

    def _plan(self, a: HasType,
              b: HasType) -> tuple[tuple[type[Axis], ...], tuple[type[Axis], ...]]:
        shared = tuple(x for x in a.axes if x in b.axes)
        if self.over is None:
            return shared, tuple(x for x in a.axes if x not in shared) + tuple(
                x for x in b.axes if x not in a.axes)
        for x in self.over:
            if x not in a.axes or x not in b.axes:
                which = "either operand" if x not in a.axes and x not in b.axes else (
                    "the first operand" if x not in a.axes else "the second operand")
                raise self.fail((a, b), f"{axis_name(x)} is not an axis of {which} "
                                "(contract sums axes the operands share)")
        keep_a = tuple(x for x in a.axes if x not in self.over)
        return self.over, keep_a + tuple(x for x in b.axes if x not in a.axes)

    def infer(self, a: HasType, b: HasType) -> TensorType:
        dtype = result_dtype(self, (a, b))
        same_sizes(self, (a, b))
        _, out = self._plan(a, b)
        sizes = dict(zip(b.axes, b.shape, strict=True))
        sizes.update(zip(a.axes, a.shape, strict=True))
        return TensorType(dtype, out, tuple(sizes[x] for x in out))

    def forward(self, a: AnyTensor, b: AnyTensor) -> Array:
        _, out = self._plan(a, b)
        return dot(a.array, a.axes, b.array, b.axes, out)

    def backward(self, dy: AnyTensor, y: AnyTensor, a: AnyTensor,
                 b: AnyTensor) -> tuple[Array, Array]:
        g = dy.array
        return (dot(g, dy.axes, b.array, b.axes, a.axes),
                dot(g, dy.axes, a.array, a.axes, b.axes))


# ----------------------------------------------------------------------------- lowering
_Dims = tuple[tuple[tuple[int, ...], tuple[int, ...]], tuple[tuple[int, ...], tuple[int, ...]]]
_Plan = tuple[_Dims, tuple[int, ...] | None, bool]  # dimension numbers, permutation, swap
_PLANS: dict[tuple[tuple[type[Axis], ...], ...], _Plan] = {}


def _dot_plan(x_axes: tuple[type[Axis], ...], y_axes: tuple[type[Axis], ...],
              out: tuple[type[Axis], ...]) -> _Plan:
    """``dot_general`` dimension numbers and the final permutation for ``x ⋈ y -> out``.

    An axis of both operands is a batch axis if ``out`` keeps it, else it is summed; an
    axis of one operand must be in ``out`` (the type rules of MatMul and Contract see to
    it).
    """
    key = (x_axes, y_axes, out)
    if key in _PLANS:
        return _PLANS[key]
    batch = [a for a in out if a in x_axes and a in y_axes]  # in the result's order
    summed = [a for a in x_axes if a in y_axes and a not in out]
    x_free = [a for a in x_axes if a not in y_axes]
    y_free = [a for a in y_axes if a not in x_axes]
    if not set(x_free + y_free) <= set(out):
        raise ValueError(f"contraction of ({axes_names(x_axes)}) and ({axes_names(y_axes)}) "
                         f"cannot keep only ({axes_names(out)}): an unshared axis is dropped")
    dims = ((tuple(x_axes.index(a) for a in summed), tuple(y_axes.index(a) for a in summed)),
            (tuple(x_axes.index(a) for a in batch), tuple(y_axes.index(a) for a in batch)))
    got = batch + x_free + y_free
    perm = tuple(got.index(a) for a in out)
    plan = dims, (None if perm == tuple(range(len(perm))) else perm), False
    if plan[1] is not None and batch + y_free + x_free == list(out):
        # y ⋈ x comes out in the right order: swap the operands, skip the transpose
        # (a weight gradient ``dW = dz ⋈ x`` with W stored input-major, say)
        (cx, cy), (bx, by) = dims
        plan = ((cy, cx), (by, bx)), None, True
    _PLANS[key] = plan
    return plan


@functools.partial(jax.jit, static_argnames=("dims", "perm"), inline=True)
def _dot_general(x: Array, y: Array, dims: Dims, perm: tuple[int, ...] | None) -> Array:
    (cx, cy), (bx, by) = dims
    if len(cx) > 1 and _consecutive(cx) and _consecutive(cy):
        # several summed axes, adjacent and in the same order in both operands: merge them
        # into one (a free reshape). XLA's CPU backend canonicalises a multi-axis
        # contraction with a transposed copy of an operand, inside loops too.
        x, cx, bx = _merge(x, cx, bx)
        y, cy, by = _merge(y, cy, by)
    out = jax.lax.dot_general(x, y, ((cx, cy), (bx, by)))
    return out if perm is None else jax.lax.transpose(out, perm)


def _consecutive(d: tuple[int, ...]) -> bool:
    return d == tuple(range(d[0], d[0] + len(d)))


def _merge(a: Array, c: tuple[int, ...], b: tuple[int, ...]
           ) -> tuple[Array, tuple[int, ...], tuple[int, ...]]:
    k, m = c[0], len(c)
    shape = a.shape[:k] + (math.prod(a.shape[k:k + m]),) + a.shape[k + m:]
    return a.reshape(shape), (k,), tuple(d if d < k else d - m + 1 for d in b)


def dot(x: Array, x_axes: tuple[type[Axis], ...], y: Array, y_axes: tuple[type[Axis], ...],
        out: tuple[type[Axis], ...]) -> Array:
    """``x ⋈ y`` laid out as ``out``: one ``dot_general`` (and a transpose only when the
    result's order differs from ``dot_general``'s batch, x, y order).

    The same lowering as ``jnp.einsum`` of two operands, without its per-call subscript
    parsing and path search (about 250 µs of CPU per eager call, and as much per trace).
    """
    dims, perm, swap = _dot_plan(x_axes, y_axes, out)
    product: Array = _dot_general(y, x, dims=dims, perm=None) if swap else _dot_general(
        x, y, dims=dims, perm=perm)
    return product


def contract(
    a: Tensor[D, *tuple[Any, ...]],
    b: Tensor[D, *tuple[Any, ...]],
    over: type[Axis] | tuple[type[Axis], ...] | None = None,
) -> Tensor[D, *tuple[Any, ...]]:
    """Natural contraction ⋈: sum the shared axes, keep the symmetric difference.

    With ``over=X`` (or a tuple) only those shared axes are summed; the other shared axes
    are kept once, batched — the safe form when a batch axis is shared.

    Example:
        >>> ax.contract(x, w)              # Tensor[F32, Batch, In] ⋈ Tensor[F32, In, Out]
        Tensor[F32, Batch=..., Out=...]
        >>> ax.contract(q, k, over=Head)   # batch axes kept
    """
    return cached(Contract, over)(a, b)


# ----------------------------------------------------------------------------- registry
# One declaration per op (axjax/core/_registry.py): its public functions and their kind.
register_op("matmul", kind="matmul", operators=("__matmul__",))(MatMul)
register_op("contract", kind="set_algebra")(Contract)
