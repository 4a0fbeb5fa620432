"""The JAX expert of ``benchmarks.decode --real``: a hand-written KV-cache decode of GPT-2
and Llama on their Hugging Face state dicts, in plain ``jnp``, as the best JAX users write it.

One jitted program per call: a prefill of the prompt (all its positions at once, the keys
and values written to the cache from position 0), then one ``lax.scan`` of single-token
steps. The cache is a key and a value array per layer, ``[batch, time, kv_heads,
head_dim]``, carried by the scan and written in place (``lax.dynamic_update_slice``; no
slice of a stacked cache for XLA to copy before the attention's dot); the layers are
unrolled (a Python loop, each layer's weights its own arrays: no slice of a stacked weight
to copy before a matmul). Attention is grouped-query in einsums (the query heads as
``[kv_heads, group]``, no repeated keys), the scores and softmax in float32, the cache
positions after the current one masked; or, by ``Spec.attention``,
``jax.nn.dot_product_attention`` (cuDNN's fused kernel on a GPU), the cache's valid length
as ``key_value_seq_lengths``. The weights are pre-transposed to ``x @ w`` at load time.
GPT-2: Conv1D layouts, tanh GELU, LayerNorm, the head tied to ``wte``. Llama: RMSNorm in
float32, HF's rotate-half RoPE, SwiGLU, its own head.

Example:
    >>> params = gpt2_params(state_dict, n_layer=12, dtype=jnp.bfloat16)
    >>> spec = Spec("gpt2", layers=12, heads=12, kv_heads=12, head_dim=64, eps=1e-5)
    >>> tokens = decode(params, spec, prompt_ids, steps=256, max_len=384)   # [batch, 256]
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Spec", "decode", "gpt2_params", "llama_params"]

Params = dict[str, Any]


@dataclass(frozen=True)
class Spec:
    """The sizes the decode needs (hashable: a static argument of the jitted program).
    ``kind``: ``"gpt2"`` or ``"llama"``; ``kv_heads == heads`` for GPT-2."""

    kind: str
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    rope_theta: float = 10000.0
    rope_offset: int = 0  # 0: correct; the benchmark's test plants 1 to prove it can fail
    attention: str = "einsum"  # or jax.nn.dot_product_attention's "xla" or "cudnn"


def _array(sd: Mapping[str, np.ndarray], key: str, dtype: Any, t: bool = False) -> jax.Array:
    a = np.asarray(sd[key], np.float32)
    return jnp.asarray(a.T if t else a, dtype)


def gpt2_params(sd: Mapping[str, np.ndarray], n_layer: int, dtype: Any) -> Params:
    """GPT-2's HF state dict as arrays, a dict per layer (``layers``: the layers are
    unrolled, each reads its own weights whole; Conv1D is already ``x @ w``)."""
    names = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias"]
    names += ["attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias"]
    names += ["mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"]
    layers = [
        {n: _array(sd, f"transformer.h.{i}.{n}", dtype) for n in names} for i in range(n_layer)
    ]
    p: Params = {"layers": layers}
    for n in ("wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"):
        p[n] = _array(sd, "transformer." + n, dtype)
    return p


def llama_params(sd: Mapping[str, np.ndarray], n_layer: int, dtype: Any) -> Params:
    """Llama's HF state dict as arrays, a dict per layer, the projections transposed to
    ``[in, out]``."""
    proj = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"]
    proj += ["mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
    norms = ("input_layernorm", "post_attention_layernorm")
    layers = [
        {n: _array(sd, f"model.layers.{i}.{n}.weight", dtype, t=n in proj) for n in (*proj, *norms)}
        for i in range(n_layer)
    ]
    p: Params = {"layers": layers}
    p["embed"] = _array(sd, "model.embed_tokens.weight", dtype)
    p["norm"] = _array(sd, "model.norm.weight", dtype)
    p["head"] = _array(sd, "lm_head.weight", dtype, t=True)
    return p


def _layer_norm(x: jax.Array, w: jax.Array, b: jax.Array, eps: float) -> jax.Array:
    x32 = x.astype(jnp.float32)
    mu = x32.mean(-1, keepdims=True)
    var = jnp.square(x32 - mu).mean(-1, keepdims=True)
    return ((x32 - mu) * jax.lax.rsqrt(var + eps)).astype(x.dtype) * w + b


def _rms_norm(x: jax.Array, w: jax.Array, eps: float) -> jax.Array:
    x32 = x.astype(jnp.float32)
    return (x32 * jax.lax.rsqrt(jnp.square(x32).mean(-1, keepdims=True) + eps)).astype(x.dtype) * w


def _attend(
    q: jax.Array, kc: jax.Array, vc: jax.Array, qpos: jax.Array, how: str = "einsum"
) -> jax.Array:
    """Grouped-query attention of ``q [b, t, kv, g, d]`` over the cache ``[b, s, kv, d]``,
    each query seeing the cache positions up to its own (``qpos [t]``). ``how``: einsums,
    or ``jax.nn.dot_product_attention`` with that implementation (the cache's valid length
    as ``key_value_seq_lengths``; causal for a prefill, which starts at position 0)."""
    if how != "einsum":
        b, t, kv, g, d = q.shape
        lengths = jnp.full((b,), qpos[-1] + 1, jnp.int32)
        y = jax.nn.dot_product_attention(
            q.reshape(b, t, kv * g, d), kc, vc, is_causal=t > 1,
            key_value_seq_lengths=lengths, implementation=how,
        )  # fmt: skip
        return y.reshape(b, t, kv, g, d)
    scale = q.shape[-1] ** -0.5
    s = jnp.einsum("btkgd,bskd->bkgts", q, kc, preferred_element_type=jnp.float32) * scale
    mask = jnp.arange(kc.shape[1])[None, :] <= qpos[:, None]
    p = jax.nn.softmax(jnp.where(mask, s, -jnp.inf), axis=-1).astype(vc.dtype)
    return jnp.einsum("bkgts,bskd->btkgd", p, vc)


def _rope(x: jax.Array, pos: jax.Array, theta: float) -> jax.Array:
    """HF's rotate-half RoPE of ``x [b, t, ..., d]`` at positions ``pos [t]``."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (jnp.arange(0, d, 2, dtype=jnp.float32) / d)
    ang = pos.astype(jnp.float32)[:, None] * inv[None, :]
    ang = jnp.concatenate([ang, ang], -1).reshape((1, pos.shape[0]) + (1,) * (x.ndim - 3) + (d,))
    x1, x2 = jnp.split(x.astype(jnp.float32), 2, -1)
    rotated = jnp.concatenate([-x2, x1], -1)
    return (x.astype(jnp.float32) * jnp.cos(ang) + rotated * jnp.sin(ang)).astype(x.dtype)


