"""Generation's types: ``ax.nn.generate`` gives the prompt's axes back, or with ``stop=`` a
``Generation`` of the tokens and each row's lengths; a model's cache is a tuple of
``KVCache`` (unrolled) or one stacked ``KVCache``; ``generate_text`` gives a ``str`` for a
string and a ``list[str]`` for a list."""

from typing import final, reveal_type

import jax

import axjax as ax
from axjax.models import generate_text, gpt2


@final
class Batch(ax.Axis): ...


folder = "tests/models/fixtures/gpt2"
model = gpt2.from_hf(folder)
tok = gpt2.tokenizer(folder)
ids, lengths = tok.encode(["Hello world", "and"], batch=Batch)
greedy = ax.nn.generate(model, ids, 4, temperature=0, lengths=lengths)
reveal_type(greedy)  # want: Tensor[I32, Batch, Pos]
out = ax.nn.generate(model, ids, 4, jax.random.key(0), top_p=0.9, lengths=lengths, stop=tok.eos_ids)
reveal_type(out.tokens)  # want: Tensor[I32, Batch, Pos]
tokens, new = out
reveal_type(tokens)  # want: Tensor[I32, Batch, Pos]
reveal_type(out.lengths)  # want: Tensor[I32, *tuple[Any, ...]]
reveal_type(tok.decode(tokens, new))  # want: list[str]
cache = model.init_cache({Batch: 2}, 8)
reveal_type(cache)  # want: tuple[KVCache[Any, Any], ...] | KVCache[Any, Any]
logits, cache = model(ids, cache=cache)
reveal_type(logits)  # want: Tensor[F32, Batch, Pos, Vocab]
reveal_type(generate_text(model, tok, "Hello", max_new_tokens=4))  # want: str
texts = generate_text(model, tok, ["Hello", "and"], max_new_tokens=4, top_p=0.9)
reveal_type(texts)  # want: list[str]
reveal_type(ax.nn.KVCache.positions)  # show
