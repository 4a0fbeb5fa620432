"""Layers and functions whose axis rules ran only at run time (issue 44, class 1).

``GroupedQueryAttention[D, Query, Key, Embed]`` and ``SwiGLU[D, Embed, Hidden]`` are generic
over their dtype and axes, and the plugin runs their own checks on stand-ins;
``rotary_embedding``'s rule is declared with it (``nn._registry.checks_axes``) and run by the
plugin. The dtype is in the signature, so every checker refuses a wrong one.
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


@final
class Hidden(ax.Axis): ...


key = jax.random.key(0)
x: Tensor[F32, Batch, Time, Embed] = ax.zeros((2, 3, 8), Batch, Time, Embed)
ints = ax.zeros((2, 3, 8), Batch, Time, Embed, dtype=ax.I32)
no_model_axis = ax.zeros((2, 3), Batch, Time)

# rotary_embedding
reveal_type(ax.nn.rotary_embedding(x, Time, Embed))  # want: Tensor[F32, Batch, Time, Embed]
rope_pos = ax.nn.rotary_embedding(x, Hidden, Embed)  # want-error[plugin]: Hidden is not an axis of the input; miss[mypy,pyright]
rope_ints = ax.nn.rotary_embedding(ints, Time, Embed)  # want-error[plugin]: RoPE rotates floating-point features, got I32; miss[mypy,pyright]

# SwiGLU
mlp = ax.nn.SwiGLU(Embed, 8, Hidden, 16, key=key)
reveal_type(mlp)  # want: SwiGLU[F32, Embed, Hidden]
reveal_type(mlp(x))  # want: Tensor[F32, Batch, Time, Embed]
mlp_axis = mlp(no_model_axis)  # want-error[plugin]: Embed is not an axis of the input; miss[mypy,pyright]
mlp_dtype = mlp(ints)  # want-error[plugin]: the input is I32, the layer's parameters F32; want-error[mypy,pyright]

# GroupedQueryAttention
gqa = ax.nn.GroupedQueryAttention(Embed, 8, num_heads=2, num_kv_heads=1, query_pos=Time, key=key)
reveal_type(gqa)  # want: GroupedQueryAttention[F32, Time, KeyOf[Time], Embed]
reveal_type(gqa(x))  # want: Tensor[F32, Batch, Time, Embed]
gqa_axis = gqa(ax.zeros((2, 8), Batch, Embed))  # want-error[plugin]: Time is not an axis of the input; miss[mypy,pyright]
gqa_model = gqa(no_model_axis)  # want-error[plugin]: Embed; miss[mypy,pyright]
gqa_dtype = gqa(ints)  # want-error[plugin]: the input is I32, the layer's parameters F32; want-error[mypy,pyright]
