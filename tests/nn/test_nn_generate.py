"""Generation with a KV cache: ``MultiheadAttention(cache=)`` against the uncached layer,
``ax.nn.generate`` against recomputing the whole prefix, the cache's overflow error, the
decode step traced once, sampling reproducible with a key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from tests.nn.helpers import Batch, Embed, Time

AnyT = ax.Tensor[Any, *tuple[Any, ...]]


@final
class Vocab(ax.Axis): ...


@final
class Group(ax.Axis): ...


def _x(shape: tuple[int, ...], *axes: type[ax.Axis], seed: int = 0) -> AnyT:
    data = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    return ax.tensor(data, *axes, dtype=ax.F32)


#: the layer's variants a cache must not change: causal or not, biases, every path that
#: runs here, several batch axes, time-major
CONFIGS = [
    dict(causal=True),
    dict(causal=False),
    dict(causal=True, use_bias=True),
    dict(causal=True, implementation="xla"),
    dict(causal=False, implementation="fused"),
    dict(causal=True, layout="time-major"),
    dict(causal=True, layout="two batch axes"),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "-".join(f"{v}" for v in c.values()))
def test_a_cached_step_equals_the_uncached_forward(cfg: dict[str, Any], key: jax.Array) -> None:
    """Prefill 5 positions, decode 1, then 2 more: each equals the uncached layer on the
    whole prefix at those positions, to 1e-5 (f32)."""
    cfg = dict(cfg)
    layout = cfg.pop("layout", "batch-major")
    mha = ax.nn.MultiheadAttention(Embed, 16, num_heads=4, query_pos=Time, key=key, **cfg)
    if layout == "time-major":
        x, batch = _x((8, 2, 16), Time, Batch, Embed), {Batch: 2}
    elif layout == "two batch axes":
        x, batch = _x((2, 8, 3, 16), Batch, Time, Group, Embed), {Batch: 2, Group: 3}
    else:
        x, batch = _x((2, 8, 16), Batch, Time, Embed), {Batch: 2}
    full = mha(x)
    cache = mha.init_cache(batch, max_len=10)
    assert cache.keys.axes == (*batch, ax.nn.Head, ax.KeyOf[Time], ax.nn.HeadDim)
    outs = []
    for start, stop in ((0, 5), (5, 6), (6, 8)):
        part = ax.slice(x, Time, start, stop)
        y, cache = mha(part, cache=cache)
        assert y.axes == part.axes
        outs.append(y)
    assert np.all(cache.length.array == 8) and cache.length.axes == tuple(batch)
    if not cfg.get("causal"):  # without causality a position sees the later ones uncached
        full = mha(ax.slice(x, Time, 0, 6))
        np.testing.assert_allclose(
            ax.index(outs[1], Time, 0).array, ax.index(full, Time, 5).array, atol=1e-5
        )
        return
    got = ax.concat(outs, Time)
    np.testing.assert_allclose(got.array, full.array, atol=1e-5, rtol=0)


def test_the_cache_refuses_to_overflow(key: jax.Array) -> None:
    mha = ax.nn.MultiheadAttention(Embed, 8, num_heads=2, query_pos=Time, causal=True, key=key)
    cache = mha.init_cache({Batch: 2}, max_len=4)
    _, cache = mha(_x((2, 3, 8), Batch, Time, Embed), cache=cache)
    two = _x((2, 2, 8), Batch, Time, Embed)
    msg = (
        r"KVCache overflow: writing 2 position\(s\) past the static max_len 4 \(KeyOf\[Time\]\); "
        r"make a larger cache with init_cache\(\.\.\., max_len=\.\.\.\)"
    )
    with pytest.raises(Exception, match=msg):
        mha(two, cache=cache)
    with pytest.raises(Exception, match=msg):  # inside jit: a run-time error, not a wrap
        jax.block_until_ready(eqx.filter_jit(lambda m, c, x: m(x, cache=c))(mha, cache, two))
    with pytest.raises(ax.AxisError, match=r"KVCache: 5 new positions \(Time\) overflow"):
        mha(_x((2, 5, 8), Batch, Time, Embed), cache=mha.init_cache({Batch: 2}, 4))
    with pytest.raises(TypeError, match="a KVCache is for self-attention"):
        mha(two, two, cache=cache)  # type: ignore[call-overload]


# --------------------------------------------------------------------------- generate
class TinyLM(eqx.Module):
    """Embedding, learned positions, two causal attention layers, an unembedding: a
    :class:`ax.nn.Decoder`."""

    embed: ax.nn.Embedding[ax.F32, Vocab, Embed]
    positions: AnyT
    layers: tuple[ax.nn.MultiheadAttention, ...]
    head: ax.nn.Linear[ax.F32, Embed, Vocab]
    traces: list[int] = eqx.field(static=True)

    def __init__(self, key: jax.Array, vocab: int = 13, embed: int = 16) -> None:
        k1, k2, k3, k4, k5 = jax.random.split(key, 5)
        self.embed = ax.nn.Embedding(Vocab, Embed, vocab, embed, key=k1)
        self.positions = ax.nn.init.normal(0.5)(k2, {Time: 64, Embed: embed})
        self.layers = tuple(
            ax.nn.MultiheadAttention(Embed, embed, num_heads=2, query_pos=Time, causal=True, key=k)
            for k in (k3, k4)
        )
        self.head = ax.nn.Linear(Embed, Vocab, embed, vocab, key=k5)
        self.traces = []

    def init_cache(
        self, batch: Mapping[type[ax.Axis], int], max_len: int
    ) -> tuple[ax.nn.KVCache, ...]:
        return tuple(layer.init_cache(batch, max_len) for layer in self.layers)

    def __call__(self, ids: AnyT, *, cache: Any = None) -> Any:
        self.traces.append(ids.size(Time))  # at trace time under jit: one per trace
        n = ids.size(Time)
        where = ax.arange(Time, n) if cache is None else cache[0].positions(Time, n)
        x = self.embed(ids)
        table = ax.rename(self.positions, Time, Group)  # take's axis, replaced by Time
        x = x + ax.broadcast(ax.take(table, Group, where), x)
        new = []
        for i, layer in enumerate(self.layers):
            if cache is None:
                x = x + layer(x)
            else:
                y, c = layer(x, cache=cache[i])
                x, new = x + y, [*new, c]
        logits = self.head(ax.tanh(x))
        return logits if cache is None else (logits, tuple(new))


def _recompute(model: TinyLM, prompt: AnyT, steps: int) -> np.ndarray:
    """Greedy decoding without a cache: the whole prefix through the model at each step
    (padded to one length, so that it compiles once: causal, the padding is never seen)."""
    n = prompt.size(Time)
    ids = np.zeros((prompt.size(Batch), n + steps), np.int32)
    ids[:, :n] = np.asarray(prompt.array)
    run = eqx.filter_jit(
        lambda m, a: ax.transpose(m(ax.tensor(a, Batch, Time)), Batch, Time, Vocab)
    )
    for t in range(n, n + steps):
        ids[:, t] = np.asarray(jnp.argmax(run(model, ids).array[:, t - 1], -1))
    return ids[:, n:]


def _prompt(batch: int = 2, n: int = 5) -> AnyT:
    ids = np.random.default_rng(3).integers(0, 13, (batch, n)).astype(np.int32)
    return ax.tensor(ids, Batch, Time, dtype=ax.I32)


def test_greedy_generation_equals_recomputing_the_prefix(key: jax.Array) -> None:
    model, prompt = TinyLM(key), _prompt()
    out = ax.nn.generate(model, prompt, 32, temperature=0)
    assert out.axes == (Batch, Time) and out.shape == (2, 32) and out.dtype is ax.I32
    want = _recompute(model, prompt, 32)
    assert len(set(want.ravel().tolist())) > 2  # not a degenerate model
    np.testing.assert_array_equal(np.asarray(out.array), want)


def test_the_decode_step_traces_once_for_any_number_of_steps(key: jax.Array) -> None:
    prompt = _prompt()
    for steps in (2, 40):
        model = TinyLM(key)
        ax.nn.generate(model, prompt, steps, temperature=0)
        # one prefill trace (the prompt's 5 positions) and one of the decode step
        assert model.traces == [5, 1], (steps, model.traces)


def test_sampling_is_reproducible_with_a_key(key: jax.Array) -> None:
    model, prompt = TinyLM(key), _prompt(batch=3)
    a, b, c = (  # one compiled program: the key is an argument
        np.asarray(ax.nn.generate(model, prompt, 12, jax.random.key(k), top_k=3).array)
        for k in (7, 7, 8)
    )
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.min() >= 0 and a.max() < 13
    greedy = ax.nn.generate(model, prompt, 12, temperature=0)
    top1 = ax.nn.generate(model, prompt, 12, jax.random.key(7), top_k=1)
    np.testing.assert_array_equal(np.asarray(top1.array), np.asarray(greedy.array))


def test_generate_errors_name_the_problem(key: jax.Array) -> None:
    model, prompt = TinyLM(key), _prompt()
    with pytest.raises(
        ValueError, match=r"a prompt of 5 and 8 steps need a cache of 12 positions, max_len is 10"
    ):
        ax.nn.generate(model, prompt, 8, temperature=0, max_len=10)
    with pytest.raises(TypeError, match=r"sampling \(temperature > 0\) needs a key"):
        ax.nn.generate(model, prompt, 8)
    with pytest.raises(TypeError, match="the prompt holds token ids, got F32"):
        ax.nn.generate(model, ax.astype(prompt, ax.F32), 8, temperature=0)  # type: ignore[arg-type]
    with pytest.raises(ax.AxisError, match=r"has no position axis Group"):
        ax.nn.generate(model, prompt, 8, temperature=0, pos=Group)
    with pytest.raises(ValueError, match=r"top_p must be a number in \(0, 1\], got 1.5"):
        ax.nn.generate(model, prompt, 8, key, top_p=1.5)
    with pytest.raises(TypeError, match=r"pad_id is what follows a stop token: give stop= too"):
        ax.nn.generate(model, prompt, 8, temperature=0, pad_id=0)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"stop is a token id or a sequence of them, got \[\]"):
        ax.nn.generate(model, prompt, 8, temperature=0, stop=[])
    with pytest.raises(
        ValueError, match=r"stop must be a token id \(an int in \[0, 2\*\*31 - 1\]\)"
    ):
        ax.nn.generate(model, prompt, 8, temperature=0, stop=[1, -2])
    with pytest.raises(
        ValueError, match=r"length 0 \(at row 0\) is not a prompt's length: .* \[1, 6\)"
    ):
        ax.nn.generate(model, prompt, 8, temperature=0, lengths=[0, 5])
    with pytest.raises(ax.AxisError, match=r"the lengths are integers of the batch's shape"):
        ax.nn.generate(model, prompt, 8, temperature=0, lengths=[1, 2, 3])
    with pytest.raises(ax.AxisError, match=r"the lengths are over the prompt's batch axes"):
        ax.nn.generate(model, prompt, 8, temperature=0, lengths=ax.arange(Group, 2))
    with pytest.raises(ValueError, match=r"padding must be one of 'right', 'left', got 'middle'"):
        ax.nn.generate(model, prompt, 8, temperature=0, padding="middle")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"stream is a callable, got 3"):
        ax.nn.generate(model, prompt, 8, temperature=0, stream=3)  # type: ignore[arg-type]


# ------------------------------------------- ragged prompts, stop tokens, streaming


def test_ragged_rows_equal_their_prompts_alone(key: jax.Array) -> None:
    """Rows of 2, 5 and 3 tokens, right- or left-padded: each row's tokens are its prompt's
    alone (greedy, and sampled with a per-row key: the same key, the same draws)."""
    model, prompt = TinyLM(key), _prompt(batch=3, n=5)
    lengths = [2, 5, 3]
    ids = np.asarray(prompt.array)
    left = np.zeros_like(ids)
    for row, n in enumerate(lengths):
        left[row, 5 - n :] = ids[row, :n]
    right = ax.nn.generate(model, prompt, 10, temperature=0, lengths=lengths)
    lefts = ax.nn.generate(
        model,
        ax.tensor(left, Batch, Time, dtype=ax.I32),
        10,
        temperature=0,
        lengths=lengths,
        padding="left",
    )
    np.testing.assert_array_equal(np.asarray(right.array), np.asarray(lefts.array))
    for row, n in enumerate(lengths):
        alone = ax.tensor(ids[row : row + 1, :n], Batch, Time, dtype=ax.I32)
        want = _recompute(model, alone, 10)[0]
        np.testing.assert_array_equal(np.asarray(right.array)[row], want, err_msg=str(row))


def test_a_row_that_emits_a_stop_token_stops(key: jax.Array) -> None:
    """Stop ids taken from a first greedy run: a row stops at its first stop id (kept), its
    later positions hold the pad id, the lengths say where; a row without one runs on."""
    model, prompt = TinyLM(key), _prompt(batch=3)
    free = np.asarray(ax.nn.generate(model, prompt, 12, temperature=0).array)
    stop = int(free[0, 3])  # row 0 stops at step 3 at the latest
    out, lengths = ax.nn.generate(model, prompt, 12, temperature=0, stop=[stop, 99], pad_id=12)
    assert out.axes == (Batch, Time) and lengths.axes == (Batch,)
    for row in range(3):
        hits = np.flatnonzero(free[row] == stop)
        n = int(hits[0]) + 1 if hits.size else 12
        assert int(lengths.array[row]) == n
        np.testing.assert_array_equal(np.asarray(out.array)[row, :n], free[row, :n])
        assert (np.asarray(out.array)[row, n:] == 12).all()
    assert int(lengths.array[0]) <= 4
    default_pad, _ = ax.nn.generate(model, prompt, 12, temperature=0, stop=stop)
    assert (np.asarray(default_pad.array)[0, int(lengths.array[0]) :] == stop).all()


def test_the_loop_ends_when_every_row_has_stopped(key: jax.Array) -> None:
    """Every row stops at its first token: the model runs the prefill and no decode step
    (the step's logits would be streamed otherwise); the lengths are all 1."""
    model, prompt = TinyLM(key), _prompt(batch=2)
    first = np.asarray(ax.nn.generate(model, prompt, 1, temperature=0).array)[:, 0]
    seen: list[np.ndarray] = []
    out, lengths = ax.nn.generate(
        model,
        prompt,
        50,
        temperature=0,
        stop=[int(t) for t in first],
        pad_id=0,
        stream=lambda t, start: seen.append(t),
    )
    assert lengths.array.tolist() == [1, 1]
    assert len(seen) == 1 and seen[0].shape == (2, 1)  # one chunk: the first token


def test_streaming_sends_every_token_once_in_order_without_a_retrace(key: jax.Array) -> None:
    """Chunks of 3 of 8 tokens (3, 3, 2) arrive in order while the program runs and join
    to the result; a second callback runs the same compiled program (one trace)."""
    model, prompt = TinyLM(key), _prompt()
    want = np.asarray(ax.nn.generate(model, prompt, 8, temperature=0).array)
    for _ in range(2):
        chunks: list[tuple[int, np.ndarray]] = []
        out = ax.nn.generate(
            model,
            prompt,
            8,
            temperature=0,
            stream=lambda t, s, c=chunks: c.append((s, t)),
            stream_every=3,
        )
        assert [s for s, _ in chunks] == [0, 3, 6]
        assert [c.shape for _, c in chunks] == [(2, 3), (2, 3), (2, 2)]
        np.testing.assert_array_equal(np.concatenate([c for _, c in chunks], axis=1), want)
        np.testing.assert_array_equal(np.asarray(out.array), want)
    assert model.traces.count(1) == 2  # the decode step: once without a stream, once with


# ---------------------------------------------------- the cache's rows and stacked views


def test_each_row_writes_at_its_own_length_and_the_rest_is_untouched(key: jax.Array) -> None:
    """Rows of lengths 1 and 3: a write of 2 positions lands at 1..2 and 3..4 of each row
    (the values' oracle by numpy), nothing else changes; the per-row causal mask and
    positions follow; with_lengths checks its rows."""
    mha = ax.nn.MultiheadAttention(Embed, 8, num_heads=2, query_pos=Time, causal=True, key=key)
    cache = mha.init_cache({Batch: 2}, max_len=6)
    before = np.asarray(
        ax.normal(key, (2, 2, 6, 4), Batch, ax.nn.Head, ax.KeyOf[Time], ax.nn.HeadDim).array
    )
    cache = ax.nn.KVCache(
        ax.tensor(before, Batch, ax.nn.Head, ax.KeyOf[Time], ax.nn.HeadDim),
        ax.tensor(before, Batch, ax.nn.Head, ax.KeyOf[Time], ax.nn.HeadDim),
        ax.tensor(np.array([1, 3], np.int32), Batch, dtype=ax.I32),
        ax.KeyOf[Time],
    )
    new = ax.normal(jax.random.key(5), (2, 4, 2, 2), ax.nn.Head, ax.nn.HeadDim, Batch, Time)
    out = cache.write(new, new, Time)
    want = before.copy()
    arr = np.asarray(ax.transpose(new, Batch, ax.nn.Head, Time, ax.nn.HeadDim).array)
    want[0, :, 1:3], want[1, :, 3:5] = arr[0], arr[1]
    np.testing.assert_array_equal(np.asarray(out.keys.array), want)
    assert out.length.array.tolist() == [3, 5]
    assert cache.positions(Time, 2).array.tolist() == [[1, 2], [3, 4]]
    assert out.with_lengths([2, 2]).length.array.tolist() == [2, 2]
    with pytest.raises(
        ax.AxisError, match=r"lengths over \(Group\), the cache's rows are \(Batch\)"
    ):
        out.with_lengths(ax.arange(Group, 2))
    with pytest.raises(ax.AxisError, match=r"lengths of shape \(3,\), the cache's rows"):
        out.with_lengths([1, 2, 3])
    with pytest.raises(TypeError, match=r"the cache is not stacked over a layer axis"):
        out.layer_view(0)
