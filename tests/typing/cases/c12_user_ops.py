"""User ops: typed bases (ElementwiseOp, FloatElementwiseOp, ReductionOp) are seen by every
checker; a plain ax.Op's own infer types its calls under the plugin when its module is
listed in op_modules (userops.py is)."""

from typing import reveal_type

from axes import A, B, C, N
from userops import Norm, Swish, outer

import axjax as ax
from axjax import F32, Tensor

x = ax.ones((4, 3), N, A)
ids = ax.zeros((4, 3), N, A, dtype=ax.I32)

# typed bases: every checker knows the result
reveal_type(Swish()(x))  # want: Tensor[F32, N, A]
reveal_type(Norm(A)(x))  # want: Tensor[F32, N]
reveal_type(Norm(N)(x))  # want: Tensor[F32, A]
act = Swish()
y: Tensor[F32, N, A] = act(x) + x  # ok
n2: Tensor[F32, N] = Norm(A)(ax.ones((4, 2, 3), N, B, A)) * 2.0  # want-error[plugin]; want-error[mypy,pyright]; runs: annotations are not checked at run time

# a plain ax.Op, typed by running its infer (userops is in op_modules)
reveal_type(outer(x, ax.ones((4, 2), N, B)))  # want[plugin]: Tensor[F32, N, A, B]; want[mypy,pyright]: Tensor[Any, *tuple[Any, ...]]
o: Tensor[F32, N, A, B] = outer(x, ax.ones((4, 2), N, B))  # ok

# mistakes
u1 = Swish()(ids)  # want-error
u2 = Norm(C)(x)  # want-error[plugin]: Cannot apply Norm(C) to Tensor[F32, N, A]: C is not an axis of the tensor; want-error[mypy,pyright]
u3 = Swish()(x, ax.transpose(x, A, N))  # want-error
u4 = Norm(A)(ids)  # want-error[plugin]: Cannot apply Norm(A) to Tensor[I32, N, A]: the norm needs floating-point values; miss[mypy,pyright]
u5 = outer(x, ax.ones((2, 4), B, N))  # want-error[plugin]: Cannot apply Outer to Tensor[F32, N, A] and Tensor[F32, B, N]: the leading axes differ; miss[mypy,pyright]
u6 = outer(x, x)  # want-error[plugin]: both operands end in the same axis; miss[mypy,pyright]
