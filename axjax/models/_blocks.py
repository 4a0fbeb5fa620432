"""A model's blocks: a tuple called in a Python loop (``unroll=True``), or one
``ax.nn.LayerStack`` over ``ax.nn.Layer`` called as one scan (``unroll=False``), with or
without a ``KVCache`` per block.

The stacked form traces and compiles one block whatever the depth. Its cache is one
``KVCache`` stacked over ``Layer``, carried through the stack's scan (``scan_layers``): each
layer writes its new positions into its own slice in place and reads that slice, so a decode
step copies no cache. The unrolled form has a ``KVCache`` per block, a tuple.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import jax
import jax.numpy as jnp

from ..core import AnyTensor, Axis, AxisError, Tensor
from ..core._internal import axis_name, check_indices, describe, state_mismatch
from ..nn import KVCache, Layer, LayerStack
from ..nn._internal import scan_layers

__all__ = [
    "Blocks",
    "Caches",
    "cache_lengths",
    "check_ids",
    "init_caches",
    "make_blocks",
    "run_blocks",
    "run_cached",
]

T = TypeVar("T")
K = TypeVar("K")

#: a model's blocks: a tuple of them, or one stack of them over ``Layer``
Blocks = tuple[K, ...] | LayerStack[K, Layer]
#: a model's KV cache: one per block (a tuple of blocks), or one stacked over ``Layer`` (a
#: stack of blocks)
Caches = tuple[KVCache, ...] | KVCache
#: what the stack's scan carries through the layers: x, the stacked keys and values
_Carry = tuple[Any, AnyTensor, AnyTensor]


def make_blocks(
    make: Callable[[jax.Array], K], n: int, key: jax.Array, unroll: bool, where: str
) -> Blocks[K]:
    """``n`` blocks ``make(k)``, one key each (``jax.random.split(key, n)``, in both forms)."""
    if not isinstance(unroll, bool):
        raise TypeError(
            f"{where}: unroll is True (a tuple of blocks) or False (a LayerStack), got {unroll!r}"
        )
    if unroll:
        return tuple(make(k) for k in jax.random.split(key, n))
    return LayerStack.init(make, n, Layer, key=key)


def run_blocks(blocks: Blocks[Any], x: T) -> T:
    """``x`` through every block: a loop over the tuple, or the stack's one scan."""
    if isinstance(blocks, LayerStack):
        out: T = blocks(x)
        return out
    for block in blocks:
        x = block(x)
    return x


def init_caches(blocks: Blocks[Any], batch: Mapping[type[Axis], int], max_len: int) -> Caches:
    """An empty ``KVCache`` per block (the blocks' ``attn.init_cache``); a stack's: one cache
    stacked over ``Layer``."""
    if isinstance(blocks, LayerStack):
        # one layer's cache (the sizes are by axis: the stacked projections give them)
        one: KVCache = blocks.layers.attn.init_cache(batch, max_len)

        def stacked(t: AnyTensor) -> AnyTensor:
            shape = (len(blocks), *t.array.shape)
            return Tensor(jnp.zeros(shape, t.array.dtype), (blocks.axis, *t.axes))

        return KVCache(stacked(one.keys), stacked(one.values), one.length, one.key_pos, blocks.axis)
    return tuple(b.attn.init_cache(batch, max_len) for b in blocks)


def check_ids(where: str, ids: object, pos: type[Axis], vocab: int) -> None:
    """A model's ``ids`` argument, the same in every family, in the order a user reads it:
    a ``TypeError`` for a non-Tensor, an ``AxisError`` (the Tensor shown) for one that is
    not integers with ``pos`` last, then (concrete ids only: traced ones keep the clamp
    rule) a ``ValueError`` for an id outside the vocabulary, named by the model."""
    if not isinstance(ids, Tensor):
        raise TypeError(f"{where}: ids are a Tensor[I32, *Batch, Pos], got {type(ids).__name__}")
    if not ids.axes or ids.axes[-1] is not pos or not jnp.issubdtype(ids.array.dtype, jnp.integer):
        raise AxisError(
            f"{where}: ids are a Tensor[I32, *Batch, {axis_name(pos)}] (integers, "
            f"{axis_name(pos)} last), got {describe(ids)}"
        )
    check_indices(
        where, ids, vocab, what="id", noun="a token of the vocabulary",
        of=f"of {where}'s vocabulary of {vocab}",
    )  # fmt: skip


