"""``matmul`` (``@``) and natural contraction ``contract`` (the paper's ⋈).

``contract(a, b)`` sums every axis the operands share and keeps the symmetric difference
(a's remaining axes in order, then b's). ``contract(a, b, over=X)`` sums only ``X`` and keeps
the other shared axes once, batched. Either lowers to one ``einsum`` (one ``dot_general``);
the backward is the paper's ``∇A = ∇(A ⋈ B) ⋈ B``, again one einsum per operand.

``contract(a, b, c, ...)`` generalises ⋈ to any number of operands: an axis two operands
share is summed, an axis three or more share must be named in ``over=``. opt_einsum picks
the order of the pairwise contractions for the operands' sizes; the pairs run as one jitted
program. The backward recomputes the intermediates and walks the same tree in reverse, each
pair's VJP the binary rule: about twice the forward's flops, three times with the
recomputation (n independent contractions, one per operand, would cost about n times).
"""

from __future__ import annotations

import functools
import math
from typing import Any, TypeVar, TypeVarTuple, overload

import jax
import jax.numpy as jnp
import opt_einsum

from ..core import AnyTensor, Axis, AxisError, DType, Op, Tensor, TensorType
from ..core._internal import (
    HasType,
    axes_names,
    axis_name,
    cached,
    check_axis_label,
    register_op,
    result_dtype,
    same_sizes,
)
from ._shape import Transpose

# Remaining Any: the dtype/axes parameters of the public Tensor aliases.

D = TypeVar("D", bound=DType)
I = TypeVar("I")  # noqa: E741
J = TypeVar("J")
K = TypeVar("K")
Bs = TypeVarTuple("Bs")
A0 = TypeVar("A0", bound=Axis)  # contract(out=)'s axes
A1 = TypeVar("A1", bound=Axis)  # contract(out=)'s axes
A2 = TypeVar("A2", bound=Axis)  # contract(out=)'s axes
A3 = TypeVar("A3", bound=Axis)  # contract(out=)'s axes
A4 = TypeVar("A4", bound=Axis)  # contract(out=)'s axes
A5 = TypeVar("A5", bound=Axis)  # contract(out=)'s axes
Array = jax.Array
#: ``dot_general`` dimension numbers: ``((contract_x, contract_y), (batch_x, batch_y))``.
Dims = tuple[tuple[tuple[int, ...], tuple[int, ...]], tuple[tuple[int, ...], tuple[int, ...]]]


@register_op("matmul", kind="matmul", operators=("__matmul__",))
class MatMul(Op):
    """``Tensor[D, *B, I, J] @ Tensor[D, *B, J, K] -> Tensor[D, *B, I, K]``.

    Backward: ``da = dy @ bᵀ``, ``db = aᵀ @ dy`` (each one ``dot_general``, no transpose).
    """

    def infer(self, a: HasType, b: HasType) -> TensorType:
        if len(a.axes) < 2 or len(b.axes) < 2:
            raise self.fail(
                (a, b), "both operands need at least 2 axes (use ax.contract for vectors)"
            )
        dtype = result_dtype(self, (a, b))
        if a.axes[-1] is not b.axes[-2]:
            raise self.fail(
                (a, b),
                f"inner axes {axis_name(a.axes[-1])} and "
                f"{axis_name(b.axes[-2])} differ (rename one, or use ax.contract)",
            )
        if a.axes[:-2] != b.axes[:-2]:
            raise self.fail(
                (a, b),
                f"batch axes [{axes_names(a.axes[:-2])}] and "
                f"[{axes_names(b.axes[:-2])}] differ (transpose one operand first)",
            )
        same_sizes(self, (a, b))
        axes = a.axes[:-1] + b.axes[-1:]
        if len(set(axes)) != len(axes):
            raise self.fail(
                (a, b),
                f"the result would have axis {axis_name(b.axes[-1])} twice "
                "(rename one operand's axis first)",
            )
        return TensorType(dtype, axes, a.shape[:-1] + b.shape[-1:])

    def forward(self, a: AnyTensor, b: AnyTensor) -> Array:
        return jnp.matmul(a.array, b.array)

    def backward(
        self, dy: AnyTensor, y: AnyTensor, a: AnyTensor, b: AnyTensor
    ) -> tuple[Array, Array]:
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


