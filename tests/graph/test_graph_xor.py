"""The paper's XOR network as a graph: Inputs, Params, Affine + sigmoid, trained to 100 %."""

from __future__ import annotations

from typing import Any, final

import jax
import jax.numpy as jnp
import numpy as np
import optax

import axjax as ax


@final
class Batch(ax.Axis): ...


@final
class In(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


@final
class Out(ax.Axis): ...


XS = jnp.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
YS = jnp.array([[0.0], [1.0], [1.0], [0.0]])


def affine(x: Any, w: Any, b: Any) -> Any:
    """``x ⋈ w + b`` on named axes (the bias is broadcast to the product's axes)."""
    z = x @ w
    return z + ax.broadcast(b, z)


def cross_entropy(p: Any, y: Any) -> Any:
    eps = 1e-6
    per = y * ax.log(p + eps) + (1.0 - y) * ax.log(1.0 - p + eps)
    return -ax.mean(ax.sum(per, Out), Batch)


def test_xor_graph_trains_to_full_accuracy() -> None:
    k1, k2 = jax.random.split(jax.random.key(0))
    x = ax.Input(ax.F32, Batch, In, sizes={In: 2}, name="x")
    y = ax.Input(ax.F32, Batch, Out, sizes={Out: 1}, name="y")
    w1 = ax.Param(ax.normal(k1, (2, 4), In, Hidden), name="w1")
    b1 = ax.Param(ax.zeros((4,), Hidden), name="b1")
    w2 = ax.Param(ax.normal(k2, (4, 1), Hidden, Out), name="w2")
    b2 = ax.Param(ax.zeros((1,), Out), name="b2")
    p = ax.sigmoid(affine(ax.sigmoid(affine(x, w1, b1)), w2, b2))
    loss = cross_entropy(p, y)
    graph = ax.Graph({"loss": loss, "p": p})
    assert set(graph.inputs) == {x, y} and set(graph.params) == {w1, b1, w2, b2}

    step = ax.compile_step(loss, optax.adam(0.1), inputs=[x, y])
    first = float(step(XS, YS))
    for _ in range(300):
        last = float(step(XS, YS))
    assert last < 0.05 < first and step.trace_count == 1

    predict = ax.compile(p, inputs=[x])
    out = predict(XS, params=step.params)
    assert out.axes == (Batch, Out)
    np.testing.assert_array_equal(np.asarray(out.array) > 0.5, np.asarray(YS) > 0.5)


def test_xor_with_nn_layers_trains_to_full_accuracy() -> None:
    mlp = ax.nn.MLP(
        In,
        Out,
        2,
        1,
        hidden={Hidden: 4},
        activation=ax.sigmoid,
        final_activation=ax.sigmoid,
        key=jax.random.key(1),
    )
    model = ax.as_params(mlp)
    x = ax.Input(ax.F32, Batch, In, sizes={In: 2}, name="x")
    y = ax.Input(ax.F32, Batch, Out, sizes={Out: 1}, name="y")
    p = model(x)
    assert isinstance(p, ax.Apply) and p.axes == (Batch, Out)
    loss = cross_entropy(p, y)
    assert {q.name for q in ax.Graph(loss).params} == {
        "layers.0.weight",
        "layers.0.bias",
        "layers.1.weight",
        "layers.1.bias",
    }

    step = ax.compile_step(loss, optax.adam(0.1), inputs=[x, y])
    for _ in range(300):
        last = float(step(XS, YS))
    assert last < 0.05

    trained = ax.as_values(model, step.params)  # an eager MLP again
    out = trained(ax.tensor(XS, Batch, In))
    np.testing.assert_array_equal(np.asarray(out.array) > 0.5, np.asarray(YS) > 0.5)
    graph_out = ax.compile(p, inputs=[x])(XS, params=step.params)
    np.testing.assert_allclose(graph_out.array, out.array, rtol=1e-5, atol=1e-6)
