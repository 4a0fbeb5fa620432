"""Llama from and to Hugging Face checkpoints, against the checked-in fixtures.

The fixtures (tools/make_hf_fixtures.py: random 2-layer Llamas of width 48 with 4 query
heads and 4, 2 or 1 key-value heads, the last with a tied head, their norm weights
perturbed) hold ``transformers``' logits of fixed ids and of one cached decode step; the
suite needs neither torch nor transformers. The last test remakes them with those, where
they are installed.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any, TypeVarTuple, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

import axjax as ax
import axjax.nn._gqa
from axjax.models import ConversionError, llama, load_weights, mistral, qwen2, read_config
from axjax.models._cli import family_of
from axjax.models.llama import Llama, Pos, Vocab
from tests.conftest import across_programs, requires

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
NAMES = ("llama-kv4", "llama-kv2", "llama-kv1")
#: the variants of Llama's table: Mistral's sliding window (4 of the 12 positions, 8 before
#: the cached step) and Qwen2's q/k/v biases with a tied head
VARIANTS = ("mistral-sw4", "qwen2-tied")
ALL = NAMES + VARIANTS
B = TypeVarTuple("B")


@final
class Batch(ax.Axis): ...


def _models() -> dict[str, Llama]:
    return {n: family_of(FIXTURES / n).from_hf(FIXTURES / n) for n in ALL}


@pytest.fixture(scope="module")
def models() -> dict[str, Llama]:
    return _models()


def _refs(name: str) -> dict[str, np.ndarray]:
    return load_file(FIXTURES / name / "reference.safetensors")


def _ids(refs: dict[str, np.ndarray]) -> ax.Tensor[ax.I32, Batch, Pos]:
    return ax.tensor(refs["ids"], Batch, Pos, dtype=ax.I32)


@eqx.filter_jit
def _forward(model: Llama, ids: ax.Tensor[ax.I32, *B, Pos]) -> ax.Tensor[ax.F32, *B, Pos, Vocab]:
    return model(ids)


def _leaves(m: object) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(m)]


def _copy(tmp_path: Path, name: str, arrays: dict[str, np.ndarray] | None = None) -> Path:
    out = tmp_path / name
    shutil.copytree(FIXTURES / name, out)
    if arrays is not None:
        save_file(arrays, out / "model.safetensors", metadata={"format": "pt"})
    return out


# ----------------------------------------------------------------------------- values
@pytest.mark.parametrize("name", ALL)
def test_logits_match_transformers(models: dict[str, Llama], name: str) -> None:
    refs = _refs(name)
    logits = _forward(models[name], _ids(refs))
    assert logits.axes == (Batch, Pos, Vocab) and logits.dtype is ax.F32
    np.testing.assert_allclose(
        np.asarray(logits.array), refs["logits"], atol=across_programs(1e-5), rtol=0
    )


def test_the_fixtures_cover_kv_heads_ties_and_theta(models: dict[str, Llama]) -> None:
    got = {
        n: (m.config.kv_heads, m.config.tie_word_embeddings, m.config.theta, m.lm_head is None)
        for n, m in models.items()
        if n in NAMES
    }
    assert got == {
        "llama-kv4": (4, False, 10000.0, False),
        "llama-kv2": (2, False, 500000.0, False),
        "llama-kv1": (1, True, 10000.0, True),
    }
    for m in models.values():
        attn = m.blocks[0].attn
        assert (attn.biases is not None) == isinstance(m.config, qwen2.Qwen2Config)
        assert attn.key_proj.axes == (ax.nn.KVHead, ax.nn.HeadDim, llama.Embed)
        assert attn.query_proj.sizes[ax.nn.GroupHead] * m.config.kv_heads == 4


@pytest.mark.parametrize("name", ALL)
def test_a_cached_decode_step_matches_transformers(models: dict[str, Llama], name: str) -> None:
    with safe_open(str(FIXTURES / name / "reference.safetensors"), framework="numpy") as f:
        prefix = int((f.metadata() or {})["prefix"])
    refs, model = _refs(name), models[name]
    ids = _ids(refs)
    cache = model.init_cache({Batch: 2}, 16)
    assert cache[0].keys.sizes[ax.nn.KVHead] == model.config.kv_heads  # KV heads only
    _, cache = eqx.filter_jit(lambda m, i, c: m(i, cache=c))(
        model, ax.slice(ids, Pos, 0, prefix), cache
    )
    assert cache[0].length.array.tolist() == [prefix] * 2
    step, cache = eqx.filter_jit(lambda m, i, c: m(i, cache=c))(
        model, ax.slice(ids, Pos, prefix, prefix + 1), cache
    )
    assert step.axes == (Batch, Pos, Vocab)
    np.testing.assert_allclose(
        np.asarray(step.array), refs["step_logits"], atol=across_programs(1e-5), rtol=0
    )


def test_greedy_generation_is_the_argmax_of_the_full_forward(models: dict[str, Llama]) -> None:
    model = models["llama-kv2"]
    prompt = ax.slice(_ids(_refs("llama-kv2")), Pos, 0, 5)
    out = ax.nn.generate(model, prompt, 3, temperature=0)
    assert out.axes == (Batch, Pos) and out.size(Pos) == 3
    seq = np.asarray(prompt.array)
    for _ in range(3):  # recompute every position each step, no cache
        logits = np.asarray(_forward(model, ax.tensor(seq, Batch, Pos, dtype=ax.I32)).array)
        seq = np.concatenate([seq, logits[:, -1].argmax(-1)[:, None].astype(np.int32)], 1)
    np.testing.assert_array_equal(np.asarray(out.array), seq[:, 5:])


def test_the_model_is_differentiable(models: dict[str, Llama]) -> None:
    model, ids = models["llama-kv1"], _ids(_refs("llama-kv1"))
    grads = eqx.filter_jit(eqx.filter_grad(lambda m: jnp.mean(m(ids).array ** 2)))(model)
    g = np.asarray(grads.blocks[0].attn.key_proj.array)  # the one KV head
    assert np.isfinite(g).all() and np.abs(g).max() > 0


def test_the_attention_path_is_the_process_choice_not_the_checkpoint(
    models: dict[str, Llama], tmp_path: Path
) -> None:
    """``implementation=`` reaches every block's attention; the fused XLA path gives the
    fixtures' logits (full and a cached step: its mask) as the default path does; the path
    is no key of ``config.json``, which is written as before."""
    name = "llama-kv2"
    fused = llama.from_hf(FIXTURES / name, implementation="xla")
    assert {b.attn.implementation for b in fused.blocks} == {"xla"}
    assert {b.attn.implementation for b in models[name].blocks} == {"auto"}
    refs = _refs(name)
    got = _forward(fused, _ids(refs))
    np.testing.assert_allclose(
        np.asarray(got.array), refs["logits"], atol=across_programs(1e-5), rtol=0
    )
    cache = fused.init_cache({Batch: 2}, 16)
    ids = _ids(refs)
    _, cache = eqx.filter_jit(lambda m, i, c: m(i, cache=c))(fused, ax.slice(ids, Pos, 0, 7), cache)
    cached = eqx.filter_jit(lambda m, i, c: m(i, cache=c)[0])(
        fused, ax.slice(ids, Pos, 7, 8), cache
    )
    np.testing.assert_allclose(
        np.asarray(cached.array)[:, 0], refs["logits"][:, 7], atol=across_programs(1e-5), rtol=0
    )
    llama.to_hf(fused, tmp_path / "fused")
    llama.to_hf(models[name], tmp_path / "default")
    written = (tmp_path / "fused" / "config.json").read_text()
    assert "implementation" not in json.loads(written)
    assert written == (tmp_path / "default" / "config.json").read_text()
    config = models[name].config
    with pytest.raises(ValueError, match=r"from_hf: implementation must be one of 'auto', "):
        llama.from_hf(FIXTURES / name, implementation="flash")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Llama: implementation must be one of 'auto', "):
        Llama(config, implementation="flash", key=jax.random.key(0))  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- writing
@pytest.mark.parametrize("name", ALL)
def test_to_hf_then_from_hf_is_bit_identical(
    models: dict[str, Llama], name: str, tmp_path: Path
) -> None:
    family = family_of(FIXTURES / name)
    family.to_hf(models[name], tmp_path / "out")
    again = family.from_hf(tmp_path / "out")
    assert type(again.config) is type(models[name].config)
    assert again.config == models[name].config
    for a, b in zip(_leaves(models[name]), _leaves(again), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ALL)
def test_the_written_keys_shapes_and_values_are_the_fixtures(
    models: dict[str, Llama], name: str, tmp_path: Path
) -> None:
    family_of(FIXTURES / name).to_hf(models[name], tmp_path / "out")
    written = load_file(tmp_path / "out" / "model.safetensors")
    fixture = load_file(FIXTURES / name / "model.safetensors")
    assert sorted(written) == sorted(fixture)
    tied = name in ("llama-kv1", "qwen2-tied")
    assert ("lm_head.weight" in written) != tied
    assert ("model.layers.1.self_attn.k_proj.bias" in written) == (name == "qwen2-tied")
    for k, v in fixture.items():
        assert written[k].shape == v.shape, k
        np.testing.assert_array_equal(written[k], v, err_msg=k)
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    want = json.loads((FIXTURES / name / "config.json").read_text())
    assert config["model_type"] == want["model_type"]
    assert config["architectures"] == want["architectures"]
    keys = ["num_key_value_heads", "hidden_size", "tie_word_embeddings", "rope_parameters"]
    keys += {"mistral-sw4": ["sliding_window"], "qwen2-tied": ["use_sliding_window"]}.get(name, [])
    for key in keys:
        assert config[key] == want[key], key


# ----------------------------------------------------------------------------- mutations
def _interleaved(x: Any, pos: type[ax.Axis], over: type[ax.Axis], **kw: Any) -> Any:
    """RoPE with the adjacent-pairs convention (GPT-J / Meta's complex form), not HF's."""
    t = ax.transpose(x, *[a for a in x.axes if a is not over], over)
    a = t.array
    d = a.shape[-1]
    perm = np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])  # evens, then odds
    inv = np.argsort(perm)
    halves = ax.nn.rotary_embedding(ax.tensor(a[..., perm], *t.axes), pos, over, **kw)
    return ax.transpose(ax.tensor(halves.array[..., inv], *t.axes), *x.axes)


def test_mutation_interleaved_rope_fails_the_logits_check(
    models: dict[str, Llama], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The logits test tells the rotate_half convention from the interleaved one."""
    monkeypatch.setattr(axjax.nn._gqa, "rotary_embedding", _interleaved)
    refs = _refs("llama-kv2")
    got = np.asarray(models["llama-kv2"](_ids(refs)).array)  # eager: the patch is seen
    assert np.abs(got - refs["logits"]).max() > 1e-2  # the tolerance is 1e-5


def test_mutation_query_heads_grouped_the_other_way_fail_the_logits_check() -> None:
    """q_proj's rows are [KVHead, GroupHead, HeadDim]: read as [GroupHead, KVHead, HeadDim]
    (query head h on KV head h % n_kv instead of h // g) the logits move far off."""
    kv, g, hd = ax.nn.KVHead, ax.nn.GroupHead, ax.nn.HeadDim
    config = llama.LlamaConfig(
        vocab_size=json.loads((FIXTURES / "llama-kv2" / "config.json").read_text())["vocab_size"],
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        rope_theta=500000.0,
    )
    t = llama.table(config)
    entries = tuple(
        dataclasses.replace(
            e, layout=tuple((g, kv, hd) if d == (kv, g, hd) else d for d in e.layout)
        )
        for e in t.entries
    )
    wrong = load_weights(
        FIXTURES / "llama-kv2",
        Llama(config, key=jax.random.key(1)),
        dataclasses.replace(t, entries=entries),
        layers=2,
    )
    refs = _refs("llama-kv2")
    assert np.abs(np.asarray(_forward(wrong, _ids(refs)).array) - refs["logits"]).max() > 1e-2


# ----------------------------------------------------------------------------- variants
def test_mistral_and_qwen2_are_llamas_of_their_config_and_table(models: dict[str, Llama]) -> None:
    """One model and one table: Mistral's config adds the window (every block's attention
    gets it), Qwen2's the q/k/v bias rows (after Llama's, the same keys otherwise)."""
    m, q = models["mistral-sw4"], models["qwen2-tied"]
    assert type(m) is type(q) is Llama
    assert type(m.config) is mistral.MistralConfig and m.config.sliding_window == 4
    assert {b.attn.sliding_window for b in m.blocks} == {4}
    assert type(q.config) is qwen2.Qwen2Config and q.lm_head is None
    assert {b.attn.sliding_window for b in q.blocks} == {None}
    assert q.blocks[0].attn.biases is not None
    assert [t.axes for t in q.blocks[0].attn.biases] == [
        (ax.nn.KVHead, ax.nn.GroupHead, ax.nn.HeadDim),
        (ax.nn.KVHead, ax.nn.HeadDim),
        (ax.nn.KVHead, ax.nn.HeadDim),
    ]
    base = {e.key for e in llama.table(llama.LlamaConfig(tie_word_embeddings=True)).entries}
    keys = {e.key for e in qwen2.table(q.config).entries}
    assert keys - base == {f"model.layers.{{i}}.self_attn.{p}_proj.bias" for p in "qkv"}
    assert {e.key for e in mistral.table(m.config).entries} == base | {"lm_head.weight"}
    assert (mistral.table(m.config).model_type, qwen2.table(q.config).model_type) == (
        "mistral",
        "qwen2",
    )


CONFIG = mistral.MistralConfig()


def _mistral_with_window(window: int | None) -> Llama:
    fixture = read_config(FIXTURES / "mistral-sw4", mistral.MistralConfig, mistral.table(CONFIG))
    config = dataclasses.replace(fixture, sliding_window=window)
    template = Llama(config, key=jax.random.key(1))
    return load_weights(FIXTURES / "mistral-sw4", template, mistral.table(config), layers=2)


def test_mutation_the_window_off_by_one_fails_the_logits_check() -> None:
    """The fixture's window is 4 of 12 positions: a window of 5 (one key too many) moves
    the logits far past the tolerance (1e-5; measured 6.5, and 6.5 for a window of 3).
    tests/nn/test_nn_sliding_window.py plants the off-by-one in each mask and in the
    kernels' window, and catches it in the full call and in the cached steps."""
    model, refs = _mistral_with_window(5), _refs("mistral-sw4")
    ids = _ids(refs)
    assert np.abs(np.asarray(_forward(model, ids).array) - refs["logits"]).max() > 1e-3


def test_mutation_qwen2_without_its_biases_fails_the_logits_check(
    models: dict[str, Llama],
) -> None:
    model, refs = models["qwen2-tied"], _refs("qwen2-tied")
    blocks = tuple(eqx.tree_at(lambda b: b.attn.biases, b, None) for b in model.blocks)
    bare = eqx.tree_at(lambda m: m.blocks, model, blocks)
    assert np.abs(np.asarray(_forward(bare, _ids(refs)).array) - refs["logits"]).max() > 1e-3


def test_the_variants_configs_are_checked(tmp_path: Path) -> None:
    """Qwen2's sliding window is refused; Mistral's null window is full causal attention
    (Llama's logits with Mistral's keys), a window below 1 is refused."""
    folder = _copy(tmp_path, "qwen2-tied")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "use_sliding_window": True}))
    with pytest.raises(
        ConversionError,
        match=r"qwen2: .*config\.json: use_sliding_window=True is not supported \(Qwen2's "
        r"sliding window on the layers from max_window_layers=28\)",
    ):
        qwen2.from_hf(folder)
    folder = _copy(tmp_path, "mistral-sw4")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "sliding_window": None}))
    full = mistral.from_hf(folder)
    assert full.config.window is None and full.blocks[0].attn.sliding_window is None
    (folder / "config.json").write_text(json.dumps({**config, "sliding_window": 0}))
    with pytest.raises(ConversionError, match=r"sliding_window=0 is not a positive number"):
        mistral.from_hf(folder)
    with pytest.raises(ConversionError, match=r"is a 'mistral' checkpoint \(model_type\)"):
        llama.from_hf(FIXTURES / "mistral-sw4")


