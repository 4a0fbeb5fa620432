"""Recurrent units, fold/scan over a named axis, masks, bidirectional and stacked layers."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from tests.nn.helpers import Batch, Hidden, In, Out, Time, arr, close, rand, tree_close

Gate = ax.nn.Gate


def _loop(
    cell: Any, state: Any, xs: ax.Tensor[Any, *tuple[Any, ...]], steps: range | list[int]
) -> tuple[Any, list[Any]]:
    """The reference: a Python loop calling the unit once per step."""
    seen = []
    for t in steps:
        state = cell(state, ax.index(xs, Time, t))
        seen.append(state)
    return state, seen


def _to_equinox(cell: Any, ref: Any, gates: int) -> Any:
    """Equinox's cell with ``cell``'s weights: ``[In, Gate, Hidden] -> [Gate * Hidden, In]``."""

    def out_major(w: ax.Tensor[Any, *tuple[Any, ...]]) -> jax.Array:
        return jnp.transpose(w.array, (1, 2, 0)).reshape(gates * w.shape[2], w.shape[0])

    ref = eqx.tree_at(
        lambda m: (m.weight_ih, m.weight_hh, m.bias),
        ref,
        (out_major(cell.weight_ih), out_major(cell.weight_hh), cell.bias.array.reshape(-1)),
    )
    if gates == 3:
        ref = eqx.tree_at(lambda m: m.bias_n, ref, cell.bias_n.array)
    return ref


@pytest.mark.parametrize("kind", ["rnn", "gru", "lstm"])
def test_cells_match_equinox(kind: str, key: jax.Array) -> None:
    cls = {"rnn": ax.nn.RNNCell, "gru": ax.nn.GRUCell, "lstm": ax.nn.LSTMCell}[kind]
    cell = cls(In, Hidden, 3, 5, key=key)
    x = rand((4, 3), Batch, In, seed=1)
    h = rand((4, 5), Batch, Hidden, seed=2)
    c = rand((4, 5), Batch, Hidden, seed=3)
    if kind == "rnn":
        assert cell.weight_ih.axes == (In, Hidden)
        assert cell.weight_hh.axes == (ax.nn.Prev, Hidden)
        wi, wh, b = cell.weight_ih.array, cell.weight_hh.array, cell.bias.array
        want = jnp.tanh(x.array @ wi + h.array @ wh + b[None, :])
        close(cell(h, x).array, want, 1e-5)
        return
    gates = 3 if kind == "gru" else 4
    # stored input-major (x @ W inside lax.scan: no transposed copy of W per step)
    assert cell.weight_ih.axes == (In, Gate, Hidden)
    assert cell.weight_hh.axes == (ax.nn.Prev, Gate, Hidden)
    ref = _to_equinox(
        cell, (eqx.nn.GRUCell if kind == "gru" else eqx.nn.LSTMCell)(3, 5, key=key), gates
    )
    if kind == "gru":
        close(cell(h, x).array, jax.vmap(ref)(x.array, h.array), 1e-5)
        # the state's batch axes may come in another order than the input's
        close(cell(h, ax.transpose(x, In, Batch)).array, cell(h, x).array, 1e-6)
        return
    got = cell((h, c), x)
    want = jax.vmap(ref)(x.array, (h.array, c.array))
    tree_close([t.array for t in got], want, 1e-5)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_cell_gradients_match_equinox(kind: str, key: jax.Array) -> None:
    """The gate split's own backward (one concatenate): gradients of the weights, the input
    and the state equal Equinox's, through the weight mapping."""
    cls, ref_cls = {
        "gru": (ax.nn.GRUCell, eqx.nn.GRUCell),
        "lstm": (ax.nn.LSTMCell, eqx.nn.LSTMCell),
    }[kind]
    gates = 3 if kind == "gru" else 4
    cell = cls(In, Hidden, 3, 5, key=key)
    x, h, c = (
        rand((4, 3), Batch, In, seed=1),
        rand((4, 5), Batch, Hidden, seed=2),
        rand((4, 5), Batch, Hidden, seed=3),
    )
    w = rand((4, 5), Batch, Hidden, seed=4).array  # weights the outputs differently

    def ours(m: Any, xa: jax.Array, ha: jax.Array, ca: jax.Array) -> jax.Array:
        xt, ht, ct = (
            ax.tensor(xa, Batch, In),
            ax.tensor(ha, Batch, Hidden),
            ax.tensor(ca, Batch, Hidden),
        )
        out = m(ht, xt) if kind == "gru" else m((ht, ct), xt)
        hs = [out] if kind == "gru" else list(out)
        return sum(jnp.sum(jnp.tanh(t.array) * w * (k + 1)) for k, t in enumerate(hs))

    def theirs(m: Any, xa: jax.Array, ha: jax.Array, ca: jax.Array) -> jax.Array:
        out = jax.vmap(m)(xa, ha if kind == "gru" else (ha, ca))
        hs = [out] if kind == "gru" else list(out)
        return sum(jnp.sum(jnp.tanh(t) * w * (k + 1)) for k, t in enumerate(hs))

    g = jax.jit(jax.grad(ours, (0, 1, 2, 3)))(cell, x.array, h.array, c.array)
    ref = _to_equinox(cell, ref_cls(3, 5, key=key), gates)
    g_ref = jax.jit(jax.grad(theirs, (0, 1, 2, 3)))(ref, x.array, h.array, c.array)
    tree_close(g[1:], g_ref[1:], 1e-5)
    tree_close(_to_equinox(g[0], ref, gates), g_ref[0], 1e-5)
    if kind == "lstm":  # the split is one Unstack op, its backward one concatenate
        jaxpr = str(jax.make_jaxpr(jax.grad(ours))(cell, x.array, h.array, c.array))
        assert "concatenate" in jaxpr and "pad" not in jaxpr and "dynamic_update_slice" not in jaxpr


