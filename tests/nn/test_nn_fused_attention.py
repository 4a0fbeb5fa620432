"""The fused attention op (``jax.nn.dot_product_attention``) against the einsum path: values
and gradients (JAX's VJP, the op's declared backward, finite differences), masks, key
lengths, causality (decode-shaped too), several batch axes in any order, heads, graphs, the
dropout fallback; the choice of path on a GPU (backend and compute capability pretended),
its warnings and errors."""

from __future__ import annotations

import warnings
from typing import Any, final, get_args

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import axjax as ax
from axjax.nn import _attention_paths
from axjax.nn._attention_paths import default_attention_path
from axjax.nn._fused_attention import FusedAttention
from tests.nn.helpers import Batch, Embed, Time, arr, close

KeyPos, Head, HeadDim = ax.KeyOf[Time], ax.nn.Head, ax.nn.HeadDim
AnyT = ax.Tensor[Any, *tuple[Any, ...]]


@final
class Group(ax.Axis): ...


def _rand(shape: tuple[int, ...], *axes: type[ax.Axis], seed: int = 0) -> AnyT:
    data = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    return ax.tensor(data, *axes, dtype=ax.F32)


def _qkv() -> tuple[AnyT, AnyT, AnyT]:
    # two batch axes and the heads, each operand in its own axis order
    q = _rand((2, 5, 3, 4, 2), Batch, Time, Head, HeadDim, Group, seed=1)
    k = _rand((3, 2, 6, 2, 4), Head, Batch, KeyPos, Group, HeadDim, seed=2)
    v = _rand((2, 2, 6, 3, 4), Group, Batch, KeyPos, Head, HeadDim, seed=3)
    return q, k, v


def _mask() -> AnyT:
    m = np.random.default_rng(4).random((5, 3, 6)) > 0.4
    m[:, :, 0] = True  # every query sees at least one key
    return ax.tensor(m, Time, Head, KeyPos, dtype=ax.Bool)


def _attend(impl: str, mask: AnyT | None) -> Any:
    def f(qa: jax.Array, ka: jax.Array, va: jax.Array) -> jax.Array:
        q, k, v = _qkv()
        out = ax.nn.dot_product_attention(
            ax.tensor(qa, *q.axes),
            ax.tensor(ka, *k.axes),
            ax.tensor(va, *v.axes),
            over=HeadDim,
            key_pos=KeyPos,
            mask=mask,
            implementation=impl,
        )  # type: ignore[arg-type]
        return out.array

    return f


@pytest.mark.parametrize("masked", [False, True])
def test_fused_values_and_gradients_equal_the_einsum_path(masked: bool) -> None:
    q, k, v = _qkv()
    mask = _mask() if masked else None
    fused, einsum = _attend("fused", mask), _attend("einsum", mask)
    y = ax.nn.dot_product_attention(
        q, k, v, over=HeadDim, key_pos=KeyPos, mask=mask, implementation="fused"
    )
    assert y.axes == (Batch, Time, Head, Group, HeadDim)
    args = (q.array, k.array, v.array)
    w = jnp.asarray(np.random.default_rng(5).normal(size=y.shape), jnp.float32)

    def value_and_grads(f: Any) -> Any:
        return jax.jit(jax.value_and_grad(lambda *a: (f(*a) * w).sum(), argnums=(0, 1, 2)))(*args)

    close(y.array, einsum(*args), 1e-5)
    (vf, grads_f), (ve, grads_e) = value_and_grads(fused), value_and_grads(einsum)
    close(vf, ve, 1e-4)
    for gf, ge in zip(grads_f, grads_e, strict=True):
        close(gf, ge, 1e-5)
    if masked:  # the plain forward differentiated by JAX gives the same gradient
        with ax.jax_autodiff():
            _, grads_j = value_and_grads(fused)
        for gj, ge in zip(grads_j, grads_e, strict=True):
            close(gj, ge, 1e-5)


def test_the_op_backward_passes_finite_differences() -> None:
    q, k, v = _qkv()
    f = _attend("fused", _mask())
    check_grads(
        jax.jit(f), (q.array, k.array, v.array), order=1, modes=("rev",), atol=2e-2, rtol=2e-2
    )


