"""Axis rules: shard whole models by axis name over a device mesh.

The rules are data, a mapping ``{Axis: mesh axis | tuple of mesh axes | None}``, held by
a thread-local context that also enters the mesh::

    mesh = jax.make_mesh((4, 2), ("data", "model"))
    with ax.axis_rules(mesh, {Batch: "data", Hidden: "model"}):
        model = ax.sharded_init(make_model, key)     # created sharded, never whole
        x = ax.shard(x)                              # Batch split over "data"

Compute rules place activations and batches; ``param_rules`` (FSDP: ``{Embed: "data"}``)
place parameters and optimizer state. Without ``param_rules`` parameters use the compute
rules.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Generator, Mapping
from typing import Any, TypeGuard, TypeVar, final

import jax
import jax.core  # jax.core.Tracer: imported by name for type checkers
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec
from jax.typing import DTypeLike

from ..core import Axis, Tensor
from ..core._internal import (
    HasType,
    PyTree,
    Table,
    axis_name,
    is_tensor,
    placing,
    pspec,
    reshard,
    shape_dtype_struct,
    trusted_tensor,
    with_sharding_constraint,
)
from ._sharding import MeshAxes, check_mesh_axes, rules_table, spec_of

__all__ = [
    "AxisRules",
    "abstract",
    "active_rules",
    "axis_rules",
    "shard",
    "sharded_init",
    "sharding",
]

T = TypeVar("T")
Rules = Mapping[type[Axis], MeshAxes]


@final
class AxisRules:
    """A mesh with its compute rules and parameter rules, checked against the mesh.

    Made by :func:`axis_rules` (and by ``ax.train.Parallel``); ``table(params)`` gives the
    checked mapping, ``spec(t)`` one tensor's ``PartitionSpec``.
    """

    __slots__ = ("mesh", "rules", "param_rules")

    def __init__(
        self, mesh: Mesh, rules: Rules, param_rules: Rules | None = None, where: str = "axis_rules"
    ) -> None:
        if not isinstance(mesh, Mesh):
            raise TypeError(
                f"{where}: the first argument is a jax.sharding.Mesh "
                f"(jax.make_mesh(...)), got {type(mesh).__name__}"
            )
        self.mesh: Mesh = mesh
        self.rules: Table = rules_table(rules, where)
        self.param_rules: Table = (
            self.rules if param_rules is None else rules_table(param_rules, where)
        )
        for table in (self.rules, self.param_rules):
            check_mesh_axes(table, tuple(mesh.axis_names), where)

    def table(self, params: bool = False) -> Table:
        return self.param_rules if params else self.rules

    def spec(self, t: HasType, params: bool = False, where: str = "shard") -> PartitionSpec:
        """``t``'s ``PartitionSpec``; every split axis must divide evenly."""
        return spec_of(t, self.table(params), where, dict(self.mesh.shape))

    def named(self, t: HasType, params: bool = False, where: str = "shard") -> NamedSharding:
        return NamedSharding(self.mesh, self.spec(t, params, where))

    def __repr__(self) -> str:
        def show(table: Table) -> str:
            return "{" + ", ".join(f"{axis_name(a)}: {v!r}" for a, v in table.items()) + "}"

        extra = "" if self.param_rules is self.rules else f", param_rules={show(self.param_rules)}"
        return f"AxisRules({dict(self.mesh.shape)}, {show(self.rules)}{extra})"


class _Active(threading.local):
    def __init__(self) -> None:
        self.stack: list[AxisRules] = []


_ACTIVE = _Active()


def active_rules() -> AxisRules | None:
    """The innermost :func:`axis_rules` context of this thread, or ``None``."""
    stack = _ACTIVE.stack
    return stack[-1] if stack else None


@contextlib.contextmanager
def axis_rules(
    mesh: Mesh, rules: Rules, *, param_rules: Rules | None = None
) -> Generator[AxisRules, None, None]:
    """Shard by axis name inside the block: enters ``mesh`` and makes ``rules`` current.

    Args:
        mesh: a ``jax.sharding.Mesh`` (``jax.make_mesh``: Explicit axes by default; Auto
            axes work too).
        rules: compute rules, ``{Axis: "mesh axis" | ("a", "b") | None}``: batches and
            activations, and the output sharding of ops on an Explicit mesh.
        param_rules: rules for parameters and optimizer state (FSDP); default ``rules``.

    Raises:
        AxisError: a rule names a mesh axis the mesh lacks.

    Example:
        >>> with ax.axis_rules(mesh, {Batch: "data", Hidden: "model"}):
        ...     y = ax.shard(x)          # placed: Batch over "data"
    """
    state = AxisRules(mesh, rules, param_rules)
    _ACTIVE.stack.append(state)
    try:
        with placing(state.rules), jax.set_mesh(mesh):
            yield state
    finally:
        _ACTIVE.stack.pop()


