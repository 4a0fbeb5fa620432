"""LoRA adapters in PEFT's layout (``ax.models.save_peft`` / ``load_peft``), against
adapters that peft itself wrote (tools/make_peft_fixtures.py: ``fixtures/peft-*`` with
transformers + peft's logits, and ``fixtures/peft_record.json``: peft's key names, shapes
and config schema). The suite needs neither torch nor peft; the last test loads axjax's
adapters with peft where it is installed.

Adapters on raw projection weights (attention, SwiGLU) and on stacked models come from
``ax.nn.lora`` (issue 45, items 1-2). The write side is tested here with adapters built by
the layout contract (``_Adapted``: ``weight``, ``lora_a`` ``(*lead, Rank, *in)``,
``lora_b`` ``(*lead, *out, Rank)``, ``alpha``); the rows that need ``lora`` to place them
(reading attention adapters, stacked models) skip, saying so, until it can.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, final

import equinox as eqx
import jax
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import axjax as ax
from axjax.models import ConversionError, gpt2, llama, load_peft, save_peft, save_weights
from tests.conftest import across_programs, requires

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
RECORD = json.loads((FIXTURES / "peft_record.json").read_text())
#: the fields of adapter_config.json that say where and with what it was made
PROVENANCE = ("base_model_name_or_path", "peft_version")


@final
class Batch(ax.Axis): ...


class _Adapted(eqx.Module):
    """An adapted weight as the layout contract has it (the write side reads its leaves)."""

    weight: ax.AnyTensor
    lora_a: ax.AnyTensor
    lora_b: ax.AnyTensor
    alpha: float = eqx.field(static=True)


#: the adapters of each recorded PEFT adapter, in axjax's terms: path -> (rank, alpha);
#: GPT-2's c_attn of rank 6 is query, key and value of rank 2 (block 1's, rank 4: query
#: and value only), of alpha/rank = lora_alpha/r as peft's
SPECS: dict[str, dict[str, tuple[int, float]]] = {
    "gpt2-mlp": {
        "blocks.0.fc": (4, 8),
        "blocks.1.fc": (2, 6),
        "blocks.0.proj": (4, 8),
        "blocks.1.proj": (4, 8),
    },
    "gpt2": {
        **{f"blocks.0.attn.{p}_proj": (2, 1) for p in ("query", "key", "value")},
        "blocks.1.attn.query_proj": (2, 4),
        "blocks.1.attn.value_proj": (2, 4),
        **{f"blocks.{i}.{p}": (4, 8) for i in (0, 1) for p in ("attn.output_proj", "fc", "proj")},
    },
    "llama": {
        f"blocks.{i}.{p}": (2, 5) if (i, p) == (1, "attn.value_proj") else (4, 8)
        for i in (0, 1)
        for p in (
            *(f"attn.{q}_proj" for q in ("query", "key", "value", "output")),
            *(f"mlp.{q}" for q in ("gate", "up", "down")),
        )
    },
}
#: the weights whose in-axes are all but the first (the others': the last axis alone)
_IN_ALL_BUT_FIRST = ("output_proj", "down")


@functools.cache
def _base(name: str, unroll: bool = True) -> Any:
    base = RECORD["adapters"][name]["base"]
    family = gpt2 if base == "gpt2" else llama
    return family.from_hf(FIXTURES / base, unroll=unroll)


def _get(model: Any, path: str) -> Any:
    node = model
    for part in path.split("."):
        node = node[int(part)] if part.isdigit() else getattr(node, part)
    return node


def _set(model: Any, path: str, value: Any) -> Any:
    return eqx.tree_at(lambda m: _get(m, path), model, value)


def _adapted(
    weight: ax.AnyTensor, n_in: int, rank: int, alpha: float, seed: int, lead: int = 0
) -> _Adapted:
    """A random adapter of ``weight`` (its first ``lead`` axes stacking axes, then the
    out-axes; its last ``n_in`` axes the in-axes)."""
    axes, shape = weight.axes, weight.shape
    k = len(axes) - n_in
    g = np.random.default_rng(seed)
    sa, sb = (*shape[:lead], rank, *shape[k:]), (*shape[:k], rank)
    a = ax.Tensor(0.3 * g.standard_normal(sa, np.float32), (*axes[:lead], ax.nn.Rank, *axes[k:]))
    b = ax.Tensor(0.3 * g.standard_normal(sb, np.float32), (*axes[:k], ax.nn.Rank))
    return _Adapted(weight, a, b, float(alpha))


def _with_adapters(model: Any, spec: dict[str, tuple[int, float]], seed: int = 0) -> Any:
    """``model`` with random adapters at ``spec``'s paths: an ``ax.nn.LoRA`` on a Linear /
    Affine (through ``ax.nn.lora``), an ``_Adapted`` on a raw weight."""
    for i, (path, (rank, alpha)) in enumerate(sorted(spec.items())):
        node = _get(model, path)
        if isinstance(node, ax.nn.Affine | ax.nn.Linear):
            key = jax.random.key(seed * 1000 + i)
            model = ax.nn.lora(model, where=ax.nn.by_path(path), rank=rank, alpha=alpha, key=key)
            layer = _get(model, path)
            b = 0.3 * np.random.default_rng(seed * 1000 + i).standard_normal(layer.lora_b.shape)
            model = _set(
                model, f"{path}.lora_b", ax.Tensor(b.astype(np.float32), layer.lora_b.axes)
            )
        else:
            n_in = len(node.axes) - 1 if path.endswith(_IN_ALL_BUT_FIRST) else 1
            model = _set(model, path, _adapted(node, n_in, rank, alpha, seed * 1000 + i))
    return model


def _stacked(unrolled: Any, stacked: Any) -> Any:
    """``stacked`` (a model with blocks in a LayerStack) with the ``_Adapted`` weights of
    ``unrolled``'s blocks, stacked over ``Layer`` (the contract's stacked adapters)."""
    blocks = unrolled.blocks
    for f in jax.tree_util.tree_flatten_with_path(
        blocks[0], is_leaf=lambda x: isinstance(x, _Adapted)
    )[0]:
        path, node = jax.tree_util.keystr(f[0], simple=True, separator="."), f[1]
        if not isinstance(node, _Adapted):
            continue
        layers = [_get(b, path) for b in blocks]
        stack = [
            np.stack([np.asarray(getattr(x, n).array) for x in layers])
            for n in ("lora_a", "lora_b")
        ]
        where = f"blocks.layers.{path}"
        w = _get(stacked, where)
        a = ax.Tensor(stack[0], (ax.nn.Layer, *node.lora_a.axes))
        b = ax.Tensor(stack[1], (ax.nn.Layer, *node.lora_b.axes))
        stacked = _set(stacked, where, _Adapted(w, a, b, node.alpha))
    return stacked


def _plus_updates(base: Any, model: Any, spec: dict[str, tuple[int, float]]) -> Any:
    """``base`` with each weight ``model`` adapts at ``spec``'s paths plus the adapter's
    update ``alpha/rank · B A`` (computed in numpy, the weight's axes out then in)."""
    for path in spec:
        ad = _get(model, path)
        target = f"{path}.weight" if isinstance(ad, ax.nn.LoRA) else path
        weight = _get(base, target)
        r, lead = ad.lora_a.size(ax.nn.Rank), ad.lora_a.axes.index(ax.nn.Rank)
        a, b = np.asarray(ad.lora_a.array), np.asarray(ad.lora_b.array)
        n = a.shape[:lead]  # the stacking axes: one update per layer
        d = (ad.alpha / r) * (b.reshape(*n, -1, r) @ a.reshape(*n, r, -1))
        new = np.asarray(weight.array) + d.reshape(weight.shape)
        base = _set(base, target, ax.Tensor(new, weight.axes))
    return base


def _table(model: Any) -> ax.models.Table:
    return gpt2.TABLE if isinstance(model, gpt2.GPT2) else llama.table(model.config)


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    return next(k.__name__ for k in (bool, int, float, str, list, dict) if isinstance(value, k))


def _logits(model: Any, ids: np.ndarray) -> np.ndarray:
    pos = gpt2.Pos if isinstance(model, gpt2.GPT2) else llama.Pos
    return np.asarray(model(ax.tensor(ids, Batch, pos, dtype=ax.I32)).array)


def _unsupported(model: Any, name: str) -> str | None:
    """Why ``ax.nn.lora`` cannot yet place the adapters of ``name`` on ``model`` (the
    raw projection weights, a stacked model: issue 45 items 1-2), else ``None``."""
    where = {"gpt2-mlp": "**.fc", "gpt2": "**.attn.query_proj", "llama": "**.mlp.gate"}[name]
    try:
        tuned = ax.nn.lora(model, where=where, rank=1, key=jax.random.key(0))
    except ValueError:
        return f"ax.nn.lora cannot adapt {where} yet (issue 45 item 1)"
    flat = jax.tree_util.tree_flatten_with_path(tuned, is_leaf=lambda x: isinstance(x, ax.Tensor))
    a = next(x for p, x in flat[0] if str(p[-1]) == ".lora_a")
    if isinstance(model.blocks, ax.nn.LayerStack) and a.axes[0] is not ax.nn.Layer:
        return "ax.nn.lora does not stack adapters over Layer yet (issue 45 item 2)"
    return None


# ----------------------------------------------------------------------------- writing
@pytest.mark.parametrize("name", list(SPECS))
def test_written_files_have_pefts_keys_shapes_and_config(name: str, tmp_path: Path) -> None:
    """axjax's adapters of the recorded structure write peft's key names and shapes, its
    config schema, and the same config (r, lora_alpha, the patterns, target_modules,
    fan_in_fan_out) as peft wrote for them."""
    rec = RECORD["adapters"][name]
    save_peft(_with_adapters(_base(name), SPECS[name]), tmp_path, base_model_name_or_path="x")
    arrays = load_file(tmp_path / "adapter_model.safetensors")
    assert {k: list(v.shape) for k, v in arrays.items()} == rec["keys"]
    written = json.loads((tmp_path / "adapter_config.json").read_text())
    schema = {k: t for k, t in RECORD["config_schema"].items() if k != "peft_version"}
    assert {k: _json_type(v) for k, v in written.items()} == schema
    pefts = json.loads((FIXTURES / f"peft-{name}" / "adapter_config.json").read_text())
    assert {k: v for k, v in written.items() if k not in PROVENANCE} == {
        k: v for k, v in pefts.items() if k not in PROVENANCE
    }


#: GPT-2's query and value adapters of different ranks and scales, no key adapter: c_attn's
#: B holds the value block scaled by its ratio to the query's scale
MIXED = {"blocks.0.attn.query_proj": (2, 8), "blocks.0.attn.value_proj": (3, 1.5)}


@pytest.mark.parametrize(
    ("name", "spec"), [*((n, SPECS[n]) for n in SPECS), ("gpt2", MIXED)], ids=[*SPECS, "gpt2-mixed"]
)
def test_written_updates_are_the_adapters_updates(
    name: str, spec: dict[str, tuple[int, float]], tmp_path: Path
) -> None:
    """Oracle: each module's PEFT update ``lora_alpha/r · B A`` (transposed for a Conv1D,
    ``fan_in_fan_out``) is, in the family's HF layout, axjax's updates
    ``alpha/rank · B A`` of the weights it covers (GPT-2's c_attn: query | key | value,
    of different scales too), and zero where no weight is adapted."""
    base = _base(name)
    model = _with_adapters(base, spec)
    save_peft(model, tmp_path / "peft")
    zero = jax.tree_util.tree_map(
        lambda t: ax.Tensor(np.zeros(t.shape, np.float32), t.axes),
        base,
        is_leaf=lambda x: isinstance(x, ax.Tensor),
    )
    delta = _plus_updates(zero, model, spec)
    save_weights(tmp_path / "hf", delta, _table(base), layers=2)
    peft = load_file(tmp_path / "peft" / "adapter_model.safetensors")
    config = json.loads((tmp_path / "peft" / "adapter_config.json").read_text())
    adapted = 0
    for key, want in load_file(tmp_path / "hf" / "model.safetensors").items():
        module = key.removesuffix(".weight")
        got = np.zeros_like(want)
        if f"base_model.model.{module}.lora_A.weight" in peft:
            a, b = (peft[f"base_model.model.{module}.lora_{p}.weight"] for p in "AB")
            alpha = config["alpha_pattern"].get(module, config["lora_alpha"])
            got = (alpha / a.shape[0]) * (b @ a)
            got = got.T if config["fan_in_fan_out"] else got
            adapted += 1
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5, err_msg=key)
    assert adapted == len(peft) // 2