def test_heads_go_to_the_heads_dimension_and_causal_needs_no_mask(key: jax.Array) -> None:
    calls: list[FusedAttention] = []
    real = FusedAttention.forward

    def spy(self: FusedAttention, *xs: AnyT) -> jax.Array:
        calls.append(self)
        return real(self, *xs)

    x = _rand((2, 7, 8), Batch, Time, Embed, seed=6)
    user_mask = ax.tensor(np.arange(7) != 3, KeyPos, dtype=ax.Bool)
    outs = {}
    for impl in ("einsum", "fused"):
        mha = ax.nn.MultiheadAttention(
            Embed, 8, num_heads=2, query_pos=Time, causal=True, implementation=impl, key=key
        )  # type: ignore[arg-type]
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(FusedAttention, "forward", spy)
            outs[impl] = eqx.filter_jit(
                eqx.filter_value_and_grad(
                    lambda m: ax.sum(m(x, mask=user_mask), (Batch, Time, Embed)).array
                )
            )(mha)
    assert len(calls) == 1 and calls[0].heads is Head and calls[0].causal
    close(outs["fused"][0], outs["einsum"][0], 1e-5)
    for gf, ge in zip(
        jax.tree.leaves(outs["fused"][1]), jax.tree.leaves(outs["einsum"][1]), strict=True
    ):
        close(gf, ge, 1e-5)


def test_dropout_keeps_the_einsum_path_while_training(key: jax.Array) -> None:
    mha = ax.nn.MultiheadAttention(
        Embed, 8, num_heads=2, query_pos=Time, dropout_p=0.5, implementation="fused", key=key
    )
    x = _rand((2, 4, 8), Batch, Time, Embed)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(FusedAttention, "forward", lambda *a: pytest.fail("fused with dropout"))
        eqx.filter_jit(lambda m: m(x, key=jax.random.key(1), inference=False))(mha)
    calls: list[FusedAttention] = []
    real = FusedAttention.forward
    with pytest.MonkeyPatch.context() as mp:  # in inference dropout is off: the fused path
        mp.setattr(FusedAttention, "forward", lambda op, *xs: calls.append(op) or real(op, *xs))
        close(mha(x, inference=True).array, eqx.nn.inference_mode(mha)(x).array)
    assert len(calls) == 2


def test_fused_attention_in_a_graph() -> None:
    q, k, v = _qkv()
    nodes = [ax.Input(ax.F32, *t.axes) for t in (q, k, v)]
    out = ax.nn.dot_product_attention(*nodes, over=HeadDim, key_pos=KeyPos, implementation="fused")
    assert out.axes == (Batch, Time, Head, Group, HeadDim)
    run = ax.compile(out, inputs=nodes)
    close(run(q, k, v).array, _attend("einsum", None)(q.array, k.array, v.array), 1e-5)


def test_errors_name_the_problem() -> None:
    q, k, v = _qkv()
    v2 = ax.rename(v, Group, Embed)
    with pytest.raises(
        ax.AxisError,
        match=r"the value has axes \(Embed, Batch, KeyOf\[Time\], Head, "
        r"HeadDim\), expected",
    ):
        ax.nn.dot_product_attention(q, k, v2, over=HeadDim, key_pos=KeyPos, implementation="fused")
    bad = ax.astype(_mask(), ax.I32)
    with pytest.raises(ax.AxisError, match=r"the mask must be Bool \(true = keep\), got I32"):
        ax.nn.dot_product_attention(
            q, k, v, over=HeadDim, key_pos=KeyPos, mask=bad, implementation="fused"
        )
    with pytest.raises(ax.AxisError, match="dtypes BF16 and F32 differ"):
        ax.nn.dot_product_attention(
            ax.astype(q, ax.BF16), k, v, over=HeadDim, key_pos=KeyPos, implementation="fused"
        )