# ----------------------------------------------------------------------------- errors
def test_a_wrong_kv_head_count_names_k_proj_and_its_axes(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "llama-kv4")
    config = json.loads((folder / "config.json").read_text())
    config["num_key_value_heads"] = 2  # the weights have 4
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        ConversionError,
        match=r"entry 'model\.layers\.0\.self_attn\.k_proj\.weight' .* has shape \[48, 48\], "
        r"expected \[\(KVHead=2, HeadDim=12\)=24, Embed=48\]",
    ):
        llama.from_hf(folder)


def test_a_partial_checkpoint_lists_everything_missing(tmp_path: Path) -> None:
    arrays = load_file(FIXTURES / "llama-kv2" / "model.safetensors")
    del arrays["model.layers.1.mlp.up_proj.weight"], arrays["lm_head.weight"]
    folder = _copy(tmp_path, "llama-kv2", arrays)
    with pytest.raises(
        ConversionError,
        match=r"partial checkpoint, 2 of 21 entries are missing: "
        r"model\.layers\.1\.mlp\.up_proj\.weight, lm_head\.weight \(nothing was loaded\)",
    ):
        llama.from_hf(folder)


def test_an_untied_config_on_a_tied_file_lacks_the_head(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "llama-kv1")
    config = json.loads((folder / "config.json").read_text())
    config["tie_word_embeddings"] = False
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConversionError, match=r"1 of 21 entries are missing: lm_head\.weight"):
        llama.from_hf(folder)


