"""fold / scan (issue 32, class 2): the mask is Bool for every checker; the unit's input and
state, the sequence's scanned axis and the mask's axes are checked by the plugin (it calls
the unit's type with one step of the sequence, then runs the real fold on stand-ins); the
scan's result order is known to every checker."""
# typing-class: 2 fold and scan

from typing import final, reveal_type

import jax
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
seq = ax.normal(key, (4, 7, 28), N, Time, Pixel)
h0 = ax.zeros((4, 16), N, Hidden)
lengths = ax.tensor([[True] * 7] * 4, N, Time, dtype=ax.Bool)
weights = ax.ones((4, 7), N, Time)  # ok
cell = ax.nn.GRUCell(Pixel, Hidden, 28, 16, key=key)


def step(h: Tensor[F32, N, Hidden], x: Tensor[F32, N, Pixel]) -> Tensor[F32, N, Hidden]:
    return ax.tanh(x @ w_in + h)


# the state's type in and out; scan's states with the scanned axis first
reveal_type(ax.fold(step, over=Time)(h0, seq, mask=lengths))  # want: Tensor[F32, N, Hidden]
reveal_type(ax.fold(cell, over=Time)(h0, ax.transpose(seq, Time, N, Pixel)))  # want: Tensor[F32, N, Hidden]
reveal_type(ax.fold(step, over=Time)(h0, seq, mask=ax.transpose(lengths, Time, N)))  # want: Tensor[F32, N, Hidden]
reveal_type(ax.scan(cell, over=Time)(h0, seq, mask=lengths))  # want: Tensor[F32, Time, N, Hidden]
states: Tensor[F32, Time, N, Hidden] = ax.scan(step, over=Time)(h0, seq)  # ok

# mistakes
l1 = ax.fold(step, over=Time)(h0, seq, mask=weights)  # want-error[plugin]: the mask must be Bool (true = keep), got F32; want-error[mypy,pyright]
l2 = ax.scan(cell, over=Time)(h0, seq, mask=ax.zeros((4, 7), N, Time, dtype=ax.I32))  # want-error[plugin]: the mask must be Bool (true = keep), got I32; want-error[mypy,pyright]
l3 = ax.fold(step, over=Time)(h0, ax.zeros((4, 28), N, Pixel))  # want-error[plugin]: Cannot fold over Time: xs=Tensor[F32, N, Pixel] has no axis Time (every input must have it); miss[mypy,pyright]
l4 = ax.fold(cell, over=Time)(h0, ax.zeros((4, 7, 16), N, Time, Hidden))  # want-error[plugin]: Cannot apply; miss[mypy,pyright]
l5 = ax.fold(step, over=Time)(h0, ax.zeros((4, 7, 16), N, Time, Hidden))  # want-error[plugin]: Argument 2 to "step" has incompatible type "Tensor[F32, N, Hidden]"; expected "Tensor[F32, N, Pixel]"; miss[mypy,pyright]
l6 = ax.fold(step, over=Time)(h0, seq, mask=ax.tensor([[True] * 28] * 4, N, Pixel, dtype=ax.Bool))  # want-error[plugin]: Cannot fold over Time: mask=Tensor[Bool, N, Pixel] has no axis Time; want-error[mypy,pyright]
l7 = ax.fold(step, over=Time)(h0, seq, mask=ax.tensor([[[True] * 28] * 7] * 4, N, Time, Pixel, dtype=ax.Bool))  # want-error[plugin]: the state Tensor[F32, N, Hidden] has no axis Pixel; miss[mypy,pyright]
l8: Tensor[F32, N, Time, Hidden] = ax.scan(step, over=Time)(h0, seq)  # want-error[plugin,pyright]; miss[mypy]; runs: annotations are not checked at run time
l9 = ax.sum(ax.scan(cell, over=Time)(h0, seq), Pixel)  # want-error[plugin]: Pixel is not an axis of the tensor; want-error[mypy,pyright]

# ax.ones / ax.zeros / ax.full without dtype= are F32 (the run time's default), whatever the
# context: never a Bool mask inferred from the parameter it is passed to
reveal_type(ax.ones((4, 7), N, Time))  # want: Tensor[F32, N, Time]
reveal_type(ax.zeros((4, 7), N, Time, dtype=ax.Bool))  # want: Tensor[Bool, N, Time]
l10 = ax.fold(step, over=Time)(h0, seq, mask=ax.ones((4, 7), N, Time))  # want-error[plugin]: the mask must be Bool (true = keep), got F32; want-error[mypy,pyright]
l11 = ax.scan(step, over=Time)(h0, seq, mask=ax.zeros((4, 7), N, Time))  # want-error[plugin]: the mask must be Bool (true = keep), got F32; want-error[mypy,pyright]
l12 = ax.fold(step, over=Time)(h0, seq, mask=ax.full((4, 7), N, Time, value=1))  # want-error[plugin]: the mask must be Bool (true = keep), got F32; want-error[mypy,pyright]
l13 = ax.where(ax.ones((4, 7), N, Time), weights, weights)  # want-error[plugin]: the condition must be Bool, got F32; want-error[mypy,pyright]
l14: Tensor[ax.Bool, N, Time] = ax.ones((4, 7), N, Time)  # want-error; runs: annotations are not checked at run time
l15 = ax.fold(step, over=Time)(h0, seq, mask=ax.ones((4, 7), N, Time, dtype=ax.Bool))  # ok