#: adapters of one rank and alpha per projection in every layer (a stack has one)
STACKABLE = {
    "gpt2": {
        f"blocks.{i}.attn.{p}": ra
        for i in (0, 1)
        for p, ra in (("query_proj", (2, 4)), ("value_proj", (3, 3)), ("output_proj", (4, 8)))
    },
    "llama": {
        f"blocks.{i}.{p}": (2, 5) if p == "mlp.up" else (4, 8)
        for i in (0, 1)
        for p in ("attn.query_proj", "attn.key_proj", "attn.output_proj", "mlp.up", "mlp.down")
    },
}


@pytest.mark.parametrize("name", list(STACKABLE))
def test_a_stacked_model_writes_what_the_unrolled_one_writes(name: str, tmp_path: Path) -> None:
    """Adapters stacked over ``Layer`` (the contract's ``*lead``) write the unrolled
    model's files, byte for byte."""
    unrolled = _with_adapters(_base(name), STACKABLE[name])
    save_peft(unrolled, tmp_path / "unrolled")
    save_peft(_stacked(unrolled, _base(name, unroll=False)), tmp_path / "stacked")
    for file in ("adapter_model.safetensors", "adapter_config.json"):
        assert (tmp_path / "stacked" / file).read_bytes() == (
            tmp_path / "unrolled" / file
        ).read_bytes()


