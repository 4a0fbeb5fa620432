"""Tokenizers (axjax.models): ``gpt2.tokenizer(folder)`` is a ``Tokenizer[gpt2.Pos]``; its
``encode`` gives ids ``Tensor[I32, Batch, gpt2.Pos]`` and lengths ``Tensor[I32, Batch]``,
which the model reads; its ``decode`` gives a ``list[str]`` for a batch and a ``str`` for one
row or a list of ids. Llama's ids are along ``llama.Pos``: GPT-2's tokenizer and model
refuse them."""

from typing import final, reveal_type

import axjax as ax
from axjax.models import Tokenizer, gpt2, llama, load_tokenizer


@final
class Batch(ax.Axis): ...


tok = gpt2.tokenizer("tests/models/fixtures/gpt2")
reveal_type(tok)  # want: Tokenizer[Pos]
ids, lengths = tok.encode(["Hello world", "and"], batch=Batch)
reveal_type(ids)  # want: Tensor[I32, Batch, Pos]
reveal_type(lengths)  # want: Tensor[I32, Batch]
one, n = tok.encode("and", batch=Batch, add_special_tokens=False)
reveal_type(one)  # want: Tensor[I32, Batch, Pos]
reveal_type(gpt2.from_hf("tests/models/fixtures/gpt2")(ids))  # want: Tensor[F32, Batch, Pos, Vocab]
reveal_type(tok.decode(ids, lengths))  # want: list[str]
reveal_type(tok.decode(ids, skip_special_tokens=True))  # want: list[str]
reveal_type(tok.decode([64, 265]))  # want: str
row = ax.tensor([64, 265], gpt2.Pos, dtype=ax.I32)
reveal_type(tok.decode(row))  # want: str
reveal_type(tok.eos_ids)  # want: tuple[int, ...]
reveal_type(tok.pad_id)  # want: int | None
# Llama's tokenizer: ids along llama.Pos, which GPT-2's tokenizer and model refuse
ltok = llama.tokenizer("tests/models/fixtures/llama-kv2")
reveal_type(ltok)  # want: Tokenizer[Pos]
lids, llengths = ltok.encode("and", batch=Batch)
mixed = tok.decode(lids)  # want-error: "Tensor[I32, Batch, axjax.models._llama.Pos]"; want-error[mypy,pyright]
wrong = gpt2.from_hf("tests/models/fixtures/gpt2")(lids)  # want-error: expected "Tensor[I32, Batch, axjax.models._gpt2.Pos]"; want-error[mypy,pyright]
as_gpt2: Tokenizer[gpt2.Pos] = ltok  # want-error: type "Tokenizer[axjax.models._llama.Pos]"; want-error[mypy,pyright]; runs: an annotation
# a row's lengths go with a batch only
bad_lengths = tok.decode(row, lengths)  # want-error: incompatible type "Tensor[I32, Pos]"; want-error[mypy,pyright]; raises: TypeError
# any position axis: the generic loader
generic = load_tokenizer("tests/models/fixtures/gpt2", pos=gpt2.Pos)
reveal_type(generic.encode("and", batch=Batch)[0])  # want: Tensor[I32, Batch, Pos]
