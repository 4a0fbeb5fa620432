"""Dtype kinds: a helper that needs floats bounds its dtype by ax.Floating, and the ops that
need floats (softmax, mean, var, logsumexp, ...) say so: integer and Bool tensors are
rejected before they run (by every checker for typed helpers, reductions and the unary
math ops that need floats; Bool arithmetic by the plugin)."""

from typing import TypeVar, TypeVarTuple, reveal_type

from axes import A, N

import axjax as ax
from axjax import BF16, F32, Tensor

DR = TypeVar("DR", bound=ax.Floating)
Bs = TypeVarTuple("Bs")


def normalize(x: Tensor[DR, *Bs, A]) -> Tensor[DR, *Bs, A]:
    """Softmax over the features, centred: floats only."""
    return ax.softmax(x - ax.broadcast(ax.mean(x, A), x), A)


scores = ax.ones((4, 3), N, A)
half = ax.astype(scores, BF16)
counts = ax.ones((4, 3), N, A, dtype=ax.I32)
flags = ax.ones((4, 3), N, A, dtype=ax.Bool)

reveal_type(normalize(scores))  # want: Tensor[F32, N, A]
reveal_type(normalize(half))  # want: Tensor[BF16, N, A]
total = ax.sum(counts, A) + 1  # ok
probs: Tensor[F32, N, A] = normalize(ax.astype(counts, F32))  # ok
reveal_type(ax.mean(ax.astype(flags, F32), N))  # want: Tensor[F32, A]
reveal_type(ax.exp(half))  # want: Tensor[BF16, N, A]
reveal_type(ax.tanh(normalize(scores)))  # want: Tensor[F32, N, A]
reveal_type(ax.relu(counts))  # want: Tensor[I32, N, A]
reveal_type(ax.abs(counts) + ax.square(counts))  # want: Tensor[I32, N, A]

# mistakes
t1 = normalize(counts)  # want-error[plugin,mypy]: "DR" of "normalize" cannot be "I32"; want-error[pyright]: I32
t2 = ax.softmax(counts, A)  # want-error[plugin]: Cannot apply Softmax(A) to Tensor[I32, N, A]: Softmax needs floating-point values, got I32; want-error[mypy,pyright]
t3 = ax.mean(flags, A)  # want-error[plugin]: Mean needs floating-point values, got Bool; want-error[mypy,pyright]
t4 = ax.logsumexp(counts, N)  # want-error[plugin]: LogSumExp needs floating-point values; want-error[mypy,pyright]
t5 = ax.exp(counts)  # want-error[plugin]: Exp needs floating-point values, got I32; want-error[mypy]: "DR" of "exp" cannot be "I32"; want-error[pyright]: I32
t8 = ax.tanh(flags)  # want-error[plugin]: Tanh needs floating-point values, got Bool; miss[mypy,pyright]: tanh, expm1, softplus keep a DType-bound variable
t9 = ax.sigmoid(counts)  # want-error[plugin]: Sigmoid needs floating-point values, got I32; want-error[mypy,pyright]
t10 = ax.log(ax.sum(counts, A))  # want-error[plugin]: Log needs floating-point values, got I32; want-error[mypy,pyright]
t6 = flags + flags  # want-error[plugin]: Add needs numbers, got Bool; miss[mypy,pyright]
t7 = normalize(flags)  # want-error[plugin,mypy]: "DR" of "normalize" cannot be "Bool"; want-error[pyright]
