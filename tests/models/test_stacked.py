"""GPT-2 and Llama with their blocks in one ``ax.nn.LayerStack`` (``unroll=False``) and in
another dtype (``dtype=ax.BF16``), against the checked-in fixtures and the unrolled models.

The stacked model is the same function: its logits, cached decode steps, generated tokens,
gradients and optimizer updates are the unrolled model's; ``to_hf`` writes the same file,
byte for byte; the checkpoint checks keep their messages.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

import axjax as ax
import axjax.models._blocks
import axjax.models._gpt2
import axjax.models._hf
from axjax.models import ConversionError, Entry, Table, gpt2, llama, save_weights
from axjax.models._cli import family_of
from tests.conftest import across_programs

FIXTURES = Path(__file__).resolve().parent / "fixtures"
NAMES = ("gpt2", "llama-kv4", "llama-kv2", "llama-kv1", "mistral-sw4", "qwen2-tied")
#: bf16 parameters and compute against the f32 reference logits, as a fraction of the
#: largest |logit| (2.7 for GPT-2, 5.4 to 6.8 for the Llamas): measured 0.9% (GPT-2) and up to
#: 3.5% (Llama); transformers' own bf16 model is as far off (0.9%, and up to 5.6%)
BF16_RTOL = 0.05


@final
class Batch(ax.Axis): ...


def _family(name: str) -> Any:
    return family_of(FIXTURES / name)  # by config.json's model_type


def _load(name: str, **kw: Any) -> Any:
    return _family(name).from_hf(FIXTURES / name, **kw)


_CACHE: dict[tuple[str, bool], Any] = {}


def _model(name: str, unroll: bool) -> Any:
    """The fixture's model, stacked or not (loaded once per test module)."""
    if (name, unroll) not in _CACHE:
        _CACHE[name, unroll] = _load(name, unroll=unroll)
    return _CACHE[name, unroll]


def _refs(name: str) -> dict[str, np.ndarray]:
    return load_file(FIXTURES / name / "reference.safetensors")


def _prefix(name: str) -> int:
    with safe_open(str(FIXTURES / name / "reference.safetensors"), framework="numpy") as f:
        return int((f.metadata() or {})["prefix"])


def _ids(name: str) -> ax.Tensor[ax.I32, Batch, Any]:
    return ax.tensor(_refs(name)["ids"], Batch, _family(name).Pos, dtype=ax.I32)


@eqx.filter_jit
def _forward(model: Any, ids: ax.AnyTensor) -> ax.AnyTensor:
    out: ax.AnyTensor = model(ids)
    return out


@eqx.filter_jit
def _cached(model: Any, ids: ax.AnyTensor, cache: Any) -> tuple[ax.AnyTensor, Any]:
    out: tuple[ax.AnyTensor, Any] = model(ids, cache=cache)
    return out


def _restacked(model: Any) -> Any:
    """An unrolled model with its tuple of blocks stacked (the stacked model's structure)."""
    return eqx.tree_at(lambda m: m.blocks, model, ax.nn.LayerStack.from_layers(model.blocks))


def _assert_same_leaves(a: Any, b: Any, atol: float = 0.0) -> None:
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(la, lb, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        if atol == 0:
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        else:
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=atol, rtol=0)


# ----------------------------------------------------------------------------- structure
@pytest.mark.parametrize("name", NAMES)
def test_the_stacked_blocks_are_one_layer_stack_over_layer(name: str) -> None:
    model, flat = _model(name, False), _model(name, True)
    assert isinstance(flat.blocks, tuple) and len(flat.blocks) == 2
    assert isinstance(model.blocks, ax.nn.LayerStack) and len(model.blocks) == 2
    assert model.blocks.axis is ax.nn.Layer
    for t in jax.tree.leaves(model.blocks, is_leaf=lambda x: isinstance(x, ax.Tensor)):
        assert t.axes[0] is ax.nn.Layer and t.size(ax.nn.Layer) == 2
    # loaded by the same table: the stacked leaves are the unrolled blocks' stacked
    _assert_same_leaves(model, _restacked(flat))