# ----------------------------------------------------------------------------- reading
def _loaded(name: str, unroll: bool = True) -> Any:
    """The base model of ``name`` with peft's adapter read onto it (skips, saying why,
    where ``ax.nn.lora`` cannot place its adapters yet)."""
    model = _base(name, unroll)
    why = _unsupported(model, name)
    if why is not None:
        pytest.skip(why)
    return load_peft(model, FIXTURES / f"peft-{name}")


@pytest.mark.parametrize("unroll", [True, False], ids=["unrolled", "stacked"])
@pytest.mark.parametrize("name", list(SPECS))
def test_pefts_adapter_gives_transformers_and_pefts_logits(name: str, unroll: bool) -> None:
    """peft's adapter (its config's rank, alpha and patterns) read onto the base model
    gives the logits transformers + peft computed with it."""
    ref = load_file(FIXTURES / f"peft-{name}" / "reference.safetensors")
    if not unroll:
        # each recorded adapter's rank_pattern gives one layer's projection a rank of its
        # own: a stack keeps one per projection (a uniform folder: the stacked-read test)
        with pytest.raises(ConversionError, match="different ranks or alphas"):
            _loaded(name, unroll)
        return
    got = _logits(_loaded(name, unroll), ref["ids"])
    np.testing.assert_allclose(got, ref["logits"], atol=across_programs(1e-4), rtol=0)


