"""Roles on by default (issue 44, class 0): a program that uses only the library's names.

The attention layers' default key axis is ``ax.KeyOf[query_pos]``, the key tied to its
queries: scores over ``Time`` and ``ax.KeyOf[Time]`` refuse a softmax over ``Time`` (the
most common attention mistake), at run time and under the plugin, with no key axis
declared by the user. ``ax.nn.KeyOfAnyQuery`` (formerly ``ax.nn.KeyPos``) is the key of any
query: no softmax check can tie it to its queries.
"""

from typing import final, reveal_type

import jax

import axjax as ax
from axjax import F32, Tensor


@final
class Batch(ax.Axis): ...


@final
class Time(ax.Axis): ...


@final
class Embed(ax.Axis): ...


key = jax.random.key(0)
x: Tensor[F32, Batch, Time, Embed] = ax.zeros((2, 3, 8), Batch, Time, Embed)
mha = ax.nn.MultiheadAttention(Embed, 8, num_heads=2, query_pos=Time, causal=True, key=key)
reveal_type(mha)  # want: MultiheadAttention[F32, Time, KeyOf[Time], Embed, Head, HeadDim]
reveal_type(mha(x))  # want: Tensor[F32, Batch, Time, Embed]
reveal_type(mha.init_cache({Batch: 2}, max_len=4))  # want: KVCache[F32, KeyOf[Time]]

# attention written by hand with the library's names: the keys on the layer's key axis
q = x
k = ax.rename(x, Time, ax.KeyOf[Time])
reveal_type(k)  # want[plugin]: Tensor[F32, Batch, KeyOf[Time], Embed]
scores = ax.contract(q, k, over=Embed)
reveal_type(scores)  # want[plugin]: Tensor[F32, Batch, Time, KeyOf[Time]]
weights = ax.softmax(scores, ax.KeyOf[Time])  # ok
mask = ax.nn.causal_mask(Time, ax.KeyOf[Time], 3, 3)
reveal_type(mask)  # want: Tensor[Bool, Time, KeyOf[Time]]
fine = ax.nn.attention_weights(scores, over=ax.KeyOf[Time])  # ok

# the mistake: a softmax over the query axis
over_queries = ax.softmax(scores, Time)  # want-error[plugin]: a softmax over the query axis Time of scores that hold its key axis KeyOf[Time]; miss[mypy,pyright]
over_queries_too = ax.nn.attention_weights(scores, over=Time)  # want-error[plugin,mypy,pyright]: attention_weights
meant = ax.softmax(scores, Time, allow_query=True)  # ok

# the mask with query and key swapped
swapped = ax.nn.causal_mask(ax.KeyOf[Time], Time, 3, 3)  # want-error[plugin]: query and key are swapped; want-error[mypy,pyright]: causal_mask

# the key of another query
other = ax.nn.causal_mask(Embed, ax.KeyOf[Time], 3, 3)  # want-error[plugin]: the key axis KeyOf[Time] is declared the key of Time; miss[mypy,pyright]

# the key of any query: accepted everywhere, so the softmax over its queries is not caught
anyq: Tensor[F32, Batch, Time, ax.nn.KeyOfAnyQuery] = ax.zeros((2, 3, 3), Batch, Time, ax.nn.KeyOfAnyQuery)
silent = ax.softmax(anyq, Time)  # ok
