"""A graph training script: ax.compile returns a callable typed by its output (and, under
the plugin, by its Inputs); compile_step needs a scalar loss; ax.grad over a graph."""

from typing import reveal_type

import jax
import numpy as np
import optax
from axes import A, B, N

import axjax as ax
from axjax import F32, Tensor

x = ax.Input(ax.F32, N, A, name="x")
y = ax.Input(ax.F32, N, B, name="y")
w = ax.Param(ax.normal(jax.random.key(0), (2, 3), A, B))
pred = x @ w
loss = ax.mean(ax.sum((pred - y) * (pred - y), B), N)

predict = ax.compile(pred, inputs=[x])
out = predict(ax.ones((4, 2), N, A))  # ok
reveal_type(out)  # want: Tensor[F32, N, B]
reveal_type(predict(np.ones((4, 2), np.float32)))  # want: Tensor[F32, N, B]
probs: Tensor[F32, N, B] = ax.softmax(predict(ax.ones((4, 2), N, A)), B)  # ok
evaluate = ax.compile(loss, inputs=[x, y])
reveal_type(evaluate(ax.ones((4, 2), N, A), ax.ones((4, 3), N, B)))  # want: Tensor[F32]

grads = ax.grad(loss, wrt=[w], inputs=[x, y])  # ok
(g_w,) = grads(ax.ones((4, 2), N, A), ax.ones((4, 3), N, B))  # ok
value, g2 = ax.value_and_grad(loss, wrt=w, inputs=[x, y])(ax.ones((4, 2), N, A), ax.ones((4, 3), N, B))  # ok
step = ax.compile_step(loss, optax.sgd(0.1), inputs=[x, y])  # ok
step(ax.ones((4, 2), N, A), ax.ones((4, 3), N, B))  # ok

# mistakes
p1 = predict(ax.ones((2, 4), A, N))  # want-error[plugin]: Argument 1 to "__call__" of "CompiledGraph" has incompatible type "Tensor[F32, A, N]"; miss[mypy,pyright]
p2 = evaluate(ax.ones((4, 3), N, B), ax.ones((4, 2), N, A))  # want-error[plugin]: incompatible type "Tensor[F32, N, B]"; expected "Tensor[F32, N, A] | Array | ndarray[Any, Any]"; miss[mypy,pyright]
p3 = predict(ax.ones((4, 2), N, A, dtype=ax.I32))  # want-error[plugin]: incompatible type "Tensor[I32, N, A]"; miss[mypy,pyright]
p4 = ax.compile_step(ax.sum((pred - y) * (pred - y), B), optax.sgd(0.1), inputs=[x, y])  # want-error[mypy,plugin]: expected "Tensor[Any]"; want-error[pyright]: "Tensor[F32, N]" is not assignable to "Tensor[Any]"
p5 = ax.grad(ax.sum(pred, B), wrt=[w], inputs=[x])  # want-error[mypy,plugin]: Argument 1 to "grad" has incompatible type; want-error[pyright]
p6: Tensor[F32, B, N] = predict(ax.ones((4, 2), N, A))  # want-error; runs: annotations are not checked at run time
