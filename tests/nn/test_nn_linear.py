"""Affine, Linear, MLP and Sequential: Equinox/jnp oracles, axis orders, errors, lowering."""

from __future__ import annotations

import collections
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from tests.nn.helpers import (
    Batch,
    Extra,
    Hidden,
    Hidden2,
    In,
    Out,
    Time,
    arr,
    close,
    grad_pair,
    orders,
    rand,
    tree_close,
)


def _eqx_linear(layer: ax.nn.Affine[Any, Any, Any], key: jax.Array) -> eqx.nn.Linear:
    n_out, n_in = layer.weight.shape
    lin = eqx.nn.Linear(n_in, n_out, key=key)
    return eqx.tree_at(lambda m: (m.weight, m.bias), lin, (layer.weight.array, layer.bias.array))


def test_affine_matches_equinox_linear_values_and_grads(key: jax.Array) -> None:
    k1, k2, k3 = jax.random.split(key, 3)
    layer = ax.nn.Affine(In, Out, 5, 3, key=k1, bias_init=ax.nn.init.normal(1.0))
    assert layer.weight.axes == (Out, In) and layer.bias.axes == (Out,)
    ref = _eqx_linear(layer, k2)
    x = rand((4, 5), Batch, In, seed=1)
    y = layer(x)
    assert y.axes == (Batch, Out)
    close(y.array, jax.vmap(ref)(x.array))

    def ax_loss(w: jax.Array, b: jax.Array, xa: jax.Array) -> jax.Array:
        lay = eqx.tree_at(
            lambda m: (m.weight, m.bias), layer, (ax.tensor(w, Out, In), ax.tensor(b, Out))
        )
        return jnp.sum(jnp.sin(lay(ax.tensor(xa, Batch, In)).array))

    def oracle(w: jax.Array, b: jax.Array, xa: jax.Array) -> jax.Array:
        return jnp.sum(jnp.sin(xa @ w.T + b[None, :]))

    grad_pair(ax_loss, oracle, (layer.weight.array, layer.bias.array, x.array))


def test_affine_model_gradient_is_a_model(key: jax.Array) -> None:
    layer = ax.nn.Affine(In, Out, 3, 2, key=key)
    x = rand((4, 3), Batch, In, seed=2)
    g = ax.grad(lambda m: ax.sum(m(x), (Batch, Out)))(layer)
    assert isinstance(g, ax.nn.Affine) and g.weight.axes == (Out, In)
    close(g.weight.array, np.broadcast_to(np.asarray(x.array).sum(0), (2, 3)))
    close(g.bias.array, np.full(2, 4.0))


def test_affine_any_leading_axes_and_any_order(key: jax.Array) -> None:
    layer = ax.nn.Affine(In, Out, 4, 3, key=key)
    x = rand((2, 5, 4), Batch, Time, In, seed=3)
    want = np.einsum("bti,oi->bto", np.asarray(x.array), np.asarray(layer.weight.array))
    for xp in orders(x, 6):
        y = layer(xp)
        assert y.axes[-1] is Out
        close(arr(y, Batch, Time, Out), want)
    vec = layer(ax.index(ax.index(x, Batch, 0), Time, 0))
    assert vec.axes == (Out,)


def test_linear_has_no_bias(key: jax.Array) -> None:
    lin = ax.nn.Linear(In, Out, 4, 2, key=key)
    assert not hasattr(lin, "bias")
    x = rand((3, 4), Batch, In, seed=4)
    close(lin(x).array, np.asarray(x.array) @ np.asarray(lin.weight.array).T)


def test_mlp_matches_hand_written_jax(key: jax.Array) -> None:
    mlp = ax.nn.MLP(
        In,
        Out,
        6,
        3,
        hidden={Hidden: 5, Hidden2: 4},
        activation=ax.tanh,
        final_activation=ax.sigmoid,
        key=key,
    )
    assert [(lay.in_axis, lay.out_axis) for lay in mlp.layers] == [
        (In, Hidden),
        (Hidden, Hidden2),
        (Hidden2, Out),
    ]
    x = rand((7, 6), Batch, In, seed=5)

    def oracle(params: list[tuple[jax.Array, jax.Array]], xa: jax.Array) -> jax.Array:
        for w, b in params[:-1]:
            xa = jnp.tanh(xa @ w.T + b[None, :])
        w, b = params[-1]
        return jax.nn.sigmoid(xa @ w.T + b[None, :])

    params = [(lay.weight.array, lay.bias.array) for lay in mlp.layers]
    close(mlp(x).array, oracle(params, x.array))
    g = ax.grad(lambda m: ax.sum(m(x), (Batch, Out)))(mlp)
    g_ref = jax.grad(lambda p: jnp.sum(oracle(p, x.array)))(params)
    tree_close([(lay.weight.array, lay.bias.array) for lay in g.layers], g_ref)


def test_mlp_under_jit_and_vmap(key: jax.Array) -> None:
    mlp = ax.nn.MLP(In, Out, 3, 2, hidden={Hidden: 4}, key=key)
    x = rand((5, 3), Batch, In, seed=6)
    close(jax.jit(lambda m, v: m(v))(mlp, x).array, mlp(x).array)
    per_example = ax.vmap(lambda v: mlp(v), over=Batch)(x)
    close(per_example.array, mlp(x).array)


