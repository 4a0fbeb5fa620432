"""Losses and metrics (issue 32, class 1): the class axis among the logits' axes, the labels
the logits' axes without it, in order, and integer; binary cross-entropy and the squared
error on operands of one type. Typed by the overloads tools/gen_overloads.py writes from the
loss registry (train/_gen_losses.py), and run on stand-ins by the plugin."""
# typing-class: 1 losses and metrics

from typing import TypeVar, TypeVarTuple, final, reveal_type

import optax
from axes import N

import axjax as ax
from axjax import F32, I32, Tensor
from axjax.train import Class


@final
class Pos(ax.Axis): ...


@final
class Embed(ax.Axis): ...


@final
class Vocab(ax.Axis): ...


DR = TypeVar("DR", bound=ax.Floating)
B = TypeVarTuple("B")

logits = ax.zeros((2, 3, 5), N, Pos, Class)
labels = ax.zeros((2, 3), N, Pos, dtype=I32)
scores = ax.zeros((2, 5), N, Class)
targets = ax.zeros((2, 5), N, Class)
class_first = ax.zeros((5, 2), Class, N)
hidden = ax.zeros((2, 3, 4), N, Pos, Embed, dtype=ax.BF16)
table = ax.zeros((5, 4), Class, Embed, dtype=ax.BF16)
ids = ax.zeros((2,), N, dtype=I32)

# correct calls: the labels' axes in the logits' dtype, the class axis anywhere
reveal_type(ax.train.softmax_cross_entropy(logits, labels))  # want: Tensor[F32, N, Pos]
reveal_type(ax.train.softmax_cross_entropy(logits, labels, Class))  # want: Tensor[F32, N, Pos]
reveal_type(ax.train.softmax_cross_entropy(class_first, ids, axis=Class))  # want: Tensor[F32, N]
reveal_type(ax.train.softmax_cross_entropy(ax.transpose(logits, N, Class, Pos), labels))  # want: Tensor[F32, N, Pos]
reveal_type(ax.train.accuracy(logits, labels))  # want: Tensor[F32]
reveal_type(ax.train.accuracy(scores, ids, Class))  # want: Tensor[F32]
reveal_type(ax.train.binary_cross_entropy(scores, targets))  # want: Tensor[F32, N, Class]
reveal_type(ax.train.mean_squared_error(scores, targets))  # want: Tensor[F32]
reveal_type(ax.train.mean_squared_error(scores, targets, over=Class))  # want[plugin]: Tensor[F32, N]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
loss: Tensor[F32] = ax.mean(ax.train.softmax_cross_entropy(scores, ids), N)  # ok
reveal_type(ax.train.linear_cross_entropy(hidden, table, labels))  # want: Tensor[F32, N, Pos]
reveal_type(ax.train.linear_cross_entropy(hidden, ax.transpose(table, Embed, Class), labels, Class, chunk=2))  # want: Tensor[F32, N, Pos]


def generic_loss(x: Tensor[DR, *B, Class], y: Tensor[I32, *B]) -> Tensor[DR, *B]:
    return ax.train.softmax_cross_entropy(x, y)  # ok


reveal_type(generic_loss(logits, labels))  # want: Tensor[F32, N, Pos]

# mistakes
e1 = ax.train.softmax_cross_entropy(logits, labels, Embed)  # want-error[plugin]: the logits have no axis Embed; want-error[mypy,pyright]
e1b = ax.train.softmax_cross_entropy(logits, labels, Pos)  # want-error[plugin]: the labels need the logits' axes without Pos: (N, Class); want-error[mypy,pyright]
e2 = ax.train.softmax_cross_entropy(logits, ax.transpose(labels, Pos, N))  # want-error[plugin]: same axes in a different order: transpose the labels; want-error[mypy,pyright]
e3 = ax.train.softmax_cross_entropy(scores, ax.one_hot(ids, Class, 5))  # want-error[plugin]: labels must be integer class indices, got F32; want-error[mypy,pyright]
e4 = ax.train.softmax_cross_entropy(scores, ax.zeros((2,), N))  # want-error[plugin]: labels must be integer class indices, got F32; want-error[mypy,pyright]
e5 = ax.train.softmax_cross_entropy(logits, ids)  # want-error[plugin]: the labels need the logits' axes without Class; want-error[mypy,pyright]
e6 = ax.train.softmax_cross_entropy(ax.zeros((2, 5), N, Class, dtype=I32), ids)  # want-error[plugin]: logits must be floating-point, got I32; want-error[mypy,pyright]
e7 = ax.train.accuracy(logits, labels, Pos)  # want-error[plugin]: the labels need the logits' axes without Pos, in the same order; want-error[mypy,pyright]
e7b = ax.train.accuracy(logits, labels, Embed)  # want-error[plugin]: the logits have no axis Embed; want-error[mypy,pyright]
e8 = ax.train.accuracy(logits, ax.transpose(labels, Pos, N))  # want-error[plugin]: the labels need the logits' axes without Class, in the same order; want-error[mypy,pyright]
e9 = ax.train.accuracy(scores, ax.zeros((2,), N))  # want-error[plugin]: labels must be integer class indices, got F32; want-error[mypy,pyright]
e10 = ax.train.binary_cross_entropy(scores, ax.zeros((2,), N))  # want-error[plugin]: logits and targets have different axes (give both the same axes); want-error[mypy,pyright]
e11 = ax.train.binary_cross_entropy(scores, class_first)  # want-error[plugin]: same axes in a different order; want-error[mypy,pyright]
e12 = ax.train.binary_cross_entropy(scores, ax.zeros((2, 5), N, Class, dtype=ax.BF16))  # want-error[plugin]: the same floating-point dtype; want-error[mypy,pyright]
e13 = ax.train.mean_squared_error(scores, class_first)  # want-error[plugin]: same axes in a different order; want-error[mypy,pyright]
e13b = ax.train.mean_squared_error(scores, ax.zeros((2,), N))  # want-error[plugin]: predictions and targets have different axes (give both the same axes); want-error[mypy,pyright]
e14 = ax.train.compile_step(ax.train.softmax_cross_entropy(ax.Input(F32, N, Class), ax.Input(I32, N)), optax.sgd(0.1))  # want-error: incompatible type; want-error[pyright]: cannot be assigned
e15 = ax.train.linear_cross_entropy(hidden, table, ax.zeros((2, 3), N, Pos))  # want-error[plugin]: labels must be integer class indices, got F32; want-error[mypy,pyright]
e16 = ax.train.linear_cross_entropy(ax.zeros((2, 3, 4), N, Pos, Embed, dtype=I32), table, labels)  # want-error[plugin]: the hidden states must be floating-point, got I32; want-error[mypy,pyright]
e17 = ax.train.linear_cross_entropy(hidden, table, ax.transpose(labels, Pos, N))  # want-error[plugin]: same axes in a different order: transpose the labels
e18 = ax.train.linear_cross_entropy(hidden, ax.zeros((5, 4), Class, Vocab, dtype=ax.BF16), labels)  # want-error[plugin]: the hidden states have no axis Vocab to contract
e19 = ax.train.linear_cross_entropy(hidden, ax.zeros((5, 4), Class, Embed), labels)  # want-error[plugin]: the hidden states are BF16 and the weight F32; want-error[mypy,pyright]
e20 = ax.train.linear_cross_entropy(hidden, ax.zeros((5, 4), Vocab, Embed, dtype=ax.BF16), labels, Embed)  # want-error[plugin]: no axis Vocab to contract with the weight (its class axis is Embed