@pytest.mark.parametrize("name", list(SPECS))
def test_read_then_written_gives_the_same_logits(name: str, tmp_path: Path) -> None:
    """axjax -> PEFT folder -> axjax: the same logits (GPT-2's c_attn, read as three
    adapters with A shared, is written back as one of three times the rank); an adapter
    of modules that are one weight each is written back as peft wrote it."""
    tuned = _loaded(name)
    save_peft(tuned, tmp_path)
    again = load_peft(_base(name), tmp_path)
    ref = load_file(FIXTURES / f"peft-{name}" / "reference.safetensors")
    np.testing.assert_allclose(
        _logits(again, ref["ids"]), _logits(tuned, ref["ids"]), atol=1e-5, rtol=0
    )
    if name != "gpt2":
        new = load_file(tmp_path / "adapter_model.safetensors")
        old = load_file(FIXTURES / f"peft-{name}" / "adapter_model.safetensors")
        assert sorted(new) == sorted(old)
        for k in old:
            np.testing.assert_array_equal(new[k], old[k], err_msg=k)


def test_reading_creates_lora_layers_of_the_configs_rank_and_alpha() -> None:
    """No ``lora`` call first: each adapted Affine becomes an ``ax.nn.LoRA`` of the
    config's rank and alpha, ``rank_pattern`` / ``alpha_pattern`` honoured."""
    tuned = _loaded("gpt2-mlp")
    got = {(i, p): (_get(tuned, f"blocks.{i}.{p}").rank, _get(tuned, f"blocks.{i}.{p}").alpha)
           for i in (0, 1) for p in ("fc", "proj")}  # fmt: skip
    assert got == {
        (0, "fc"): (4, 8.0),
        (1, "fc"): (2, 6.0),
        (0, "proj"): (4, 8.0),
        (1, "proj"): (4, 8.0),
    }
    assert not isinstance(tuned.blocks[0].attn.query_proj, eqx.Module)


