"""Stacked layers and policy casts (issue 32, class 4): a ``LayerStack``'s parameters have the
stacking axis first, statically too (``stack.stacked(get)`` in every checker; under the
plugin also ``stack.layers.<...>``, which the other checkers type gradually: never a false
error), so summing over ``Layer`` is correct and adding one block's weight to the stacked
one is an error; a cast of a container (``LayerStack``,
``Remat``, ``Recurrent``, ``Bidirectional``) casts the layers it holds, so its call takes the
new dtype; ``remat`` keeps the layer's call, so a wrong input axis is an error."""

# typing-class: 4 stacked layers and policy casts

from typing import final, reveal_type

import equinox as eqx
import jax
from axes import N

import axjax as ax
from axjax import BF16, F32, Tensor
from axjax.nn import Layer


@final
class Hidden(ax.Axis): ...


@final
class Other(ax.Axis): ...


@final
class Time(ax.Axis): ...


class Block(eqx.Module):
    up: ax.nn.Affine[F32, Hidden, Other]
    down: ax.nn.Affine[F32, Other, Hidden]

    def __init__(self, key: jax.Array) -> None:
        self.up = ax.nn.Affine(Hidden, Other, 5, 7, key=key)
        self.down = ax.nn.Affine(Other, Hidden, 7, 5, key=key)

    def __call__(self, x: Tensor[F32, N, Hidden]) -> Tensor[F32, N, Hidden]:
        return x + self.down(ax.relu(self.up(x)))


key = jax.random.key(0)
x = ax.normal(key, (4, 5), N, Hidden)
stack = ax.nn.LayerStack.init(Block, 3, key=key)
block = Block(key)
policy = ax.nn.Policy.mixed(ax.BF16)

# the stacked parameters have Layer first
reveal_type(stack.stacked(lambda b: b.down.weight))  # want: Tensor[F32, Layer, Hidden, Other]
reveal_type(stack.layers.down.weight)  # want[plugin]: Tensor[F32, Layer, Hidden, Other]; want[mypy,pyright]: Any
decay = ax.sum(ax.square(stack.stacked(lambda b: b.down.weight)), Layer)  # ok
reveal_type(decay)  # want: Tensor[F32, Hidden, Other]
decay2 = ax.sum(ax.square(stack.layers.down.weight), Layer)  # ok
reveal_type(decay2)  # want[plugin]: Tensor[F32, Hidden, Other]; show[mypy,pyright]
reveal_type(stack[0].down.weight)  # want: Tensor[F32, Hidden, Other]
wrong: Tensor[F32, Hidden, Other] = stack.stacked(lambda b: b.down.weight)  # want-error; runs: annotations are not checked at run time

# mistakes with the stacking axis
m1 = stack.stacked(lambda b: b.down.weight) + block.down.weight  # want-error: axes differ; want-error[mypy,pyright]
m2 = stack.layers.down.weight + block.down.weight  # want-error[plugin]: axes differ; miss[mypy,pyright]: stack.layers is gradual outside the plugin (use stack.stacked)
m3 = ax.sum(block.down.weight, Layer)  # want-error[plugin]: Layer is not an axis of the tensor; want-error[pyright]: Argument of type "type[Layer]" cannot be assigned to parameter "over"; want-error[mypy]
m4 = stack.stacked(lambda b: b.down)  # want-error; raises: TypeError

# a stack of a layer the checkers type, cast with the policy: its call takes the new dtype
norms = ax.nn.LayerStack.init(lambda k: ax.nn.LayerNorm(Hidden, 5), 2, key=key)
xb = policy.cast_to_compute(x)
reveal_type(policy.cast_to_compute(norms))  # want: LayerStack[LayerNorm[BF16, Hidden], Layer]
reveal_type(policy.cast_to_compute(norms)(xb))  # want: Tensor[BF16, N, Hidden]
reveal_type(ax.nn.cast(norms, BF16)(xb))  # want: Tensor[BF16, N, Hidden]
s1 = norms(xb)  # want-error[plugin]: the input is BF16, the layer's parameters F32; want-error[mypy,pyright]

# every container kind: Remat, Recurrent, Bidirectional
fc = ax.nn.Affine(Hidden, Other, 5, 7, key=key)
reveal_type(policy.cast_to_compute(ax.nn.remat(fc)))  # want: Remat[Affine[BF16, Hidden, Other]]
reveal_type(policy.cast_to_compute(ax.nn.remat(fc))(xb))  # want: Tensor[BF16, N, Other]
rnn = ax.nn.Recurrent(ax.nn.GRUCell(Hidden, Other, 5, 6, key=key), over=Time)
reveal_type(ax.nn.cast(rnn, BF16))  # want: Recurrent[GRUCell[BF16, Hidden, Other], Time]
both = ax.nn.Bidirectional(
    ax.nn.LSTMCell(Hidden, Other, 5, 6, key=key), ax.nn.LSTMCell(Hidden, Other, 5, 6, key=key), over=Time
)
reveal_type(policy.cast_to_compute(both))  # want[plugin,pyright]: Bidirectional[LSTMCell[BF16, Hidden, Other], LSTMCell[BF16, Hidden, Other], Time]
seq = ax.nn.Sequential([fc, ax.relu])
reveal_type(policy.cast_to_compute(ax.nn.remat(seq)))  # show

# remat keeps the layer's call: a wrong input axis is an error
r = ax.nn.remat(block)
reveal_type(r(x))  # want: Tensor[F32, N, Hidden]
r1 = r(ax.normal(key, (4, 7), N, Other))  # want-error[plugin]: incompatible type "Tensor[F32, N, Other]"; want-error[mypy,pyright]
reveal_type(ax.nn.remat(fc)(x))  # want: Tensor[F32, N, Other]
r2 = ax.nn.remat(fc)(ax.normal(key, (4, 7), N, Other))  # want-error[plugin]: Hidden is not an axis of the input; want-error[mypy,pyright]
r3 = ax.nn.remat(fc)(xb)  # want-error[plugin]: the input is BF16; want-error[mypy,pyright]
