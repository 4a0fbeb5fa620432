"""Typed layers (issue 12): a transformer encoder block over token ids, from Embedding,
MultiheadAttention (with a padding mask), LayerNorm and Affine.

``Embedding[F32, Vocab, Embed]`` reads integer ids; ``MultiheadAttention[F32, Time,
KeyOf[Time], Embed, Head, HeadDim]`` maps ``[*B, Time, Embed]`` to the same axes (keys on
``KeyOf[Time]``);
``LayerNorm[F32, Embed]`` keeps its input's type, which must have ``Embed``.
"""

from typing import final, reveal_type

import jax
from axes import N

import axjax as ax
from axjax import BF16, F32, I32, Tensor


@final
class Time(ax.Axis): ...


@final
class Vocab(ax.Axis): ...


@final
class Embed(ax.Axis): ...


@final
class Mlp(ax.Axis): ...


key = jax.random.key(0)
ids = ax.zeros((4, 4), N, Time, dtype=I32)
memory = ax.zeros((4, 4, 4), N, ax.KeyOf[Time], Embed)

emb = ax.nn.Embedding(Vocab, Embed, 4, 4, key=key)
reveal_type(emb)  # want: Embedding[F32, Vocab, Embed]
attn = ax.nn.MultiheadAttention(Embed, 4, num_heads=2, query_pos=Time, key=key)
reveal_type(attn)  # want: MultiheadAttention[F32, Time, KeyOf[Time], Embed, Head, HeadDim]
norm = ax.nn.LayerNorm(Embed, 4)
reveal_type(norm)  # want: LayerNorm[F32, Embed]
up = ax.nn.Affine(Embed, Mlp, 4, 4, key=key)
down = ax.nn.Affine(Mlp, Embed, 4, 4, key=key)

# a correct block
h = emb(ids)
reveal_type(h)  # want: Tensor[F32, N, Time, Embed]
a = attn(norm(h))
reveal_type(a)  # want: Tensor[F32, N, Time, Embed]
h2: Tensor[F32, N, Time, Embed] = h + a  # ok
h3 = h2 + down(ax.gelu(up(norm(h2))))  # ok
reveal_type(h3)  # want: Tensor[F32, N, Time, Embed]
cross = attn(h3, memory)  # ok
reveal_type(cross)  # want: Tensor[F32, N, Time, Embed]
pad = ax.zeros((4, 4), N, Time, dtype=ax.Bool)
masked = attn(h3, mask=pad)  # ok
reveal_type(ax.nn.RMSNorm(Embed, 4)(h3))  # want: Tensor[F32, N, Time, Embed]
reveal_type(ax.nn.LayerNorm((Time, Embed), (4, 4))(h3))  # want: Tensor[F32, N, Time, Embed]
reveal_type(norm(ax.transpose(h3, Embed, N, Time)))  # want: Tensor[F32, Embed, N, Time]
half_norm = ax.nn.LayerNorm(Embed, 4, dtype=BF16)
reveal_type(half_norm)  # want: LayerNorm[BF16, Embed]
reveal_type(ax.nn.RMSNorm((Time, Embed), (4, 4), dtype=BF16))  # want: RMSNorm[BF16, Time, Embed]
reveal_type(ax.nn.LayerNorm((Time, Embed), (4, 4)))  # want: LayerNorm[F32, Time, Embed]
reveal_type(half_norm(ax.astype(h3, BF16)))  # want: Tensor[BF16, N, Time, Embed]

# mistakes
x1 = emb(ax.astype(ids, F32))  # want-error[plugin]: ids must be integers, got F32; want-error[mypy,pyright]
x2 = norm(ax.zeros((4, 4), N, Time))  # want-error[plugin]: Embed is not an axis of the input; want-error[mypy,pyright]
x3 = half_norm(h3)  # want-error[plugin]: the input is F32, the layer's parameters BF16; want-error[mypy,pyright]
x4 = attn(ax.rename(h3, Embed, Mlp))  # want-error[plugin]: Embed is not an axis of the query; want-error[mypy,pyright]
x5 = attn(h3, ax.rename(memory, ax.KeyOf[Time], Time))  # want-error[plugin]: KeyOf[Time] is not an axis of the key; want-error[mypy,pyright]
x6 = attn(h3, mask=ax.zeros((4, 4), N, Mlp, dtype=ax.Bool))  # want-error[plugin]: the mask has axis Mlp, which the scores lack; miss[mypy,pyright]: a mask may have any subset of the score axes
x7 = h3 + attn(ax.transpose(h3, Time, N, Embed))  # want-error[plugin]: same axes in a different order; want-error[mypy,pyright]
x8 = emb(ax.zeros((4, 4, 4), N, Time, Vocab, dtype=I32))  # want-error[plugin]: already has axis Vocab; miss[mypy,pyright]
x9 = ax.nn.LayerNorm((Time, Embed), (4, 4))(ax.zeros((4, 4), N, Embed))  # want-error[plugin]: Time is not an axis of the input; miss[mypy,pyright]: a norm over two axes checks only the dtype without the plugin
