"""Multi-head attention with named heads and distinct query/key position axes: the layer
(projections, heads as axes) over the attention call (``_attention_kernels``), its masks
(``_attention_masks``) and its KV cache (``_kv_cache``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVarTuple, cast, final, overload

import equinox as eqx
import jax
from typing_extensions import TypeVar

from ..core import F32, AnyTensor, Axis, AxisError, Bool, DType, KeyOf, Tensor
from ..core._internal import (
    axis_name,
    check_axis_label,
    check_query_key,
    checks_choices,
    dtype_of_kind,
    optional_positive_int,
    positive_int,
    probability,
)
from ..ops import broadcast, rename, zeros
from . import _init
from ._adapted import project
from ._attention_kernels import attend
from ._attention_masks import and_masks, cached_causal_mask, default_key, length_mask
from ._attention_paths import AttentionPath
from ._dropout import Dropout
from ._kv_cache import KVCache, empty_lengths
from ._registry import register_layer
from ._util import distinct, known_size, require

__all__ = ["Head", "HeadDim", "MultiheadAttention"]


@final
class Head(Axis):
    """The attention-head axis (default label of :class:`MultiheadAttention`)."""


@final
class HeadDim(Axis):
    """The per-head feature axis (default label of :class:`MultiheadAttention`)."""


# MultiheadAttention's dtype and axes (the defaults are the constructor's)
D = TypeVar("D", bound=DType, default=F32)
Q = TypeVar("Q", bound=Axis, default=Any)
K = TypeVar("K", bound=Axis, default=KeyOf[Q])
E = TypeVar("E", bound=Axis, default=Any)
H = TypeVar("H", bound=Axis, default=Head)
HD = TypeVar("HD", bound=Axis, default=HeadDim)
B = TypeVarTuple("B")
BK = TypeVarTuple("BK")
_DS = TypeVar("_DS", bound=DType)


_HEADS = ("head_axis", "head_dim_axis")


@register_layer(
    linear_maps={
        "query_proj": (("embed_axis",), _HEADS),
        "key_proj": (("embed_axis",), _HEADS),
        "value_proj": (("embed_axis",), _HEADS),
        "output_proj": (_HEADS, ("embed_axis",)),
    }
)
class MultiheadAttention(eqx.Module, Generic[D, Q, K, E, H, HD]):
    """Multi-head attention: project, attend per head, project back.

    A ``MultiheadAttention[D, QPos, KPos, Embed, Head, HeadDim]`` (dtype, query and key
    position axes, feature axis, head axes; ``MultiheadAttention(Embed, 64, num_heads=4,
    query_pos=Time, ...)`` is a ``MultiheadAttention[F32, Time, KeyOf[Time], Embed, Head,
    HeadDim]``) maps a query ``Tensor[D, *B, QPos, Embed]`` (keys and values ``[*B, KPos,
    Embed]``) to ``Tensor[D, *B, QPos, Embed]``. The mypy plugin runs the layer's own checks
    (any layout, the mask's axes); pyright accepts the batch-first and time-first layouts.

    Projections are ``Tensor[F32, Head, HeadDim, Embed]`` (query, key, value) and
    ``Tensor[F32, Embed, Head, HeadDim]`` (output), so heads are an axis, not a reshape.

    Args:
        embed_axis, embed_size: the model's feature axis and its size.
        num_heads: number of heads; ``head_size`` defaults to ``embed_size // num_heads``.
        query_pos: the position axis of the queries (``Time``, say).
        key_pos: the position axis of keys and values (``ax.KeyOf[query_pos]`` by default,
            the key tied to the queries; in self-attention the query positions are renamed
            to it).
        head_axis, head_dim_axis: labels of the heads and per-head features.
        causal: mask out keys after the query (self-attention).
        use_bias: add biases to the projections.
        dropout_p: dropout on the attention weights (needs ``key`` when training; its
            ``inference`` flag is a bool leaf, so differentiate with ``eqx.filter_grad``).
        implementation: the attention path, as for :func:`dot_product_attention`
            (dropout while training takes the einsum path, the fused call has none;
            ``"cudnn"`` with it raises).
        dtype, key: parameter dtype; PRNG key (keyword only).

    Example:
        >>> mha = ax.nn.MultiheadAttention(Embed, 64, num_heads=4, query_pos=Time,
        ...                                causal=True, key=jax.random.key(0))
        >>> mha(h)          # [Batch, Time, Embed] -> [Batch, Time, Embed] (self-attention)
        >>> mha(h, memory)  # cross-attention; memory is [Batch, ax.KeyOf[Time], Embed]
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
        key_pos: type[K] | None = None,
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
        keys = default_key("MultiheadAttention", query_pos, key_pos)
        axes = (embed_axis, query_pos, keys, head_axis, head_dim_axis)
        for a in axes:
            check_axis_label(a, "MultiheadAttention")
        distinct("MultiheadAttention", axes)
        check_query_key("MultiheadAttention", query_pos, axes[2])
        (self.embed_axis, self.query_pos, self.key_pos, self.head_axis, self.head_dim_axis) = axes
        embed_size = positive_int("MultiheadAttention", "embed_size", embed_size)
        num_heads = positive_int("MultiheadAttention", "num_heads", num_heads)
        head_size = optional_positive_int("MultiheadAttention", "head_size", head_size)
        dropout_p = probability("MultiheadAttention", "dropout_p", dropout_p, one_ok=True)
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
        y = project(x, w, over=self.embed_axis)
        return y + broadcast(self.biases[i], y) if self.biases is not None else y

    @overload
    def init_cache(
        self, batch: Mapping[type[Axis], int], max_len: int, dtype: None = None
    ) -> KVCache[D, K]: ...
    @overload
    def init_cache(
        self, batch: Mapping[type[Axis], int], max_len: int, dtype: type[_DS]
    ) -> KVCache[_DS, K]: ...
    def init_cache(
        self, batch: Mapping[type[Axis], int], max_len: int, dtype: type[DType] | None = None
    ) -> KVCache[Any, K]:
        """An empty :class:`KVCache` of ``max_len`` positions for queries with the ``batch``
        axes (``{Batch: 16}``): keys and values ``[*batch, Head, key_pos, HeadDim]`` in
        ``dtype`` (the projections' by default), length 0."""
        max_len = positive_int("MultiheadAttention.init_cache", "max_len", max_len)
        for a in batch:
            check_axis_label(a, "MultiheadAttention.init_cache")
        sizes = {
            **{a: positive_int("init_cache", "batch", n) for a, n in batch.items()},
            self.head_axis: self.key_proj.size(self.head_axis),
            self.key_pos: max_len,
            self.head_dim_axis: self.key_proj.size(self.head_dim_axis),
        }
        dt = (
            self.key_proj.dtype
            if dtype is None
            else dtype_of_kind("MultiheadAttention.init_cache", "dtype", dtype, "floating")
        )
        empty: AnyTensor = zeros(tuple(sizes.values()), *sizes, dtype=dt)
        key_pos = cast("type[K]", self.key_pos)
        return KVCache(empty, empty, empty_lengths(batch), key_pos)

    @overload  # the two layouts overlap where the batch is empty (the same result)
    def __call__(  # type: ignore[overload-overlap]  # as the line above says
        self,
        query: Tensor[D, *B, Q, E],
        *,
        cache: KVCache[_DS, K],
        mask: Tensor[Bool, *tuple[Any, ...]] | None = None,
        key_lengths: Tensor[Any, *tuple[Any, ...]] | None = None,
        key: jax.Array | None = None,
        inference: bool | None = None,
    ) -> tuple[Tensor[D, *B, Q, E], KVCache[_DS, K]]: ...
    @overload
    def __call__(
        self,
        query: Tensor[D, Q, *B, E],
        *,
        cache: KVCache[_DS, K],
        mask: Tensor[Bool, *tuple[Any, ...]] | None = None,
        key_lengths: Tensor[Any, *tuple[Any, ...]] | None = None,
        key: jax.Array | None = None,
        inference: bool | None = None,
    ) -> tuple[Tensor[D, Q, *B, E], KVCache[_DS, K]]: ...
    @overload
    def __call__(  # type: ignore[overload-overlap]  # the layouts overlap (see above)
        self,
        query: Tensor[D, *B, Q, E],
        key_: Tensor[D, *BK, K, E] | None = None,
        value: Tensor[D, *BK, K, E] | None = None,
        *,
        mask: Tensor[Bool, *tuple[Any, ...]] | None = None,
        key_lengths: Tensor[Any, *tuple[Any, ...]] | None = None,
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
        key_lengths: Tensor[Any, *tuple[Any, ...]] | None = None,
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
        key_lengths: AnyTensor | None = None,
        key: jax.Array | None = None,
        inference: bool | None = None,
        cache: KVCache[Any, Any] | None = None,
    ) -> AnyTensor | tuple[AnyTensor, KVCache[Any, Any]]:
        """Attend from ``query`` to ``key_``/``value`` (both default to ``query``).

        With ``cache=`` (a :class:`KVCache`, self-attention only) the query's positions are
        the next ones after the ``cache.length`` cached: their keys and values are written
        into the cache, the query attends to every filled position (causally: to those not
        after its own) and the call returns ``(y, cache)``: the prefill of a prompt and each
        decode step are the same call.

        ``mask`` is a Bool tensor over any of the score axes (batch axes, ``query_pos``,
        ``head_axis``, ``key_pos``), true where attention is allowed. ``key_lengths`` is an
        integer tensor over (some of) the batch axes: how many keys of each sequence are
        real, the rest padding (cuDNN takes it as sequence lengths, a mask would be a
        ``[batch, heads, queries, keys]`` tensor). ``key`` drives the attention dropout.
        """
        name = f"MultiheadAttention({axis_name(self.embed_axis)})"
        e = self.query_proj.size(self.embed_axis)
        require(name, (query,), query, self.embed_axis, e, "query")
        require(name, (query,), query, self.query_pos, None, "query")
        if cache is not None:
            if key_ is not None or value is not None:
                raise TypeError(
                    f"{name}: a KVCache is for self-attention; give the query only "
                    "(its keys and values go into the cache)"
                )
            return self._cached(query, cache, mask, key_lengths, key, inference)
        keys = rename(query, self.query_pos, self.key_pos) if key_ is None else key_
        values = keys if value is None else value
        for what, t in (("key", keys), ("value", values)):
            require(name, (query, keys, values), t, self.embed_axis, e, what)
            require(name, (query, keys, values), t, self.key_pos, None, what)
        q = self._project(query, self.query_proj, 0)
        k = self._project(keys, self.key_proj, 1)
        v = self._project(values, self.value_proj, 2)
        causal = (self.query_pos, query.size(self.query_pos)) if self.causal else None
        return self._attend(q, k, v, mask, key_lengths, key, inference, causal)

    def _dropout(
        self, key: jax.Array | None, inference: bool | None
    ) -> Callable[[AnyTensor], AnyTensor] | None:
        drop: Callable[[AnyTensor], AnyTensor] | None = None
        off = self.dropout is None or (
            (self.dropout.inference if inference is None else inference) is True
        )
        if self.dropout is not None and not off:  # off in inference: every path can run
            dropout = self.dropout

            def dropped(w: AnyTensor) -> AnyTensor:
                return dropout(w, key=key, inference=inference)

            drop = dropped
        return drop

    def _attend(
        self,
        q: AnyTensor,
        k: AnyTensor,
        v: AnyTensor,
        mask: AnyTensor | None,
        key_lengths: AnyTensor | None,
        key: jax.Array | None,
        inference: bool | None,
        causal: tuple[type[Axis], int] | None,
    ) -> AnyTensor:
        out = attend(
            q,
            k,
            v,
            self.head_dim_axis,
            self.key_pos,
            mask,
            self._dropout(key, inference),
            implementation=self.implementation,
            heads=self.head_axis,
            causal=causal,
            key_lengths=key_lengths,
        )
        y = project(out, self.output_proj, over=(self.head_axis, self.head_dim_axis))
        return y + broadcast(self.biases[3], y) if self.biases is not None else y

    def _cached(
        self,
        query: AnyTensor,
        cache: KVCache[Any, Any],
        mask: AnyTensor | None,
        key_lengths: AnyTensor | None,
        key: jax.Array | None,
        inference: bool | None,
    ) -> tuple[AnyTensor, KVCache[Any, Any]]:
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache= takes a KVCache, got {type(cache).__name__}")
        if cache.key_pos is not self.key_pos:
            raise AxisError(
                f"MultiheadAttention: the cache's key axis is {axis_name(cache.key_pos)}, "
                f"the layer's {axis_name(self.key_pos)} (make it with this layer's init_cache)"
            )
        q = self._project(query, self.query_proj, 0)
        start = cache.length  # each row's position of its first query
        cache = cache.write(
            self._project(query, self.key_proj, 1),
            self._project(query, self.value_proj, 2),
            self.query_pos,
        )
        n_query, n_key = known_size(query, self.query_pos), cache.max_len
        if self.causal:  # keys up to each query's own position: none of the empty ones
            filled = cached_causal_mask(self.query_pos, self.key_pos, n_query, n_key, start)
        else:
            filled = length_mask(cache.length, self.key_pos, n_key)
        mask = filled if mask is None else and_masks(mask, filled)
        keys, values = cache.read()
        out = self._attend(q, keys, values, mask, key_lengths, key, inference, None)
        return out, cache
