"""``GroupedQueryAttention(sliding_window=w)`` (Mistral's window) on every attention path,
against a jax.numpy oracle whose mask is written out here (query ``i`` sees key ``j`` where
``0 <= i - j < w``, transformers' ``kv_idx > q_idx - sliding_window``): the full call
(values and the input's gradient) and a prefill then one step at a time through a KV cache,
the sequence longer than the window; cuDNN's call (lowered for CUDA, an H100 pretended)
carries the window; the mutations (each mask, and the fused kernels' window, off by one)
fail the same checks; and the layer's own argument checks."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
import axjax.nn._attention_kernels as kernels
import axjax.nn._gqa as gqa
from tests.conftest import across_programs
from tests.nn.helpers import Batch, Time
from tests.nn.test_nn_gqa_paths import DH, N_HEADS, THETA, _flat, _rand, oracle
from tests.nn.test_nn_llama_blocks import Embed

#: the positions, the window (shorter: the window shows in every query past the third),
#: the prefill before the cached steps
T, W, PREFILL = 10, 3, 4
#: every path that runs on a CPU ("fused" is "xla" here; "auto" the einsums)
PATHS = ("einsum", "xla", "fused", "auto")
KV = 2


def window_oracle_mask(t: int, window: int) -> jax.Array:
    """``[1, 1, T, T]``: true where ``i - j < window`` (the causal part is the oracle's)."""
    i, j = np.arange(t)[:, None], np.arange(t)[None, :]
    return jnp.asarray(i - j < window)[None, None]


def _layer(impl: str, window: int | None = W) -> ax.nn.GroupedQueryAttention:
    return ax.nn.GroupedQueryAttention(
        Embed,
        N_HEADS * DH,
        num_heads=N_HEADS,
        num_kv_heads=KV,
        query_pos=Time,
        rope_theta=THETA,
        implementation=impl,  # type: ignore[arg-type]
        sliding_window=window,
        key=jax.random.key(4),
    )


DATA, WEIGHTS = _rand((2, T, N_HEADS * DH), 11), _rand((2, T, N_HEADS * DH), 12)
X = ax.tensor(DATA, Batch, Time, Embed, dtype=ax.F32)


@functools.cache
def _want() -> tuple[jax.Array, jax.Array]:
    """The oracle's output and its input gradient, window ``W``."""

    def loss(a: jax.Array, *ws: jax.Array) -> tuple[jax.Array, jax.Array]:
        out = oracle(a, *ws, mask=window_oracle_mask(T, W))
        return jnp.sum(out * WEIGHTS), out

    grad, out = jax.jit(jax.grad(loss, has_aux=True))(jnp.asarray(DATA), *_flat(_layer("einsum")))
    return out, grad


def _full(layer: Any, a: jax.Array) -> tuple[jax.Array, jax.Array]:
    def loss(b: jax.Array) -> tuple[jax.Array, jax.Array]:
        y = ax.transpose(layer(ax.tensor(b, Batch, Time, Embed)), Batch, Time, Embed)
        return jnp.sum(y.array * WEIGHTS), y.array

    grad, out = jax.grad(loss, has_aux=True)(a)
    return out, grad


def _step(layer: Any, x: Any, cache: ax.nn.KVCache) -> tuple[Any, ax.nn.KVCache]:
    out: tuple[Any, ax.nn.KVCache] = layer(x, cache=cache)
    return out


def _cached(layer: Any, step: Callable[..., Any]) -> jax.Array:
    """A prefill of ``PREFILL`` positions, then one position at a time (the traced lengths:
    one program for every step), the outputs joined ``[Batch, Time, Embed]``."""
    cache = layer.init_cache({Batch: 2}, max_len=T + 2)
    ys = []
    for lo, hi in ((0, PREFILL), *((i, i + 1) for i in range(PREFILL, T))):
        y, cache = step(layer, ax.slice(X, Time, lo, hi), cache)
        ys.append(ax.transpose(y, Batch, Time, Embed).array)
    assert cache.length.array.tolist() == [T, T]
    return jnp.concatenate(ys, axis=1)


FULL, STEP = eqx.filter_jit(_full), eqx.filter_jit(_step)


def _errors(impl: str, fresh: bool = False, cached: bool = True) -> list[float]:
    """The largest errors against the oracle: the full call, its input gradient, and (with
    ``cached``) the cached steps; ``fresh``: compiled anew, so that a planted change is
    seen."""
    want, want_grad = _want()
    layer = _layer(impl)
    full, step = (
        (eqx.filter_jit(lambda m, a: _full(m, a)), eqx.filter_jit(lambda *a: _step(*a)))
        if fresh
        else (FULL, STEP)
    )
    out, grad = full(layer, jnp.asarray(DATA))
    pairs = [(out, want), (grad, want_grad)]
    if cached:
        pairs.append((_cached(layer, step), want))
    return [float(jnp.abs(a - b).max()) for a, b in pairs]


@pytest.mark.parametrize("impl", PATHS)
def test_every_path_honours_the_window_in_the_full_call_and_the_cached_steps(impl: str) -> None:
    if impl == "einsum":  # the window of 3 in 10 positions moves the oracle: not vacuous
        full = jax.jit(oracle)(jnp.asarray(DATA), *_flat(_layer("einsum")))
        assert float(jnp.abs(full - _want()[0]).max()) > 1e-2
    out, grad, steps = _errors(impl)
    assert out < across_programs(1e-5), out
    assert grad < 1e-4, grad
    assert steps < across_programs(1e-5), steps


def _off_by_one_masks(monkeypatch: pytest.MonkeyPatch) -> None:
    real_window, real_cached = kernels.window_mask, gqa.cached_causal_mask

    def window_mask(q: Any, k: Any, nq: int, nk: int, window: int) -> Any:
        return real_window(q, k, nq, nk, window + 1)

    def cached(q: Any, k: Any, nq: int, nk: int, start: Any, window: int | None = None) -> Any:
        return real_cached(q, k, nq, nk, start, None if window is None else window + 1)

    monkeypatch.setattr(kernels, "window_mask", window_mask)
    monkeypatch.setattr(gqa, "cached_causal_mask", cached)


def _off_by_one_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    real = jax.nn.dot_product_attention

    def wider(*args: Any, local_window_size: Any = None, **kw: Any) -> jax.Array:
        if local_window_size is not None:
            local_window_size = (local_window_size[0] + 1, 0)
        return real(*args, local_window_size=local_window_size, **kw)

    monkeypatch.setattr(jax.nn, "dot_product_attention", wider)


MUTATIONS: dict[str, tuple[Callable[[pytest.MonkeyPatch], None], dict[str, tuple[int, ...]]]] = {
    # the masks: the einsum path's full call, and every path's cached step
    "masks": (_off_by_one_masks, {"einsum": (0, 2), "xla": (2,)}),
    # (the fused paths' full call takes the kernels' window, not a mask)
    # the fused kernels' local_window_size: their full call
    "kernel": (_off_by_one_kernel, {"xla": (0,), "fused": (0,)}),
}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_mutation_the_window_off_by_one_fails_the_checks(
    monkeypatch: pytest.MonkeyPatch, mutation: str
) -> None:
    plant, caught = MUTATIONS[mutation]
    _want()  # the oracle, before the plant
    plant(monkeypatch)
    for impl, which in caught.items():
        # the planted code, not a program compiled before
        errors = _errors(impl, fresh=True, cached=2 in which)
        for i in which:
            assert errors[i] > 1e-3, (impl, i, errors)


def test_cudnn_takes_the_window_as_its_sliding_window_length() -> None:
    """Lowered for CUDA (an H100 pretended), a BF16 layer's call: one cuDNN attention whose
    configuration carries ``sliding_window_length`` = the window, causal; without a window
    none (the mutation: a window dropped on the way to the kernel)."""
    from tests.nn.test_nn_gqa_paths import LB, LE, LT, _bf16_gqa

    try:
        from benchmarks._structure import pretend_cuda
    except ImportError as e:  # pragma: no cover - the checkout's benchmarks
        pytest.skip(f"no benchmarks package: {e}")
    x = ax.astype(ax.tensor(_rand((LB, LT, LE), 1), Batch, Time, Embed), ax.BF16)

    def lowered(window: int | None) -> str:
        layer = _bf16_gqa("cudnn", sliding_window=window)
        try:
            with pretend_cuda("9.0"):
                traced = jax.jit(lambda m, a: ax.sum(ax.astype(m(a), ax.F32), Time).array).trace(
                    layer, x
                )
                return str(traced.lower(lowering_platforms=("cuda",)).as_text())
        except LookupError as e:
            pytest.skip(f"cannot pretend to lower for CUDA with this JAX: {e}")

    calls = [line for line in lowered(3).splitlines() if "fmhaSoftmax" in line]
    assert len(calls) == 1 and "sliding_window_length\\22: 3" in calls[0], calls
    assert "mask_type\\22: \\22CAUSAL" in calls[0]
    plain = [line for line in lowered(None).splitlines() if "fmhaSoftmax" in line]
    assert len(plain) == 1 and "sliding_window_length\\22: 3" not in plain[0]


def test_the_layer_checks_its_window_and_bias_arguments() -> None:
    for bad in (0, -2):
        with pytest.raises(ValueError, match=r"GroupedQueryAttention: sliding_window"):
            _layer("einsum", bad)
    with pytest.raises(TypeError, match=r"GroupedQueryAttention: qkv_bias is a bool, got str"):
        ax.nn.GroupedQueryAttention(
            Embed, 8, num_heads=2, num_kv_heads=1, query_pos=Time, qkv_bias="yes",  # type: ignore[arg-type]
            key=jax.random.key(0),
        )  # fmt: skip
    assert _layer("einsum", None).sliding_window is None and _layer("einsum").biases is None
