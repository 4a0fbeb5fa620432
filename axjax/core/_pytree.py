"""Pytrees whose leaves are Tensors kept whole (a state, a batch of inputs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax

from ._axis import Axis
from ._jax_typed import PyTree
from ._tensor import AnyTensor, Tensor

__all__ = ["flatten", "is_tensor", "unflatten", "wrap"]


def is_tensor(x: object) -> bool:
    """``True`` for a Tensor (or graph node): the leaves of a state or input pytree."""
    return isinstance(x, Tensor)


def wrap(array: jax.Array, axes: tuple[type[Axis], ...]) -> AnyTensor:  # or a tracer
    """A Tensor from an array and its axes (the public, checked constructor)."""
    return Tensor(array, axes)


def flatten(tree: PyTree) -> tuple[list[Any], Any]:  # Any: the leaves, a PyTreeDef
    """Leaves (Tensors kept whole) and the structure of a pytree."""
    flat: tuple[list[Any], Any] = jax.tree_util.tree_flatten(tree, is_leaf=is_tensor)
    return flat


def unflatten(treedef: Any, leaves: Sequence[Any]) -> PyTree:
    """The inverse of :func:`flatten`."""
    return jax.tree_util.tree_unflatten(treedef, list(leaves))
