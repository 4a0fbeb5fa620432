"""LoRA on every projection of every family: for each family and each projection kind
(attention query/key/value/output, the MLP's maps) an adapter is placed where the docs say,
one training step of the adapters alone lowers the loss on a fixed batch, and the merged
model gives the adapted model's logits; a stacked model (``unroll=False``) gives the
unrolled model's loss and gradients with adapters on every projection; ``to_hf`` refuses a
model with unmerged adapters.
"""

from __future__ import annotations

import dataclasses
import pkgutil
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, final

import equinox as eqx
import jax
import numpy as np
import pytest

import axjax as ax
import axjax.models
from axjax.models import gpt2, llama, mistral, qwen2
from axjax.nn._lora import lora_record


@final
class Batch(ax.Axis): ...


class Family(NamedTuple):
    module: Any
    make: Callable[[jax.Array, bool], Any]  # (key, unroll) -> a tiny model
    kinds: dict[str, str]  # projection kind -> the where= the docs show


_GPT2 = gpt2.GPT2Config(vocab_size=16, n_positions=8, n_embd=8, n_layer=2, n_head=2)
_LLAMA = llama.LlamaConfig(
    vocab_size=16,
    hidden_size=8,
    intermediate_size=12,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
)
_SIZES = {f.name: getattr(_LLAMA, f.name) for f in dataclasses.fields(_LLAMA)}
#: Mistral with a window shorter than the batch's 6 positions, Qwen2 with its q/k/v biases
_MISTRAL = mistral.MistralConfig(**{**_SIZES, "sliding_window": 3})
_QWEN2 = qwen2.Qwen2Config(**{**_SIZES, "tie_word_embeddings": True})
_LLAMA_KINDS = {
    "mlp-gate": "blocks.*.mlp.gate",
    "mlp-up": "blocks.*.mlp.up",
    "mlp-down": "blocks.*.mlp.down",
}
_ATTN = {
    "query": "blocks.*.attn.query_proj",
    "key": "blocks.*.attn.key_proj",
    "value": "blocks.*.attn.value_proj",
    "output": "blocks.*.attn.output_proj",
}
#: every family of axjax.models, with a tiny model and its projection kinds
FAMILIES: dict[str, Family] = {
    "gpt2": Family(
        gpt2,
        lambda k, unroll: gpt2.GPT2(_GPT2, key=k, unroll=unroll),
        {**_ATTN, "mlp-fc": "blocks.*.fc", "mlp-proj": "blocks.*.proj"},
    ),
    "llama": Family(
        llama,
        lambda k, unroll: llama.Llama(_LLAMA, key=k, unroll=unroll),
        {**_ATTN, **_LLAMA_KINDS},
    ),
    "mistral": Family(
        mistral,
        lambda k, unroll: llama.Llama(_MISTRAL, key=k, unroll=unroll),
        {**_ATTN, **_LLAMA_KINDS},
    ),
    "qwen2": Family(
        qwen2,
        lambda k, unroll: llama.Llama(_QWEN2, key=k, unroll=unroll),
        {**_ATTN, **_LLAMA_KINDS},
    ),
}
CASES = [(name, kind) for name, fam in FAMILIES.items() for kind in fam.kinds]


def test_every_family_has_a_row() -> None:
    modules = {
        m.name for m in pkgutil.iter_modules(axjax.models.__path__) if not m.name.startswith("_")
    }
    assert modules == set(FAMILIES), "give each family of axjax.models a row in FAMILIES"


_MODELS: dict[tuple[str, bool], Any] = {}


def _model(name: str, unroll: bool) -> Any:
    """The family's tiny model (key 0), built once per test module (modules are immutable)."""
    if (name, unroll) not in _MODELS:
        _MODELS[name, unroll] = FAMILIES[name].make(jax.random.key(0), unroll)
    return _MODELS[name, unroll]


def _batch(name: str) -> tuple[ax.AnyTensor, ax.AnyTensor]:
    pos = FAMILIES[name].module.Pos
    ids = np.random.default_rng(0).integers(0, 16, size=(2, 7))
    x = ax.tensor(ids[:, :6], Batch, pos, dtype=ax.I32)
    y = ax.tensor(ids[:, 1:], Batch, pos, dtype=ax.I32)
    return x, y


