"""The paper's expandDims and the other shape ops: by axis, never by position."""

from typing import TypeVar, TypeVarTuple, reveal_type

from axes import A, B, C, D, E, F, N, W, H

import axjax as ax
from axjax import F32, Tensor

Ts = TypeVarTuple("Ts")
DT = TypeVar("DT", bound=ax.DType)

ab = ax.zeros((2, 3), A, B)
abc = ax.zeros((2, 3, 4), A, B, C)
s0 = ax.zeros(())
r6 = ax.zeros((1, 2, 3, 4, 5, 6), A, B, C, D, E, F)

# expand_dims(t, X, at): a literal index
reveal_type(ax.expand_dims(ab, N))  # want: Tensor[F32, N, A, B]
reveal_type(ax.expand_dims(ab, N, 1))  # want: Tensor[F32, A, N, B]
reveal_type(ax.expand_dims(ab, N, 2))  # want: Tensor[F32, A, B, N]
reveal_type(ax.expand_dims(ab, N, -1))  # want: Tensor[F32, A, B, N]
reveal_type(ax.expand_dims(ab, N, -3))  # want: Tensor[F32, N, A, B]
reveal_type(ax.expand_dims(s0, N, 0))  # want: Tensor[F32, N]
reveal_type(ax.expand_dims(r6, N, 4))  # want: Tensor[F32, A, B, C, D, N, E, F]
reveal_type(ax.expand_dims(r6, N, 5))  # want[plugin]: Tensor[F32, A, B, C, D, E, N, F]; want[mypy]: Tensor[F32, *tuple[Any, ...]]; want[pyright]: Tensor[F32, *tuple[Any, ...]]
x1 = ax.expand_dims(s0, N, 1)  # want-error[plugin]: Cannot apply ExpandDims(N, at=1) to Tensor[F32]: index 1 out of range for rank 0; miss[mypy,pyright]: a literal out of range takes the computed index's catch-all
x2 = ax.expand_dims(ab, N, 3)  # want-error[plugin]: index 3 out of range for rank 2; miss[mypy,pyright]: a literal out of range takes the computed index's catch-all
x3 = ax.expand_dims(ab, N, -4)  # want-error[plugin]: index -4 out of range for rank 2; miss[mypy,pyright]: a literal out of range takes the computed index's catch-all
x4 = ax.expand_dims(ab, A, 0)  # want-error[plugin]: Cannot apply ExpandDims(A, at=0) to Tensor[F32, A, B]: axis A already present (a tensor never has the same axis twice; rename one); miss[mypy,pyright]


def dynamic(i: int) -> None:
    reveal_type(ax.expand_dims(abc, N, i))  # want: Tensor[F32, *tuple[Any, ...]]
    reveal_type(ax.stack([abc, abc], N, i))  # want: Tensor[F32, *tuple[Any, ...]]
    x5 = ax.expand_dims(abc, A, i)  # want-error[plugin]: Cannot apply ExpandDims(A, at=i) to Tensor[F32, A, B, C]: axis A already present; miss[mypy,pyright]


# squeeze, index, rename, transpose: the axis is found wherever it is
n1 = ax.expand_dims(abc, N, 1)
reveal_type(ax.squeeze(n1, N))  # want: Tensor[F32, A, B, C]
reveal_type(ax.index(abc, B, 0))  # want: Tensor[F32, A, C]
reveal_type(ax.rename(abc, B, W))  # want: Tensor[F32, A, W, C]
reveal_type(ax.transpose(abc, C, A, B))  # want: Tensor[F32, C, A, B]
reveal_type(ax.transpose(ab, B, A))  # want: Tensor[F32, B, A]
reveal_type(ax.transpose(r6, F, E, D, C, B, A))  # want[plugin]: Tensor[F32, F, E, D, C, B, A]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
q1 = ax.squeeze(abc, N)  # want-error: Cannot apply Squeeze(N) to Tensor[F32, A, B, C]: N is not an axis of the tensor
q2 = ax.index(abc, D, 0)  # want-error: Cannot apply Index(D, 0) to Tensor[F32, A, B, C]: D is not an axis of the tensor
q3 = ax.rename(abc, D, W)  # want-error: Cannot apply Rename(D -> W) to Tensor[F32, A, B, C]: D is not an axis of the tensor
q4 = ax.rename(abc, A, B)  # want-error[plugin]: axis B already present; miss[mypy,pyright]
q5 = ax.transpose(abc, A, A, B)  # want-error: Cannot apply Transpose(A, A, B) to Tensor[F32, A, B, C]: (A, A, B) is not a permutation of the tensor's axes
q6 = ax.transpose(abc, A, B)  # want-error: (A, B) is not a permutation
q7 = ax.transpose(r6, F, E, D, C, B, N)  # want-error[plugin]: is not a permutation; miss[mypy,pyright]


