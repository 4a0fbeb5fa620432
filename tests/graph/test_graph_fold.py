"""Recurrences in a graph: ``ax.nn.fold`` / ``ax.nn.scan`` on nodes build one Loop node.

The graph form must equal the eager one (values and gradients, any axis order of the
sequences, reverse, masks), train under ``ax.compile_step`` with one trace, list its body,
draw as one box, and report axis mistakes inside the body when the graph is built.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import axjax as ax
from axjax.graph import Loop, Part
from axjax.graph._loop import Carry, Slice
from tests.axes import Batch, Class, Hidden, In, Time

AnyT = ax.Tensor[Any, *tuple[Any, ...]]
B, T, N_IN, H = 3, 5, 2, 4


def _rand(seed: int, *axes: type[ax.Axis]) -> AnyT:
    size = {Batch: B, Time: T, In: N_IN, Hidden: H}
    shape = tuple(size[a] for a in axes)
    return ax.tensor(np.random.default_rng(seed).normal(size=shape).astype(np.float32), *axes)


def _close(a: Any, b: Any, tol: float = 1e-5) -> None:
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def _mask() -> AnyT:  # the sequences have lengths 2, 5 and 4, right-padded
    lengths = np.array([[2], [5], [4]])
    return ax.tensor(np.arange(T)[None, :] < lengths, Batch, Time)


CASES = [  # (kind, xs axes, reverse, masked, at)
    ("fold", (Batch, Time, In), False, False, 0),
    ("fold", (Time, Batch, In), True, False, 0),
    ("fold", (In, Batch, Time), False, True, 0),
    ("fold", (Batch, In, Time), True, True, 0),
    ("scan", (Batch, Time, In), False, False, 0),
    ("scan", (Time, In, Batch), True, False, 1),
    ("scan", (In, Time, Batch), False, True, -1),
    ("scan", (Batch, Time, In), True, True, 2),
]


@pytest.mark.parametrize(("kind", "order", "reverse", "masked", "at"), CASES)
def test_graph_fold_and_scan_equal_eager(
    kind: str, order: tuple[type[ax.Axis], ...], reverse: bool, masked: bool, at: int
) -> None:
    cell = ax.nn.LSTMCell(In, Hidden, N_IN, H, key=jax.random.key(1))
    model = ax.as_params(cell)
    xs_v = _rand(2, *order)
    init = (_rand(3, Batch, Hidden), _rand(4, Batch, Hidden))
    mask_v = _mask() if masked else None

    def run(unit: Any, state: Any, xs: Any, mask: Any) -> Any:
        if kind == "fold":
            return ax.nn.fold(unit, over=Time, reverse=reverse)(state, xs, mask=mask)
        return ax.nn.scan(unit, over=Time, reverse=reverse, at=at)(state, xs, mask=mask)

    xs = ax.Input(ax.F32, *order, sizes={In: N_IN}, name="xs")
    h0 = ax.Input(ax.F32, Batch, Hidden, sizes={Hidden: H}, name="h0")
    c0 = ax.Input(ax.F32, Batch, Hidden, sizes={Hidden: H}, name="c0")
    mask = ax.Input(ax.Bool, Batch, Time, name="mask") if masked else None
    h, c = run(model, (h0, c0), xs, mask)
    assert isinstance(h, Part) and isinstance(c, Part) and h.loop is c.loop
    assert sum(isinstance(n, Loop) for n in ax.Graph([h, c]).nodes) == 1
    want_h, want_c = run(cell, init, xs_v, mask_v)
    assert h.axes == want_h.axes and c.axes == want_c.axes
    inputs = [xs, h0, c0, *([mask] if mask is not None else [])]
    args = [xs_v, *init, *([mask_v] if mask_v is not None else [])]
    got_h, got_c = ax.compile([h, c], inputs=inputs)(*args)
    _close(got_h.array, want_h.array)
    _close(got_c.array, want_c.array)

    # gradients: the graph's (each op's backward, through lax.scan) and eager jax.grad's
    loss = (
        ax.sum(ax.sum(ax.sum(h * c, Hidden), Batch), Time)
        if kind == "scan"
        else ax.sum(ax.sum(h * c, Hidden), Batch)
    )
    value, grads = ax.value_and_grad(loss, inputs=inputs)(*args)
    params = ax.Graph(loss).params
    assert {p.name for p in params} == {"weight_ih", "weight_hh", "bias"}

    def eager_loss(values: Any) -> Any:
        hh, cc = run(
            ax.as_values(model, dict(zip(params, values, strict=True))), init, xs_v, mask_v
        )
        return jnp.sum(hh.array * cc.array)

    want_value, want_grads = jax.value_and_grad(eager_loss)(tuple(p.value for p in params))
    _close(value.array, want_value)
    for g, w in zip(grads, want_grads, strict=True):
        assert g.axes == w.axes
        _close(g.array, w.array)


def _unit(w: Any, gain: Any) -> Any:
    """A unit over a dict state and a pair of sequences that closes over ``w`` and ``gain``."""

    def unit(state: Any, x: Any) -> Any:
        a, b = x
        z = a @ w + b
        new = ax.tanh(z + state["h"] * ax.broadcast(gain, z))
        return {"h": new, "n": state["n"] + 1.0}

    return unit


def test_a_unit_closing_over_outer_nodes_with_a_pytree_of_sequences() -> None:
    w = ax.Param(_rand(5, In, Hidden), name="w")
    scale = ax.Input(ax.F32, Hidden, sizes={Hidden: H}, name="scale")
    gain = ax.tanh(scale)  # built outside the loop: the body captures it
    a = ax.Input(ax.F32, Batch, Time, In, sizes={In: N_IN}, name="a")
    b = ax.Input(ax.F32, Time, Batch, Hidden, sizes={Hidden: H}, name="b")
    state = {"h": ax.zeros((B, H), Batch, Hidden), "n": ax.zeros((B, H), Batch, Hidden)}
    out = ax.nn.scan(_unit(w, gain), over=Time)(state, (a, b))
    loop = out["h"].loop
    assert set(loop.captured) >= {w, gain} and scale not in loop.captured
    assert len(loop.carries) == 2 and len(loop.slices) == 2
    assert all(isinstance(n, Carry) for n in loop.carries)
    assert all(isinstance(n, Slice) for n in loop.slices)
    av, bv, sv = _rand(6, Batch, Time, In), _rand(7, Time, Batch, Hidden), _rand(8, Hidden)
    got = ax.compile(out, inputs=[a, b, scale])(av, bv, sv)
    want = ax.nn.scan(_unit(w.value, ax.tanh(sv)), over=Time)(state, (av, bv))
    _close(got["h"].array, want["h"].array)
    _close(got["n"].array, np.full((T, B, H), 1.0) * np.arange(1, T + 1)[:, None, None])


def test_nested_folds_and_an_open_length() -> None:
    w = ax.Param(_rand(9, In, Hidden), name="w")

    def inner(acc: Any, v: Any) -> Any:  # v: one entry of the In axis, [Batch]
        return acc + ax.broadcast(v, acc)

    def outer(h: Any, x: Any) -> Any:  # x: [Batch, In]; the inner fold reads the carry h
        s = ax.nn.fold(inner, over=In)(h, x)
        return ax.tanh(x @ w + s)

    xs = ax.Input(ax.F32, Batch, Time, In, name="xs")  # Time and In open
    h0 = ax.Input(ax.F32, Batch, Hidden, sizes={Hidden: H}, name="h0")
    h = ax.nn.fold(outer, over=Time)(h0, xs)
    hs = ax.nn.scan(outer, over=Time)(h0, xs)
    assert hs.type == ax.TensorType(ax.F32, (Time, Batch, Hidden), (None, None, H))
    graph = ax.Graph({"h": h, "hs": hs})
    assert len(graph.loops) == 4  # two outer loops, each with an inner one in its body
    xv, hv = _rand(10, Batch, Time, In), _rand(11, Batch, Hidden)
    got_h, got_hs = ax.compile([h, hs], inputs=[xs, h0])(xv, hv)

    def eager_outer(s: Any, x: Any) -> Any:
        return ax.tanh(x @ w.value + ax.nn.fold(inner, over=In)(s, x))

    _close(got_h.array, ax.nn.fold(eager_outer, over=Time)(hv, xv).array)
    _close(got_hs.array, ax.nn.scan(eager_outer, over=Time)(hv, xv).array)
    g = ax.grad(ax.sum(ax.sum(h, Hidden), Batch), wrt=w, inputs=[xs, h0])(xv, hv)
    want = jax.grad(
        lambda wv: jnp.sum(
            ax.nn.fold(lambda s, x: ax.tanh(x @ wv + ax.nn.fold(inner, over=In)(s, x)), over=Time)(
                hv, xv
            ).array
        )
    )(w.value)
    _close(g.array, want.array)


class Classifier:
    """An LSTM over the rows, then a dense layer from the last hidden state."""

    def __init__(self, key: jax.Array) -> None:
        k1, k2 = jax.random.split(key)
        self.cell = ax.nn.LSTMCell(In, Hidden, N_IN, 8, key=k1)
        self.head = ax.nn.Affine(Hidden, Class, 8, 2, key=k2)

    def logits(self, cell: Any, head: Any, xs: Any, init: Any) -> Any:
        h, _ = ax.nn.fold(cell, over=Time)(init, xs)
        return head(h)


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sequences whose class is whether their first feature sums to more than zero."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, T, N_IN)).astype(np.float32)
    return x, (x[:, :, 0].sum(1) > 0).astype(np.int32)


def test_lstm_classifier_graph_trains_with_one_trace() -> None:
    net = Classifier(jax.random.key(2))
    cell, head = ax.as_params(net.cell, "cell."), ax.as_params(net.head, "head.")
    x = ax.Input(ax.F32, Batch, Time, In, sizes={In: N_IN}, name="x")
    y = ax.Input(ax.I32, Batch, name="y")
    init = cell.init_state({Batch: 32})
    logits = net.logits(cell, head, x, init)
    loss = ax.mean(ax.train.softmax_cross_entropy(logits, y, Class), Batch)
    graph = ax.Graph(loss)
    assert sum(isinstance(n, Loop) for n in graph.nodes) == 1
    assert {p.name for p in graph.params} == {
        "cell.weight_ih",
        "cell.weight_hh",
        "cell.bias",
        "head.weight",
        "head.bias",
    }
    step = ax.compile_step(loss, optax.adam(0.03), inputs=[x, y])
    xs, ys = _data(32 * 8, 0)
    losses = [
        float(step(xs[i % 8 * 32 : (i % 8 + 1) * 32], ys[i % 8 * 32 : (i % 8 + 1) * 32]))
        for i in range(80)
    ]
    assert np.mean(losses[-8:]) < 0.6 * np.mean(losses[:8]), losses
    assert step.trace_count == 1
    # the trained weights, back in eager modules, give what the compiled graph gives
    xt = ax.tensor(xs[:32], Batch, Time, In)
    trained = net.logits(
        ax.as_values(cell, step.params),
        ax.as_values(head, step.params),
        xt,
        ax.as_values(cell, step.params).init_state({Batch: 32}),
    )
    predict = ax.compile(logits, inputs=[x])
    _close(predict(xt, params=step.params).array, trained.array, 1e-4)
    accuracy = np.mean(np.argmax(np.asarray(trained.array), -1) == ys[:32])
    assert accuracy > 0.8


def test_listing_shows_the_body_indented() -> None:
    w = ax.Param(ax.ones((2, 3), In, Hidden), name="w")
    xs = ax.Input(ax.F32, Batch, Time, In, sizes={In: 2}, name="xs")
    h0 = ax.Input(ax.F32, Batch, Hidden, sizes={Hidden: 3}, name="h0")
    h = ax.nn.fold(lambda s, x: ax.tanh(x @ w + s), over=Time, reverse=True)(h0, xs)
    graph = ax.Graph({"h": h})
    assert str(graph) == "\n".join(
        [
            "Graph: 2 inputs, 1 param, 0 consts, 5 nodes; outputs: h",
            "  name  op                   inputs     type",
            "  h0    Input                           Tensor[F32, Batch=?, Hidden=3]",
            "  xs    Input                           Tensor[F32, Batch=?, Time=?, In=2]",
            "  w     Param                           Tensor[F32, In=2, Hidden=3]",
            "  %3    Fold(Time, reverse)  h0, xs, w  Tensor[F32, Batch=?, Hidden=3]",
            "      state  Carry                Tensor[F32, Batch=?, Hidden=3]",
            "      xs[t]  Slice                Tensor[F32, Batch=?, In=2]",
            "      %3.2   MatMul  xs[t], w     Tensor[F32, Batch=?, Hidden=3]",
            "      %3.3   Add     %3.2, state  Tensor[F32, Batch=?, Hidden=3]",
            "      next   Tanh    %3.3         Tensor[F32, Batch=?, Hidden=3]",
            "  h     Part                 %3         Tensor[F32, Batch=?, Hidden=3]",
        ]
    )
    loop = graph.nodes[3]
    assert isinstance(loop, Loop) and graph.uses(loop) == [h] and h.args == (loop,)
    assert repr(loop) == "Loop Fold(Time, reverse): Tensor[F32, Batch=?, Hidden=3]"
    assert repr(h) == "Part of Fold(Time, reverse): Tensor[F32, Batch=?, Hidden=3]"
    assert graph.rows(loop.body)[-1] == ("next", "Tanh", "%3.3", "Tensor[F32, Batch=?, Hidden=3]")
    hs, _ = ax.nn.scan(lambda s, x: (s[0] + x, s[1]), over=Time, at=1)(
        (h0, h0), ax.Input(ax.F32, Time, Batch, Hidden, name="v")
    )
    assert hs.loop.describe() == "Scan(Time, at=1)" and hs.axes == (Batch, Time, Hidden)
    assert [r[1] for r in ax.Graph(hs).rows()][-2:] == ["Scan(Time, at=1)", "Part[0]"]
    with pytest.raises(TypeError, match=r"holds 2 results, not one Tensor: use its parts"):
        ax.exp(hs.loop)  # type: ignore[arg-type]


def test_drawing_shows_the_loop_as_one_box() -> None:
    w = ax.Param(ax.ones((2, 3), In, Hidden), name="w")
    xs = ax.Input(ax.F32, Batch, Time, In, sizes={In: 2}, name="xs")
    h0 = ax.Input(ax.F32, Batch, Hidden, sizes={Hidden: 3}, name="h0")
    h = ax.nn.fold(lambda s, x: ax.tanh(x @ w + s), over=Time)(h0, xs)
    graph = ax.Graph({"h": h})
    svg = graph.to_svg()
    assert svg.count("<rect") == len(graph) == 5  # the body is not drawn box by box
    assert "%3 = Fold(Time)" in svg and "body: 5 nodes, 1 result" in svg
    dot = graph.to_dot()
    assert dot.count("->") == 4 and "Fold(Time)" in dot


def test_axis_errors_inside_the_body_fail_when_the_graph_is_built() -> None:
    xs = ax.Input(ax.F32, Batch, Time, In, sizes={In: 2}, name="xs")
    h0 = ax.Input(ax.F32, Batch, Hidden, sizes={Hidden: 3}, name="h0")
    with pytest.raises(ax.AxisError) as info:
        ax.nn.fold(lambda s, x: s + x, over=Time)(h0, xs)
    assert str(info.value) == (
        "Cannot apply Add to Tensor[F32, Batch=?, Hidden=3] and Tensor[F32, Batch=?, In=2]: "
        "axes differ (elementwise ops need identical axes: use ax.broadcast, ax.transpose or "
        "ax.rename to line them up)"
    )
    cell = ax.as_params(ax.nn.GRUCell(In, Hidden, 5, 3, key=jax.random.key(0)))
    with pytest.raises(
        ax.AxisError,
        match=r"axis In of the input has size 2, the layer "
        r"expects 5",
    ):
        ax.nn.scan(cell, over=Time)(h0, xs)
    with pytest.raises(
        ax.AxisError,
        match=r"Cannot fold over Time: the unit returned "
        r"\(Tensor\[F32, Hidden=3, Batch=\?\]\) but the state has axes "
        r"\(\[Batch, Hidden\]\)",
    ):
        ax.nn.fold(lambda s, x: ax.transpose(s, Hidden, Batch), over=Time)(h0, xs)
    with pytest.raises(
        ax.AxisError,
        match=r"the unit returned Tensor\[F64, Batch=\?, "
        r"Hidden=3\] for the state Tensor\[F32, Batch=\?, Hidden=3\]",
    ):
        ax.nn.fold(lambda s, x: ax.astype(s, ax.F64), over=Time)(h0, xs)
    with pytest.raises(
        ax.AxisError,
        match=r"Cannot fold with mask Tensor\[Bool, Batch=\?, "
        r"In=2\]: the state Tensor\[F32, Batch=\?, Hidden=3\] has no axis In",
    ):
        ax.nn.fold(lambda s, x: s, over=Time)(
            h0, xs, mask=ax.Input(ax.Bool, Batch, Time, In, sizes={In: 2})
        )
    with pytest.raises(ax.AxisError, match=r"the inputs give it sizes \[4, 5\]"):
        ax.nn.fold(lambda s, x: s, over=Time)(
            h0,
            ax.Input(ax.F32, Batch, Time, sizes={Time: 4}),
            mask=ax.Input(ax.Bool, Batch, Time, sizes={Time: 5}),
        )


def test_a_body_node_used_outside_its_loop_is_a_clear_error() -> None:
    leaked: list[Any] = []

    def unit(s: Any, x: Any) -> Any:
        leaked.append(x)
        return s + ax.sum(x, In)

    xs = ax.Input(ax.F32, Batch, Time, In, name="xs")
    h = ax.nn.fold(unit, over=Time)(ax.Input(ax.F32, Batch, name="h0"), xs)
    with pytest.raises(
        TypeError,
        match=r"is a placeholder of a fold/scan body, with no value "
        r"outside it",
    ):
        ax.compile(h + ax.sum(leaked[0], In), inputs=[xs, h.loop.args[0]])
