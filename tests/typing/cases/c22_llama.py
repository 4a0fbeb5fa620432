"""Llama (issue 35): ``llama.from_hf`` gives a typed ``Llama`` whose call maps token ids
``Tensor[I32, *B, Pos]`` to logits ``Tensor[F32, *B, Pos, Vocab]``, with or without batch
axes; with ``cache=`` it returns the logits and the new caches. Float ids, or ids without the
position axis last, are errors."""

from typing import final, reveal_type

import axjax as ax
from axjax.models import llama
from axjax.models.llama import Pos


@final
class Batch(ax.Axis): ...


model = llama.from_hf("tests/models/fixtures/llama-kv2")
reveal_type(model)  # want: Llama
ids = ax.tensor([[1, 2, 3]], Batch, Pos, dtype=ax.I32)
reveal_type(model(ids))  # want: Tensor[F32, Batch, Pos, Vocab]
one = ax.tensor([1, 2, 3], Pos, dtype=ax.I32)
reveal_type(model(one))  # want: Tensor[F32, Pos, Vocab]
cache = model.init_cache({Batch: 1}, 8)
logits, cache = model(ids, cache=cache)
reveal_type(logits)  # want: Tensor[F32, Batch, Pos, Vocab]
ids_f = ax.tensor([[1.0, 2.0]], Batch, Pos, dtype=ax.F32)
f = model(ids_f)  # want-error: incompatible type "Tensor[F32, Batch, Pos]"; want-error[mypy,pyright]