# --------------------------------------------------------------------------- derivatives
def test_jax_differentiates_the_fused_call_and_the_declared_backward_agrees(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``jax_vjp``: gradients come from JAX's VJP of ``jax.nn.dot_product_attention`` (the
    op's ``backward`` is not called); with it off, the op's ``backward`` gives the same."""
    q, k, v = _qkv()
    args = (q.array, k.array, v.array)
    f = _attend("xla", _mask())
    grad = jax.jit(jax.grad(lambda *a: jnp.sum(jnp.sin(f(*a))), argnums=(0, 1, 2)))
    called: list[int] = []
    real = FusedAttention.backward
    monkeypatch.setattr(
        FusedAttention, "backward", lambda *a: called.append(1) or real(*a), raising=True
    )
    via_jax = grad(*args)
    assert called == []
    monkeypatch.setattr(FusedAttention, "jax_vjp", False)
    via_backward = jax.jit(jax.grad(lambda *a: jnp.sum(jnp.sin(f(*a))), argnums=(0, 1, 2)))(*args)
    assert called == [1]
    for a, b in zip(via_jax, via_backward, strict=True):
        close(a, b, 1e-5)


def test_graph_gradients_through_the_fused_op() -> None:
    q, k, v = _qkv()
    scale = ax.Param(ax.tensor(np.linspace(0.5, 1.5, 4).astype(np.float32), HeadDim), name="s")
    nodes = [ax.Input(ax.F32, *t.axes, sizes={HeadDim: 4}) for t in (q, k, v)]
    grads = {}
    for impl in ("xla", "einsum"):
        out = ax.nn.dot_product_attention(
            nodes[0] * ax.broadcast(scale, nodes[0]),
            *nodes[1:],
            over=HeadDim,
            key_pos=KeyPos,
            implementation=impl,  # type: ignore[arg-type]
        )
        loss = ax.sum(ax.sin(out), out.axes)
        grads[impl] = ax.grad(loss, wrt=scale, inputs=nodes)(q, k, v)
    assert grads["xla"].axes == (HeadDim,)
    close(grads["xla"].array, grads["einsum"].array, 1e-5)
    open_size = [ax.Input(ax.F32, *t.axes) for t in (q, k, v)]  # the scale needs HeadDim's
    with pytest.raises(ax.AxisError, match="Cannot read the size of axis HeadDim"):
        ax.nn.dot_product_attention(
            *open_size, over=HeadDim, key_pos=KeyPos, implementation="einsum"
        )


# --------------------------------------------------------------------------- key lengths
LENGTHS = np.array([[6, 2], [3, 1]], np.int32)  # [Batch, Group]: 1..6 valid keys of 6


def _oracle(
    q: AnyT, k: AnyT, v: AnyT, lengths: np.ndarray | None, causal: bool = False
) -> jax.Array:
    """Plain jnp attention on ``[Batch, Group, Head, pos, HeadDim]`` arrays."""
    order = (Batch, Group, Head)
    qa = arr(q, *order, Time, HeadDim)
    ka, va = (arr(t, *order, KeyPos, HeadDim) for t in (k, v))
    s = jnp.einsum("bgnth,bgnsh->bgnts", qa, ka) / np.sqrt(qa.shape[-1])
    keep = jnp.ones(s.shape, bool)
    if lengths is not None:
        keep &= jnp.arange(s.shape[-1])[None, None, None, None] < lengths[:, :, None, None, None]
    if causal:
        t, n = s.shape[-2:]  # lower-right: the queries are the last positions
        keep &= jnp.tril(jnp.ones((t, n), bool), max(n - t, 0))[None, None, None]
    s = jnp.where(keep, s, -1e30)
    return jnp.einsum("bgnts,bgnsh->bgnth", jax.nn.softmax(s, -1), va)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lengths_axes", [(Batch, Group), (Group, Batch), (Batch,)])
def test_key_lengths_equal_a_padding_mask_on_every_path(
    lengths_axes: tuple[type[ax.Axis], ...], causal: bool
) -> None:
    q, k, v = _qkv()
    want_lengths = LENGTHS if len(lengths_axes) == 2 else np.repeat(LENGTHS[:, :1], 2, 1)
    stored = want_lengths if lengths_axes[0] is Batch else want_lengths.T
    lengths = ax.tensor(stored[:, 0] if len(lengths_axes) == 1 else stored, *lengths_axes)
    w = jnp.asarray(np.random.default_rng(7).normal(size=(2, 2, 3, 5, 4)), jnp.float32)

    def loss(impl: str) -> Any:
        def f(qa: jax.Array, ka: jax.Array, va: jax.Array) -> jax.Array:
            out = ax.nn.dot_product_attention(
                ax.tensor(qa, *q.axes),
                ax.tensor(ka, *k.axes),
                ax.tensor(va, *v.axes),
                over=HeadDim,
                key_pos=KeyPos,
                key_lengths=lengths,
                causal=causal,
                implementation=impl,  # type: ignore[arg-type]
            )
            assert out.axes == (Batch, Time, Head, Group, HeadDim)
            return jnp.sum(arr(out, Batch, Group, Head, Time, HeadDim) * w)

        return f

    def oracle(qa: jax.Array, ka: jax.Array, va: jax.Array) -> jax.Array:
        t = (ax.tensor(qa, *q.axes), ax.tensor(ka, *k.axes), ax.tensor(va, *v.axes))
        return jnp.sum(_oracle(*t, want_lengths, causal) * w)

    args = (q.array, k.array, v.array)
    want, want_grads = jax.value_and_grad(oracle, argnums=(0, 1, 2))(*args)
    for impl in ("einsum", "xla"):
        got, grads = jax.jit(jax.value_and_grad(loss(impl), argnums=(0, 1, 2)))(*args)
        close(got, want, 1e-5, impl)
        for g, gw in zip(grads, want_grads, strict=True):
            close(g, gw, 1e-5, impl)


def test_key_lengths_in_multihead_attention_ignore_the_padding(key: jax.Array) -> None:
    x = _rand((2, 5, 8), Batch, Time, Embed, seed=8)
    lengths = ax.tensor(np.array([5, 3], np.int32), Batch)
    mask = ax.tensor(np.arange(5)[None, :] < np.array([[5], [3]]), Batch, KeyPos)
    padded = ax.tensor(x.array.at[1, 3:].set(50.0), Batch, Time, Embed)
    outs = []
    for impl in ("einsum", "xla"):
        mha = ax.nn.MultiheadAttention(
            Embed, 8, num_heads=2, query_pos=Time, causal=True, implementation=impl, key=key
        )  # type: ignore[arg-type]
        y = mha(x, key_lengths=lengths)
        close(y.array, mha(x, mask=mask).array, 1e-5, impl)
        close(mha(padded, key_lengths=lengths).array[1, :3], y.array[1, :3], 1e-5, impl)
        outs.append(y.array)
    close(outs[0], outs[1], 1e-5)


def test_key_length_errors(key: jax.Array) -> None:
    q, k, v = _qkv()
    with pytest.raises(ax.AxisError, match="key lengths are integers .*, got F32"):
        ax.nn.dot_product_attention(
            q, k, v, over=HeadDim, key_pos=KeyPos, key_lengths=ax.ones((2,), Batch)
        )
    mha = ax.nn.MultiheadAttention(Embed, 8, num_heads=2, query_pos=Time, key=key)
    with pytest.raises(ax.AxisError, match=r"axis Head is not a batch axis .*\(those are: Batch\)"):
        mha(_rand((2, 4, 8), Batch, Time, Embed), key_lengths=ax.ones((2,), Head, dtype=ax.I32))


# --------------------------------------------------------------------------- causality
#: every path that runs on this machine (cuDNN's refusal is tested below, pretending a GPU)
CPU_PATHS = tuple(p for p in get_args(ax.nn.AttentionPath) if p != "cudnn")


def test_the_causal_mask_aligns_lower_right() -> None:
    cm = ax.nn.causal_mask
    assert cm(Time, KeyPos, 1, 5).array.tolist() == [[True] * 5]
    assert cm(Time, KeyPos, 2, 5).array.tolist() == [[True] * 4 + [False], [True] * 5]
    assert cm(Time, KeyPos, 3, 3).array.tolist() == np.tril(np.ones((3, 3), bool)).tolist()
    assert cm(Time, KeyPos, 3, 2).array.tolist() == [[True, False], [True, True], [True, True]]
    assert cm(Time, KeyPos, 2, 4, 1).array.tolist() == [
        [True, True, False, False],
        [True, True, True, False],
    ]
    traced = jax.jit(lambda o: cm(Time, KeyPos, 1, 4, o).array)(jnp.int32(2))
    assert traced.tolist() == [[True, True, True, False]]
    with pytest.raises(TypeError, match="causal_mask: offset must be an int, got float 1.5"):
        cm(Time, KeyPos, 1, 4, 1.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("impl", CPU_PATHS)
def test_decode_shaped_causal_attention_is_lower_right_on_every_path(
    impl: str, key: jax.Array
) -> None:
    """Fewer queries than keys (T=5 < S=6 here; 3 < 6 below): the queries are the last
    positions, query i sees keys 0..i+S-T, on every path (the fused kernels' causal flag
    is top-left: they get the mask), as ``causal_mask`` and the oracle."""
    q, k, v = _qkv()
    want = _oracle(q, k, v, None, causal=True)
    out = ax.nn.dot_product_attention(
        q, k, v, over=HeadDim, key_pos=KeyPos, causal=True, implementation=impl
    )  # type: ignore[arg-type]
    close(arr(out, Batch, Group, Head, Time, HeadDim), want, 1e-5, impl)
    memory = _rand((2, 6, 8), Batch, KeyPos, Embed, seed=9)
    x = _rand((2, 3, 8), Batch, Time, Embed, seed=10)
    mha = ax.nn.MultiheadAttention(
        Embed, 8, num_heads=2, query_pos=Time, causal=True, implementation=impl, key=key
    )  # type: ignore[arg-type]
    ref = ax.nn.MultiheadAttention(
        Embed, 8, num_heads=2, query_pos=Time, causal=True, implementation="einsum", key=key
    )
    y = mha(x, memory).array
    close(y, ref(x, memory).array, 1e-5, impl)
    changed = ax.tensor(memory.array.at[:, 5:].set(9.0), Batch, KeyPos, Embed)
    y2 = mha(x, changed).array
    close(y2[:, :2], y[:, :2], 1e-6, impl)  # key 5 is seen by the last query only
    assert not np.allclose(y2[:, 2], y[:, 2])
    one = _rand((2, 1, 8), Batch, Time, Embed, seed=11)  # one query sees every key
    decoded = mha(one, memory).array
    plain = ax.nn.MultiheadAttention(
        Embed, 8, num_heads=2, query_pos=Time, implementation="einsum", key=key
    )
    close(decoded, plain(one, memory).array, 1e-5, impl)


def test_cudnn_refuses_causal_attention_with_fewer_queries_than_keys(
    monkeypatch: pytest.MonkeyPatch, key: jax.Array
) -> None:
    """cuDNN's causal flag is top-left: ``"auto"`` takes the einsums (lower-right) for such
    a call, and an explicit ``"cudnn"`` says why it cannot run it."""
    _on_gpu(monkeypatch)
    assert default_attention_path(ax.BF16, 64, causal=True, n_query=1, n_key=5) == "einsum"
    assert default_attention_path(ax.BF16, 64, causal=True, n_query=5, n_key=5) == "cudnn"
    monkeypatch.setattr(FusedAttention, "forward", lambda *a: pytest.fail("fused"))
    mha, _ = _bf16_mha(key, 8, causal=True)
    x = ax.astype(_rand((2, 1, 16), Batch, Time, Embed), ax.BF16)
    memory = ax.astype(_rand((2, 5, 16), Batch, KeyPos, Embed), ax.BF16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mha(x, memory)  # the einsum path: FusedAttention.forward is never called
    mha, _ = _bf16_mha(key, 8, causal=True, implementation="cudnn")
    with pytest.raises(ValueError, match=r"its causal flag aligns top-left, ax.nn.causal_mask"):
        mha(x, memory)


# --------------------------------------------------------------------------- the choice
def _on_gpu(mp: pytest.MonkeyPatch, capability: str = "9.0") -> None:
    """Pretend the default backend is an NVIDIA GPU of ``capability``; forget warnings."""
    mp.setattr(_attention_paths, "_backend", lambda: "gpu")
    mp.setattr(_attention_paths, "compute_capability", lambda: capability)
    mp.setattr(_attention_paths, "_WARNED", set())


def test_auto_takes_cudnn_where_it_can_run(monkeypatch: pytest.MonkeyPatch) -> None:
    path = default_attention_path
    _on_gpu(monkeypatch, "9.0")
    assert path(ax.BF16, 64, causal=True, n_query=128, n_key=128) == "cudnn"
    assert path(ax.F16, 128) == "cudnn"
    assert path(ax.BF16, 256) == "cudnn"
    assert path(ax.F32, 64) == "einsum"
    assert path(ax.BF16, 60) == "einsum"
    assert path(ax.BF16, 264) == "einsum"
    assert path(ax.BF16, 64, dropout=True) == "einsum"
    assert path(ax.BF16, 64, masked=True) == "einsum"
    assert path(ax.BF16, 64, causal=True, n_query=1, n_key=128) == "einsum"
    _on_gpu(monkeypatch, "8.0")
    assert path(ax.BF16, 256) == "einsum" and path(ax.BF16, 128) == "cudnn"
    monkeypatch.setattr(_attention_paths, "_backend", lambda: "cpu")
    assert path(ax.BF16, 64) == "einsum"
    assert ax.nn.cudnn_refusal(ax.BF16, 64) == (
        "backend",
        "cuDNN runs on an NVIDIA GPU; the default backend is cpu",
    )


def test_auto_on_this_backend() -> None:
    if jax.default_backend() != "gpu":
        assert default_attention_path(ax.BF16, 64) == "einsum"
        assert ax.nn.compute_capability() is None


def _bf16_mha(key: jax.Array, head: int, **kw: Any) -> tuple[Any, AnyT]:
    mha = ax.nn.cast(
        ax.nn.MultiheadAttention(Embed, 2 * head, num_heads=2, query_pos=Time, key=key, **kw),
        ax.BF16,
    )
    return mha, ax.astype(_rand((2, 4, 2 * head), Batch, Time, Embed), ax.BF16)


def test_auto_falls_back_with_one_warning_per_reason(
    monkeypatch: pytest.MonkeyPatch, key: jax.Array
) -> None:
    _on_gpu(monkeypatch)
    monkeypatch.setattr(FusedAttention, "forward", lambda *a: pytest.fail("fused"))
    mha, x = _bf16_mha(key, 12)  # head dim 12: not a multiple of 8
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        mha(x)
        mha(x)
    assert [str(w.message) for w in seen] == [
        "attention implementation='auto' runs the einsum path instead of cuDNN flash "
        "attention (head dim): the head dim is 12; cuDNN flash attention needs a multiple of "
        "8 up to 256 on compute capability 9.0. Pass implementation='einsum' to choose it "
        "explicitly."
    ]
    mha, x = _bf16_mha(key, 8)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        mha(x, mask=ax.tensor(np.ones(4, bool), KeyPos))
        mha(x, mask=ax.tensor(np.ones(4, bool), KeyPos))
        ax.nn.dot_product_attention(  # f32 on a GPU: the einsums, as a matter of course
            *_qkv(), over=HeadDim, key_pos=KeyPos
        )
    assert [str(w.message).split(": ")[0] for w in seen] == [
        "attention implementation='auto' runs the einsum path instead of cuDNN flash "
        "attention (mask)"
    ]


def test_explicit_cudnn_that_cannot_run_names_what_prevents_it(
    monkeypatch: pytest.MonkeyPatch, key: jax.Array
) -> None:
    q, k, v = _qkv()
    with pytest.raises(
        ValueError, match=r"implementation='cudnn' cannot run this call \(backend\)"
    ):
        monkeypatch.setattr(_attention_paths, "_backend", lambda: "cpu")
        ax.nn.dot_product_attention(q, k, v, over=HeadDim, key_pos=KeyPos, implementation="cudnn")
    _on_gpu(monkeypatch)
    with pytest.raises(
        ValueError,
        match=r"cannot run this call \(dtype\): the dtype is F32; cuDNN flash attention takes "
        r"BF16 or F16",
    ):
        ax.nn.dot_product_attention(q, k, v, over=HeadDim, key_pos=KeyPos, implementation="cudnn")
    mha, x = _bf16_mha(key, 8, dropout_p=0.1, implementation="cudnn")
    with pytest.raises(ValueError, match=r"\(dropout\): attention dropout is on"):
        mha(x, key=jax.random.key(1))
    mha, x = _bf16_mha(key, 8, causal=True, implementation="cudnn")
    memory = ax.astype(_rand((2, 6, 16), Batch, KeyPos, Embed), ax.BF16)
    with pytest.raises(ValueError, match=r"\(causal\): causal attention with 4 queries and 6"):
        mha(x, memory)


def test_key_lengths_and_causality_go_to_cudnn_as_lengths(key: jax.Array) -> None:
    """On a GPU (pretended: lowered for CUDA), a causal bf16 layer with key lengths runs one
    cuDNN flash-attention call each way and holds no queries-by-keys tensor."""
    from benchmarks._structure import custom_calls, pretend_cuda, score_census

    mha, x = _bf16_mha(key, 8, causal=True)
    x = ax.astype(_rand((2, 12, 16), Batch, Time, Embed), ax.BF16)
    lengths = ax.tensor(np.array([12, 7], np.int32), Batch)

    def loss(m: Any, x: AnyT, n: AnyT) -> jax.Array:
        return ax.sum(ax.astype(m(x, key_lengths=n), ax.F32), (Batch, Time, Embed)).array

    try:
        with pretend_cuda("9.0"):
            lowered = jax.jit(jax.grad(loss)).trace(mha, x, lengths)
            text = lowered.lower(lowering_platforms=("cuda",)).as_text()
    except LookupError as e:
        pytest.skip(f"cannot pretend to lower for CUDA with this JAX: {e}")
    calls = custom_calls(text)
    assert calls["__cudnn$fmhaSoftmax"] == calls["__cudnn$fmhaSoftmaxBackward"] == 1, calls
    assert score_census(text, 12, 12).lines == 0
