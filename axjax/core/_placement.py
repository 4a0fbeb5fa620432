"""How ops run on sharded operands: Explicit meshes and ``jax.shard_map``'s varying axes.

Two things JAX 0.10.2 asks of every op that axjax lowers (each op is a ``jax.custom_vjp``):

- **Explicit mesh axes** (``jax.make_mesh``'s default): an array's type carries its
  sharding, and a contraction over a sharded axis has no defined output sharding. axjax
  knows each result axis by name, so it runs the op's forward under
  ``jax.sharding.auto_axes`` with the output sharded by name: by the current compute rules
  (:func:`axjax.axis_rules` sets them in core/_context.py) when there are any, else each
  result axis keeps the mesh axes it had in the operands. The backward runs the same way
  with the cotangents sharded as their primals, as ``custom_vjp`` requires. This is the
  *layout step* of lowering (core/_lower.py): :class:`Layout`, or :data:`UNPLACED` (the
  identity) when no Explicit mesh shards an operand.
- **``shard_map`` with ``check_vma=True``**: a value's type says over which mesh axes it
  varies. The operands are cast to their common varying axes before the ``custom_vjp``
  (JAX transposes the cast into the ``psum`` the gradient needs), and each cotangent is
  cast to its primal's varying axes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast, final

import jax
import jax.core  # jax.core.Tracer: imported by name for type checkers
import numpy as np
from jax.sharding import AbstractMesh, AxisType, PartitionSpec

from ._axis import Axis
from ._context import Table
from ._dtype import is_inexact
from ._jax_typed import pspec
from ._protocols import Arrays, Cotangents, Operand
from ._roles import rule_names
from ._tensor import Tensor
from ._tensor_type import TensorType

__all__ = ["UNPLACED", "Layout", "Unplaced", "explicit_layout", "match_varying", "cast_varying"]

_get_abstract_mesh = jax.sharding.get_abstract_mesh
_EXPLICIT = AxisType.Explicit
_Tracer = jax.core.Tracer
#: an op's result type(s)
Out = TensorType | tuple[TensorType, ...]
#: ``run(xs, out, *args)``: an op's forward on its operand Tensors, to its result arrays
Forward = Callable[..., Arrays]
#: ``run(dy, y, xs, *args)``: an op's backward, to one cotangent array per operand
Backward = Callable[..., Cotangents]
#: one entry of a sharding spec: no mesh axis, one, or several
_Entry = str | tuple[str, ...] | None
R = TypeVar("R")


def _spec(a: jax.Array) -> tuple[_Entry, ...]:
    """The sharding spec of an array or tracer, one entry per dimension."""
    sharding = getattr(jax.typeof(a), "sharding", None)
    spec = getattr(sharding, "spec", ())
    entries: tuple[_Entry, ...] = tuple(spec) + (None,) * (a.ndim - len(spec))
    return entries


def _names(entry: _Entry) -> tuple[str, ...]:
    if entry is None:
        return ()
    return (entry,) if isinstance(entry, str) else tuple(entry)


@final
class Unplaced:
    """The layout step where no Explicit mesh shards an operand: the identity."""

    __slots__ = ()

    def forward(self, run: Forward, xs: Sequence[Operand], out: Out, *args: object) -> Arrays:
        return run(xs, out, *args)

    def backward(
        self, run: Backward, dy: Arrays, y: Arrays, xs: Sequence[Operand], *args: object
    ) -> Cotangents:
        return run(dy, y, xs, *args)


UNPLACED = Unplaced()


@final
class Layout:
    """The layout step on an Explicit mesh: the operands' shardings by axis, and the rules."""

    __slots__ = ("mesh", "by_axis", "rules", "entered")

    def __init__(
        self, mesh: AbstractMesh, by_axis: Table, rules: Table | None = None, entered: bool = True
    ) -> None:
        self.mesh = mesh
        self.by_axis = by_axis
        self.rules = rules  # the compute rules when the op was applied (core/_context.py)
        self.entered = entered  # False: the mesh came from the operands, enter it to run

    def forward(self, run: Forward, xs: Sequence[Operand], out: Out, *args: object) -> Arrays:
        """``run(xs, out, *args)`` with its results sharded by axis name (:meth:`spec`)."""
        in_axes = [x._axes for x in xs]

        def arrays_fn(*arrays: jax.Array) -> Arrays:
            ws = [Tensor._wrap(a, ax_) for a, ax_ in zip(arrays, in_axes, strict=True)]
            return run(ws, out, *args)

        return self.run(arrays_fn, self.out_sharding(out), *[x._array for x in xs])

    def backward(
        self, run: Backward, dy: Arrays, y: Arrays, xs: Sequence[Operand], *args: object
    ) -> Cotangents:
        """``run(dy, y, xs, *args)`` with each floating cotangent sharded as its primal, as
        ``jax.custom_vjp`` requires (a non-floating operand gets no gradient: float0)."""
        in_axes = [x._axes for x in xs]
        floating = [i for i, x in enumerate(xs) if is_inexact(x._array)]

        def arrays_fn(dy: Arrays, y: Arrays, *arrays: jax.Array) -> Cotangents:
            ws = [Tensor._wrap(a, ax_) for a, ax_ in zip(arrays, in_axes, strict=True)]
            gs = run(dy, y, ws, *args)
            return tuple(gs[i] for i in floating)

        specs = tuple(self.primal_spec(xs[i]._array) for i in floating)
        got = self.run(arrays_fn, specs, dy, y, *[x._array for x in xs])
        filled: list[jax.Array | np.ndarray[Any, np.dtype[Any]]] = [
            np.zeros(x._array.shape, dtype=jax.dtypes.float0) for x in xs
        ]
        for i, g in zip(floating, got, strict=True):
            filled[i] = g
        return tuple(filled)

    def spec(self, t: TensorType) -> PartitionSpec:
        """The result's spec by name: the compute rules if any are active, else the mesh
        axes each axis had in the operands. A mesh axis splits one axis at most, and an
        axis that does not divide evenly stays whole."""
        table = self.rules if self.rules is not None else self.by_axis
        sizes = dict(self.mesh.shape)
        used: set[str] = set()
        entries: list[Any] = []
        ruled = rule_names(table, t.axes)  # an output role Out[E] takes E's rule
        for n, listed in zip(t.shape, ruled, strict=True):
            names = tuple(m for m in listed if m in sizes and m not in used)
            ways = 1
            for m in names:
                ways *= sizes[m]
            if not names or (n is not None and n % ways):
                entries.append(None)
                continue
            used.update(names)
            entries.append(names[0] if len(names) == 1 else names)
        return pspec(*entries)

    def out_sharding(self, out: Out) -> PartitionSpec | tuple[PartitionSpec, ...]:
        if isinstance(out, tuple):
            return tuple(self.spec(t) for t in out)
        return self.spec(out)

    def primal_spec(self, a: jax.Array) -> PartitionSpec:
        """The spec an operand already has (its cotangent must have the same)."""
        return pspec(*_spec(a))

    def run(
        self,
        fn: Callable[..., R],
        out_sharding: PartitionSpec | tuple[PartitionSpec, ...],
        *arrays: Arrays,
    ) -> R:
        """``fn(*arrays)`` with the mesh's Explicit axes made Auto inside, its results
        resharded to ``out_sharding``."""
        wrapped = jax.sharding.auto_axes(fn, out_sharding=out_sharding)
        if self.entered:
            return cast(R, wrapped(*arrays))  # auto_axes keeps fn's result type
        with jax.sharding.use_abstract_mesh(self.mesh):
            return cast(R, wrapped(*arrays))