def test_a_tied_file_that_stores_the_head_and_rope_buffers_loads(
    models: dict[str, Llama], tmp_path: Path
) -> None:
    arrays = load_file(FIXTURES / "llama-kv1" / "model.safetensors")
    arrays["lm_head.weight"] = arrays["model.embed_tokens.weight"]
    arrays["model.layers.0.self_attn.rotary_emb.inv_freq"] = np.ones(6, np.float32)
    again = llama.from_hf(_copy(tmp_path, "llama-kv1", arrays))
    for a, b in zip(_leaves(models["llama-kv1"]), _leaves(again), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_gpt2_checkpoint_names_the_first_mismatching_key_or_model_type(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "llama-kv2")
    arrays = load_file(FIXTURES / "llama-kv2" / "model.safetensors")
    arrays["transformer.wte.weight"] = arrays.pop("model.embed_tokens.weight")
    save_file(arrays, folder / "model.safetensors")
    with pytest.raises(
        ConversionError, match=r"the first mismatching key is 'transformer\.wte\.weight'"
    ):
        llama.from_hf(folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "gpt2"}))
    with pytest.raises(
        ConversionError, match=r"is a 'gpt2' checkpoint \(model_type\), not 'llama'"
    ):
        llama.from_hf(folder)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden_act": "gelu"}, r"hidden_act='gelu' is not supported"),
        ({"attention_bias": True}, r"attention_bias=True is not supported"),
        (
            {"rope_parameters": {"rope_type": "llama3", "rope_theta": 1e4, "factor": 8.0}},
            r"rope_parameters=.*llama3.* is not supported",
        ),
        (
            {"num_key_value_heads": 3},
            r"num_attention_heads=4 is not a multiple of num_key_value_heads=3",
        ),
    ],
)
def test_a_config_this_model_does_not_compute_is_refused(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    folder = _copy(tmp_path, "llama-kv2")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(ConversionError, match=r"llama: .*config\.json: " + message):
        llama.from_hf(folder)


def test_call_errors(models: dict[str, Llama]) -> None:
    model = models["llama-kv2"]
    with pytest.raises(  # as GPT2's: an AxisError showing the Tensor
        ax.AxisError, match=r"Llama: ids are a Tensor\[I32, \*Batch, Pos\] \(integers, Pos last\)"
    ):
        model(ax.tensor(np.zeros((3, 2), np.int32), Pos, Batch))
    with pytest.raises(ValueError, match=r"cache has 1 entries, the model 2 blocks"):
        model(ax.tensor(np.zeros((3,), np.int32), Pos), cache=model.init_cache({}, 8)[:1])
    with pytest.raises(TypeError, match=r"to_hf: model is a Llama, got str"):
        llama.to_hf("model", "out")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- transformers
def test_the_fixtures_remade_with_transformers_load_back(tmp_path: Path) -> None:
    """Optional (skips without torch and transformers): remake the fixtures, check they are
    the checked-in ones, and that ``to_hf``'s output loads into transformers with the same
    logits."""
    torch = requires("torch", extra=None)
    transformers = requires("transformers", extra=None)
    spec = importlib.util.spec_from_file_location("make_hf", ROOT / "tools/make_hf_fixtures.py")
    assert spec is not None and spec.loader is not None
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    for name in ALL:
        remade = maker.make(name, tmp_path / "fixtures")
        for file in ("model.safetensors", "reference.safetensors"):
            new, old = load_file(remade / file), load_file(FIXTURES / name / file)
            assert sorted(new) == sorted(old)
            for k in old:
                np.testing.assert_allclose(
                    new[k], old[k], atol=across_programs(1e-6), rtol=0, err_msg=k
                )
        family = family_of(remade)
        family.to_hf(family.from_hf(remade), tmp_path / "out" / name)
        hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out" / name).eval()
        refs = _refs(name)
        with torch.no_grad():
            logits = hf(torch.from_numpy(refs["ids"].astype(np.int64))).logits.numpy()
        np.testing.assert_allclose(logits, refs["logits"], atol=across_programs(1e-5), rtol=0)