def cache_lengths(
    blocks: Blocks[Any], caches: Caches, where: str, ids: AnyTensor | None = None
) -> AnyTensor:
    """The cached positions of each row (``[*Batch]``), the caches checked against the
    blocks (a tuple of one per block, or a stack's one stacked over ``Layer``) and against
    the batch of ``ids`` (the batch each cache was made for)."""
    lengths = _cache_lengths(blocks, caches, where)
    if ids is not None:
        _check_batch(where, lengths, ids)
    return lengths


def _check_batch(where: str, lengths: AnyTensor, ids: AnyTensor) -> None:
    """A cache made for another batch than the one of ``ids`` (the ids' axes but the last,
    the positions): the state check's message (core/_state.py), before the write fails."""
    made = dict(zip(lengths.axes, lengths.shape, strict=True))
    batch = dict(zip(ids.axes[:-1], ids.shape[:-1], strict=True))
    if made != batch:
        shown = ", ".join(f"{axis_name(a)}: {n}" for a, n in batch.items())
        raise state_mismatch(
            where,
            "cache",
            "these ids",
            f"ids of the batch it was made for ({_sizes(made)}, by init_cache)",
            f"ids of {_sizes(batch)}",
            f"make a cache for this batch: model.init_cache({{{shown}}}, max_len)",
        )


def _sizes(sizes: Mapping[type[Axis], int]) -> str:
    return ", ".join(f"{axis_name(a)}={n}" for a, n in sizes.items()) or "no batch axis"


def _cache_lengths(blocks: Blocks[Any], caches: Caches, where: str) -> AnyTensor:
    if isinstance(blocks, LayerStack):
        if not isinstance(caches, KVCache) or caches.layer_axis is not blocks.axis:
            raise TypeError(
                f"{where}: a stacked model's cache is one KVCache stacked over "
                f"{axis_name(blocks.axis)} (make it with model.init_cache), got "
                f"{type(caches).__name__}"
            )
        if caches.keys.size(blocks.axis) != len(blocks):
            raise ValueError(
                f"{where}: cache has {caches.keys.size(blocks.axis)} layers, the model "
                f"{len(blocks)} blocks (make it with model.init_cache)"
            )
        return caches.length
    if not isinstance(caches, tuple) or not all(isinstance(c, KVCache) for c in caches):
        raise TypeError(
            f"{where}: the cache is a tuple of KVCache, one per block (make it with "
            f"model.init_cache), got {type(caches).__name__}"
        )
    if len(caches) != len(blocks):
        raise ValueError(
            f"{where}: cache has {len(caches)} entries, the model {len(blocks)} blocks "
            "(make it with model.init_cache)"
        )
    return caches[0].length


def run_cached(blocks: Blocks[Any], x: T, caches: Caches) -> tuple[T, Caches]:
    """``x`` through every block with its cache (``block(x, cache) -> (x, cache)``); the new
    caches. A stack's one scan carries the stacked cache: each layer writes its new
    positions into its slice in place (``KVCache.layer_view``), nothing is stacked or
    unstacked. The caller has checked the caches (:func:`cache_lengths`)."""
    if not isinstance(blocks, LayerStack):
        assert isinstance(caches, tuple)
        new: list[KVCache] = []
        for block, c in zip(blocks, caches, strict=True):
            x, c = block(x, c)
            new.append(c)
        return x, tuple(new)
    assert isinstance(caches, KVCache)
    start, key_pos, axis = caches.length, caches.key_pos, caches.layer_axis

    def layer(block: Any, carry: _Carry, i: jax.Array) -> tuple[_Carry, jax.Array]:
        h, keys, values = carry  # every layer writes at the step's start
        h, cache = block(h, KVCache(keys, values, start, key_pos, axis, i))
        return (h, cache.keys, cache.values), cache.length.array

    (x, keys, values), lengths = scan_layers(
        blocks, (x, caches.keys, caches.values), jnp.arange(len(blocks)), layer
    )
    return x, KVCache(keys, values, Tensor(lengths[-1], start.axes), key_pos, axis)
