"""The Llama building blocks of ``ax.nn``: ``rotary_embedding`` (RoPE), ``GroupedQueryAttention``
(a ``KVHead`` axis; its cache holds the key-value heads only) and ``SwiGLU``, each against a
jax.numpy oracle written the Hugging Face way (flat heads, ``repeat_kv``, ``rotate_half``),
forward and backward, in several axis orders; their errors by text."""

from __future__ import annotations

import itertools
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from tests.conftest import across_programs
from tests.nn.helpers import Batch, Hidden, Time

AnyT = ax.Tensor[Any, *tuple[Any, ...]]
KEY = jax.random.key(0)


@final
class Embed(ax.Axis): ...


@final
class Head(ax.Axis): ...


@final
class Dim(ax.Axis): ...


def _rand(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


# ---- the oracles: Hugging Face Llama's computations on plain arrays -------------------------


def rope_oracle(x: jax.Array, theta: float, offset: int = 0) -> jax.Array:
    """``x`` [..., T, D]: ``x * cos + rotate_half(x) * sin`` (HF ``apply_rotary_pos_emb``)."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (jnp.arange(0, d, 2, dtype=jnp.float32) / d)
    pos = jnp.arange(x.shape[-2], dtype=jnp.float32) + offset
    emb = jnp.concatenate([pos[:, None] * inv[None, :], pos[:, None] * inv[None, :]], axis=-1)
    emb = jnp.broadcast_to(emb, x.shape)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * jnp.cos(emb) + jnp.concatenate([-x2, x1], axis=-1) * jnp.sin(emb)


def attention_oracle(
    x: jax.Array, qw: jax.Array, kw: jax.Array, vw: jax.Array, ow: jax.Array, theta: float
) -> jax.Array:
    """``x`` [B, T, E]; HF weights ``q`` [H*Dh, E], ``k``/``v`` [KV*Dh, E], ``o`` [E, H*Dh]."""
    b, t, _ = x.shape
    dh = DH
    n_kv = kw.shape[0] // dh
    n_h = qw.shape[0] // dh
    q = (x @ qw.T).reshape(b, t, n_h, dh).transpose(0, 2, 1, 3)
    k = (x @ kw.T).reshape(b, t, n_kv, dh).transpose(0, 2, 1, 3)
    v = (x @ vw.T).reshape(b, t, n_kv, dh).transpose(0, 2, 1, 3)
    q, k = rope_oracle(q, theta), rope_oracle(k, theta)
    k, v = jnp.repeat(k, n_h // n_kv, axis=1), jnp.repeat(v, n_h // n_kv, axis=1)  # repeat_kv
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh)
    s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -jnp.inf)
    out = jax.nn.softmax(s, axis=-1) @ v  # [B, H, T, Dh]
    return out.transpose(0, 2, 1, 3).reshape(b, t, n_h * dh) @ ow.T


DH = 6  # the head size of the attention tests


def swiglu_oracle(x: jax.Array, g: jax.Array, u: jax.Array, d: jax.Array) -> jax.Array:
    return (jax.nn.silu(x @ g.T) * (x @ u.T)) @ d.T


# ---- RoPE ------------------------------------------------------------------------------------

ROPE_ORDERS = [(Batch, Head, Time, Dim), (Time, Dim, Batch, Head), (Dim, Batch, Time, Head)]


@pytest.mark.parametrize("order", ROPE_ORDERS, ids=lambda o: ",".join(a.__name__ for a in o))
@pytest.mark.parametrize("offset", [0, 5])
def test_rope_matches_the_hf_oracle_forward_and_backward(
    order: tuple[type[ax.Axis], ...], offset: int
) -> None:
    ref_axes = (Batch, Head, Time, Dim)
    data = _rand((2, 3, 7, 8), 1)
    w = _rand((2, 3, 7, 8), 2)
    perm = [ref_axes.index(a) for a in order]
    x = ax.tensor(data.transpose(perm), *order, dtype=ax.F32)

    def ours(a: jax.Array) -> jax.Array:
        y = ax.nn.rotary_embedding(ax.tensor(a, *order), Time, Dim, theta=500.0, offset=offset)
        assert y.axes == order
        return y.array

    def oracle(a: jax.Array) -> jax.Array:
        return rope_oracle(a, 500.0, offset)

    y = ours(x.array)
    np.testing.assert_allclose(y, oracle(data).transpose(perm), atol=across_programs(1e-5))
    g = jax.grad(lambda a: jnp.sum(ours(a) * w.transpose(perm)))(x.array)
    g_ref = jax.grad(lambda a: jnp.sum(oracle(a) * w))(data)
    np.testing.assert_allclose(g, g_ref.transpose(perm), atol=across_programs(1e-5))


def test_rope_with_a_traced_offset_under_jit() -> None:
    x = ax.tensor(_rand((3, 4), 3), Time, Dim)
    f = jax.jit(lambda n: ax.nn.rotary_embedding(x, Time, Dim, offset=n).array)
    np.testing.assert_allclose(
        f(jnp.int32(4)), rope_oracle(x.array, 10000.0, 4), atol=across_programs(1e-5)
    )
    t = ax.nn.rotary_embedding(x, Time, Dim, offset=ax.tensor(jnp.int32(4)))
    np.testing.assert_allclose(t.array, f(jnp.int32(4)), atol=across_programs(1e-6))


def test_rope_interleaved_convention_is_not_hf() -> None:
    """The adjacent-pairs (GPT-J) rotation differs from rotate_half: the oracle tells them apart."""
    x = _rand((5, 8), 4)
    y = ax.nn.rotary_embedding(ax.tensor(x, Time, Dim), Time, Dim).array
    pairs = x.reshape(5, 4, 2)
    inv = ax.nn.rope_frequencies(8)
    ang = jnp.arange(5.0)[:, None] * inv[None, :]
    c, s = jnp.cos(ang), jnp.sin(ang)
    inter = jnp.stack(
        [pairs[..., 0] * c - pairs[..., 1] * s, pairs[..., 1] * c + pairs[..., 0] * s], -1
    ).reshape(5, 8)
    assert float(jnp.abs(inter - y).max()) > 1e-2


def test_rope_errors_by_text() -> None:
    x = ax.tensor(_rand((3, 4), 3), Time, Dim)
    with pytest.raises(ax.AxisError, match=r"rotary_embedding\(pos=Batch, over=Dim\).*Batch"):
        ax.nn.rotary_embedding(x, Batch, Dim)
    with pytest.raises(ax.AxisError, match=r"odd size 3; RoPE rotates pairs"):
        ax.nn.rotary_embedding(ax.tensor(_rand((4, 3), 3), Time, Dim), Time, Dim)
    with pytest.raises(ValueError, match=r"theta.*positive"):
        ax.nn.rotary_embedding(x, Time, Dim, theta=0.0)
    with pytest.raises(ValueError, match=r"offset"):
        ax.nn.rotary_embedding(x, Time, Dim, offset=-1)
    with pytest.raises(TypeError, match=r"the offset is an integer scalar.*float32"):
        ax.nn.rotary_embedding(x, Time, Dim, offset=jnp.float32(1.0))
    with pytest.raises(ValueError, match=r"the position and feature axes must differ"):
        ax.nn.rotary_embedding(x, Dim, Dim)
    with pytest.raises(ax.AxisError, match=r"RoPE rotates floating-point features, got I32"):
        ax.nn.rotary_embedding(ax.tensor(np.zeros((3, 4), np.int32), Time, Dim), Time, Dim)
    with pytest.raises(ValueError, match=r"rope_frequencies: head_size 5 is odd"):
        ax.nn.rope_frequencies(5)


# ---- grouped-query attention -------------------------------------------------------------------


def _flat(layer: ax.nn.GroupedQueryAttention) -> tuple[jax.Array, ...]:
    """The layer's weights in the HF layouts: query head h = kv * g + group."""
    kv, g = ax.nn.KVHead, ax.nn.GroupHead
    q = ax.transpose(layer.query_proj, kv, g, ax.nn.HeadDim, Embed).array
    k = ax.transpose(layer.key_proj, kv, ax.nn.HeadDim, Embed).array
    v = ax.transpose(layer.value_proj, kv, ax.nn.HeadDim, Embed).array
    o = ax.transpose(layer.output_proj, Embed, kv, g, ax.nn.HeadDim).array
    e = q.shape[-1]
    return q.reshape(-1, e), k.reshape(-1, e), v.reshape(-1, e), o.reshape(e, -1)


ATTN_ORDERS = [(Batch, Time, Embed), (Time, Embed, Batch), (Embed, Batch, Time)]


@pytest.mark.parametrize(
    ("kv", "order"), list(zip([4, 2, 1], ATTN_ORDERS, strict=True)), ids=["kv4", "kv2", "kv1"]
)
def test_gqa_matches_the_repeat_kv_oracle_forward_and_backward(
    kv: int, order: tuple[type[ax.Axis], ...]
) -> None:
    layer = ax.nn.GroupedQueryAttention(
        Embed, 24, num_heads=4, num_kv_heads=kv, query_pos=Time, rope_theta=300.0, key=KEY
    )
    assert layer.key_proj.sizes[ax.nn.KVHead] == kv
    assert layer.query_proj.sizes[ax.nn.GroupHead] == 4 // kv
    data, w = _rand((2, 5, 24), 5), _rand((2, 5, 24), 6)
    ref = (Batch, Time, Embed)
    perm = [ref.index(a) for a in order]
    x = ax.tensor(data.transpose(perm), *order, dtype=ax.F32)
    flat = _flat(layer)

    @eqx.filter_jit
    def ours(lay: Any, a: jax.Array) -> tuple[jax.Array, Any]:
        def loss(p: tuple[Any, jax.Array]) -> tuple[jax.Array, jax.Array]:
            y = p[0](ax.tensor(p[1], *order))
            assert y.axes == order
            return jnp.sum(y.array * w.transpose(perm)), y.array

        return eqx.filter_grad(loss, has_aux=True)((lay, a))[::-1]

    @jax.jit
    def oracle(a: jax.Array, *ws: jax.Array) -> tuple[jax.Array, Any]:
        def loss(a: jax.Array, *ws: jax.Array) -> tuple[jax.Array, jax.Array]:
            y = attention_oracle(a, *ws, 300.0)
            return jnp.sum(y * w), y

        return jax.grad(loss, argnums=(0, 1, 2, 3, 4), has_aux=True)(a, *ws)[::-1]

    y, (gl, gx) = ours(layer, x.array)
    want, grads = oracle(jnp.asarray(data), *flat)
    np.testing.assert_allclose(y, np.asarray(want).transpose(perm), atol=across_programs(1e-5))
    np.testing.assert_allclose(gx, np.asarray(grads[0]).transpose(perm), atol=1e-4)
    for got, ref in zip(_flat(gl), grads[1:], strict=True):  # q, k, v, o weights
        np.testing.assert_allclose(got, ref, atol=1e-4)


@pytest.mark.parametrize("kv", [4, 2, 1])
def test_gqa_cache_holds_kv_heads_and_steps_match_the_full_call(kv: int) -> None:
    layer = ax.nn.GroupedQueryAttention(
        Embed, 24, num_heads=4, num_kv_heads=kv, query_pos=Time, key=KEY
    )
    x = ax.tensor(_rand((2, 6, 24), 7), Batch, Time, Embed)
    full = layer(x)
    cache = layer.init_cache({Batch: 2}, max_len=8)
    assert cache.keys.axes == (Batch, ax.nn.KVHead, ax.KeyOf[Time], ax.nn.HeadDim)
    assert cache.keys.shape == (2, kv, 8, DH)
    y, cache = layer(ax.slice(x, Time, 0, 4), cache=cache)
    step = jax.jit(lambda c, t: layer(t, cache=c))
    ys = [y]
    for i in (4, 5):
        yi, cache = step(cache, ax.slice(x, Time, i, i + 1))
        ys.append(yi)
    got = np.concatenate([t.array for t in ys], axis=1)
    np.testing.assert_allclose(got, full.array, atol=across_programs(1e-5))
    assert np.all(cache.length.array == 6)


def test_gqa_errors_by_text() -> None:
    def make(**kw: Any) -> Any:
        args: dict[str, Any] = dict(num_heads=4, num_kv_heads=2, query_pos=Time, key=KEY)
        return ax.nn.GroupedQueryAttention(Embed, 24, **{**args, **kw})

    with pytest.raises(ValueError, match=r"num_heads 4 is not a multiple of num_kv_heads 3"):
        make(num_kv_heads=3)
    with pytest.raises(ValueError, match=r"head_size 3 is odd; RoPE rotates pairs"):
        make(head_size=3)
    with pytest.raises(ValueError, match=r"embed_size 24 does not divide into 5 heads"):
        make(num_heads=5, num_kv_heads=1)
    layer = make()
    with pytest.raises(ax.AxisError, match=r"GroupedQueryAttention\(Embed\).*Embed"):
        layer(ax.tensor(_rand((2, 5, 24), 1), Batch, Time, Hidden))
    with pytest.raises(ax.AxisError, match=r"already has axis KVHead"):
        layer(ax.tensor(_rand((2, 5, 24), 1), ax.nn.KVHead, Time, Embed))
    other = ax.nn.MultiheadAttention(
        Embed, 24, num_heads=4, query_pos=Time, key_pos=Hidden, key=KEY
    )
    with pytest.raises(
        ax.AxisError, match=r"the cache's key axis is Hidden, the layer's KeyOf\[Time\]"
    ):
        layer(
            ax.tensor(_rand((2, 5, 24), 1), Batch, Time, Embed),
            cache=other.init_cache({Batch: 2}, 8),
        )
    with pytest.raises(TypeError, match=r"cache= takes a KVCache, got dict"):
        layer(ax.tensor(_rand((2, 5, 24), 1), Batch, Time, Embed), cache={})  # type: ignore[call-overload]
    cache = layer.init_cache({Batch: 2}, 4)
    with pytest.raises(
        ax.AxisError, match=r"5 new positions \(Time\) overflow the cache of max_len 4"
    ):
        layer(ax.tensor(_rand((2, 5, 24), 1), Batch, Time, Embed), cache=cache)


# ---- SwiGLU ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "order",
    list(itertools.permutations((Batch, Time, Embed)))[:4],
    ids=lambda o: ",".join(a.__name__ for a in o),
)
def test_swiglu_matches_the_oracle_forward_and_backward(order: tuple[type[ax.Axis], ...]) -> None:
    mlp = ax.nn.SwiGLU(Embed, 12, Hidden, 20, key=KEY)
    g = ax.transpose(mlp.gate, Hidden, Embed).array
    u = ax.transpose(mlp.up, Hidden, Embed).array
    d = ax.transpose(mlp.down, Embed, Hidden).array
    data, w = _rand((2, 3, 12), 8), _rand((2, 3, 12), 9)
    ref = (Batch, Time, Embed)
    perm = [ref.index(a) for a in order]
    x = ax.tensor(data.transpose(perm), *order, dtype=ax.F32)
    y = mlp(x)
    assert y.axes == order
    np.testing.assert_allclose(
        y.array, swiglu_oracle(data, g, u, d).transpose(perm), atol=across_programs(1e-5)
    )
    grads = eqx.filter_grad(lambda m: jnp.sum(m(x).array * w.transpose(perm)))(mlp)
    want = jax.grad(lambda gg: jnp.sum(swiglu_oracle(data, gg, u, d) * w))(g)
    np.testing.assert_allclose(
        ax.transpose(grads.gate, Hidden, Embed).array, want, atol=across_programs(1e-5)
    )
    gx = jax.grad(lambda a: jnp.sum(mlp(ax.tensor(a, *order)).array * w.transpose(perm)))(x.array)
    gx_ref = jax.grad(lambda a: jnp.sum(swiglu_oracle(a, g, u, d) * w))(data)
    np.testing.assert_allclose(gx, gx_ref.transpose(perm), atol=across_programs(1e-5))


def test_swiglu_errors_by_text() -> None:
    mlp = ax.nn.SwiGLU(Embed, 12, Hidden, 20, key=KEY)
    with pytest.raises(ax.AxisError, match=r"SwiGLU\(Embed\).*Embed"):
        mlp(ax.tensor(_rand((2, 12), 1), Batch, Time))
    with pytest.raises(ax.AxisError, match=r"SwiGLU\(Embed\).*size 11, the layer expects 12"):
        mlp(ax.tensor(_rand((2, 11), 1), Batch, Embed))
    with pytest.raises(ax.AxisError, match=r"already has axis Hidden"):
        mlp(ax.tensor(_rand((2, 12), 1), Hidden, Embed))
    with pytest.raises(ax.AxisError, match=r"must all differ"):
        ax.nn.SwiGLU(Embed, 12, Embed, 20, key=KEY)
    with pytest.raises(ValueError, match=r"hidden_size"):
        ax.nn.SwiGLU(Embed, 12, Hidden, 0, key=KEY)