def test_a_new_stacked_model_has_the_unrolled_models_weights() -> None:
    """``unroll=False`` gives block ``i`` the key the tuple's block ``i`` gets."""
    small = gpt2.GPT2Config(vocab_size=16, n_positions=8, n_embd=8, n_layer=3, n_head=2)
    key = jax.random.key(3)
    stacked = gpt2.GPT2(small, key=key, unroll=False)
    _assert_same_leaves(stacked, _restacked(gpt2.GPT2(small, key=key)))
    tiny = llama.LlamaConfig(
        vocab_size=16,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=3,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    stacked_llama = llama.Llama(tiny, key=key, unroll=False)
    _assert_same_leaves(stacked_llama, _restacked(llama.Llama(tiny, key=key)))


def test_unroll_must_be_a_bool() -> None:
    config = _model("gpt2", True).config
    with pytest.raises(TypeError, match=r"GPT2: unroll is True \(a tuple of blocks\) or False"):
        gpt2.GPT2(config, key=jax.random.key(0), unroll="no")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- values
@pytest.mark.parametrize("name", NAMES)
def test_stacked_logits_equal_the_reference_and_the_unrolled_model(name: str) -> None:
    refs, ids = _refs(name), _ids(name)
    got = _forward(_model(name, False), ids)
    assert got.axes == (Batch, _family(name).Pos, _family(name).Vocab) and got.dtype is ax.F32
    np.testing.assert_allclose(
        np.asarray(got.array), refs["logits"], atol=across_programs(1e-5), rtol=0
    )
    flat = _forward(_model(name, True), ids)
    np.testing.assert_allclose(
        np.asarray(got.array), np.asarray(flat.array), atol=across_programs(1e-6), rtol=0
    )


@pytest.mark.parametrize("name", NAMES)
def test_a_stacked_cached_decode_step_equals_the_reference(name: str) -> None:
    refs, ids, prefix, pos = _refs(name), _ids(name), _prefix(name), _family(name).Pos
    model = _model(name, False)
    cache = model.init_cache({Batch: 2}, 16)
    assert isinstance(cache, ax.nn.KVCache) and cache.layer_axis is ax.nn.Layer  # stacked
    assert cache.keys.axes[0] is ax.nn.Layer and cache.keys.size(ax.nn.Layer) == 2
    _, cache = _cached(model, ax.slice(ids, pos, 0, prefix), cache)
    step, cache = _cached(model, ax.slice(ids, pos, prefix, prefix + 1), cache)
    assert cache.length.array.tolist() == [prefix + 1] * 2  # one length per row
    np.testing.assert_allclose(
        np.asarray(step.array), refs["step_logits"], atol=across_programs(1e-5), rtol=0
    )


@pytest.mark.parametrize("name", ["gpt2", "llama-kv1"])
def test_stacked_greedy_generation_gives_the_unrolled_models_tokens(name: str) -> None:
    prompt = ax.slice(_ids(name), _family(name).Pos, 0, 5)
    out = [ax.nn.generate(_model(name, u), prompt, 4, temperature=0) for u in (False, True)]
    np.testing.assert_array_equal(np.asarray(out[0].array), np.asarray(out[1].array))


def test_a_cache_of_another_form_is_refused_by_the_stacked_call() -> None:
    model = _model("llama-kv2", False)
    unrolled = _model("llama-kv2", True)
    a = model.init_cache({Batch: 2}, 16)
    ids = ax.slice(_ids("llama-kv2"), llama.Pos, 0, 3)
    with pytest.raises(TypeError, match=r"Llama: a stacked model's cache is one KVCache stacked"):
        model(ids, cache=unrolled.init_cache({Batch: 2}, 16))
    with pytest.raises(TypeError, match=r"Llama: the cache is a tuple of KVCache, one per block"):
        unrolled(ids, cache=a)
    one_layer = ax.nn.KVCache(
        ax.slice(a.keys, ax.nn.Layer, 0, 1),
        ax.slice(a.values, ax.nn.Layer, 0, 1),
        a.length,
        a.key_pos,
        a.layer_axis,
    )
    with pytest.raises(ValueError, match=r"Llama: cache has 1 layers, the model 2 blocks"):
        model(ids, cache=one_layer)


def _next_token_loss(name: str) -> Callable[..., ax.AnyTensor]:
    fam = _family(name)

    def loss(m: Any, x: ax.AnyTensor, y: ax.AnyTensor) -> ax.AnyTensor:
        per = ax.train.softmax_cross_entropy(m(x), y, fam.Vocab)
        return ax.mean(per, (Batch, fam.Pos))

    return loss


@pytest.mark.parametrize("name", ["gpt2", "llama-kv2"])
def test_one_training_step_updates_the_stacked_model_as_the_unrolled_one(name: str) -> None:
    ids, pos = _ids(name), _family(name).Pos
    n = ids.size(pos)
    batch = [(ax.slice(ids, pos, 0, n - 1), ax.slice(ids, pos, 1, n))]
    # sgd(1.0): the update is the gradient itself
    runs = [
        ax.train.fit(
            jax.tree.map(jnp.copy, _model(name, u)),
            optax.sgd(1.0),
            _next_token_loss(name),
            batch,
            progress=False,
            guard="off",
        )
        for u in (False, True)
    ]
    assert runs[0].step == runs[1].step == 1
    _assert_same_leaves(runs[0].model, _restacked(runs[1].model), atol=across_programs(1e-6))
    moved = jax.tree.map(lambda a, b: bool((a != b).any()), runs[0].model, _model(name, False))
    assert all(jax.tree.leaves(moved))  # every parameter took the step


# ----------------------------------------------------------------------------- writing
@pytest.mark.parametrize("name", NAMES)
def test_a_stacked_model_writes_the_unrolled_models_file(name: str, tmp_path: Path) -> None:
    fam = _family(name)
    fam.to_hf(_model(name, False), tmp_path / "stacked")
    fam.to_hf(_model(name, True), tmp_path / "flat")
    for f in ("model.safetensors", "config.json"):
        assert (tmp_path / "stacked" / f).read_bytes() == (tmp_path / "flat" / f).read_bytes()
    written = load_file(tmp_path / "stacked" / "model.safetensors")
    fixture = load_file(FIXTURES / name / "model.safetensors")
    assert sorted(written) == sorted(fixture)
    for k, v in fixture.items():
        assert written[k].shape == v.shape and written[k].dtype == v.dtype, k
        np.testing.assert_array_equal(written[k], v, err_msg=k)
    config = json.loads((tmp_path / "stacked" / "config.json").read_text())
    want = json.loads((FIXTURES / name / "config.json").read_text())
    assert config["dtype"] == want["dtype"] == "float32"
    again = fam.from_hf(tmp_path / "stacked", unroll=False)
    assert again.config == _model(name, False).config
    _assert_same_leaves(again, _model(name, False))


# ----------------------------------------------------------------------------- errors
def _copy(tmp_path: Path, name: str, edit: Callable[[dict[str, np.ndarray]], None]) -> Path:
    out = tmp_path / name
    shutil.copytree(FIXTURES / name, out)
    arrays = dict(load_file(out / "model.safetensors"))
    edit(arrays)
    save_file(arrays, out / "model.safetensors", metadata={"format": "pt"})
    return out


def _drop_layer_1(arrays: dict[str, np.ndarray]) -> None:
    for k in [k for k in arrays if ".h.1." in k or ".layers.1." in k]:
        del arrays[k]


@pytest.mark.parametrize("unroll", [False, True])
def test_the_checks_keep_their_messages_for_the_stacked_form(unroll: bool, tmp_path: Path) -> None:
    folder = _copy(tmp_path / "partial", "gpt2", _drop_layer_1)
    with pytest.raises(ConversionError) as info:
        gpt2.from_hf(folder, unroll=unroll)
    text = str(info.value)
    assert "partial checkpoint, 12 of 28 entries are missing" in text
    assert "transformer.h.1.ln_1.weight" in text and "transformer.h.1.mlp.c_proj.bias" in text

    def wrong(arrays: dict[str, np.ndarray]) -> None:
        arrays["transformer.h.1.attn.c_attn.weight"] = np.zeros((48, 96), np.float32)

    with pytest.raises(
        ConversionError,
        match=r"entry 'transformer\.h\.1\.attn\.c_attn\.weight' of .* has shape \[48, 96\], "
        r"expected \[Embed=48, \(QKV=3, Head=4, HeadDim=12\)=144\]: another size",
    ):
        gpt2.from_hf(_copy(tmp_path / "wrong", "gpt2", wrong), unroll=unroll)

    def transposed(arrays: dict[str, np.ndarray]) -> None:
        key = "model.layers.1.mlp.down_proj.weight"
        arrays[key] = np.ascontiguousarray(arrays[key].T)

    with pytest.raises(
        ConversionError,
        match=r"entry 'model\.layers\.1\.mlp\.down_proj\.weight' .* has shape \[96, 48\], "
        r"expected \[Embed=48, Mlp=96\]: the expected array transposed",
    ):
        llama.from_hf(_copy(tmp_path / "t", "llama-kv2", transposed), unroll=unroll)
    gpt2_file = _copy(tmp_path / "other", "gpt2", lambda a: None)
    shutil.copy(FIXTURES / "llama-kv2" / "config.json", gpt2_file / "config.json")
    with pytest.raises(
        ConversionError, match=r"the first mismatching key is 'transformer\.h\.0\.attn\."
    ):
        llama.from_hf(gpt2_file, unroll=unroll)


def test_a_table_that_misses_a_stacked_leaf_names_it_per_layer() -> None:
    model = _model("gpt2", False)
    short = dataclasses.replace(
        gpt2.TABLE, entries=tuple(e for e in gpt2.TABLE.entries if "mlp.c_fc.bias" not in e.key)
    )
    with pytest.raises(
        ValueError, match=r"the table leaves model leaves unfilled: blocks\.0\.fc\.bias, blocks\.1"
    ):
        save_weights("unused", model, short, layers=2)


def test_a_vmapped_tensor_outside_a_layer_stack_is_still_refused() -> None:
    table = Table("t", (Entry("w", "w", (llama.Embed,)),))
    stacked = {"w": jax.vmap(lambda a: ax.tensor(a, llama.Embed))(jnp.zeros((2, 3)))}
    with pytest.raises(
        ValueError, match=r"the table maps a tuple of blocks or an ax.nn.LayerStack"
    ):
        save_weights("unused", stacked, table, layers=0)


# ----------------------------------------------------------------------------- dtype
def _floating(model: Any) -> list[jax.Array]:
    leaves = jax.tree.leaves(model)
    return [x for x in leaves if jnp.issubdtype(x.dtype, jnp.floating)]


@pytest.mark.parametrize(
    ("name", "unroll"),
    [(n, u) for n in NAMES for u in (False, True) if u is False or n.startswith(("gpt2", "llama"))],
)
def test_bf16_parameters_are_read_straight_in_bf16(name: str, unroll: bool) -> None:
    half = _load(name, unroll=unroll, dtype=ax.BF16)
    full = _model(name, unroll)
    for h, f in zip(_floating(half), _floating(full), strict=True):
        assert h.dtype == jnp.bfloat16
        # the f32 weight rounded to bf16 (to nearest even), as transformers' .to(bfloat16)
        want = np.asarray(f).astype(ml_dtypes.bfloat16)
        np.testing.assert_array_equal(np.asarray(h).view(np.uint16), want.view(np.uint16))
    logits = _forward(half, _ids(name))
    assert logits.dtype is ax.F32  # the logits are float32 whatever the parameters' dtype
    ref = _refs(name)["logits"]
    err = np.abs(np.asarray(logits.array) - ref).max()
    assert 0 < err < BF16_RTOL * np.abs(ref).max()


@pytest.mark.parametrize("name", ["gpt2", "llama-kv2"])
def test_a_bf16_model_writes_bf16_and_reads_back_bit_identical(name: str, tmp_path: Path) -> None:
    fam = _family(name)
    half = _load(name, unroll=False, dtype=ax.BF16)
    fam.to_hf(half, tmp_path / "out")
    with safe_open(str(tmp_path / "out" / "model.safetensors"), framework="numpy") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"BF16"}
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["dtype"] == "bfloat16"  # as transformers writes it
    _assert_same_leaves(fam.from_hf(tmp_path / "out", unroll=False, dtype=ax.BF16), half)
    # a bf16 file into float32 parameters (dtype=None): widened exactly
    wide = fam.from_hf(tmp_path / "out", unroll=False)
    for w, h in zip(_floating(wide), _floating(half), strict=True):
        assert w.dtype == jnp.float32
        np.testing.assert_array_equal(np.asarray(w), np.asarray(h).astype(np.float32))