def test_fold_and_scan_equal_a_python_loop(key: jax.Array) -> None:
    cell = ax.nn.LSTMCell(In, Hidden, 3, 4, key=key)
    xs = rand((2, 6, 3), Batch, Time, In)
    init = cell.init_state({Batch: 2})
    last, seen = _loop(cell, init, xs, range(6))
    for xp in (xs, ax.transpose(xs, Time, In, Batch)):
        tree_close(
            [t.array for t in ax.fold(cell, over=Time)(init, xp)], [t.array for t in last], 1e-5
        )
        hs, cs = ax.scan(cell, over=Time)(init, xp)
        assert hs.axes == (Time, Batch, Hidden)
        close(hs.array, jnp.stack([h.array for h, _ in seen]), 1e-5)
    back, seen_back = _loop(cell, init, xs, list(range(5, -1, -1)))
    tree_close(
        [t.array for t in ax.fold(cell, over=Time, reverse=True)(init, xs)],
        [t.array for t in back],
        1e-5,
    )
    hs_back, _ = ax.scan(cell, over=Time, reverse=True, at=1)(init, xs)
    assert hs_back.axes == (Batch, Time, Hidden)
    close(arr(hs_back, Time, Batch, Hidden)[0], seen_back[-1][0].array, 1e-5)


def test_fold_gradients_equal_the_loop_and_use_one_scan(key: jax.Array) -> None:
    cell = ax.nn.GRUCell(In, Hidden, 3, 4, key=key)
    xs = rand((2, 5, 3), Batch, Time, In)
    init = cell.init_state({Batch: 2})

    def by_fold(c: Any) -> jax.Array:
        return ax.sum(ax.fold(c, over=Time)(init, xs), (Batch, Hidden)).array

    def by_loop(c: Any) -> jax.Array:
        return ax.sum(_loop(c, init, xs, range(5))[0], (Batch, Hidden)).array

    tree_close(jax.jit(jax.grad(by_fold))(cell), jax.jit(jax.grad(by_loop))(cell), 1e-5)
    jaxpr = str(jax.make_jaxpr(by_fold)(cell))
    assert jaxpr.count("scan[") == 1 and "length=5" in jaxpr


