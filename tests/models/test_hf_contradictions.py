"""A configuration that contradicts the checkpoint is an error in every family (issue 43,
class 4): a key the configuration makes unused (a tied ``lm_head.weight``) is accepted only
as a copy of the entry it stands for, never dropped when it differs.

Generated over every family's checkpoint tables (``Table.copies``, axjax/models/_hf.py):
each such key is written differing from its entry and must be named; written as the copy,
the file loads. :func:`test_the_copy_check_mutation` switches the check off: the
contradicting file loads with other logits, silently.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("safetensors")
from safetensors.numpy import load_file, save_file  # noqa: E402

from axjax.models import _hf, gpt2, llama, mistral, qwen2  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"

#: every family: its fixture, its loader, and its tables as a config makes them
FAMILIES: dict[str, tuple[str, Callable[..., Any], dict[str, Any], _hf.Table]] = {
    "gpt2": ("gpt2", gpt2.from_hf, {}, gpt2.TABLE),
    "llama-tied": (
        "llama-kv2",
        llama.from_hf,
        {"tie_word_embeddings": True},
        llama.table(llama.LlamaConfig(tie_word_embeddings=True)),
    ),
    "mistral-tied": (
        "mistral-sw4",
        mistral.from_hf,
        {"tie_word_embeddings": True},
        mistral.table(mistral.MistralConfig(tie_word_embeddings=True)),
    ),
    "qwen2-tied": (
        "qwen2-tied",
        qwen2.from_hf,
        {},
        qwen2.table(qwen2.Qwen2Config(tie_word_embeddings=True)),
    ),
}
ROWS = [
    (family, key, of)
    for family, (_, _, _, table) in FAMILIES.items()
    for key, of, _ in table.copies
]


def test_every_family_is_covered() -> None:
    """Each family's tables: a key the configuration can make unused is a copy entry, not
    an ``ignore`` pattern (an ignored weight would be dropped silently)."""
    configs = (llama.LlamaConfig, mistral.MistralConfig, qwen2.Qwen2Config)
    tables = [gpt2.TABLE, *(llama.table(c(tie_word_embeddings=t)) for c in configs for t in (0, 1))]
    for table in tables:
        assert not [g for g in table.ignore if g.endswith(".weight")], table.ignore
    assert {r[0] for r in ROWS} == set(FAMILIES)


def _copy(tmp_path: Path, family: str) -> Path:
    fixture, _, change, _ = FAMILIES[family]
    folder = tmp_path / family
    shutil.copytree(FIXTURES / fixture, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    return folder


def _write(folder: Path, key: str, of: str, delta: float) -> None:
    weights = load_file(folder / "model.safetensors")
    source = of if of in weights else of.removeprefix("transformer.")
    weights[key] = weights[source] + delta
    save_file(weights, folder / "model.safetensors")


@pytest.mark.parametrize(("family", "key", "of"), ROWS)
def test_a_key_the_config_leaves_unused_must_be_a_copy(
    tmp_path: Path, family: str, key: str, of: str
) -> None:
    folder = _copy(tmp_path, family)
    load = FAMILIES[family][1]
    _write(folder, key, of, 1.0)
    with pytest.raises(_hf.ConversionError, match=rf"holds '{key}', which the configuration"):
        load(folder)
    _write(folder, key, of, 0.0)  # the copy a tied checkpoint may store
    load(folder)


def test_the_copy_check_mutation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_hf, "_check_copies", lambda *a: None)
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        test_a_key_the_config_leaves_unused_must_be_a_copy(tmp_path, *ROWS[-1])


@pytest.mark.parametrize("load", [gpt2.from_hf, llama.from_hf, mistral.from_hf, qwen2.from_hf])
def test_a_folder_that_does_not_exist_is_named(tmp_path: Path, load: Callable[..., Any]) -> None:
    with pytest.raises(FileNotFoundError, match=r"the folder .*nowhere does not exist"):
        load(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no config\.json in"):
        load(tmp_path / "empty")
