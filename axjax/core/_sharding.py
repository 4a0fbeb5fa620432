"""Sharding by axis name: map axis labels to mesh axes, get a ``PartitionSpec``.

A ``jax.sharding.PartitionSpec`` lists, position by position, which mesh axis splits each
dimension of an array. With named axes the rule is written once, by meaning
(``{Batch: "data", Hidden: "model"}``), and :func:`partition_spec` puts each mesh axis at
the position its label has in a particular tensor::

    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    spec = ax.partition_spec(x, {Batch: "data"})           # PartitionSpec('data', None)
    x = jax.device_put(x, jax.sharding.NamedSharding(mesh, spec))
"""

from __future__ import annotations

from collections.abc import Mapping

from jax.sharding import PartitionSpec

from ._axis import Axis, axis_name, check_axis_label
from ._errors import HasType, describe

__all__ = ["partition_spec"]

MeshAxes = str | tuple[str, ...] | None


def _mesh_names(value: MeshAxes) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
        return value
    raise TypeError(
        f"partition_spec: a mesh axis is a string, a tuple of strings or None, got {value!r}"
    )


def partition_spec(t: HasType, rules: Mapping[type[Axis], MeshAxes]) -> PartitionSpec:
    """The ``PartitionSpec`` that shards ``t``'s axes as ``rules`` say, in ``t``'s order.

    ``rules`` maps axis labels to a mesh axis name, a tuple of names (split over several
    mesh axes) or ``None`` (replicated). Axes of ``t`` not in ``rules`` are replicated, and
    rules for axes ``t`` lacks are ignored, so one mapping serves a whole model
    (``jax.tree.map(lambda t: ax.partition_spec(t, rules), params, is_leaf=...)``).

    Args:
        t: a Tensor (or anything with ``.axes``: a graph node, a ``TensorType``).
        rules: axis label -> mesh axis (or axes, or ``None``).

    Returns:
        A ``jax.sharding.PartitionSpec`` with one entry per axis of ``t``.

    Raises:
        TypeError: a key is not an axis label, a value is not a mesh axis name, or one
            mesh axis would shard two axes of ``t``.

    Example:
        >>> ax.partition_spec(ax.zeros((8, 4), Batch, Hidden), {Batch: "data"})
        P('data', None)
    """
    table: dict[type[Axis], tuple[str, ...]] = {}
    for label, value in rules.items():
        table[check_axis_label(label, "partition_spec")] = _mesh_names(value)
    entries: list[MeshAxes] = []
    owner: dict[str, type[Axis]] = {}
    for a in t.axes:
        names = table.get(a, ())
        for name in names:
            if name in owner:
                raise TypeError(
                    f"partition_spec: mesh axis {name!r} would shard both "
                    f"{axis_name(owner[name])} and {axis_name(a)} of {describe(t)} "
                    "(a mesh axis can split only one axis of a tensor)"
                )
            owner[name] = a
        entries.append(None if not names else names[0] if len(names) == 1 else names)
    return PartitionSpec(*entries)  # type: ignore[no-untyped-call, unused-ignore]
