"""``matmul`` (``@``) and natural contraction ``contract`` (the paper's ⋈).

``contract(a, b)`` sums every axis the operands share and keeps the symmetric difference
(a's remaining axes in order, then b's). ``contract(a, b, over=X)`` sums only ``X`` and keeps
the other shared axes once, batched. Either lowers to one ``einsum`` (one ``dot_general``);
the backward is the paper's ``∇A = ∇(A ⋈ B) ⋈ B``, again one einsum per operand.
"""

from __future__ import annotations

import string
from typing import Any, TypeVar, TypeVarTuple

import jax
import jax.numpy as jnp

from ._axis import Axis, axes_names, axis_name, check_axis_label
from ._dtype import DType
from ._op import Op, result_dtype, same_sizes
from ._tensor import Tensor, TensorType

D = TypeVar("D", bound=DType)
I = TypeVar("I")  # noqa: E741
J = TypeVar("J")
K = TypeVar("K")
Bs = TypeVarTuple("Bs")
Array = Any


class MatMul(Op):
    """``Tensor[D, *B, I, J] @ Tensor[D, *B, J, K] -> Tensor[D, *B, I, K]``.

    Backward: ``da = dy @ bᵀ``, ``db = aᵀ @ dy`` (each one ``dot_general``, no transpose).
    """

    def infer(self, a: Any, b: Any) -> TensorType:
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

    def forward(self, a: Any, b: Any) -> Array:
        return jnp.matmul(a._array, b._array)

    def backward(self, dy: Any, y: Any, a: Any, b: Any) -> tuple[Array, Array]:
        # one dot_general each, contracting the right dimensions directly: no transposes
        g, n = dy._array, dy._array.ndim
        batch = (tuple(range(n - 2)),) * 2
        da = jax.lax.dot_general(g, b._array, (((n - 1,), (n - 1,)), batch))
        db = jax.lax.dot_general(a._array, g, (((n - 2,), (n - 2,)), batch))
        return da, db


_MATMUL = MatMul()


def matmul(a: Tensor[D, *Bs, I, J], b: Tensor[D, *Bs, J, K]) -> Tensor[D, *Bs, I, K]:
    """Batched matrix product over the last two axes; leading batch axes must match.

    Example:
        >>> x: ax.Tensor[ax.F32, Batch, In]; w: ax.Tensor[ax.F32, In, Out]
        >>> ax.matmul(x, w)          # Tensor[F32, Batch, Out]
    """
    return _MATMUL(a, b)  # type: ignore[no-any-return]


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

    def _plan(self, a: Any, b: Any) -> tuple[tuple[type[Axis], ...], tuple[type[Axis], ...]]:
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

    def infer(self, a: Any, b: Any) -> TensorType:
        dtype = result_dtype(self, (a, b))
        same_sizes(self, (a, b))
        _, out = self._plan(a, b)
        sizes = dict(zip(b.axes, b.shape, strict=True))
        sizes.update(zip(a.axes, a.shape, strict=True))
        return TensorType(dtype, out, tuple(sizes[x] for x in out))

    def _subscripts(self, a: Any, b: Any) -> tuple[str, str, str]:
        _, out = self._plan(a, b)
        letters: dict[type[Axis], str] = {}
        for x in (*a.axes, *b.axes):
            letters.setdefault(x, string.ascii_letters[len(letters)])
        sub = lambda axes: "".join(letters[x] for x in axes)  # noqa: E731
        return sub(a.axes), sub(b.axes), sub(out)

    def forward(self, a: Any, b: Any) -> Array:
        sa, sb, so = self._subscripts(a, b)
        return jnp.einsum(f"{sa},{sb}->{so}", a._array, b._array)

    def backward(self, dy: Any, y: Any, a: Any, b: Any) -> tuple[Array, Array]:
        sa, sb, so = self._subscripts(a, b)
        g = dy._array
        return (jnp.einsum(f"{so},{sb}->{sa}", g, b._array),
                jnp.einsum(f"{so},{sa}->{sb}", g, a._array))


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
    return Contract(over)(a, b)  # type: ignore[no-any-return]