def test_mask_carries_the_state_over_padding(key: jax.Array) -> None:
    cell = ax.nn.RNNCell(In, Hidden, 2, 3, key=key)
    xs = rand((2, 5, 2), Batch, Time, In)
    lengths = [3, 5]
    mask = ax.tensor(np.arange(5)[None, :] < np.array(lengths)[:, None], Batch, Time)
    init = cell.init_state({Batch: 2})
    last = ax.fold(cell, over=Time)(init, xs, mask=mask)
    back = ax.fold(cell, over=Time, reverse=True)(init, xs, mask=mask)
    for b, n in enumerate(lengths):
        one = ax.index(xs, Batch, b)
        s0 = cell.init_state()
        close(last.array[b], _loop(cell, s0, one, range(n))[0].array, 1e-5)
        close(back.array[b], _loop(cell, s0, one, list(range(n - 1, -1, -1)))[0].array, 1e-5)
    hs = ax.scan(cell, over=Time)(init, xs, mask=mask)
    close(hs.array[3:, 0], jnp.broadcast_to(hs.array[2, 0], (2, 3)), 1e-6)


def test_recurrent_bidirectional_and_stacked_layers(key: jax.Array) -> None:
    k1, k2, k3 = jax.random.split(key, 3)
    fw, bw = ax.nn.GRUCell(In, Hidden, 3, 4, key=k1), ax.nn.GRUCell(In, Hidden, 3, 4, key=k2)
    xs = rand((2, 5, 3), Batch, Time, In)
    mask = ax.tensor(np.arange(5)[None, :] < np.array([[4], [5]]), Batch, Time)
    bi = ax.nn.Bidirectional(fw, bw, over=Time)
    out = bi(xs, mask=mask)
    assert out.axes == (Time, Batch, Hidden) and out.size(Hidden) == 8
    init = fw.init_state({Batch: 2})
    close(out.array[..., :4], ax.scan(fw, over=Time)(init, xs, mask=mask).array, 1e-6)
    close(out.array[..., 4:], ax.scan(bw, over=Time, reverse=True)(init, xs, mask=mask).array, 1e-6)
    top = ax.nn.Recurrent(ax.nn.LSTMCell(Hidden, Hidden, 8, 6, key=k3), over=Time)
    assert top.cell.weight_ih.axes == (ax.nn.Prev, Gate, Hidden)
    stack = ax.nn.Stacked([bi, top])
    y = stack(xs, mask=mask)
    assert y.axes == (Time, Batch, Hidden) and y.size(Hidden) == 6
    close(y.array, top(out, mask=mask).array, 1e-6)
    g = eqx.filter_grad(lambda m: jnp.sum(m(xs, mask=mask).array))(stack)
    assert np.all(np.isfinite(g.layers[1].cell.weight_hh.array))


