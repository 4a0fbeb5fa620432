"""Generation from the pretrained families as transformers does it: a ragged, left-padded
batch decoded greedily with a stop token equals transformers' ``generate`` (recorded by
tools/make_hf_fixtures.py), each row equals its prompt alone, in both forms of the blocks;
and the stacked model's decode step copies no cache (its compiled program, with the old
stack-and-unstack as the mutation)."""

from __future__ import annotations

import functools
import re
from collections import Counter
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file

import axjax as ax
import axjax.models._gpt2
from axjax.models import gpt2
from axjax.models._cli import family_of
from axjax.nn._internal import scan_layers
from tests.nn.helpers import Batch

FIXTURES = Path(__file__).resolve().parent / "fixtures"
NAMES = ("gpt2", "llama-kv4", "llama-kv2", "llama-kv1", "mistral-sw4", "qwen2-tied")


def _family(name: str) -> Any:
    return family_of(FIXTURES / name)  # by config.json's model_type


@functools.cache
def _model(name: str, unroll: bool) -> Any:
    return _family(name).from_hf(FIXTURES / name, unroll=unroll)


@functools.cache
def _record(name: str) -> tuple[dict[str, np.ndarray], int, int]:
    """transformers' ragged generation: the arrays, the stop id and the pad id."""
    path = str(FIXTURES / name / "reference.safetensors")
    with safe_open(path, framework="numpy") as f:
        meta = f.metadata()
    return load_file(path), int(meta["gen_eos"]), int(meta["gen_pad"])


def _prompt(name: str) -> ax.AnyTensor:
    refs, _, _ = _record(name)
    return ax.Tensor(jnp.asarray(refs["gen_prompt"]), (Batch, _family(name).Pos))


@pytest.mark.parametrize(
    ("name", "unroll"),
    [
        *((n, True) for n in NAMES if n != "mistral-sw4"),
        ("gpt2", False),
        ("llama-kv2", False),
        ("mistral-sw4", False),  # the window in the stacked cached steps
    ],
)
def test_ragged_greedy_generation_with_a_stop_token_equals_transformers(
    name: str, unroll: bool
) -> None:
    """The left-padded batch of prompts of three lengths, greedy, with the stop id chosen so
    that one row stops early and one does not: the tokens, the pad ids after each stop and
    the lengths are transformers'."""
    refs, eos, pad = _record(name)
    lengths = refs["gen_mask"].sum(-1)
    assert len(set(lengths.tolist())) == 3  # ragged
    steps = refs["gen_tokens"].shape[1]
    assert refs["gen_lengths"].min() < steps and refs["gen_lengths"].max() == steps
    tokens, got = ax.nn.generate(
        _model(name, unroll),
        _prompt(name),
        steps,
        temperature=0,
        lengths=lengths,
        padding="left",
        stop=eos,
        pad_id=pad,
    )
    assert tokens.axes == (Batch, _family(name).Pos) and got.axes == (Batch,)
    np.testing.assert_array_equal(np.asarray(tokens.array), refs["gen_tokens"])
    np.testing.assert_array_equal(np.asarray(got.array), refs["gen_lengths"])


@pytest.mark.parametrize("name", ["gpt2", "llama-kv1"])  # both families (and 1 KV head)
def test_each_row_equals_its_prompt_alone(name: str) -> None:
    """Every row of the ragged batch, generated alone (no padding, a batch of one), gives
    the tokens it gives in the batch; right padding gives the same batch as left."""
    refs, eos, pad = _record(name)
    model, pos = _model(name, True), _family(name).Pos
    lengths = refs["gen_mask"].sum(-1)
    steps = refs["gen_tokens"].shape[1]
    for row, n in enumerate(lengths.tolist()):
        alone = ax.Tensor(jnp.asarray(refs["gen_prompt"][row:, -n:][:1]), (Batch, pos))
        tokens, got = ax.nn.generate(model, alone, steps, temperature=0, stop=eos, pad_id=pad)
        np.testing.assert_array_equal(np.asarray(tokens.array)[0], refs["gen_tokens"][row])
        assert int(got.array[0]) == refs["gen_lengths"][row]
    right = np.full_like(refs["gen_prompt"], pad)
    for row, n in enumerate(lengths.tolist()):
        right[row, :n] = refs["gen_prompt"][row, -n:]
    tokens, _ = ax.nn.generate(
        model,
        ax.Tensor(jnp.asarray(right), (Batch, pos)),
        steps,
        temperature=0,
        lengths=ax.Tensor(jnp.asarray(lengths, jnp.int32), (Batch,)),
        stop=eos,
        pad_id=pad,
    )
    np.testing.assert_array_equal(np.asarray(tokens.array), refs["gen_tokens"])


