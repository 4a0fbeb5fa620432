"""Typed bases for user ops: the signature declared once, seen by every checker.

``ax.Op`` applies to any operands and returns ``Tensor[Any, *tuple[Any, ...]]`` (or the
declared ``R`` of ``ax.Op[R]``). Subclass one of these instead and mypy and pyright know
the result from the operands, with no plugin:

- :class:`ElementwiseOp`: operands of one type ``Tensor[D, *A]``, result ``Tensor[D, *A]``;
- :class:`FloatElementwiseOp`: the same for floating-point dtypes only (``D`` bound to
  :class:`~axjax.Floating`: integer and Bool tensors are a static error);
- :class:`ReductionOp` ``[X]``: built with the axis ``X`` it removes, ``Tensor[D, ..., X,
  ...] -> Tensor[D, ...]`` (exact when ``X`` is among the first 3 or the last 3 axes); more
  operands, if any, of the first one's type; :class:`FloatReductionOp` the same for floats.

Each has a default :meth:`infer` (the rule above, with axjax's messages): override
``forward`` and ``backward`` (and ``infer`` to add checks).
"""

# Position overloads overlap by design (as in ops/_gen_*.py): call sites are what count.
# mypy: disable-error-code="overload-overlap,overload-cannot-match"
# pyright: reportOverlappingOverload=false, reportInvalidTypeVarUse=false
# A typed base narrows Op's `__call__(*xs: Any)` to its own operands, on purpose.
# pyright: reportIncompatibleMethodOverride=false

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, TypeVarTuple, cast, overload

from ._axis import Axis, axes_names, axis_name
from ._dtype import DType, Floating
from ._op import Op, apply, require_floating, same_sizes
from ._protocols import Operand
from ._tensor import AnyTensor, Tensor
from ._tensor_type import TensorType

__all__ = ["ElementwiseOp", "FloatElementwiseOp", "FloatReductionOp", "ReductionOp"]

D = TypeVar("D", bound=DType)
DR = TypeVar("DR", bound=Floating)
X = TypeVar("X", bound=Axis)
T0 = TypeVar("T0")
T1 = TypeVar("T1")
T2 = TypeVar("T2")
Ts = TypeVarTuple("Ts")


def _same_type(op: Op[Any], x: Operand, others: tuple[Operand, ...]) -> TensorType:
    for o in others:
        if o.dtype is not x.dtype:
            raise op.fail(
                (x, *others),
                f"dtypes {x.dtype.__name__} and {o.dtype.__name__} "
                "differ (convert one operand with astype)",
            )
        if tuple(o.axes) != tuple(x.axes):
            raise op.fail(
                (x, *others),
                "axes differ (the operands need identical axes "
                "in identical order; transpose first)",
            )
    same_sizes(op, (x, *others))  # never a silent broadcast of a size-1 axis
    out: TensorType = x.type
    return out


class ElementwiseOp(Op[AnyTensor]):
    """A user op whose operands and result share one type: ``Tensor[D, *A] -> Tensor[D, *A]``.

    Example:
        >>> class Swish(ax.ElementwiseOp):
        ...     def forward(self, x): return x.array * jax.nn.sigmoid(x.array)
        ...     def backward(self, dy, y, x): ...
        >>> Swish()(t)  # Tensor[F32, Batch, Pixel] for t: Tensor[F32, Batch, Pixel]
    """

    user_base = True  # a base for users' ops, not a primitive (tests/ops/test_op_table.py)

    def infer(self, x: Any, *others: Any) -> TensorType:  # Any: an override may say Tensor
        """The operands' common type (``AxisError`` if their dtypes or axes differ)."""
        return _same_type(self, x, others)

    def __call__(self, x: Tensor[D, *Ts], *others: Tensor[D, *Ts]) -> Tensor[D, *Ts]:
        return cast("Tensor[D, *Ts]", apply(self, (x, *others)))


class FloatElementwiseOp(Op[AnyTensor]):
    """:class:`ElementwiseOp` for floating-point dtypes: an ``I32`` or ``Bool`` operand is a
    static error (and an ``AxisError`` when it runs).

    Example:
        >>> class SoftPlus(ax.FloatElementwiseOp): ...
        >>> SoftPlus()(ax.zeros((2,), Batch, dtype=ax.I32))  # rejected by every checker
    """

    user_base = True  # a base for users' ops, not a primitive (tests/ops/test_op_table.py)

    def infer(self, x: Any, *others: Any) -> TensorType:  # Any: an override may say Tensor
        """The operands' common type; floating-point values only."""
        require_floating(self, (x, *others))
        return _same_type(self, x, others)

    def __call__(self, x: Tensor[DR, *Ts], *others: Tensor[DR, *Ts]) -> Tensor[DR, *Ts]:
        return cast("Tensor[DR, *Ts]", apply(self, (x, *others)))


