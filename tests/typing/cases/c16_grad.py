"""``ax.grad`` / ``ax.value_and_grad`` of a function returning a 0-axis Tensor: with the
default ``argnums=0`` the gradient has the first argument's type (a Tensor keeps its axes, a
model is a model) and the value is the loss's ``Tensor[D]``; ``has_aux=True`` adds the
auxiliary result."""

from typing import final, reveal_type

import jax
from axes import N

import axjax as ax


@final
class Pixel(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


@final
class Class(ax.Axis): ...


mlp = ax.nn.MLP(Pixel, Class, 4, 3, hidden={Hidden: 5}, key=jax.random.key(0))
x = ax.zeros((2, 4), N, Pixel)


def loss(model: ax.nn.MLP[ax.F32, Pixel, Class], x: ax.Tensor[ax.F32, N, Pixel]) -> ax.Tensor[ax.F32]:
    return ax.mean(ax.sum(model(x), Class), N)


def loss_aux(model: ax.nn.MLP[ax.F32, Pixel, Class], x: ax.Tensor[ax.F32, N, Pixel]) -> tuple[ax.Tensor[ax.F32], int]:
    return loss(model, x), 3


def energy(x: ax.Tensor[ax.F32, N, Pixel]) -> ax.Tensor[ax.F32]:
    return ax.sum(x * x, (N, Pixel))


reveal_type(ax.grad(loss)(mlp, x))  # want: MLP[F32, Pixel, Class]
reveal_type(ax.grad(energy)(x))  # want: Tensor[F32, N, Pixel]
value, g = ax.value_and_grad(energy)(x)  # ok
reveal_type(value)  # want: Tensor[F32]
reveal_type(g)  # want: Tensor[F32, N, Pixel]
(v2, aux), g2 = ax.value_and_grad(loss_aux, has_aux=True)(mlp, x)  # ok
reveal_type(aux)  # want: int
reveal_type(ax.grad(loss_aux, has_aux=True)(mlp, x)[0])  # want: MLP[F32, Pixel, Class]
both = ax.grad(loss, argnums=(0, 1))(mlp, x)  # ok
bad = ax.grad(energy)(ax.zeros((2, 3), N, Class))  # want-error; raises: AxisError