def explicit_layout(xs: Sequence[Operand], rules: Table | None = None) -> Layout | Unplaced:
    """A :class:`Layout` when the current mesh has Explicit axes and an operand is sharded
    over one of them (``rules``: the current compute rules, if any); :data:`UNPLACED`
    otherwise (the common case: one cheap check)."""
    mesh, entered = _get_abstract_mesh(), True
    if not mesh.axis_types:  # no mesh context (``.empty`` costs more: the hot path)
        found = _tracers_mesh(xs)  # under jax.jit: the operands' own mesh
        if found is None:
            return UNPLACED
        mesh, entered = found, False
    if _EXPLICIT not in mesh.axis_types:
        return UNPLACED
    by_axis: dict[type[Axis], tuple[str, ...]] = {}
    for x in xs:
        for a, entry in zip(x._axes, _spec(x._array), strict=True):
            names = _names(entry)
            if names and a not in by_axis:
                by_axis[a] = names
    return Layout(mesh, by_axis, rules, entered) if by_axis else UNPLACED


def _tracers_mesh(xs: Sequence[Operand]) -> AbstractMesh | None:
    """The mesh of the first traced operand with one (explicitly sharded arrays passed to
    ``jax.jit`` outside any mesh context), or ``None``."""
    for x in xs:
        a = x._array
        if isinstance(a, _Tracer):
            mesh = getattr(getattr(jax.typeof(a), "sharding", None), "mesh", None)
            if mesh is not None and mesh.axis_types:
                found: AbstractMesh = mesh
                return found
    return None


def _varying(a: jax.Array) -> frozenset[str]:
    mat = getattr(jax.typeof(a), "mat", None)
    found: frozenset[str] = getattr(mat, "varying", frozenset())
    return found


def match_varying(arrays: Sequence[jax.Array]) -> list[jax.Array]:
    """Inside ``shard_map``: cast every operand to the union of their varying mesh axes."""
    sets = [_varying(a) for a in arrays]
    union = frozenset().union(*sets)
    if not union:
        return list(arrays)
    return [
        a if s == union else jax.lax.pcast(a, tuple(sorted(union - s)), to="varying")
        for a, s in zip(arrays, sets, strict=True)
    ]


def cast_varying(g: jax.Array, like: jax.Array) -> jax.Array:
    """Cast a cotangent to vary over the mesh axes its primal ``like`` varies over."""
    missing = _varying(like) - _varying(g)
    return jax.lax.pcast(g, tuple(sorted(missing)), to="varying") if missing else g
