"""Tree recursion: a fold over trees (catamorphism), batched level by level.

A tree unit maps ``(children's states, input) -> state``. :func:`tree_fold` computes the
state of every node from its children's, bottom up, for a whole batch of trees at once:
nodes are grouped by *level* (leaves are level 0, a parent is one above its highest
child), each level is padded to the same number of slots and children, and one
``jax.lax.scan`` over the levels runs the unit once per level on all its nodes. A batch
of trees of height ``L`` is ``L`` steps of one jitted loop, not one Python call per node.

:class:`TreeBatch` holds the index tensors (built once, in Python, from :class:`Tree`
values); :class:`ChildSumTreeLSTMCell` is the unit of Tai et al. (2015).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import F32, I32, AnyTensor, Axis, AxisError, Bool, DType, Tensor
from ..core._internal import (
    PyTree,
    axis_name,
    check_axis_label,
    check_indices,
    check_mask,
    describe,
    optional_positive_int,
)
from ..ops import broadcast, contract, index, rename, sigmoid, take, tanh, tensor, transpose
from ..ops import sum as reduce_sum
from . import _init
from ._recurrent import AbstractCell, Gate, Prev
from ._registry import register_layer
from ._util import flatten, is_tensor, require, unflatten, wrap

__all__ = [
    "Tree",
    "TreeBatch",
    "TreeNode",
    "Level",
    "Slot",
    "Child",
    "tree_fold",
    "tree_scan",
    "ChildSumTreeLSTMCell",
]

BA = TypeVar("BA", bound=Axis)  # a batch axis of init_state's mapping (a dict's keys)


@final
class TreeNode(Axis):
    """The nodes of a batch of trees (default node axis of :class:`TreeBatch`)."""


@final
class Level(Axis):
    """The levels of a :class:`TreeBatch` (leaves first)."""


@final
class Slot(Axis):
    """The nodes of one level, padded: the batch axis a tree unit sees."""


@final
class Child(Axis):
    """The children of a node, padded: the extra axis of the children's states."""


class TreeUnit(Protocol):
    """What tree_fold / tree_scan run: a cell with ``init_state`` and
    ``unit(children, x, mask=m)`` (:class:`ChildSumTreeLSTMCell`, say)."""

    def init_state(self, batch: Mapping[type[Axis], int], /) -> PyTree: ...

    def __call__(self, children: PyTree, x: PyTree, /, *, mask: AnyTensor) -> PyTree: ...


@dataclass(frozen=True)
class Tree:
    """A tree of Python values: ``Tree(value, (child, ...))``.

    Example:
        >>> t = ax.nn.Tree(3, (ax.nn.Tree(1), ax.nn.Tree(4, (ax.nn.Tree(1),))))
    """

    value: Any
    children: tuple[Tree, ...] = field(default=())


class TreeBatch(eqx.Module):
    """Index tensors for running a unit over a batch of trees, level by level.

    Fields: ``values [TreeNode]`` (I32, the nodes' values), ``nodes [Level, Slot]`` (node id in
    each slot), ``children [Level, Slot, Child]`` (child ids), ``child_mask [Level, Slot,
    Child]`` (Bool) and ``roots [batch_axis]``. Padding ids point at an extra row that is
    kept at zero. Build it with :meth:`from_trees`.
    """

    values: Tensor[I32, TreeNode]
    nodes: Tensor[I32, Level, Slot]
    children: Tensor[I32, Level, Slot, Child]
    child_mask: Tensor[Bool, Level, Slot, Child]
    roots: AnyTensor
    node_axis: type[Axis] = eqx.field(static=True)

    @classmethod
    def from_trees(
        cls,
        trees: Sequence[Tree],
        batch_axis: type[Axis],
        *,
        node_axis: type[Axis] = TreeNode,
        max_nodes: int | None = None,
        max_levels: int | None = None,
        max_width: int | None = None,
        max_children: int | None = None,
    ) -> TreeBatch:
        """Number the nodes of ``trees`` level by level and build the index tensors.

        The ``max_*`` arguments pad to fixed sizes, so batches of different trees share one
        compiled program. TreeNode values must be ids (to embed, say): whole numbers in
        ``[0, 2**31)``; ``2.7`` or ``-1`` is a ``ValueError`` naming the node, never
        truncated.

        Example:
            >>> batch = ax.nn.TreeBatch.from_trees(trees, Batch)
            >>> xs = embed(batch.values)          # [TreeNode, Embed]
        """
        check_axis_label(batch_axis, "TreeBatch")
        levels: list[list[Tree]] = []
        ids: dict[int, int] = {}
        order: list[Tree] = []

        def height(t: Tree) -> int:
            h = 1 + max((height(c) for c in t.children), default=-1)
            while len(levels) <= h:
                levels.append([])
            levels[h].append(t)
            return h

        for t in trees:
            height(t)
        for level in levels:
            for t in level:
                ids[id(t)] = len(order)
                order.append(t)
        n = len(order)
        n_pad = _fit(max_nodes, n, "max_nodes")
        n_levels = _fit(max_levels, len(levels), "max_levels")
        width = _fit(max_width, max(map(len, levels), default=1), "max_width")
        n_child = _fit(
            max_children, max((len(t.children) for t in order), default=1) or 1, "max_children"
        )
        nodes = np.full((n_levels, width), n_pad, np.int32)
        children = np.full((n_levels, width, n_child), n_pad, np.int32)
        for li, level in enumerate(levels):
            for si, t in enumerate(level):
                nodes[li, si] = ids[id(t)]
                children[li, si, : len(t.children)] = [ids[id(c)] for c in t.children]
        values = np.zeros(n_pad, np.int32)
        if n:  # the index rule (core's check_indices): whole, not negative, within int32
            found = check_indices(
                "TreeBatch.from_trees",
                [_value(t.value) for t in order],
                None,
                what="value",
                noun="an id",
                at="node",
            )
            assert found is not None  # host values are never traced
            values[:n] = found
        roots = np.array([ids[id(t)] for t in trees], np.int32)
        node_label: Any = node_axis  # for pyright: the field says TreeNode, node_axis is any label
        return cls(
            values=tensor(values, node_label, dtype=I32),
            nodes=tensor(nodes, Level, Slot, dtype=I32),
            children=tensor(children, Level, Slot, Child, dtype=I32),
            child_mask=tensor(children < n_pad, Level, Slot, Child, dtype=Bool),
            roots=tensor(roots, batch_axis, dtype=I32),
            node_axis=node_axis,
        )

    @property
    def num_nodes(self) -> int:
        """The size of the node axis (padding included)."""
        return self.values.shape[0]


