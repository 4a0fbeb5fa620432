"""Tree recursion: the batched child-sum Tree-LSTM against a recursive per-node reference."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from tests.nn.helpers import Batch, Embed, Hidden, close, tree_close

Tree = ax.nn.Tree
TREES = [
    Tree(1, (Tree(2), Tree(3, (Tree(4), Tree(5), Tree(6))))),
    Tree(7),
    Tree(8, (Tree(9, (Tree(0, (Tree(1),)),)),)),
    Tree(2, (Tree(3), Tree(3))),
]


def _reference(
    cell: ax.nn.ChildSumTreeLSTMCell, table: jax.Array, params: Any, tree: Tree
) -> tuple[jax.Array, jax.Array]:
    """Tai et al.'s equations, one Python call per node, children first."""
    w, u, b = params  # the cell's weights, stored input-major: [In, Gate, Hidden]
    w, u = jnp.moveaxis(w, 0, -1), jnp.moveaxis(u, 0, -1)  # [Gate, Hidden, In]
    kids = [_reference(cell, table, params, c) for c in tree.children]
    hk = jnp.stack([h for h, _ in kids]) if kids else jnp.zeros((0, u.shape[1]))
    ck = jnp.stack([c for _, c in kids]) if kids else jnp.zeros((0, u.shape[1]))
    x = table[tree.value]
    z = w @ x + u @ hk.sum(0) + b  # [Gate, Hidden]: gates i, f, o, u
    i, o, g = jax.nn.sigmoid(z[0]), jax.nn.sigmoid(z[2]), jnp.tanh(z[3])
    f = jax.nn.sigmoid((w[1] @ x + b[1])[None, :] + hk @ u[1].T)
    c = i * g + (f * ck).sum(0)
    return o * jnp.tanh(c), c


def _setup(key: jax.Array) -> tuple[ax.nn.ChildSumTreeLSTMCell, jax.Array]:
    k1, k2 = jax.random.split(key)
    cell = ax.nn.ChildSumTreeLSTMCell(Embed, Hidden, 3, 4, key=k1)
    table = jnp.asarray(np.random.default_rng(0).normal(size=(10, 3)), jnp.float32)
    return cell, table


def test_tree_batch_numbers_nodes_level_by_level() -> None:
    batch = ax.nn.TreeBatch.from_trees(TREES, Batch)
    assert batch.nodes.axes == (ax.nn.Level, ax.nn.Slot)
    assert batch.nodes.shape == (4, 8)  # height 3; 8 leaves on level 0
    assert batch.children.shape == (4, 8, 3)
    assert batch.num_nodes == 14 and batch.roots.axes == (Batch,)
    values = np.asarray(batch.values.array)
    roots = np.asarray(batch.roots.array)
    np.testing.assert_array_equal(values[roots], [1, 7, 8, 2])
    kids = np.asarray(batch.children.array)[np.asarray(batch.child_mask.array)]
    assert sorted(kids.tolist() + roots.tolist()) == list(range(14))  # each node once


def test_tree_lstm_equals_the_recursive_reference(key: jax.Array) -> None:
    cell, table = _setup(key)
    batch = ax.nn.TreeBatch.from_trees(TREES, Batch)

    def batched(c: Any, tab: jax.Array) -> tuple[Any, Any]:
        xs = ax.tensor(tab[batch.values.array], ax.nn.TreeNode, Embed)
        return ax.nn.tree_fold(c, batch)(xs)

    h, c = jax.jit(batched)(cell, table)
    assert h.axes == (Batch, Hidden) and c.axes == (Batch, Hidden)
    params = (cell.weight_ih.array, cell.weight_hh.array, cell.bias.array)
    want = [_reference(cell, table, params, t) for t in TREES]
    close(h.array, jnp.stack([w[0] for w in want]), 1e-5)
    close(c.array, jnp.stack([w[1] for w in want]), 1e-5)

    def loss(p: Any, tab: jax.Array) -> jax.Array:
        return jnp.sum(jnp.stack([_reference(cell, tab, p, t)[0] for t in TREES]) ** 2)

    def ours(p: Any, tab: jax.Array) -> jax.Array:
        c2 = eqx.tree_at(
            lambda m: (m.weight_ih, m.weight_hh, m.bias),
            cell,
            tuple(
                ax.tensor(a, *t.axes)
                for a, t in zip(p, (cell.weight_ih, cell.weight_hh, cell.bias), strict=True)
            ),
        )
        return jnp.sum(batched(c2, tab)[0].array ** 2)

    g = jax.jit(jax.grad(ours, (0, 1)))(params, table)
    g_ref = jax.jit(jax.grad(loss, (0, 1)))(params, table)
    tree_close(g, g_ref, 1e-4)


def test_tree_fold_runs_one_scan_over_levels(key: jax.Array) -> None:
    cell, table = _setup(key)
    batch = ax.nn.TreeBatch.from_trees(TREES, Batch)
    xs = ax.tensor(table[batch.values.array], ax.nn.TreeNode, Embed)
    jaxpr = str(jax.make_jaxpr(lambda t: ax.nn.tree_fold(cell, batch)(t)[0].array)(xs))
    assert jaxpr.count("scan[") == 1 and "length=4" in jaxpr
    padded = ax.nn.TreeBatch.from_trees(
        TREES[:2], Batch, max_nodes=20, max_levels=5, max_width=8, max_children=4
    )
    assert padded.nodes.shape == (5, 8) and padded.num_nodes == 20
    xs2 = ax.tensor(table[padded.values.array], ax.nn.TreeNode, Embed)
    h2, _ = ax.nn.tree_fold(cell, padded)(xs2)
    h, _ = ax.nn.tree_fold(cell, batch)(xs)
    close(h2.array, h.array[:2], 1e-6)  # padding changes nothing
    states = ax.nn.tree_scan(cell, batch)(xs)[0]
    assert states.axes == (ax.nn.TreeNode, Hidden) and states.size(ax.nn.TreeNode) == 14
    close(states.array[np.asarray(batch.roots.array)], h.array, 1e-6)


def test_tree_errors(key: jax.Array) -> None:
    cell, table = _setup(key)
    batch = ax.nn.TreeBatch.from_trees(TREES, Batch)
    with pytest.raises(
        ax.AxisError,
        match=r"Cannot apply tree_fold to Tensor\[F32, TreeNode=3, "
        r"Embed=3\]: the inputs need axis TreeNode of size 14",
    ):
        ax.nn.tree_fold(cell, batch)(ax.zeros((3, 3), ax.nn.TreeNode, Embed))
    with pytest.raises(ValueError, match=r"the trees need max_levels >= 4, got 2"):
        ax.nn.TreeBatch.from_trees(TREES, Batch, max_levels=2)
    xs = ax.tensor(table[batch.values.array], ax.nn.TreeNode, Embed)
    with pytest.raises(
        ax.AxisError,
        match=r"axis Embed of the input has size 3, the layer "
        r"expects 5",
    ):
        ax.nn.tree_fold(ax.nn.ChildSumTreeLSTMCell(Embed, Hidden, 5, 4, key=key), batch)(xs)


def test_the_old_name_node_warns_and_is_tree_node() -> None:
    with pytest.warns(DeprecationWarning, match=r"ax.nn.Node is renamed ax.nn.TreeNode"):
        old = ax.nn.Node  # type: ignore[attr-defined]
    assert old is ax.nn.TreeNode
    with pytest.raises(AttributeError, match="has no attribute 'Nodes'"):
        ax.nn.Nodes  # type: ignore[attr-defined]  # noqa: B018
