"""Tokenizers from a Hugging Face folder (``axjax.models.load_tokenizer``, ``gpt2.tokenizer``,
``llama.tokenizer``), against the checked-in fixtures.

Each fixture's ``tokenizer_reference.json`` (tools/make_hf_fixtures.py) holds texts with the
ids ``transformers.AutoTokenizer.from_pretrained(folder)`` gives and its two decodes; the
tokenizers are byte-level BPEs trained on a small corpus (vocabulary 384: the bytes, merges
and special tokens). The suite needs neither torch nor transformers, only the ``tokenizers``
package (the ``text`` extra).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, final

import numpy as np
import pytest
from safetensors import safe_open

import axjax as ax
from axjax.core import _optional
from axjax.models import ConversionError, Tokenizer, gpt2, llama, load_tokenizer
from axjax.models._cli import family_of
from tests.conftest import requires

FIXTURES = Path(__file__).resolve().parent / "fixtures"
NAMES = ("gpt2", "llama-kv4", "llama-kv2", "llama-kv1", "mistral-sw4", "qwen2-tied")


@final
class Batch(ax.Axis): ...


@pytest.fixture(autouse=True)
def _tokenizers_package(request: pytest.FixtureRequest) -> None:
    if "without_the_package" not in request.node.name:
        requires("tokenizers", extra="text")


def _reference(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name / "tokenizer_reference.json").read_text())
    return data


def _load(name: str) -> Tokenizer[Any]:
    tok: Tokenizer[Any] = family_of(FIXTURES / name).tokenizer(FIXTURES / name)
    return tok


def _rows(tok: Tokenizer[Any], texts: list[str], **kw: Any) -> list[list[int]]:
    ids, lengths = tok.encode(texts, batch=Batch, **kw)
    return [list(r[:n]) for r, n in zip(np.asarray(ids.array).tolist(), lengths.array.tolist())]


# ----------------------------------------------------------------------------- transformers
@pytest.mark.parametrize("name", NAMES)
def test_ids_and_decodes_are_transformers(name: str) -> None:
    tok, ref = _load(name), _reference(name)
    texts = [r["text"] for r in ref["texts"]]
    assert len(texts) >= 5 and any(i >= 256 for r in ref["texts"] for i in r["ids"])
    assert _rows(tok, texts) == [r["ids"] for r in ref["texts"]]  # as one ragged batch
    for r in ref["texts"]:
        ids, lengths = tok.encode(r["text"], batch=Batch)  # one text: a batch of one
        assert np.asarray(ids.array).tolist() == [r["ids"]] and lengths.array.tolist() == [
            len(r["ids"])
        ]
        assert tok.decode(r["ids"]) == r["decode"], r["text"]
        assert tok.decode(r["ids"], skip_special_tokens=True) == r["decode_skip_special"]
        assert tok.decode(ids, lengths) == [r["decode"]]


@pytest.mark.parametrize("name", NAMES)
def test_decode_of_encode_is_the_text(name: str) -> None:
    """Exact for every text, non-ASCII and special token strings included; Llama's encode
    adds the BOS, which decode shows unless told to skip the special tokens (GPT-2's and
    Qwen2's add none)."""
    tok, texts = _load(name), [r["text"] for r in _reference(name)["texts"]]
    ids, lengths = tok.encode(texts, batch=Batch, add_special_tokens=False)
    assert tok.decode(ids, lengths) == texts
    ids, lengths = tok.encode(texts, batch=Batch)
    bos = "" if name in ("gpt2", "qwen2-tied") else "<|begin_of_text|>"  # Qwen2: no BOS
    assert tok.decode(ids, lengths) == [bos + t for t in texts]
    plain = [t for t in texts if "<|" not in t]
    ids, lengths = tok.encode(plain, batch=Batch)
    assert tok.decode(ids, lengths, skip_special_tokens=True) == plain


def test_gpt2_from_vocab_json_and_merges_txt(tmp_path: Path) -> None:
    """Without tokenizer.json, GPT-2's vocab.json + merges.txt give transformers' ids; the
    hub's GPT-2 names <|endoftext|> by its id only (generation_config.json), and it is
    still one token."""
    folder = tmp_path / "gpt2"
    shutil.copytree(FIXTURES / "gpt2", folder)
    (folder / "tokenizer.json").unlink()
    ref = _reference("gpt2")
    texts = [r["text"] for r in ref["texts"]]
    tok = gpt2.tokenizer(folder)
    assert "vocab.json + merges.txt" in repr(tok)
    assert _rows(tok, texts) == [r["ids"] for r in ref["texts"]]
    assert [tok.decode(r["ids"]) for r in ref["texts"]] == [r["decode"] for r in ref["texts"]]
    (folder / "tokenizer_config.json").write_text('{"model_max_length": 1024}')
    tok = gpt2.tokenizer(folder)
    assert _rows(tok, texts) == [r["ids"] for r in ref["texts"]]
    assert (tok.bos_id, tok.eos_ids, tok.pad_id) == (383, (383,), 383)


# ----------------------------------------------------------------------------- encode
def test_a_ragged_batch_is_right_padded_with_the_pad_id() -> None:
    tok = gpt2.tokenizer(FIXTURES / "gpt2")
    ids, lengths = tok.encode(["zebras jump", "and", ""], batch=Batch)
    assert ids.axes == (Batch, gpt2.Pos) and lengths.axes == (Batch,)
    assert ids.dtype is ax.I32 and lengths.dtype is ax.I32
    assert lengths.array.tolist() == [6, 2, 0] and ids.shape == (3, 6)
    rows = np.asarray(ids.array)
    assert (rows[1, 2:] == tok.pad_id).all() and (rows[2] == tok.pad_id).all()
    assert tok.decode(ids, lengths) == ["zebras jump", "and", ""]
    assert tok.decode(ids)[1] == "and" + "<|endoftext|>" * 4  # without lengths: the padding
    assert tok.decode(ids, skip_special_tokens=True) == ["zebras jump", "and", ""]
    lids, llengths = llama.tokenizer(FIXTURES / "llama-kv2").encode(["and", "x"], batch=Batch)
    assert lids.axes == (Batch, llama.Pos) and llengths.array.tolist() == [3, 2]
    assert np.asarray(lids.array).tolist() == [[381, 64, 265], [381, 87, 383]]  # <|pad|>


def test_decode_takes_a_row_a_list_or_generated_tokens() -> None:
    tok = gpt2.tokenizer(FIXTURES / "gpt2")
    ids, lengths = tok.encode("zebras jump", batch=Batch)
    row = ax.tensor(np.asarray(ids.array)[0], gpt2.Pos, dtype=ax.I32)
    assert tok.decode(row) == "zebras jump"
    assert tok.decode([89, 68, 65, 81, 309, 330]) == "zebras jump"
    assert tok.decode(np.array([64, 265]).tolist()) == "and"
    assert tok.decode(ids, ax.tensor([2], Batch, dtype=ax.I32)) == ["ze"]


def test_the_ragged_generation_reference_fits_the_tokenizer() -> None:
    """reference.safetensors' gen_* arrays (transformers' greedy generation from three
    left-padded prompts): the prompts are the tokenizer's ids of the first three texts, the
    tokens are padded after each row's first EOS, one row stops early and one never."""
    for name in NAMES:
        with safe_open(str(FIXTURES / name / "reference.safetensors"), framework="numpy") as f:
            meta = f.metadata() or {}
            gen = {k: f.get_tensor(k) for k in f.keys() if k.startswith("gen_")}
        eos, pad = int(meta["gen_eos"]), int(meta["gen_pad"])
        tok, texts = _load(name), [r["text"] for r in _reference(name)["texts"]]
        assert pad == tok.pad_id and eos != pad
        assert {k: (v.dtype, v.shape[0]) for k, v in gen.items()} == dict.fromkeys(
            ("gen_lengths", "gen_mask", "gen_prompt", "gen_tokens"), (np.int32, 3)
        )
        prompts = _rows(tok, texts[:3])
        assert len({len(p) for p in prompts}) == 3
        for i, p in enumerate(prompts):
            n = len(p)
            assert gen["gen_prompt"][i, -n:].tolist() == p and gen["gen_mask"][i].sum() == n
            assert (gen["gen_prompt"][i, :-n] == pad).all() and (gen["gen_mask"][i, -n:] == 1).all()
        lengths, tokens = gen["gen_lengths"].tolist(), gen["gen_tokens"]
        assert tokens.shape == (3, 12) and min(lengths) < 12 and max(lengths) == 12
        for row, n in zip(tokens, lengths):
            assert eos not in row[: n - 1] and (row[n:] == pad).all()
            assert n == 12 or row[n - 1] == eos


# ----------------------------------------------------------------------------- special tokens
@pytest.mark.parametrize("name", NAMES)
def test_the_special_tokens_are_read_from_the_files(name: str) -> None:
    tok, ref = _load(name), _reference(name)
    config = json.loads((FIXTURES / name / "config.json").read_text())
    assert tok.vocab_size == ref["vocab_size"] == config["vocab_size"] == 384
    assert tok.bos_id == ref["bos_token_id"] == config["bos_token_id"]
    assert tok.eos_ids == (ref["eos_token_id"],) == (config["eos_token_id"],)
    # GPT-2 has no pad token: the first EOS pads (transformers says None); Qwen2 no BOS,
    # <|endoftext|> its EOS and pad
    assert tok.pad_id == (ref["pad_token_id"] if name != "gpt2" else ref["eos_token_id"])
    pads = {"gpt2": None, "qwen2-tied": 381}
    assert ref["pad_token_id"] == pads.get(name, 383)
    assert (ref["bos_token_id"] is None) == (name == "qwen2-tied")


def _llama_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "llama"
    shutil.copytree(FIXTURES / "llama-kv2", folder)
    return folder


def _write(path: Path, **values: Any) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **values}))


