"""Small models written directly with core ops, for the training tests."""

from __future__ import annotations

from typing import Any, final

import equinox as eqx
import jax

import axjax as ax
from axjax.train import Batch, Class, Pixel


@final
class Hidden(ax.Axis): ...


class TinyMLP(eqx.Module):
    """Pixel -> Hidden -> Class with a relu; weights as Tensors, an activation as a field."""

    w1: ax.Tensor[ax.F32, Pixel, Hidden]
    b1: ax.Tensor[ax.F32, Hidden]
    w2: ax.Tensor[ax.F32, Hidden, Class]
    b2: ax.Tensor[ax.F32, Class]
    activation: Any = eqx.field(static=True)

    def __init__(self, key: jax.Array, n_in: int = 784, n_hidden: int = 32, n_out: int = 10
                 ) -> None:
        k1, k2 = jax.random.split(key)
        self.w1 = ax.normal(k1, (n_in, n_hidden), Pixel, Hidden, stddev=(2 / n_in) ** 0.5)
        self.b1 = ax.zeros((n_hidden,), Hidden)
        self.w2 = ax.normal(k2, (n_hidden, n_out), Hidden, Class, stddev=n_hidden**-0.5)
        self.b2 = ax.zeros((n_out,), Class)
        self.activation = ax.relu

    def __call__(self, x: Any) -> Any:
        h = ax.contract(x, self.w1)
        h = self.activation(h + ax.broadcast(self.b1, h))
        o = ax.contract(h, self.w2)
        return o + ax.broadcast(self.b2, o)


def classify(model: Any, x: Any, y: Any) -> Any:
    """Mean softmax cross-entropy over the batch, with accuracy as a metric."""
    logits = model(x)
    loss = ax.mean(ax.train.softmax_cross_entropy(logits, y, Class), Batch)
    return loss, {"accuracy": ax.train.accuracy(logits, y, Class)}