def test_a_model_with_the_folders_adapters_loads_and_another_is_refused(tmp_path: Path) -> None:
    """A model that already has adapters takes the folder's values when they are the
    same adapters; other ones are an error naming the first difference."""
    folder = FIXTURES / "peft-gpt2-mlp"
    tuned = _loaded("gpt2-mlp")
    zeroed = jax.tree_util.tree_map(lambda x: x * 0 if isinstance(x, ax.Tensor) else x, tuned,
                                    is_leaf=lambda x: isinstance(x, ax.Tensor))  # fmt: skip
    again = load_peft(zeroed, folder)
    np.testing.assert_array_equal(np.asarray(again.blocks[1].fc.lora_b.array),
                                  np.asarray(tuned.blocks[1].fc.lora_b.array))  # fmt: skip
    other = ax.nn.lora(_base("gpt2-mlp"), where="**.fc", rank=3, key=jax.random.key(0))
    with pytest.raises(ConversionError, match=r"at blocks\.0\.fc the model has lora_a \[Rank=3"):
        load_peft(other, folder)


# ----------------------------------------------------------------------------- errors
def _copy(tmp_path: Path, name: str = "gpt2-mlp", **config: object) -> Path:
    """The fixture ``peft-<name>`` copied, ``config``'s fields set in adapter_config.json."""
    out = tmp_path / name
    shutil.copytree(FIXTURES / f"peft-{name}", out)
    data = json.loads((out / "adapter_config.json").read_text())
    data.update(config)
    (out / "adapter_config.json").write_text(json.dumps(data))
    return out


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("use_dora", True),
        ("use_rslora", True),
        ("bias", "all"),
        ("modules_to_save", ["lm_head"]),
        ("lora_bias", True),
        ("peft_type", "IA3"),
    ],
)
def test_what_lora_cannot_represent_is_refused_by_field(
    field: str, value: object, tmp_path: Path
) -> None:
    with pytest.raises(
        ConversionError, match=rf"has {re.escape(f'{field}={value!r}')}.*cannot represent"
    ):
        load_peft(_base("gpt2-mlp"), _copy(tmp_path, **{field: value}))


@pytest.mark.parametrize(
    ("targets", "message"),
    [
        (
            ["c_fc", "mlp.c_proj", "q_proj"],
            r"target_modules names 'q_proj', which is no linear module",
        ),
        (["c_fc"], r"adapter of 'transformer\.h\.0\.mlp\.c_proj' is not one that .* selects"),
        (["c_fc", "c_proj"], r"selects transformer\.h\.0\.attn\.c_proj, .* has no adapter for"),
        ("transformer\\.h\\.\\d\\.mlp\\..*", None),  # a regex, as peft takes: it fits
    ],
)
def test_target_modules_must_fit_the_model_and_the_file(
    targets: object, message: str | None, tmp_path: Path
) -> None:
    folder = _copy(tmp_path, target_modules=targets)
    if message is None:
        load_peft(_base("gpt2-mlp"), folder)
        return
    with pytest.raises(ConversionError, match=message):
        load_peft(_base("gpt2-mlp"), folder)