class _AxisReduction(Op[AnyTensor], Generic[X]):
    """What :class:`ReductionOp` and :class:`FloatReductionOp` share: the axis, the rule."""

    #: floating-point operands only (FloatReductionOp)
    floating = False

    def __init__(self, over: type[X]) -> None:
        self.over = over

    def describe(self) -> str:
        return f"{self.name}({axis_name(self.over)})"

    def _infer(self, x: Operand, *others: Operand) -> TensorType:
        if self.floating:
            require_floating(self, (x, *others))
        if self.over not in x.axes:
            raise self.fail(
                (x, *others),
                f"{axis_name(self.over)} is not an axis of the tensor "
                f"(name one of {axes_names(x.axes)})",
            )
        _same_type(self, x, others)
        i = list(x.axes).index(self.over)
        return TensorType(x.dtype, x.axes[:i] + x.axes[i + 1 :], x.shape[:i] + x.shape[i + 1 :])

    # An op of one operand overrides ``infer(self, x)``, of two ``infer(self, x, y)``: for
    # type checkers the rule takes any operands, so neither override is flagged.
    if TYPE_CHECKING:
        infer: Callable[..., TensorType]
    else:

        def infer(self, x: Operand, *others: Operand) -> TensorType:
            """``x``'s type without axis ``over`` (the operands of one type)."""
            return self._infer(x, *others)


class ReductionOp(_AxisReduction[X]):
    """A user op that removes axis ``X`` (given to the constructor): ``Tensor[D, *A]`` with
    ``X`` among its axes gives ``Tensor[D, *A]`` without it. Further operands, if the op
    takes any (a similarity of two tensors), have the first one's type exactly.

    Example:
        >>> class Norm(ax.ReductionOp[X]):
        ...     def forward(self, x): return jnp.linalg.norm(x.array, axis=x.axes.index(self.over))
        ...     def backward(self, dy, y, x): ...
        >>> Norm(Pixel)(t)  # Tensor[F32, Batch] for t: Tensor[F32, Batch, Pixel]
    """

    user_base = True  # a base for users' ops, not a primitive (tests/ops/test_op_table.py)

    @overload
    def __call__(self, x: Tensor[D, X, *Ts], *others: Tensor[D, X, *Ts]) -> Tensor[D, *Ts]: ...
    @overload
    def __call__(
        self, x: Tensor[D, T0, X, *Ts], *others: Tensor[D, T0, X, *Ts]
    ) -> Tensor[D, T0, *Ts]: ...
    @overload
    def __call__(
        self, x: Tensor[D, T0, T1, X, *Ts], *others: Tensor[D, T0, T1, X, *Ts]
    ) -> Tensor[D, T0, T1, *Ts]: ...
    @overload
    def __call__(self, x: Tensor[D, *Ts, X], *others: Tensor[D, *Ts, X]) -> Tensor[D, *Ts]: ...
    @overload
    def __call__(
        self, x: Tensor[D, *Ts, X, T0], *others: Tensor[D, *Ts, X, T0]
    ) -> Tensor[D, *Ts, T0]: ...
    @overload
    def __call__(
        self, x: Tensor[D, *Ts, X, T0, T1], *others: Tensor[D, *Ts, X, T0, T1]
    ) -> Tensor[D, *Ts, T0, T1]: ...
    @overload
    def __call__(
        self,
        x: Tensor[D, T0, T1, T2, *Ts, Any, Any, Any],
        *others: Tensor[D, T0, T1, T2, *Ts, Any, Any, Any],
    ) -> Tensor[D, *tuple[Any, ...]]: ...
    def __call__(self, x: AnyTensor, *others: AnyTensor) -> AnyTensor:
        return cast("AnyTensor", apply(self, (x, *others)))


class FloatReductionOp(_AxisReduction[X]):
    """:class:`ReductionOp` for floating-point dtypes: an ``I32`` or ``Bool`` operand is a
    static error (and an ``AxisError`` when it runs).

    Example:
        >>> class Cosine(ax.FloatReductionOp[X]): ...   # (x, y) -> x . y / (|x| |y|) over X
        >>> Cosine(Feature)(a, b)  # Tensor[F32, Batch] for a, b: Tensor[F32, Batch, Feature]
    """

    user_base = True  # a base for users' ops, not a primitive (tests/ops/test_op_table.py)
    floating = True

    @overload
    def __call__(self, x: Tensor[DR, X, *Ts], *others: Tensor[DR, X, *Ts]) -> Tensor[DR, *Ts]: ...
    @overload
    def __call__(
        self, x: Tensor[DR, T0, X, *Ts], *others: Tensor[DR, T0, X, *Ts]
    ) -> Tensor[DR, T0, *Ts]: ...
    @overload
    def __call__(
        self, x: Tensor[DR, T0, T1, X, *Ts], *others: Tensor[DR, T0, T1, X, *Ts]
    ) -> Tensor[DR, T0, T1, *Ts]: ...
    @overload
    def __call__(self, x: Tensor[DR, *Ts, X], *others: Tensor[DR, *Ts, X]) -> Tensor[DR, *Ts]: ...
    @overload
    def __call__(
        self, x: Tensor[DR, *Ts, X, T0], *others: Tensor[DR, *Ts, X, T0]
    ) -> Tensor[DR, *Ts, T0]: ...
    @overload
    def __call__(
        self, x: Tensor[DR, *Ts, X, T0, T1], *others: Tensor[DR, *Ts, X, T0, T1]
    ) -> Tensor[DR, *Ts, T0, T1]: ...
    @overload
    def __call__(
        self,
        x: Tensor[DR, T0, T1, T2, *Ts, Any, Any, Any],
        *others: Tensor[DR, T0, T1, T2, *Ts, Any, Any, Any],
    ) -> Tensor[DR, *tuple[Any, ...]]: ...
    def __call__(self, x: AnyTensor, *others: AnyTensor) -> AnyTensor:
        return cast("AnyTensor", apply(self, (x, *others)))
