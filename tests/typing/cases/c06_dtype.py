"""dtypes: the first parameter of Tensor[D, *Axes] threads through every op and must agree."""

from typing import TypeVar, TypeVarTuple, reveal_type

import jax
from axes import A, B

import axjax as ax
from axjax import F32, I32, Tensor

Ts = TypeVarTuple("Ts")
DT = TypeVar("DT", bound=ax.DType)
key = jax.random.key(0)

# constructors: the dtype is F32 (I32 for integers) unless given; ax.tensor needs one
reveal_type(ax.zeros((2, 3), A, B))  # want: Tensor[F32, A, B]
reveal_type(ax.ones((2,), A, dtype=ax.BF16))  # want: Tensor[BF16, A]
reveal_type(ax.full((2,), A, value=0.5))  # want: Tensor[F32, A]
reveal_type(ax.normal(key, (2, 3), A, B, stddev=0.1))  # want: Tensor[F32, A, B]
reveal_type(ax.uniform(key, (2,), A, dtype=ax.F16))  # want: Tensor[F16, A]
reveal_type(ax.randint(key, (2,), A, minval=0, maxval=9))  # want: Tensor[I32, A]
reveal_type(ax.arange(A, 5))  # want: Tensor[I32, A]
reveal_type(ax.tensor([[1.0, 2.0]], A, B))  # want[plugin]: Tensor[F32, A, B]; want[mypy,pyright]: Tensor[Any, A, B]
reveal_type(ax.tensor([[1.0, 2.0]], A, B, dtype=ax.F32))  # want: Tensor[F32, A, B]
reveal_type(ax.zeros(()))  # want: Tensor[F32]
c1 = ax.zeros((2, 3), A)  # want-error[plugin]: zeros: shape (2, 3) has 2 sizes but 1 axes were named (A); give one size per axis; miss[mypy,pyright]; raises: TypeError
c2 = ax.zeros((2,), A, dtype=int)  # want-error; raises: TypeError
c3 = ax.zeros((2, 2), A, A)  # want-error[plugin]: Tensor: axis A occurs twice in (A, A); a tensor never has the same axis twice (rename one of them); miss[mypy,pyright]
c4 = ax.zeros((2,), ax.Axis)  # want-error[plugin]: Tensor: `Axis` itself is not an axis label; subclass it; miss[mypy,pyright]; raises: TypeError

f = ax.zeros((2, 3), A, B)
i = ax.zeros((2, 3), A, B, dtype=I32)
e1 = f + i  # want-error: Cannot apply Add to Tensor[F32, A, B] and Tensor[I32, A, B]: dtypes F32 and I32 differ (convert one operand with astype)
reveal_type(f + ax.astype(i, F32))  # want: Tensor[F32, A, B]
reveal_type(f + i.astype(F32))  # want: Tensor[F32, A, B]
reveal_type(ax.astype(f, ax.BF16))  # want: Tensor[BF16, A, B]
e2: Tensor[I32, A, B] = f  # want-error; runs: annotations are not checked at run time
e3: Tensor[A, B] = f  # want-error; runs: annotations are not checked at run time


def scale(x: Tensor[DT, *Ts], y: Tensor[DT, *Ts]) -> Tensor[DT, *Ts]:
    return x * y  # ok


def mixed(x: Tensor[DT, *Ts], y: Tensor[F32, *Ts]) -> Tensor[DT, *Ts]:
    return x * y  # want-error: Cannot apply Multiply to Tensor[DT, *Ts] and Tensor[F32, *Ts]: dtypes DT and F32 differ


def any_float(x: Tensor[DT, A]) -> Tensor[DT, A]:
    return ax.exp(x)  # ok[plugin]; limit[mypy,pyright]: DT is bound by ax.DType, so it might be I32: bound it by ax.Floating


# a number takes the dtype of the tensor it meets, a type variable's too
def halve(x: Tensor[DT, A, B], s: float) -> Tensor[DT, A, B]:
    reveal_type(x * 0.5)  # want: Tensor[DT, A, B]
    reveal_type(0.5 * x > s)  # want: Tensor[Bool, A, B]
    return ax.where(x > 0.0, x, x / 2.0)  # ok


def halve_any(x: Tensor[DT, *Ts]) -> Tensor[DT, *Ts]:
    return ax.maximum(x * 0.5, 1)  # ok


def halve_wrong(x: Tensor[DT, A, B]) -> Tensor[DT, A, B]:
    return x * 0.5 + ax.transpose(x, B, A)  # want-error: Cannot apply Add to Tensor[DT, A, B] and Tensor[DT, B, A]: same axes in a different order


reveal_type(scale(f, f))  # want: Tensor[F32, A, B]
reveal_type(halve(ax.ones((2, 3), A, B, dtype=ax.BF16), 2.0))  # want: Tensor[BF16, A, B]
e4 = scale(f, i)  # want-error
