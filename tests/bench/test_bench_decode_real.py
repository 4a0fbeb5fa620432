"""``python -m benchmarks.decode --real``'s check at the quick size: every row decodes the
same greedy tokens from the same weights (the PyTorch row where torch and transformers are
installed), and a row one position off is caught."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from benchmarks import decode_real
from benchmarks._decode_expert import Spec

QUICK = decode_real.PRESETS["quick"]


def _tokens(kind: str, spec: Spec | None = None) -> dict[str, np.ndarray]:
    vocab = QUICK.gpt2.vocab_size if kind == "gpt2" else QUICK.llama.vocab_size
    ids = np.random.default_rng(0).integers(0, vocab, (3, QUICK.prompt)).astype(np.int32)
    torch = "eager" if decode_real.torch_unavailable() is None else "off"
    with tempfile.TemporaryDirectory() as folder:
        rows, _, _ = decode_real.build_rows(kind, QUICK, folder, torch=torch, spec=spec)
        return {r.name: r.run(ids, QUICK.steps) for r in rows}


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_every_row_decodes_the_same_greedy_tokens(kind: str) -> None:
    out = _tokens(kind)
    generated = out["ax.nn.generate"]
    assert generated.shape == (3, QUICK.steps) and len(np.unique(generated)) > 3
    for name, tokens in out.items():
        assert np.array_equal(tokens, generated), name


def test_the_pytorch_row_runs_where_torch_is_installed() -> None:
    why = decode_real.torch_unavailable()
    if why is not None:
        pytest.skip(f"the pytorch row: {why}")
    assert "pytorch (eager)" in _tokens("gpt2")


def _llama_spec(**kw: Any) -> Spec:
    c = QUICK.llama
    return Spec("llama", c.num_hidden_layers, c.num_attention_heads, c.kv_heads, c.head_size,
                c.rms_norm_eps, c.rope_theta, **kw)  # fmt: skip


def test_the_expert_decodes_the_same_tokens_with_dot_product_attention() -> None:
    """The expert's other attention (``jax.nn.dot_product_attention``, the cache's valid
    length as ``key_value_seq_lengths``; its cuDNN kernel on a GPU) against the model."""
    out = _tokens("llama", _llama_spec(attention="xla"))
    assert np.array_equal(out["jax-expert (xla)"], out["ax.nn.generate"])


def test_a_row_one_position_off_gives_other_tokens() -> None:
    """The mutation the check must catch: the expert's queries rotated one position late."""
    out = _tokens("llama", _llama_spec(rope_offset=1))
    assert not np.array_equal(out["jax-expert"], out["ax.nn.generate"])


def test_the_step_reads_every_weight_and_the_average_cache() -> None:
    """Bytes per step: GPT-2's float32 weights plus keys and values of its layers at the
    average length, ``prompt + steps / 2``."""
    preset = replace(QUICK, batches=(2,))
    model = decode_real._model("gpt2", preset)
    c = preset.gpt2
    weights = 4 * (c.vocab_size * c.n_embd + c.n_positions * c.n_embd
                   + c.n_layer * (12 * c.n_embd**2 + 13 * c.n_embd) + 2 * c.n_embd)  # fmt: skip
    cache = 4 * 2 * c.n_layer * 2 * (preset.prompt + preset.steps / 2) * c.n_embd
    assert decode_real._step_bytes(model, "gpt2", preset, 2) == weights + cache
