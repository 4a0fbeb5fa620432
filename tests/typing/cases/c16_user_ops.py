"""User ops (issue 32, class 3): an op of two operands on a typed base (ReductionOp,
FloatReductionOp) is checked against its declared signature by every checker; a plain
ax.Op outside op_modules gets the plugin's note (see test_typing.py)."""
# typing-class: 3 user ops

from typing import Any, TypeVar, final, reveal_type

import jax
import jax.numpy as jnp
from axes import N

import axjax as ax

X = TypeVar("X", bound=ax.Axis)


@final
class Feature(ax.Axis): ...


class Cosine(ax.FloatReductionOp[X]):
    """``sum(a * b) / (|a| |b|)`` over ``over``."""

    def forward(self, a: ax.AnyTensor, b: ax.AnyTensor) -> jax.Array:
        i = a.axes.index(self.over)
        norms = jnp.sqrt(jnp.sum(a.array * a.array, axis=i) * jnp.sum(b.array * b.array, axis=i))
        return jnp.sum(a.array * b.array, axis=i) / norms

    def backward(
        self, dy: ax.AnyTensor, y: ax.AnyTensor, a: ax.AnyTensor, b: ax.AnyTensor
    ) -> tuple[jax.Array, jax.Array]:
        return (0 * a.array, 0 * b.array)


class Dot(ax.ReductionOp[X]):
    """``sum(a * b)`` over ``over``, any dtype; its own infer adds nothing but is allowed."""

    def infer(self, a: Any, b: Any) -> ax.TensorType:
        return super().infer(a, b)

    def forward(self, a: ax.AnyTensor, b: ax.AnyTensor) -> jax.Array:
        return jnp.sum(a.array * b.array, axis=a.axes.index(self.over))

    def backward(
        self, dy: ax.AnyTensor, y: ax.AnyTensor, a: ax.AnyTensor, b: ax.AnyTensor
    ) -> tuple[jax.Array, jax.Array]:
        return (0 * a.array, 0 * b.array)


class Plain(ax.Op):
    """A plain ax.Op: nothing declares its operands (the plugin notes it)."""

    def infer(self, x: Any) -> ax.TensorType:
        out: ax.TensorType = x.type
        return out

    def forward(self, x: ax.AnyTensor) -> jax.Array:
        return x.array

    def backward(self, dy: ax.AnyTensor, y: ax.AnyTensor, x: ax.AnyTensor) -> tuple[jax.Array]:
        return (dy.array,)


x = ax.ones((4, 3), N, Feature)
counts = ax.ones((4, 3), N, Feature, dtype=ax.I32)
reveal_type(Cosine(Feature)(x, x))  # want: Tensor[F32, N]
reveal_type(Cosine(N)(x, x))  # want: Tensor[F32, Feature]
reveal_type(Dot(Feature)(counts, counts))  # want: Tensor[I32, N]
reveal_type(Plain()(x))  # want: Tensor[Any, *tuple[Any, ...]]

u1 = Cosine(Feature)(x, ax.transpose(x, Feature, N))  # want-error
u2 = Cosine(Feature)(x, ax.ones((4,), N))  # want-error
u3 = Cosine(Feature)(x, ax.ones((4, 3), N, Feature, dtype=ax.Bool))  # want-error
u4 = Cosine(Feature)(counts, counts)  # want-error
u5 = Dot(Feature)(x, ax.transpose(x, Feature, N))  # want-error
u6 = Dot(Feature)(ax.ones((4,), N), ax.ones((4,), N))  # want-error