@register_op("contract", kind="set_algebra")
class Contract(Op):
    """Natural contraction ⋈ (``over=None``) or contraction over the named shared axes, of
    two operands or more."""

    def __init__(self, over: type[Axis] | tuple[type[Axis], ...] | None = None) -> None:
        if over is None:
            self.over: tuple[type[Axis], ...] | None = None
        else:
            axes = over if isinstance(over, tuple) else (over,)
            self.over = tuple(check_axis_label(a, "Contract") for a in axes)
            if len(set(self.over)) != len(self.over) or not self.over:
                raise TypeError(
                    f"Contract: name each summed axis once, got over=({axes_names(self.over)})"
                )

    def describe(self) -> str:
        return "Contract" if self.over is None else f"Contract(over={axes_names(self.over)})"

    def _plan(
        self, a: HasType, b: HasType
    ) -> tuple[tuple[type[Axis], ...], tuple[type[Axis], ...]]:
        shared = tuple(x for x in a.axes if x in b.axes)
        if self.over is None:
            return shared, tuple(x for x in a.axes if x not in shared) + tuple(
                x for x in b.axes if x not in a.axes
            )
        for x in self.over:
            if x not in a.axes or x not in b.axes:
                which = (
                    "either operand"
                    if x not in a.axes and x not in b.axes
                    else ("the first operand" if x not in a.axes else "the second operand")
                )
                raise self.fail(
                    (a, b),
                    f"{axis_name(x)} is not an axis of {which} "
                    "(contract sums axes the operands share)",
                )
        keep_a = tuple(x for x in a.axes if x not in self.over)
        return self.over, keep_a + tuple(x for x in b.axes if x not in a.axes)

    def _kept(self, xs: tuple[HasType, ...]) -> tuple[type[Axis], ...]:
        """The result's axes for three operands or more, in order of first appearance."""
        where: dict[type[Axis], list[int]] = {}
        for i, x in enumerate(xs):
            for a in x.axes:
                where.setdefault(a, []).append(i)
        if self.over is None:
            for a, ops in where.items():
                if len(ops) > 2:
                    raise self.fail(
                        xs,
                        f"axis {axis_name(a)} is in {len(ops)} operands "
                        f"({_ordinals(ops)}), so which two sum it is ambiguous "
                        f"(sum it with over={axis_name(a)}, or keep it batched "
                        "by naming the summed axes in over=)",
                    )
            return tuple(a for a, ops in where.items() if len(ops) == 1)
        for a in self.over:
            ops = where.get(a, [])
            if len(ops) < 2:
                which = "no operand" if not ops else f"only the {_ordinals(ops)} operand"
                raise self.fail(
                    xs,
                    f"{axis_name(a)} is an axis of {which} (contract sums axes the operands share)",
                )
        return tuple(a for a in where if a not in self.over)

    def infer(self, *xs: HasType) -> TensorType:
        if len(xs) < 2:
            raise TypeError(
                f"{self.describe()} needs two operands or more, got {len(xs)} "
                "(ax.contract(a, b, ...))"
            )
        dtype = result_dtype(self, xs)
        same_sizes(self, xs)
        out = self._plan(*xs)[1] if len(xs) == 2 else self._kept(xs)
        sizes: dict[type[Axis], int | None] = {}
        for x in reversed(xs):
            sizes.update(zip(x.axes, x.shape, strict=True))
        return TensorType(dtype, out, tuple(sizes[x] for x in out))

    def forward(self, *xs: AnyTensor) -> Array:
        if len(xs) == 2:
            a, b = xs
            return dot(a.array, a.axes, b.array, b.axes, self._plan(a, b)[1])
        plan = _tree(tuple(x.axes for x in xs), tuple(x.shape for x in xs), self._kept(xs))
        product: Array = _run_tree(tuple(x.array for x in xs), plan=plan)
        return product

    def backward(self, dy: AnyTensor, y: AnyTensor, *xs: AnyTensor) -> tuple[Array, ...]:
        g = dy.array
        if len(xs) == 2:
            a, b = xs
            return (
                dot(g, dy.axes, b.array, b.axes, a.axes),
                dot(g, dy.axes, a.array, a.axes, b.axes),
            )
        plan = _tree(tuple(x.axes for x in xs), tuple(x.shape for x in xs), dy.axes)
        grads: tuple[Array, ...] = _run_tree_vjp(g, tuple(x.array for x in xs), plan=plan)
        return grads


