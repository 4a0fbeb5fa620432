"""``ax.train.linear_cross_entropy``: the head and the loss in one blockwise op.

Its op-table cases (tests/ops/op_cases.py, ``LOSSES``) check the forward against the
``jax.numpy`` oracle and the backward against ``jax.grad`` of it and finite differences, in
several axis orders. Here: the values and gradients against the plain head and
``softmax_cross_entropy`` at sizes where the positions are chunked (padded when the chunk
does not divide them), in bf16 as the mixed policy runs it, the errors, and the memory that
is the point of the op.
"""

from __future__ import annotations

from typing import Any, final

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax


@final
class Batch(ax.Axis): ...


@final
class Pos(ax.Axis): ...


@final
class Embed(ax.Axis): ...


@final
class Vocab(ax.Axis): ...


def _inputs(b: int, t: int, e: int, v: int, seed: int = 0, dtype: Any = np.float32) -> Any:
    rng = np.random.default_rng(seed)
    h = ax.tensor(rng.normal(size=(b, t, e)).astype(dtype), Batch, Pos, Embed)
    w = ax.tensor((rng.normal(size=(v, e)) / np.sqrt(e)).astype(dtype), Vocab, Embed)
    y = ax.tensor(rng.integers(0, v, (b, t)).astype(np.int32), Batch, Pos)
    return h, w, y


def _mean(per_token: Any) -> Any:
    return ax.mean(ax.mean(per_token, Pos), Batch).array


def _fused(h: Any, w: Any, y: Any, chunk: int | None = None) -> Any:
    return _mean(ax.train.linear_cross_entropy(h, w, y, Vocab, chunk=chunk))


def _plain(h: Any, w: Any, y: Any) -> Any:
    logits = ax.astype(ax.contract(h, w, over=Embed), ax.F32)
    return _mean(ax.train.softmax_cross_entropy(logits, y, Vocab))


@pytest.mark.parametrize("chunk", [1, 3, 5, None])
@pytest.mark.parametrize("order", ["bte", "etb", "tbe"])
def test_values_and_gradients_equal_the_plain_head(chunk: int | None, order: str) -> None:
    """The loss and both gradients (hidden states, table) under ``jax.jit``, chunked every
    way (1 position, 3 of 7: padded, 5, one chunk) and in three layouts of the hidden
    states, equal the plain head's at rtol 1e-5 plus an atol (gradients near 0)."""
    h, w, y = _inputs(3, 7, 8, 37)
    axes = {"b": Batch, "t": Pos, "e": Embed}
    h = ax.transpose(h, *(axes[c] for c in order))
    y = ax.transpose(y, *(axes[c] for c in order if c != "e"))
    grad = jax.jit(jax.value_and_grad(_fused, argnums=(0, 1)), static_argnums=3)
    (value, (gh, gw)) = grad(h, w, y, chunk)
    (want, (wh, ww)) = jax.value_and_grad(_plain, argnums=(0, 1))(h, w, y)
    np.testing.assert_allclose(value, want, rtol=1e-5)
    assert gh.axes == h.axes and gw.axes == w.axes
    np.testing.assert_allclose(gh.array, wh.array, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gw.array, ww.array, rtol=1e-5, atol=1e-7)


def test_bf16_operands_give_a_float32_loss_close_to_the_plain_bf16_head() -> None:
    """BF16 hidden states and table (the mixed policy): the products run in BF16 with float32
    accumulation, the loss is F32, and loss and gradients are the plain BF16 head's (its
    logits cast to F32) within BF16's rounding."""
    h, w, y = _inputs(2, 9, 16, 50, dtype=jnp.bfloat16)
    per_token = ax.train.linear_cross_entropy(h, w, y, Vocab, chunk=4)
    assert per_token.dtype is ax.F32 and per_token.axes == (Batch, Pos)
    (value, (gh, gw)) = jax.value_and_grad(_fused, argnums=(0, 1))(h, w, y, 4)
    (want, (wh, ww)) = jax.value_and_grad(_plain, argnums=(0, 1))(h, w, y)
    assert gh.dtype is ax.BF16 and gw.dtype is ax.BF16
    np.testing.assert_allclose(value, want, rtol=1e-3)
    for got, ref in ((gh, wh), (gw, ww)):
        a, b = np.asarray(got.array, np.float32), np.asarray(ref.array, np.float32)
        np.testing.assert_allclose(a, b, rtol=3e-2, atol=3e-2 * np.abs(b).max())