def test_special_ids_from_each_file_in_order(tmp_path: Path) -> None:
    folder = _llama_copy(tmp_path)
    _write(folder / "generation_config.json", eos_token_id=[382, 13], pad_token_id=0)
    tok = llama.tokenizer(folder)
    assert (tok.bos_id, tok.eos_ids, tok.pad_id) == (381, (382, 13), 0)
    (folder / "generation_config.json").unlink()  # then tokenizer_config.json's tokens
    _write(folder / "tokenizer_config.json", eos_token={"content": "<|end_of_text|>"})
    tok = llama.tokenizer(folder)
    assert (tok.bos_id, tok.eos_ids, tok.pad_id) == (381, (382,), 383)
    _write(folder / "tokenizer_config.json", pad_token=None, bos_token=None, eos_token=None)
    tok = llama.tokenizer(folder)  # then config.json's ids; no pad: the first EOS
    assert (tok.bos_id, tok.eos_ids, tok.pad_id) == (381, (382,), 382)
    assert "pad_id=382 '<|end_of_text|>' (the first EOS)" in repr(tok)
    (folder / "config.json").unlink()
    tok = llama.tokenizer(folder)
    assert (tok.bos_id, tok.eos_ids, tok.pad_id) == (None, (), None)
    with pytest.raises(ValueError, match=r"different lengths and the tokenizer has no pad"):
        tok.encode(["a", "longer text"], batch=Batch)
    assert tok.encode(["ab", "cd"], batch=Batch)[0].shape == (2, 3)  # the BOS, one merge each


