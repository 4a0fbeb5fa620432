"""Small models written directly with core ops, for the training tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, final

import equinox as eqx
import jax
import jax.numpy as jnp

import axjax as ax
from axjax.train import Batch, BatchSource, Class, Pixel


@final
class Hidden(ax.Axis): ...


class TinyMLP(eqx.Module):
    """Pixel -> Hidden -> Class with a relu; weights as Tensors, an activation as a field."""

    w1: ax.Tensor[ax.F32, Pixel, Hidden]
    b1: ax.Tensor[ax.F32, Hidden]
    w2: ax.Tensor[ax.F32, Hidden, Class]
    b2: ax.Tensor[ax.F32, Class]
    activation: Any = eqx.field(static=True)

    def __init__(
        self, key: jax.Array, n_in: int = 784, n_hidden: int = 32, n_out: int = 10
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


def sqrt_gate(model: Any, x: Any, y: Any) -> Any:
    """``classify`` plus ``sqrt(mean(x²) · loss)``: finite on an all-zero batch, but its
    gradient there is ``inf · 0`` (NaN), so only the gradient norm shows the problem."""
    loss, metrics = classify(model, x, y)
    gate = ax.sqrt(ax.mean(x * x, (Batch, Pixel)) * loss)
    return loss + gate, metrics


class Poisoned:
    """A batch source that spoils one batch: the one trained at ``step`` (1-based), made
    NaN (``"nan"``) or all zeros (``"zero"``); the same batch each time it is read."""

    def __init__(self, source: BatchSource, step: int, how: Literal["nan", "zero"]) -> None:
        self.source, self.how = source, how
        self.at = divmod(step - 1, len(source))  # (epoch, batch)

    def __len__(self) -> int:
        return len(self.source)

    def epoch(self, epoch: int, start: int = 0) -> Iterator[Any]:
        for i, (x, y) in enumerate(self.source.epoch(epoch, start), start):
            if (epoch, i) == self.at:
                x = ax.Tensor(x.array * (jnp.nan if self.how == "nan" else 0.0), x.axes)
            yield x, y
