"""Multi-head attention with named heads and distinct query/key position axes.

Queries and keys have *different* position axes (``QPos`` and ``KPos``), so the score
``q ⋈ k`` over ``HeadDim`` keeps both, batched over every shared axis (batch, heads): a
contraction can never sum away a batch axis or pair a query with only "its" key by
accident, which positional code does silently when two axes have the same size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Generic, TypeVarTuple, final, overload

import equinox as eqx
import jax
import jax.numpy as jnp
from typing_extensions import TypeVar

from ..core import F32, Axis, Bool, DType, Tensor
from ..core._internal import axes_names, axis_name, check_axis_label, checks_choices, fail
from ..ops import arange, broadcast, contract, greater_equal, rename, softmax, where
from . import _init
from ._dropout import Dropout
from ._fused_attention import AttentionPath, FusedAttention, default_attention_path
from ._registry import register_layer
from ._util import distinct, require

__all__ = [
    "Head",
    "HeadDim",
    "KeyPos",
    "MultiheadAttention",
    "dot_product_attention",
    "causal_mask",
]

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


# MultiheadAttention's dtype and axes (the defaults are the constructor's)
D = TypeVar("D", bound=DType, default=F32)
Q = TypeVar("Q", bound=Axis, default=Any)
K = TypeVar("K", bound=Axis, default=KeyPos)
E = TypeVar("E", bound=Axis, default=Any)
H = TypeVar("H", bound=Axis, default=Head)
HD = TypeVar("HD", bound=Axis, default=HeadDim)
B = TypeVarTuple("B")
BK = TypeVarTuple("BK")


_QPos = TypeVar("_QPos", bound=Axis)
_KPos = TypeVar("_KPos", bound=Axis)


def causal_mask(
    query_pos: type[_QPos], key_pos: type[_KPos], n_query: int, n_key: int
) -> Tensor[Bool, _QPos, _KPos]:
    """``[QPos, KPos]`` mask, true where the key position is not after the query's.

    Example:
        >>> ax.nn.causal_mask(Time, KeyPos, 3, 3).array
        Array([[ True, False, False], [ True,  True, False], [ True,  True,  True]])
    """
    q: AnyTensor = broadcast(arange(query_pos, n_query), (query_pos, key_pos), {key_pos: n_key})
    k: AnyTensor = broadcast(arange(key_pos, n_key), (query_pos, key_pos), {query_pos: n_query})
    return greater_equal(q, k)


@checks_choices
def dot_product_attention(
    query: AnyTensor,
    key: AnyTensor,
    value: AnyTensor,
    *,
    over: type[Axis],
    key_pos: type[Axis],
    mask: AnyTensor | None = None,
    implementation: AttentionPath = "auto",
) -> AnyTensor:
    """``softmax(q ⋈ k / sqrt(d), key_pos) ⋈ v``: attention by axis names.

    ``query`` and ``key`` share the feature axis ``over`` (summed, scaled by
    ``1/sqrt(size)``); ``key`` and ``value`` share ``key_pos`` (softmaxed, then summed).
    Every other shared axis (batch, heads) is kept once. ``mask`` (Bool, true = attend) may
    have any subset of the score axes and is broadcast to them. ``implementation``:
    ``"einsum"`` (contractions), ``"fused"``/``"xla"``/``"cudnn"``
    (``jax.nn.dot_product_attention``), ``"auto"`` (the faster on this backend).

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
        raise fail(
            name,
            (query, key, value),
            f"the query has the key position axis "
            f"{axis_name(key_pos)}; queries and keys need different position axes "
            "(rename one, e.g. ax.rename(k, Time, KeyPos))",
        )
    return _attention(query, key, value, over, key_pos, mask, None, implementation=implementation)


def _fused_path(
    q: AnyTensor,
    k: AnyTensor,
    v: AnyTensor,
    over: type[Axis],
    drop: Any,
    implementation: AttentionPath,
) -> str | None:
    """The ``implementation=`` of the fused call, or ``None`` for the einsum path."""
    path = default_attention_path() if implementation == "auto" else implementation
    fits = (
        set(v.axes) == set(k.axes) and over in v.axes and sum(a not in k.axes for a in q.axes) == 1
    )
    if path == "einsum" or drop is not None or (implementation == "auto" and not fits):
        return None
    return "" if path == "fused" else path


