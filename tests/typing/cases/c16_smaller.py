"""Smaller classes of mistakes (issue 32, class 6), each a rule the run time has: a float op
on integer labels, float indices for take, vmap over an axis the argument lacks, a compiled
graph called with its arguments swapped or transposed, the collectives' axes."""
# typing-class: 6 smaller classes

from typing import final, reveal_type

import axjax as ax
from axes import N
from axjax import F32, I32, Tensor


@final
class Hidden(ax.Axis): ...


@final
class Pixel(ax.Axis): ...


@final
class Vocab(ax.Axis): ...


labels = ax.zeros((4,), N, dtype=I32)
table = ax.zeros((10, 3), Vocab, Hidden)
images = ax.zeros((4, 5), N, Pixel)
w = ax.zeros((5, 3), Pixel, Hidden)

# float ops on integer labels
c1 = ax.softmax(labels, N)  # want-error[plugin]: Softmax needs floating-point values, got I32; want-error[mypy,pyright]
c2 = labels * 0.5  # want-error[plugin]: the float 0.5 cannot mix with I32 values; miss[mypy,pyright]
reveal_type(labels * 2)  # want: Tensor[I32, N]

# take: integer indices
reveal_type(ax.take(table, Vocab, labels))  # want[plugin]: Tensor[F32, N, Hidden]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
t1 = ax.take(table, Vocab, ax.zeros((4,), N))  # want-error[plugin]: indices must be integers, got F32; want-error[mypy,pyright]
t2 = ax.take(table, Vocab, ax.zeros((4,), N, dtype=ax.Bool))  # want-error[plugin]: indices must be integers, got Bool; want-error[mypy,pyright]


# vmap: an argument must have the mapped axis (wherever it is)
def predict(x: Tensor[F32, Pixel]) -> Tensor[F32, Hidden]:
    return ax.contract(x, w, over=Pixel)


def score(x: Tensor[F32, Pixel], v: Tensor[F32, Pixel, Hidden]) -> Tensor[F32, Hidden]:
    return ax.contract(x, v, over=Pixel)


reveal_type(ax.vmap(predict, over=N)(images))  # want[plugin]: Tensor[F32, N, Hidden]; want[mypy,pyright]: Any
reveal_type(ax.vmap(predict, over=N)(ax.transpose(images, Pixel, N)))  # want[plugin]: Tensor[F32, N, Hidden]; want[mypy,pyright]: Any
reveal_type(ax.vmap(score, over=N)(images, w))  # want[plugin]: Tensor[F32, N, Hidden]; want[mypy,pyright]: Any
v1 = ax.vmap(predict, over=N)(ax.zeros((5,), Pixel))  # want-error[plugin]: Argument 1 to "predict" has incompatible type "Tensor[F32, Pixel]"; miss[mypy,pyright]
v2 = ax.vmap(predict, over=N)(ax.zeros((5, 2), Pixel, Hidden))  # want-error[plugin]: incompatible type "Tensor[F32, Pixel, Hidden]"; miss[mypy,pyright]

# a compiled graph: its arguments typed by the Inputs it lists
x_in = ax.Input(F32, N, Pixel)
ids_in = ax.Input(I32, N)
f = ax.compile(ax.take(table, Vocab, ids_in) + ax.contract(x_in, w, over=Pixel), inputs=[x_in, ids_in])
reveal_type(f(images, labels))  # want[plugin]: Tensor[F32, N, Hidden]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
g1 = f(labels, images)  # want-error[plugin]: Argument 1 to "__call__" of "CompiledGraph" has incompatible type "Tensor[I32, N]"; miss[mypy,pyright]
g2 = f(ax.transpose(images, Pixel, N), labels)  # want-error[plugin]: incompatible type "Tensor[F32, Pixel, N]"; miss[mypy,pyright]
# a tuple of Inputs keeps their order for every checker (plain mypy here: the runner skips
# jax, so an array argument, in the Input's axis order, is Any to it)
h = ax.compile(ax.take(table, Vocab, ids_in) + ax.contract(x_in, w, over=Pixel), inputs=(x_in, ids_in))
reveal_type(h(images, labels))  # want[plugin]: Tensor[F32, N, Hidden]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
reveal_type(h(images.array, labels))  # want[plugin]: Tensor[F32, N, Hidden]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
g3 = h(labels, images)  # want-error[plugin,pyright]: "Tensor[I32, N]"; miss[mypy]
g4 = h(ax.transpose(images, Pixel, N), labels)  # want-error[plugin,pyright]: "Tensor[F32, Pixel, N]"; miss[mypy]


# collectives (inside jax.shard_map): psum/pmean add up blocks of an axis the tensor no
# longer has, all_gather rebuilds one it has
def block(h: Tensor[F32, N, Hidden], s: Tensor[F32, N]) -> None:
    reveal_type(ax.psum(s, Hidden))  # want: Tensor[F32, N]
    reveal_type(ax.all_gather(h, Hidden))  # want: Tensor[F32, N, Hidden]
    ax.psum(h, Hidden)  # want-error[plugin]: psum(Tensor[F32, N, Hidden], Hidden): the tensor still has axis Hidden; miss[mypy,pyright]
    ax.pmean(h, (N, Hidden))  # want-error[plugin]: the tensor still has axis N; miss[mypy,pyright]
    ax.all_gather(s, Hidden)  # want-error[plugin]: all_gather(Tensor[F32, N], Hidden): the tensor has no axis Hidden to gather; miss[mypy,pyright]
