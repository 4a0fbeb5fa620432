"""Typed layers (issue 12): an MNIST MLP written with Affine, Linear, MLP and Sequential.

A layer's type names its dtype and axes (``Affine[F32, Pixel, Hidden]``), inferred from the
constructor's arguments. Its input axis may sit anywhere in the input (the plugin runs the
layer's own rule; pyright's overloads cover every position up to rank 5); the input's dtype
is the layer's.
"""

from typing import TypeVarTuple, final, reveal_type

import jax
import numpy as np
from axes import N, M

import axjax as ax
from axjax import BF16, F32, Tensor


@final
class Pixel(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


@final
class Hidden2(ax.Axis): ...


@final
class Class(ax.Axis): ...


key = jax.random.key(0)
images = ax.zeros((4, 4), N, Pixel)
pixels_first = ax.zeros((4, 4), Pixel, N)
grid = ax.zeros((4, 4, 4), M, Pixel, N)

# the constructor infers the type; the dtype is F32 unless dtype= says otherwise
fc1 = ax.nn.Affine(Pixel, Hidden, 4, 4, key=key)
reveal_type(fc1)  # want: Affine[F32, Pixel, Hidden]
fc2 = ax.nn.Affine(Hidden, Class, 4, 4, key=key)
fc_half = ax.nn.Affine(Pixel, Hidden, 4, 4, dtype=BF16, key=key)
reveal_type(fc_half)  # want: Affine[BF16, Pixel, Hidden]
proj = ax.nn.Linear(Hidden, Hidden2, 4, 4, key=key)
reveal_type(proj)  # want: Linear[F32, Hidden, Hidden2]
mlp = ax.nn.MLP(Pixel, Class, 4, 4, hidden={Hidden: 4, Hidden2: 4}, key=key)
reveal_type(mlp)  # want: MLP[F32, Pixel, Class]

# correct calls: the input axis anywhere, the other axes kept in order, Out last
h: Tensor[F32, N, Hidden] = fc1(images)  # ok
reveal_type(fc2(ax.relu(h)))  # want: Tensor[F32, N, Class]
reveal_type(fc1(pixels_first))  # want: Tensor[F32, N, Hidden]
reveal_type(fc1(grid))  # want: Tensor[F32, M, N, Hidden]
reveal_type(proj(h))  # want: Tensor[F32, N, Hidden2]
reveal_type(mlp(images))  # want: Tensor[F32, N, Class]
reveal_type(fc_half(ax.astype(images, BF16)))  # want: Tensor[BF16, N, Hidden]
logits = fc2(ax.relu(fc1(images)))  # ok
loss = ax.mean(ax.sum(logits * logits, Class), N)  # ok
u = fc1(ax.tensor(np.zeros((4, 4), np.float32), N, Pixel))  # ok

# a generic helper over any leading axes
Bs = TypeVarTuple("Bs")


def classify(layer: ax.nn.Affine[F32, Hidden, Class], x: Tensor[F32, *Bs, Hidden]
             ) -> Tensor[F32, *Bs, Class]:
    return layer(x)  # ok


reveal_type(classify(fc2, h))  # want: Tensor[F32, N, Class]

# mistakes
e1 = fc2(images)  # want-error: Hidden is not an axis of the input
e2 = fc1(h)  # want-error: Pixel is not an axis of the input
e3 = fc_half(images)  # want-error[plugin]: the input is F32, the layer's parameters BF16; want-error[mypy,pyright]
e4 = fc1(ax.astype(images, BF16))  # want-error[plugin]: the input is BF16, the layer's parameters F32; want-error[mypy,pyright]
e5: Tensor[F32, Hidden, N] = fc1(images)  # want-error; runs: an annotation is not checked at run time
e6 = fc1(ax.zeros((4, 4), N, Hidden))  # want-error: Pixel is not an axis of the input
e7 = mlp(h)  # want-error: Pixel is not an axis of the input
e8 = proj(images)  # want-error: Hidden is not an axis of the input
e9 = fc1(ax.zeros((4, 4, 4), N, Pixel, Hidden))  # want-error[plugin]: the input already has axis Hidden, which the layer produces; miss[mypy,pyright]: the overloads cannot say "Out not in the input"
e10 = fc2(fc1(images)) + fc1(images)  # want-error: axes differ

# Sequential: the plugin checks the chain, layer by layer, and types the result
model = ax.nn.Sequential([fc1, ax.relu, fc2])
reveal_type(model(images))  # want[plugin]: Tensor[F32, N, Class]; want[mypy,pyright]: Any
out: Tensor[F32, N, Class] = model(images)  # ok
broken = ax.nn.Sequential([fc1, ax.relu, fc1])
s1 = broken(images)  # want-error[plugin]: Pixel is not an axis of the input; miss[mypy,pyright]: Sequential's call is Any without the plugin
s2: Tensor[F32, Class, N] = model(images)  # want-error[plugin]; miss[mypy,pyright]: Any; runs: an annotation is not checked at run time
s3 = model(ax.astype(images, BF16))  # want-error[plugin]: the input is BF16; miss[mypy,pyright]

# mixed precision: a cast layer (or model) is typed in its new dtype
half = ax.nn.cast(fc1, BF16)
reveal_type(half)  # want: Affine[BF16, Pixel, Hidden]
xb = ax.nn.cast(images, BF16)
reveal_type(xb)  # want: Tensor[BF16, N, Pixel]
reveal_type(half(xb))  # want: Tensor[BF16, N, Hidden]
p1 = fc1(xb)  # want-error[plugin]: the input is BF16, the layer's parameters F32; want-error[mypy,pyright]
p2 = half(images)  # want-error[plugin]: the input is F32, the layer's parameters BF16; want-error[mypy,pyright]
half_model = ax.nn.cast(model, BF16)
reveal_type(half_model(xb))  # want[plugin]: Tensor[BF16, N, Class]; want[mypy,pyright]: Any
p3 = half_model(images)  # want-error[plugin]: the input is F32, the layer's parameters BF16; miss[mypy,pyright]: Sequential's call is Any without the plugin
