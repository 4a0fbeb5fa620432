"""Reductions and softmax over a named axis, at every position; the overload window's edges."""

from typing import Any, TypeVar, TypeVarTuple, reveal_type

from axes import A, B, C, D, E, F, H, M, N, W

import axjax as ax
from axjax import F32, Tensor

Ts = TypeVarTuple("Ts")
DT = TypeVar("DT", bound=ax.DType)
DR = TypeVar("DR", bound=ax.Floating)

abc = ax.zeros((2, 3, 4), A, B, C)
abci = ax.zeros((2, 3, 4), A, B, C, dtype=ax.I32)

reveal_type(ax.sum(abc, A))  # want: Tensor[F32, B, C]
reveal_type(ax.sum(abc, B))  # want: Tensor[F32, A, C]
reveal_type(ax.sum(abc, C))  # want: Tensor[F32, A, B]
reveal_type(ax.mean(abc, B))  # want: Tensor[F32, A, C]
reveal_type(ax.max(abc, C))  # want: Tensor[F32, A, B]
reveal_type(ax.min(abci, A))  # want: Tensor[I32, B, C]
reveal_type(ax.logsumexp(abc, B))  # want: Tensor[F32, A, C]
reveal_type(ax.var(abc, A))  # want: Tensor[F32, B, C]
reveal_type(ax.argmax(abc, C))  # want: Tensor[I32, A, B]
reveal_type(ax.softmax(abc, C))  # want: Tensor[F32, A, B, C]
reveal_type(ax.log_softmax(abc, A))  # want: Tensor[F32, A, B, C]
reveal_type(ax.sum(abc, (A, C)))  # want: Tensor[F32, B]
reveal_type(ax.softmax(abc, (A, C)))  # want: Tensor[F32, A, B, C]
y1 = ax.sum(abc, D)  # want-error: Cannot apply Sum(D) to Tensor[F32, A, B, C]: D is not an axis of the tensor
y2 = ax.softmax(abc, D)  # want-error: Cannot apply Softmax(D) to Tensor[F32, A, B, C]: D is not an axis of the tensor
y3 = ax.argmax(abc, N)  # want-error: Cannot apply ArgMax(N) to Tensor[F32, A, B, C]: N is not an axis of the tensor
y4 = ax.sum(ax.zeros(()), A)  # want-error: Cannot apply Sum(A) to Tensor[F32]: A is not an axis of the tensor
y5 = ax.sum(abc, (A, D))  # want-error[plugin]: Cannot apply Sum(A, D) to Tensor[F32, A, B, C]: D is not an axis of the tensor; miss[mypy,pyright]: a literal tuple takes the computed tuples' catch-all
y6 = ax.mean(abci, A)  # want-error[plugin]: Cannot apply Mean(A) to Tensor[I32, A, B, C]: Mean needs floating-point values, got I32 (convert with astype(ax.F32)); want-error[mypy,pyright]
y7 = ax.sum(abc, (A, A))  # want-error[plugin]: Sum: axis named twice in (A, A); miss[mypy,pyright]: a literal tuple takes the computed tuples' catch-all; raises: TypeError
y8 = ax.sum(abc, ax.Axis)  # want-error[plugin]: Sum: `Axis` itself is not an axis label; subclass it; want-error[mypy,pyright]; raises: TypeError
y9 = ax.sum(abc, int)  # want-error[plugin]: is not an axis label; want-error[mypy,pyright]; raises: TypeError

# the window: the first four and the last four positions, at any rank
r6 = ax.zeros((1, 2, 3, 4, 5, 6), A, B, C, D, E, F)
reveal_type(ax.sum(r6, D))  # want: Tensor[F32, A, B, C, E, F]
reveal_type(ax.sum(r6, F))  # want: Tensor[F32, A, B, C, D, E]


def rank10(t: Tensor[F32, B, C, D, E, F, A, M, N, W, H], u: Tensor[F32, A, B, C, D, E, F, M, N, W, H]) -> None:
    reveal_type(ax.sum(u, A))  # want: Tensor[F32, B, C, D, E, F, M, N, W, H]
    reveal_type(ax.sum(t, A))  # want[plugin]: Tensor[F32, B, C, D, E, F, M, N, W, H]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
    wrong = ax.sum(t, ax.Axis)  # want-error[plugin]: Sum: `Axis` itself is not an axis label; miss[mypy,pyright]


def rank9(t: Tensor[F32, A, B, C, D, E, F, M, N, W]) -> None:
    reveal_type(ax.sum(t, E))  # want[plugin]: Tensor[F32, A, B, C, D, F, M, N, W]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
    reveal_type(ax.sum(t, M))  # want: Tensor[F32, A, B, C, D, E, F, N, W]
    e = ax.sum(t, E)  # ok


# unknown rank: gradual everywhere
def gradual(t: Tensor[F32, *tuple[Any, ...]]) -> None:
    reveal_type(ax.sum(t, A))  # want[plugin]: Tensor[Any, *tuple[Any, ...]]; want[mypy]: Tensor[F32, *tuple[Any, ...]]; want[pyright]: Any


def sum_generic(t: Tensor[DT, *Ts, B]) -> Tensor[DT, *Ts]:
    return ax.sum(t, B)  # ok


def softmax_generic(t: Tensor[DR, *Ts, C]) -> Tensor[DR, *Ts, C]:
    return ax.softmax(t, C)  # ok
