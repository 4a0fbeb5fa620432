"""A model's blocks: a tuple called in a Python loop (``unroll=True``), or one
``ax.nn.LayerStack`` over ``ax.nn.Layer`` called as one scan (``unroll=False``), with or
without a ``KVCache`` per block.

The stacked form traces and compiles one block whatever the depth. With caches it stacks
the blocks' caches along ``Layer``, scans the block over the parameters and caches of each
layer (one ``lax.scan``, the stack's own ``scan_layers``: the block's own cached call), and
hands back a cache per block, so a model has the same cache, ``tuple[KVCache, ...]``, in
both forms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import jax
import jax.numpy as jnp

from ..core import Axis, Tensor
from ..nn import KVCache, Layer, LayerStack
from ..nn._internal import scan_layers

__all__ = ["Blocks", "init_caches", "make_blocks", "run_blocks", "run_cached"]

T = TypeVar("T")
K = TypeVar("K")

#: a model's blocks: a tuple of them, or one stack of them over ``Layer``
Blocks = tuple[K, ...] | LayerStack[K, Layer]


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


def init_caches(
    blocks: Blocks[Any], batch: Mapping[type[Axis], int], max_len: int
) -> tuple[KVCache, ...]:
    """An empty ``KVCache`` per block (the blocks' ``attn.init_cache``)."""
    if isinstance(blocks, LayerStack):
        # one layer's cache (the sizes are by axis: the stacked projections give them)
        one: KVCache = blocks.layers.attn.init_cache(batch, max_len)
        return (one,) * len(blocks)
    return tuple(b.attn.init_cache(batch, max_len) for b in blocks)


def run_cached(
    blocks: Blocks[Any], x: T, caches: tuple[KVCache, ...], where: str
) -> tuple[T, tuple[KVCache, ...]]:
    """``x`` through every block with its cache (``block(x, cache) -> (x, cache)``); the new
    caches. The caller has checked there is one cache per block."""
    if not isinstance(blocks, LayerStack):
        new: list[KVCache] = []
        for block, c in zip(blocks, caches, strict=True):
            x, c = block(x, c)
            new.append(c)
        return x, tuple(new)
    first = caches[0]
    for i, c in enumerate(caches):
        if c.keys.sizes != first.keys.sizes or c.keys.dtype is not first.keys.dtype:
            raise ValueError(
                f"{where}: the cache of block {i} differs from block 0's in its axes, sizes "
                "or dtype (make the caches with model.init_cache)"
            )
    axes, key_pos = first.keys.axes, first.key_pos
    per_layer = (
        jnp.stack([c.keys.array for c in caches]),
        jnp.stack([c.values.array for c in caches]),
        jnp.stack([c.length for c in caches]),
    )

    def layer(block: Any, h: T, entry: tuple[jax.Array, ...]) -> tuple[T, tuple[jax.Array, ...]]:
        k, v, length = entry
        h, cache = block(h, KVCache(Tensor(k, axes), Tensor(v, axes), length, key_pos))
        return h, (cache.keys.array, cache.values.array, cache.length)

    x, (ks, vs, lengths) = scan_layers(blocks, x, per_layer, layer)
    out = tuple(
        KVCache(Tensor(ks[i], axes), Tensor(vs[i], axes), lengths[i], key_pos)
        for i in range(len(caches))
    )
    return x, out
