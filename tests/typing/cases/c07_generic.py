"""Generic user code over *Batch, the paper's Affine layer written by hand, and a recurrent
unit folded over a sequence axis: checked once, for every batch shape."""

from typing import TypeVar, TypeVarTuple, final, reveal_type

from axes import A, B, C, M, N

import axjax as ax
from axjax import F32, Tensor

Batch = TypeVarTuple("Batch")
In = TypeVar("In", bound=ax.Axis)
Out = TypeVar("Out", bound=ax.Axis)
DT = TypeVar("DT", bound=ax.DType)
DR = TypeVar("DR", bound=ax.Floating)


def affine(x: Tensor[DT, N, In], w: Tensor[DT, In, Out], b: Tensor[DT, Out]
           ) -> Tensor[DT, N, Out]:
    """The paper's Affine: x W + b (a matmul over the shared In axis)."""
    y = x @ w
    reveal_type(y)  # want: Tensor[DT, N, Out]
    return y + ax.broadcast(b, y)  # ok


def affine_wrong(x: Tensor[DT, N, In], w: Tensor[DT, Out, In]) -> Tensor[DT, N, Out]:
    return x @ w  # want-error: Cannot apply MatMul to Tensor[DT, N, In] and Tensor[DT, Out, In]: inner axes In and Out differ


x = ax.zeros((8, 3), N, A)
w = ax.zeros((3, 4), A, B)
b = ax.zeros((4,), B)
reveal_type(affine(x, w, b))  # want: Tensor[F32, N, B]
a1 = affine(x, ax.zeros((4, 3), B, A), b)  # want-error
a2 = affine(x, w, ax.zeros((3,), A))  # want-error


def affine_any_batch(x: Tensor[DT, *Batch, In], w: Tensor[DT, In, Out]) -> Tensor[DT, *Batch, Out]:
    """Any leading axes: contract over In. Gradual even with the plugin (*Batch might hold In)."""
    return ax.contract(x, w)  # ok


# elementwise and reductions are exact over *Batch in every checker
def normalise(x: Tensor[DR, *Batch, C]) -> Tensor[DR, *Batch, C]:
    return x - ax.broadcast(ax.logsumexp(x, C), x)  # ok


def mean_last(x: Tensor[DR, *Batch, C]) -> Tensor[DR, *Batch]:
    return ax.mean(x, C)  # ok


def bad_normalise(x: Tensor[DT, *Batch, C]) -> Tensor[DT, *Batch, C]:
    return x - ax.logsumexp(x, C)  # want-error[plugin]: Cannot apply Subtract to Tensor[DT, *Batch, C] and Tensor[DT, *Batch]: axes differ; want-error[mypy,pyright]


reveal_type(normalise(ax.zeros((2, 3, 4), M, N, C)))  # want: Tensor[F32, M, N, C]
reveal_type(mean_last(ax.zeros((2, 4), N, C)))  # want: Tensor[F32, N]


def mlp(x: Tensor[F32, N, A], w1: Tensor[F32, A, B], w2: Tensor[F32, B, C]) -> Tensor[F32, N, C]:
    return ax.softmax(ax.relu(x @ w1) @ w2, C)  # ok


# a recurrent unit h' = tanh(x W + h U), folded over the time axis T of a sequence
@final
class T(ax.Axis):
    """Time."""


@final
class Prev(ax.Axis):
    """The previous step's hidden units (a weight never has one axis twice)."""


def cell(h: Tensor[F32, N, B], x: Tensor[F32, N, A], w: Tensor[F32, A, B],
         u: Tensor[F32, Prev, B]) -> Tensor[F32, N, B]:
    return ax.tanh(x @ w + ax.rename(h, B, Prev) @ u)  # ok


def fold(seq: Tensor[F32, T, N, A], h: Tensor[F32, N, B], w: Tensor[F32, A, B],
         u: Tensor[F32, Prev, B]) -> Tensor[F32, N, B]:
    for t in range(seq.size(T)):
        h = cell(h, ax.index(seq, T, t), w, u)  # ok
    return h


def fold_wrong(seq: Tensor[F32, T, N, A], h: Tensor[F32, N, B], w: Tensor[F32, A, B],
               u: Tensor[F32, Prev, B]) -> Tensor[F32, N, B]:
    for t in range(seq.size(T)):
        h = cell(h, ax.index(seq, N, t), w, u)  # want-error
    return h


# automatic batching over a named axis (the paper's, by name)
def predict(x: Tensor[F32, A], w: Tensor[F32, A, B]) -> Tensor[F32, B]:
    return ax.contract(x, w)  # ok


batched_predict = ax.vmap(predict, over=N)
reveal_type(batched_predict(x, w))  # want[plugin]: Tensor[F32, N, B]; want[mypy,pyright]: Any
reveal_type(ax.vmap(predict, over=N, at=-1)(x, w))  # want[plugin]: Tensor[F32, B, N]; want[mypy,pyright]: Any
