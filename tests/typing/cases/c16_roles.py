"""Axis roles (issue 34): a key axis declared for its query, and a layer from an axis to
itself.

The two attention mistakes that no name check sees: M1, a softmax over the query axis
instead of the key axis; M2, a causal mask with query and key swapped. ``KPos`` is declared
the key of ``Pos`` (``ax.KeyOf[Pos]``), so both are type errors and ``AxisError``s.
"""

from collections.abc import Mapping
from typing import final, reveal_type

import jax

import axjax as ax
from axjax import F32, Tensor


@final
class Pos(ax.Axis): ...


@final
class KPos(ax.KeyOf[Pos]): ...


@final
class Other(ax.Axis): ...


@final
class KOther(ax.KeyOf[Other]): ...


@final
class Head(ax.Axis): ...


@final
class HeadDim(ax.Axis): ...


@final
class Embed(ax.Axis): ...


@final
class Batch(ax.Axis): ...


scores = ax.zeros((2, 3, 3), Head, Pos, KPos)

# the correct lines
mask = ax.nn.causal_mask(Pos, KPos, 3, 3)
reveal_type(mask)  # want: Tensor[Bool, Pos, KPos]
generic = ax.nn.causal_mask(Pos, ax.nn.KeyOfAnyQuery, 3, 3)
reveal_type(generic)  # want: Tensor[Bool, Pos, KeyOfAnyQuery]
weights = ax.nn.attention_weights(scores, over=KPos)
reveal_type(weights)  # want: Tensor[F32, Head, Pos, KPos]
keys = ax.softmax(scores, KPos)
reveal_type(keys)  # want: Tensor[F32, Head, Pos, KPos]
queries = ax.softmax(scores, Pos, allow_query=True)  # ok

# M2: query and key swapped
# (mypy alone words it "Value of type variable ... cannot be"; the plugin gives the run's words)
swapped = ax.nn.causal_mask(KPos, Pos, 3, 3)  # want-error[plugin]: causal_mask(KPos, Pos, ...): query and key are swapped; want-error[mypy,pyright]: causal_mask
swapped_generic = ax.nn.causal_mask(ax.nn.KeyOfAnyQuery, Pos, 3, 3)  # want-error[plugin]: query and key are swapped: the query axis KeyOfAnyQuery is a key role; want-error[mypy,pyright]: causal_mask

# the key of another query: no TypeVar bound can relate KeyOf[Other] to Pos, the plugin can
other_key = ax.nn.causal_mask(Pos, KOther, 3, 3)  # want-error[plugin]: the key axis KOther is declared the key of Other (ax.KeyOf[Other]), not of the query axis Pos; miss[mypy,pyright]

# M1: normalised over the queries
m1_weights = ax.nn.attention_weights(scores, over=Pos)  # want-error[plugin,mypy,pyright]: attention_weights
m1_softmax = ax.softmax(scores, Pos)  # want-error[plugin]: softmax over the query axis Pos; miss[mypy,pyright]

# ax.Out[E]: a layer from an axis to itself
key = jax.random.key(0)
square = ax.nn.Linear(Embed, Embed, 4, 4, key=key)
x: Tensor[F32, Batch, Embed] = ax.zeros((2, 4), Batch, Embed)
reveal_type(square(x))  # want: Tensor[F32, Batch, Embed]
w: Tensor[F32, ax.Out[Embed], Embed] = ax.zeros((4, 4), ax.Out[Embed], Embed)  # ok

# ax.rearrange: the plugin types a literal pattern exactly; without it the result is gradual
tokens: Tensor[F32, Batch, Pos, Embed] = ax.zeros((2, 3, 8), Batch, Pos, Embed)
split = ax.rearrange(tokens, "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim", Head, HeadDim, Head=4)
reveal_type(split)  # want[plugin]: Tensor[F32, Batch, Head, Pos, HeadDim]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
merged = ax.rearrange(split, "Batch Head Pos HeadDim -> Batch Pos Embed=(Head HeadDim)", Embed)
reveal_type(merged)  # want[plugin]: Tensor[F32, Batch, Pos, Embed]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
short = ax.rearrange(tokens, "B P E -> E B P", B=Batch, P=Pos, E=Embed)
reveal_type(short)  # want[plugin]: Tensor[F32, Embed, Batch, Pos]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
# a name that is neither an axis of the tensor nor a class passed (no lookup in this scope)
unknown = ax.rearrange(tokens, "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim", Head=4)  # want-error[plugin]: unknown name Head: not an axis of x (Batch, Pos, Embed) nor a class passed; miss[mypy,pyright]
lacking = ax.rearrange(tokens, "Batch Head Embed -> Batch Embed Head", Head)  # want-error[plugin]: missing axis Head: x has (Batch, Pos, Embed); miss[mypy,pyright]
dropped = ax.rearrange(tokens, "Batch Pos Embed -> Batch Pos")  # want-error[plugin]: missing axis Embed: the left side has it, the right not; miss[mypy,pyright]

# ax.contract(out=): the result in the order out= gives
proj = ax.zeros((8, 3), Embed, Head)
reveal_type(ax.contract(tokens, proj, out=(Head, Batch, Pos)))  # want: Tensor[F32, Head, Batch, Pos]
no_permutation = ax.contract(tokens, proj, out=(Head, Batch))  # want-error[plugin]: out=(Head, Batch) ; miss[mypy,pyright]

# the KV cache: typed by the dtype and the key axis of the layer that made it
mha = ax.nn.MultiheadAttention(Embed, 8, num_heads=2, query_pos=Pos, key_pos=KPos, causal=True, key=key)
cache = mha.init_cache({Batch: 2}, max_len=4)
reveal_type(cache)  # want: KVCache[F32, KPos]
reveal_type(mha.init_cache({Batch: 2}, max_len=4, dtype=ax.BF16))  # want: KVCache[BF16, KPos]
attended, cache = mha(tokens, cache=cache)
reveal_type(attended)  # want: Tensor[F32, Batch, Pos, Embed]
reveal_type(cache)  # want: KVCache[F32, KPos]
plain_mha = ax.nn.MultiheadAttention(Embed, 8, num_heads=2, query_pos=Pos, causal=True, key=key)
foreign = plain_mha(tokens, cache=cache)  # want-error[plugin]: "KVCache[F32, KPos]"; want-error[mypy]: expected "KVCache[F32, KeyOf[Pos]]"; want-error[pyright]: "cache"


# generate: token ids in, token ids out, over the prompt's axes
@final
class Vocab(ax.Axis): ...


class Constant:
    """A Decoder (ax.nn.Decoder's protocol) whose logits favour token 0."""

    def init_cache(self, batch: Mapping[type[ax.Axis], int], max_len: int) -> int:
        return 0

    def __call__(
        self, ids: Tensor[ax.I32, Batch, Pos], *, cache: int
    ) -> tuple[Tensor[F32, Batch, Pos, Vocab], int]:
        return ax.zeros((*ids.shape, 5), Batch, Pos, Vocab), cache + 1


prompt = ax.zeros((2, 3), Batch, Pos, dtype=ax.I32)
reveal_type(ax.nn.generate(Constant(), prompt, 4, temperature=0))  # want: Tensor[I32, Batch, Pos]
floats = ax.nn.generate(Constant(), tokens, 4, temperature=0)  # want-error[plugin,mypy]: Argument 2 to "generate"; want-error[pyright]: "prompt"; raises: TypeError
