"""Grouped-query attention (GQA) with its own key-value head axis, and RoPE inside.

The query heads are two axes: ``KVHead`` (the key-value heads, shared with the keys and
values) and ``GroupHead`` (the query heads that read one key-value head). The score
``q ⋈ k`` over ``HeadDim`` keeps ``KVHead`` once, batched, and ``GroupHead`` as a query
axis: no key or value is repeated per query head, and a KV cache stores the key-value heads
only. Query head ``h`` of a flat layout (Hugging Face's ``q_proj``) is ``KVHead = h // g``,
``GroupHead = h % g`` for ``g = num_heads // num_kv_heads``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVarTuple, final, overload

import equinox as eqx
import jax
from typing_extensions import TypeVar

from ..core import F32, AnyTensor, Axis, AxisError, Bool, DType, KeyOf, Tensor
from ..core._internal import (
    axis_name,
    check_axis_label,
    check_mask,
    check_query_key,
    checks_choices,
    dtype_of_kind,
    fail,
    optional_positive_int,
    positive_float,
    positive_int,
)
from ..ops import broadcast, rename, transpose, zeros
from . import _init
from ._adapted import project
from ._attention_kernels import attend
from ._attention_masks import and_masks, cached_causal_mask, default_key
from ._attention_paths import AttentionPath
from ._kv_cache import KVCache, empty_lengths
from ._multihead import HeadDim
from ._registry import register_layer
from ._rope import rotary_embedding
from ._util import distinct, require

__all__ = ["GroupHead", "GroupedQueryAttention", "KVHead"]


@final
class KVHead(Axis):
    """The key-value head axis of :class:`GroupedQueryAttention`."""


@final
class GroupHead(Axis):
    """The query heads that share one key-value head (:class:`GroupedQueryAttention`)."""


# GroupedQueryAttention's dtype, query and key position axes and feature axis (the defaults
# are the constructor's)
D = TypeVar("D", bound=DType, default=F32)
Q = TypeVar("Q", bound=Axis, default=Any)
K = TypeVar("K", bound=Axis, default=KeyOf[Q])
E = TypeVar("E", bound=Axis, default=Any)
S = TypeVarTuple("S")


def _head_size(
    where: str, embed_size: int, num_heads: int, num_kv_heads: int, head_size: int | None
) -> int:
    """The per-head size (``head_size``, else ``embed_size // num_heads``), the head counts
    checked: the query heads split evenly among the key-value heads."""
    if num_heads % num_kv_heads:
        raise ValueError(
            f"{where}: num_heads {num_heads} is not a multiple of num_kv_heads "
            f"{num_kv_heads} (each key-value head is read by the same number of query heads)"
        )
    if head_size is None:
        if embed_size % num_heads:
            raise ValueError(
                f"{where}: embed_size {embed_size} does not divide into {num_heads} "
                "heads; give head_size"
            )
        head_size = embed_size // num_heads
    return head_size


def _qkv_biases(
    heads: Mapping[type[Axis], int], kv_heads: Mapping[type[Axis], int], dtype: type[DType]
) -> tuple[AnyTensor, AnyTensor, AnyTensor]:
    """Zero biases of the query (``heads``), key and value (``kv_heads``) projections."""
    zeros = _init.zeros()
    key = jax.random.key(0)  # zeros: the key is not read
    return (
        zeros(key, dict(heads), dtype=dtype),
        zeros(key, dict(kv_heads), dtype=dtype),
        zeros(key, dict(kv_heads), dtype=dtype),
    )


_KV = ("kv_head_axis", "head_dim_axis")
_HEADS = ("kv_head_axis", "group_axis", "head_dim_axis")


@register_layer(  # sized: the plugin's stand-in reads the query's number of positions
    sized=True,
    linear_maps={
        "query_proj": (("embed_axis",), _HEADS),
        "key_proj": (("embed_axis",), _KV),
        "value_proj": (("embed_axis",), _KV),
        "output_proj": (_HEADS, ("embed_axis",)),
    },
)
class GroupedQueryAttention(eqx.Module, Generic[D, Q, K, E]):
    """Causal self-attention with ``num_kv_heads`` key-value heads, each read by
    ``num_heads // num_kv_heads`` query heads, and rotary position embeddings (the Llama
    attention). ``num_kv_heads == num_heads`` is multi-head attention, ``1`` multi-query.

    Projections: query ``[KVHead, GroupHead, HeadDim, Embed]``, key and value
    ``[KVHead, HeadDim, Embed]``, output ``[Embed, KVHead, GroupHead, HeadDim]``. The call
    maps ``x`` (``[..., query_pos, ..., embed_axis, ...]``, any order) to a tensor of ``x``'s
    axes in ``x``'s order. ``rope_theta=None`` leaves out RoPE. A
    ``GroupedQueryAttention[D, Time, KeyOf[Time], Embed]`` takes a ``Tensor[D, ...]`` (its
    dtype, every checker) that holds ``Time`` and ``Embed`` and none of the axes it uses
    inside (the mypy plugin runs the layer's own checks).

    ``implementation`` is the attention path, as for :func:`dot_product_attention`
    (``"auto"``: cuDNN flash attention where it can run the call, else the einsums). The
    fused paths get the query heads ``(KVHead, GroupHead)`` flattened and the keys and
    values with ``KVHead`` only: ``jax.nn.dot_product_attention``'s own grouped-query
    layout, no key or value repeated per query head. A call without a cache is causal by
    the kernels' flag; with a cache (or a ``mask``) it needs a mask, which cuDNN cannot
    take: ``"auto"`` then takes the einsums (as :class:`MultiheadAttention` does).

    ``qkv_bias=True`` adds biases to the query, key and value projections (``biases``:
    ``[KVHead, GroupHead, HeadDim]``, ``[KVHead, HeadDim]`` twice; added after the
    projection, before RoPE; Qwen2's attention), none to the output. ``sliding_window=w``
    lets each query see only the ``w`` latest keys up to its own (position ``p`` sees key
    ``j`` where ``p - w < j <= p``; Mistral's ``sliding_window``), on every path, in the
    full call and in the cached step: the fused paths take it as
    ``local_window_size=(w - 1, 0)``, a cached step as its mask.

    Example:
        >>> attn = ax.nn.GroupedQueryAttention(Embed, 48, num_heads=4, num_kv_heads=2,
        ...                                    query_pos=Time, key=jax.random.key(0))
        >>> y = attn(h)                                   # [Batch, Time, Embed]
        >>> cache = attn.init_cache({Batch: 2}, max_len=16)
        >>> y, cache = attn(h, cache=cache)               # prefill, then one step at a time
    """

    query_proj: AnyTensor
    key_proj: AnyTensor
    value_proj: AnyTensor
    output_proj: AnyTensor
    biases: tuple[AnyTensor, AnyTensor, AnyTensor] | None
    embed_axis: type[Axis] = eqx.field(static=True)
    query_pos: type[Axis] = eqx.field(static=True)
    key_pos: type[Axis] = eqx.field(static=True)
    kv_head_axis: type[Axis] = eqx.field(static=True)
    group_axis: type[Axis] = eqx.field(static=True)
    head_dim_axis: type[Axis] = eqx.field(static=True)
    rope_theta: float | None = eqx.field(static=True)
    implementation: AttentionPath = eqx.field(static=True)
    sliding_window: int | None = eqx.field(static=True)

    @checks_choices
    def __init__(
        self,
        embed_axis: type[E],
        embed_size: int,
        *,
        num_heads: int,
        num_kv_heads: int,
        query_pos: type[Q],
        key_pos: type[K] | None = None,
        head_size: int | None = None,
        kv_head_axis: type[Axis] = KVHead,
        group_axis: type[Axis] = GroupHead,
        head_dim_axis: type[Axis] = HeadDim,
        rope_theta: float | None = 10000.0,
        weight_init: _init.Initializer | None = None,
        dtype: type[D] = F32,  # type: ignore[assignment]  # D defaults to F32
        implementation: AttentionPath = "auto",
        qkv_bias: bool = False,
        sliding_window: int | None = None,
        key: jax.Array,
    ) -> None:
        where = "GroupedQueryAttention"
        keys = default_key(where, query_pos, key_pos)
        axes = (embed_axis, query_pos, keys, kv_head_axis, group_axis, head_dim_axis)
        for a in axes:
            check_axis_label(a, where)
        distinct(where, axes)
        check_query_key(where, query_pos, axes[2])
        embed_size = positive_int(where, "embed_size", embed_size)
        num_heads = positive_int(where, "num_heads", num_heads)
        num_kv_heads = positive_int(where, "num_kv_heads", num_kv_heads)
        head_size = optional_positive_int(where, "head_size", head_size)
        self.sliding_window = optional_positive_int(where, "sliding_window", sliding_window)
        if not isinstance(qkv_bias, bool):
            raise TypeError(f"{where}: qkv_bias is a bool, got {type(qkv_bias).__name__}")
        head_size = _head_size(where, embed_size, num_heads, num_kv_heads, head_size)
        self.rope_theta = (
            None if rope_theta is None else positive_float(where, "rope_theta", rope_theta)
        )
        if self.rope_theta is not None and head_size % 2:
            raise ValueError(f"{where}: head_size {head_size} is odd; RoPE rotates pairs")
        (
            self.embed_axis,
            self.query_pos,
            self.key_pos,
            self.kv_head_axis,
            self.group_axis,
            self.head_dim_axis,
        ) = axes
        self.implementation = implementation
        init = weight_init or _init.glorot_uniform()
        kv = {kv_head_axis: num_kv_heads}
        heads = {**kv, group_axis: num_heads // num_kv_heads, head_dim_axis: head_size}
        k1, k2, k3, k4 = jax.random.split(key, 4)
        e: dict[type[Axis], int] = {embed_axis: embed_size}
        self.query_proj = init(
            k1, {**heads, **e}, fan_in=embed_axis, fan_out=tuple(heads), dtype=dtype
        )
        kv_shape = {**kv, head_dim_axis: head_size, **e}
        self.key_proj, self.value_proj = (
            init(k, kv_shape, fan_in=embed_axis, fan_out=(kv_head_axis, head_dim_axis), dtype=dtype)
            for k in (k2, k3)
        )
        self.output_proj = init(
            k4, {**e, **heads}, fan_in=tuple(heads), fan_out=embed_axis, dtype=dtype
        )
        kv_heads = {**kv, head_dim_axis: head_size}
        self.biases = _qkv_biases(heads, kv_heads, dtype) if qkv_bias else None

    def _project(self, x: AnyTensor, w: AnyTensor, i: int) -> AnyTensor:
        """``x``'s projection by ``w`` over the feature axis, and the ``i``-th bias."""
        y = project(x, w, over=self.embed_axis)
        return y + broadcast(self.biases[i], y) if self.biases is not None else y

    def init_cache(
        self, batch: Mapping[type[Axis], int], max_len: int, dtype: type[DType] | None = None
    ) -> KVCache:
        """An empty :class:`KVCache` of ``max_len`` positions: keys and values
        ``[*batch, KVHead, key_pos, HeadDim]`` (the key-value heads only), length 0."""
        where = "GroupedQueryAttention.init_cache"
        max_len = positive_int(where, "max_len", max_len)
        for a in batch:
            check_axis_label(a, where)
        sizes = {
            **{a: positive_int(where, "batch", n) for a, n in batch.items()},
            self.kv_head_axis: self.key_proj.size(self.kv_head_axis),
            self.key_pos: max_len,
            self.head_dim_axis: self.key_proj.size(self.head_dim_axis),
        }
        dt = (
            self.key_proj.dtype
            if dtype is None
            else dtype_of_kind(where, "dtype", dtype, "floating")
        )
        empty: AnyTensor = zeros(tuple(sizes.values()), *sizes, dtype=dt)
        return KVCache(empty, empty, empty_lengths(batch), self.key_pos)

    def _rope(self, t: AnyTensor, offset: int | AnyTensor) -> AnyTensor:
        if self.rope_theta is None:
            return t
        return rotary_embedding(
            t, self.query_pos, self.head_dim_axis, theta=self.rope_theta, offset=offset
        )

    @overload
    def __call__(
        self,
        x: Tensor[D, *S],
        *,
        cache: KVCache,
        mask: Tensor[Bool, *tuple[Axis, ...]] | None = None,
    ) -> tuple[Tensor[D, *S], KVCache]: ...
    @overload
    def __call__(
        self,
        x: Tensor[D, *S],
        *,
        cache: None = None,
        mask: Tensor[Bool, *tuple[Axis, ...]] | None = None,
    ) -> Tensor[D, *S]: ...
    def __call__(
        self, x: AnyTensor, *, cache: KVCache | None = None, mask: AnyTensor | None = None
    ) -> AnyTensor | tuple[AnyTensor, KVCache]:
        """Self-attention of ``x``'s positions, causal. With ``cache=`` (from
        :meth:`init_cache`) they are the positions after the ``cache.length`` cached: their
        keys and values are written into the cache, RoPE counts from ``cache.length``, and
        the call returns ``(y, cache)``. ``mask`` (Bool over score axes, true = attend) is
        combined with the causal one."""
        name = f"GroupedQueryAttention({axis_name(self.embed_axis)})"
        e = self.query_proj.size(self.embed_axis)
        require(name, (x,), x, self.embed_axis, e)
        require(name, (x,), x, self.query_pos, None)
        if x.dtype is not self.query_proj.dtype:
            raise fail(
                name,
                (x,),
                f"the input is {x.dtype.__name__}, the layer's parameters "
                f"{self.query_proj.dtype.__name__} (convert the input with astype, or "
                "cast the layer)",
            )
        for a in (self.key_pos, self.kv_head_axis, self.group_axis, self.head_dim_axis):
            if a in x.axes:
                raise AxisError(
                    f"{name}: the input already has axis {axis_name(a)}, which the layer "
                    "uses inside (rename it first)"
                )
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(f"{name}: cache= takes a KVCache, got {type(cache).__name__}")
        if cache is not None and cache.key_pos is not self.key_pos:
            raise AxisError(
                f"{name}: the cache's key axis is {axis_name(cache.key_pos)}, the layer's "
                f"{axis_name(self.key_pos)} (make it with this layer's init_cache)"
            )
        start: int | AnyTensor = 0 if cache is None else cache.length  # each row's
        q = self._rope(self._project(x, self.query_proj, 0), start)
        k = self._rope(self._project(x, self.key_proj, 1), start)
        v = self._project(x, self.value_proj, 2)
        n_query = int(x.size(self.query_pos))
        # without a cache: causal by the kernels' flag (every path); with one: the mask of
        # the filled positions up to each query's own, a traced offset (cuDNN cannot take it)
        causal: tuple[type[Axis], int] | None = None
        filled: AnyTensor | None = None
        if cache is None:
            keys, values = (
                rename(k, self.query_pos, self.key_pos),
                rename(v, self.query_pos, self.key_pos),
            )
            causal = (self.query_pos, n_query)
        else:
            w, n = self.sliding_window, cache.max_len  # the window: in the mask of the step
            filled = cached_causal_mask(self.query_pos, self.key_pos, n_query, n, cache.length, w)
            cache = cache.write(k, v, self.query_pos)
            keys, values = cache.read()
        if mask is not None:
            n_key = n_query if cache is None else cache.max_len
            sizes = {a: n for a, n in x.sizes.items() if a is not self.embed_axis}
            sizes[self.key_pos] = n_key
            sizes.update({a: q.sizes[a] for a in (self.kv_head_axis, self.group_axis)})
            check_mask(name, mask, sizes)
        if filled is not None:
            mask = filled if mask is None else and_masks(mask, filled)
        out = attend(
            q,
            keys,
            values,
            self.head_dim_axis,
            self.key_pos,
            mask,
            None,
            implementation=self.implementation,
            heads=self.kv_head_axis,
            group=self.group_axis,
            causal=causal,
            window=self.sliding_window if causal is not None else None,
        )
        heads = (self.kv_head_axis, self.group_axis, self.head_dim_axis)
        y = transpose(project(out, self.output_proj, over=heads), *x.axes)
        return y if cache is None else (y, cache)
