"""From prompts to text: :func:`generate_text` tokenizes a batch of prompts of any lengths,
decodes them in one program (``ax.nn.generate``: ragged prompts, stop tokens, sampling),
and turns the new tokens back into text, streamed as they come where asked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, final, overload

import jax
import numpy as np

from ..core import AnyTensor, Axis
from ..core._internal import Checks, public_call
from ..nn import Decoder, generate
from ._tokenizer import Tokenizer

__all__ = ["generate_text"]

#: what a text stream receives: each prompt's new text since the last call ("" for a row
#: with nothing new)
TextCallback = Callable[[list[str]], object]


@final
class Prompt(Axis):
    """The batch axis of :func:`generate_text`'s prompts."""


class _TextStream:
    """Token chunks to text pieces: each row's tokens so far, decoded whole at each chunk
    (a byte-level token may end inside a character: the piece waits for the rest)."""

    def __init__(
        self, tokenizer: Tokenizer[Any], rows: int, stop: tuple[int, ...], send: TextCallback
    ) -> None:
        self.tokenizer, self.stop, self.send = tokenizer, set(stop), send
        self.tokens: list[list[int]] = [[] for _ in range(rows)]
        self.done = [False] * rows
        self.shown = [""] * rows

    def __call__(self, chunk: np.ndarray, start: int) -> None:
        pieces = []
        for row, new in enumerate(chunk.tolist()):
            for t in new:
                if not self.done[row]:
                    self.tokens[row].append(t)
                    self.done[row] = t in self.stop
            text = self.tokenizer.decode(self.tokens[row], skip_special_tokens=True)
            text = text.rstrip("\ufffd")  # an unfinished character: wait for its bytes
            piece = text[len(self.shown[row]) :] if text.startswith(self.shown[row]) else ""
            self.shown[row] += piece
            pieces.append(piece)
        if any(pieces):
            self.send(pieces)

    def finish(self, texts: list[str]) -> None:
        """The rest of each row's text (what was held back): the pieces join to ``texts``."""
        rest = [
            t[len(shown) :] if t.startswith(shown) else ""
            for t, shown in zip(texts, self.shown, strict=True)
        ]
        self.shown = [shown + r for shown, r in zip(self.shown, rest, strict=True)]
        if any(rest):
            self.send(rest)


#: generate's arguments as generate_text's user gave them: an error of generate's names them
CHECKS = Checks(
    passes={"prompt": "prompts", "steps": "max_new_tokens", "stop": "stop"},
    expects={
        "prompts": "a string or a list of them, each of at least one token",
        "max_new_tokens": "a positive int, the prompt's tokens + max_new_tokens - 1 within "
        "the model's context",
    },
)


@overload
def generate_text(
    model: Decoder[Any],
    tokenizer: Tokenizer[Any],
    prompts: str,
    *,
    max_new_tokens: int = 32,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    key: jax.Array | int = 0,
    stop: int | Sequence[int] | None = None,
    stream: TextCallback | None = None,
    stream_every: int = 4,
) -> str: ...
@overload
def generate_text(
    model: Decoder[Any],
    tokenizer: Tokenizer[Any],
    prompts: list[str] | tuple[str, ...],
    *,
    max_new_tokens: int = 32,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    key: jax.Array | int = 0,
    stop: int | Sequence[int] | None = None,
    stream: TextCallback | None = None,
    stream_every: int = 4,
) -> list[str]: ...
@public_call(checks=CHECKS)
def generate_text(
    model: Decoder[Any],
    tokenizer: Tokenizer[Any],
    prompts: str | Sequence[str],
    *,
    max_new_tokens: int = 32,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    key: jax.Array | int = 0,
    stop: int | Sequence[int] | None = None,
    stream: TextCallback | None = None,
    stream_every: int = 4,
) -> str | list[str]:
    """The continuation of each prompt, as text: one string for a string, a list for a list.

    The prompts are encoded by ``tokenizer`` (of the model's family: ``gpt2.tokenizer``,
    ``llama.tokenizer``) into one ragged batch, decoded by :func:`axjax.nn.generate` in one
    program (each prompt as it would be alone), and each row's new tokens decoded back
    without special tokens. A row stops at a ``stop`` id (default: the tokenizer's EOS ids)
    or after ``max_new_tokens``. ``temperature=0`` (the default) is greedy; otherwise the
    tokens are drawn with ``key`` (a ``jax.random.key`` or an int seed), after ``top_k`` and
    ``top_p`` where given. ``stream(pieces)`` receives each prompt's new text as it is
    produced (every ``stream_every`` tokens).

    Example:
        >>> model, tok = gpt2.from_hf(folder), gpt2.tokenizer(folder)
        >>> generate_text(model, tok, ["Hello", "Once upon"], max_new_tokens=32, top_p=0.9,
        ...               temperature=0.8)
        [', said the', ' a time there was']
    """
    if not isinstance(tokenizer, Tokenizer):
        raise TypeError(f"generate_text: tokenizer is an axjax Tokenizer, got {tokenizer!r}")
    ids, lengths = tokenizer.encode(prompts, batch=Prompt)
    if stop is None:
        stops = tuple(tokenizer.eos_ids)
    else:
        stops = (stop,) if isinstance(stop, int) else tuple(stop)
    if isinstance(key, bool) or not isinstance(key, int | jax.Array):
        raise TypeError(f"generate_text: key is a jax.random.key or an int seed, got {key!r}")
    rng = jax.random.key(key) if isinstance(key, int) else key
    rows, pad = int(ids.size(Prompt)), tokenizer.pad_id
    on_tokens = None if stream is None else _TextStream(tokenizer, rows, stops, stream)
    options: dict[str, Any] = dict(
        temperature=temperature, top_k=top_k, top_p=top_p, lengths=lengths,
        stream=on_tokens, stream_every=stream_every,
    )  # fmt: skip
    new: AnyTensor | None = None
    if stops:
        result = generate(model, ids, max_new_tokens, rng, stop=stops, pad_id=pad, **options)
        tokens, new = result.tokens, result.lengths
    else:  # no stop id: every row runs max_new_tokens
        tokens = generate(model, ids, max_new_tokens, rng, **options)
    out = tokenizer.decode(tokens, new, skip_special_tokens=True)
    if on_tokens is not None:
        on_tokens.finish(out)
    return out[0] if isinstance(prompts, str) else out