@eqx.filter_jit
def _logits(model: Any, x: ax.AnyTensor) -> jax.Array:
    out: jax.Array = model(x).array
    return out


@eqx.filter_jit
def _loss_and_grad(
    name: str, adapters: Any, rest: Any, x: ax.AnyTensor, y: ax.AnyTensor
) -> tuple[jax.Array, jax.Array, Any]:
    """The loss, the logits and the adapters' gradient (the frozen rest has none): what a
    step with ``trainable=ax.nn.is_lora`` computes, in one compiled call."""

    def loss(ad: Any) -> tuple[jax.Array, jax.Array]:
        model = eqx.combine(ad, rest)
        logits = model(x)
        per = ax.train.softmax_cross_entropy(logits, y, FAMILIES[name].module.Vocab)
        return ax.mean(per, (Batch, FAMILIES[name].module.Pos)).array, logits.array

    (value, logits), grad = eqx.filter_value_and_grad(loss, has_aux=True)(adapters)
    return value, logits, grad


def _trainable(model: Any) -> Any:
    """``trainable=ax.nn.is_lora`` as a filter spec: True at each adapter Tensor."""
    return jax.tree_util.tree_map_with_path(
        lambda p, t: ax.nn.is_lora(jax.tree_util.keystr(p, simple=True, separator="."), t),
        model,
        is_leaf=lambda t: isinstance(t, ax.Tensor),
    )


@pytest.mark.parametrize(("name", "kind"), CASES)
def test_each_projection_takes_an_adapter_trains_and_merges(name: str, kind: str) -> None:
    fam = FAMILIES[name]
    base = _model(name, True)
    tuned = ax.nn.lora(base, where=fam.kinds[kind], rank=2, key=jax.random.key(1))
    field = fam.kinds[kind].split(".", 2)[2]
    assert sorted(lora_record(tuned)) == [f"blocks.{i}.{field}" for i in range(2)]
    x, y = _batch(name)
    adapters, rest = eqx.partition(tuned, _trainable(tuned))
    assert len(jax.tree.leaves(adapters)) == 4  # lora_a and lora_b of each block's map
    before, fresh, grad = _loss_and_grad(name, adapters, rest, x, y)
    # B = 0: the base model's logits (from another program: within rounding)
    np.testing.assert_allclose(np.asarray(fresh), np.asarray(_logits(base, x)), atol=1e-6)
    # one step of sgd(0.5) on the adapters alone
    stepped = jax.tree.map(lambda p, g: p - 0.5 * g, adapters, grad)
    after, logits, _ = _loss_and_grad(name, stepped, rest, x, y)
    assert float(after) < float(before) - 1e-5, (float(before), float(after))
    merged = ax.nn.merge_lora(eqx.combine(stepped, rest))
    assert jax.tree.structure(merged) == jax.tree.structure(base)  # plain weights again
    assert not np.allclose(np.asarray(logits), np.asarray(fresh), atol=1e-5)  # it moved
    np.testing.assert_allclose(
        np.asarray(_logits(merged, x)), np.asarray(logits), rtol=1e-5, atol=1e-5
    )


def test_where_reaches_gpt2s_query_key_and_value_together() -> None:
    base = _model("gpt2", True)
    qkv = ax.nn.lora(base, where="blocks.*.attn.[qkv]*_proj", rank=2, key=jax.random.key(1))
    assert sorted(lora_record(qkv)) == [
        f"blocks.{i}.attn.{p}_proj" for i in range(2) for p in ("key", "query", "value")
    ]
    attn = ax.nn.lora(base, where="blocks.*.attn", rank=2, key=jax.random.key(1))
    assert len(lora_record(attn)) == 8  # the docstring's example: every attention map
    with pytest.raises(
        ValueError,
        match=r"where=by_path\('blocks\.\*\.mlp'\) selects none of the model's linear maps "
        r"\(blocks\.0\.attn\.query_proj \(MultiheadAttention weight\), .*blocks\.0\.fc "
        r"\(Affine\), blocks\.0\.proj \(Affine\), .*blocks\.1\.proj \(Affine\)\); select",
    ):
        ax.nn.lora(base, where="blocks.*.mlp", key=jax.random.key(1))