def _resolve(rules: Rules | AxisRules | None, mesh: Mesh | None, where: str) -> AxisRules:
    if isinstance(rules, AxisRules):
        return rules
    if rules is None:
        found = active_rules()
        if found is None:
            raise RuntimeError(
                f"{where}: no axis rules (use `with ax.axis_rules(mesh, rules):` "
                "or pass rules= and mesh=)"
            )
        if mesh is not None and mesh is not found.mesh:
            return AxisRules(mesh, found.rules, found.param_rules, where)
        return found
    if mesh is None:
        found = active_rules()
        mesh = found.mesh if found is not None else jax.sharding.get_mesh()
        if not isinstance(mesh, Mesh) or mesh.empty:
            raise RuntimeError(
                f"{where}: rules= given without a mesh (pass mesh=, or enter "
                "one with ax.axis_rules or jax.set_mesh)"
            )
    return AxisRules(mesh, rules, None, where)


_REPLICATED = pspec()


def _is_array(x: object) -> TypeGuard[jax.Array | np.ndarray | jax.ShapeDtypeStruct]:
    return isinstance(x, jax.Array | np.ndarray | jax.ShapeDtypeStruct)


def sharding(
    tree: PyTree,
    rules: Rules | AxisRules | None = None,
    *,
    mesh: Mesh | None = None,
    params: bool = False,
) -> PyTree:
    """The ``NamedSharding`` of every Tensor in ``tree`` under the rules.

    Each Tensor is replaced by its sharding (a pytree prefix of ``tree``, as
    ``jax.device_put`` and ``jax.jit``'s ``in_shardings``/``out_shardings`` accept); a bare
    array is replicated; other leaves become ``None``.

    Args:
        tree: any pytree holding Tensors (a model, an optimizer state, a batch).
        rules: ``{Axis: mesh axis}``; default: the current :func:`axis_rules`.
        mesh: the mesh for ``rules`` (default: the current one).
        params: use the parameter rules (FSDP) instead of the compute rules.

    Raises:
        AxisError: an axis does not divide evenly ("Hidden=100 cannot be split 8 ways over
            mesh axis 'model'"), or one mesh axis would split two axes of one tensor.

    Example:
        >>> with ax.axis_rules(mesh, {Batch: "data"}):
        ...     s = ax.sharding(x)       # NamedSharding(mesh, P('data', None))
    """
    state = _resolve(rules, mesh, "sharding")
    replicated = NamedSharding(state.mesh, _REPLICATED)

    def one(x: object) -> object:
        if isinstance(x, Tensor):  # one without its array (a frozen leaf's state): none
            return state.named(x, params, "sharding") if x.array is not None else None
        return replicated if _is_array(x) else None

    return jax.tree.map(one, tree, is_leaf=is_tensor)


def _manual() -> bool:
    return any(t == AxisType.Manual for t in jax.sharding.get_abstract_mesh().axis_types)


def _explicit_mesh() -> bool:
    return any(t == AxisType.Explicit for t in jax.sharding.get_abstract_mesh().axis_types)


def shard(
    tree: T,
    rules: Rules | AxisRules | None = None,
    *,
    mesh: Mesh | None = None,
    params: bool = False,
) -> T:
    """Place every Tensor of ``tree`` as the rules say.

    Outside ``jax.jit`` it moves the data (``jax.device_put``); inside, it is a sharding
    constraint (Auto mesh axes) or a ``jax.sharding.reshard`` (Explicit axes). Arguments as
    :func:`sharding`.

    Example:
        >>> with ax.axis_rules(mesh, {Batch: "data"}):
        ...     x = ax.shard(x)          # x.array.sharding.spec == P('data', None)
    """
    if _manual():
        raise RuntimeError(
            "shard: inside jax.shard_map each array is one device's block; "
            "place arrays before shard_map (its in_specs) instead"
        )
    state = _resolve(rules, mesh, "shard")

    def one(x: object) -> object:
        if not isinstance(x, Tensor) or x.array is None:  # None: a frozen leaf's state
            return x
        s = state.named(x, params, "shard")
        a = x.array
        if not isinstance(a, jax.core.Tracer):
            return trusted_tensor(jax.device_put(a, s), x.axes)
        if _explicit_mesh():
            placed = reshard(a, s.spec)
        else:
            placed = with_sharding_constraint(a, s)
        return trusted_tensor(placed, x.axes)

    out: T = jax.tree.map(one, tree, is_leaf=is_tensor)
    return out


