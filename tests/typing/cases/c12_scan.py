"""A recurrent network over a Time axis with ax.fold / ax.scan: the result types (scan adds
the scanned axis, first by default), and the unit, the initial state, the sequence and the
mask checked against each other (by the plugin; the other checkers get the result types)."""

from typing import final, reveal_type

import jax
from axes import N

import axjax as ax
from axjax import F32, Bool, Tensor


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


def step(h: Tensor[F32, N, Hidden], x: Tensor[F32, N, Pixel]) -> Tensor[F32, N, Hidden]:
    return ax.tanh(x @ w_in + h)


def lstm_step(state: tuple[Tensor[F32, N, Hidden], Tensor[F32, N, Hidden]],
              x: Tensor[F32, N, Pixel]) -> tuple[Tensor[F32, N, Hidden], Tensor[F32, N, Hidden]]:
    h, c = state
    c2 = c + ax.sigmoid(x @ w_in)
    return ax.tanh(c2) * h, c2


# fold: the last state, with the initial state's type
last = ax.fold(step, over=Time)(h0, seq)  # ok
reveal_type(last)  # want: Tensor[F32, N, Hidden]
back: Tensor[F32, N, Hidden] = ax.fold(step, over=Time, reverse=True)(h0, seq, mask=lengths)  # ok

# scan: every state, the scanned axis first (at=0), anywhere under the plugin (at=k)
states: Tensor[F32, Time, N, Hidden] = ax.scan(step, over=Time)(h0, seq)  # ok
reveal_type(ax.mean(ax.scan(step, over=Time)(h0, seq), Time))  # want: Tensor[F32, N, Hidden]
reveal_type(ax.scan(step, over=Time, at=1)(h0, seq))  # want[plugin]: Tensor[F32, N, Time, Hidden]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
reveal_type(ax.scan(step, over=Time, at=-1)(h0, seq))  # want[plugin]: Tensor[F32, N, Hidden, Time]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
time_major = ax.transpose(seq, Time, N, Pixel)
reveal_type(ax.scan(step, over=Time)(h0, time_major))  # want: Tensor[F32, Time, N, Hidden]
pair = ax.scan(lstm_step, over=Time)((h0, h0), seq)  # ok
reveal_type(pair)  # want: tuple[Tensor[F32, Time, N, Hidden], Tensor[F32, Time, N, Hidden]]
final_h, final_c = ax.fold(lstm_step, over=Time)((h0, h0), seq, mask=lengths)  # ok
reveal_type(final_c)  # want: Tensor[F32, N, Hidden]

# mistakes
s1 = ax.fold(step, over=Hidden)(h0, seq)  # want-error[plugin]: Cannot fold over Hidden: xs=Tensor[F32, N, Time, Pixel] has no axis Hidden (every input must have it); miss[mypy,pyright]
s2 = ax.fold(step, over=Time)(ax.zeros((4, 7, 16), N, Time, Hidden), seq)  # want-error[plugin]: Cannot fold over Time: the initial state init=Tensor[F32, N, Time, Hidden] has axis Time; miss[mypy,pyright]
s3 = ax.fold(step, over=Time)(h0, ax.zeros((4, 7, 16), N, Time, Hidden))  # want-error[plugin]: Argument 2 to "step" has incompatible type "Tensor[F32, N, Hidden]"; expected "Tensor[F32, N, Pixel]"; miss[mypy,pyright]
s4 = ax.scan(step, over=Time)(ax.zeros((16, 4), Hidden, N), seq)  # want-error[plugin]: Argument 1 to "step" has incompatible type "Tensor[F32, Hidden, N]"; miss[mypy,pyright]
s5 = ax.fold(step, over=Time)(h0, seq, mask=ax.tensor([[True] * 28] * 4, N, Pixel, dtype=Bool))  # want-error[plugin]: Cannot fold over Time: mask=Tensor[Bool, N, Pixel] has no axis Time; want-error[mypy,pyright]
s6 = ax.fold(step, over=Time)(h0, seq, mask=ax.tensor([[[True] * 28] * 7] * 4, N, Time, Pixel, dtype=Bool))  # want-error[plugin]: Cannot fold with mask Tensor[Bool, N, Pixel]: the state Tensor[F32, N, Hidden] has no axis Pixel; miss[mypy,pyright]
s7: Tensor[F32, N, Time, Hidden] = ax.scan(step, over=Time)(h0, seq)  # want-error[plugin,pyright]; miss[mypy]; runs: annotations are not checked at run time
s8 = ax.sum(ax.fold(step, over=Time)(h0, seq), Time)  # want-error: Cannot apply Sum(Time) to Tensor[F32, N, Hidden]: Time is not an axis of the tensor