def _edit(folder: Path, edit: Callable[[dict[str, np.ndarray]], None]) -> Path:
    arrays = load_file(folder / "adapter_model.safetensors")
    edit(arrays)
    save_file(arrays, folder / "adapter_model.safetensors", metadata={"format": "pt"})
    return folder


def test_a_transposed_or_resized_array_is_named(tmp_path: Path) -> None:
    key = "base_model.model.transformer.h.0.mlp.c_fc.lora_B.weight"

    def transpose(a: dict[str, np.ndarray]) -> None:
        a[key] = np.ascontiguousarray(a[key].T)

    def cut(a: dict[str, np.ndarray]) -> None:
        a[key] = a[key][:-1]

    with pytest.raises(
        ConversionError, match=r"\[4, 48\] and lora_B \[4, 192\].*: lora_B is transposed"
    ):
        load_peft(_base("gpt2-mlp"), _edit(_copy(tmp_path / "t"), transpose))
    with pytest.raises(
        ConversionError, match=r"c_fc's lora_B is \[191, 4\], expected \[192, 4\].*another size"
    ):
        load_peft(_base("gpt2-mlp"), _edit(_copy(tmp_path / "c"), cut))


def test_unknown_keys_ranks_and_modules_are_named(tmp_path: Path) -> None:
    with pytest.raises(
        ConversionError,
        match=r"'transformer\.h\.1\.mlp\.c_fc''s lora_A is \[2, 48\].*r=4 \(the config's r\)",
    ):
        load_peft(_base("gpt2-mlp"), _copy(tmp_path / "r", rank_pattern={}))
    emb = "base_model.model.transformer.wte.lora_embedding_A"
    with pytest.raises(ConversionError, match=rf"holds '{emb}', which is not a LoRA adapter's key"):
        load_peft(
            _base("gpt2-mlp"),
            _edit(_copy(tmp_path / "e"), lambda a: a.update({emb: np.zeros((4, 384), np.float32)})),
        )
    ln = "base_model.model.transformer.h.0.ln_1"
    extra = {
        f"{ln}.lora_A.weight": np.zeros((4, 48), np.float32),
        f"{ln}.lora_B.weight": np.zeros((48, 4), np.float32),
    }
    with pytest.raises(
        ConversionError, match=r"adapts 'transformer\.h\.0\.ln_1', which is no linear module"
    ):
        load_peft(_base("gpt2-mlp"), _edit(_copy(tmp_path / "l"), lambda a: a.update(extra)))
    with pytest.raises(FileNotFoundError, match=r"no adapter_config\.json in"):
        load_peft(_base("gpt2-mlp"), FIXTURES / "gpt2")


def test_save_and_load_name_what_they_take(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"save_peft: the model has no LoRA adapters"):
        save_peft(_base("gpt2-mlp"), tmp_path)
    with pytest.raises(
        TypeError, match=r"save_peft: model is an axjax\.models GPT2 or Llama, got Linear"
    ):
        save_peft(ax.nn.Linear(Batch, Batch, 2, 2, key=jax.random.key(0)), tmp_path)
    with pytest.raises(
        TypeError, match=r"load_peft: model is an axjax\.models GPT2 or Llama, got dict"
    ):
        load_peft({}, FIXTURES / "peft-gpt2-mlp")