def test_a_bf16_cached_decode_and_generation_run() -> None:
    model = _load("llama-kv2", unroll=False, dtype=ax.BF16)
    cache = model.init_cache({Batch: 2}, 16)
    assert cache.keys.dtype is ax.BF16
    prompt = ax.slice(_ids("llama-kv2"), llama.Pos, 0, 5)
    out = ax.nn.generate(model, prompt, 3, temperature=0)
    assert out.axes == (Batch, llama.Pos) and out.size(llama.Pos) == 3


def test_dtype_must_be_a_floating_dtype() -> None:
    with pytest.raises(TypeError, match=r"gpt2\.from_hf: dtype must be .*got I32"):
        _load("gpt2", dtype=ax.I32)
    with pytest.raises(TypeError, match=r"llama\.from_hf: dtype must be .*got I32"):
        _load("llama-kv1", dtype=ax.I32)


# ----------------------------------------------------------------------------- mutations
def test_mutation_layers_filled_in_reverse_fail_the_logits_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Had the harness filled layer ``i`` of the stacked Tensors from the HF keys of another
    layer, the stacked logits would move far off the reference (the tolerance is 1e-5)."""
    real = axjax.models._hf._Slot

    def swapped(path: str, stacked: Any, layer: int) -> Any:
        return real(path, stacked, 1 - layer)

    monkeypatch.setattr(axjax.models._hf, "_Slot", swapped)
    model = gpt2.from_hf(FIXTURES / "gpt2", unroll=False)
    got = np.asarray(_forward(model, _ids("gpt2")).array)
    assert np.abs(got - _refs("gpt2")["logits"]).max() > 1e-2


def test_mutation_a_cache_scanned_in_reverse_fails_the_decode_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Had the stacked call handed the cache back with its layers in the wrong order, the
    next decode step would read another layer's keys: the step check (1e-5) catches it."""
    real = axjax.models._blocks.run_cached

    def reversed_caches(*args: Any) -> Any:
        x, c = real(*args)
        if not isinstance(args[0], ax.nn.LayerStack):
            return x, c
        flip = [ax.Tensor(t.array[::-1], t.axes) for t in (c.keys, c.values)]
        return x, ax.nn.KVCache(*flip, c.length, c.key_pos, c.layer_axis)

    monkeypatch.setattr(axjax.models._gpt2, "run_cached", reversed_caches)
    name, model = "gpt2", gpt2.from_hf(FIXTURES / "gpt2", unroll=False)
    ids, prefix = _ids(name), _prefix(name)
    _, cache = model(ax.slice(ids, gpt2.Pos, 0, prefix), cache=model.init_cache({Batch: 2}, 16))
    step, _ = model(ax.slice(ids, gpt2.Pos, prefix, prefix + 1), cache=cache)
    assert np.abs(np.asarray(step.array) - _refs(name)["step_logits"]).max() > 1e-3