def test_traced_out_of_range_labels_add_nothing_and_concrete_ones_raise() -> None:
    """The index rule of ``softmax_cross_entropy``: a concrete label past the vocabulary is
    a ValueError naming it; under ``jax.jit`` it adds zero loss and zero gradient."""
    h, w, y = _inputs(2, 5, 4, 11)
    bad = ax.tensor(np.where(np.arange(10).reshape(2, 5) == 3, 11, y.array), Batch, Pos)
    with pytest.raises(
        ValueError, match=r"linear_cross_entropy: label 11 \(at .*\) is not a class"
    ):
        ax.train.linear_cross_entropy(h, w, bad, Vocab)
    per = jax.jit(lambda y: ax.train.linear_cross_entropy(h, w, y, Vocab, chunk=2).array)(bad)
    assert per[0, 3] == 0 and np.all(per.reshape(-1)[np.arange(10) != 3] > 0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            lambda h, w, y: (h, w, y, Embed),
            "no axis Vocab to contract with the weight \\(its class axis is Embed",
        ),
        (lambda h, w, y: (h, ax.astype(w, ax.BF16), y), "are F32 and the weight BF16: cast one"),
        (lambda h, w, y: (h, w, ax.transpose(y, Pos, Batch)), "transpose the labels"),
        (
            lambda h, w, y: (ax.zeros((2, 4, 3), Batch, Embed, Vocab), w, y),
            "already have the class",
        ),
        (lambda h, w, y: (h, w, ax.astype(y, ax.F32)), "labels must be integer class indices"),
        (lambda h, w, y: (h, ax.slice(w, Embed, 0, 3), y), "Embed has size 4 in the hidden"),
    ],
)
def test_mistakes_are_named(args: Any, message: str) -> None:
    h, w, y = _inputs(2, 5, 4, 11)
    call = args(h, w, y)
    with pytest.raises(ax.AxisError, match=message):
        ax.train.linear_cross_entropy(*call[:3], *(call[3:] or (Vocab,)))


# ------------------------------------------------------------------ memory
B, T, E, V = 4, 256, 64, 50_257  # GPT-2's vocabulary
#: one float32 [B, T, V] buffer: the logits the plain head holds
LOGITS = B * T * V * 4


def _head_step(form: str) -> Any:
    """value_and_grad of the mean loss in the hidden states and the tied table, BF16 as
    under the mixed policy: ``fused`` (the op), ``plain`` (axjax's full logits and
    ``softmax_cross_entropy``: the mutation) or the ``expert``'s ``jnp`` head."""

    def loss(h: Any, w: Any, y: Any) -> Any:
        th, tw, ty = (
            ax.tensor(h, Batch, Pos, Embed),
            ax.tensor(w, Vocab, Embed),
            ax.tensor(y, Batch, Pos),
        )
        if form == "fused":
            return _fused(th, tw, ty)
        if form == "plain":
            return _plain(th, tw, ty)
        logits = (h @ w.T).astype(jnp.float32)
        picked = jnp.take_along_axis(logits, y[..., None], -1)[..., 0]
        return jnp.mean(jax.nn.logsumexp(logits, -1) - picked)

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))


def _temp_bytes(form: str) -> int:
    args = (
        jax.ShapeDtypeStruct((B, T, E), jnp.bfloat16),
        jax.ShapeDtypeStruct((V, E), jnp.bfloat16),
        jax.ShapeDtypeStruct((B, T), jnp.int32),
    )
    return int(_head_step(form).lower(*args).compile().memory_analysis().temp_size_in_bytes)


@pytest.mark.optimized  # reads what XLA compiles
def test_the_fused_head_holds_at_most_two_logits_buffers_and_no_more_than_the_expert() -> None:
    """At GPT-2's vocabulary, the compiled head-and-loss step's temporary memory is at most
    two float32 ``[B, T, V]`` buffers and no more than the expert's plain head; the plain
    form (the mutation) is over two, as the expert is (full step figures: BENCHMARKS.md)."""
    fused, plain, expert = (_temp_bytes(f) for f in ("fused", "plain", "expert"))
    assert fused <= 2 * LOGITS and fused <= expert, (fused / LOGITS, expert / LOGITS)
    assert plain > 2 * LOGITS, f"the plain form passes the bound: {plain / LOGITS:.2f} buffers"
