"""Text from a Hugging Face model folder: its tokenizer, a ragged batch of prompts, stop
tokens, sampling and streaming, in a few lines.

    python examples/text/generate.py                          # the GPT-2 test fixture
    python examples/text/generate.py --folder path/to/gpt2 --prompt "The meaning of life is"
    python examples/text/generate.py --temperature 0.8 --top-p 0.9 --seed 1

The folder holds what ``save_pretrained`` writes: ``config.json``, ``model.safetensors``
and the tokenizer (``tokenizer.json``, or GPT-2's ``vocab.json`` + ``merges.txt``). The
default is the small random GPT-2 the tests use, so its text is gibberish; a real
checkpoint (``gpt2``, ``Llama-3.2-1B``) reads as you would expect.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import final

import jax

import axjax as ax
from axjax.models import generate_text, load_pretrained

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_FOLDER = ROOT / "tests" / "models" / "fixtures" / "gpt2"
PROMPTS = ["Once upon a time", "The cat", "Named axes make tensor programs"]


@final
class Batch(ax.Axis):
    """The prompts of a batch."""


def main(argv: list[str] | None = None) -> dict[str, object]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--folder", type=Path, default=DEFAULT_FOLDER)
    p.add_argument("--prompt", action="append", help="a prompt (repeat; default: three)")
    p.add_argument("--max-new-tokens", type=int, default=24)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    prompts = args.prompt or PROMPTS

    model, tokenizer = load_pretrained(args.folder)
    print(tokenizer)

    # 1. token ids: a ragged batch, right-padded, with each row's length
    ids, lengths = tokenizer.encode(prompts, batch=Batch)
    print(f"ids {ids.axes}: lengths {lengths.array.tolist()}")

    # 2. generation with stop tokens: each row stops at an EOS id, padded after it
    start = time.perf_counter()
    tokens, new = ax.nn.generate(
        model,
        ids,
        args.max_new_tokens,
        jax.random.key(args.seed),
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        lengths=lengths,
        stop=tokenizer.eos_ids,
        pad_id=tokenizer.pad_id,
    )
    seconds = time.perf_counter() - start
    texts = tokenizer.decode(tokens, new, skip_special_tokens=True)
    for prompt, text, n in zip(prompts, texts, new.array.tolist(), strict=True):
        print(f"{prompt!r} -> {text!r} ({n} tokens)")
    print(f"{int(new.array.sum())} tokens in {seconds:.2f} s (compilation included)")

    # 3. the one-line path, streamed: each prompt's new text as it comes
    pieces: list[list[str]] = []
    streamed = generate_text(
        model,
        tokenizer,
        prompts[0],
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        key=args.seed,
        stream=pieces.append,
    )
    print(f"streamed in {len(pieces)} pieces: {streamed!r}")
    return {"texts": texts, "lengths": new.array.tolist(), "streamed": streamed, "pieces": pieces}


if __name__ == "__main__":
    main()
