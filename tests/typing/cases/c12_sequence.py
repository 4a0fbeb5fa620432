"""Sequence layers over a Time axis (issue 12): ax.nn cells run by ax.fold / ax.scan (as in
docs/nn.md), and by the Recurrent and Bidirectional layers, which are typed by their cell
and the scanned axis (``Recurrent[LSTMCell[F32, In, Hidden], Time]``): the output is
``[Time, *Batch, Hidden]`` in the cell's dtype, and a sequence without the cell's input axis
is an error."""

from typing import final, reveal_type

import jax
from axes import N

import axjax as ax
from axjax import BF16, F32, Tensor


@final
class Time(ax.Axis): ...


@final
class In(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


@final
class Other(ax.Axis): ...


key = jax.random.key(0)
xs = ax.normal(key, (4, 7, 3), N, Time, In)
time_major = ax.transpose(xs, Time, N, In)
mask = ax.tensor([[True] * 7] * 4, N, Time, dtype=ax.Bool)
lstm = ax.nn.LSTMCell(In, Hidden, 3, 5, key=key)
gru = ax.nn.GRUCell(In, Hidden, 3, 5, key=key)
h0 = ax.zeros((4, 5), N, Hidden)

# the cells through ax.fold / ax.scan, as docs/nn.md writes them
init = (h0, h0)
h, c = ax.fold(lstm, over=Time)(init, xs)  # ok
reveal_type(h)  # want: Tensor[F32, N, Hidden]
hs, cs = ax.scan(lstm, over=Time)(init, xs)  # ok
reveal_type(hs)  # want: Tensor[F32, Time, N, Hidden]
reveal_type(ax.fold(gru, over=Time)(h0, xs, mask=mask))  # want: Tensor[F32, N, Hidden]
reveal_type(ax.scan(gru, over=Time)(h0, time_major))  # want: Tensor[F32, Time, N, Hidden]
f1 = ax.fold(gru, over=Time)(h0, ax.rename(xs, In, Other))  # want-error[plugin]: In is not an axis of the input; miss[mypy,pyright]: fold and scan do not check the unit without the plugin
f2 = ax.scan(lstm, over=Time)(h0, xs)  # want-error[plugin]: the state is a pair; miss[mypy,pyright]: fold and scan do not check the unit without the plugin

# Recurrent: the cell's output at every step, Time first
rnn = ax.nn.Recurrent(lstm, over=Time)
reveal_type(rnn)  # want: Recurrent[LSTMCell[F32, In, Hidden], Time]
reveal_type(rnn(xs))  # want: Tensor[F32, Time, N, Hidden]
reveal_type(rnn(time_major))  # want: Tensor[F32, Time, N, Hidden]
reveal_type(rnn(xs, mask=mask))  # want: Tensor[F32, Time, N, Hidden]
summary = ax.mean(rnn(xs), Time)  # ok
reveal_type(summary)  # want: Tensor[F32, N, Hidden]
reveal_type(ax.nn.Recurrent(gru, over=Time, reverse=True)(xs))  # want: Tensor[F32, Time, N, Hidden]

# Recurrent mistakes: the wrong input axis, the wrong scanned axis, another dtype
r1 = rnn(ax.rename(xs, In, Other))  # want-error[plugin]: In is not an axis of the input; want-error[mypy,pyright]
r2 = ax.nn.Recurrent(lstm, over=Other)(xs)  # want-error[plugin]: Other is not an axis of the input; want-error[mypy,pyright]
r3 = rnn(ax.astype(xs, BF16))  # want-error[plugin]: the input is BF16, the cell's parameters F32; want-error[mypy,pyright]
r4 = rnn(xs) + h0  # want-error: Cannot apply Add; want-error[mypy,pyright]
r5: Tensor[F32, N, Time, Hidden] = rnn(xs)  # want-error; runs: annotations are not checked at run time
r6 = rnn(xs, mask=ax.tensor([[True] * 4] * 7, Time, Other, dtype=ax.Bool))  # want-error[plugin]: mask; miss[mypy,pyright]: the mask's axes are not in the overloads

# Bidirectional: both directions, joined along Hidden
bi = ax.nn.Bidirectional(gru, ax.nn.GRUCell(In, Hidden, 3, 5, key=key), over=Time)
reveal_type(bi)  # want: Bidirectional[GRUCell[F32, In, Hidden], GRUCell[F32, In, Hidden], Time]
reveal_type(bi(xs, mask=mask))  # want: Tensor[F32, Time, N, Hidden]
b1 = bi(ax.rename(xs, In, Other))  # want-error[plugin]: In is not an axis of the input; want-error[mypy,pyright]
b2: Tensor[F32, N, Hidden] = bi(xs)  # want-error; runs: annotations are not checked at run time

# Stacked: gradual (its layers are a run-time tuple)
deep = ax.nn.Stacked([rnn, ax.nn.Recurrent(ax.nn.LSTMCell(Hidden, Hidden, 5, 5, key=key), over=Time)])
out: Tensor[F32, Time, N, Hidden] = deep(xs)  # ok
s1 = deep(ax.rename(xs, In, Other))  # want-error[plugin]: In is not an axis of the input; miss[mypy,pyright]: Stacked is gradual
