"""Dtype rules where the plugin checks axes (issue 44, class 3).

A fold whose unit takes F32 given I32 ``xs``: the unit's own signature (every checker) or a
cell's dtype check (the plugin runs the cell). A registered user op whose ``infer`` refuses
mixed dtypes: the plugin runs the ``infer`` (``op_modules``) and reports the refusal as it
reports an axis one. A lambda unit written in the call is typed from ``fold``'s context,
where its parameters are ``Any``: the plugin types it again at the call, with the state and
one step of ``xs``, and reports its body's errors there. (A lambda held in a variable before
the call keeps ``Any`` parameters: mypy's type of a lambda does not lead back to its body.)
"""

from typing import final, reveal_type

import jax
import userops
from axes import N

import axjax as ax
from axjax import F32, Tensor


@final
class Time(ax.Axis): ...


@final
class Pixel(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


key = jax.random.key(0)
w_in = ax.normal(key, (28, 16), Pixel, Hidden)
h0 = ax.zeros((4, 16), N, Hidden)
ints = ax.zeros((4, 7, 28), N, Time, Pixel, dtype=ax.I32)
cell = ax.nn.GRUCell(Pixel, Hidden, 28, 16, key=key)


def step(h: Tensor[F32, N, Hidden], x: Tensor[F32, N, Pixel]) -> Tensor[F32, N, Hidden]:
    return ax.tanh(x @ w_in + h)


by_step = ax.fold(step, over=Time)(h0, ints)  # want-error[plugin]: Argument 2 to "step" has incompatible type "Tensor[I32, N, Pixel]"; miss[mypy,pyright]
by_cell = ax.fold(cell, over=Time)(h0, ints)  # want-error[plugin]: the input is I32, the cell's parameters F32; miss[mypy,pyright]
by_lambda = ax.fold(lambda h, x: ax.tanh(x @ w_in + h), over=Time)(h0, ints)  # want-error[plugin]: Cannot apply MatMul to Tensor[I32, N, Pixel] and Tensor[F32, Pixel, Hidden]: dtypes F32 and I32 differ; miss[mypy]: a lambda's parameters are typed from fold's context (Any); want-error[pyright]: Type of parameter "x" is unknown
by_lambda_scan = ax.scan(lambda h, x: ax.tanh(x @ w_in + h), over=Time)(h0, ints)  # want-error[plugin]: Cannot apply MatMul to Tensor[I32, N, Pixel] and Tensor[F32, Pixel, Hidden]: dtypes F32 and I32 differ; miss[mypy]: a lambda's parameters are typed from fold's context (Any); want-error[pyright]: Type of parameter "x" is unknown
floats = ax.zeros((4, 7, 28), N, Time, Pixel)
reveal_type(ax.fold(lambda h, x: ax.tanh(x @ w_in + h), over=Time)(h0, floats))  # want: Tensor[F32, N, Hidden]; limit[pyright]: strict mode reports a lambda's unknown parameters
reveal_type(ax.scan(lambda h, x: ax.tanh(x @ w_in + h), over=Time)(h0, floats))  # want: Tensor[F32, Time, N, Hidden]; limit[pyright]: strict mode reports a lambda's unknown parameters
wrong_state = ax.fold(lambda h, x: x @ w_in + ax.sum(h, Hidden), over=Time)(h0, floats)  # want-error[plugin]: Cannot apply Add; miss[mypy]: a lambda's parameters are typed from fold's context (Any); want-error[pyright]: Type of parameter "x" is unknown
by_scan = ax.scan(step, over=Time)(h0, ints)  # want-error[plugin]: Argument 2 to "step"; miss[mypy,pyright]

f32 = ax.zeros((4, 3), N, Pixel)
bf16 = ax.zeros((4, 3), N, Pixel, dtype=ax.BF16)
reveal_type(userops.blend(f32, f32))  # want[plugin]: Tensor[F32, N, Pixel]; want[mypy,pyright]: Tensor[Any, *tuple[Any, ...]]
mixed = userops.blend(f32, bf16)  # want-error[plugin]: dtypes F32 and BF16 differ (blend one dtype); miss[mypy,pyright]
inline = userops.Blend()(f32, bf16)  # want-error[plugin]: dtypes F32 and BF16 differ; miss[mypy,pyright]
