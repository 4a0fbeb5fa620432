"""Every checkpoint format x every corruption kind: a clear error of the format's own class
naming the file and the problem, and nothing lost (the previous file byte for byte, no
temporary file left), or a load that gives back exactly what was saved.

Formats: ``ax.nn.save_safetensors``, ``ax.train.save_checkpoint`` (.npz) and
``ax.train.Checkpoints`` (numbered .npz files). Sharded (orbax) checkpoints have their own
tests (tests/parallel). Each case is a function returning its problem (``None`` when the
format behaves), so the mutation test can turn a mechanism off and see the cases fail.
"""

from __future__ import annotations

import functools
import json
import re
import struct
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from axjax.nn import _safetensors
from axjax.train import CheckpointError, Checkpoints, _checkpoint, load_checkpoint, save_checkpoint
from tests.nn.helpers import Embed, Hidden


@functools.cache
def _model(seed: int = 0, stack: int = 3, hidden: int = 3, dtype: Any = ax.F32) -> Any:
    """An Affine and a stacked Affine (``eqx.filter_vmap`` over its constructor)."""
    k1, k2 = jax.random.split(jax.random.key(seed))
    keys = jax.random.split(k2, stack)
    stacked = eqx.filter_vmap(lambda k: ax.nn.Affine(Embed, Hidden, 4, hidden, dtype=dtype, key=k))(
        keys
    )
    return {"layer": ax.nn.Affine(Embed, Hidden, 4, hidden, dtype=dtype, key=k1), "stack": stacked}


@dataclass(frozen=True)
class Format:
    name: str
    error: type[Exception]
    save: Callable[[Path, Any, dict[str, Any] | None], Path]  # returns the file written
    load: Callable[[Path, Any], Any]


def _st_save(folder: Path, tree: Any, metadata: dict[str, Any] | None) -> Path:
    path = folder / "m.safetensors"
    ax.nn.save_safetensors(tree, path, metadata)
    return path


def _npz_save(folder: Path, tree: Any, metadata: dict[str, Any] | None) -> Path:
    return save_checkpoint(folder / "m.npz", tree, step=1, metadata=metadata)


def _ckpts_save(folder: Path, tree: Any, metadata: dict[str, Any] | None) -> Path:
    return Checkpoints(folder / "run").save(1, tree, metadata)


FORMATS = [
    Format(
        "safetensors",
        ax.nn.SafetensorsError,
        _st_save,
        lambda p, like: ax.nn.load_safetensors(like, p),
    ),
    Format("npz", CheckpointError, _npz_save, lambda p, like: load_checkpoint(p, like)[0]),
    Format(
        "Checkpoints",
        CheckpointError,
        _ckpts_save,
        lambda p, like: Checkpoints(p.parent).restore(like, step=1).tree,
    ),
]


def _same(a: Any, b: Any) -> bool:
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(la) == len(lb) and all(
        np.asarray(x).dtype == np.asarray(y).dtype and np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(la, lb, strict=True)
    )


def _expect_error(fmt: Format, call: Callable[[], Any], *needles: str) -> str | None:
    """``None`` if ``call`` raises ``fmt.error`` whose message holds every needle."""
    try:
        call()
    except fmt.error as e:
        missing = [n for n in needles if n not in str(e)]
        return f"message lacks {missing}: {e}" if missing else None
    except Exception as e:  # noqa: BLE001 - the point: any other error is a finding
        return f"raw {type(e).__name__}: {e}"
    return "no error"


def _load_or_error(fmt: Format, path: Path, original: Any) -> str | None:
    """A damaged file: ``fmt.error`` naming it, or a load equal to what was saved."""
    try:
        loaded = fmt.load(path, _model(1))
    except fmt.error as e:
        return None if path.name in str(e) else f"message does not name {path.name}: {e}"
    except Exception as e:  # noqa: BLE001
        return f"raw {type(e).__name__}: {e}"
    return None if _same(loaded, original) else "loaded different values without an error"


# ------------------------------------------------------------------- load-side corruption
def _truncated(fraction: float) -> Callable[[Format, Path], str | None]:
    def case(fmt: Format, tmp: Path) -> str | None:
        original = _model(0)
        path = fmt.save(tmp, original, None)
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * fraction)])
        return _load_or_error(fmt, path, original)

    return case


