"""Llama (issue 35): ``llama.from_hf`` gives a typed ``Llama`` whose call maps token ids
``Tensor[I32, *B, Pos]`` to logits ``Tensor[F32, *B, Pos, Vocab]``, with or without batch
axes; with ``cache=`` it returns the logits and the new caches. Float ids, or ids without the
position axis last, are errors."""

from typing import final, reveal_type

import jax

import axjax as ax
from axjax.models import llama
from axjax.models.llama import Pos


@final
class Batch(ax.Axis): ...


model = llama.from_hf("tests/models/fixtures/llama-kv2")
reveal_type(model)  # want: Llama[tuple[Block, ...]]
ids = ax.tensor([[1, 2, 3]], Batch, Pos, dtype=ax.I32)
reveal_type(model(ids))  # want: Tensor[F32, Batch, Pos, Vocab]
one = ax.tensor([1, 2, 3], Pos, dtype=ax.I32)
reveal_type(model(one))  # want: Tensor[F32, Pos, Vocab]
cache = model.init_cache({Batch: 1}, 8)
logits, cache = model(ids, cache=cache)
reveal_type(logits)  # want: Tensor[F32, Batch, Pos, Vocab]
ids_f = ax.tensor([[1.0, 2.0]], Batch, Pos, dtype=ax.F32)
f = model(ids_f)  # want-error: incompatible type "Tensor[F32, Batch, Pos]"; want-error[mypy,pyright]
# the blocks in one LayerStack (unroll=False) and the parameters in bf16: the same types,
# float32 logits; dtype is a floating dtype
deep = llama.from_hf("tests/models/fixtures/llama-kv2", unroll=False, dtype=ax.BF16)
reveal_type(deep)  # want: Llama[LayerStack[Block, Layer]]
reveal_type(deep(ids))  # want: Tensor[F32, Batch, Pos, Vocab]
d_logits, d_cache = deep(ids, cache=deep.init_cache({Batch: 1}, 8))
reveal_type(d_logits)  # want: Tensor[F32, Batch, Pos, Vocab]
built = llama.Llama(model.config, key=jax.random.key(0), unroll=False)
reveal_type(built.blocks[0])  # want: Block
# the form unroll asks for is the blocks' type (issue 44): no isinstance to reach the stack
reveal_type(built.blocks)  # want: LayerStack[Block, Layer]
reveal_type(deep.blocks.stacked(lambda b: b.attn.query_proj))  # want[plugin]: Tensor[Any, Layer, *tuple[Any, ...]]; show[mypy,pyright]
reveal_type(model.blocks)  # want: tuple[Block, ...]
either = llama.from_hf("tests/models/fixtures/llama-kv2", unroll=bool(ids.shape[0]))
reveal_type(either)  # want: Llama[tuple[Block, ...] | LayerStack[Block, Layer]]
i32 = llama.from_hf("tests/models/fixtures/llama-kv2", dtype=ax.I32)  # want-error: "type[I32]"; want-error[mypy,pyright]; raises: TypeError
