"""User ops for c12_user_ops.py: typed bases, and a module the plugin is allowed to import
and run (``op_modules = ["userops"]`` in ``[tool.axjax-mypy]``)."""

from typing import Any, TypeVar

import jax
import jax.numpy as jnp

import axjax as ax

X = TypeVar("X", bound=ax.Axis)


class Swish(ax.FloatElementwiseOp):
    """``x * sigmoid(x)``: same type in, same type out, floats only."""

    def forward(self, x: ax.AnyTensor) -> jax.Array:
        return x.array * jax.nn.sigmoid(x.array)

    def backward(self, dy: ax.AnyTensor, y: ax.AnyTensor, x: ax.AnyTensor) -> tuple[jax.Array]:
        s = jax.nn.sigmoid(x.array)
        return (dy.array * (s + y.array * (1 - s)),)


class Norm(ax.ReductionOp[X]):
    """``sqrt(sum(x**2))`` over the axis ``over``, which is removed."""

    def infer(self, x: Any) -> ax.TensorType:
        if not issubclass(x.dtype, ax.Floating):
            raise self.fail((x,), "the norm needs floating-point values (use astype)")
        return super().infer(x)

    def forward(self, x: ax.AnyTensor) -> jax.Array:
        return jnp.sqrt(jnp.sum(jnp.square(x.array), axis=x.axes.index(self.over)))

    def backward(self, dy: ax.AnyTensor, y: ax.AnyTensor, x: ax.AnyTensor) -> tuple[jax.Array]:
        i = x.axes.index(self.over)
        return (jnp.expand_dims(dy.array / y.array, i) * x.array,)


class Outer(ax.Op):
    """``a[..., I] * b[..., J]`` -> ``[..., I, J]``: an untyped base, typed by its own
    ``infer`` under the plugin (this module is listed in ``op_modules``)."""

    def infer(self, a: Any, b: Any) -> ax.TensorType:
        if a.axes[:-1] != b.axes[:-1]:
            raise self.fail((a, b), "the leading axes differ (outer takes the last axis of each)")
        if a.axes[-1] == b.axes[-1]:
            raise self.fail((a, b), "both operands end in the same axis (rename one)")
        return ax.TensorType(a.dtype, (*a.axes, b.axes[-1]), (*a.shape, b.shape[-1]))

    def forward(self, a: ax.AnyTensor, b: ax.AnyTensor) -> jax.Array:
        return a.array[..., :, None] * b.array[..., None, :]

    def backward(self, dy: ax.AnyTensor, y: ax.AnyTensor, a: ax.AnyTensor, b: ax.AnyTensor) -> tuple[jax.Array, ...]:
        return (jnp.sum(dy.array * b.array[..., None, :], -1),
                jnp.sum(dy.array * a.array[..., :, None], -2))


def outer(a: ax.AnyTensor, b: ax.AnyTensor) -> ax.AnyTensor:
    """The public function of :class:`Outer`: build the op, apply it."""
    return Outer()(a, b)


class Blend(ax.Op):
    """``a * w + b * (1 - w)`` of two operands of one type: its ``infer`` refuses mixed
    dtypes (issue 44, class 3: the plugin reports a dtype refusal as an axis one)."""

    def infer(self, a: Any, b: Any) -> ax.TensorType:
        if a.axes != b.axes:
            raise self.fail((a, b), "the operands' axes differ")
        if a.dtype is not b.dtype:
            raise self.fail((a, b), f"dtypes {a.dtype.__name__} and {b.dtype.__name__} differ (blend one dtype)")
        return ax.TensorType(a.dtype, a.axes, a.shape)

    def forward(self, a: ax.AnyTensor, b: ax.AnyTensor) -> jax.Array:
        return 0.5 * a.array + 0.5 * b.array

    def backward(self, dy: ax.AnyTensor, y: ax.AnyTensor, a: ax.AnyTensor, b: ax.AnyTensor) -> tuple[jax.Array, ...]:
        return (0.5 * dy.array, 0.5 * dy.array)


def blend(a: ax.AnyTensor, b: ax.AnyTensor) -> ax.AnyTensor:
    """The public function of :class:`Blend`."""
    return Blend()(a, b)