def _ordinals(ops: list[int]) -> str:
    words = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth"]
    names = [words[i] if i < len(words) else f"#{i + 1}" for i in ops]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# ----------------------------------------------------------------------------- lowering
_Dims = tuple[tuple[tuple[int, ...], tuple[int, ...]], tuple[tuple[int, ...], tuple[int, ...]]]
_Plan = tuple[_Dims, tuple[int, ...] | None, bool]  # dimension numbers, permutation, swap
_PLANS: dict[tuple[tuple[type[Axis], ...], ...], _Plan] = {}


def _dot_plan(
    x_axes: tuple[type[Axis], ...], y_axes: tuple[type[Axis], ...], out: tuple[type[Axis], ...]
) -> _Plan:
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
        raise ValueError(
            f"contraction of ({axes_names(x_axes)}) and ({axes_names(y_axes)}) "
            f"cannot keep only ({axes_names(out)}): an unshared axis is dropped"
        )
    dims = (
        (tuple(x_axes.index(a) for a in summed), tuple(y_axes.index(a) for a in summed)),
        (tuple(x_axes.index(a) for a in batch), tuple(y_axes.index(a) for a in batch)),
    )
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


def _merge(
    a: Array, c: tuple[int, ...], b: tuple[int, ...]
) -> tuple[Array, tuple[int, ...], tuple[int, ...]]:
    k, m = c[0], len(c)
    shape = a.shape[:k] + (math.prod(a.shape[k : k + m]),) + a.shape[k + m :]
    return a.reshape(shape), (k,), tuple(d if d < k else d - m + 1 for d in b)


def dot(
    x: Array,
    x_axes: tuple[type[Axis], ...],
    y: Array,
    y_axes: tuple[type[Axis], ...],
    out: tuple[type[Axis], ...],
) -> Array:
    """``x ⋈ y`` laid out as ``out``: one ``dot_general`` (and a transpose only when the
    result's order differs from ``dot_general``'s batch, x, y order).

    The same lowering as ``jnp.einsum`` of two operands, without its per-call subscript
    parsing and path search (about 250 µs of CPU per eager call, and as much per trace).
    """
    dims, perm, swap = _dot_plan(x_axes, y_axes, out)
    product: Array = (
        _dot_general(y, x, dims=dims, perm=None)
        if swap
        else _dot_general(x, y, dims=dims, perm=perm)
    )
    return product


# ----------------------------------------------------------------------------- n-ary
Axes = tuple[type[Axis], ...]
#: one pairwise step of an n-ary contraction: the slots of its operands (inputs first, then
#: each step's result), their axes, and the step's result axes
_Step = tuple[int, int, Axes, Axes, Axes]
_TREES: dict[tuple[tuple[Axes, ...], tuple[tuple[int, ...], ...], Axes], tuple[_Step, ...]] = {}


def _tree(
    axes: tuple[Axes, ...], shapes: tuple[tuple[int, ...], ...], out: Axes
) -> tuple[_Step, ...]:
    """The pairwise steps of ``einsum(axes -> out)`` in the order opt_einsum finds cheapest
    for these sizes (memoised: eager calls and re-traces skip the search)."""
    key = (axes, shapes, out)
    steps = _TREES.get(key)
    if steps is None:
        letters: dict[type[Axis], str] = {}
        for xa in (*axes, out):
            for a in xa:
                letters.setdefault(a, opt_einsum.get_symbol(len(letters)))
        eq = (
            ",".join("".join(letters[a] for a in xa) for xa in axes)
            + "->"
            + "".join(letters[a] for a in out)
        )
        path, _ = opt_einsum.contract_path(eq, *shapes, shapes=True, optimize="auto")
        steps = _steps(axes, out, [tuple(p) for p in path])
        if len(_TREES) < 1 << 12:
            _TREES[key] = steps
    return steps


