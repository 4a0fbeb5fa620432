"""LoRA (issue 35): a wrapped layer has the base layer's call type in every checker, and
``ax.nn.lora`` / ``merge_lora`` / ``load_lora`` keep the model's type."""

from typing import final, reveal_type

import equinox as eqx
import jax
from axes import N

import axjax as ax
from axjax import F32, Tensor


@final
class Pixel(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


@final
class Class(ax.Axis): ...


class Net(eqx.Module):
    fc: ax.nn.Affine[F32, Pixel, Hidden]
    head: ax.nn.Linear[F32, Hidden, Class]

    def __init__(self, key: jax.Array) -> None:
        self.fc = ax.nn.Affine(Pixel, Hidden, 3, 5, key=key)
        self.head = ax.nn.Linear(Hidden, Class, 5, 2, key=key)

    def __call__(self, x: Tensor[F32, N, Pixel]) -> Tensor[F32, N, Class]:
        return self.head(self.fc(x))


key = jax.random.key(0)
x = ax.zeros((4, 3), N, Pixel)
fc = ax.nn.Affine(Pixel, Hidden, 3, 5, key=key)
adapted = ax.nn.LoRA(fc, rank=2, key=key)
reveal_type(adapted)  # want: LoRA[F32, Pixel, Hidden]
reveal_type(adapted(x))  # want: Tensor[F32, N, Hidden]
reveal_type(adapted.lora_a)  # want: Tensor[F32, Rank, Pixel]
bad = adapted(ax.zeros((4, 5), N, Hidden))  # want-error[mypy,pyright]; want-error[plugin]
reveal_type(adapted.merge())  # want: Affine[F32, Pixel, Hidden] | Linear[F32, Pixel, Hidden]

lin = ax.nn.Linear(Hidden, Class, 5, 2, key=key)
head = ax.nn.LoRA(lin, key=key)
reveal_type(head)  # want: LoRA[F32, Hidden, Class]
reveal_type(head(adapted(x)))  # want: Tensor[F32, N, Class]

net = Net(key)
tuned = ax.nn.lora(net, where="fc", rank=2, key=key)
reveal_type(tuned)  # want: Net
reveal_type(tuned(x))  # want: Tensor[F32, N, Class]
reveal_type(ax.nn.merge_lora(tuned))  # want: Net