def abstract(
    tree: T,
    rules: Rules | AxisRules | None = None,
    *,
    mesh: Mesh | None = None,
    params: bool = False,
) -> T:
    """``tree`` with every array replaced by a ``jax.ShapeDtypeStruct`` carrying the
    sharding the rules give (Tensors stay Tensors): a target for restoring a checkpoint
    or for ``jax.jit(...).lower``. Arguments as :func:`sharding`.

    Example:
        >>> with ax.axis_rules(mesh, {Batch: "data"}):
        ...     spec = ax.abstract(x)    # Tensor of ShapeDtypeStruct(sharding=...)
    """
    state = _resolve(rules, mesh, "abstract")
    replicated = NamedSharding(state.mesh, _REPLICATED)

    def one(x: object) -> object:
        if isinstance(x, Tensor) and x.array is None:  # a frozen leaf's state: no array
            return x
        if isinstance(x, Tensor):
            a = x.array
            return trusted_tensor(
                _struct(a.shape, a.dtype, state.named(x, params, "abstract")), x.axes
            )
        if _is_array(x):
            return _struct(x.shape, x.dtype, replicated)
        return x

    out: T = jax.tree.map(one, tree, is_leaf=is_tensor)
    return out


def _struct(
    shape: tuple[int, ...], dtype: DTypeLike, sharding: NamedSharding
) -> jax.ShapeDtypeStruct:
    return shape_dtype_struct(shape, dtype, sharding=sharding)


def sharded_init(
    fn: Callable[..., T],
    *args: Any,
    rules: Rules | AxisRules | None = None,
    mesh: Mesh | None = None,
    **kwargs: Any,
) -> T:
    """Call ``fn(*args, **kwargs)`` (a model's constructor) so that its parameters are
    created already sharded by the parameter rules, never whole on one device.

    The result's shapes come from ``jax.eval_shape``; then ``fn`` runs under ``jax.jit``
    with those shardings as ``out_shardings``, so each device computes only its own block.
    Array arguments (a PRNG key) are traced; other arguments are static.

    Example:
        >>> with ax.axis_rules(mesh, {Batch: "data"}, param_rules={Hidden: "data"}):
        ...     mlp = ax.sharded_init(MLP, key)
    """
    state = _resolve(rules, mesh, "sharded_init")
    with jax.set_mesh(state.mesh):
        compiled, arrays, finish = _init_program(state, fn, args, kwargs)
        out: T = finish(compiled(*arrays))
    return out


def _init_program(
    state: AxisRules, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, list[Any], Callable[[list[Any]], Any]]:
    """The compiled program :func:`sharded_init` runs, its array arguments, and the function
    that rebuilds ``fn``'s result from the program's outputs (the tests read the program's
    HLO and memory: no buffer of a whole split parameter).

    On an Explicit mesh every intermediate value has a sharding in its type, which for an
    initialiser is its replicated key's: the parameters would be computed whole on every
    device and sliced at the end. The body runs with the mesh axes made Auto
    (``jax.sharding.auto_axes``), so XLA's propagation partitions the random bits and the
    arithmetic from the output shardings."""
    in_leaves, in_def = jax.tree.flatten((args, kwargs))
    traced = [i for i, v in enumerate(in_leaves) if isinstance(v, jax.Array | np.ndarray)]
    box: dict[str, Any] = {}

    def dynamic(*arrays: jax.Array) -> list[Any]:
        leaves = list(in_leaves)
        for i, a in zip(traced, arrays, strict=True):
            leaves[i] = a
        a_, k_ = jax.tree.unflatten(in_def, leaves)
        out_leaves, out_def = jax.tree.flatten(fn(*a_, **k_), is_leaf=is_tensor)
        box["def"] = out_def
        box["static"] = [None if is_tensor(v) or _is_array(v) else v for v in out_leaves]
        return [v if is_tensor(v) or _is_array(v) else None for v in out_leaves]

    arrays = [in_leaves[i] for i in traced]
    shapes = jax.eval_shape(dynamic, *arrays)
    shardings = sharding(shapes, state, params=True)
    body: Callable[..., Any] = dynamic
    if AxisType.Explicit in state.mesh.axis_types:
        body = jax.sharding.auto_axes(
            dynamic, out_sharding=jax.tree.map(lambda s: s.spec, shardings)
        )
    compiled = jax.jit(body, out_shardings=shardings).lower(*arrays).compile()

    def finish(made: list[Any]) -> PyTree:
        leaves = [m if s is None else s for m, s in zip(made, box["static"], strict=True)]
        return jax.tree.unflatten(box["def"], leaves)

    return compiled, arrays, finish
