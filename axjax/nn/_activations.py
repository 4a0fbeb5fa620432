"""Activation functions, as functions of Tensors (any axes in, the same axes out).

The primitives (``relu``, ``gelu``, ``silu``, ``sigmoid``, ``tanh``, ``softplus``,
``softmax``, ``log_softmax``) are the core ops, re-exported here next to the layers as
``jax.nn`` has them; the others are compositions of core ops, so they need no backward of
their own.

Example:
    >>> model = ax.nn.Sequential([layer1, ax.nn.leaky_relu, layer2])
"""

from __future__ import annotations

from typing import TypeVar, TypeVarTuple

from ..core import DType, Tensor
from ..core._internal import finite_float, public_call
from ..ops import expm1, gelu, log_softmax, relu, sigmoid, silu, softmax, softplus, tanh, where

__all__ = [
    "relu",
    "gelu",
    "silu",
    "swish",
    "sigmoid",
    "tanh",
    "softplus",
    "softmax",
    "log_softmax",
    "leaky_relu",
    "elu",
    "log_sigmoid",
    "identity",
]

D = TypeVar("D", bound=DType)
Axes = TypeVarTuple("Axes")

swish = silu


@public_call()
def leaky_relu(x: Tensor[D, *Axes], negative_slope: float = 0.01) -> Tensor[D, *Axes]:
    """``x`` where positive, ``negative_slope * x`` elsewhere.

    Example:
        >>> ax.nn.leaky_relu(h, 0.2)
    """
    slope = finite_float("leaky_relu", "negative_slope", negative_slope)
    return where(x > 0.0, x, x * slope)


@public_call()
def elu(x: Tensor[D, *Axes], alpha: float = 1.0) -> Tensor[D, *Axes]:
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere (no overflow for large x).

    Example:
        >>> ax.nn.elu(h)
    """
    alpha = finite_float("elu", "alpha", alpha)
    return where(x > 0.0, x, expm1(-relu(-x)) * alpha)  # no overflow


@public_call()
def log_sigmoid(x: Tensor[D, *Axes]) -> Tensor[D, *Axes]:
    """``log(sigmoid(x)) = -softplus(-x)``, stable for large ``|x|``.

    Example:
        >>> ax.nn.log_sigmoid(logits)
    """
    return -softplus(-x)


def identity(x: Tensor[D, *Axes]) -> Tensor[D, *Axes]:
    """``x`` itself (a placeholder activation)."""
    return x
