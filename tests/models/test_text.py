"""From a model folder to text: ``generate_text`` (the tokenizer's ragged batch through
``ax.nn.generate`` and back), its text stream, ``python -m axjax.models generate`` and
examples/text/generate.py, each run end to end on the checked-in fixtures."""

from __future__ import annotations

import functools
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest

import axjax as ax
from axjax.models import generate_text, load_pretrained
from axjax.models._cli import family_of, main
from tests.conftest import requires
from tests.nn.helpers import Batch

requires("tokenizers", extra="text")

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "models" / "fixtures"
NAMES = ("gpt2", "llama-kv4", "llama-kv2", "llama-kv1")
PROMPTS = ["Once upon a time", "The cat sat", "Named axes"]


@functools.cache
def _load(name: str) -> tuple[Any, Any]:
    return load_pretrained(FIXTURES / name)


@pytest.mark.parametrize("name", ["gpt2"])  # the text path; each family: test_generation.py
def test_generate_text_is_generate_then_decode(name: str) -> None:
    """The batch's texts are the tokenizer's decode of ``ax.nn.generate`` on its encoding
    (with its EOS ids as the stop tokens); one string gives one string, the first row's."""
    model, tok = _load(name)
    got = generate_text(model, tok, PROMPTS, max_new_tokens=10)
    ids, lengths = tok.encode(PROMPTS, batch=Batch)
    tokens, new = ax.nn.generate(
        model, ids, 10, temperature=0, lengths=lengths, stop=tok.eos_ids, pad_id=tok.pad_id
    )
    assert got == tok.decode(tokens, new, skip_special_tokens=True)
    assert isinstance(got, list) and len(got) == 3
    one = generate_text(model, tok, PROMPTS[0], max_new_tokens=10)
    assert isinstance(one, str) and one == got[0]


def test_sampling_is_reproducible_and_streamed_pieces_join_to_the_text() -> None:
    model, tok = _load("llama-kv2")
    pieces: list[list[str]] = []
    run = functools.partial(
        generate_text, model, tok, PROMPTS, max_new_tokens=12, temperature=0.9, top_p=0.8
    )
    a = run(key=3, stream=pieces.append, stream_every=4)
    assert a == run(key=jax.random.key(3)) and a != run(key=4)
    assert len(pieces) >= 2  # several chunks while the program ran
    joined = ["".join(p[row] for p in pieces) for row in range(3)]
    assert joined == a


def test_a_stop_id_ends_the_text_at_that_token() -> None:
    """``stop=`` replaces the EOS ids: the text ends with the stop token's text."""
    model, tok = _load("gpt2")
    ids, lengths = tok.encode(PROMPTS[:1], batch=Batch)
    free = ax.nn.generate(model, ids, 8, temperature=0, lengths=lengths)
    stop = int(np.asarray(free.array)[0, 2])
    text = generate_text(model, tok, PROMPTS[0], max_new_tokens=8, stop=stop)
    first = int(np.flatnonzero(np.asarray(free.array)[0] == stop)[0])
    assert text == tok.decode(np.asarray(free.array)[0, : first + 1].tolist())


def test_the_command_line_generates_and_streams(capsys: pytest.CaptureFixture[str]) -> None:
    model, tok = _load("gpt2")
    want = generate_text(model, tok, PROMPTS[:2], max_new_tokens=6)
    assert main(["generate", str(FIXTURES / "gpt2"), "--max-new-tokens", "6",
                 "--prompt", PROMPTS[0], "--prompt", PROMPTS[1]]) == 0  # fmt: skip
    assert capsys.readouterr().out.splitlines() == [p + t for p, t in zip(PROMPTS, want)]
    assert main(["generate", str(FIXTURES / "gpt2"), "--max-new-tokens", "6",
                 "--prompt", PROMPTS[0]]) == 0  # fmt: skip
    assert capsys.readouterr().out == PROMPTS[0] + want[0] + "\n"  # streamed, then a newline


def test_the_command_line_runs_as_a_module_and_names_a_bad_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "axjax.models", "generate", str(FIXTURES / "llama-kv1"),
         "--prompt", "Hello", "--max-new-tokens", "4", "--no-stream"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("Hello")
    assert main(["generate", str(tmp_path), "--prompt", "x"]) == 2
    assert f"no config.json in {tmp_path}" in capsys.readouterr().err
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(
        ValueError, match=r"is a 'bert' checkpoint; the families are gpt2, llama, mistral, qwen2"
    ):
        family_of(tmp_path)


def test_the_text_example_runs_on_the_fixture(capsys: pytest.CaptureFixture[str]) -> None:
    example = runpy.run_path(str(ROOT / "examples" / "text" / "generate.py"))
    out = example["main"](["--folder", str(FIXTURES / "llama-kv4"), "--max-new-tokens", "8"])
    printed = capsys.readouterr().out
    assert "Tokenizer[llama.Pos]" in printed and "lengths [" in printed
    assert len(out["texts"]) == 3 and all(1 <= n <= 8 for n in out["lengths"])
    assert out["streamed"] == out["texts"][0]  # the one-line path: the batch's first row
    assert "".join(p[0] for p in out["pieces"]) == out["streamed"]