def scan_step(t: int, seq: Tensor[F32, N, A]) -> Tensor[F32, A]:
    return ax.index(seq, N, t)  # ok


# stack, concat, tile, slice, one_hot, broadcast, flatten, unflatten, take
reveal_type(ax.stack([ab, ab], N))  # want: Tensor[F32, N, A, B]
reveal_type(ax.stack([ab, ab], N, -1))  # want: Tensor[F32, A, B, N]
reveal_type(ax.concat([ab, ab], A))  # want: Tensor[F32, A, B]
reveal_type(ax.tile(ab, B, 3))  # want: Tensor[F32, A, B]
reveal_type(ax.slice(abc, B, 0, 2))  # want: Tensor[F32, A, B, C]
k1 = ax.concat([ab, ax.zeros((3, 2), B, A)], A)  # miss[mypy]; want-error[plugin]: Cannot apply Concat(A) to Tensor[F32, A, B] and Tensor[F32, B, A]: axes differ (concat needs identical axes in identical order; transpose first); want-error[pyright]
k2 = ax.tile(ab, C, 2)  # want-error[plugin]: Cannot apply Tile(C, 2) to Tensor[F32, A, B]: C is not an axis of the tensor; miss[mypy,pyright]
k3 = ax.slice(ab, C, 0, 1)  # want-error[plugin]: Cannot apply Slice(C, 0:1) to Tensor[F32, A, B]: C is not an axis of the tensor; miss[mypy,pyright]
labels = ax.zeros((4,), N, dtype=ax.I32)
reveal_type(ax.one_hot(labels, C, 10))  # want: Tensor[F32, N, C]
reveal_type(ax.one_hot(labels, C, 10, dtype=ax.BF16))  # want: Tensor[BF16, N, C]
bias = ax.zeros((3,), B)
reveal_type(ax.broadcast(bias, ab))  # want: Tensor[F32, A, B]
reveal_type(ax.broadcast(bias, (B, N), sizes={N: 5}))  # want: Tensor[F32, B, N]
k4 = ax.broadcast(ab, bias)  # want-error[plugin]: Cannot apply Broadcast(B) to Tensor[F32, A, B] and Tensor[F32, B]: A is not an axis of the target (broadcast only adds axes; reduce or index it away first); miss[mypy,pyright]
img = ax.zeros((5, 2, 3), N, H, W)
reveal_type(ax.flatten(img, (H, W), C))  # want[plugin]: Tensor[F32, N, C]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
reveal_type(ax.unflatten(ax.flatten(img, (H, W), C), C, (H, W), (2, 3)))  # want[plugin]: Tensor[F32, N, H, W]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
k5 = ax.flatten(img, (H, A), C)  # want-error[plugin]: Cannot apply Flatten((H, A) -> C) to Tensor[F32, N, H, W]: A is not an axis of the tensor; miss[mypy,pyright]
table = ax.zeros((10, 3), A, B)
ids = ax.zeros((4, 5), N, C, dtype=ax.I32)
reveal_type(ax.take(table, A, ids))  # want[plugin]: Tensor[F32, N, C, B]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
k6 = ax.take(table, A, ax.zeros((4,), N))  # want-error[plugin]: Cannot apply Take(A) to Tensor[F32, A, B] and Tensor[F32, N]: indices must be integers, got F32; want-error[mypy,pyright]


# generic user code over *Ts
def add_batch(t: Tensor[DT, *Ts]) -> Tensor[DT, N, *Ts]:
    return ax.expand_dims(t, N)  # ok


def add_last(t: Tensor[DT, *Ts]) -> Tensor[DT, *Ts, N]:
    return ax.expand_dims(t, N, -1)  # ok


def drop_last(t: Tensor[DT, *Ts, B]) -> Tensor[DT, *Ts]:
    return ax.sum(t, B)  # ok


def flip_last(t: Tensor[DT, *Ts, A, B]) -> Tensor[DT, *Ts, B, A]:
    return ax.rename(ax.rename(ax.rename(t, A, C), B, A), C, B)  # ok
