"""FSDP's gather for a scan: the stacked axis of a layer stack whole on every device.

``{Layer: "data"}`` as a parameter rule splits a ``LayerStack``'s stacked parameters over
their leading ``Layer`` axis (FSDP over layers). On a mesh with Explicit axes JAX's scan
takes one slice per step only of an unsplit leading axis, so ``axjax.nn.LayerStack``
gathers the layers (:func:`unsplit_leading`) before its loop. On Auto meshes XLA
partitions the loop itself and nothing changes.
"""

from __future__ import annotations

import jax
from jax.sharding import AxisType

from ..core import Tensor
from ..core._internal import PyTree, is_tensor, pspec, reshard

__all__ = ["unsplit_leading"]


def unsplit_leading(tree: PyTree) -> PyTree:
    """``tree`` with every Tensor's leading axis whole on every device where a mesh with
    Explicit axes splits it (a ``jax.sharding.reshard``); other leaves as they are.

    Example:
        >>> layers = unsplit_leading(stack.layers)  # Layer no longer split over "data"
    """

    def one(leaf: object) -> object:
        if not isinstance(leaf, Tensor):
            return leaf
        sharding = getattr(jax.typeof(leaf.array), "sharding", None)
        mesh = getattr(sharding, "mesh", None)
        spec = getattr(sharding, "spec", None)
        if (
            mesh is None
            or not spec
            or spec[0] is None
            or AxisType.Explicit not in (mesh.axis_types or ())
        ):
            return leaf
        unsplit = pspec(None, *spec[1:])
        whole = reshard(leaf.array, unsplit)
        return Tensor(whole, leaf.axes)

    return jax.tree.map(one, tree, is_leaf=is_tensor)
