"""The paper's MatMul: the inner axes must agree; batched over any identical leading axes."""

from typing import TypeVar, TypeVarTuple, reveal_type

from axes import A, B, C, D, M, N

import axjax as ax
from axjax import F32, Tensor

I = TypeVar("I")  # noqa: E741
J = TypeVar("J")
K = TypeVar("K")
L = TypeVar("L")
Bs = TypeVarTuple("Bs")
DT = TypeVar("DT", bound=ax.DType)

ab = ax.zeros((2, 3), A, B)
bc = ax.zeros((3, 4), B, C)
ac = ax.zeros((2, 4), A, C)
ca = ax.zeros((4, 2), C, A)
cb = ax.zeros((4, 3), C, B)
cd = ax.zeros((4, 5), C, D)
bci = ax.zeros((3, 4), B, C, dtype=ax.I32)

reveal_type(ax.matmul(ab, bc))  # want: Tensor[F32, A, C]
reveal_type(ab @ bc)  # want: Tensor[F32, A, C]
reveal_type(ab @ (bc @ cd))  # want: Tensor[F32, A, D]
m1 = ax.matmul(ab, cb)  # want-error: Cannot apply MatMul to Tensor[F32, A, B] and Tensor[F32, C, B]: inner axes B and C differ (rename one, or use ax.contract)
m2 = ab @ cb  # want-error: Cannot apply MatMul to Tensor[F32, A, B] and Tensor[F32, C, B]: inner axes B and C differ
m3 = bc @ ab  # want-error: inner axes C and A differ
m4 = ab @ bci  # want-error: Cannot apply MatMul to Tensor[F32, A, B] and Tensor[I32, B, C]: dtypes F32 and I32 differ
m5: Tensor[F32, A, B] = ab @ bc  # want-error; runs: annotations are not checked at run time
m6: Tensor[F32, A, C] = ab @ bc  # ok
m7 = ab @ ax.zeros((3, 2), B, A)  # want-error[plugin]: the result would have axis A twice; miss[mypy,pyright]

# batched: any number of identical leading axes
nab = ax.zeros((8, 2, 3), N, A, B)
nbc = ax.zeros((8, 3, 4), N, B, C)
mbc = ax.zeros((7, 3, 4), M, B, C)
nmab = ax.zeros((8, 7, 2, 3), N, M, A, B)
nmbc = ax.zeros((8, 7, 3, 4), N, M, B, C)
reveal_type(nab @ nbc)  # want: Tensor[F32, N, A, C]
reveal_type(ax.matmul(nmab, nmbc))  # want: Tensor[F32, N, M, A, C]
b1 = nab @ mbc  # want-error: Cannot apply MatMul to Tensor[F32, N, A, B] and Tensor[F32, M, B, C]: batch axes [N] and [M] differ (transpose one operand first)
b2 = nab @ bc  # want-error: batch axes [N] and [] differ


# generic user code: checked once, for every axis
def chain(x: Tensor[DT, I, J], y: Tensor[DT, J, K], z: Tensor[DT, K, L]) -> Tensor[DT, I, L]:
    return ax.matmul(ax.matmul(x, y), z)  # ok


def wrong_result(x: Tensor[DT, I, J], y: Tensor[DT, J, K]) -> Tensor[DT, K, I]:
    return x @ y  # want-error


def wrong_inner(x: Tensor[F32, I, J], y: Tensor[F32, K, J]) -> Tensor[F32, I, K]:
    return x @ y  # want-error: Cannot apply MatMul to Tensor[F32, I, J] and Tensor[F32, K, J]: inner axes J and K differ


def batched(x: Tensor[DT, *Bs, I, J], y: Tensor[DT, *Bs, J, K]) -> Tensor[DT, *Bs, I, K]:
    h = x @ y
    reveal_type(h)  # want: Tensor[DT, *Bs, I, K]
    return h  # ok


def batched_wrong(x: Tensor[F32, *Bs, I, J], y: Tensor[F32, *Bs, K, J]) -> Tensor[F32, *Bs, I, K]:
    return x @ y  # want-error: Cannot apply MatMul to Tensor[F32, *Bs, I, J] and Tensor[F32, *Bs, K, J]: inner axes J and K differ


reveal_type(chain(ab, bc, cd))  # want: Tensor[F32, A, D]
c0 = chain(ab, bc, ca)  # want-error[plugin]: The call returns Tensor[F32, A, A]: axis A occurs twice in (A, A); miss[mypy,pyright]
c1 = chain(ab, bc, bc)  # want-error
reveal_type(batched(nab, nbc))  # want: Tensor[F32, N, A, C]
c2 = batched(nab, mbc)  # want-error
dd = ax.zeros((5, 5), D, D)  # want-error[plugin]: Tensor: axis D occurs twice in (D, D); a tensor never has the same axis twice (rename one of them); miss[mypy,pyright]
