"""Graph code built from ax.Input type-checks exactly like eager code (the paper's GADT)."""

from typing import reveal_type

import jax
from axes import A, B, C, N

import axjax as ax
from axjax import F32, Tensor

x = ax.Input(ax.F32, N, A)
reveal_type(x)  # want: Input[F32, N, A]
w = ax.Param(ax.normal(jax.random.key(0), (2, 3), A, B))
reveal_type(w)  # want: Param[F32, A, B]
b = ax.Const(ax.zeros((3,), B))
reveal_type(b)  # want: Const[F32, B]
h = ax.sigmoid(x @ w + ax.broadcast(b, x @ w))
reveal_type(h)  # want: Tensor[F32, N, B]
y = ax.softmax(h, B)
reveal_type(y)  # want: Tensor[F32, N, B]
loss = ax.mean(ax.sum(y, B), N)
reveal_type(loss)  # want: Tensor[F32]
g1 = x @ ax.Param(ax.zeros((3, 2), B, A))  # want-error: Cannot apply MatMul to Tensor[F32, N, A] and Tensor[F32, B, A]: inner axes A and B differ
g2 = h + x  # want-error: Cannot apply Add to Tensor[F32, N, B] and Tensor[F32, N, A]: axes differ
g3 = ax.Input(ax.I32, N) + ax.Input(ax.F32, N)  # want-error: dtypes F32 and I32 differ
g4 = ax.sum(x, C)  # want-error: Cannot apply Sum(C) to Tensor[F32, N, A]: C is not an axis of the tensor
g5 = ax.Input(A, B)  # want-error[plugin]: Input: the first argument is the dtype marker, got axis A (write ax.Input(ax.F32, A, ...)); want-error[mypy,pyright]; raises: TypeError
g6 = ax.Input(ax.F32, A, A)  # want-error[plugin]: Input: axis A occurs twice in (A, A); miss[mypy,pyright]
x2: ax.Input[F32, N, A] = ax.Input(ax.F32, N, A, sizes={A: 2}, name="x")  # ok
x3: Tensor[F32, N, A] = x  # ok
x4: Tensor[F32, A, N] = x  # want-error; runs: annotations are not checked at run time
predict = ax.compile(y, inputs=[x])
reveal_type(predict)  # want[mypy,pyright]: CompiledGraph[Tensor[F32, N, B], *tuple[Any, ...]]; want[plugin]: CompiledGraph[Tensor[F32, N, B], Tensor[F32, N, A] | Array | ndarray[Any, Any]]
