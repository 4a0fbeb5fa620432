"""Typed layers (issue 12): an image classifier from Conv2D, pooling and Affine, a volume
through Conv3D, and LSTM and GRU cells stepped by hand.

``Conv2D((Height, Width), Chan, Feature, ...)`` is a ``Conv2D[F32, Height, Width, Chan,
Feature]``: it keeps the input's axes in place, ``Feature`` where ``Chan`` was. A cell
``LSTMCell[F32, In, Hidden]`` maps a state ``(h, c)`` over ``[*B, Hidden]`` and an input
over ``[*B, In]`` to the next state.
"""

from typing import final, reveal_type

import jax
from axes import D, H, N, W

import axjax as ax
from axjax import BF16, F32, Tensor


@final
class Chan(ax.Axis): ...


@final
class Feature(ax.Axis): ...


@final
class Class(ax.Axis): ...


@final
class Time(ax.Axis): ...


@final
class In(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


key = jax.random.key(0)
images = ax.zeros((4, 4, 4, 4), N, H, W, Chan)

conv = ax.nn.Conv2D((H, W), Chan, Feature, 4, 4, 3, padding="SAME", key=key)
reveal_type(conv)  # want: Conv2D[F32, H, W, Chan, Feature]
pool = ax.nn.MaxPool2D((H, W), 2)
reveal_type(pool)  # want: MaxPool2D[H, W]
head = ax.nn.Affine(Feature, Class, 4, 4, key=key)

# a correct pipeline
maps: Tensor[F32, N, H, W, Feature] = conv(images)  # ok
pooled = pool(ax.relu(maps))  # ok
reveal_type(pooled)  # want: Tensor[F32, N, H, W, Feature]
logits = head(ax.mean(ax.mean(pooled, H), W))  # ok
reveal_type(logits)  # want: Tensor[F32, N, Class]
reveal_type(conv(ax.zeros((4, 4, 4, 4), N, W, H, Chan)))  # want: Tensor[F32, N, W, H, Feature]
reveal_type(conv(ax.zeros((4, 4, 4, 4), N, Chan, H, W)))  # want: Tensor[F32, N, Feature, H, W]
reveal_type(conv(ax.zeros((4, 4, 4, 4), N, H, Chan, W)))  # want: Tensor[F32, N, H, Feature, W]
reveal_type(conv(ax.zeros((4, 4, 4, 4), N, W, Chan, H)))  # want: Tensor[F32, N, W, Feature, H]
odd = conv(ax.zeros((4, 4, 4, 4), H, N, W, Chan))  # ok[plugin]; limit[mypy,pyright]: runs (any layout), but the overloads take the three axes last
reveal_type(ax.nn.Conv1D(W, Chan, Feature, 4, 4, 3, key=key))  # want: Conv1D[F32, W, Chan, Feature]
reveal_type(ax.nn.Conv1D(W, Chan, Feature, 4, 4, 3, dtype=BF16, key=key))  # want: Conv1D[BF16, W, Chan, Feature]
reveal_type(ax.nn.Conv3D((D, H, W), Chan, Feature, 4, 4, 3, dtype=BF16, key=key))  # want: Conv3D[BF16, D, H, W, Chan, Feature]
model = ax.nn.Sequential([conv, ax.relu, pool])
reveal_type(model(images))  # want[plugin]: Tensor[F32, N, H, W, Feature]; want[mypy,pyright]: Any

# a volume: Conv3D over (D, H, W), channel-last and channel-first; 1-d and 2-d pools
vol = ax.zeros((2, 4, 4, 4, 4), N, D, H, W, Chan)
conv3 = ax.nn.Conv3D((D, H, W), Chan, Feature, 4, 4, 3, padding="SAME", key=key)
reveal_type(conv3)  # want: Conv3D[F32, D, H, W, Chan, Feature]
reveal_type(conv3(vol))  # want: Tensor[F32, N, D, H, W, Feature]
reveal_type(conv3(ax.zeros((2, 4, 4, 4, 4), N, Chan, D, H, W)))  # want: Tensor[F32, N, Feature, D, H, W]
avg = ax.nn.AvgPool2D((H, W), 2)
reveal_type(avg)  # want: AvgPool2D[H, W]
reveal_type(avg(images))  # want: Tensor[F32, N, H, W, Chan]
pool1 = ax.nn.MaxPool1D(Time, 2)
reveal_type(pool1(ax.zeros((4, 8, 4), N, Time, Chan)))  # want: Tensor[F32, N, Time, Chan]
v1 = conv3(ax.zeros((2, 4, 4, 4), N, H, W, Chan))  # want-error[plugin]: D is not an axis of the input; want-error[mypy,pyright]
v2 = conv3(ax.rename(vol, Chan, Class))  # want-error[plugin]: Chan is not an axis of the input; want-error[mypy,pyright]
v3 = conv3(ax.astype(vol, BF16))  # want-error[plugin]: dtypes BF16 and F32 differ; want-error[mypy,pyright]
v4 = avg(ax.zeros((4, 4, 4), N, H, Chan))  # want-error[plugin]: W is not an axis of the tensor; miss[mypy,pyright]: a pool keeps its input's type, whatever its axes
v5 = pool1(images)  # want-error[plugin]: Time is not an axis of the tensor; miss[mypy,pyright]: a pool keeps its input's type, whatever its axes
v6: Tensor[F32, N, H, W, Chan] = avg(ax.zeros((4, 4, 4, 4), N, W, H, Chan))  # want-error; runs: an annotation is not checked at run time

# conv mistakes
k1 = conv(ax.rename(images, Chan, Class))  # want-error[plugin]: Chan is not an axis of the input; want-error[mypy,pyright]
k2 = conv(ax.zeros((4, 4, 4), N, H, Chan))  # want-error[plugin]: W is not an axis of the input; want-error[mypy,pyright]
k3 = conv(ax.astype(images, BF16))  # want-error[plugin]: dtypes BF16 and F32 differ; want-error[mypy,pyright]
k5: Tensor[F32, N, H, W, Chan] = conv(images)  # want-error; runs: an annotation is not checked at run time
k6 = ax.nn.Sequential([conv, conv])(images)  # want-error[plugin]: Chan is not an axis of the input; miss[mypy,pyright]: Sequential's call is Any without the plugin
k7 = pool(ax.zeros((4, 4, 4), N, H, Feature))  # want-error[plugin]: W is not an axis of the tensor; miss[mypy,pyright]: a pool keeps its input's type, whatever its axes

# an LSTM cell stepped by hand over a sequence
cell = ax.nn.LSTMCell(In, Hidden, 4, 4, key=key)
reveal_type(cell)  # want: LSTMCell[F32, In, Hidden]
xs = ax.zeros((4, 4, 4), N, Time, In)
h0 = ax.zeros((4, 4), N, Hidden)
state = (h0, h0)
x0 = ax.index(xs, Time, 0)
reveal_type(x0)  # want: Tensor[F32, N, In]
state = cell(state, x0)  # ok
reveal_type(state[0])  # want: Tensor[F32, N, Hidden]
rnn = ax.nn.RNNCell(In, Hidden, 4, 4, key=key)
reveal_type(rnn(h0, x0))  # want: Tensor[F32, N, Hidden]

# cell mistakes
c1 = rnn(h0, ax.rename(x0, In, Class))  # want-error[plugin]: In is not an axis of the input; want-error[mypy,pyright]
c2 = rnn(ax.rename(h0, Hidden, Class), x0)  # want-error[plugin]: Hidden is not an axis of the state; want-error[mypy,pyright]
c3 = rnn(ax.zeros((4,), Hidden), x0)  # want-error[plugin]: the state's batch axes () differ from the input's (N); miss[mypy,pyright]: the batch axes are two variadics
c4 = rnn(ax.astype(h0, BF16), ax.astype(x0, BF16))  # want-error[plugin]: the state is BF16, the cell's parameters F32; want-error[mypy,pyright]
c5 = cell(h0, x0)  # want-error[plugin]: the state is a pair; want-error[mypy,pyright]

# a GRU cell: the state is one tensor
gru = ax.nn.GRUCell(In, Hidden, 4, 4, key=key)
reveal_type(gru)  # want: GRUCell[F32, In, Hidden]
reveal_type(ax.nn.GRUCell(In, Hidden, 4, 4, dtype=BF16, key=key))  # want: GRUCell[BF16, In, Hidden]
reveal_type(ax.nn.RNNCell(In, Hidden, 4, 4, dtype=BF16, key=key))  # want: RNNCell[BF16, In, Hidden]
reveal_type(gru(h0, x0))  # want: Tensor[F32, N, Hidden]
g1 = gru(h0, ax.rename(x0, In, Class))  # want-error[plugin]: In is not an axis of the input; want-error[mypy,pyright]
g2 = gru(state, x0)  # want-error[plugin]: takes a Tensor as its state, got a tuple; want-error[mypy,pyright]; raises: TypeError
g3 = gru(ax.astype(h0, BF16), ax.astype(x0, BF16))  # want-error[plugin]: the state is BF16, the cell's parameters F32; want-error[mypy,pyright]
g4: Tensor[F32, N, In] = gru(h0, x0)  # want-error; runs: an annotation is not checked at run time
