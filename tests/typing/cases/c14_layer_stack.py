"""Stacked layers (issue 25): ``ax.nn.LayerStack`` holds one block whose parameters have a
leading ``Layer`` axis and calls it once per layer in a scan, so its call takes and returns
the block's argument type (``LayerStack[Block, Layer]``); a block that changes the type of
what it is given cannot be stacked, and an input the block does not take is an error."""

from typing import final, reveal_type

import equinox as eqx
import jax
from axes import N

import axjax as ax
from axjax import BF16, F32, Tensor


@final
class Hidden(ax.Axis): ...


@final
class Other(ax.Axis): ...


@final
class Depth(ax.Axis): ...


class Block(eqx.Module):
    up: ax.nn.Affine[F32, Hidden, Other]
    down: ax.nn.Affine[F32, Other, Hidden]

    def __init__(self, key: jax.Array) -> None:
        self.up = ax.nn.Affine(Hidden, Other, 5, 7, key=key)
        self.down = ax.nn.Affine(Other, Hidden, 7, 5, key=key)

    def __call__(self, x: Tensor[F32, N, Hidden]) -> Tensor[F32, N, Hidden]:
        return x + self.down(ax.relu(self.up(x)))


class Widen(eqx.Module):
    lin: ax.nn.Affine[F32, Hidden, Other]

    def __init__(self, key: jax.Array) -> None:
        self.lin = ax.nn.Affine(Hidden, Other, 5, 5, key=key)

    def __call__(self, x: Tensor[F32, N, Hidden]) -> Tensor[F32, N, Other]:
        return self.lin(x)


key = jax.random.key(0)
x = ax.normal(key, (4, 5), N, Hidden)
stack = ax.nn.LayerStack.init(Block, 3, ax.nn.Layer, key=key)
reveal_type(stack)  # want: LayerStack[Block, Layer]
reveal_type(stack(x))  # want: Tensor[F32, N, Hidden]
reveal_type(stack[0])  # want: Block
reveal_type(stack.unstack())  # want: list[Block]
y: Tensor[F32, N, Hidden] = stack(stack(x))  # ok
deep = ax.nn.LayerStack.init(Block, 2, Depth, key=key, remat="dots")
reveal_type(deep)  # want: LayerStack[Block, Depth]
again = ax.nn.LayerStack.from_layers([Block(key), Block(key)], Depth)
reveal_type(again(x))  # want: Tensor[F32, N, Hidden]

# the input must be what the block takes
s1 = stack(ax.normal(key, (4, 5), N, Other))  # want-error: incompatible type "Tensor[F32, N, Other]"; want-error[mypy]; want-error[pyright]
s2 = stack(ax.astype(x, BF16))  # want-error: incompatible type "Tensor[BF16, N, Hidden]"; want-error[mypy]; want-error[pyright]
s3: Tensor[F32, N, Other] = stack(x)  # want-error; runs: annotations are not checked at run time
s4 = stack(x, key=key)  # want-error: Unexpected keyword argument "key"; want-error[mypy]; want-error[pyright]; raises: TypeError

# a stack of a layer the plugin types by its rule (a generic call; an overloaded one: plain
# mypy reads it through the norms' own overloads, restated for LayerStack)
norms = ax.nn.LayerStack.init(lambda k: ax.nn.LayerNorm(Hidden, 5), 2, key=key)
reveal_type(norms(x))  # want: Tensor[F32, N, Hidden]
n1 = norms(ax.normal(key, (4, 5), N, Other))  # want-error[plugin]: Hidden is not an axis of the input; want-error[mypy,pyright]
n2 = norms(ax.astype(x, BF16))  # want-error[plugin]: the input is BF16, the layer's parameters F32; want-error[mypy,pyright]
affines = ax.nn.LayerStack.init(lambda k: ax.nn.Affine(Hidden, Hidden, 5, 5, key=k), 2, key=key)
reveal_type(affines(x))  # want: Tensor[F32, N, Hidden]
a1 = affines(ax.normal(key, (5, 4), Hidden, N))  # want-error[plugin]: LayerStack: the block returns; want-error[mypy,pyright]

# a block that does not return what it is given cannot be stacked
wide = ax.nn.LayerStack.init(Widen, 2, key=key)
w1 = wide(x)  # want-error: LayerStack: the block returns "Tensor[F32, N, Other]" for "Tensor[F32, N, Hidden]"; want-error[mypy]; want-error[pyright]