def _steps(axes: tuple[Axes, ...], out: Axes, path: list[tuple[int, ...]]) -> tuple[_Step, ...]:
    """opt_einsum's path (pairs of positions in a list that each step pops from and appends
    its result to) as steps over numbered slots; each step keeps the axes still needed."""
    live = list(range(len(axes)))
    slot_axes = list(axes)
    steps: list[_Step] = []
    for pair in path:
        if len(pair) != 2:
            raise ValueError(f"contract: opt_einsum proposed a {len(pair)}-operand step")
        i, j = sorted(pair)
        sy, sx = live.pop(j), live.pop(i)
        xa, ya = slot_axes[sx], slot_axes[sy]
        if live:
            needed = set(out).union(*(slot_axes[s] for s in live))
            batch = [a for a in xa if a in ya and a in needed]
            res = tuple(batch + [a for a in xa if a not in ya] + [a for a in ya if a not in xa])
        else:
            res = out
        steps.append((sx, sy, xa, ya, res))
        live.append(len(slot_axes))
        slot_axes.append(res)
    return tuple(steps)


@functools.partial(jax.jit, static_argnames=("plan",), inline=True)
def _run_tree(arrays: tuple[Array, ...], plan: tuple[_Step, ...]) -> Array:
    """The steps of ``plan``, each one ``dot_general``, as one program."""
    vals = list(arrays)
    for sx, sy, xa, ya, res in plan:
        vals.append(dot(vals[sx], xa, vals[sy], ya, res))
    return vals[-1]


@functools.partial(jax.jit, static_argnames=("plan",), inline=True)
def _run_tree_vjp(
    dy: Array, arrays: tuple[Array, ...], plan: tuple[_Step, ...]
) -> tuple[Array, ...]:
    """Each operand's cotangent: the intermediates again, then the tree in reverse, each
    step's VJP the binary rule ``∇x = ∇(x ⋈ y) ⋈ y``."""
    vals = list(arrays)
    for sx, sy, xa, ya, res in plan[:-1]:
        vals.append(dot(vals[sx], xa, vals[sy], ya, res))
    n = len(arrays)
    cot: dict[int, Array] = {n + len(plan) - 1: dy}
    for k in range(len(plan) - 1, -1, -1):
        sx, sy, xa, ya, res = plan[k]
        g = cot.pop(n + k)
        cot[sx] = dot(g, res, vals[sy], ya, xa)
        cot[sy] = dot(g, res, vals[sx], xa, ya)
    return tuple(cot[i] for i in range(n))


