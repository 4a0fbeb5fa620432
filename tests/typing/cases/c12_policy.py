"""Mixed precision (issue 12): a policy's casts are typed in its dtypes.

``ax.nn.Policy.mixed(ax.BF16)`` is a ``Policy[F32, BF16, F32]``: its ``cast_to_compute`` turns
a ``Tensor[F32, ...]`` into a ``Tensor[BF16, ...]`` and an ``Affine[F32, In, Out]`` into an
``Affine[BF16, In, Out]``, so a bf16 activation into a layer the policy did not cast is an
error, and into one it cast is not.
"""

from typing import Any, final, reveal_type

import jax
from axes import N

import axjax as ax
from axjax import BF16, F16, F32, Tensor


@final
class Pixel(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


@final
class Time(ax.Axis): ...


key = jax.random.key(0)
images = ax.zeros((4, 4), N, Pixel)
tokens = ax.zeros((4, 4), N, Time, dtype=ax.I32)
fc = ax.nn.Affine(Pixel, Hidden, 4, 4, key=key)
norm = ax.nn.LayerNorm(Pixel, 4)
conv = ax.nn.Conv1D(Time, Pixel, Hidden, 3, 4, 4, key=key)
cell = ax.nn.LSTMCell(Pixel, Hidden, 4, 4, key=key)

policy = ax.nn.Policy.mixed(ax.BF16)
reveal_type(policy)  # want: Policy[F32, BF16, F32]
half_policy = ax.nn.Policy.mixed(F16)
reveal_type(half_policy)  # want: Policy[F32, F16, F32]
explicit = ax.nn.Policy(param=F32, compute=BF16, output=F32)
reveal_type(explicit)  # want: Policy[F32, BF16, F32]
reveal_type(ax.nn.Policy(compute=BF16))  # want[mypy,plugin]: Policy[Any, BF16, Any]; want[pyright]: Policy[F32, BF16, F32]
default = ax.nn.Policy.mixed()
reveal_type(default)  # want: Policy[F32, BF16, F32]

# a tensor through the policy: its dtype is the policy's
xb = policy.cast_to_compute(images)
reveal_type(xb)  # want: Tensor[BF16, N, Pixel]
reveal_type(half_policy.cast_to_compute(images))  # want: Tensor[F16, N, Pixel]
reveal_type(policy.cast_to_param(xb))  # want: Tensor[F32, N, Pixel]
reveal_type(policy.cast_to_output(xb))  # want: Tensor[F32, N, Pixel]
reveal_type(explicit.cast_to_compute(images))  # want: Tensor[BF16, N, Pixel]
reveal_type(policy.cast_to_compute(tokens))  # want: Tensor[I32, N, Time]

# a layer through the policy: its dtype too
fcb = policy.cast_to_compute(fc)
reveal_type(fcb)  # want: Affine[BF16, Pixel, Hidden]
reveal_type(fcb(xb))  # want: Tensor[BF16, N, Hidden]
reveal_type(policy.cast_to_compute(norm)(xb))  # want: Tensor[BF16, N, Pixel]
reveal_type(policy.cast_to_compute(conv))  # want[plugin,pyright]: Conv1D[BF16, Time, Pixel, Hidden]
reveal_type(policy.cast_to_compute(cell))  # want[plugin,pyright]: LSTMCell[BF16, Pixel, Hidden]
reveal_type(policy.cast_to_param(fcb))  # want: Affine[F32, Pixel, Hidden]
y32: Tensor[F32, N, Hidden] = policy.cast_to_output(fcb(xb))
loss = ax.mean(policy.cast_to_output(ax.sum(fcb(xb), Hidden)), N)
reveal_type(loss)  # want: Tensor[F32]

# the policy casts the activation, not the layer: dtypes differ
w1 = fc(xb)  # want-error[plugin]: the input is BF16, the layer's parameters F32; want-error[mypy,pyright]
w2 = fcb(images)  # want-error[plugin]: the input is F32, the layer's parameters BF16; want-error[mypy,pyright]
w3 = norm(policy.cast_to_compute(images))  # want-error[plugin]: the input is BF16, the layer's parameters F32; want-error[pyright]; miss[mypy]: plain mypy does not tell the dtypes apart through the norm's self-typed overloads
w4 = fcb(xb) + images  # want-error: dtypes BF16 and F32 differ; want-error[mypy,pyright]
w5 = policy.cast_to_param(fcb)(xb)  # want-error[plugin]: the input is BF16, the layer's parameters F32; want-error[mypy,pyright]
w6: Tensor[BF16, N, Hidden] = policy.cast_to_output(fcb(xb))  # want-error; runs: annotations are not checked at run time
w7 = half_policy.cast_to_compute(fc)(xb)  # want-error[plugin]: the input is BF16, the layer's parameters F16; want-error[mypy,pyright]


# a model as the training step sees it: cast by the policy, run on the cast batch
def step(p: ax.nn.Policy[F32, BF16, F32], layer: ax.nn.Affine[F32, Pixel, Hidden],
         x: Tensor[F32, N, Pixel]) -> Tensor[F32]:
    h = p.cast_to_compute(layer)(p.cast_to_compute(x))
    return p.cast_to_output(ax.mean(ax.sum(h, Hidden), N))


reveal_type(step(policy, fc, images))  # want: Tensor[F32]


# a bare annotation is any policy: its casts are gradual
def run_any(p: ax.nn.Policy, x: Tensor[F32, N, Pixel]) -> Tensor[Any, N, Pixel]:
    return p.cast_to_compute(x)


reveal_type(run_any(policy, images))  # want: Tensor[Any, N, Pixel]
reveal_type(policy.cast_to_compute({"x": images}))  # want: Any

# a Sequential and a tuple of layers and tensors: the plugin casts each part
model = ax.nn.Sequential([fc, ax.relu])
reveal_type(policy.cast_to_compute(model)(xb))  # want[plugin]: Tensor[BF16, N, Hidden]; want[mypy,pyright]: Any
layer_b, batch_b = policy.cast_to_compute((fc, images))
reveal_type(layer_b(batch_b))  # want[plugin]: Tensor[BF16, N, Hidden]; want[mypy,pyright]: Any
w8 = policy.cast_to_compute(model)(images)  # want-error[plugin]: the input is F32, the layer's parameters BF16; miss[mypy,pyright]: a Sequential, a tuple: Any after the cast without the plugin