# -- the stacked cache: no stack or unstack in the compiled decode step -------------------


def _old_stacked_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutation: a cache per layer, stacked before the scan and unstacked after it at
    every step (the cached call before the cache stayed stacked)."""

    def init(blocks: Any, batch: Any, max_len: int) -> tuple[ax.nn.KVCache, ...]:
        return (blocks.layers.attn.init_cache(batch, max_len),) * len(blocks)

    def run(blocks: Any, x: Any, caches: tuple[ax.nn.KVCache, ...]) -> Any:
        first = caches[0]
        axes, rows, kp = first.keys.axes, first.length.axes, first.key_pos
        per = tuple(jnp.stack([getattr(c, f).array for c in caches]) for f in ("keys", "values"))

        def layer(block: Any, h: Any, kv: tuple[jax.Array, jax.Array]) -> Any:
            cache = ax.nn.KVCache(ax.Tensor(kv[0], axes), ax.Tensor(kv[1], axes), first.length, kp)
            h, cache = block(h, cache)
            return h, (cache.keys.array, cache.values.array)

        x, (ks, vs) = scan_layers(blocks, x, per, layer)
        n = first.length + x.size(gpt2.Pos)
        return x, tuple(
            ax.nn.KVCache(ax.Tensor(k, axes), ax.Tensor(v, axes), ax.Tensor(n.array, rows), kp)
            for k, v in zip(ks, vs, strict=True)
        )

    monkeypatch.setattr(axjax.models._gpt2, "init_caches", init)
    monkeypatch.setattr(axjax.models._gpt2, "run_cached", run)
    monkeypatch.setattr(axjax.models._gpt2, "cache_lengths", lambda b, c, w, ids=None: c[0].length)


def _step_program(layers: int = 4) -> tuple[int, int, Counter[str]]:
    """A stacked GPT-2's compiled decode step, the cache donated: the cache's bytes, the
    step's temporary bytes, and the kinds of op that make an array of the stacked cache's
    shape."""
    config = gpt2.GPT2Config(vocab_size=64, n_positions=256, n_embd=32, n_layer=layers, n_head=2)
    model = gpt2.GPT2(config, key=jax.random.key(0), unroll=False)
    cache = model.init_cache({Batch: 2}, 256)
    ids = ax.Tensor(jnp.zeros((2, 1), jnp.int32), (Batch, gpt2.Pos))
    step = jax.jit(lambda m, i, c: m(i, cache=c), donate_argnums=2)
    compiled = step.lower(model, ids, cache).compile()
    cache_bytes = sum(leaf.nbytes for leaf in jax.tree.leaves(cache))
    stacked = f"f32[{layers},2,2,256,16]"  # [Layer, Batch, Head, KPos, HeadDim]
    kinds: Counter[str] = Counter()
    for line in compiled.as_text().splitlines():
        m = re.match(r"\s*(?:ROOT )?%?[\w.\-]+ = (\S+) ([\w\-]+)\(", line)
        if m and stacked in m.group(1):
            kinds[m.group(2)] += 1
    temp = compiled.memory_analysis().temp_size_in_bytes
    return cache_bytes, temp, kinds


#: ops that copy the whole stacked cache: a stack, a copy, a fresh buffer filled (the
#: in-place writes are a scatter, or the dynamic-update-slice XLA makes of it)
COPIES = ("concatenate", "copy", "broadcast")
WRITES = ("scatter", "dynamic-update-slice")


@pytest.mark.optimized
def test_the_stacked_decode_step_copies_no_cache() -> None:
    """The stacked model's cache is carried through the layers' scan and written in place:
    no op of the step makes a stacked cache's worth of array but the in-place scatters, and
    the step's temporary memory is under half the cache's (one layer's slice is read)."""
    cache_bytes, temp, kinds = _step_program()
    assert not [k for k in COPIES if kinds[k]], kinds
    assert sum(kinds[k] for k in WRITES) >= 2  # the keys' and the values' new position
    assert temp < cache_bytes / 2, (temp, cache_bytes)


@pytest.mark.optimized
def test_mutation_stacking_the_caches_each_step_fails_the_structural_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _old_stacked_cache(monkeypatch)
    cache_bytes, temp, kinds = _step_program()
    assert [k for k in COPIES if kinds[k]], kinds  # the stack: a concatenate, a copy
    assert temp >= cache_bytes, (temp, cache_bytes)
