"""Collectives by axis name, for code inside ``jax.shard_map``.

Inside ``shard_map`` each device holds one block, and communication is the user's. With
named axes it is written by meaning: ``ax.psum(t, Hidden)`` sums the partial results over
the mesh axis that the rules split ``Hidden`` over (the row-parallel half of a tensor
parallel layer); ``ax.pmean(loss, Batch)`` averages over the data-parallel mesh axis;
``ax.all_gather(t, Hidden)`` rebuilds the whole ``Hidden`` axis from its blocks::

    with ax.axis_rules(mesh, {Batch: "data", Hidden: "model"}):
        h = ax.contract(x, w1)              # Tensor[Batch, Hidden], Hidden blocks local
        y = ax.psum(ax.contract(h, w2), Hidden)   # Hidden summed: add the blocks' parts
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar, TypeVarTuple, cast

import jax

from ..core import Axis, AxisError, DType, Tensor
from ..core._internal import axes_names, axis_name, check_axis_label, describe, trusted_tensor
from ._rules import AxisRules, active_rules
from ._sharding import MeshAxes, check_mesh_axes, rules_table

__all__ = ["all_gather", "pmean", "psum"]

D = TypeVar("D", bound=DType)
R = TypeVar("R")
Axes = TypeVarTuple("Axes")
Over = type[Axis] | tuple[type[Axis], ...]


def _mesh_axes(
    where: str,
    t: Tensor[Any, *tuple[Any, ...]],
    over: Over,
    rules: Mapping[type[Axis], MeshAxes] | AxisRules | None,
) -> tuple[str, ...]:
    if not isinstance(t, Tensor):
        raise TypeError(f"{where}: expected a Tensor, got {type(t).__name__}")
    labels = over if isinstance(over, tuple) else (over,)
    labels = tuple(check_axis_label(a, where) for a in labels)
    if isinstance(rules, AxisRules):
        table = rules.rules
    elif rules is not None:
        table = rules_table(rules, where)
    else:
        state = active_rules()
        if state is None:
            call = f"{where}({describe(t)}, {axes_names(labels)})"
            if not _in_shard_map():  # the rules are not what is missing: shard_map is
                raise AxisError(
                    f"{call}: no mesh axis is bound here: {where} communicates between "
                    "blocks, inside the function given to jax.shard_map; outside shard_map "
                    "every array is already whole (ax.sum and ax.mean over an axis cover "
                    f"all its blocks), so drop the {where}"
                )
            raise AxisError(
                f"{call}: no axis rules say which mesh axes split "
                f"{axes_names(labels)} (call it inside `with ax.axis_rules(mesh, rules):`, "
                "or pass rules={Axis: 'mesh axis'})"
            )
        table = state.rules
    names: list[str] = []
    for a in labels:
        found = table.get(a, ())
        if not found:
            raise AxisError(
                f"{where}({describe(t)}, {axis_name(a)}): {axis_name(a)} has no mesh axis "
                f"in the rules ({', '.join(f'{axis_name(k)}: {v!r}' for k, v in table.items())}"
                "): map it to a mesh axis, or there is nothing to communicate"
            )
        names += found
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.axis_types:  # a mesh is set: the rules' mesh axes must be its own
        check_mesh_axes(table, tuple(mesh.axis_names), where)
    return tuple(names)


def check_axes(where: str, t: Tensor[Any, *tuple[Any, ...]], over: Over) -> None:
    """The collectives' rule on axes (the mypy plugin runs it too): ``psum`` and ``pmean``
    add up blocks of axes the tensor no longer has; ``all_gather`` rebuilds an axis it has."""
    labels = over if isinstance(over, tuple) else (over,)
    if where == "all_gather":
        missing = [a for a in labels if a not in t.axes]
        if missing:
            raise AxisError(
                f"all_gather({describe(t)}, {axis_name(missing[0])}): the tensor has no "
                f"axis {axis_name(missing[0])} to gather"
            )
        return
    kept = [a for a in labels if a in t.axes]
    if kept:
        raise AxisError(
            f"{where}({describe(t)}, {axes_names(labels)}): the tensor still has axis "
            f"{axis_name(kept[0])}, whose blocks hold different elements (sum it out first, "
            f"with ax.sum or ax.contract, or use ax.all_gather to rebuild it)"
        )


def _in_shard_map() -> bool:
    """Whether this code runs inside ``jax.shard_map`` (its mesh has Manual axes)."""
    types = jax.sharding.get_abstract_mesh().axis_types or ()
    return jax.sharding.AxisType.Manual in types


def _reduce(
    where: str,
    fn: Callable[..., jax.Array],
    t: Tensor[D, *Axes],
    over: Over,
    rules: Mapping[type[Axis], MeshAxes] | AxisRules | None,
) -> Tensor[D, *Axes]:
    names = _mesh_axes(where, t, over, rules)
    check_axes(where, t, over)
    return cast(
        "Tensor[D, *Axes]", trusted_tensor(_bound(where, t, over, names, fn, t.array), t.axes)
    )


def _bound(
    where: str,
    t: Tensor[Any, *tuple[Any, ...]],
    over: Over,
    names: tuple[str, ...],
    fn: Callable[..., R],
    *args: Any,
    **kwargs: Any,
) -> R:
    """``fn(*args, names, **kwargs)`` (a ``jax.lax`` collective over the mesh axes
    ``names``); JAX's ``NameError`` for an axis name nothing binds becomes an
    :class:`AxisError` saying that collectives run inside ``jax.shard_map`` only (a mesh
    axis the mesh lacks is reported before, by ``_mesh_axes``)."""
    try:
        return fn(*args, names, **kwargs)
    except NameError as e:
        if "unbound axis name" not in str(e):
            raise
        call = f"{where}({describe(t)}, {axes_names(over if isinstance(over, tuple) else (over,))})"
        axes = " ".join(map(repr, names))
        raise AxisError(
            f"{call}: mesh axis {axes} {'is' if len(names) == 1 else 'are'} not bound here: "
            f"{where} communicates between blocks, inside the function given to "
            f"jax.shard_map over a mesh with {'that axis' if len(names) == 1 else 'those axes'}; "
            f"outside shard_map every array is already whole (ax.sum and ax.mean over an "
            f"axis cover all its blocks), so drop the {where}"
        ) from None


def psum(
    t: Tensor[D, *Axes],
    over: Over,
    *,
    rules: Mapping[type[Axis], MeshAxes] | AxisRules | None = None,
) -> Tensor[D, *Axes]:
    """Sum ``t`` over the mesh axes that the rules split ``over`` across (in ``shard_map``).

    ``over`` is an axis ``t`` no longer has: each device holds a partial result from its
    block of ``over`` (``contract`` over a split ``Hidden``), and ``psum`` adds them up.

    Raises:
        AxisError: ``over`` has no mesh axis in the rules, or ``t`` still has ``over``.

    Example:
        >>> y = ax.psum(ax.contract(h, w2), Hidden)   # row-parallel layer's output
    """
    return _reduce("psum", jax.lax.psum, t, over, rules)


def pmean(
    t: Tensor[D, *Axes],
    over: Over,
    *,
    rules: Mapping[type[Axis], MeshAxes] | AxisRules | None = None,
) -> Tensor[D, *Axes]:
    """Average ``t`` over the mesh axes that the rules split ``over`` across (in
    ``shard_map``). For data parallelism average the loss, not the gradients: with
    ``check_vma=True`` (the default) JAX already sums the gradients of replicated
    parameters over the data mesh axis.

    Example:
        >>> loss = ax.pmean(ax.mean(per_example, Batch), Batch)  # the whole batch's mean
    """
    return _reduce("pmean", jax.lax.pmean, t, over, rules)


def all_gather(
    t: Tensor[D, *Axes],
    over: type[Axis],
    *,
    rules: Mapping[type[Axis], MeshAxes] | AxisRules | None = None,
) -> Tensor[D, *Axes]:
    """Concatenate the blocks of axis ``over`` from the devices that the rules split it
    across (in ``shard_map``): each device then holds the whole axis, and the result is
    invariant over those mesh axes (``jax.lax.all_gather(..., to="invarying")``); its
    gradient is each device's block of the cotangent.

    Raises:
        AxisError: ``t`` has no axis ``over``, or ``over`` has no mesh axis in the rules.

    Example:
        >>> w = ax.all_gather(w_block, Hidden)       # FSDP: the whole weight, for one use
    """
    names = _mesh_axes("all_gather", t, over, rules)
    check_axes("all_gather", t, over)
    dim = t.axes.index(over)
    # "invarying": the result is the same on every device of those mesh axes (its type says
    # so under check_vma), so it mixes with replicated values and leaves shard_map through
    # a spec without them; its transpose takes each device's block of the cotangent
    return cast(
        "Tensor[D, *Axes]",
        trusted_tensor(
            _bound(
                "all_gather",
                t,
                over,
                names,
                jax.lax.all_gather,
                t.array,
                axis=dim,
                tiled=True,
                to="invarying",
            ),
            t.axes,
        ),
    )
