"""Where types used to become ``Any`` (issue 32, class 7): a cell's ``init_state``, the model
after an update in a hand-written loop, and a call through ``ax.nn.remat`` keep their types,
so the checks after them still run."""

# typing-class: 7 where types become Any

from typing import final, reveal_type

import equinox as eqx
import jax
import optax
from axes import N

import axjax as ax
from axjax import F32, Tensor


@final
class Time(ax.Axis): ...


@final
class Pixel(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


@final
class Class(ax.Axis): ...


key = jax.random.key(0)
xs = ax.zeros((7, 4, 3), Time, N, Pixel)
gru = ax.nn.GRUCell(Pixel, Hidden, 3, 5, key=key)
lstm = ax.nn.LSTMCell(Pixel, Hidden, 3, 5, key=key)
x0 = ax.zeros((4, 3), N, Pixel)

# cell.init_state: the dtype and Hidden in every checker, the batch axes of a dict under the plugin
reveal_type(gru.init_state())  # want: Tensor[F32, Hidden]
reveal_type(gru.init_state({N: 4}))  # want[plugin]: Tensor[F32, N, Hidden]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
reveal_type(lstm.init_state({N: 4}))  # want[plugin]: tuple[Tensor[F32, N, Hidden], Tensor[F32, N, Hidden]]; want[mypy,pyright]: tuple[Tensor[F32, *tuple[Any, ...]], Tensor[F32, *tuple[Any, ...]]]
sizes = {N: 4}
reveal_type(gru.init_state(sizes))  # want: Tensor[F32, *tuple[Any, ...]]
h: Tensor[F32, N, Hidden] = ax.fold(gru, over=Time)(gru.init_state({N: 4}), xs)  # ok
states = ax.scan(gru, over=Time)(gru.init_state({N: 4}), xs)
reveal_type(states)  # want[plugin]: Tensor[F32, Time, N, Hidden]; show[mypy,pyright]
i1 = ax.fold(gru, over=Time)(gru.init_state({Time: 4}), xs)  # want-error[plugin]: the initial state init=Tensor[F32, Time, Hidden] has axis Time; miss[mypy,pyright]: the batch of a dict is the plugin's
i2 = ax.fold(gru, over=Time)(ax.astype(gru.init_state({N: 4}), ax.BF16), xs)  # want-error[plugin]; miss[mypy,pyright]: fold checks its unit under the plugin
i3: Tensor[F32, Hidden, N] = gru.init_state({N: 4})  # want-error[plugin]: Incompatible types in assignment; miss[mypy,pyright]: the batch of a dict is the plugin's; runs: annotations are not checked at run time

# a hand-written loop: the model keeps its type after an update
mlp = ax.nn.MLP(Pixel, Class, 3, 2, hidden={Hidden: 4}, key=key)
optimizer = optax.sgd(0.1)
opt_state = optimizer.init(eqx.filter(mlp, eqx.is_array))  # show


def loss_fn(model: ax.nn.MLP[F32, Pixel, Class], x: Tensor[F32, N, Pixel]) -> Tensor[F32]:
    return ax.mean(ax.sum(ax.square(model(x)), Class), N)


grads = eqx.filter_grad(lambda m: loss_fn(m, x0).array)(mlp)  # show
updates, opt_state = optimizer.update(grads, opt_state)  # show
trained = ax.train.apply_updates(mlp, updates)  # show
reveal_type(trained)  # want: MLP[F32, Pixel, Class]
reveal_type(trained(x0))  # want: Tensor[F32, N, Class]
u1 = trained(ax.zeros((4, 2), N, Class))  # want-error[plugin]: Pixel is not an axis of the input; want-error[mypy,pyright]
step = ax.train.TrainStep(mlp, optimizer, loss_fn)
step(x0)  # ok
reveal_type(step.model(x0))  # want: Tensor[F32, N, Class]

# remat keeps the call type
block = ax.nn.remat(ax.nn.LayerNorm(Pixel, 3))
reveal_type(block(xs))  # want: Tensor[F32, Time, N, Pixel]