def _count(jaxpr: Any, c: collections.Counter[str] | None = None) -> collections.Counter[str]:
    c = collections.Counter() if c is None else c
    for eqn in jaxpr.eqns:
        c[eqn.primitive.name] += 1
        for v in eqn.params.values():
            for sub in v if isinstance(v, list | tuple) else [v]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    _count(inner, c)
    return c


def test_mlp_lowers_to_dot_general_without_transposes(key: jax.Array) -> None:
    mlp = ax.nn.MLP(In, Out, 6, 3, hidden={Hidden: 5}, key=key)
    x = rand((4, 6), Batch, In, seed=7)
    fwd = _count(jax.make_jaxpr(lambda m: mlp(x).array)(mlp).jaxpr)
    assert fwd["dot_general"] == 2 and fwd["transpose"] == 0
    assert fwd["broadcast_in_dim"] == 2  # one per bias, as in x @ W.T + b

    def loss(m: Any) -> jax.Array:
        return ax.sum(m(x), (Batch, Out)).array

    bwd = _count(jax.make_jaxpr(jax.grad(loss))(mlp).jaxpr)
    assert bwd["transpose"] == 0
    assert bwd["dot_general"] == 6  # forward + two cotangents per layer


def test_affine_errors_name_the_layer_and_operand(key: jax.Array) -> None:
    layer = ax.nn.Affine(In, Out, 4, 3, key=key)
    with pytest.raises(
        ax.AxisError,
        match=r"Cannot apply Affine\(In=4 -> Out=3\) to "
        r"x=Tensor\[F32, Batch=2, Hidden=4\]: In is not an axis of the input",
    ):
        layer(ax.zeros((2, 4), Batch, Hidden))
    with pytest.raises(
        ax.AxisError,
        match=r"axis In of the input has size 5, the layer "
        r"expects 4",
    ):
        layer(ax.zeros((2, 5), Batch, In))
    with pytest.raises(ax.AxisError, match=r"the input already has axis Out"):
        layer(ax.zeros((2, 4), Out, In))
    with pytest.raises(ax.AxisError, match=r"the input is BF16, the layer's parameters F32"):
        layer(ax.zeros((2, 4), Batch, In, dtype=ax.BF16))
    # a layer from an axis to itself keeps its output rows on the role ax.Out[In] (issue 34)
    assert ax.nn.Affine(In, In, 4, 4, key=key).weight.axes == (ax.Out[In], In)
    with pytest.raises(ax.AxisError, match=r"MLP: the axes \(In, Hidden, Out, Out\)"):
        ax.nn.MLP(In, Out, 2, 2, hidden={Hidden: 3, Out: 2}, key=key)
    with pytest.raises(TypeError, match="not an axis label"):
        ax.nn.Affine(In, "Out", 4, 3, key=key)  # type: ignore[arg-type]


def test_sequential_threads_keys_and_wraps_functions(key: jax.Array) -> None:
    k1, k2 = jax.random.split(key)
    model = ax.nn.Sequential(
        [
            ax.nn.Affine(In, Hidden, 3, 8, key=k1),
            ax.relu,
            ax.nn.Dropout(0.5),
            ax.nn.Affine(Hidden, Out, 8, 2, key=k2),
        ]
    )
    assert len(model) == 4 and isinstance(model[1], ax.nn.Lambda)
    assert isinstance(model[:2], ax.nn.Sequential) and len(model[:2]) == 2
    x = rand((4, 3), Batch, In, seed=8)
    a = model(x, key=jax.random.key(1))
    b = model(x, key=jax.random.key(2))
    assert not np.allclose(a.array, b.array)  # dropout drew different masks
    infer = eqx.nn.inference_mode(model)
    want = model[3](ax.relu(model[0](x)))
    close(infer(x).array, want.array)
    close(eqx.filter_jit(lambda m, v: m(v))(infer, x).array, want.array)
    with pytest.raises(TypeError, match="the inference flag is a traced value"):
        jax.jit(lambda m, v: m(v))(infer, x)  # jax.jit traces the bool: use filter_jit
    with pytest.raises(TypeError, match="is not callable"):
        ax.nn.Sequential([ax.relu, 3])  # type: ignore[list-item]


def test_layers_build_a_graph_that_compiles_to_the_eager_result(key: jax.Array) -> None:
    mlp = ax.nn.MLP(In, Out, 4, 3, hidden={Hidden: 5}, key=key)
    x = ax.Input(ax.F32, Batch, In, sizes={In: 4}, name="x")
    y = ax.as_params(mlp)(x)
    assert isinstance(y, ax.Apply) and y.axes == (Batch, Out)
    xv = rand((2, 4), Batch, In, seed=9)
    close(ax.compile(y, inputs=[x])(xv).array, mlp(xv).array)
    with pytest.raises(
        ax.AxisError,
        match=r"Cannot apply Affine\(In=4 -> Hidden=5\) to "
        r"Tensor\[F32, Batch=\?, Extra=\?\]",
    ):
        ax.as_params(mlp)(ax.Input(ax.F32, Batch, Extra))