# contract(out=(A, B)) is Tensor[D, A, B] in every checker (the plugin types every call)
# BEGIN GENERATED by tools/gen_overloads.py: contract's result by out= (do not edit)
@overload
def contract(
    *tensors: Tensor[D, *tuple[Any, ...]],
    over: type[Axis] | tuple[type[Axis], ...] | None = None,
    out: None = None,
) -> Tensor[D, *tuple[Any, ...]]: ...
@overload
def contract(
    *tensors: Tensor[D, *tuple[Any, ...]],
    over: type[Axis] | tuple[type[Axis], ...] | None = None,
    out: tuple[()],
) -> Tensor[D]: ...
@overload
def contract(
    *tensors: Tensor[D, *tuple[Any, ...]],
    over: type[Axis] | tuple[type[Axis], ...] | None = None,
    out: tuple[type[A0]],
) -> Tensor[D, A0]: ...
@overload
def contract(
    *tensors: Tensor[D, *tuple[Any, ...]],
    over: type[Axis] | tuple[type[Axis], ...] | None = None,
    out: tuple[type[A0], type[A1]],
) -> Tensor[D, A0, A1]: ...
@overload
def contract(
    *tensors: Tensor[D, *tuple[Any, ...]],
    over: type[Axis] | tuple[type[Axis], ...] | None = None,
    out: tuple[type[A0], type[A1], type[A2]],
) -> Tensor[D, A0, A1, A2]: ...
@overload
def contract(
    *tensors: Tensor[D, *tuple[Any, ...]],
    over: type[Axis] | tuple[type[Axis], ...] | None = None,
    out: tuple[type[A0], type[A1], type[A2], type[A3]],
) -> Tensor[D, A0, A1, A2, A3]: ...
@overload
def contract(
    *tensors: Tensor[D, *tuple[Any, ...]],
    over: type[Axis] | tuple[type[Axis], ...] | None = None,
    out: tuple[type[A0], type[A1], type[A2], type[A3], type[A4]],
) -> Tensor[D, A0, A1, A2, A3, A4]: ...
@overload
def contract(
    *tensors: Tensor[D, *tuple[Any, ...]],
    over: type[Axis] | tuple[type[Axis], ...] | None = None,
    out: tuple[type[A0], type[A1], type[A2], type[A3], type[A4], type[A5]],
) -> Tensor[D, A0, A1, A2, A3, A4, A5]: ...
@overload
def contract(
    *tensors: Tensor[D, *tuple[Any, ...]],
    over: type[Axis] | tuple[type[Axis], ...] | None = None,
    out: tuple[
        type[Axis],
        type[Axis],
        type[Axis],
        type[Axis],
        type[Axis],
        type[Axis],
        type[Axis],
        *tuple[type[Axis], ...],
    ],
) -> Tensor[D, *tuple[Any, ...]]: ...
# END GENERATED
def contract(
    *tensors: Tensor[D, *tuple[Any, ...]],
    over: type[Axis] | tuple[type[Axis], ...] | None = None,
    out: tuple[type[Axis], ...] | None = None,
) -> Tensor[D, *tuple[Any, ...]]:
    """Natural contraction ⋈: sum the shared axes, keep the symmetric difference.

    ``out=(A, B, ...)`` fixes the order of the result's axes (a permutation of them, else
    an ``AxisError`` naming the axis in question); without it the order is the operands'.

    With ``over=X`` (or a tuple) only those shared axes are summed; the other shared axes
    are kept once, batched — the safe form when a batch axis is shared. With three operands
    or more, an axis two of them share is summed, and one that three or more share must be
    named in ``over=`` (the result never depends on the operands' order); opt_einsum picks
    the cheapest order of the pairwise contractions.

    Example:
        >>> ax.contract(x, w)              # Tensor[F32, Batch, In] ⋈ Tensor[F32, In, Out]
        Tensor[F32, Batch=..., Out=...]
        >>> ax.contract(q, k, over=Head)   # batch axes kept
        >>> ax.contract(a, b, c)           # Tensor[I, J] ⋈ Tensor[J, K] ⋈ Tensor[K, L]
        Tensor[F32, I=..., L=...]
    """
    given: tuple[object, ...] = tensors
    labels = [t.__name__ for t in given if isinstance(t, type) and issubclass(t, Axis)]
    if labels:  # the two-operand form of 0.1: contract(a, b, X)
        raise AxisError(
            f"Cannot apply Contract: {labels[0]} is an axis label among the "
            f"operands; `over` is keyword-only (ax.contract(a, b, "
            f"over={labels[0]}))"
        )
    result = cached(Contract, over)(*tensors)
    if out is None:
        return result
    if not isinstance(out, tuple):
        raise TypeError(f"contract: out= is a tuple of axes, got {type(out).__name__}")
    for a in out:
        if a not in result.axes:
            raise AxisError(
                f"Cannot apply Contract: out= names {axis_name(a)}, which the result "
                f"({axes_names(result.axes)}) lacks; out= is a permutation of the result's axes"
            )
    missing = [a for a in result.axes if a not in out]
    if missing or len(set(out)) != len(out):
        what = (
            f"leaves {axis_name(missing[0])} out"
            if missing
            else f"names {axis_name(next(a for a in out if out.count(a) > 1))} twice"
        )
        raise AxisError(
            f"Cannot apply Contract: out=({axes_names(out)}) {what}; it is a permutation of "
            f"the result's axes ({axes_names(result.axes)})"
        )
    return result if tuple(result.axes) == out else cached(Transpose, out)(result)
