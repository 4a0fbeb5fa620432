"""ax.compile: one jitted function of the inputs; call-time checks; no retracing."""

from __future__ import annotations

from typing import final

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import axjax as ax


@final
class Batch(ax.Axis): ...


@final
class In(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


@final
class Out(ax.Axis): ...


def _mlp(key: jax.Array) -> tuple[ax.Input, ax.Param, ax.Param, ax.Apply]:
    k1, k2 = jax.random.split(key)
    x = ax.Input(ax.F32, Batch, In, sizes={In: 3}, name="x")
    w = ax.Param(ax.normal(k1, (3, 4), In, Hidden), name="w")
    b = ax.Param(ax.normal(k2, (4,), Hidden), name="b")
    h = x @ w
    y = ax.tanh(h + ax.broadcast(b, h))
    return x, w, b, y


def test_compiled_graph_equals_eager_code(key: jax.Array) -> None:
    x, w, b, y = _mlp(key)
    f = ax.compile(y, inputs=[x])
    xs = ax.normal(jax.random.key(1), (5, 3), Batch, In)
    out = f(xs)
    eager = ax.tanh(xs @ w.value + ax.broadcast(b.value, (Batch, Hidden), sizes={Batch: 5}))
    assert isinstance(out, ax.Tensor) and out.axes == (Batch, Hidden)
    np.testing.assert_allclose(out.array, eager.array, rtol=1e-6)
    np.testing.assert_allclose(f(xs.array).array, eager.array, rtol=1e-6)  # a bare array
    np.testing.assert_allclose(f(x=xs).array, eager.array, rtol=1e-6)  # by name


def test_outputs_as_list_and_dict(key: jax.Array) -> None:
    x, w, b, y = _mlp(key)
    s = ax.sum(y, Hidden)
    xs = jnp.ones((2, 3))
    pair = ax.compile([y, s], inputs=[x])(xs)
    assert isinstance(pair, tuple) and pair[0].axes == (Batch, Hidden) and pair[1].axes == (Batch,)
    named = ax.compile({"y": y, "s": s}, inputs=[x])(xs)
    assert set(named) == {"y", "s"}
    np.testing.assert_allclose(named["s"].array, pair[1].array)
    leaf = ax.compile(w)()  # a leaf as output, no inputs at all
    np.testing.assert_array_equal(leaf.array, w.value.array)


def test_one_trace_per_distinct_input_sizes(key: jax.Array) -> None:
    x, w, b, y = _mlp(key)
    f = ax.compile(y, inputs=[x])
    for _ in range(3):
        f(jnp.ones((4, 3)))
    assert f.trace_count == 1
    f(jnp.ones((7, 3)))
    f(jnp.ones((4, 3)))
    assert f.trace_count == 2
    f(jnp.ones((4, 3)), params={w: ax.zeros((3, 4), In, Hidden)})  # new values: no retrace
    assert f.trace_count == 2


def test_params_override(key: jax.Array) -> None:
    x, w, b, y = _mlp(key)
    f = ax.compile(y, inputs=[x])
    xs = jnp.ones((2, 3))
    zero_w = w.replace(ax.zeros((3, 4), In, Hidden))
    zero_b = b.replace(ax.zeros((4,), Hidden))
    for params in (
        [zero_w, zero_b],
        {w: zero_w.value, b: zero_b.value},
        {"layer": (zero_w, zero_b), "scale": 2.0},
    ):
        np.testing.assert_array_equal(f(xs, params=params).array, np.zeros((2, 4)))
    other = ax.Param(ax.ones((1,), Out))
    np.testing.assert_array_equal(f(xs, params=[other]).array, f(xs).array)  # not in graph
    with pytest.raises(
        ax.AxisError,
        match=r"Param w is Tensor\[F32, In=3, Hidden=4\], got "
        r"Tensor\[F32, In=3, Hidden=5\]: axis Hidden has size 5, expected 4",
    ):
        f(xs, params={w: ax.zeros((3, 5), In, Hidden)})
    with pytest.raises(TypeError, match=r"params= holds no Params \(give \{param: value\}"):
        f(xs, params={"w": zero_w.value})
    with pytest.raises(TypeError, match="params= maps Params to values, got key 'b'"):
        f(xs, params={w: zero_w.value, "b": zero_b.value})


def test_call_errors_name_the_input(key: jax.Array) -> None:
    x, w, b, y = _mlp(key)
    f = ax.compile(y, inputs=[x])
    head = r"Cannot call the compiled graph: input x is Tensor\[F32, Batch=\?, In=3\], got "
    with pytest.raises(
        ax.AxisError,
        match=head + r"Tensor\[F32, Batch=2, In=4\]: axis In "
        r"has size 4, expected 3",
    ):
        f(ax.zeros((2, 4), Batch, In))
    with pytest.raises(
        ax.AxisError,
        match=head + r"Tensor\[F32, In=3, Batch=2\]: same axes "
        r"in a different order \(transpose it first\)",
    ):
        f(ax.zeros((3, 2), In, Batch))
    with pytest.raises(
        ax.AxisError,
        match=head + r"Tensor\[F32, Batch=2, Out=3\]: the axes "
        "differ",
    ):
        f(ax.zeros((2, 3), Batch, Out))
    with pytest.raises(
        ax.AxisError,
        match=head + r"Tensor\[I32, Batch=2, In=3\]: dtype I32 "
        r"differs \(convert it with astype\(ax.F32\)\)",
    ):
        f(ax.zeros((2, 3), Batch, In, dtype=ax.I32))
    with pytest.raises(
        ax.AxisError,
        match=head + r"an array of shape \(3,\): 1 dimension for "
        "2 axes",
    ):
        f(jnp.ones(3))
    with pytest.raises(ax.AxisError, match=head + r"Tensor\[F32, Batch=2, In=2\]: axis In has"):
        f(np.ones((2, 2)))
    with pytest.raises(TypeError, match=r"takes 1 input \(x\) but 2 were given"):
        f(jnp.ones((2, 3)), jnp.ones((2, 3)))
    with pytest.raises(TypeError, match=r"missing input x \(inputs: x\)"):
        f()
    with pytest.raises(TypeError, match=r"unknown input 'z' \(inputs: x\)"):
        f(z=jnp.ones((2, 3)))
    with pytest.raises(TypeError, match="got input 'x' twice"):
        f(jnp.ones((2, 3)), x=jnp.ones((2, 3)))
    with pytest.raises(TypeError, match="got the graph node"):
        f(x)


def test_array_dtypes_convert_only_without_loss() -> None:
    i = ax.Input(ax.I32, Batch, name="i")
    f = ax.compile(i * 2, inputs=[i])
    assert f(np.array([1, 2], np.int64)).dtype is ax.I32
    with pytest.raises(
        ax.AxisError, match="array of dtype float32: it cannot become I32 without losing values"
    ):
        f(jnp.array([1.5, 2.0]))
    x = ax.Input(ax.F32, Batch)
    np.testing.assert_array_equal(ax.compile(x + 1.0)([0, 1]).array, [1.0, 2.0])  # list, ints


def test_compile_time_errors(key: jax.Array) -> None:
    x, w, b, y = _mlp(key)
    t = ax.Input(ax.F32, Batch, Out, name="t")
    loss = ax.sum(ax.sum(ax.square(ax.rename(y, Hidden, Out) - t), Out), Batch)
    with pytest.raises(
        TypeError,
        match=r"the outputs depend on t \(Input t: Tensor\[F32, "
        r"Batch=\?, Out=\?\]\), which is not in inputs= \(it lists x; add it\)",
    ):
        ax.compile(loss, inputs=[x])
    with pytest.raises(TypeError, match="the graph has inputs x, t; pass inputs="):
        ax.compile(loss)
    with pytest.raises(
        TypeError,
        match=r"Input t: .* is listed in inputs= but the outputs "
        r"do not use it \(remove it\)",
    ):
        ax.compile(y, inputs=[x, t])
    with pytest.raises(
        TypeError,
        match="inputs= lists ax.Input nodes, got Param w.*Params and Consts carry their own values",
    ):
        ax.compile(y, inputs=[x, w])
    with pytest.raises(TypeError, match="an Input is listed twice"):
        ax.compile(y, inputs=[x, x])
    with pytest.raises(
        TypeError,
        match=r"outputs must be graph nodes, got Tensor\[F32, "
        r"Batch=2\] \(an eager value",
    ):
        ax.compile(ax.ones((2,), Batch))
    with pytest.raises(TypeError, match="give at least one output node"):
        ax.compile([])


def test_sizes_that_disagree_at_the_call_fail_with_the_node_and_its_line() -> None:
    a = ax.Input(ax.F32, Batch, name="a")
    c = ax.Input(ax.F32, Batch, name="c")
    s = a + c
    f = ax.compile(s, inputs=[a, c])
    with pytest.raises(ax.AxisError, match="axis Batch has size 2 in one operand and 3") as info:
        f(jnp.ones(2), jnp.ones(3))
    assert any(
        "while running graph node %2 = Add(a, c), built at test_graph_compile.py:" in note
        for note in getattr(info.value, "__notes__", [])
    )


def test_open_sizes_broadcast_from_a_node(key: jax.Array) -> None:
    x, w, b, y = _mlp(key)
    assert y.args[0].args[1].op.name == "BroadcastLike"  # type: ignore[attr-defined]
    f = ax.compile(y, inputs=[x])
    assert f(jnp.ones((1, 3))).shape == (1, 4) and f(jnp.ones((6, 3))).shape == (6, 4)


def test_a_fifty_layer_mlp_builds_and_compiles_in_linear_size() -> None:
    x = ax.Input(ax.F32, Batch, Hidden, sizes={Hidden: 8}, name="x")
    h = x
    keys = jax.random.split(jax.random.key(0), 50)
    for i in range(50):
        w = ax.Param(ax.normal(keys[i], (8, 8), Hidden, Out, stddev=0.3), name=f"w{i}")
        b = ax.Param(ax.zeros((8,), Out), name=f"b{i}")
        z = h @ w
        h = ax.rename(ax.relu(z + ax.broadcast(b, z)), Out, Hidden)
    loss = ax.mean(ax.sum(h, Hidden), Batch)
    g = ax.Graph(loss)
    # per layer: w, b, matmul, broadcast, add, relu, rename (7); plus x, sum, mean
    assert len(g) == 7 * 50 + 3 and len(g.params) == 100 and len(g.inputs) == 1
    f = ax.compile(loss, inputs=[x])
    xs = ax.normal(jax.random.key(1), (4, 8), Batch, Hidden)
    v1, v2 = f(xs), f(xs)
    assert f.trace_count == 1 and float(v1) == float(v2)
    eager = xs
    for i in range(50):
        wv, bv = g.params[2 * i].value, g.params[2 * i + 1].value
        z = eager @ wv
        eager = ax.rename(ax.relu(z + ax.broadcast(bv, z)), Out, Hidden)
    np.testing.assert_allclose(float(v1), float(ax.mean(ax.sum(eager, Hidden), Batch)), rtol=1e-5)
    step = ax.compile_step(loss, optax.sgd(1e-3), inputs=[x])
    step(xs)
    step(xs)
    assert step.trace_count == 1
