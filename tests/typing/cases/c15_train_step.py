"""The training step of hand-written loops: ``ax.train.TrainStep(model, optimizer, loss_fn)``
is generic in the model's type, so ``step.model`` is the model passed in, typed as it was;
so is what ``ax.train.fit`` returns: ``fit(model, ...).model`` has the model's type.
"""

from typing import final, reveal_type

import jax
import optax
from axes import N

import axjax as ax


@final
class Pixel(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


@final
class Class(ax.Axis): ...


mlp = ax.nn.MLP(Pixel, Class, 4, 3, hidden={Hidden: 5}, key=jax.random.key(0))
images = ax.zeros((2, 4), N, Pixel)
target = ax.zeros((2, 3), N, Class)


def squared_error(
    model: ax.nn.MLP[ax.F32, Pixel, Class],
    x: ax.Tensor[ax.F32, N, Pixel],
    y: ax.Tensor[ax.F32, N, Class],
) -> ax.Tensor[ax.F32]:
    d = model(x) - y
    return ax.mean(ax.sum(d * d, Class), N)


step = ax.train.TrainStep(mlp, optax.adam(1e-2), squared_error)
reveal_type(step)  # want: TrainStep[MLP[F32, Pixel, Class]]
step(images, target)  # ok
trained = step.model
reveal_type(trained)  # want: MLP[F32, Pixel, Class]
reveal_type(trained(images))  # want: Tensor[F32, N, Class]
reveal_type(step.steps)  # want: int
reveal_type(step.metrics())  # want: dict[str, float]

result = ax.train.fit(mlp, optax.adam(1e-2), squared_error, [(images, target)], progress=False)
reveal_type(result.model)  # want: MLP[F32, Pixel, Class]
reveal_type(result.model(images))  # want: Tensor[F32, N, Class]
model, opt_state, steps, history, stopped_early, seconds = result  # ok
reveal_type(steps)  # want: int
