"""The exact text of every error the core raises (tensors, transforms, the op contract,
stacked leaves, sharding): what is wrong, and how to fix it (the ops' errors:
tests/ops/test_op_errors.py)."""

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
    # ------------------------------------------------------------------ constructing tensors
    (
        ax.AxisError,
        "Cannot name the axes of an array of shape (2, 3) (2 dimensions) with 1 axes "
        "(Batch): give exactly one axis label per dimension",
        lambda: ax.tensor(np.ones((2, 3)), Batch),
    ),
    (
        TypeError,
        "Tensor: 'Batch' is not an axis label but a string: pass the axis class itself (axis "
        "labels are subclasses of ax.Axis: `@final class Batch(ax.Axis): ...`)",
        lambda: ax.tensor(np.ones(2), "Batch"),
    ),
    (
        TypeError,
        "Tensor: `Axis` itself is not an axis label; subclass it",
        lambda: ax.tensor(np.ones(2), ax.Axis),
    ),
    (
        ax.AxisError,
        "Tensor: axis Batch occurs twice in (Batch, Batch); a tensor never has the "
        "same axis twice (rename one of them)",
        lambda: ax.tensor(np.ones((2, 2)), Batch, Batch),
    ),
    (
        TypeError,
        "axis label Batch is a type, not a value: write `Batch`, not `Batch()`",
        lambda: Batch(),
    ),
    (TypeError, "dtype marker F32 is a type, not a value", lambda: ax.F32()),
    (TypeError, "Tensor wraps an array, got list", lambda: ax.Tensor([1.0, 2.0], (Batch,))),
    (
        TypeError,
        "dtype dtype('complex64') has no axjax marker (known: F16, BF16, F32, F64, I8, "
        "I32, I64, U8, U32, Bool)",
        lambda: ax.tensor(jnp.ones(2, jnp.complex64), Batch),
    ),
    (
        TypeError,
        "zeros: shape (2, 3) has 2 sizes but 1 axes were named (Batch); give one size per axis",
        lambda: ax.zeros((2, 3), Batch),
    ),
    (
        TypeError,
        "zeros: the shape must be an int or a tuple of ints, one per axis (e.g. "
        "(128, 784) for Batch, Pixel), got F32",
        lambda: ax.zeros(ax.F32, Batch),
    ),
    (
        TypeError,
        "ones: the shape must be an int or a tuple of ints, one per axis (e.g. "
        "(128, 784) for Batch, Pixel), got (2.5,)",
        lambda: ax.ones((2.5,), Batch),
    ),
    (
        ax.AxisError,
        f"Cannot read the size of axis Hidden of {X}: Hidden is not an axis of the "
        "tensor (name one of Batch, Pixel)",
        lambda: x23().size(Hidden),
    ),
    # ------------------------------------------------------------------ transforms
    (
        ax.AxisError,
        f"Cannot apply grad to {X}: the function must return a scalar (reduce the "
        "remaining axes with ax.sum or ax.mean)",
        lambda: ax.grad(lambda t: t * 2.0)(x23()),
    ),
    (
        ax.AxisError,
        "Cannot apply value_and_grad to Tensor[F32, Batch=2]: the function must "
        "return a scalar (reduce the remaining axes with ax.sum or ax.mean)",
        lambda: ax.value_and_grad(lambda t: ax.sum(t, Pixel))(x23()),
    ),
    (
        ax.AxisError,
        "Cannot apply vmap over Out: no argument has axis Out (add it with "
        "ax.expand_dims or map over another axis)",
        lambda: ax.vmap(lambda t: t, over=Out)(x23()),
    ),
    (
        ax.AxisError,
        "Cannot apply vmap over Batch: the arguments give it sizes 2 and 5 (equal "
        "axes must have equal sizes; slice or pad one argument)",
        lambda: ax.vmap(lambda a, b: a, over=Batch)(x23(), ax.zeros((5,), Batch)),
    ),
    (
        ax.AxisError,
        "Cannot apply vmap over Batch to Tensor[F32, Pixel=3, Batch=2]: a result "
        "already has axis Batch (rename it, or return it without the mapped axis)",
        lambda: ax.vmap(lambda a, b: ax.broadcast(a, (Pixel, Batch), sizes={Batch: 2}), over=Batch)(
            x23(), ax.zeros((2,), Batch)
        ),
    ),
]