def _with_random_b(model: Any) -> Any:
    """Every ``lora_b`` random (a fresh one is zero: A's gradient would be zero too)."""

    def fill(path: Any, t: Any) -> Any:
        name = jax.tree_util.keystr(path)
        if isinstance(t, ax.Tensor) and name.endswith(".lora_b"):
            rng = np.random.default_rng(zlib.crc32(name.encode()))
            return ax.Tensor(0.1 * rng.normal(size=t.shape).astype(np.float32), t.axes)
        return t

    return jax.tree_util.tree_map_with_path(fill, model, is_leaf=lambda t: isinstance(t, ax.Tensor))


def _restacked(blocks: tuple[Any, ...]) -> list[np.ndarray]:
    """The leaves of a tuple of blocks stacked along a new first axis (a stack's leaves)."""
    return [np.stack(ls) for ls in zip(*(jax.tree.leaves(b) for b in blocks), strict=True)]


@pytest.mark.parametrize("name", list(FAMILIES))
def test_stacked_adapters_give_the_unrolled_loss_and_gradients(name: str) -> None:
    key = jax.random.key(1)
    flat = _with_random_b(ax.nn.lora(_model(name, True), where="**", key=key))
    stacked = ax.nn.lora(_model(name, False), where="**", key=key)
    per_block = {t.replace("blocks.0.", "blocks.layers.") for t in lora_record(flat)}
    assert set(lora_record(stacked)) == {t for t in per_block if t.startswith("blocks.layers.")}
    for t in jax.tree.leaves(stacked.blocks, is_leaf=lambda t: isinstance(t, ax.Tensor)):
        assert t.axes[0] is ax.nn.Layer  # adapters stacked as the weights are
    # the stacked model holding the unrolled model's adapters (and its weights: the same);
    # the gradients are the adapters' (trainable=ax.nn.is_lora)
    leaves = _restacked(flat.blocks)
    for a, b in zip(jax.tree.leaves(stacked.blocks), leaves, strict=True):
        assert a.shape == b.shape
    stacked = eqx.tree_at(
        lambda m: m.blocks,
        stacked,
        jax.tree.unflatten(jax.tree.structure(stacked.blocks), leaves),
    )
    x, y = _batch(name)
    (a_flat, r_flat), (a_stacked, r_stacked) = (
        eqx.partition(m, _trainable(m)) for m in (flat, stacked)
    )
    l_flat, logits_flat, g_flat = _loss_and_grad(name, a_flat, r_flat, x, y)
    l_stacked, logits_stacked, g_stacked = _loss_and_grad(name, a_stacked, r_stacked, x, y)
    np.testing.assert_allclose(float(l_stacked), float(l_flat), rtol=1e-6)
    np.testing.assert_allclose(logits_stacked, logits_flat, rtol=1e-5, atol=1e-6)
    got, want = jax.tree.leaves(g_stacked.blocks), _restacked(g_flat.blocks)
    assert len(got) == len(want) == 2 * len(lora_record(stacked))  # the adapters' alone
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
        assert np.abs(np.asarray(a)).max() > 0  # every adapter learns


@pytest.mark.parametrize("name", list(FAMILIES))
def test_to_hf_refuses_unmerged_adapters(name: str, tmp_path: Path) -> None:
    fam = FAMILIES[name]
    tuned = ax.nn.lora(_model(name, True), where="**", rank=2, key=jax.random.key(1))
    with pytest.raises(
        ValueError,
        match=r"to_hf: the model has unmerged LoRA adapters \(at blocks\.0\..*\); a checkpoint "
        r"holds plain weights: write to_hf\(ax\.nn\.merge_lora\(model\), folder\)",
    ):
        fam.module.to_hf(tuned, tmp_path)
    fam.module.to_hf(ax.nn.merge_lora(tuned), tmp_path)  # merged: a checkpoint again
    again = fam.module.from_hf(tmp_path)
    x, _ = _batch(name)
    np.testing.assert_array_equal(  # a fresh B is zero: the base model's logits
        np.asarray(_logits(again, x)), np.asarray(_logits(_model(name, True), x))
    )