def _flipped_header(fmt: Format, tmp: Path) -> str | None:
    """Flip bytes of the file's first 96 (the safetensors JSON header, the zip's first
    local header and .npy header)."""
    original = _model(0)
    path = fmt.save(tmp, original, None)
    data = path.read_bytes()
    for i in range(0, 96, 3):
        raw = bytearray(data)
        raw[i] ^= 0x5A
        path.write_bytes(bytes(raw))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = _load_or_error(fmt, path, original)
        if found:
            return f"byte {i}: {found}"
    return None


def _rewrite_metadata(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite the JSON that describes the arrays: the safetensors header's axjax entry,
    or the checkpoint's manifest (with a correct CRC: a well-formed but wrong file)."""
    data = path.read_bytes()
    if path.suffix == ".safetensors":
        n = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8 : 8 + n])
        meta = json.loads(header["__metadata__"]["axjax"])
        edit(meta)
        header["__metadata__"]["axjax"] = json.dumps(meta)
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        path.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + n :])
        return
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    manifest = json.loads(members["manifest.json"])
    edit(manifest)
    members["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, content in members.items():
            zf.writestr(name, content)


def _wrong_metadata_field(fmt: Format, tmp: Path) -> str | None:
    """A well-formed file whose axis metadata has the wrong types."""
    path = fmt.save(tmp, _model(0), None)

    def edit(meta: dict[str, Any]) -> None:
        if "leaves" in meta:
            meta["leaves"][0]["shape"] = "4x3"
        else:
            meta["layer.weight"]["axes"] = 7

    _rewrite_metadata(path, edit)
    return _expect_error(fmt, lambda: fmt.load(path, _model(1)), path.name, "corrupt")


# ------------------------------------------------------------------- save-side refusals
def _intact_after(fmt: Format, tmp: Path, bad_save: Callable[[], Any], *needles: str) -> str | None:
    """Save a good file, try ``bad_save``: a clear error, the file and folder unchanged."""
    path = fmt.save(tmp, _model(0), {"note": "kept"})
    before, listing = path.read_bytes(), sorted(path.parent.iterdir())
    found = _expect_error(fmt, bad_save, *needles)
    if found:
        return found
    if path.read_bytes() != before or sorted(path.parent.iterdir()) != listing:
        return "the previous file or its folder changed"
    return None


def _wrong_metadata_type(fmt: Format, tmp: Path) -> str | None:
    # safetensors' header holds strings; a checkpoint's manifest holds JSON values (an int
    # key would come back a str)
    if fmt.name == "safetensors":
        bad: dict[str, Any] = {"epoch": 3}
        needle = "metadata must be a dict of str to str"
    else:
        bad, needle = {"by_epoch": {1: 0.5}}, "has the key 1 (int)"
    return _intact_after(fmt, tmp, lambda: fmt.save(tmp, _model(2), bad), needle)


def _key_collision(fmt: Format, tmp: Path) -> str | None:
    """``{"a.b": x, "a": {"b": y}}``: refused before writing, or both kept apart."""
    tree = {"a.b": jnp.zeros(2), "a": {"b": jnp.ones(2)}}
    if fmt.name != "safetensors":  # entries are numbered files: no names to collide
        path = fmt.save(tmp, tree, None)
        loaded = fmt.load(path, {"a.b": jnp.full(2, 5.0), "a": {"b": jnp.full(2, 5.0)}})
        return None if _same(loaded, tree) else "the two leaves did not come back apart"
    return _intact_after(fmt, tmp, lambda: fmt.save(tmp, tree, None), "'a.b'", "collides")


# ------------------------------------------------------------------- template mismatches
def _mismatch(template: Callable[[], Any], *needles: str) -> Callable[[Format, Path], str | None]:
    def case(fmt: Format, tmp: Path) -> str | None:
        path = fmt.save(tmp, _model(0), None)
        return _expect_error(fmt, lambda: fmt.load(path, template()), path.name, *needles)

    return case


def _extra_leaf() -> Any:
    return {**_model(1), "extra": ax.nn.LayerNorm(Hidden, 3)}


def _other_axes() -> Any:
    m = _model(1)
    return {**m, "layer": ax.nn.Affine(Hidden, Embed, 3, 4, key=jax.random.key(3))}


CASES: dict[str, Callable[[Format, Path], str | None]] = {
    "truncated to 0": _truncated(0.0),
    "truncated to 1/50": _truncated(0.02),
    "truncated to 1/2": _truncated(0.5),
    "truncated by 1 byte": _truncated(0.9999),
    "flipped header byte": _flipped_header,
    "wrong metadata field": _wrong_metadata_field,
    "wrong metadata type": _wrong_metadata_type,
    "key collision": _key_collision,
    "missing key": _mismatch(_extra_leaf, "extra"),
    "other axes": _mismatch(_other_axes, "Embed=4"),
    "other dtype": _mismatch(lambda: _model(1, dtype=ax.BF16), "float32"),
    "other shape": _mismatch(lambda: _model(1, hidden=5), "Hidden=5"),
    "other stack size": _mismatch(lambda: _model(1, stack=2), "2 stacked"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_corruption_is_a_clear_error_and_loses_nothing(fmt: Format, case: str, tmp_path: Path):
    assert CASES[case](fmt, tmp_path) is None


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_stacked_tensors_round_trip(fmt: Format, tmp_path: Path) -> None:
    model = _model(0)
    loaded = fmt.load(fmt.save(tmp_path, model, None), _model(1))
    assert _same(loaded, model)
    assert loaded["stack"].weight.axes == (Hidden, Embed)
    assert loaded["stack"].weight.array.shape == (3, 3, 4)


def test_quoted_examples(tmp_path: Path) -> None:
    """The issue's examples, with their messages."""
    path = tmp_path / "m.safetensors"
    with pytest.raises(
        ax.nn.SafetensorsError,
        match=re.escape(
            "save_safetensors: the module's leaves ['a']['b'] and ['a.b'] both get the entry "
            "name 'a.b' (a key with a dot collides with a nested key); rename one of them"
        ),
    ):
        ax.nn.save_safetensors({"a.b": jnp.zeros(2), "a": {"b": jnp.ones(2)}}, path)
    with pytest.raises(
        ax.nn.SafetensorsError,
        match=re.escape(
            "save_safetensors: metadata must be a dict of str to str (the safetensors header "
            "holds strings only): metadata['epoch'] is the int 3; pass str(value) or "
            "json.dumps(value). Nothing was written."
        ),
    ):
        ax.nn.save_safetensors(_model(), path, {"epoch": 3})  # type: ignore[dict-item]
    assert not path.exists()
    ax.nn.save_safetensors(_model(), path)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(
        ax.nn.SafetensorsError,
        match=rf"load_safetensors: {re.escape(str(path))} is truncated or not a safetensors "
        r"file \(Error while deserializing header: .*\); it cannot be loaded",
    ):
        ax.nn.load_safetensors(_model(), path)


def test_a_key_array_is_refused_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    with pytest.raises(
        ax.nn.SafetensorsError,
        match=re.escape(
            "save_safetensors: the module's leaf ['key'] is a PRNG key array, which a "
            "safetensors file cannot hold (numbers only)"
        ),
    ):
        ax.nn.save_safetensors({"w": jnp.zeros(2), "key": jax.random.key(0)}, path)
    assert list(tmp_path.iterdir()) == []


def test_checkpoints_restore_skips_a_damaged_newest_file(tmp_path: Path) -> None:
    ckpts = Checkpoints(tmp_path)
    ckpts.save(1, _model(0))
    newest = ckpts.save(2, _model(1))
    newest.write_bytes(newest.read_bytes()[:300])
    with pytest.warns(UserWarning, match=r"skipping a damaged checkpoint: .*ckpt-000000002"):
        restored = ckpts.restore(_model(5))
    assert restored.step == 1 and _same(restored.tree, _model(0))


MECHANISMS: dict[str, tuple[Any, str, Any, list[str]]] = {
    # name: (module, attribute, replacement, cases that must then report problems)
    "safetensors metadata check": (
        _safetensors,
        "_checked_metadata",
        lambda m: {**(m or {})},
        ["wrong metadata type"],
    ),
    "safetensors axis metadata check": (
        _safetensors,
        "_saved_axes",
        lambda where, text: json.loads(text or "{}"),
        ["wrong metadata field"],
    ),
    "checkpoint metadata check": (
        _checkpoint,
        "checked_metadata",
        lambda path, m: m,
        ["wrong metadata type"],
    ),
    "checkpoint manifest check": (
        _checkpoint,
        "manifest_problem",
        lambda m: None,
        ["wrong metadata field"],
    ),
}


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_mutation_each_check_is_what_catches_its_cases(
    mechanism: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With one check turned off, the matrix reports its cases: the test can fail."""
    module, attribute, replacement, cases = MECHANISMS[mechanism]
    monkeypatch.setattr(module, attribute, replacement)
    formats = [f for f in FORMATS if (f.name == "safetensors") == (module is _safetensors)]
    found = []
    for f in formats:
        for c in cases:
            folder = tmp_path / f"{f.name}-{c}".replace(" ", "_")
            folder.mkdir()
            found.append(CASES[c](f, folder))
    assert found and all(found), found
