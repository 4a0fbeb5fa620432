"""The exact text of every error the ops raise: what is wrong, and how to fix it (the
core's, tensors, transforms and the op contract: tests/core/test_core_errors.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from tests.axes import Batch, Hidden, Out, Pixel
from tests.errors import X, raises, x23

# (error type, exact message, code that raises it)
CASES: list[tuple[type[Exception], str, Callable[[], Any]]] = [
    # ------------------------------------------------------------------ elementwise
    (
        ax.AxisError,
        f"Cannot apply Add to {X} and Tensor[F32, Pixel=3, Batch=2]: same axes in a "
        "different order (transpose one operand first)",
        lambda: x23() + ax.zeros((3, 2), Pixel, Batch),
    ),
    (
        ax.AxisError,
        f"Cannot apply Multiply to {X} and Tensor[F32, Batch=2, Hidden=3]: axes "
        "differ (elementwise ops need identical axes: use ax.broadcast, ax.transpose or ax.rename "
        "to line them up)",
        lambda: x23() * ax.zeros((2, 3), Batch, Hidden),
    ),
    (
        ax.AxisError,
        f"Cannot apply Subtract to {X} and Tensor[F32, Batch=2]: axes differ "
        "(elementwise ops need identical axes: use ax.broadcast, ax.transpose or ax.rename to line "
        "them up)",
        lambda: x23() - ax.zeros((2,), Batch),
    ),
    (
        ax.AxisError,
        f"Cannot apply Add to {X} and Tensor[F32, Batch=2, Pixel=4]: axis Pixel has "
        "size 3 in one operand and 4 in another (equal axes must have equal sizes)",
        lambda: x23() + ax.zeros((2, 4), Batch, Pixel),
    ),
    (
        ax.AxisError,
        f"Cannot apply Add to {X} and Tensor[I32, Batch=2, Pixel=3]: dtypes F32 and "
        "I32 differ (convert one operand with astype)",
        lambda: x23() + ax.zeros((2, 3), Batch, Pixel, dtype=ax.I32),
    ),
    (
        ax.AxisError,
        "Cannot apply Exp to Tensor[I32, Batch=2]: Exp needs floating-point values, "
        "got I32 (convert with astype(ax.F32))",
        lambda: ax.exp(ax.zeros((2,), Batch, dtype=ax.I32)),
    ),
    (
        ax.AxisError,
        "Cannot apply Divide to Tensor[I32, Batch=2] and Tensor[I32, Batch=2]: Divide "
        "needs floating-point values, got I32 (convert with astype(ax.F32))",
        lambda: ax.ones((2,), Batch, dtype=ax.I32) / ax.ones((2,), Batch, dtype=ax.I32),
    ),
    (
        ax.AxisError,
        "Cannot apply Negative to Tensor[Bool, Batch=2]: Negative needs numbers, got "
        "Bool (convert with astype(ax.I32) or astype(ax.F32))",
        lambda: -ax.zeros((2,), Batch, dtype=ax.Bool),
    ),
    (
        ax.AxisError,
        "Cannot apply Add to Tensor[Bool, Batch=2] and Tensor[Bool, Batch=2]: Add "
        "needs numbers, got Bool (convert with astype(ax.I32) or astype(ax.F32))",
        lambda: ax.zeros((2,), Batch, dtype=ax.Bool) + ax.zeros((2,), Batch, dtype=ax.Bool),
    ),
    (
        TypeError,
        "Cannot apply Exp to jax.Array of shape (3,): operands must be Tensors (wrap "
        "arrays with ax.tensor(array, *axes))",
        lambda: ax.exp(jnp.ones(3)),
    ),
    (
        TypeError,
        "Cannot apply Add to jax.Array of shape (2, 3): operands must be Tensors or "
        "Python numbers (wrap arrays with ax.tensor(array, *axes))",
        lambda: x23() + jnp.ones((2, 3)),
    ),
    (
        TypeError,
        "Cannot apply Multiply to str: operands must be Tensors or Python numbers (wrap "
        "arrays with ax.tensor(array, *axes))",
        lambda: x23() * "2",
    ),
    (
        ax.AxisError,
        "Cannot apply Add to Tensor[I32, Batch=2]: the float 0.5 cannot mix with I32 "
        "values (convert the tensor with astype(ax.F32))",
        lambda: ax.zeros((2,), Batch, dtype=ax.I32) + 0.5,
    ),
    (
        ax.AxisError,
        "Cannot apply Add to Tensor[U8, Batch=2]: the number 300 does not fit in U8 "
        "(convert the tensor to a wider dtype with astype)",
        lambda: ax.zeros((2,), Batch, dtype=ax.U8) + 300,
    ),
    (
        ax.AxisError,
        "Cannot apply Equal to Tensor[Bool, Batch=2]: the number 1 cannot mix with "
        "Bool values (use True or False, or convert the tensor with astype(ax.I32))",
        lambda: ax.equal(ax.zeros((2,), Batch, dtype=ax.Bool), 1),
    ),
    (
        ax.AxisError,
        f"Cannot apply Where to {X} and {X} and {X}: the condition must be Bool, got F32",
        lambda: ax.where(x23(), x23(), x23()),
    ),
    (
        ax.AxisError,
        "Cannot apply Where to Tensor[Bool, Pixel=3, Batch=2] and "
        f"{X} and {X}: the condition's axes differ from the values' axes (transpose or broadcast "
        "the condition first)",
        lambda: ax.where(ax.zeros((3, 2), Pixel, Batch, dtype=ax.Bool), x23(), x23()),
    ),
    (
        TypeError,
        "where: at least one of a, b must be a Tensor (wrap a number with "
        "ax.full(shape, *axes, value=...))",
        lambda: ax.where(ax.zeros((2,), Batch, dtype=ax.Bool), 1.0, 0.0),
    ),
    # ------------------------------------------------------------------ reductions
    (
        ax.AxisError,
        f"Cannot apply Sum(Hidden) to {X}: Hidden is not an axis of the tensor (name "
        "one of Batch, Pixel)",
        lambda: ax.sum(x23(), Hidden),
    ),
    (
        ax.AxisError,
        f"Cannot apply Softmax(Out) to {X}: Out is not an axis of the tensor (name "
        "one of Batch, Pixel)",
        lambda: ax.softmax(x23(), Out),
    ),
    (TypeError, "Sum: axis named twice in (Batch, Batch)", lambda: ax.sum(x23(), (Batch, Batch))),
    (TypeError, "Mean: name at least one axis", lambda: ax.mean(x23(), ())),
    (
        TypeError,
        "Max: 3 is not an axis label; axis labels are subclasses of ax.Axis "
        "(`@final class Batch(ax.Axis): ...`)",
        lambda: ax.max(x23(), 3),
    ),  # type: ignore[arg-type]
    (
        ax.AxisError,
        f"Cannot apply ArgMax(Batch, Pixel) to {X}: argmax takes exactly one axis",
        lambda: ax.argmax(x23(), (Batch, Pixel)),
    ),  # type: ignore[arg-type]
    (
        ax.AxisError,
        "Cannot apply Sum(Batch) to Tensor[Bool, Batch=2]: cannot sum Bool values "
        "(count them with ax.sum(t.astype(ax.I32), ...))",
        lambda: ax.sum(ax.zeros((2,), Batch, dtype=ax.Bool), Batch),
    ),
    (
        ax.AxisError,
        "Cannot apply Mean(Batch) to Tensor[I32, Batch=2]: Mean needs floating-point "
        "values, got I32 (convert with astype(ax.F32))",
        lambda: ax.mean(ax.zeros((2,), Batch, dtype=ax.I32), Batch),
    ),
    # ------------------------------------------------------------------ matmul, contract
    (
        ax.AxisError,
        "Cannot apply MatMul to Tensor[F32, Batch=2] and Tensor[F32, Batch=2, "
        "Pixel=3]: both operands need at least 2 axes (use ax.contract for vectors)",
        lambda: ax.zeros((2,), Batch) @ x23(),
    ),
    (
        ax.AxisError,
        f"Cannot apply MatMul to {X} and Tensor[F32, Hidden=3, Out=4]: inner axes "
        "Pixel and Hidden differ (rename one, or use ax.contract)",
        lambda: x23() @ ax.zeros((3, 4), Hidden, Out),
    ),
    (
        ax.AxisError,
        f"Cannot apply MatMul to {X} and Tensor[F32, Pixel=4, Out=5]: axis Pixel has "
        "size 3 in one operand and 4 in another (equal axes must have equal sizes)",
        lambda: x23() @ ax.zeros((4, 5), Pixel, Out),
    ),
    (
        ax.AxisError,
        "Cannot apply MatMul to Tensor[F32, Out=1, Batch=2, Pixel=3] and "
        "Tensor[F32, Hidden=1, Pixel=3, Out=4]: batch axes [Out] and [Hidden] differ "
        "(transpose one operand first)",
        lambda: ax.zeros((1, 2, 3), Out, Batch, Pixel) @ ax.zeros((1, 3, 4), Hidden, Pixel, Out),
    ),
    (
        ax.AxisError,
        f"Cannot apply MatMul to {X} and Tensor[F32, Pixel=3, Batch=2]: the result "
        "would have axis Batch twice (rename one operand's axis first)",
        lambda: x23() @ ax.zeros((3, 2), Pixel, Batch),
    ),
    (
        ax.AxisError,
        f"Cannot apply MatMul to {X} and Tensor[F64, Pixel=3, Out=4]: dtypes F32 and "
        "F64 differ (convert one operand with astype)",
        lambda: x23() @ ax.Tensor(np.zeros((3, 4)), (Pixel, Out)),
    ),
    (
        ax.AxisError,
        f"Cannot apply Contract(over=Hidden) to {X} and Tensor[F32, Pixel=3, "
        "Out=4]: Hidden is not an axis of either operand (contract sums axes the operands share)",
        lambda: ax.contract(x23(), ax.zeros((3, 4), Pixel, Out), over=Hidden),
    ),
    (
        ax.AxisError,
        f"Cannot apply Contract(over=Batch) to {X} and Tensor[F32, Pixel=3, Out=4]: "
        "Batch is not an axis of the second operand (contract sums axes the operands share)",
        lambda: ax.contract(x23(), ax.zeros((3, 4), Pixel, Out), over=Batch),
    ),
    (
        ax.AxisError,
        f"Cannot apply Contract(over=Out) to {X} and Tensor[F32, Pixel=3, Out=4]: "
        "Out is not an axis of the first operand (contract sums axes the operands share)",
        lambda: ax.contract(x23(), ax.zeros((3, 4), Pixel, Out), over=Out),
    ),
    (
        ax.AxisError,
        f"Cannot apply Contract to {X} and Tensor[F32, Pixel=4]: axis Pixel has size "
        "3 in one operand and 4 in another (equal axes must have equal sizes)",
        lambda: ax.contract(x23(), ax.zeros((4,), Pixel)),
    ),
    (
        TypeError,
        "Contract: name each summed axis once, got over=(Pixel, Pixel)",
        lambda: ax.contract(x23(), x23(), over=(Pixel, Pixel)),
    ),
]

CASES += [
    # ------------------------------------------------------------------ shape ops
    (
        ax.AxisError,
        f"Cannot apply ExpandDims(Batch, at=0) to {X}: axis Batch already present (a "
        "tensor never has the same axis twice; rename one)",
        lambda: ax.expand_dims(x23(), Batch),
    ),
    (
        ax.AxisError,
        f"Cannot apply ExpandDims(Out, at=3) to {X}: index 3 out of range for rank 2 (use -3 to 2)",
        lambda: ax.expand_dims(x23(), Out, 3),
    ),
    (
        ax.AxisError,
        f"Cannot apply Squeeze(Pixel) to {X}: axis Pixel has size 3, not 1 (reduce it "
        "with ax.sum/ax.mean or pick one entry with ax.index)",
        lambda: ax.squeeze(x23(), Pixel),
    ),
    (
        ax.AxisError,
        f"Cannot apply Squeeze(Out) to {X}: Out is not an axis of the tensor (name "
        "one of Batch, Pixel)",
        lambda: ax.squeeze(x23(), Out),
    ),
    (
        ax.AxisError,
        f"Cannot apply Transpose(Batch, Hidden) to {X}: (Batch, Hidden) is not a "
        "permutation of the tensor's axes (name each of Batch, Pixel once)",
        lambda: ax.transpose(x23(), Batch, Hidden),
    ),
    (
        ax.AxisError,
        f"Cannot apply Transpose(Pixel) to {X}: (Pixel) is not a permutation of the "
        "tensor's axes (name each of Batch, Pixel once)",
        lambda: ax.transpose(x23(), Pixel),
    ),
    (
        ax.AxisError,
        f"Cannot apply Transpose(Pixel, Pixel) to {X}: (Pixel, Pixel) is not a "
        "permutation of the tensor's axes (name each of Batch, Pixel once)",
        lambda: ax.transpose(x23(), Pixel, Pixel),
    ),
    (
        ax.AxisError,
        f"Cannot apply Rename(Batch -> Pixel) to {X}: axis Pixel already present (a "
        "tensor never has the same axis twice; rename one)",
        lambda: ax.rename(x23(), Batch, Pixel),
    ),
    (
        ax.AxisError,
        f"Cannot apply Rename(Out -> Hidden) to {X}: Out is not an axis of the tensor "
        "(name one of Batch, Pixel)",
        lambda: ax.rename(x23(), Out, Hidden),
    ),
    (
        ax.AxisError,
        f"Cannot apply Broadcast(Batch, Out) to {X} and Tensor[F32, Batch=2, Out=4]: "
        "Pixel is not an axis of the target (broadcast only adds axes; reduce or index it away "
        "first)",
        lambda: ax.broadcast(x23(), ax.zeros((2, 4), Batch, Out)),
    ),
    (
        ax.AxisError,
        f"Cannot apply Broadcast(Pixel, Batch) to {X} and Tensor[F32, Pixel=3, "
        "Batch=5]: axis Batch has size 2, the target has 5",
        lambda: ax.broadcast(x23(), ax.zeros((3, 5), Pixel, Batch)),
    ),
    (
        TypeError,
        "broadcast: give the size of Out in sizes=",
        lambda: ax.broadcast(x23(), (Batch, Pixel, Out)),
    ),
    (
        ax.AxisError,
        "Broadcast: axis Out occurs twice in (Out, Out, Batch, Pixel); a tensor never "
        "has the same axis twice (rename one of them)",
        lambda: ax.broadcast(x23(), (Out, Out, Batch, Pixel), sizes={Out: 2}),
    ),
    (
        ax.AxisError,
        f"Cannot apply Tile(Out, 2) to {X}: Out is not an axis of the tensor (name "
        "one of Batch, Pixel)",
        lambda: ax.tile(x23(), Out, 2),
    ),
    (
        ax.AxisError,
        f"Cannot apply Concat(Batch) to {X} and Tensor[F32, Pixel=3, Batch=2]: axes "
        "differ (concat needs identical axes in identical order; transpose first)",
        lambda: ax.concat([x23(), ax.zeros((3, 2), Pixel, Batch)], Batch),
    ),
    (
        ax.AxisError,
        f"Cannot apply Concat(Batch) to {X} and Tensor[F32, Batch=2, Pixel=4]: axis "
        "Pixel has sizes 3 and 4 (only Batch may differ)",
        lambda: ax.concat([x23(), ax.zeros((2, 4), Batch, Pixel)], Batch),
    ),
    (
        ax.AxisError,
        f"Cannot apply Concat(Out) to {X}: Out is not an axis of the tensor (name one "
        "of Batch, Pixel)",
        lambda: ax.concat([x23(), x23()], Out),
    ),
    (TypeError, "concat: give at least one tensor", lambda: ax.concat([], Batch)),
    (
        ax.AxisError,
        f"Cannot apply Stack(Out, at=0) to {X} and Tensor[F32, Pixel=3, Batch=2]: "
        "axes differ (stack needs identical axes in identical order; transpose first)",
        lambda: ax.stack([x23(), ax.zeros((3, 2), Pixel, Batch)], Out),
    ),
    (
        ax.AxisError,
        f"Cannot apply Stack(Out, at=0) to {X} and Tensor[F32, Batch=2, Pixel=4]: "
        "sizes differ (stack needs equal sizes)",
        lambda: ax.stack([x23(), ax.zeros((2, 4), Batch, Pixel)], Out),
    ),
    (
        ax.AxisError,
        f"Cannot apply Stack(Batch, at=0) to {X}: axis Batch already present (a "
        "tensor never has the same axis twice; rename one)",
        lambda: ax.stack([x23()], Batch),
    ),
    (
        ax.AxisError,
        f"Cannot apply Stack(Out, at=-4) to {X}: index -4 out of range for rank 2 (use -3 to 2)",
        lambda: ax.stack([x23()], Out, at=-4),
    ),
    (
        ax.AxisError,
        f"Cannot apply Flatten((Batch, Out) -> Hidden) to {X}: Out is not an axis of "
        "the tensor (name one of Batch, Pixel)",
        lambda: ax.flatten(x23(), (Batch, Out), Hidden),
    ),
    (
        ax.AxisError,
        "Cannot apply Flatten((Batch, Pixel) -> Out) to Tensor[F32, Batch=2, Pixel=3, "
        "Out=1]: axis Out already present (a tensor never has the same axis twice; rename one)",
        lambda: ax.flatten(ax.zeros((2, 3, 1), Batch, Pixel, Out), (Batch, Pixel), Out),
    ),
    (
        ax.AxisError,
        f"Cannot apply Flatten((Batch, Batch) -> Out) to {X}: name each merged axis once",
        lambda: ax.flatten(x23(), (Batch, Batch), Out),
    ),
    (
        ax.AxisError,
        f"Cannot apply Unflatten(Pixel -> (Hidden, Out)) to {X}: sizes (2, 2) "
        "multiply to 4, but Pixel has size 3",
        lambda: ax.unflatten(x23(), Pixel, (Hidden, Out), (2, 2)),
    ),
    (
        ax.AxisError,
        f"Cannot apply Unflatten(Pixel -> (Batch, Out)) to {X}: axis Batch already "
        "present (a tensor never has the same axis twice; rename one)",
        lambda: ax.unflatten(x23(), Pixel, (Batch, Out), (3, 1)),
    ),
    (
        ax.AxisError,
        f"Cannot apply Unflatten(Pixel -> (Out, Out)) to {X}: an axis occurs twice in "
        "(Out, Out) (a tensor never has the same axis twice; name each new axis once)",
        lambda: ax.unflatten(x23(), Pixel, (Out, Out), (3, 1)),
    ),
    (
        TypeError,
        "unflatten: 2 axes but 1 sizes",
        lambda: ax.unflatten(x23(), Pixel, (Hidden, Out), (3,)),
    ),
    (
        ax.AxisError,
        f"Cannot apply Unstack(Out) to {X}: Out is not an axis of the tensor (name "
        "one of Batch, Pixel)",
        lambda: ax.unstack(x23(), Out),
    ),
    (
        ax.AxisError,
        "Cannot apply Unstack(Batch) to Tensor[F32, Batch=0, Pixel=3]: Batch has size "
        "0 (unstack makes one tensor per entry)",
        lambda: ax.unstack(ax.zeros((0, 3), Batch, Pixel), Batch),
    ),
    (
        ax.AxisError,
        "Cannot apply Unstack(Batch) to Tensor[F32, Batch=?, Pixel=3]: the size of "
        "Batch is not known (unstack makes one tensor per entry: give Batch a size)",
        lambda: ax.unstack(ax.Input(ax.F32, Batch, Pixel, sizes={Pixel: 3}), Batch),
    ),
    (
        TypeError,
        "MultiApply Unstack(Pixel): (Tensor[F32, Batch=?], Tensor[F32, Batch=?]) holds 2 "
        "results, not one Tensor: use its parts (the tuple the op returned)",
        lambda: ax.unstack(ax.Input(ax.F32, Batch, Pixel, sizes={Pixel: 2}), Pixel)[0].source.axes,
    ),
    # ------------------------------------------------------------------ selection
    (
        ax.AxisError,
        f"Cannot apply Index(Batch, 2) to {X}: index 2 out of range for Batch of size "
        "2 (use -2 to 1)",
        lambda: ax.index(x23(), Batch, 2),
    ),
    (
        ax.AxisError,
        f"Cannot apply Index(Out, 0) to {X}: Out is not an axis of the tensor (name "
        "one of Batch, Pixel)",
        lambda: ax.index(x23(), Out, 0),
    ),
    (
        TypeError,
        "index: the position must be an int or a rank-0 integer Tensor, got "
        "Tensor[I32, Batch=2] (gather many positions with ax.take)",
        lambda: ax.index(x23(), Pixel, ax.zeros((2,), Batch, dtype=ax.I32)),
    ),
    (
        ax.AxisError,
        f"Cannot apply Slice(Pixel, ::0) to {X}: slice step must be positive",
        lambda: ax.slice(x23(), Pixel, step=0),
    ),
    (
        ax.AxisError,
        f"Cannot apply Take(Pixel) to {X} and Tensor[F32, Out=4]: indices must be "
        "integers, got F32",
        lambda: ax.take(x23(), Pixel, ax.zeros((4,), Out)),
    ),
    (
        ax.AxisError,
        f"Cannot apply Take(Pixel) to {X} and Tensor[I32, Batch=4]: axis Batch would "
        "occur twice in the result (rename it in the indices)",
        lambda: ax.take(x23(), Pixel, ax.zeros((4,), Batch, dtype=ax.I32)),
    ),
    (
        ax.AxisError,
        "Cannot apply OneHot(Out, 3) to Tensor[F32, Batch=2]: labels must be integers, got F32",
        lambda: ax.one_hot(ax.zeros((2,), Batch), Out, 3),
    ),
    (
        ax.AxisError,
        "Cannot apply OneHot(Batch, 3) to Tensor[I32, Batch=2]: axis Batch already "
        "present (a tensor never has the same axis twice; rename one)",
        lambda: ax.one_hot(ax.zeros((2,), Batch, dtype=ax.I32), Batch, 3),
    ),
    (
        ax.AxisError,
        f"Cannot apply Add to {X} and Tensor[I32]: dtypes F32 and I32 differ (convert "
        "one operand with astype)",
        lambda: x23() + jnp.int32(2),
    ),
]


@pytest.mark.parametrize(("kind", "message", "fn"), CASES, ids=[m[:50] for _, m, _ in CASES])
def test_error_message(kind: type[Exception], message: str, fn: Callable[[], Any]) -> None:
    raises(kind, message, fn)


def test_errors_are_raised_while_tracing_not_from_compiled_code() -> None:
    traced = []

    def f(a: Any, b: Any) -> Any:
        traced.append(1)
        return (a + b).array

    with pytest.raises(ax.AxisError, match="same axes in a different order"):
        jax.jit(f)(x23(), ax.zeros((3, 2), Pixel, Batch))
    assert traced == [1]
