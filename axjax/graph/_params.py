"""Moving models between eager values and graph Params.

``ax.as_params(model)`` turns every floating-point Tensor of a pytree (an Equinox model of
``ax.nn`` layers) into a :class:`~axjax.Param` named by its path, so calling the model on an
``ax.Input`` builds a graph whose Params are the model's weights. ``ax.as_values(model,
step.params)`` turns them back into Tensors, holding the trained values.

Example:
    >>> model = ax.as_params(ax.nn.Affine(In, Out, 2, 1, key=key))
    >>> loss = ax.mean(ax.sum(ax.square(model(x) - y), Out), Batch)
    >>> step = ax.compile_step(loss, optax.adam(0.1), inputs=[x, y])
    >>> trained = ax.as_values(model, step.params)   # an eager Affine again
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import jax

from ..core import Tensor
from ..core._internal import PyTree, is_floating
from ._nodes import Node, Param

__all__ = ["as_params", "as_values"]

T = TypeVar("T")


def as_params(tree: T, prefix: str = "") -> T:
    """Replace each floating-point Tensor in ``tree`` by a Param named by its path.

    Params already in the tree are kept; integer and Bool Tensors, arrays and other
    leaves are left alone.

    Example:
        >>> layer = ax.as_params(ax.nn.Affine(In, Out, 2, 1, key=key))
        >>> layer.weight
        Param weight: Tensor[F32, Out=1, In=2]
    """

    def swap(path: tuple[object, ...], leaf: object) -> object:
        if isinstance(leaf, Tensor) and not isinstance(leaf, Node) and is_floating(leaf.dtype):
            name = jax.tree_util.keystr(path, simple=True, separator=".")
            return Param(leaf, name=prefix + name if name else prefix or None)
        return leaf

    out: T = jax.tree_util.tree_map_with_path(swap, tree, is_leaf=lambda t: isinstance(t, Tensor))
    return out


def as_values(tree: T, params: PyTree = None) -> T:
    """Replace each Param in ``tree`` by its value, or by the value it has in ``params``.

    Args:
        tree: a pytree holding Params (a model made by :func:`as_params`).
        params: newer values: ``step.params``, any pytree of Params, or ``{param: tensor}``.

    Example:
        >>> trained = ax.as_values(model, step.params)
    """
    newer: dict[Any, Any] = {}
    if isinstance(params, Mapping):
        newer.update(params)
    elif params is not None:
        for p in jax.tree_util.tree_leaves(params, is_leaf=lambda t: isinstance(t, Param)):
            if isinstance(p, Param):
                newer[p] = p.value

    def swap(leaf: object) -> object:
        return newer.get(leaf, leaf.value) if isinstance(leaf, Param) else leaf

    out: T = jax.tree_util.tree_map(swap, tree, is_leaf=lambda t: isinstance(t, Param))
    return out
