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

from collections.abc import Mapping, Sequence

import jax
from jax.sharding import PartitionSpec

from ..core import Axis, AxisError
from ..core._internal import (
    HasType,
    Table,
    axis_name,
    check_axis_label,
    describe,
    pspec,
    rule_names,
)

__all__ = ["MeshAxes", "Table", "check_mesh_axes", "partition_spec", "rules_table", "spec_of"]

#: What a rule maps an axis to: a mesh axis name, a tuple of names, or ``None`` (replicated).
#: After checking (``Table``, core's placement table) each is the tuple of names (maybe none).
MeshAxes = str | tuple[str, ...] | None


def _mesh_names(value: MeshAxes, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
        return value
    raise TypeError(f"{where}: a mesh axis is a string, a tuple of strings or None, got {value!r}")


def rules_table(rules: Mapping[type[Axis], MeshAxes], where: str) -> Table:
    """Check ``rules`` (axis labels to mesh axis names) and normalise each value to a tuple."""
    if not isinstance(rules, Mapping):
        raise TypeError(
            f"{where}: rules are a mapping {{Axis: mesh axis name}}, got {type(rules).__name__}"
        )
    return {
        check_axis_label(label, where): _mesh_names(value, where) for label, value in rules.items()
    }


def check_mesh_axes(table: Table, mesh_axes: Sequence[str], where: str) -> None:
    """Raise the ``AxisError`` of a rule that names a mesh axis not in ``mesh_axes``."""
    for label, names in table.items():
        for name in names:
            if name not in mesh_axes:
                raise AxisError(
                    f"{where}: {axis_name(label)} maps to mesh axis {name!r}, but the mesh "
                    f"has axes ({', '.join(map(repr, mesh_axes))}) (fix the rule's mesh "
                    "axis name)"
                )


def spec_of(
    t: HasType, table: Table, where: str, sizes: Mapping[str, int] | None = None
) -> PartitionSpec:
    """The ``PartitionSpec`` of ``t`` under checked rules; with the mesh's ``sizes``, also
    check that every split axis divides evenly."""
    entries: list[MeshAxes] = []
    owner: dict[str, type[Axis]] = {}
    shape: Sequence[int | None] = getattr(t, "shape", (None,) * len(t.axes))
    ruled = rule_names(table, t.axes)  # an output role Out[E] takes E's rule
    for a, n, names in zip(t.axes, shape, ruled, strict=True):
        for name in names:
            if name in owner:
                raise AxisError(
                    f"{where}: mesh axis {name!r} would shard both "
                    f"{axis_name(owner[name])} and {axis_name(a)} of {describe(t)} "
                    "(a mesh axis can split only one axis of a tensor)"
                )
            owner[name] = a
        if sizes is not None and names:
            _check_divides(a, n, names, sizes, where, t)
        entries.append(None if not names else names[0] if len(names) == 1 else names)
    return pspec(*entries)


def _check_divides(
    a: type[Axis],
    n: int | None,
    names: tuple[str, ...],
    sizes: Mapping[str, int],
    where: str,
    t: HasType,
) -> None:
    check_mesh_axes({a: names}, tuple(sizes), where)
    ways = 1
    for name in names:
        ways *= sizes[name]
    if n is not None and n % ways:
        over = (
            f"mesh axis {names[0]!r}"
            if len(names) == 1
            else f"mesh axes ({', '.join(map(repr, names))})"
        )
        raise AxisError(
            f"{where}: {axis_name(a)}={n} cannot be split {ways} ways over {over} "
            f"in {describe(t)} (make its size a multiple of {ways}, or map "
            f"{axis_name(a)} to None)"
        )


def partition_spec(t: HasType, rules: Mapping[type[Axis], MeshAxes]) -> PartitionSpec:
    """The ``PartitionSpec`` that shards ``t``'s axes as ``rules`` say, in ``t``'s order.

    ``rules`` maps axis labels to a mesh axis name, a tuple of names (split over several
    mesh axes) or ``None`` (replicated). Axes of ``t`` not in ``rules`` are replicated, and
    rules for axes ``t`` lacks are ignored, so one mapping serves a whole model
    (``jax.tree.map(lambda t: ax.partition_spec(t, rules), params, is_leaf=...)``).
    Inside ``jax.shard_map`` it gives the ``in_specs`` / ``out_specs``.

    Args:
        t: a Tensor (or anything with ``.axes``: a graph node, a ``TensorType``).
        rules: axis label -> mesh axis (or axes, or ``None``).

    Returns:
        A ``jax.sharding.PartitionSpec`` with one entry per axis of ``t``.

    Raises:
        TypeError: a key is not an axis label or a value is not a mesh axis name.
        AxisError: one mesh axis would shard two axes of ``t`` (the message names both),
            or, with a mesh set (``ax.axis_rules``, ``jax.set_mesh``), a rule names a mesh
            axis that mesh lacks.

    Example:
        >>> ax.partition_spec(ax.zeros((8, 4), Batch, Hidden), {Batch: "data"})
        P('data', None)
    """
    table = rules_table(rules, "partition_spec")
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.axis_types:  # a mesh is set: the rules' mesh axes must be its own
        check_mesh_axes(table, tuple(mesh.axis_names), "partition_spec")
    return spec_of(t, table, "partition_spec")
