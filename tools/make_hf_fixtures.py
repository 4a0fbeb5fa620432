"""Make the small Hugging Face checkpoints that tests/models/ reads (offline, from a config).

Each fixture is a folder ``tests/models/fixtures/<name>/`` with what ``save_pretrained``
writes (``config.json``, ``model.safetensors``) and ``reference.safetensors``: the logits of
fixed token ids, and of one cached decode step after a prefix of them. The models are
random (seeded) with their biases and norm parameters perturbed away from 0 and 1, so that
a wrong mapping shows in the logits. Needs torch and transformers (not axjax's
dependencies); the checked-in fixtures let the test suite run without them::

    /work/venv-hf/bin/python tools/make_hf_fixtures.py            # every fixture
    /work/venv-hf/bin/python tools/make_hf_fixtures.py gpt2       # one

A new architecture adds a builder to ``BUILDERS``: a function of the seed that returns an
``(eval-mode) transformers`` model; :func:`make` does the rest.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "models" / "fixtures"
#: token ids of the reference logits: [batch, positions]
BATCH, LENGTH = 2, 12
#: the decode step's reference: the first PREFIX positions are the cached prompt, the
#: next one is the step
PREFIX = 8
SEED = 0


def gpt2(seed: int) -> Any:
    """GPT-2: 2 layers, width 48, 4 heads, vocabulary 256, context 64."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(
        n_layer=2,
        n_embd=48,
        n_head=4,
        vocab_size=256,
        n_positions=64,
        # weights 5x GPT-2's initial scale: attention far from uniform, so that a
        # mapping that swaps queries and keys shows in the logits
        initializer_range=0.1,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="eager",
    )
    return GPT2LMHeadModel(config)


def llama(kv_heads: int, tied: bool, theta: float) -> Callable[[int], Any]:
    """Llama: 2 layers, hidden 48, 4 heads of which ``kv_heads`` key-value heads,
    intermediate 96, vocabulary 256, context 64; ``tie_word_embeddings=tied`` and
    ``rope_theta=theta`` (the variants cover both ties and a theta other than the default)."""

    def build(seed: int) -> Any:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(seed)
        config = LlamaConfig(
            vocab_size=256,
            hidden_size=48,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=kv_heads,
            max_position_embeddings=64,
            rms_norm_eps=1e-5,
            rope_theta=theta,
            tie_word_embeddings=tied,
            initializer_range=0.2,  # logits of order 1, so that a wrong mapping shows
            attn_implementation="eager",
        )
        return LlamaForCausalLM(config)

    return build


#: name -> builder (a function of the seed returning a transformers model)
BUILDERS: dict[str, Callable[[int], Any]] = {
    "gpt2": gpt2,
    "llama-kv4": llama(4, tied=False, theta=10000.0),
    "llama-kv2": llama(2, tied=False, theta=500000.0),
    "llama-kv1": llama(1, tied=True, theta=10000.0),
}


def perturb(model: Any, seed: int) -> None:
    """Move every 1-D parameter (biases, norm weights and biases) off its initial value
    (0 or 1) by a seeded normal perturbation, so that a mapping that swaps or drops one
    changes the logits."""
    import torch

    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            if p.ndim == 1:
                p.add_(0.2 * torch.randn(p.shape, generator=g))


def reference(model: Any, seed: int) -> dict[str, np.ndarray]:
    """Logits of fixed ids, and of one cached decode step after the first ``PREFIX``."""
    import torch

    g = np.random.default_rng(seed)
    vocab = model.config.vocab_size
    ids = g.integers(0, vocab, (BATCH, LENGTH)).astype(np.int32)
    t = torch.from_numpy(ids.astype(np.int64))
    with torch.no_grad():
        logits = model(t).logits.float().numpy()
        prompt = model(t[:, :PREFIX], use_cache=True)
        step = model(t[:, PREFIX : PREFIX + 1], past_key_values=prompt.past_key_values)
    return {
        "ids": ids,
        "logits": logits.astype(np.float32),
        "step_logits": step.logits.float().numpy().astype(np.float32),
    }


def make(name: str, out: Path = FIXTURES, seed: int = SEED) -> Path:
    """Build fixture ``name`` into ``out/name`` and return the folder."""
    from safetensors.numpy import save_file

    model = BUILDERS[name](seed).eval()
    perturb(model, seed)
    folder = out / name
    model.save_pretrained(folder)
    refs = reference(model, seed)
    save_file(refs, str(folder / "reference.safetensors"), metadata={"prefix": str(PREFIX)})
    config = json.loads((folder / "config.json").read_text())
    config.pop("transformers_version", None)  # the same bytes from any version
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return folder


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("names", nargs="*", help=f"of {', '.join(BUILDERS)} (default: all)")
    p.add_argument("--out", type=Path, default=FIXTURES)
    args = p.parse_args(argv)
    unknown = [n for n in args.names if n not in BUILDERS]
    if unknown:
        p.error(f"no fixture {unknown[0]!r}; the fixtures are {', '.join(BUILDERS)}")
    for name in args.names or list(BUILDERS):
        folder = make(name, args.out)
        sizes = ", ".join(
            f"{f.name} {f.stat().st_size // 1024} KB" for f in sorted(folder.iterdir())
        )
        print(f"{folder}: {sizes}")


if __name__ == "__main__":
    main(sys.argv[1:])