def _attention(
    q: AnyTensor,
    k: AnyTensor,
    v: AnyTensor,
    over: type[Axis],
    key_pos: type[Axis],
    mask: AnyTensor | None,
    drop: Callable[[AnyTensor], AnyTensor] | None,
    *,
    implementation: AttentionPath = "auto",
    heads: type[Axis] | None = None,
    causal: tuple[type[Axis], int] | None = None,
) -> AnyTensor:
    """Attention by the einsum or the fused path; ``causal``: (query_pos, its size)."""
    fused = _fused_path(q, k, v, over, drop, implementation)
    if fused is not None:
        op = FusedAttention(
            over,
            key_pos,
            heads=heads if heads in k.axes else None,
            causal=causal is not None,
            masked=mask is not None,
            implementation=fused or None,
        )
        return op(q, k, v, mask) if mask is not None else op(q, k, v)
    if causal is not None:
        c = causal_mask(causal[0], key_pos, causal[1], k.size(key_pos))
        mask = c if mask is None else _and(mask, c)
    d = dict(zip(q.axes, q.shape, strict=True))[over]
    scores = contract(q * (1.0 / math.sqrt(d) if d else 1.0), k, over=over)
    if mask is not None:
        extra = [a for a in mask.axes if a not in scores.axes]
        if extra:
            raise fail(
                "Attention mask",
                (scores, mask),
                f"the mask has axis "
                f"{axis_name(extra[0])}, which the scores lack (they have "
                f"{axes_names(scores.axes)})",
            )
        low = float(jnp.finfo(scores.dtype.numpy).min)  # type: ignore[no-untyped-call]
        scores = where(broadcast(mask, scores), scores, low)
    weights = softmax(scores, key_pos)
    if drop is not None:
        weights = drop(weights)
    return contract(weights, v, over=key_pos)