def test_repr_names_the_family_the_files_and_the_special_tokens() -> None:
    assert repr(gpt2.tokenizer(FIXTURES / "gpt2")) == (
        f"Tokenizer[gpt2.Pos]({FIXTURES / 'gpt2'}: tokenizer.json, vocab_size=384, "
        "bos_id=383 '<|endoftext|>', eos_ids=(383 '<|endoftext|>'), "
        "pad_id=383 '<|endoftext|>' (the first EOS))"
    )
    tok = load_tokenizer(str(FIXTURES / "llama-kv1"), pos=Batch)
    assert repr(tok).startswith("Tokenizer[Batch](") and tok.pos is Batch
    assert "pad_id=383 '<|pad|>'" in repr(tok)


# ----------------------------------------------------------------------------- errors
def test_a_folder_with_only_a_sentencepiece_model_is_refused(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.model").write_bytes(b"\x0a\x05hello")
    with pytest.raises(
        FileNotFoundError,
        match=rf"{tmp_path} has only a SentencePiece tokenizer.model, which is not read; "
        r"supported: tokenizer.json, or vocab.json \+ merges.txt",
    ):
        llama.tokenizer(tmp_path)


def test_a_folder_without_a_tokenizer_names_the_files_looked_for(tmp_path: Path) -> None:
    with pytest.raises(
        FileNotFoundError,
        match=rf"no tokenizer in {tmp_path}: looked for tokenizer.json, or vocab.json \+ "
        r"merges.txt",
    ):
        gpt2.tokenizer(tmp_path)
    shutil.copy(FIXTURES / "gpt2" / "vocab.json", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"\(only vocab.json\): looked for"):
        gpt2.tokenizer(tmp_path)


@pytest.mark.parametrize("text", ["{not json", '{"model": {"type": "BPE", "vocab": 3}}'])
def test_a_corrupt_tokenizer_json_is_named(tmp_path: Path, text: str) -> None:
    (tmp_path / "tokenizer.json").write_text(text)
    with pytest.raises(
        ConversionError,
        match=rf"{tmp_path / 'tokenizer.json'} is not a tokenizer the tokenizers package reads",
    ):
        gpt2.tokenizer(tmp_path)


def test_damaged_config_files_are_named(tmp_path: Path) -> None:
    folder = _llama_copy(tmp_path)
    (folder / "tokenizer_config.json").write_text("[1, 2")
    with pytest.raises(ConversionError, match=r"tokenizer_config.json is not JSON"):
        llama.tokenizer(folder)
    folder = _llama_copy(tmp_path / "b")
    _write(folder / "tokenizer_config.json", pad_token="<pad>")
    with pytest.raises(
        ConversionError, match=r"names the token '<pad>', which is not in the vocabulary"
    ):
        llama.tokenizer(folder)
    folder = _llama_copy(tmp_path / "c")
    _write(folder / "generation_config.json", eos_token_id=[382, 999])
    with pytest.raises(ConversionError, match=r"eos_token_id 999 is not an id of the tokenizer"):
        llama.tokenizer(folder)
    _write(folder / "generation_config.json", eos_token_id="<|end_of_text|>")
    with pytest.raises(ConversionError, match=r"expected an id or a list of ids"):
        llama.tokenizer(folder)


def test_encode_errors() -> None:
    tok = gpt2.tokenizer(FIXTURES / "gpt2")
    with pytest.raises(ValueError, match=r"Tokenizer.encode: no texts \(an empty list\)"):
        tok.encode([], batch=Batch)
    with pytest.raises(TypeError, match=r"texts\[1\] is a bytes"):
        tok.encode(["a", b"b"], batch=Batch)  # type: ignore[list-item]
    with pytest.raises(ax.AxisError, match=r"batch is gpt2.Pos, the position axis"):
        tok.encode("a", batch=gpt2.Pos)
    with pytest.raises(TypeError, match=r"'Batch' is not an axis label but a string"):
        tok.encode("a", batch="Batch")  # type: ignore[type-var]


def test_decode_errors() -> None:
    tok = gpt2.tokenizer(FIXTURES / "gpt2")
    ids, lengths = tok.encode(["and", "zebras jump"], batch=Batch)  # 2 and 6 ids
    other = ax.tensor(np.asarray(ids.array), Batch, llama.Pos, dtype=ax.I32)
    with pytest.raises(ax.AxisError, match=r"ids are a Tensor\[I32, gpt2.Pos\] or .* got "):
        tok.decode(other)  # type: ignore[arg-type]
    with pytest.raises(ax.AxisError, match=r"lengths are a Tensor\[I32, Batch\]"):
        tok.decode(ids, ax.tensor(lengths.array, gpt2.Pos, dtype=ax.I32))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"lengths are integers from 0 to the rows' 6 .* \[1, 7\]"):
        tok.decode(ids, ax.tensor([1, 7], Batch, dtype=ax.I32))
    with pytest.raises(ValueError, match=r"id 384 is not in the vocabulary \(0 to 383\)"):
        tok.decode([1, 384])


def test_without_the_package_loading_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> Any:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    monkeypatch.setattr(_optional.importlib, "import_module", missing)
    with pytest.raises(
        ImportError,
        match=r"axjax.models.load_tokenizer \(gpt2.tokenizer, llama.tokenizer\) needs "
        r'tokenizers, which is not installed: pip install "axjax\[text\]"',
    ):
        gpt2.tokenizer(FIXTURES / "gpt2")