class TwoOut(ax.Op):
    """A deliberately broken op whose backward returns the wrong cotangents."""

    def __init__(self, bad: str) -> None:
        self.bad = bad

    def infer(self, x: Any) -> ax.TensorType:
        return x.type

    def forward(self, x: Any) -> Any:
        return x.array * 2

    def backward(self, dy: Any, y: Any, x: Any) -> Any:
        if self.bad == "count":
            return (dy.array, dy.array)
        if self.bad == "axes":
            return (ax.transpose(dy, *reversed(dy.axes)),)
        return (dy.array[0],)


def _grad_of(op: ax.Op) -> Any:
    return ax.grad(lambda t: ax.sum(op(t), (Batch, Pixel)))(ax.ones((2, 3), Batch, Pixel))


CASES += [
    (
        TypeError,
        "TwoOut.backward returned 2 cotangents for 1 operands",
        lambda: _grad_of(TwoOut("count")),
    ),
    (
        ax.AxisError,
        "TwoOut.backward: cotangent 0 has axes (Pixel, Batch) but operand 0 has "
        "(Batch, Pixel) (transpose it to the operand's order)",
        lambda: _grad_of(TwoOut("axes")),
    ),
    (
        TypeError,
        "TwoOut.backward: cotangent 0 has shape (3,), operand 0 (Tensor[F32, Batch=2, Pixel=3]) "
        "has shape (2, 3) (return one value per element of the operand, in its axis order)",
        lambda: _grad_of(TwoOut("shape")),
    ),
    (NotImplementedError, "Op must define infer()", lambda: ax.Op()(x23())),
    # ------------------------------------------------------------------ stacked pytree leaves
    (
        TypeError,
        "Cannot apply Exp to Tensor[F32, Batch]: stacked: array of shape (3, 2), 1 "
        "unnamed leading dimension (3,) (name them with ax.tensor(t.array, Axis, *t.axes), or take "
        "them off with jax.vmap / jax.lax.scan first)",
        lambda: ax.exp(jax.vmap(lambda s: ax.ones((2,), Batch) * s)(jnp.arange(3.0))),
    ),
    (
        TypeError,
        "Cannot apply Sum(Pixel) to Tensor[F32, Batch, Pixel]: array of shape (3,) has "
        "lost 1 named dimension: a raw jax.vmap or jax.lax.scan sliced a named axis (use "
        "ax.vmap(f, over=Axis))",
        lambda: jax.vmap(lambda t: ax.sum(t, Pixel))(x23()),
    ),
    # ------------------------------------------------------------------ sharding
    (
        TypeError,
        f"partition_spec: mesh axis 'data' would shard both Batch and Pixel of {X} (a "
        "mesh axis can split only one axis of a tensor)",
        lambda: ax.partition_spec(x23(), {Batch: "data", Pixel: "data"}),
    ),
    (
        TypeError,
        "partition_spec: a mesh axis is a string, a tuple of strings or None, got 3",
        lambda: ax.partition_spec(x23(), {Batch: 3}),
    ),  # type: ignore[dict-item]
    (
        TypeError,
        "partition_spec: 'Batch' is not an axis label but a string: pass the axis class "
        "itself (axis labels are subclasses of ax.Axis: `@final class Batch(ax.Axis): ...`)",
        lambda: ax.partition_spec(x23(), {"Batch": "data"}),
    ),  # type: ignore[dict-item]
]


@pytest.mark.parametrize(("kind", "message", "fn"), CASES, ids=[m[:50] for _, m, _ in CASES])
def test_error_message(kind: type[Exception], message: str, fn: Callable[[], Any]) -> None:
    raises(kind, message, fn)


def test_axis_errors_are_type_errors_and_public() -> None:
    assert issubclass(ax.AxisError, TypeError)
    assert ax.AxisError.__module__ == "axjax"