def _value(v: object) -> object:
    """A node's value as the index check reads it (a scalar Tensor or array: its number)."""
    a = v.array if isinstance(v, Tensor) else v
    if isinstance(a, np.ndarray | jax.Array) and a.ndim == 0:
        return a.item()
    return a


def _fit(limit: int | None, need: int, what: str) -> int:
    limit = optional_positive_int("TreeBatch.from_trees", what, limit)
    if limit is None:
        return need
    if limit < need:
        raise ValueError(f"TreeBatch: the trees need {what} >= {need}, got {limit}")
    return limit


def _run(unit: TreeUnit, batch: TreeBatch, xs: PyTree) -> tuple[object, list[AnyTensor]]:
    """The final states of every node, padded, and their pytree structure (a PyTreeDef)."""
    node = batch.node_axis
    n = batch.num_nodes
    for t in flatten(xs)[0]:
        if not is_tensor(t) or node not in t.axes or t.size(node) != n:
            shown = describe(t) if is_tensor(t) else type(t).__name__
            raise AxisError(
                f"Cannot apply tree_fold to {shown}: the inputs need axis "
                f"{axis_name(node)} of size {n} (one entry per node of the batch)"
            )
    s_leaves, s_def = flatten(unit.init_state({node: n + 1}))
    s_axes: list[tuple[type[Axis], ...]] = [t.axes for t in s_leaves]

    def step(buf: list[Any], level: tuple[Any, Any, Any]) -> tuple[list[Any], None]:
        ids, ch, m = (
            wrap(level[0], (Slot,)),
            wrap(level[1], (Slot, Child)),
            wrap(level[2], (Slot, Child)),
        )
        state = [wrap(a, ax_) for a, ax_ in zip(buf, s_axes, strict=True)]
        kids = unflatten(s_def, [take(s, node, ch) for s in state])
        x_leaves, x_def = flatten(xs)
        x = unflatten(x_def, [take(t, node, ids) for t in x_leaves])
        new = flatten(unit(kids, x, mask=m))[0]
        out: list[Any] = []
        for old, t in zip(state, new, strict=True):
            if t.axes != tuple(Slot if a is node else a for a in old.axes):
                raise AxisError(
                    f"Cannot apply tree_fold: the unit returned {describe(t)}, "
                    f"expected the axes of the state with {axis_name(node)} "
                    f"replaced by Slot"
                )
            p = old.axes.index(node)
            arr = jnp.moveaxis(old.array, p, 0).at[ids.array].set(jnp.moveaxis(t.array, p, 0))
            out.append(jnp.moveaxis(arr.at[n].set(0), 0, p))
        return out, None

    levels = (batch.nodes.array, batch.children.array, batch.child_mask.array)
    final, _ = jax.lax.scan(step, [t.array for t in s_leaves], levels)
    return s_def, [wrap(a, ax_) for a, ax_ in zip(final, s_axes, strict=True)]


