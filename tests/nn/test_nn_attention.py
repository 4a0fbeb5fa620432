"""Multi-head attention against Equinox's, masks, causality, axis safety and errors."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from tests.nn.helpers import Batch, Embed, Time, arr, close, rand

KeyPos, Head, HeadDim = ax.KeyOf[Time], ax.nn.Head, ax.nn.HeadDim


def _equinox(mha: ax.nn.MultiheadAttention) -> eqx.nn.MultiheadAttention:
    h, d, e = mha.query_proj.shape
    ref = eqx.nn.MultiheadAttention(h, e, key=jax.random.key(5))
    flat = lambda w: w.array.reshape(h * d, e)  # noqa: E731
    return eqx.tree_at(
        lambda m: (
            m.query_proj.weight,
            m.key_proj.weight,
            m.value_proj.weight,
            m.output_proj.weight,
        ),
        ref,
        (
            flat(mha.query_proj),
            flat(mha.key_proj),
            flat(mha.value_proj),
            mha.output_proj.array.reshape(e, h * d),
        ),
    )


def test_self_attention_matches_equinox_values_and_grads(key: jax.Array) -> None:
    mha = ax.nn.MultiheadAttention(Embed, 8, num_heads=2, query_pos=Time, key=key)
    assert mha.query_proj.axes == (Head, HeadDim, Embed)
    assert mha.output_proj.axes == (Embed, Head, HeadDim)
    ref = _equinox(mha)
    x = rand((3, 5, 8), Batch, Time, Embed)
    y = mha(x)
    assert y.axes == (Batch, Time, Embed)
    close(y.array, jax.vmap(lambda s: ref(s, s, s))(x.array), 1e-5)

    def loss(m: Any) -> jax.Array:
        return jnp.sum(jnp.sin(m(x).array))

    g = jax.jit(jax.grad(loss))(mha)
    g_ref = eqx.filter_jit(
        eqx.filter_grad(lambda m: jnp.sum(jnp.sin(jax.vmap(lambda s: m(s, s, s))(x.array))))
    )(ref)
    close(g.query_proj.array.reshape(8, 8), g_ref.query_proj.weight, 1e-4)
    close(g.output_proj.array.reshape(8, 8), g_ref.output_proj.weight, 1e-4)


def test_cross_attention_with_mask_and_any_axis_order(key: jax.Array) -> None:
    mha = ax.nn.MultiheadAttention(Embed, 8, num_heads=4, query_pos=Time, key=key)
    ref = _equinox(mha)
    q = rand((2, 3, 8), Batch, Time, Embed, seed=1)
    kv = rand((2, 6, 8), Batch, KeyPos, Embed, seed=2)
    valid = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
    mask = ax.tensor(valid, Batch, KeyPos)
    want = jax.vmap(lambda a, b, m: ref(a, b, b, mask=jnp.broadcast_to(m, (3, 6))))(
        q.array, kv.array, jnp.asarray(valid)
    )
    close(mha(q, kv, mask=mask).array, want, 1e-5)
    y = mha(
        ax.transpose(q, Embed, Time, Batch),
        ax.transpose(kv, KeyPos, Embed, Batch),
        mask=ax.transpose(mask, KeyPos, Batch),
    )
    close(arr(y, Batch, Time, Embed), want, 1e-5)
    changed = ax.tensor(np.asarray(kv.array).copy(), Batch, KeyPos, Embed)
    changed = ax.tensor(changed.array.at[0, 4:].set(100.0), Batch, KeyPos, Embed)
    close(mha(q, changed, mask=mask).array[0], want[0], 1e-5)  # masked keys are ignored


def test_causal_attention_ignores_the_future(key: jax.Array) -> None:
    mha = ax.nn.MultiheadAttention(
        Embed, 4, num_heads=2, query_pos=Time, causal=True, use_bias=True, key=key
    )
    x = rand((1, 5, 4), Batch, Time, Embed)
    y = mha(x)
    x2 = ax.tensor(x.array.at[0, 3:].set(-7.0), Batch, Time, Embed)
    close(mha(x2).array[0, :3], y.array[0, :3], 1e-6)
    assert not np.allclose(mha(x2).array[0, 3:], y.array[0, 3:])
    mask = ax.nn.causal_mask(Time, KeyPos, 3, 3)
    np.testing.assert_array_equal(np.asarray(mask.array), np.tril(np.ones((3, 3), bool)))


def test_attention_dropout_needs_a_key_in_training(key: jax.Array) -> None:
    mha = ax.nn.MultiheadAttention(Embed, 4, num_heads=1, query_pos=Time, dropout_p=0.5, key=key)
    x = rand((2, 3, 4), Batch, Time, Embed)
    a, b = mha(x, key=jax.random.key(1)), mha(x, key=jax.random.key(2))
    assert not np.allclose(a.array, b.array)
    close(mha(x, inference=True).array, eqx.nn.inference_mode(mha)(x).array)
    with pytest.raises(ValueError, match="Dropout: training mode needs a PRNG key"):
        mha(x)


def test_dot_product_attention_keeps_batch_and_head_axes() -> None:
    q = rand((2, 3, 4, 5), Batch, Time, Head, HeadDim, seed=1)
    k = rand((4, 2, 6, 5), Head, Batch, KeyPos, HeadDim, seed=2)
    v = rand((2, 6, 4, 5), Batch, KeyPos, Head, HeadDim, seed=3)
    out = ax.nn.dot_product_attention(q, k, v, over=HeadDim, key_pos=KeyPos)
    assert out.axes == (Batch, Time, Head, HeadDim)
    qa, ka, va = q.array, arr(k, Batch, KeyPos, Head, HeadDim), v.array
    s = jnp.einsum("bthd,bshd->bhts", qa, ka) / np.sqrt(5)
    want = jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(s, -1), va)
    close(out.array, want, 1e-5)


def test_attention_errors(key: jax.Array) -> None:
    mha = ax.nn.MultiheadAttention(Embed, 4, num_heads=2, query_pos=Time, key=key)
    x = ax.zeros((2, 3, 4), Batch, Time, Embed)
    with pytest.raises(
        ax.AxisError,
        match=r"Cannot apply MultiheadAttention\(Embed\) to "
        r"query=Tensor\[F32, Batch=2, Time=3, Embed=5\]: axis Embed of the query has "
        r"size 5, the layer expects 4",
    ):
        mha(ax.zeros((2, 3, 5), Batch, Time, Embed))
    with pytest.raises(ax.AxisError, match=r"KeyOf\[Time\] is not an axis of the key"):
        mha(x, x)  # keys must have their own position axis, not the query's
    q = ax.zeros((2, 3, 5), Batch, Time, HeadDim)
    with pytest.raises(
        ax.AxisError,
        match=r"the query has the key position axis Time; "
        r"queries and keys need different position axes",
    ):
        ax.nn.dot_product_attention(q, q, q, over=HeadDim, key_pos=Time)
    with pytest.raises(ax.AxisError, match=r"the mask has axis Embed, which the scores lack"):
        mha(x, mask=ax.zeros((4,), Embed, dtype=ax.Bool))
    with pytest.raises(ValueError, match="embed_size 5 does not divide into 2 heads"):
        ax.nn.MultiheadAttention(Embed, 5, num_heads=2, query_pos=Time, key=key)


def test_attention_builds_a_graph(key: jax.Array) -> None:
    mha = ax.nn.MultiheadAttention(Embed, 8, num_heads=2, query_pos=Time, causal=True, key=key)
    x = ax.Input(ax.F32, Batch, Time, Embed, sizes={Embed: 8, Time: 5}, name="x")
    y = ax.as_params(mha)(x)
    assert isinstance(y, ax.Apply) and y.axes == (Batch, Time, Embed)
    xv = rand((2, 5, 8), Batch, Time, Embed)
    close(ax.compile(y, inputs=[x])(xv).array, mha(xv).array, 1e-6)
    with pytest.raises(ax.AxisError, match=r"Cannot read the size of axis Time"):
        ax.as_params(mha)(ax.Input(ax.F32, Batch, Time, Embed, sizes={Embed: 8}))
