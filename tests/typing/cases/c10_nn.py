"""The paper's layers from axjax.nn: Affine and Conv2D (typed by their axes), pooling (the
axes kept), and a recurrent unit folded over a sequence (gradual: the checkers accept it, the
ops inside check)."""

from typing import final, reveal_type

import jax
from axes import A, B, C, H, N, W

import axjax as ax
from axjax import F32, Tensor


@final
class Pixel(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


@final
class Time(ax.Axis): ...


key = jax.random.key(0)
images = ax.zeros((8, 784), N, Pixel)

# Affine[D, In, Out]: Tensor[D, *B, In] -> Tensor[D, *B, Out]
layer = ax.nn.Affine(Pixel, Hidden, 784, 30, key=key)
reveal_type(layer)  # want: Affine[F32, Pixel, Hidden]
reveal_type(layer(images))  # want: Tensor[F32, N, Hidden]
hidden: Tensor[F32, N, Hidden] = layer(images)  # ok
a1 = layer(ax.zeros((8, 30), N, Hidden))  # want-error
a2: Tensor[F32, Hidden, N] = layer(images)  # want-error; runs: annotations are not checked at run time
mlp = ax.nn.MLP(Pixel, C, 784, 10, hidden={Hidden: 30}, key=key)
reveal_type(mlp(images))  # want: Tensor[F32, N, C]

# convolution: the op is exact under the plugin, gradual without it
pictures = ax.zeros((8, 5, 5, 1), N, H, W, A)
kernel = ax.zeros((3, 3, 1, 4), H, W, A, B)
reveal_type(ax.conv(pictures, kernel, (H, W)))  # want[plugin]: Tensor[F32, N, H, W, B]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
k1 = ax.conv(pictures, kernel, (H, C))  # want-error[plugin]: Cannot apply Conv; miss[mypy,pyright]
k2 = ax.max_pool(pictures, (H, W), window=2)  # ok
reveal_type(k2)  # want: Tensor[F32, N, H, W, A]

# Conv2D[D, S1, S2, In, Out]: channel-last [*B, S1, S2, In] or channel-first [*B, In, S1, S2]
conv = ax.nn.Conv2D((H, W), A, B, 1, 4, 3, key=key)
reveal_type(conv)  # want: Conv2D[F32, H, W, A, B]
features: Tensor[F32, N, H, W, B] = conv(pictures)  # ok
reveal_type(conv(ax.zeros((8, 1, 5, 5), N, A, H, W)))  # want: Tensor[F32, N, B, H, W]
reveal_type(conv(ax.zeros((5, 5, 1), H, W, A)))  # want: Tensor[F32, H, W, B]
v1 = conv(ax.zeros((8, 5, 5, 1), N, H, W, C))  # want-error: A is not an axis of the input
v2: Tensor[F32, N, H, W, A] = conv(pictures)  # want-error; runs: annotations are not checked at run time
v3 = ax.nn.Conv2D((H, W), A, B, 4, 8, 3, key=key)(features)  # want-error
v4 = conv(ax.transpose(pictures, N, W, H, A))  # ok
reveal_type(ax.nn.Conv1D(W, A, B, 1, 4, 3, key=key)(ax.zeros((8, 5, 1), N, W, A)))  # want: Tensor[F32, N, W, B]
bare: ax.nn.Conv2D = conv  # ok
reveal_type(bare(pictures))  # want: Tensor[F32, N, Any, Any, Any]
reveal_type(ax.nn.Conv((H, W), A, B, 1, 4, 3, key=key)(pictures))  # want: Tensor[Any, *tuple[Any, ...]]

# windowed pooling keeps the axes; global pooling removes some (gradual)
pooled = ax.nn.MaxPool2D((H, W), 2)(features)  # ok
reveal_type(pooled)  # want: Tensor[F32, N, H, W, B]
reveal_type(ax.nn.AvgPool1D(W, 2, stride=1, padding="SAME")(features))  # want: Tensor[F32, N, H, W, B]
reveal_type(ax.nn.MaxPool((H, W), window=[2, 2], stride=(1, 2))(pictures))  # want: Tensor[F32, N, H, W, A]
reveal_type(ax.nn.GlobalAvgPool((H, W))(features))  # want: Tensor[Any, *tuple[Any, ...]]

# a recurrent unit folded over the Time axis of a sequence
seq = ax.zeros((8, 12, 784), N, Time, Pixel)
cell = ax.nn.RNNCell(Pixel, Hidden, 784, 30, key=key)
h0: Tensor[F32, N, Hidden] = cell.init_state({N: 8})  # ok
h = ax.nn.fold(cell, over=Time)(h0, seq)  # ok
last: Tensor[F32, N, Hidden] = h  # ok
steps = ax.nn.scan(cell, over=Time)(h0, seq)  # ok