def tree_scan(unit: TreeUnit, batch: TreeBatch) -> Callable[[PyTree], PyTree]:
    """The state of every node: ``tree_scan(unit, batch)(xs) -> state [TreeNode, ...]``.

    ``xs`` (a Tensor or pytree of Tensors) has the node axis; ``unit(children, x, mask=m)``
    gets the children's states with an extra :class:`Child` axis, the inputs and a Bool
    ``mask [Slot, Child]`` of real children, all over the batch axis :class:`Slot`.
    """

    def run(xs: PyTree) -> PyTree:
        s_def, final = _run(unit, batch, xs)
        return unflatten(s_def, [_drop_pad(t, batch) for t in final])

    return run


def _drop_pad(t: AnyTensor, batch: TreeBatch) -> AnyTensor:
    node = batch.node_axis
    p = t.axes.index(node)
    return wrap(jax.lax.slice_in_dim(t.array, 0, batch.num_nodes, axis=p), t.axes)


def tree_fold(unit: TreeUnit, batch: TreeBatch) -> Callable[[PyTree], PyTree]:
    """The catamorphism: the root state of each tree, ``[batch_axis, ...]``.

    Example:
        >>> cell = ax.nn.ChildSumTreeLSTMCell(Embed, Hidden, 64, 128, key=key)
        >>> h, c = ax.nn.tree_fold(cell, batch)(embed(batch.values))   # h [Batch, Hidden]
    """

    def run(xs: PyTree) -> PyTree:
        s_def, final = _run(unit, batch, xs)
        return unflatten(s_def, [take(t, batch.node_axis, batch.roots) for t in final])

    return run


@register_layer(typed="signature")
class ChildSumTreeLSTMCell(AbstractCell):
    """The child-sum Tree-LSTM unit (Tai, Socher and Manning, 2015).

    With ``h̃ = Σ_k h_k`` over the real children: ``i, o, u`` from ``x`` and ``h̃``, one
    forget gate per child ``f_k = σ(W_f x + U_f h_k + b_f)``, ``c = i⊙u + Σ_k f_k⊙c_k``,
    ``h = o⊙tanh(c)``. Weights ``[In, Gate=4, Hidden]`` and ``[Prev, Gate=4, Hidden]``,
    gates in the order i, f, o, u. The state is the pair ``(h, c)``.

    Example:
        >>> cell = ax.nn.ChildSumTreeLSTMCell(Embed, Hidden, 64, 128, key=key)
        >>> h, c = ax.nn.tree_fold(cell, batch)(xs)
    """

    def __init__(
        self,
        in_axis: type[Axis],
        hidden_axis: type[Axis],
        in_size: int,
        hidden_size: int,
        *,
        use_bias: bool = True,
        weight_init: _init.Initializer | None = None,
        dtype: type[DType] = F32,
        key: jax.Array,
    ) -> None:
        self._check_sizes(in_size, hidden_size)
        init = weight_init or _init.uniform(math.sqrt(1.0 / hidden_size))
        self._setup(in_axis, hidden_axis, in_size, hidden_size, 4, use_bias, init, dtype, key)

    def __call__(
        self,
        children: tuple[AnyTensor, AnyTensor],
        x: AnyTensor,
        *,
        mask: AnyTensor,
        key: jax.Array | None = None,
    ) -> tuple[AnyTensor, AnyTensor]:
        """``(h [*B, Child, Hidden], c [...])``, ``x [*B, In]``, ``mask [*B, Child]`` -> (h, c)."""
        hk, ck = children
        hid, name = self.hidden_axis, self._name()
        require(name, (hk, x), hk, Child, None, "children's state")
        require(name, (hk, x), x, self.in_axis, self.weight_ih.size(self.in_axis), "input")
        check_mask(
            name, mask, {a: n for a, n in hk.sizes.items() if a is not hid}, target="the children"
        )
        m = broadcast(mask.astype(hk.dtype), hk)
        hk, ck = hk * m, ck * m
        h_sum: AnyTensor = reduce_sum(hk, Child)
        xg = contract(x, self.weight_ih, over=self.in_axis)
        if self.bias is not None:
            xg = xg + broadcast(self.bias, xg)
        hg = contract(rename(h_sum, hid, Prev), self.weight_hh, over=Prev)
        if xg.axes != hg.axes:
            xg = transpose(xg, *hg.axes)
        z = xg + hg
        i, o, u = sigmoid(index(z, Gate, 0)), sigmoid(index(z, Gate, 2)), tanh(index(z, Gate, 3))
        fh = contract(rename(hk, hid, Prev), index(self.weight_hh, Gate, 1), over=Prev)
        f = sigmoid(fh + broadcast(index(xg, Gate, 1), fh))
        c = i * u + reduce_sum(f * broadcast(ck, fh), Child)
        return o * tanh(c), c

    def init_state(
        self, batch: Mapping[type[BA], int] | None = None
    ) -> tuple[AnyTensor, AnyTensor]:
        """``(h, c)`` of zeros over the given batch axes."""
        h = super().init_state(batch)
        return h, h

    def output(self, state: tuple[AnyTensor, AnyTensor]) -> AnyTensor:
        """``h`` of the pair ``(h, c)``."""
        return state[0]
