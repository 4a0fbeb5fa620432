"""``python -m axjax.models``: the command line of the pretrained models.

``generate FOLDER --prompt TEXT [--prompt TEXT ...]`` loads a Hugging Face folder (its
``config.json`` says the family), its tokenizer, and prints each prompt's continuation;
one prompt is streamed as it is produced.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import jax

from ..nn import Decoder
from ._tokenizer import Tokenizer

__all__ = ["FAMILIES", "family_of", "load_pretrained", "main"]

#: config.json's model_type -> the family's module
FAMILIES = ("gpt2", "llama", "mistral", "qwen2")


def family_of(folder: str | Path) -> ModuleType:
    """The family module (``axjax.models.gpt2``, ...) of a Hugging Face folder, by its
    ``config.json``'s ``model_type``."""
    from . import gpt2, llama, mistral, qwen2

    path = Path(folder) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"axjax.models: no config.json in {folder}")
    try:
        kind = json.loads(path.read_text()).get("model_type")
    except (ValueError, AttributeError) as e:
        raise ValueError(f"axjax.models: {path} is not a JSON object ({e})") from None
    families: dict[str, ModuleType] = {
        "gpt2": gpt2,
        "llama": llama,
        "mistral": mistral,
        "qwen2": qwen2,
    }
    if kind not in families:
        raise ValueError(
            f"axjax.models: {path} is a {kind!r} checkpoint; the families are {', '.join(FAMILIES)}"
        )
    return families[kind]


def load_pretrained(
    folder: str | Path, *, unroll: bool = True
) -> tuple[Decoder[Any], Tokenizer[Any]]:
    """The model and the tokenizer of a Hugging Face folder, of the family its
    ``config.json`` names (GPT-2, Llama, Mistral or Qwen2; ``unroll`` as for their
    ``from_hf``).

    Example:
        >>> model, tokenizer = load_pretrained("tests/models/fixtures/gpt2")
    """
    family = family_of(folder)
    return family.from_hf(folder, unroll=unroll), family.tokenizer(folder)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m axjax.models", description=(__doc__ or "").split("\n")[0]
    )
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="continue prompts with a model folder")
    g.add_argument(
        "folder", type=Path, help="a Hugging Face folder (config.json, weights, tokenizer)"
    )
    g.add_argument("--prompt", action="append", required=True, help="a prompt (repeat for a batch)")
    g.add_argument("--max-new-tokens", type=int, default=32)
    g.add_argument("--temperature", type=float, default=0.0, help="0: greedy (the default)")
    g.add_argument("--top-k", type=int, default=None)
    g.add_argument("--top-p", type=float, default=None)
    g.add_argument("--seed", type=int, default=0, help="the sampling key's seed")
    g.add_argument("--stacked", action="store_true", help="the blocks as one LayerStack (scan)")
    g.add_argument("--no-stream", action="store_true", help="print once the text is complete")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    from ._text import generate_text

    try:
        model, tokenizer = load_pretrained(args.folder, unroll=not args.stacked)
    except (FileNotFoundError, ValueError, ImportError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    prompts: list[str] = args.prompt
    stream = len(prompts) == 1 and not args.no_stream
    if stream:
        print(prompts[0], end="", flush=True)

    def show(pieces: list[str]) -> None:
        print(pieces[0], end="", flush=True)

    texts = generate_text(
        model,
        tokenizer,
        prompts,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        key=jax.random.key(args.seed),
        stream=show if stream else None,
    )
    if stream:
        print(flush=True)
    else:
        for prompt, text in zip(prompts, texts, strict=True):
            print(f"{prompt}{text}")
    return 0