# ----------------------------------------------------------------------------- peft
@pytest.mark.parametrize("name", list(SPECS))
def test_peft_loads_axjaxs_adapters_with_axjaxs_logits(name: str, tmp_path: Path) -> None:
    """Optional (skips without torch, transformers and peft, in CI too): adapters that
    axjax wrote, loaded by ``peft.PeftModel.from_pretrained`` onto the transformers model,
    give axjax's logits."""
    torch = requires("torch", extra=None)
    transformers = requires("transformers", extra=None)
    peft = requires("peft", extra=None)
    tuned = _loaded(name)
    leaves = jax.tree_util.tree_leaves_with_path(tuned, is_leaf=lambda x: isinstance(x, ax.Tensor))
    for i, (p, t) in enumerate(leaves):  # other adapters than the fixture's
        if str(p[-1]) == ".lora_b":
            b = t.array + 0.1 * jax.random.normal(jax.random.key(i), t.shape)
            tuned = _set(
                tuned, jax.tree_util.keystr(p, simple=True, separator="."), ax.Tensor(b, t.axes)
            )
    save_peft(tuned, tmp_path)
    base = FIXTURES / RECORD["adapters"][name]["base"]
    hf = transformers.AutoModelForCausalLM.from_pretrained(base, attn_implementation="eager")
    model = peft.PeftModel.from_pretrained(hf, tmp_path).eval()
    ids = load_file(base / "reference.safetensors")["ids"]
    with torch.no_grad():
        logits = model(torch.from_numpy(ids.astype(np.int64))).logits.numpy()
    np.testing.assert_allclose(logits, _logits(tuned, ids), atol=across_programs(1e-4), rtol=0)


@pytest.mark.parametrize("name", list(SPECS))
def test_peft_applies_the_written_updates_as_merging_them_does(name: str, tmp_path: Path) -> None:
    """Optional (skips without torch, transformers and peft, in CI too): adapters axjax
    wrote (on every projection, GPT-2's query/key/value among them, by the layout
    contract) loaded by peft onto the transformers model give the logits of the
    transformers model whose weights have the updates added (written by ``to_hf``)."""
    torch = requires("torch", extra=None)
    transformers = requires("transformers", extra=None)
    peft = requires("peft", extra=None)
    base = _base(name)
    model = _with_adapters(base, SPECS[name])
    save_peft(model, tmp_path / "peft")
    family = gpt2 if isinstance(base, gpt2.GPT2) else llama
    family.to_hf(_plus_updates(base, model, SPECS[name]), tmp_path / "merged")
    load = transformers.AutoModelForCausalLM.from_pretrained
    merged = load(tmp_path / "merged", attn_implementation="eager").eval()
    fixture = FIXTURES / RECORD["adapters"][name]["base"]
    tuned = peft.PeftModel.from_pretrained(
        load(fixture, attn_implementation="eager"), tmp_path / "peft"
    )
    ids = torch.from_numpy(load_file(fixture / "reference.safetensors")["ids"].astype(np.int64))
    with torch.no_grad():
        want, got = merged(ids).logits.numpy(), tuned.eval()(ids).logits.numpy()
    np.testing.assert_allclose(got, want, atol=across_programs(1e-4), rtol=0)


