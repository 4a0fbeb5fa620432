"""Multi-head attention with named heads and distinct query/key position axes.

Queries and keys have *different* position axes (``QPos`` and ``KPos``), so the score
``q ⋈ k`` over ``HeadDim`` keeps both, batched over every shared axis (batch, heads): a
contraction can never sum away a batch axis or pair a query with only "its" key by
accident, which positional code does silently when two axes have the same size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp

from ..core import F32, Axis, Bool, DType, Tensor
from ..core.internal import axes_names, axis_name, check_axis_label, fail
from ..ops import arange, broadcast, contract, greater_equal, rename, softmax, where
from . import _init
from ._dropout import Dropout
from ._util import distinct, require

__all__ = ["Head", "HeadDim", "KeyPos", "MultiheadAttention", "dot_product_attention",
           "causal_mask"]

AnyTensor = Tensor[Any, *tuple[Any, ...]]


@final
class Head(Axis):
    """The attention-head axis (default label of :class:`MultiheadAttention`)."""


@final
class HeadDim(Axis):
    """The per-head feature axis (default label of :class:`MultiheadAttention`)."""


@final
class KeyPos(Axis):
    """Key/value positions in self-attention (the query positions, renamed)."""


def causal_mask(query_pos: type[Axis], key_pos: type[Axis], n_query: int, n_key: int
                ) -> Tensor[Bool, Any, Any]:
    """``[QPos, KPos]`` mask, true where the key position is not after the query's.

    Example:
        >>> ax.nn.causal_mask(Time, KeyPos, 3, 3).array
        Array([[ True, False, False], [ True,  True, False], [ True,  True,  True]])
    """
    q: AnyTensor = broadcast(arange(query_pos, n_query), (query_pos, key_pos), {key_pos: n_key})
    k: AnyTensor = broadcast(arange(key_pos, n_key), (query_pos, key_pos), {query_pos: n_query})
    return greater_equal(q, k)


def dot_product_attention(query: AnyTensor, key: AnyTensor, value: AnyTensor, *,
                          over: type[Axis], key_pos: type[Axis],
                          mask: AnyTensor | None = None) -> AnyTensor:
    """``softmax(q ⋈ k / sqrt(d), key_pos) ⋈ v``: attention by axis names.

    ``query`` and ``key`` share the feature axis ``over`` (summed, scaled by
    ``1/sqrt(size)``); ``key`` and ``value`` share ``key_pos`` (softmaxed, then summed).
    Every other shared axis (batch, heads) is kept once. ``mask`` (Bool, true = attend) may
    have any subset of the score axes and is broadcast to them.

    Example:
        >>> out = ax.nn.dot_product_attention(q, k, v, over=HeadDim, key_pos=KeyPos)
        >>> # q [Batch, Time, Head, HeadDim], k/v [Batch, KeyPos, Head, HeadDim]
        >>> # -> [Batch, Time, Head, HeadDim]
    """
    name = f"Attention(over={axis_name(over)}, key_pos={axis_name(key_pos)})"
    require(name, (query, key, value), query, over, None, "query")
    require(name, (query, key, value), key, over, None, "key")
    require(name, (query, key, value), key, key_pos, None, "key")
    require(name, (query, key, value), value, key_pos, None, "value")
    if key_pos in query.axes:
        raise fail(name, (query, key, value), f"the query has the key position axis "
                   f"{axis_name(key_pos)}; queries and keys need different position axes "
                   "(rename one, e.g. ax.rename(k, Time, KeyPos))")
    return _attention(query, key, value, over, key_pos, mask, None)


def _attention(q: AnyTensor, k: AnyTensor, v: AnyTensor, over: type[Axis],
               key_pos: type[Axis], mask: AnyTensor | None,
               drop: Callable[[AnyTensor], AnyTensor] | None) -> AnyTensor:
    d = dict(zip(q.axes, q.shape, strict=True))[over]
    scores = contract(q * (1.0 / math.sqrt(d) if d else 1.0), k, over=over)
    if mask is not None:
        extra = [a for a in mask.axes if a not in scores.axes]
        if extra:
            raise fail("Attention mask", (scores, mask), f"the mask has axis "
                       f"{axis_name(extra[0])}, which the scores lack (they have "
                       f"{axes_names(scores.axes)})")
        low = float(jnp.finfo(scores.dtype.numpy).min)  # type: ignore[no-untyped-call]
        scores = where(broadcast(mask, scores), scores, low)
    weights = softmax(scores, key_pos)
    if drop is not None:
        weights = drop(weights)
    return contract(weights, v, over=key_pos)


class MultiheadAttention(eqx.Module):
    """Multi-head attention: project, attend per head, project back.

    Projections are ``Tensor[F32, Head, HeadDim, Embed]`` (query, key, value) and
    ``Tensor[F32, Embed, Head, HeadDim]`` (output), so heads are an axis, not a reshape.

    Args:
        embed_axis, embed_size: the model's feature axis and its size.
        num_heads: number of heads; ``head_size`` defaults to ``embed_size // num_heads``.
        query_pos: the position axis of the queries (``Time``, say).
        key_pos: the position axis of keys and values (``KeyPos`` by default; in
            self-attention the query positions are renamed to it).
        head_axis, head_dim_axis: labels of the heads and per-head features.
        causal: mask out keys after the query (self-attention).
        use_bias: add biases to the projections.
        dropout_p: dropout on the attention weights (needs ``key`` when training; its
            ``inference`` flag is a bool leaf, so differentiate with ``eqx.filter_grad``).
        dtype, key: parameter dtype; PRNG key (keyword only).

    Example:
        >>> mha = ax.nn.MultiheadAttention(Embed, 64, num_heads=4, query_pos=Time,
        ...                                causal=True, key=jax.random.key(0))
        >>> mha(h)          # [Batch, Time, Embed] -> [Batch, Time, Embed] (self-attention)
        >>> mha(h, memory)  # cross-attention; memory is [Batch, KeyPos, Embed]
    """

    query_proj: AnyTensor
    key_proj: AnyTensor
    value_proj: AnyTensor
    output_proj: AnyTensor
    biases: tuple[AnyTensor, AnyTensor, AnyTensor, AnyTensor] | None
    dropout: Dropout | None
    embed_axis: type[Axis] = eqx.field(static=True)
    query_pos: type[Axis] = eqx.field(static=True)
    key_pos: type[Axis] = eqx.field(static=True)
    head_axis: type[Axis] = eqx.field(static=True)
    head_dim_axis: type[Axis] = eqx.field(static=True)
    causal: bool = eqx.field(static=True)

    def __init__(self, embed_axis: type[Axis], embed_size: int, *, num_heads: int,
                 query_pos: type[Axis], key_pos: type[Axis] = KeyPos,
                 head_size: int | None = None, head_axis: type[Axis] = Head,
                 head_dim_axis: type[Axis] = HeadDim, causal: bool = False,
                 use_bias: bool = False, dropout_p: float = 0.0,
                 weight_init: _init.Initializer | None = None, dtype: type[DType] = F32,
                 key: jax.Array) -> None:
        axes = (embed_axis, query_pos, key_pos, head_axis, head_dim_axis)
        for a in axes:
            check_axis_label(a, "MultiheadAttention")
        distinct("MultiheadAttention", axes)
        (self.embed_axis, self.query_pos, self.key_pos, self.head_axis,
         self.head_dim_axis) = axes
        if head_size is None:
            if embed_size % num_heads:
                raise ValueError(f"MultiheadAttention: embed_size {embed_size} does not "
                                 f"divide into {num_heads} heads; give head_size")
            head_size = embed_size // num_heads
        init = weight_init or _init.glorot_uniform()
        heads = {head_axis: num_heads, head_dim_axis: head_size}
        k1, k2, k3, k4 = jax.random.split(key, 4)
        self.query_proj, self.key_proj, self.value_proj = (
            init(k, {**heads, embed_axis: embed_size}, fan_in=embed_axis,
                 fan_out=(head_axis, head_dim_axis), dtype=dtype) for k in (k1, k2, k3))
        self.output_proj = init(k4, {embed_axis: embed_size, **heads},
                                fan_in=(head_axis, head_dim_axis), fan_out=embed_axis,
                                dtype=dtype)
        zeros = _init.zeros()
        self.biases = (
            zeros(k1, heads, dtype=dtype), zeros(k1, heads, dtype=dtype),
            zeros(k1, heads, dtype=dtype), zeros(k1, {embed_axis: embed_size}, dtype=dtype),
        ) if use_bias else None
        self.dropout = Dropout(dropout_p) if dropout_p > 0 else None
        self.causal = causal

    def _project(self, x: AnyTensor, w: AnyTensor, i: int) -> AnyTensor:
        y = contract(x, w, over=self.embed_axis)
        return y + broadcast(self.biases[i], y) if self.biases is not None else y

    def __call__(self, query: AnyTensor, key_: AnyTensor | None = None,
                 value: AnyTensor | None = None, *, mask: AnyTensor | None = None,
                 key: jax.Array | None = None, inference: bool | None = None) -> AnyTensor:
        """Attend from ``query`` to ``key_``/``value`` (both default to ``query``).

        ``mask`` is a Bool tensor over any of the score axes (batch axes, ``query_pos``,
        ``head_axis``, ``key_pos``), true where attention is allowed. ``key`` drives the
        attention dropout.
        """
        name = f"MultiheadAttention({axis_name(self.embed_axis)})"
        e = self.query_proj.size(self.embed_axis)
        require(name, (query,), query, self.embed_axis, e, "query")
        require(name, (query,), query, self.query_pos, None, "query")
        keys = rename(query, self.query_pos, self.key_pos) if key_ is None else key_
        values = keys if value is None else value
        for what, t in (("key", keys), ("value", values)):
            require(name, (query, keys, values), t, self.embed_axis, e, what)
            require(name, (query, keys, values), t, self.key_pos, None, what)
        q = self._project(query, self.query_proj, 0)
        k = self._project(keys, self.key_proj, 1)
        v = self._project(values, self.value_proj, 2)
        if self.causal:
            causal = causal_mask(self.query_pos, self.key_pos, query.size(self.query_pos),
                                 keys.size(self.key_pos))
            mask = causal if mask is None else _and(mask, causal)
        drop: Callable[[AnyTensor], AnyTensor] | None = None
        if self.dropout is not None:
            dropout = self.dropout

            def dropped(w: AnyTensor) -> AnyTensor:
                return dropout(w, key=key, inference=inference)

            drop = dropped
        out = _attention(q, k, v, self.head_dim_axis, self.key_pos, mask, drop)
        y = contract(out, self.output_proj, over=(self.head_axis, self.head_dim_axis))
        return y + broadcast(self.biases[3], y) if self.biases is not None else y


def _and(a: AnyTensor, b: AnyTensor) -> AnyTensor:
    axes = tuple(dict.fromkeys((*a.axes, *b.axes)))
    sizes = {**a.sizes, **b.sizes}
    ab, bb = broadcast(a, axes, sizes), broadcast(b, axes, sizes)
    return where(ab, bb, False)