def _write(cache: jax.Array, new: jax.Array, start: jax.Array) -> jax.Array:
    """``new [b, t, kv, d]`` written into the layer's cache ``[b, time, kv, d]`` at
    ``start`` (in place: the cache is the scan's carry)."""
    zero = jnp.zeros((), jnp.int32)
    return jax.lax.dynamic_update_slice(cache, new, (zero, start, zero, zero))


def _gpt2_layer(
    w: Params,
    x: jax.Array,
    cache: tuple[jax.Array, jax.Array],
    start: jax.Array,
    spec: Spec,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    b, t, e = x.shape
    h = _layer_norm(x, w["ln_1.weight"], w["ln_1.bias"], spec.eps)
    qkv = h @ w["attn.c_attn.weight"] + w["attn.c_attn.bias"]
    q, k, v = (z.reshape(b, t, spec.kv_heads, spec.head_dim) for z in jnp.split(qkv, 3, -1))
    kc, vc = _write(cache[0], k, start), _write(cache[1], v, start)
    y = _attend(q[:, :, :, None], kc, vc, start + jnp.arange(t), spec.attention)
    y = y.reshape(b, t, e)
    x = x + y @ w["attn.c_proj.weight"] + w["attn.c_proj.bias"]
    h = _layer_norm(x, w["ln_2.weight"], w["ln_2.bias"], spec.eps)
    h = jax.nn.gelu(h @ w["mlp.c_fc.weight"] + w["mlp.c_fc.bias"], approximate=True)
    return x + h @ w["mlp.c_proj.weight"] + w["mlp.c_proj.bias"], (kc, vc)


def _llama_layer(
    w: Params,
    x: jax.Array,
    cache: tuple[jax.Array, jax.Array],
    start: jax.Array,
    spec: Spec,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    b, t, _ = x.shape
    kv, d = spec.kv_heads, spec.head_dim
    pos = start + jnp.arange(t)
    h = _rms_norm(x, w["input_layernorm"], spec.eps)
    q = (h @ w["self_attn.q_proj"]).reshape(b, t, kv, spec.heads // kv, d)
    k = (h @ w["self_attn.k_proj"]).reshape(b, t, kv, d)
    v = (h @ w["self_attn.v_proj"]).reshape(b, t, kv, d)
    q, k = _rope(q, pos + spec.rope_offset, spec.rope_theta), _rope(k, pos, spec.rope_theta)
    kc, vc = _write(cache[0], k, start), _write(cache[1], v, start)
    y = _attend(q, kc, vc, pos, spec.attention).reshape(b, t, spec.heads * d)
    x = x + y @ w["self_attn.o_proj"]
    h = _rms_norm(x, w["post_attention_layernorm"], spec.eps)
    h = jax.nn.silu(h @ w["mlp.gate_proj"]) * (h @ w["mlp.up_proj"])
    return x + h @ w["mlp.down_proj"], (kc, vc)


Cache = tuple[tuple[jax.Array, jax.Array], ...]  # (keys, values) per layer


def _forward(
    p: Params, ids: jax.Array, cache: Cache, start: jax.Array, spec: Spec
) -> tuple[jax.Array, Cache]:
    """The last position's float32 logits of ``ids [b, t]`` at ``start``, and the caches."""
    if spec.kind == "gpt2":
        pos = start + jnp.arange(ids.shape[1])
        x = p["wte.weight"][ids] + p["wpe.weight"][pos][None]
        layer, head = _gpt2_layer, p["wte.weight"].T
    else:
        x, layer, head = p["embed"][ids], _llama_layer, p["head"]
    new = []
    for w, kv in zip(p["layers"], cache, strict=True):
        x, kv = layer(w, x, kv, start, spec)
        new.append(kv)
    last = x[:, -1]
    if spec.kind == "gpt2":
        last = _layer_norm(last, p["ln_f.weight"], p["ln_f.bias"], spec.eps)
    else:
        last = _rms_norm(last, p["norm"], spec.eps)
    return jnp.dot(last, head, preferred_element_type=jnp.float32), tuple(new)


@functools.partial(jax.jit, static_argnames=("spec", "steps", "max_len"))
def decode(p: Params, spec: Spec, ids: jax.Array, steps: int, max_len: int) -> jax.Array:
    """Greedy tokens ``[batch, steps]`` after the prompts ``ids [batch, prompt]``: a prefill,
    then ``steps - 1`` cached single-token steps in one ``lax.scan``."""
    b, t = ids.shape
    dtype = p["wte.weight" if spec.kind == "gpt2" else "embed"].dtype
    shape = (b, max_len, spec.kv_heads, spec.head_dim)
    cache = tuple((jnp.zeros(shape, dtype), jnp.zeros(shape, dtype)) for _ in range(spec.layers))
    logits, cache = _forward(p, ids, cache, jnp.int32(0), spec)
    first = jnp.argmax(logits, -1).astype(jnp.int32)

    def step(carry: tuple[jax.Array, Cache], i: jax.Array) -> tuple[Any, jax.Array]:
        tok, cache = carry
        logits, cache = _forward(p, tok[:, None], cache, t + i, spec)
        nxt = jnp.argmax(logits, -1).astype(jnp.int32)
        return (nxt, cache), nxt

    _, rest = jax.lax.scan(step, (first, cache), jnp.arange(steps - 1, dtype=jnp.int32))
    return jnp.concatenate([first[:, None], rest.T], axis=1)