def test_the_peft_fixtures_remade_with_peft_are_the_checked_in_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Optional (skips without torch, transformers and peft, in CI too): the adapters,
    logits and record that tools/make_peft_fixtures.py makes are the checked-in ones."""
    for name in ("torch", "transformers", "peft"):
        requires(name, extra=None)
    spec = importlib.util.spec_from_file_location("make_peft", ROOT / "tools/make_peft_fixtures.py")
    assert spec is not None and spec.loader is not None
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    monkeypatch.chdir(ROOT)
    for name, rec in RECORD["adapters"].items():
        made = maker.make(name, tmp_path)
        assert RECORD["config_schema"] == made.pop("schema")
        assert made == rec
        got = json.loads((tmp_path / f"peft-{name}" / "adapter_config.json").read_text())
        assert got == json.loads((FIXTURES / f"peft-{name}" / "adapter_config.json").read_text())
        for file in ("adapter_model.safetensors", "reference.safetensors"):
            new, old = (
                load_file(tmp_path / f"peft-{name}" / file),
                load_file(FIXTURES / f"peft-{name}" / file),
            )
            assert sorted(new) == sorted(old)
            for k in old:
                np.testing.assert_allclose(
                    new[k], old[k], atol=across_programs(1e-5), rtol=0, err_msg=k
                )


# ----------------------------------------------------------------------------- the contract
def _adapter_paths(model: Any) -> dict[str, tuple[int, float]]:
    found = jax.tree_util.tree_flatten_with_path(
        model, is_leaf=lambda x: isinstance(x, _Adapted | ax.nn.LoRA | ax.nn.LoRAWeight)
    )[0]
    return {
        jax.tree_util.keystr(p, simple=True, separator="."): (x.lora_a.size(ax.nn.Rank), x.alpha)
        for p, x in found
        if isinstance(x, _Adapted | ax.nn.LoRA | ax.nn.LoRAWeight)
    }


@pytest.mark.parametrize("name", list(SPECS))
def test_pefts_adapters_read_by_the_contract_give_pefts_logits(name: str) -> None:
    """peft's adapters on every projection (GPT-2's fused c_attn split into query, key and
    value, A shared), read into adapters of the layout contract: the base model with
    their updates added gives transformers + peft's logits, and each adapter has the
    config's rank and alpha (c_attn's parts: the fused rank)."""
    base = _base(name)
    tuned = load_peft(base, FIXTURES / f"peft-{name}")
    spec = _adapter_paths(tuned)
    ref = load_file(FIXTURES / f"peft-{name}" / "reference.safetensors")
    got = _logits(_plus_updates(base, tuned, spec), ref["ids"])
    np.testing.assert_allclose(got, ref["logits"], atol=across_programs(1e-4), rtol=0)
    want = {p: (r, float(a)) for p, (r, a) in SPECS[name].items()}
    if name == "gpt2":  # c_attn: one adapter of rank 6 (block 0) or 4 (block 1) for q, k, v
        want.update({f"blocks.0.attn.{p}_proj": (6, 3.0) for p in ("query", "key", "value")})
        want.update({f"blocks.1.attn.{p}_proj": (4, 8.0) for p in ("query", "key", "value")})
    assert spec == want


def test_a_stacked_model_reads_what_the_unrolled_one_reads(tmp_path: Path) -> None:
    """A folder read onto the stacked Llama (adapters of the contract, stacked over
    ``Layer``) gives the unrolled model's function; a folder whose layers differ in rank
    for one projection is refused for a stack, naming it."""
    save_peft(_with_adapters(_base("llama"), STACKABLE["llama"]), tmp_path)
    ids = load_file(FIXTURES / "llama-kv2" / "reference.safetensors")["ids"]
    outs = []
    for unroll in (True, False):
        base = _base("llama", unroll)
        tuned = load_peft(base, tmp_path)
        outs.append(_logits(_plus_updates(base, tuned, _adapter_paths(tuned)), ids))
    np.testing.assert_allclose(outs[1], outs[0], atol=across_programs(1e-4), rtol=0)
    assert not np.allclose(outs[0], _logits(_base("llama"), ids), atol=1e-2)
    with pytest.raises(
        ConversionError,
        match=r"stacked blocks\.layers\.attn\.value_proj have adapters of different ranks",
    ):
        load_peft(_base("llama", False), FIXTURES / "peft-llama")


def test_a_bfloat16_model_reads_and_writes_bfloat16_adapters(tmp_path: Path) -> None:
    """The adapters take the base model's dtype, read and written."""
    model = gpt2.from_hf(FIXTURES / "gpt2", dtype=ax.BF16)
    tuned = load_peft(model, FIXTURES / "peft-gpt2-mlp")
    assert tuned.blocks[1].fc.lora_b.array.dtype == np.dtype("bfloat16")
    save_peft(tuned, tmp_path)
    arrays = load_file(tmp_path / "adapter_model.safetensors")
    old = load_file(FIXTURES / "peft-gpt2-mlp" / "adapter_model.safetensors")
    assert {a.dtype.name for a in arrays.values()} == {"bfloat16"}
    for k, a in arrays.items():
        np.testing.assert_allclose(a.astype(np.float32), old[k], rtol=1e-2, atol=1e-2, err_msg=k)
