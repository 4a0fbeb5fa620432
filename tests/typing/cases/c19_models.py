"""Pretrained models (issue 35): ``gpt2.from_hf`` gives a typed ``GPT2`` whose call maps
token ids ``Tensor[I32, *B, Pos]`` to logits ``Tensor[F32, *B, Pos, Vocab]``, with or
without batch axes; with ``cache=`` it returns the logits and the new cache. Float ids, or
ids without the position axis last, are errors."""

from typing import final, reveal_type

import jax

import axjax as ax
from axjax.models import gpt2
from axjax.models.gpt2 import Pos


@final
class Batch(ax.Axis): ...


model = gpt2.from_hf("tests/models/fixtures/gpt2")
reveal_type(model)  # want: GPT2[tuple[Block, ...]]
ids = ax.tensor([[1, 2, 3]], Batch, Pos, dtype=ax.I32)
reveal_type(model(ids))  # want: Tensor[F32, Batch, Pos, Vocab]
one = ax.tensor([1, 2, 3], Pos, dtype=ax.I32)
reveal_type(model(one))  # want: Tensor[F32, Pos, Vocab]
cache = model.init_cache({Batch: 1}, 8)
logits, cache = model(ids, cache=cache)
reveal_type(logits)  # want: Tensor[F32, Batch, Pos, Vocab]
ids_f = ax.tensor([[1.0, 2.0]], Batch, Pos, dtype=ax.F32)
f = model(ids_f)  # want-error: incompatible type "Tensor[F32, Batch, Pos]"; want-error[mypy,pyright]
ids_t = ax.tensor([[1], [2]], Pos, Batch, dtype=ax.I32)
g = model(ids_t)  # want-error: axis Pos occurs twice; want-error[mypy,pyright]
# the blocks in one LayerStack (unroll=False) and the parameters in bf16: the same types,
# float32 logits; dtype is a floating dtype
deep = gpt2.from_hf("tests/models/fixtures/gpt2", unroll=False, dtype=ax.BF16)
reveal_type(deep)  # want: GPT2[LayerStack[Block, Layer]]
reveal_type(deep(ids))  # want: Tensor[F32, Batch, Pos, Vocab]
d_logits, d_cache = deep(ids, cache=deep.init_cache({Batch: 1}, 8))
reveal_type(d_logits)  # want: Tensor[F32, Batch, Pos, Vocab]
built = gpt2.GPT2(model.config, key=jax.random.key(0), unroll=False)
reveal_type(built.blocks[0])  # want: Block
# the form unroll asks for is the blocks' type (issue 44): no isinstance to reach the stack
reveal_type(built.blocks)  # want: LayerStack[Block, Layer]
reveal_type(deep.blocks.stacked(lambda b: b.attn.query_proj))  # want[plugin]: Tensor[Any, Layer, *tuple[Any, ...]]; show[mypy,pyright]
reveal_type(model.blocks)  # want: tuple[Block, ...]
either = gpt2.from_hf("tests/models/fixtures/gpt2", unroll=bool(ids.shape[0]))
reveal_type(either)  # want: GPT2[tuple[Block, ...] | LayerStack[Block, Layer]]
i32 = gpt2.from_hf("tests/models/fixtures/gpt2", dtype=ax.I32)  # want-error: "type[I32]"; want-error[mypy,pyright]; raises: TypeError
