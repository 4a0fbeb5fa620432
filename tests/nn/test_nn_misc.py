"""Embedding, Dropout, LayerNorm, RMSNorm and the initialisers."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from tests.nn.helpers import (
    Batch,
    Chan,
    Embed,
    Feature,
    Height,
    Hidden,
    In,
    Out,
    Time,
    Vocab,
    Width,
    arr,
    close,
    orders,
    rand,
)


def test_embedding_matches_equinox_and_scatters_gradients(key: jax.Array) -> None:
    emb = ax.nn.Embedding(Vocab, Embed, 10, 4, key=key)
    assert emb.weight.axes == (Vocab, Embed)
    ids = ax.tensor(np.array([[1, 3, 3], [0, 9, 1]], np.int32), Batch, Time)
    y = emb(ids)
    assert y.axes == (Batch, Time, Embed)
    ref = eqx.nn.Embedding(weight=emb.weight.array)
    close(y.array, jax.vmap(jax.vmap(ref))(ids.array))
    g = ax.grad(lambda m: ax.sum(m(ids), (Batch, Time, Embed)))(emb)
    counts = np.bincount(np.asarray(ids.array).ravel(), minlength=10).astype(np.float32)
    close(g.weight.array, np.repeat(counts[:, None], 4, axis=1))


def test_embedding_errors(key: jax.Array) -> None:
    emb = ax.nn.Embedding(Vocab, Embed, 10, 4, key=key)
    with pytest.raises(
        ax.AxisError,
        match=r"Cannot apply Embedding\(Vocab=10 -> Embed=4\) "
        r"to ids=Tensor\[F32, Batch=2\]: ids must be integers, got F32",
    ):
        emb(ax.zeros((2,), Batch))
    with pytest.raises(ax.AxisError, match=r"the ids already has axis Embed"):
        emb(ax.zeros((2,), Embed, dtype=ax.I32))


def test_dropout_training_inference_and_keys() -> None:
    x = ax.ones((200, 50), Batch, Hidden)
    drop = ax.nn.Dropout(0.25)
    y = np.asarray(drop(x, key=jax.random.key(0)).array)
    kept = y != 0
    assert 0.7 < kept.mean() < 0.8
    close(y[kept], np.full(kept.sum(), 1 / 0.75), 1e-6)
    assert drop(x, inference=True) is x
    assert eqx.nn.inference_mode(drop)(x) is x
    assert ax.nn.Dropout(0.0)(x) is x
    close(ax.nn.Dropout(1.0)(x, key=jax.random.key(0)).array, np.zeros((200, 50)))
    g = ax.grad(lambda t: ax.sum(drop(t, key=jax.random.key(0)), (Batch, Hidden)))(x)
    close(g.array, y)  # gradient flows through the kept entries only, scaled
    with pytest.raises(ValueError, match="Dropout: training mode needs a PRNG key"):
        drop(x)
    with pytest.raises(ValueError, match=r"p must be a probability in \[0, 1\], got 1.5"):
        ax.nn.Dropout(1.5)
    with pytest.raises(TypeError, match="a graph input has no values to drop yet"):
        drop(ax.Input(ax.F32, Batch, Hidden), key=jax.random.key(0))


def test_layernorm_matches_equinox_in_any_axis_order() -> None:
    norm = ax.nn.LayerNorm(Embed, 6)
    norm = eqx.tree_at(
        lambda m: (m.weight, m.bias), norm, (rand((6,), Embed, seed=1), rand((6,), Embed, seed=2))
    )
    ref = eqx.nn.LayerNorm(6)
    ref = eqx.tree_at(lambda m: (m.weight, m.bias), ref, (norm.weight.array, norm.bias.array))
    x = rand((3, 6, 2), Batch, Embed, Time)
    want = jax.vmap(jax.vmap(ref))(arr(x, Batch, Time, Embed))
    for xp in orders(x, 3):
        y = norm(xp)
        assert y.axes == xp.axes
        close(arr(y, Batch, Time, Embed), want, 1e-5)

    def ax_loss(w: jax.Array, b: jax.Array) -> jax.Array:
        m = eqx.tree_at(
            lambda m: (m.weight, m.bias), norm, (ax.tensor(w, Embed), ax.tensor(b, Embed))
        )
        return jnp.sum(jnp.sin(m(x).array))

    def oracle(w: jax.Array, b: jax.Array) -> jax.Array:
        m = eqx.tree_at(lambda m: (m.weight, m.bias), ref, (w, b))
        return jnp.sum(
            jnp.sin(jax.vmap(jax.vmap(m))(arr(x, Batch, Embed, Time).transpose(0, 2, 1)))
        )

    g = jax.grad(ax_loss, (0, 1))(norm.weight.array, norm.bias.array)
    g_ref = jax.grad(oracle, (0, 1))(norm.weight.array, norm.bias.array)
    close(g[0], g_ref[0], 1e-4)
    close(g[1], g_ref[1], 1e-4)


def test_layernorm_over_several_axes_and_rmsnorm() -> None:
    x = rand((2, 3, 4, 5), Batch, Height, Width, Chan)
    y = ax.nn.LayerNorm((Height, Width), (3, 4), use_weight=False, use_bias=False)(x)
    xa = np.asarray(x.array, np.float64)
    mu = xa.mean(axis=(1, 2), keepdims=True)
    sd = np.sqrt(xa.var(axis=(1, 2), keepdims=True) + 1e-5)
    close(y.array, (xa - mu) / sd, 1e-5)
    rms = ax.nn.RMSNorm(Chan, 5)
    rms = eqx.tree_at(lambda m: m.weight, rms, rand((5,), Chan, seed=4))
    ref = eqx.tree_at(lambda m: m.weight, eqx.nn.RMSNorm(5), rms.weight.array)
    got = rms(ax.transpose(x, Chan, Batch, Height, Width))
    close(arr(got, *x.axes), jax.vmap(jax.vmap(jax.vmap(ref)))(x.array), 1e-5)
    g = ax.grad(lambda t: ax.sum(rms(t), x.axes))(x)
    g_ref = jax.grad(lambda a: jnp.sum(jax.vmap(jax.vmap(jax.vmap(ref)))(a)))(x.array)
    close(g.array, g_ref, 1e-4)


def test_norm_errors() -> None:
    with pytest.raises(
        ax.AxisError,
        match=r"Cannot apply LayerNorm\(Embed\) to "
        r"x=Tensor\[F32, Batch=2, Embed=5\]: axis Embed of the input has size 5, "
        r"the layer expects 6",
    ):
        ax.nn.LayerNorm(Embed, 6)(ax.zeros((2, 5), Batch, Embed))
    with pytest.raises(
        ax.AxisError,
        match=r"Cannot apply RMSNorm\(Embed\) to "
        r"x=Tensor\[F32, Batch=2\]: Embed is not an axis of the input",
    ):
        ax.nn.RMSNorm(Embed, 6)(ax.zeros((2,), Batch))
    with pytest.raises(ValueError, match=r"LayerNorm: 2 axes \(Height, Width\) but 1 sizes"):
        ax.nn.LayerNorm((Height, Width), 3)


def _fan_std(init: Any, sizes: dict[Any, int], fan_in: Any, fan_out: Any) -> float:
    w = init(jax.random.key(0), sizes, fan_in=fan_in, fan_out=fan_out)
    assert w.axes == tuple(sizes)
    return float(np.std(np.asarray(w.array)))


def test_initialisers_read_fans_from_named_axes() -> None:
    conv = {Feature: 64, Chan: 32, Height: 3, Width: 3}
    fan_in, fan_out = 32 * 9, 64 * 9
    assert ax.nn.init.fan(conv, (Chan, Height, Width)) == fan_in
    cases = [
        (ax.nn.init.he_normal(), np.sqrt(2 / fan_in)),
        (ax.nn.init.glorot_uniform(), np.sqrt(2 / (fan_in + fan_out))),
        (ax.nn.init.lecun_normal(), np.sqrt(1 / fan_in)),
        (ax.nn.init.glorot_normal(), np.sqrt(2 / (fan_in + fan_out))),
    ]
    for init, std in cases:
        got = _fan_std(init, conv, (Chan, Height, Width), (Feature, Height, Width))
        assert abs(got / std - 1) < 0.05, (init, got, std)
    w = ax.nn.init.he_uniform()(jax.random.key(1), {Out: 50, In: 200}, fan_in=In, fan_out=Out)
    assert float(np.abs(np.asarray(w.array)).max()) <= np.sqrt(6 / 200)
    assert np.all(np.asarray(ax.nn.init.zeros()(jax.random.key(0), {Out: 3}).array) == 0)
    with pytest.raises(
        ValueError,
        match=r"fan axis Time is not an axis of the new tensor "
        r"\(Out, In\)",
    ):
        ax.nn.init.glorot_uniform()(jax.random.key(0), {Out: 2, In: 3}, fan_in=Time, fan_out=Out)


def test_orthogonal_is_orthogonal_per_block() -> None:
    init = ax.nn.init.orthogonal(gain=2.0)
    w = init(jax.random.key(0), {ax.nn.Gate: 3, Hidden: 4, In: 6}, fan_in=In, fan_out=Hidden)
    assert w.axes == (ax.nn.Gate, Hidden, In)
    for g in range(3):
        m = np.asarray(w.array[g])  # [Hidden=4, In=6]: orthonormal rows, times the gain
        close(m @ m.T, 4.0 * np.eye(4), 1e-5)
    tall = init(jax.random.key(1), {In: 6, Hidden: 3}, fan_in=Hidden, fan_out=In)
    m = np.asarray(tall.array)  # [In=6, Hidden=3]: orthonormal columns
    close(m.T @ m, 4.0 * np.eye(3), 1e-5)


def test_embedding_and_norm_build_a_graph(key: jax.Array) -> None:
    emb = ax.nn.Embedding(Vocab, Embed, 10, 4, key=key)
    norm = ax.nn.LayerNorm(Embed, 4)
    ids = ax.Input(ax.I32, Batch, Time, name="ids")
    y = ax.as_params(norm)(ax.as_params(emb)(ids))
    assert isinstance(y, ax.Apply) and y.axes == (Batch, Time, Embed)
    values = ax.tensor(np.array([[1, 2, 9], [0, 0, 3]], np.int32), Batch, Time)
    close(ax.compile(y, inputs=[ids])(values).array, norm(emb(values)).array, 1e-6)


@pytest.mark.parametrize(
    "name", ["leaky_relu", "elu", "log_sigmoid", "relu", "gelu", "silu", "softplus"]
)
def test_activations_match_jax_nn(name: str) -> None:
    x = ax.tensor(np.array([[-30.0, -2.0, -0.5], [0.25, 1.5, 40.0]], np.float32), Batch, In)
    ours = getattr(ax.nn, name)
    theirs = getattr(jax.nn, name)
    close(ours(x).array, theirs(x.array), 1e-6)
    g = jax.grad(lambda a: jnp.sum(ours(ax.tensor(a, Batch, In)).array))(x.array)
    close(g, jax.grad(lambda a: jnp.sum(theirs(a)))(x.array), 1e-6)
    assert np.all(np.isfinite(np.asarray(g)))
    assert ax.nn.identity(x) is x and ax.nn.swish is ax.nn.silu
