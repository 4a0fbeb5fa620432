"""The paper's layers from axjax.nn: Affine (typed by its axes), Conv2D and a recurrent unit
folded over a sequence (gradual layers: the checkers accept them, the ops inside check)."""

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

# Affine[In, Out]: Tensor[D, *B, In] -> Tensor[D, *B, Out]
layer = ax.nn.Affine(Pixel, Hidden, 784, 30, key=key)
reveal_type(layer)  # want: Affine[Pixel, Hidden]
reveal_type(layer(images))  # want: Tensor[F32, N, Hidden]
hidden: Tensor[F32, N, Hidden] = layer(images)  # ok
a1 = layer(ax.zeros((8, 30), N, Hidden))  # want-error
a2: Tensor[F32, Hidden, N] = layer(images)  # want-error
mlp = ax.nn.MLP(Pixel, C, 784, 10, hidden={Hidden: 30}, key=key)
reveal_type(mlp(images))  # want: Tensor[F32, N, C]

# convolution: the op is exact under the plugin; the layer is gradual in every checker
pictures = ax.zeros((8, 5, 5, 1), N, H, W, A)
kernel = ax.zeros((3, 3, 1, 4), H, W, A, B)
reveal_type(ax.conv(pictures, kernel, (H, W)))  # want[plugin]: Tensor[F32, N, H, W, B]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
k1 = ax.conv(pictures, kernel, (H, C))  # want-error[plugin]: Cannot apply Conv; miss[mypy,pyright]
k2 = ax.max_pool(pictures, (H, W), window=2)  # ok
reveal_type(k2)  # want: Tensor[F32, N, H, W, A]
conv = ax.nn.Conv2D((H, W), A, B, 1, 4, 3, key=key)
features: Tensor[F32, N, H, W, B] = conv(pictures)  # ok
pooled = ax.nn.MaxPool2D((H, W), 2)(features)  # ok

# a recurrent unit folded over the Time axis of a sequence
seq = ax.zeros((8, 12, 784), N, Time, Pixel)
cell = ax.nn.RNNCell(Pixel, Hidden, 784, 30, key=key)
h0: Tensor[F32, N, Hidden] = cell.init_state({N: 8})  # ok
h = ax.nn.fold(cell, over=Time)(h0, seq)  # ok
last: Tensor[F32, N, Hidden] = h  # ok
steps = ax.nn.scan(cell, over=Time)(h0, seq)  # ok
