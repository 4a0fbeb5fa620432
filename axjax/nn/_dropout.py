"""``Dropout``: zero entries at random while training; the identity in inference."""

from __future__ import annotations

from typing import TypeVar, TypeVarTuple

import equinox as eqx
import jax

from ..core import Bool, DType, Tensor
from ..ops import where
from ._registry import register_layer
from ._util import is_symbolic

__all__ = ["Dropout"]

D = TypeVar("D", bound=DType)
Axes = TypeVarTuple("Axes")


@register_layer(typed="signature")
class Dropout(eqx.Module):
    """Zero each entry with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    Training needs a PRNG ``key``. In inference (``inference=True`` on the layer, set for a
    whole model with ``eqx.nn.inference_mode(model)``, or passed to the call) the layer is
    the identity and needs no key.

    Example:
        >>> drop = ax.nn.Dropout(0.5)
        >>> drop(h, key=jax.random.key(1))      # training: half the entries zeroed
        >>> drop(h, inference=True)             # evaluation: h unchanged
    """

    p: float = eqx.field(static=True)
    inference: bool

    def __init__(self, p: float = 0.5, inference: bool = False) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be a probability in [0, 1], got {p}")
        self.p = float(p)
        self.inference = inference

    def __call__(
        self, x: Tensor[D, *Axes], *, key: jax.Array | None = None, inference: bool | None = None
    ) -> Tensor[D, *Axes]:
        """Apply dropout to ``x`` (any axes)."""
        off = self.inference if inference is None else inference
        if type(off) is not bool:
            raise TypeError(
                "Dropout: the inference flag is a traced value; jit the model "
                "with eqx.filter_jit or partition it with eqx.partition so that "
                "boolean flags stay static"
            )
        if off or self.p == 0.0:
            return x
        if is_symbolic(x):
            raise TypeError(
                "Dropout: a graph input has no values to drop yet; build graphs "
                "with inference=True (or apply dropout to concrete Tensors)"
            )
        if key is None:
            raise ValueError(
                "Dropout: training mode needs a PRNG key (call it with key=...), "
                "or pass inference=True"
            )
        keep: Tensor[Bool, *Axes] = Tensor(jax.random.bernoulli(key, 1.0 - self.p, x.shape), x.axes)
        scale = 0.0 if self.p == 1.0 else 1.0 / (1.0 - self.p)
        return where(keep, x * scale, 0.0)