def test_scan_errors(key: jax.Array) -> None:
    cell = ax.nn.RNNCell(In, Hidden, 2, 3, key=key)
    xs = ax.zeros((2, 4, 2), Batch, Time, In)
    init = cell.init_state({Batch: 2})
    with pytest.raises(
        ax.AxisError,
        match=r"Cannot fold over Out: xs=Tensor\[F32, Batch=2, "
        r"Time=4, In=2\] has no axis Out \(every input must have it\)",
    ):
        ax.fold(cell, over=Out)(init, xs)
    with pytest.raises(
        ax.AxisError,
        match=r"the unit returned \(Tensor\[F32, Hidden=3, "
        r"Batch=2\]\) but the state has axes \(\[Batch, Hidden\]\)",
    ):
        ax.scan(lambda s, x: ax.transpose(cell(s, x), Hidden, Batch), over=Time)(init, xs)
    with pytest.raises(
        ax.AxisError,
        match=r"Cannot apply RNNCell\(In -> Hidden=3\) to "
        r"state=Tensor\[F32, Hidden=3\] and x=Tensor\[F32, Batch=2, In=2\]: the "
        r"state's batch axes \(\) differ from the input's \(Batch\)",
    ):
        ax.fold(cell, over=Time)(cell.init_state(), xs)
    with pytest.raises(
        ax.AxisError,
        match=r"axis In of the input has size 2, the layer "
        r"expects 5",
    ):
        ax.nn.RNNCell(In, Hidden, 5, 3, key=key)(init, ax.index(xs, Time, 0))
    with pytest.raises(ax.AxisError, match=r"the inputs give it sizes \[3, 4\]"):
        ax.fold(lambda s, x: s, over=Time)(init, (xs, ax.zeros((3,), Time)))
    with pytest.raises(ValueError, match="Gate is reserved for the cell's weights"):
        ax.nn.LSTMCell(Gate, Hidden, 2, 2, key=key)


def test_fold_and_scan_unroll_on_graph_inputs(key: jax.Array) -> None:
    cell = ax.nn.LSTMCell(In, Hidden, 3, 4, key=key)
    xs_v = rand((2, 4, 3), Batch, Time, In)
    mask_v = ax.tensor(np.arange(4)[None, :] < np.array([[2], [4]]), Batch, Time)
    xs = ax.Input(ax.F32, Batch, Time, In, sizes={Time: 4, In: 3}, name="xs")
    mask = ax.Input(ax.Bool, Batch, Time, sizes={Time: 4}, name="mask")
    h0 = ax.Input(ax.F32, Batch, Hidden, sizes={Hidden: 4}, name="h0")
    graph_cell = ax.as_params(cell)
    h, c = ax.fold(graph_cell, over=Time, reverse=True)((h0, h0), xs, mask=mask)
    hs, _ = ax.scan(graph_cell, over=Time)((h0, h0), xs, mask=mask)
    assert isinstance(h, ax.Node) and h.axes == (Batch, Hidden)  # a part of one Loop node
    assert hs.axes == (Time, Batch, Hidden)
    run = ax.compile([h, hs], inputs=[xs, mask, h0])
    init = cell.init_state({Batch: 2})
    got_h, got_hs = run(xs_v, mask_v, init[0])
    close(
        got_h.array, ax.fold(cell, over=Time, reverse=True)(init, xs_v, mask=mask_v)[0].array, 1e-5
    )
    close(got_hs.array, ax.scan(cell, over=Time)(init, xs_v, mask=mask_v)[0].array, 1e-5)
    # one lax.scan, not unrolled: the length may stay open until the graph is called
    h_open, _ = ax.fold(graph_cell, over=Time)((h0, h0), ax.Input(ax.F32, Batch, Time, In))
    assert h_open.axes == (Batch, Hidden)


def test_recurrent_layer_on_a_graph_input_needs_an_initial_state(key: jax.Array) -> None:
    rnn = ax.as_params(ax.nn.Recurrent(ax.nn.GRUCell(In, Hidden, 3, 4, key=key), over=Time))
    xs = ax.Input(ax.F32, Batch, Time, In, sizes={Time: 3, In: 3})
    with pytest.raises(
        ax.AxisError,
        match=r"Cannot apply Recurrent to xs=Tensor\[F32, Batch=\?, "
        r"Time=3, In=3\]: the size of Batch is not known",
    ):
        rnn(xs)
    h0 = ax.Input(ax.F32, Batch, Hidden, sizes={Hidden: 4})
    ys = rnn(xs, init=h0)
    assert ys.axes == (Time, Batch, Hidden)
    xv = rand((2, 3, 3), Batch, Time, In)
    want = ax.as_values(rnn)(xv)
    close(
        ax.compile(ys, inputs=[xs, h0])(xv, ax.zeros((2, 4), Batch, Hidden)).array, want.array, 1e-5
    )