@register_layer()
class MultiheadAttention(eqx.Module, Generic[D, Q, K, E, H, HD]):
    """Multi-head attention: project, attend per head, project back.

    A ``MultiheadAttention[D, QPos, KPos, Embed, Head, HeadDim]`` (dtype, query and key
    position axes, feature axis, head axes; ``MultiheadAttention(Embed, 64, num_heads=4,
    query_pos=Time, ...)`` is a ``MultiheadAttention[F32, Time, KeyPos, Embed, Head,
    HeadDim]``) maps a query ``Tensor[D, *B, QPos, Embed]`` (keys and values ``[*B, KPos,
    Embed]``) to ``Tensor[D, *B, QPos, Embed]``. The mypy plugin runs the layer's own checks
    (any layout, the mask's axes); pyright accepts the batch-first and time-first layouts.

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
        implementation: the attention path, as for :func:`dot_product_attention`
            (dropout always takes the einsum path: the fused call has none).
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
    implementation: AttentionPath = eqx.field(static=True)

    @checks_choices
    def __init__(
        self,
        embed_axis: type[E],
        embed_size: int,
        *,
        num_heads: int,
        query_pos: type[Q],
        key_pos: type[K] = KeyPos,  # type: ignore[assignment]  # K's default
        head_size: int | None = None,
        head_axis: type[H] = Head,  # type: ignore[assignment]  # H's default
        head_dim_axis: type[HD] = HeadDim,  # type: ignore[assignment]  # HD's default
        causal: bool = False,
        use_bias: bool = False,
        dropout_p: float = 0.0,
        weight_init: _init.Initializer | None = None,
        dtype: type[D] = F32,  # type: ignore[assignment]  # D defaults to F32
        implementation: AttentionPath = "auto",
        key: jax.Array,
    ) -> None:
        axes = (embed_axis, query_pos, key_pos, head_axis, head_dim_axis)
        for a in axes:
            check_axis_label(a, "MultiheadAttention")
        distinct("MultiheadAttention", axes)
        (self.embed_axis, self.query_pos, self.key_pos, self.head_axis, self.head_dim_axis) = axes
        if head_size is None:
            if embed_size % num_heads:
                raise ValueError(
                    f"MultiheadAttention: embed_size {embed_size} does not "
                    f"divide into {num_heads} heads; give head_size"
                )
            head_size = embed_size // num_heads
        init = weight_init or _init.glorot_uniform()
        heads = {head_axis: num_heads, head_dim_axis: head_size}
        k1, k2, k3, k4 = jax.random.split(key, 4)
        self.query_proj, self.key_proj, self.value_proj = (
            init(
                k,
                {**heads, embed_axis: embed_size},
                fan_in=embed_axis,
                fan_out=(head_axis, head_dim_axis),
                dtype=dtype,
            )
            for k in (k1, k2, k3)
        )
        self.output_proj = init(
            k4,
            {embed_axis: embed_size, **heads},
            fan_in=(head_axis, head_dim_axis),
            fan_out=embed_axis,
            dtype=dtype,
        )
        zeros = _init.zeros()
        self.biases = (
            (
                zeros(k1, heads, dtype=dtype),
                zeros(k1, heads, dtype=dtype),
                zeros(k1, heads, dtype=dtype),
                zeros(k1, {embed_axis: embed_size}, dtype=dtype),
            )
            if use_bias
            else None
        )
        self.dropout = Dropout(dropout_p) if dropout_p > 0 else None
        self.causal = causal
        self.implementation = implementation

    def _project(self, x: AnyTensor, w: AnyTensor, i: int) -> AnyTensor:
        y = contract(x, w, over=self.embed_axis)
        return y + broadcast(self.biases[i], y) if self.biases is not None else y

    @overload  # the two layouts overlap where the batch is empty (the same result)
    def __call__(  # type: ignore[overload-overlap]
        self,
        query: Tensor[D, *B, Q, E],
        key_: Tensor[D, *BK, K, E] | None = None,
        value: Tensor[D, *BK, K, E] | None = None,
        *,
        mask: Tensor[Bool, *tuple[Any, ...]] | None = None,
        key: jax.Array | None = None,
        inference: bool | None = None,
    ) -> Tensor[D, *B, Q, E]: ...
    @overload
    def __call__(
        self,
        query: Tensor[D, Q, *B, E],
        key_: Tensor[D, K, *BK, E] | None = None,
        value: Tensor[D, K, *BK, E] | None = None,
        *,
        mask: Tensor[Bool, *tuple[Any, ...]] | None = None,
        key: jax.Array | None = None,
        inference: bool | None = None,
    ) -> Tensor[D, Q, *B, E]: ...
    def __call__(
        self,
        query: AnyTensor,
        key_: AnyTensor | None = None,
        value: AnyTensor | None = None,
        *,
        mask: AnyTensor | None = None,
        key: jax.Array | None = None,
        inference: bool | None = None,
    ) -> AnyTensor:
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
        drop: Callable[[AnyTensor], AnyTensor] | None = None
        if self.dropout is not None:
            dropout = self.dropout

            def dropped(w: AnyTensor) -> AnyTensor:
                return dropout(w, key=key, inference=inference)

            drop = dropped
        causal = (self.query_pos, query.size(self.query_pos)) if self.causal else None
        out = _attention(
            q,
            k,
            v,
            self.head_dim_axis,
            self.key_pos,
            mask,
            drop,
            implementation=self.implementation,
            heads=self.head_axis,
            causal=causal,
        )
        y = contract(out, self.output_proj, over=(self.head_axis, self.head_dim_axis))
        return y + broadcast(self.biases[3], y) if self.biases is not None else y


def _and(a: AnyTensor, b: AnyTensor) -> AnyTensor:
    axes = tuple(dict.fromkeys((*a.axes, *b.axes)))
    sizes = {**a.sizes, **b.sizes}
    ab, bb = broadcast(a, axes, sizes), broadcast(b, axes, sizes)
    return where(ab, bb, False)
