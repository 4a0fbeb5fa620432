"""``GroupedQueryAttention``'s attention paths (``implementation=``): every path that runs on
this machine against the einsum path and a jax.numpy oracle that repeats the key-value heads
(Hugging Face's ``repeat_kv``), forward and backward, for 4, 2 and 1 key-value heads, in
several axis orders, with a mask, and through a KV cache (prefill, then decode steps); the
lowering for CUDA (cuDNN's queries answered as on an H100): one cuDNN call each way, given
the key-value heads only, no queries-by-keys tensor; the choice of ``"auto"`` on a pretended
GPU, its warnings, and an explicit ``"cudnn"``'s errors."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from axjax.nn import _attention_paths
from axjax.nn._attention_kernels import attend
from axjax.nn._fused_attention import FusedAttention
from tests.conftest import across_programs
from tests.nn.helpers import Batch, Time

# the HF-layout oracles of the layer's own tests (and their Embed, which _flat names)
from tests.nn.test_nn_llama_blocks import Embed, _flat, rope_oracle

AnyT = ax.Tensor[Any, *tuple[Any, ...]]
KVHead, GroupHead, KeyPos = ax.nn.KVHead, ax.nn.GroupHead, ax.KeyOf[Time]

#: every path that runs on a CPU ("auto" is the einsums here; "cudnn" is lowered below)
PATHS = ("einsum", "xla", "fused", "auto")
THETA = 300.0
N_HEADS, DH, T = 4, 8, 6


def _rand(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _layer(kv: int, impl: str = "einsum", **kw: Any) -> ax.nn.GroupedQueryAttention:
    return ax.nn.GroupedQueryAttention(
        Embed,
        N_HEADS * DH,
        num_heads=N_HEADS,
        num_kv_heads=kv,
        query_pos=Time,
        rope_theta=THETA,
        implementation=impl,  # type: ignore[arg-type]
        key=jax.random.key(kv),
        **kw,
    )


def oracle(
    x: jax.Array,
    qw: jax.Array,
    kw: jax.Array,
    vw: jax.Array,
    ow: jax.Array,
    mask: jax.Array | None = None,
) -> jax.Array:
    """``x`` [B, T, E], HF weights (query head ``h`` reads key-value head ``h // g``), ``mask``
    [B, N, T, S] (true = attend) on top of the causal one: keys and values repeated."""
    b, t, _ = x.shape
    n_kv, n_h = kw.shape[0] // DH, qw.shape[0] // DH
    q = (x @ qw.T).reshape(b, t, n_h, DH).transpose(0, 2, 1, 3)
    k = (x @ kw.T).reshape(b, t, n_kv, DH).transpose(0, 2, 1, 3)
    v = (x @ vw.T).reshape(b, t, n_kv, DH).transpose(0, 2, 1, 3)
    q, k = rope_oracle(q, THETA), rope_oracle(k, THETA)
    k, v = jnp.repeat(k, n_h // n_kv, axis=1), jnp.repeat(v, n_h // n_kv, axis=1)
    keep = jnp.tril(jnp.ones((t, t), bool))[None, None]
    if mask is not None:
        keep = keep & mask
    s = jnp.where(keep, q @ k.transpose(0, 1, 3, 2) / np.sqrt(DH), -jnp.inf)
    out = jax.nn.softmax(s, axis=-1) @ v
    return out.transpose(0, 2, 1, 3).reshape(b, t, n_h * DH) @ ow.T


#: the mask's axes, as stored (shuffled), and the oracle's order of them
MASK_AXES = (KVHead, Time, Batch, KeyPos, GroupHead)
ORACLE_MASK = (Batch, KVHead, GroupHead, Time, KeyPos)


def _mask(kv: int, n_key: int, seed: int = 3) -> tuple[AnyT, jax.Array]:
    """A random mask over every score axis (each query keeps its own key), and the oracle's
    ``[B, N, T, S]`` of its first ``T`` keys (query head ``n = kv * g + group``)."""
    sizes = {Batch: 2, KVHead: kv, GroupHead: N_HEADS // kv, Time: T, KeyPos: n_key}
    m = np.random.default_rng(seed).random([sizes[a] for a in ORACLE_MASK]) > 0.35
    m[..., np.arange(T), np.arange(T)] = True
    perm = [ORACLE_MASK.index(a) for a in MASK_AXES]
    stored = ax.tensor(m.transpose(perm), *MASK_AXES, dtype=ax.Bool)
    return stored, jnp.asarray(m[..., :T]).reshape(2, N_HEADS, T, T)


ORDERS = [(Batch, Time, Embed), (Time, Embed, Batch), (Embed, Batch, Time)]
CASES = list(zip([4, 2, 1], ORDERS, strict=True))


def _loss_grads(
    layer: Any, x: AnyT, w: np.ndarray, mask: AnyT | None
) -> tuple[jax.Array, jax.Array, Any]:
    @eqx.filter_jit
    def run(lay: Any, a: jax.Array) -> tuple[jax.Array, jax.Array, Any]:
        def loss(p: tuple[Any, jax.Array]) -> tuple[jax.Array, jax.Array]:
            y = p[0](ax.tensor(p[1], *x.axes), mask=mask)
            assert y.axes == x.axes
            return jnp.sum(y.array * w), y.array

        (gl, ga), y = eqx.filter_grad(loss, has_aux=True)((lay, a))
        return y, ga, gl

    return run(layer, x.array)


@pytest.mark.parametrize("masked", [False, True], ids=["causal", "masked"])
@pytest.mark.parametrize(("kv", "order"), CASES, ids=["kv4", "kv2", "kv1"])
def test_every_path_equals_the_einsums_and_the_repeat_kv_oracle(
    kv: int, order: tuple[type[ax.Axis], ...], masked: bool
) -> None:
    data, w = _rand((2, T, N_HEADS * DH), 5), _rand((2, T, N_HEADS * DH), 6)
    perm = [(Batch, Time, Embed).index(a) for a in order]
    x = ax.tensor(data.transpose(perm), *order, dtype=ax.F32)
    mask, flat_mask = _mask(kv, T) if masked else (None, None)

    def oracle_loss(a: jax.Array, *ws: jax.Array) -> tuple[jax.Array, jax.Array]:
        out = oracle(a, *ws, mask=flat_mask)
        return jnp.sum(out * w), out

    grads, want = jax.jit(jax.grad(oracle_loss, argnums=(0, 1, 2, 3, 4), has_aux=True))(
        jnp.asarray(data), *_flat(_layer(kv))
    )
    y_e, gx_e, gl_e = _loss_grads(_layer(kv), x, w.transpose(perm), mask)
    for impl in PATHS:  # the einsums against the oracle, every other path against both
        layer = _layer(kv, impl)
        assert layer.implementation == impl
        y, gx, gl = (
            (y_e, gx_e, gl_e)
            if impl == "einsum"
            else _loss_grads(layer, x, w.transpose(perm), mask)
        )
        np.testing.assert_allclose(
            y, np.asarray(want).transpose(perm), atol=across_programs(1e-5), err_msg=impl
        )
        np.testing.assert_allclose(y, y_e, atol=across_programs(1e-5), err_msg=impl)
        np.testing.assert_allclose(
            gx, np.asarray(grads[0]).transpose(perm), atol=1e-4, err_msg=impl
        )
        np.testing.assert_allclose(gx, gx_e, atol=across_programs(1e-5), err_msg=impl)
        for got, ein, ref in zip(_flat(gl), _flat(gl_e), grads[1:], strict=True):  # q, k, v, o
            np.testing.assert_allclose(got, ref, atol=1e-4, err_msg=impl)
            np.testing.assert_allclose(got, ein, atol=across_programs(1e-5), err_msg=impl)


def _decode(layer: Any, x: AnyT, mask: AnyT | None) -> tuple[jax.Array, ax.nn.KVCache]:
    """A prefill of 4 positions, then one position at a time, each with its rows of
    ``mask``: the outputs joined ``[Batch, Time, Embed]``, and the cache."""
    cache = layer.init_cache({Batch: 2}, max_len=8)
    ys = []
    for lo, hi in ((0, 4), *((i, i + 1) for i in range(4, T))):
        rows = None if mask is None else ax.slice(mask, Time, lo, hi)
        y, cache = layer(ax.slice(x, Time, lo, hi), cache=cache, mask=rows)
        ys.append(ax.transpose(y, Batch, Time, Embed).array)
    return jnp.concatenate(ys, axis=1), cache


@pytest.mark.parametrize("masked", [False, True], ids=["causal", "masked"])
@pytest.mark.parametrize("kv", [4, 2, 1])
def test_prefill_and_decode_steps_equal_the_oracle_on_every_path(kv: int, masked: bool) -> None:
    """Through a cache (queries after ``cache.length``, keys up to each query's own
    position, the empty ones masked): the full call's values and gradients, on every path
    ("fused" is "xla" here: JAX's choice)."""
    data, w = _rand((2, T, N_HEADS * DH), 7), _rand((2, T, N_HEADS * DH), 8)
    x = ax.tensor(data.transpose(1, 0, 2), Time, Batch, Embed, dtype=ax.F32)
    mask, flat_mask = _mask(kv, 8, seed=9) if masked else (None, None)

    def oracle_loss(*ws: jax.Array) -> tuple[jax.Array, jax.Array]:
        out = oracle(jnp.asarray(data), *ws, mask=flat_mask)
        return jnp.sum(out * w), out

    (want, want_y), want_grads = jax.jit(
        jax.value_and_grad(oracle_loss, argnums=(0, 1, 2, 3), has_aux=True)
    )(*_flat(_layer(kv)))

    def loss(lay: Any) -> tuple[jax.Array, tuple[jax.Array, ax.nn.KVCache]]:
        y, cache = _decode(lay, x, mask)
        return jnp.sum(y * w), (y, cache)

    run = eqx.filter_jit(eqx.filter_value_and_grad(loss, has_aux=True))
    for impl in ("einsum", "xla", "auto"):
        (got, (y, cache)), grads = run(_layer(kv, impl))
        assert np.all(cache.length.array == T)
        assert cache.keys.sizes[KVHead] == kv  # the key-value heads only
        np.testing.assert_allclose(y, want_y, atol=across_programs(1e-5), err_msg=impl)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4, err_msg=impl)
        for g, ref in zip(_flat(grads), want_grads, strict=True):  # q, k, v, o
            np.testing.assert_allclose(g, ref, atol=1e-4, err_msg=impl)


HeadDim = ax.nn.HeadDim
#: each operand in its own axis order (the layer makes only a few)
OP_AXES = (
    (GroupHead, Batch, HeadDim, Time, KVHead),
    (KVHead, KeyPos, Batch, HeadDim),
    (HeadDim, Batch, KVHead, KeyPos),
)


@pytest.mark.parametrize("masked", [False, True], ids=["plain", "masked"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_the_grouped_op_in_any_axis_order_equals_the_einsums(masked: bool, causal: bool) -> None:
    """``FusedAttention(group=)`` on its own: the query's ``(KVHead, GroupHead)`` heads
    against the keys' ``KVHead``, any storage order, a mask over the group, causal with
    more keys than queries (the lower-right mask): the einsum path's values and gradients."""
    sizes = {Batch: 2, KVHead: 2, GroupHead: 3, HeadDim: 4, Time: 3, KeyPos: 5}
    q, k, v = (
        ax.tensor(_rand(tuple(sizes[a] for a in axes), i), *axes, dtype=ax.F32)
        for i, axes in enumerate(OP_AXES)
    )
    m = np.random.default_rng(4).random((3, 5, 3)) > 0.4
    m[:, 0, :] = True  # key 0: seen by every query, causal or not
    mask = ax.tensor(m, GroupHead, KeyPos, Time, dtype=ax.Bool) if masked else None

    def loss(impl: str) -> Any:
        def f(qa: jax.Array, ka: jax.Array, va: jax.Array) -> tuple[jax.Array, jax.Array]:
            # the layer's route into the paths: the attention core, told the group axis
            out = attend(
                ax.tensor(qa, *q.axes),
                ax.tensor(ka, *k.axes),
                ax.tensor(va, *v.axes),
                HeadDim,
                KeyPos,
                mask,
                None,
                implementation=impl,  # type: ignore[arg-type]
                heads=KVHead,
                group=GroupHead,
                causal=(Time, 3) if causal else None,
            )
            assert out.axes == (GroupHead, Batch, Time, KVHead, HeadDim)
            return jnp.sum(jnp.sin(out.array)), out.array

        return jax.jit(jax.value_and_grad(f, argnums=(0, 1, 2), has_aux=True))

    args = (q.array, k.array, v.array)
    calls: list[FusedAttention] = []
    real = FusedAttention.forward
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(FusedAttention, "forward", lambda op, *xs: calls.append(op) or real(op, *xs))
        (_, got), grads = loss("xla")(*args)
    assert [(c.heads, c.group, c.masked) for c in calls] == [
        (KVHead, GroupHead, masked or causal)  # causal, 3 queries on 5 keys: the mask
    ]
    (_, want), want_grads = loss("einsum")(*args)
    np.testing.assert_allclose(got, want, atol=across_programs(1e-5))
    for g, ref in zip(grads, want_grads, strict=True):
        np.testing.assert_allclose(g, ref, atol=across_programs(1e-5))


def test_the_grouped_op_refuses_a_group_axis_the_key_has() -> None:
    q = ax.tensor(_rand((2, 3, 4, 3), 1), KVHead, GroupHead, HeadDim, Time)
    k = ax.tensor(_rand((2, 3, 4, 5), 2), KVHead, GroupHead, HeadDim, KeyPos)
    op = FusedAttention(HeadDim, KeyPos, heads=KVHead, group=GroupHead, implementation="xla")
    with pytest.raises(ax.AxisError, match=r"the group axis GroupHead is the query's alone"):
        op(q, k, k)


# --------------------------------------------------------------------------- CUDA lowering
_CALL = re.compile(r"custom_call\s*@__cudnn\$(fmhaSoftmax\w*)\(")
_TYPE = re.compile(r"tensor<((?:\d+x)*)([a-z]\w*)>")

#: the sizes of the lowering: none shared, so that each names one axis
LB, LT, LKV, LG, LDH, LE = 3, 16, 2, 3, 8, 40


def _shapes(text: str) -> list[tuple[int, ...]]:
    return [tuple(int(n) for n in d.split("x") if n) for d, _ in _TYPE.findall(text)]


def _cudnn_calls(text: str) -> Iterator[tuple[str, list[tuple[int, ...]], list[tuple[int, ...]]]]:
    """``(target, operand shapes, result shapes)`` of each cuDNN attention call."""
    for line in text.splitlines():
        m = _CALL.search(line)
        if m:
            operands, _, results = line.rsplit(" : ", 1)[-1].partition("->")
            yield m.group(1), _shapes(operands), _shapes(results)


def _cuda_structure(layer: Any) -> dict[str, Any]:
    """The layer's step (forward and gradient), BF16, lowered for CUDA on a pretended H100:
    its cuDNN calls, and how many lines hold a queries-by-keys tensor."""
    from benchmarks._structure import pretend_cuda, score_census

    x = ax.astype(ax.tensor(_rand((LB, LT, LE), 1), Batch, Time, Embed), ax.BF16)

    def loss(m: Any, x: AnyT) -> jax.Array:
        return ax.sum(ax.astype(m(x), ax.F32), (Batch, Time, Embed)).array

    try:
        with pretend_cuda("9.0"):
            lowered = jax.jit(jax.grad(loss)).trace(layer, x)
            text = lowered.lower(lowering_platforms=("cuda",)).as_text()
    except LookupError as e:
        pytest.skip(f"cannot pretend to lower for CUDA with this JAX: {e}")
    calls = list(_cudnn_calls(text))
    return {
        "calls": sorted(c[0] for c in calls),
        "forward": [c[1][:3] for c in calls if c[0] == "fmhaSoftmax"],
        "backward": [c[2][:3] for c in calls if c[0] == "fmhaSoftmaxBackward"],
        "score_lines": score_census(text, LT, LT).lines,
    }


def _bf16_gqa(impl: str = "auto", head: int = LDH, **kw: Any) -> Any:
    layer = ax.nn.GroupedQueryAttention(
        Embed,
        LE,
        num_heads=LKV * LG,
        num_kv_heads=LKV,
        head_size=head,
        query_pos=Time,
        implementation=impl,  # type: ignore[arg-type]
        key=jax.random.key(0),
        **kw,
    )
    return ax.nn.cast(layer, ax.BF16)


Q_SHAPE = (LB, LT, LKV * LG, LDH)  # [B, T, N, H]: KVHead and GroupHead flattened
KV_SHAPE = (LB, LT, LKV, LDH)  # [B, S, K, H]: the key-value heads only
#: the gradients of query, key and value, as cuDNN returns them: [B, N, T, H], [B, K, S, H]
DQ_SHAPE, DKV_SHAPE = (LB, LKV * LG, LT, LDH), (LB, LKV, LT, LDH)


def _check_cudnn(s: dict[str, Any]) -> None:
    assert s["calls"] == ["fmhaSoftmax", "fmhaSoftmaxBackward"], s["calls"]
    assert s["forward"] == [[Q_SHAPE, KV_SHAPE, KV_SHAPE]], s["forward"]
    assert s["backward"] == [[DQ_SHAPE, DKV_SHAPE, DKV_SHAPE]], s["backward"]
    assert s["score_lines"] == 0, s["score_lines"]


@pytest.mark.parametrize("impl", ["auto", "cudnn"])
def test_the_layer_lowers_to_one_cudnn_call_each_way_on_the_kv_heads(impl: str) -> None:
    """On an H100 (pretended), a BF16 layer without a cache: cuDNN's forward and backward
    kernels, the query heads flattened (``KVHead * GroupHead``), the keys and values with
    their ``KVHead`` heads (not repeated to the query heads: the gradients of the keys and
    values come back with those too), and no ``[Time, KeyPos]`` tensor anywhere."""
    _check_cudnn(_cuda_structure(_bf16_gqa(impl)))


def test_the_lowering_checks_catch_the_einsums_and_repeated_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The mutations the test above must catch: the einsum path (no cuDNN call, the scores
    in memory), and keys and values repeated to the query heads before the fused call."""
    einsum = _cuda_structure(_bf16_gqa("einsum"))
    assert einsum["calls"] == [] and einsum["score_lines"] > 0
    with pytest.raises(AssertionError):
        _check_cudnn(einsum)
    real = jax.nn.dot_product_attention

    def repeated(query: jax.Array, key: jax.Array, value: jax.Array, **kw: Any) -> jax.Array:
        g = query.shape[2] // key.shape[2]
        return real(query, jnp.repeat(key, g, 2), jnp.repeat(value, g, 2), **kw)

    monkeypatch.setattr(jax.nn, "dot_product_attention", repeated)
    mutated = _cuda_structure(_bf16_gqa("cudnn"))
    assert mutated["forward"] == [[Q_SHAPE, Q_SHAPE, Q_SHAPE]]
    with pytest.raises(AssertionError):
        _check_cudnn(mutated)


# --------------------------------------------------------------------------- the choice
def _traced_ops(layer: Any, x: AnyT, **kw: Any) -> list[FusedAttention]:
    """The fused ops that tracing ``layer(x, **kw)`` calls, on a pretended H100."""
    from benchmarks._structure import pretend_cuda

    ops: list[FusedAttention] = []
    real = FusedAttention.forward

    def spy(self: FusedAttention, *xs: AnyT) -> jax.Array:
        ops.append(self)
        return real(self, *xs)

    try:
        with pretend_cuda("9.0"), pytest.MonkeyPatch.context() as mp:
            mp.setattr(FusedAttention, "forward", spy)
            jax.jit(lambda m, a: m(a, **kw)).trace(layer, x)
    except LookupError as e:
        pytest.skip(f"cannot pretend to be on a GPU with this JAX: {e}")
    return ops


def _x(dtype: type[ax.DType] = ax.BF16) -> AnyT:
    return ax.astype(ax.tensor(_rand((LB, 4, LE), 2), Batch, Time, Embed), dtype)


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_attention_paths, "_WARNED", set())


def _warned(layer: Any, x: AnyT, **kw: Any) -> tuple[list[FusedAttention], list[str]]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ops = _traced_ops(layer, x, **kw)
    return ops, [str(w.message) for w in seen]


def test_auto_takes_cudnn_for_a_causal_call_with_the_kv_heads(fresh_warnings: None) -> None:
    ops, seen = _warned(_bf16_gqa(), _x())
    assert seen == []
    assert [(o.implementation, o.heads, o.group, o.causal, o.masked) for o in ops] == [
        ("cudnn", KVHead, GroupHead, True, False)
    ]


@pytest.mark.parametrize("case", ["user mask", "cache", "head dim"])
def test_auto_falls_back_to_the_einsums_with_one_warning(fresh_warnings: None, case: str) -> None:
    """A mask (the user's, or a cache's: keys up to each query's position after a traced
    length) or a head dim cuDNN cannot run: the einsums, and one warning naming why."""
    lay = _bf16_gqa(head=12 if case == "head dim" else LDH)
    what, kw = {
        "user mask": ("mask", {"mask": ax.tensor(np.arange(4) != 1, KeyPos, dtype=ax.Bool)}),
        "cache": ("mask", {"cache": lay.init_cache({Batch: LB}, 8)}),
        "head dim": ("head dim", {}),
    }[case]
    ops, seen = _warned(lay, _x(), **kw)
    assert ops == []
    assert len(seen) == 1 and seen[0].startswith(
        f"attention implementation='auto' runs the einsum path instead of cuDNN flash "
        f"attention ({what}): "
    ), seen
    ops, seen = _warned(lay, _x(), **kw)
    assert ops == [] and seen == []  # once per reason


def test_f32_takes_the_einsums_without_a_word(fresh_warnings: None) -> None:
    layer = ax.nn.cast(_bf16_gqa(), ax.F32)
    ops, seen = _warned(layer, _x(ax.F32))
    assert ops == [] and seen == []


def test_explicit_cudnn_names_what_prevents_it(fresh_warnings: None) -> None:
    cache = _bf16_gqa().init_cache({Batch: LB}, 8)
    with pytest.raises(
        ValueError, match=r"implementation='cudnn' cannot run this call \(mask\): a general mask"
    ):
        _traced_ops(_bf16_gqa("cudnn"), _x(), cache=cache)
    with pytest.raises(ValueError, match=r"cannot run this call \(dtype\): the dtype is F32"):
        _traced_ops(ax.nn.cast(_bf16_gqa("cudnn"), ax.F32), _x(ax.F32))
    ops = _traced_ops(_bf16_gqa("cudnn"), _x())
    assert [(o.implementation, o.group) for o in ops] == [("cudnn", GroupHead)]


def test_a_bad_path_is_refused_by_name() -> None:
    with pytest.raises(
        ValueError,
        match=r"GroupedQueryAttention: implementation must be one of 'auto', 'einsum', "
        r"'fused', 'xla', 'cudnn', got 'flash'",
    ):
        _layer(2, "flash")
