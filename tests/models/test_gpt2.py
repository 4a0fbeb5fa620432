"""GPT-2 from and to Hugging Face checkpoints, against the checked-in fixture.

The fixture (tools/make_hf_fixtures.py: a random 2-layer GPT-2 of width 48, its biases and
norm parameters perturbed) holds ``transformers``' logits of fixed ids and of one cached
decode step; the suite needs neither torch nor transformers. The last test remakes the
fixture with them, where they are installed.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, TypeVarTuple, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import axjax as ax
from axjax.models import ConversionError, Entry, Table, gpt2, load_weights, save_weights
from axjax.models.gpt2 import GPT2, Embed, Pos, Vocab
from tests.conftest import across_programs, requires

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "gpt2"
WEIGHTS = FIXTURE / "model.safetensors"
B = TypeVarTuple("B")


@final
class Batch(ax.Axis): ...


@pytest.fixture(scope="module")
def model() -> GPT2:
    return gpt2.from_hf(FIXTURE)


@pytest.fixture(scope="module")
def refs() -> dict[str, np.ndarray]:
    return load_file(FIXTURE / "reference.safetensors")


def _ids(refs: dict[str, np.ndarray]) -> ax.Tensor[ax.I32, Batch, Pos]:
    return ax.tensor(refs["ids"], Batch, Pos, dtype=ax.I32)


def _copy(tmp_path: Path, arrays: dict[str, np.ndarray] | None = None) -> Path:
    """The fixture copied to ``tmp_path/ckpt``, its weights replaced by ``arrays``."""
    out = tmp_path / "ckpt"
    shutil.copytree(FIXTURE, out)
    if arrays is not None:
        save_file(arrays, out / "model.safetensors", metadata={"format": "pt"})
    return out


def _leaves(m: object) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(m)]


# ----------------------------------------------------------------------------- values
def test_logits_match_transformers(model: GPT2, refs: dict[str, np.ndarray]) -> None:
    logits = _forward(model, _ids(refs))
    assert logits.axes == (Batch, Pos, gpt2.Vocab)
    assert logits.dtype is ax.F32
    np.testing.assert_allclose(
        np.asarray(logits.array), refs["logits"], atol=across_programs(1e-5), rtol=0
    )


def test_logits_without_a_batch_axis_and_under_jit(
    model: GPT2, refs: dict[str, np.ndarray]
) -> None:
    one = ax.tensor(refs["ids"][1], Pos, dtype=ax.I32)
    got = _forward(model, one)
    assert got.axes == (Pos, gpt2.Vocab)
    np.testing.assert_allclose(
        np.asarray(got.array), refs["logits"][1], atol=across_programs(1e-5), rtol=0
    )


@eqx.filter_jit
def _forward(model: GPT2, ids: ax.Tensor[ax.I32, *B, Pos]) -> ax.Tensor[ax.F32, *B, Pos, Vocab]:
    return model(ids)


def test_a_cached_decode_step_matches_transformers(
    model: GPT2, refs: dict[str, np.ndarray]
) -> None:
    prefix = int(load_meta(FIXTURE / "reference.safetensors")["prefix"])
    ids = _ids(refs)
    cache = model.init_cache({Batch: 2}, 16)
    _, cache = _cached(model, ax.slice(ids, Pos, 0, prefix), cache)
    assert cache[0].length.array.tolist() == [prefix] * 2
    step, cache = _cached(model, ax.slice(ids, Pos, prefix, prefix + 1), cache)
    assert step.axes == (Batch, Pos, gpt2.Vocab)
    np.testing.assert_allclose(
        np.asarray(step.array), refs["step_logits"], atol=across_programs(1e-5), rtol=0
    )


@eqx.filter_jit
def _cached(
    model: GPT2, ids: ax.Tensor[ax.I32, Batch, Pos], cache: tuple[ax.nn.KVCache, ...]
) -> tuple[ax.Tensor[ax.F32, Batch, Pos, Vocab], tuple[ax.nn.KVCache, ...]]:
    return model(ids, cache=cache)


def test_the_attention_path_is_the_process_choice_not_the_checkpoint(
    model: GPT2, refs: dict[str, np.ndarray], tmp_path: Path
) -> None:
    """``implementation=`` reaches every block's attention; the fused XLA path gives the
    fixture's logits and cached step as the default path does; ``config.json`` does not
    hold it; a path that does not exist is refused by name."""
    fused = gpt2.from_hf(FIXTURE, implementation="xla")
    assert {b.attn.implementation for b in fused.blocks} == {"xla"}
    assert {b.attn.implementation for b in model.blocks} == {"auto"}
    got = _forward(fused, _ids(refs))
    np.testing.assert_allclose(
        np.asarray(got.array), refs["logits"], atol=across_programs(1e-5), rtol=0
    )
    prefix = int(load_meta(FIXTURE / "reference.safetensors")["prefix"])
    ids = _ids(refs)
    _, cache = _cached(fused, ax.slice(ids, Pos, 0, prefix), fused.init_cache({Batch: 2}, 16))
    step, _ = _cached(fused, ax.slice(ids, Pos, prefix, prefix + 1), cache)
    np.testing.assert_allclose(
        np.asarray(step.array), refs["step_logits"], atol=across_programs(1e-5), rtol=0
    )
    gpt2.to_hf(fused, tmp_path / "fused")
    gpt2.to_hf(model, tmp_path / "default")
    written = (tmp_path / "fused" / "config.json").read_text()
    assert "implementation" not in json.loads(written)
    assert written == (tmp_path / "default" / "config.json").read_text()
    flash: Any = "flash"
    with pytest.raises(ValueError, match=r"from_hf: implementation must be one of 'auto', "):
        gpt2.from_hf(FIXTURE, implementation=flash)
    with pytest.raises(ValueError, match=r"GPT2: implementation must be one of 'auto', "):
        GPT2(model.config, implementation=flash, key=jax.random.key(0))


def load_meta(path: Path) -> dict[str, str]:
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        return dict(f.metadata() or {})


def test_greedy_generation_is_the_argmax_of_the_full_forward(
    model: GPT2, refs: dict[str, np.ndarray]
) -> None:
    prompt = ax.slice(_ids(refs), Pos, 0, 5)
    out = ax.nn.generate(model, prompt, 3, temperature=0)
    assert out.axes == (Batch, Pos) and out.size(Pos) == 3
    seq = np.asarray(prompt.array)
    for _ in range(3):  # recompute every position each step, no cache
        logits = np.asarray(_forward(model, ax.tensor(seq, Batch, Pos, dtype=ax.I32)).array)
        seq = np.concatenate([seq, logits[:, -1].argmax(-1)[:, None].astype(np.int32)], 1)
    np.testing.assert_array_equal(np.asarray(out.array), seq[:, 5:])


def test_the_model_is_differentiable(model: GPT2, refs: dict[str, np.ndarray]) -> None:
    ids = _ids(refs)

    def loss(m: GPT2) -> jax.Array:
        return jnp.mean(m(ids).array ** 2)

    grads = eqx.filter_jit(eqx.filter_grad(loss))(model)
    wte = np.asarray(grads.wte.weight.array)
    assert np.isfinite(wte).all() and np.abs(wte).max() > 0


# ----------------------------------------------------------------------------- writing
def test_to_hf_then_from_hf_is_bit_identical(model: GPT2, tmp_path: Path) -> None:
    gpt2.to_hf(model, tmp_path / "out")
    again = gpt2.from_hf(tmp_path / "out")
    assert again.config == model.config
    for a, b in zip(_leaves(model), _leaves(again), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def test_the_written_keys_shapes_and_values_are_the_fixtures(model: GPT2, tmp_path: Path) -> None:
    gpt2.to_hf(model, tmp_path / "out")
    written = load_file(tmp_path / "out" / "model.safetensors")
    fixture = load_file(WEIGHTS)
    assert sorted(written) == sorted(fixture)
    for k, v in fixture.items():
        assert written[k].shape == v.shape, k
        np.testing.assert_array_equal(written[k], v, err_msg=k)
    assert load_meta(tmp_path / "out" / "model.safetensors") == {"format": "pt"}
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["model_type"] == "gpt2" and config["architectures"] == ["GPT2LMHeadModel"]
    assert (config["n_embd"], config["n_layer"], config["n_head"]) == (48, 2, 4)


def test_importing_and_running_never_imports_torch() -> None:
    code = (
        "import sys, equinox as eqx, axjax as ax\n"
        "from axjax.models import gpt2\n"
        f"m = gpt2.from_hf({str(FIXTURE)!r})\n"
        "ids = ax.tensor([[1, 2, 3]], ax.train.Batch, gpt2.Pos, dtype=ax.I32)\n"
        "eqx.filter_jit(lambda m, i: m(i))(m, ids)\n"
        "bad = [n for n in ('torch', 'transformers') if n in sys.modules]\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]


# ----------------------------------------------------------------------------- mutation
def test_a_swapped_query_and_key_in_the_c_attn_split_fails_the_logits_check(
    refs: dict[str, np.ndarray],
) -> None:
    """The logits test is sensitive to the notable entry: split c_attn as (k, q, v) and the
    logits move far beyond the tolerance."""
    entries = []
    for e in gpt2.TABLE.entries:
        if e.key.endswith("c_attn.weight") or e.key.endswith("c_attn.bias"):
            q, k, v = e.paths
            e = dataclasses.replace(e, path=(k, q, v))
        entries.append(e)
    swapped = dataclasses.replace(gpt2.TABLE, entries=tuple(entries))
    vocab = json.loads((FIXTURE / "config.json").read_text())["vocab_size"]
    config = gpt2.GPT2Config(vocab_size=vocab, n_positions=64, n_embd=48, n_layer=2, n_head=4)
    template = eqx.filter_eval_shape(lambda k: GPT2(config, key=k), jax.random.key(1))
    wrong = load_weights(FIXTURE, template, swapped, layers=2)
    err = np.abs(np.asarray(_forward(wrong, _ids(refs)).array) - refs["logits"]).max()
    assert err > 0.1  # the tolerance is 1e-5


# ----------------------------------------------------------------------------- variants
def test_a_file_without_the_transformer_prefix_and_with_buffers_loads(
    model: GPT2, tmp_path: Path
) -> None:
    """The hub's ``gpt2`` spells keys without ``transformer.`` and keeps ``attn.bias``
    buffers; a tied ``lm_head.weight`` may be stored too."""
    arrays = {k.removeprefix("transformer."): v for k, v in load_file(WEIGHTS).items()}
    arrays["h.0.attn.bias"] = np.ones((1, 1, 64, 64), np.float32)
    arrays["lm_head.weight"] = arrays["wte.weight"]
    again = gpt2.from_hf(_copy(tmp_path, arrays))
    for a, b in zip(_leaves(model), _leaves(again), strict=True):
        np.testing.assert_array_equal(a, b)


def test_unknown_config_keys_are_ignored(model: GPT2, tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["some_future_option"] = {"x": 1}
    (folder / "config.json").write_text(json.dumps(config))
    assert gpt2.from_hf(folder).config == model.config


# ----------------------------------------------------------------------------- bad input
def _weights() -> dict[str, np.ndarray]:
    return dict(load_file(WEIGHTS))


def test_a_missing_key_is_named(tmp_path: Path) -> None:
    arrays = _weights()
    del arrays["transformer.h.1.mlp.c_fc.bias"]
    with pytest.raises(ConversionError, match=r"partial checkpoint, 1 of 28 entries are missing: "):
        gpt2.from_hf(_copy(tmp_path, arrays))


def test_a_partial_checkpoint_lists_everything_missing(tmp_path: Path) -> None:
    arrays = {k: v for k, v in _weights().items() if ".h.1." not in k}
    with pytest.raises(ConversionError) as info:
        gpt2.from_hf(_copy(tmp_path, arrays))
    text = str(info.value)
    assert "partial checkpoint, 12 of 28 entries are missing" in text
    assert "transformer.h.1.ln_1.weight" in text and "transformer.h.1.mlp.c_proj.bias" in text
    assert "nothing was loaded" in text


def test_a_wrongly_sized_entry_names_the_key_and_its_axes(tmp_path: Path) -> None:
    arrays = _weights()
    arrays["transformer.h.0.attn.c_attn.weight"] = np.zeros((48, 96), np.float32)
    with pytest.raises(ConversionError) as info:
        gpt2.from_hf(_copy(tmp_path, arrays))
    assert str(info.value).startswith("gpt2: entry 'transformer.h.0.attn.c_attn.weight' of ")
    assert (
        "has shape [48, 96], expected [Embed=48, (QKV=3, Head=4, HeadDim=12)=144]: another size"
    ) in str(info.value)


def test_a_transposed_entry_is_called_transposed(tmp_path: Path) -> None:
    arrays = _weights()
    key = "transformer.h.1.mlp.c_fc.weight"
    arrays[key] = np.ascontiguousarray(arrays[key].T)
    with pytest.raises(
        ConversionError,
        match=r"entry 'transformer.h.1.mlp.c_fc.weight' .* has shape \[192, 48\], expected "
        r"\[Embed=48, Mlp=192\]: the expected array transposed",
    ):
        gpt2.from_hf(_copy(tmp_path, arrays))


def test_another_architecture_names_the_first_mismatching_key(tmp_path: Path) -> None:
    arrays = {
        "model.embed_tokens.weight": np.zeros((256, 48), np.float32),
        "model.layers.0.self_attn.q_proj.weight": np.zeros((48, 48), np.float32),
    }
    with pytest.raises(
        ConversionError,
        match=r"is not a gpt2 checkpoint of this configuration: the first mismatching key is "
        r"'model.embed_tokens.weight', which this model does not have; 28 of the model's keys",
    ):
        gpt2.from_hf(_copy(tmp_path, arrays))
    folder = _copy(tmp_path / "b")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "llama"}))
    with pytest.raises(
        ConversionError, match=r"is a 'llama' checkpoint \(model_type\), not 'gpt2'"
    ):
        gpt2.from_hf(folder)


def test_another_size_names_the_first_mismatching_key(tmp_path: Path) -> None:
    arrays = _weights()
    arrays.update(
        {k.replace(".h.1.", ".h.2."): v for k, v in arrays.items() if ".h.1." in k}
    )  # three layers, the config says two
    with pytest.raises(ConversionError, match=r"first mismatching key is 'transformer.h.2.attn"):
        gpt2.from_hf(_copy(tmp_path, arrays))
    folder = _copy(tmp_path / "b")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "n_inner": 96}))
    with pytest.raises(
        ConversionError,
        match=r"entry 'transformer.h.0.mlp.c_fc.weight' .* has shape \[48, 192\], expected "
        r"\[Embed=48, Mlp=96\]: another size",
    ):
        gpt2.from_hf(folder)


def test_missing_and_damaged_files(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "model.safetensors").write_bytes(WEIGHTS.read_bytes()[:1000])
    with pytest.raises(ConversionError, match=r"is truncated or not a safetensors file"):
        gpt2.from_hf(folder)
    (folder / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=r"gpt2: no model.safetensors in "):
        gpt2.from_hf(folder)
    (folder / "config.json").write_text("{not json")
    with pytest.raises(ConversionError, match=r"config.json is not JSON"):
        gpt2.from_hf(folder)
    (folder / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"gpt2: no config.json in "):
        gpt2.from_hf(folder)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("activation_function", "relu", r"activation_function='relu' is not supported"),
        ("scale_attn_by_inverse_layer_idx", True, r"scale_attn_by_inverse_layer_idx=True is not"),
        ("n_head", 5, r"n_embd=48 does not divide into n_head=5 heads"),
        ("n_embd", "48", r"config.json's 'n_embd' is '48', expected a int"),
    ],
)
def test_a_config_this_model_does_not_compute_is_refused(
    tmp_path: Path, key: str, value: object, message: str
) -> None:
    folder = _copy(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, key: value}))
    with pytest.raises(ConversionError, match=message):
        gpt2.from_hf(folder)


def test_positions_and_caches_beyond_the_context_are_refused(model: GPT2) -> None:
    with pytest.raises(ValueError, match=r"GPT2: 65 positions, the model has embeddings for 64"):
        model(ax.zeros((1, 65), Batch, Pos, dtype=ax.I32))
    with pytest.raises(ValueError, match=r"max_len 65 exceeds the 64 positions"):
        model.init_cache({Batch: 1}, 65)
    with pytest.raises(
        ax.AxisError,
        match=r"GPT2: ids are a Tensor\[I32, \*Batch, Pos\] \(integers, Pos last\), got "
        r"Tensor\[I32, Pos=3, Batch=1\]",
    ):
        model(ax.zeros((3, 1), Pos, Batch, dtype=ax.I32))  # type: ignore[arg-type, axjax-axes]
    with pytest.raises(ax.AxisError, match=r"got Tensor\[F32, Batch=1, Pos=2\]"):
        model(ax.zeros((1, 2), Batch, Pos))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"GPT2: ids are a Tensor\[I32, \*Batch, Pos\], got list"):
        model([1, 2])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"to_hf: model is a GPT2, got dict"):
        gpt2.to_hf({}, "x")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- the harness
def test_a_table_that_does_not_fit_the_model_is_a_programming_error(model: GPT2) -> None:
    short = dataclasses.replace(gpt2.TABLE, entries=gpt2.TABLE.entries[:-1])
    with pytest.raises(ValueError, match=r"the table leaves model leaves unfilled: ln_f.bias"):
        save_weights("unused", model, short, layers=2)
    wrong = Table("gpt2", (Entry("x", "nowhere.weight", (Embed,)),))
    with pytest.raises(ValueError, match=r"table entry 'x': the model has no leaf 'nowhere"):
        save_weights("unused", model, wrong, layers=2)
    axes = Table("gpt2", (Entry("x", "ln_f.weight", (Embed, Pos)),))
    with pytest.raises(ValueError, match=r"table entry 'x': its layout's axes are not the leaf's"):
        save_weights("unused", model, axes, layers=2)


def test_a_model_with_arrays_the_table_cannot_fill_is_refused(model: GPT2) -> None:
    table = Table("t", (Entry("w", "w", (Embed,)),))
    plain = {"w": ax.zeros((3,), Embed), "extra": jnp.zeros(3)}
    with pytest.raises(ValueError, match=r"model leaf 'extra' is a plain array, not a Tensor"):
        save_weights("unused", plain, table, layers=0)
    stacked = {"w": jax.vmap(lambda a: ax.tensor(a, Embed))(jnp.zeros((2, 3)))}
    with pytest.raises(ValueError, match=r"model leaf 'w' is a stacked Tensor"):
        save_weights("unused", stacked, table, layers=0)


def test_entries_check_their_own_layout() -> None:
    with pytest.raises(ValueError, match=r"an axis occurs twice in its layout"):
        Entry("x", "y", (Embed, (Pos, Embed)))
    with pytest.raises(ValueError, match=r"several paths go with split=, one without"):
        Entry("x", ("a", "b"), (Embed, Pos))
    with pytest.raises(ValueError, match=r"split axis is not in its layout"):
        Entry("x", ("a", "b"), (Embed,), split=Pos)


# ----------------------------------------------------------------------------- transformers
def test_the_fixture_remade_with_transformers_loads_back(tmp_path: Path) -> None:
    """Optional (skips without torch and transformers, in CI too): remake the fixture, check
    it is the checked-in one, and that ``to_hf``'s output loads into transformers with the
    same logits."""
    torch = requires("torch", extra=None)
    transformers = requires("transformers", extra=None)
    spec = importlib.util.spec_from_file_location("make_hf", ROOT / "tools/make_hf_fixtures.py")
    assert spec is not None and spec.loader is not None
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    remade = maker.make("gpt2", tmp_path / "fixtures")
    for name in ("model.safetensors", "reference.safetensors"):
        new, old = load_file(remade / name), load_file(FIXTURE / name)
        assert sorted(new) == sorted(old)
        for k in old:
            np.testing.assert_allclose(
                new[k], old[k], atol=across_programs(1e-6), rtol=0, err_msg=k
            )
    gpt2.to_hf(gpt2.from_hf(remade), tmp_path / "out")
    hf = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "out").eval()
    refs = load_file(FIXTURE / "reference.safetensors")
    with torch.no_grad():
        logits = hf(torch.from_numpy(refs["ids"].astype(np.int64))).logits.numpy()
    np.testing.assert_allclose(logits, refs["logits"], atol=across_programs(1e-5), rtol=0)
