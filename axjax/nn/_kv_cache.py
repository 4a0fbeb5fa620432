"""The KV cache: the keys and values a decoder has seen, written one call at a time.

Attention layers make it (``init_cache``) and take it back (``cache=``): the prefill of a
prompt and each decode step are the same call. Each batch row has its own length: a row's
positions are stored from 0 in the cache, so rows of different lengths (a batch of ragged
prompts) decode side by side, and a fused kernel can take the lengths as sequence lengths.
A stacked model keeps one cache stacked over its layer axis: each layer reads and writes its
own slice in place (:meth:`KVCache.layer_view`), nothing is stacked or unstacked per step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic

import equinox as eqx
import jax
import jax.numpy as jnp
from typing_extensions import TypeVar

from ..core import I32, AnyTensor, Axis, AxisError, DType, Tensor
from ..core._internal import (
    axes_names,
    axis_name,
    check_indices,
    int_in_range,
    positive_int,
    public_method,
)
from ..ops import rename, transpose

__all__ = ["KVCache"]

#: a KVCache's dtype and key axis (``KVCache[F32, KPos]``; bare ``KVCache``: any)
_CD = TypeVar("_CD", bound=DType, default=Any)
_CK = TypeVar("_CK", bound=Axis, default=Any)
_QP = TypeVar("_QP", bound=Axis)


class KVCache(eqx.Module, Generic[_CD, _CK]):
    """The keys and values a decoder has seen: heads-major ``[*Batch, Head, KeyPos,
    HeadDim]`` tensors of a static ``max_len`` positions, and ``length``, how many positions
    of each batch row are filled (``Tensor[I32, *Batch]``).

    A ``KVCache[D, KPos]`` holds ``D`` keys along ``KPos``: the layer whose ``init_cache``
    made it, and only a layer of that key axis, takes it (statically in both checkers).

    Made by :meth:`MultiheadAttention.init_cache`; ``mha(x, cache=cache)`` writes the keys
    and values of ``x``'s positions at each row's ``length`` and returns ``(y, cache)`` with
    the lengths advanced, so that a prefill (the prompt) and each decode step (one position)
    run the same layer, the same weights. Rows are stored from position 0: a batch of
    prompts of different lengths is prefilled right-padded, then :meth:`with_lengths` sets
    each row's true length (the padding is never attended, and the next steps overwrite it).
    Writing past ``max_len`` is an error, never a wrap-around. A pytree: it can be carried
    through ``jax.lax.scan`` and ``jit``.

    A stacked model's cache (``layer_axis``, the stacking axis, first in ``keys`` and
    ``values``) holds every layer's; the lengths are shared by the layers. Inside the
    stack's scan, :meth:`layer_view` gives layer ``i``'s cache, which reads and writes that
    layer's slice of the stacked arrays in place.

    Example:
        >>> cache = mha.init_cache({Batch: 2}, max_len=16)
        >>> y, cache = mha(prompt, cache=cache)     # [Batch, Time=5, Embed]
        >>> y, cache = mha(token, cache=cache)      # [Batch, Time=1, Embed]; lengths [6, 6]
    """

    keys: Tensor[_CD, *tuple[Any, ...]]
    values: Tensor[_CD, *tuple[Any, ...]]
    length: Tensor[I32, *tuple[Any, ...]]
    key_pos: type[_CK] = eqx.field(static=True)
    layer_axis: type[Axis] | None = eqx.field(static=True, default=None)
    layer: jax.Array | None = None

    @property
    def max_len(self) -> int:
        """The static number of positions the cache holds."""
        return int(self.keys.size(self.key_pos))

    @property
    def n_layers(self) -> int:
        """The layers of a stacked cache (1 for one layer's)."""
        return 1 if self.layer_axis is None else int(self.keys.size(self.layer_axis))

    @property
    def rows(self) -> tuple[type[Axis], ...]:
        """The batch axes: one length each row."""
        return self.length.axes

    @public_method(method="positions")  # through generate, blamed on the prompt
    def positions(self, query_pos: type[_QP], n: int) -> Tensor[I32, *tuple[Any, ...]]:
        """The positions of the next ``n`` queries of each row: ``[*Batch, query_pos]``, row
        ``b``'s counting from its ``length`` (a model's learned positions or RoPE for a
        decode step).

        Example:
            >>> where = cache.positions(Time, 1)        # [Batch, Time=1]: each row's next
            >>> x = x + ax.broadcast(ax.take(table, Ctx, where), x)
        """
        n = positive_int("KVCache.positions", "n", n)
        start = self.length.array
        steps = jnp.arange(n, dtype=jnp.int32).reshape((1,) * start.ndim + (n,))
        return Tensor(start[..., None] + steps, (*self.rows, query_pos))

    def layer_view(self, layer: jax.Array | int) -> KVCache[_CD, _CK]:
        """Layer ``layer``'s cache of a stacked one: it reads and writes that slice in place."""
        if self.layer_axis is None:
            raise TypeError("KVCache.layer_view: the cache is not stacked over a layer axis")
        if not isinstance(layer, jax.Array):  # a traced index is the scan's own
            layer = int_in_range("KVCache.layer_view", "layer", layer, 0, self.n_layers - 1)
        return KVCache(
            self.keys, self.values, self.length, self.key_pos, self.layer_axis, jnp.asarray(layer)
        )

    def with_lengths(self, lengths: AnyTensor | jax.Array) -> KVCache[_CD, _CK]:
        """The cache with each row's length set to ``lengths`` (``[*Batch]``): positions past
        a row's length are ignored, and overwritten by the next writes. After the prefill of
        right-padded prompts, the true lengths."""
        arr = lengths.array if isinstance(lengths, Tensor) else jnp.asarray(lengths)
        if isinstance(lengths, Tensor) and set(lengths.axes) != set(self.rows):
            raise AxisError(
                f"KVCache.with_lengths: lengths over ({axes_names(lengths.axes)}), the cache's "
                f"rows are ({axes_names(self.rows)})"
            )
        if isinstance(lengths, Tensor):
            arr = transpose(lengths, *self.rows).array
        if arr.shape != self.length.array.shape:
            raise AxisError(
                f"KVCache.with_lengths: lengths of shape {arr.shape}, the cache's rows "
                f"({axes_names(self.rows)}) are {self.length.array.shape}"
            )
        check_indices(
            "KVCache.with_lengths", arr, self.max_len + 1, what="length",
            noun="a row's length", of=f"for a cache of max_len {self.max_len}", at=self.rows,
        )  # fmt: skip
        length: Tensor[I32, *tuple[Any, ...]] = Tensor(arr.astype(jnp.int32), self.rows)
        return KVCache(self.keys, self.values, length, self.key_pos, self.layer_axis, self.layer)

    def read(self) -> tuple[Tensor[_CD, *tuple[Any, ...]], Tensor[_CD, *tuple[Any, ...]]]:
        """The keys and values of this layer (a stacked cache's: of :meth:`layer_view`'s)."""
        if self.layer_axis is None:
            return self.keys, self.values
        if self.layer is None:
            raise TypeError(
                "KVCache.read: a stacked cache is read one layer at a time (layer_view(i))"
            )
        i = self.layer

        def one(t: Tensor[_CD, *tuple[Any, ...]]) -> Tensor[_CD, *tuple[Any, ...]]:
            return Tensor(jax.lax.dynamic_index_in_dim(t.array, i, 0, False), t.axes[1:])

        return one(self.keys), one(self.values)

    def write(self, keys: AnyTensor, values: AnyTensor, query_pos: type[Axis]) -> KVCache[_CD, _CK]:
        """The cache with ``keys``/``values`` (over ``query_pos`` instead of ``key_pos``, and
        otherwise the cache's axes) written at each row's ``length``; an error where they
        overflow. Only the new positions are written (a scatter, in place under ``jit``)."""
        n = int(keys.size(query_pos))
        if n > self.max_len:
            raise AxisError(
                f"KVCache: {n} new positions ({axis_name(query_pos)}) overflow the cache of "
                f"max_len {self.max_len} ({axis_name(self.key_pos)}); make a larger cache "
                "with init_cache(..., max_len=...)"
            )
        start = eqx.error_if(
            self.length.array,
            jnp.any(self.length.array + n > self.max_len),
            f"KVCache overflow: writing {n} position(s) past the static max_len "
            f"{self.max_len} ({axis_name(self.key_pos)}); make a larger cache with "
            "init_cache(..., max_len=...)",
        )
        put_keys = self._scatter(self.keys, keys, query_pos, start, n)
        put_values = self._scatter(self.values, values, query_pos, start, n)
        length: Tensor[I32, *tuple[Any, ...]] = Tensor(start + n, self.rows)
        return KVCache(put_keys, put_values, length, self.key_pos, self.layer_axis, self.layer)

    def _scatter(
        self,
        cache: Tensor[_CD, *tuple[Any, ...]],
        new: AnyTensor,
        query_pos: type[Axis],
        start: jax.Array,
        n: int,
    ) -> Tensor[_CD, *tuple[Any, ...]]:
        """``new``'s ``n`` positions into ``cache`` at ``start`` (``[*rows]``) of each row
        (and at the view's layer): one scatter whose windows are the other axes."""
        axes = cache.axes
        stacked = self.layer_axis is not None
        if stacked and self.layer is None:
            raise TypeError(
                "KVCache.write: a stacked cache is written one layer at a time (layer_view(i))"
            )
        rows = self.rows
        inner = axes[1:] if stacked else axes
        rest = tuple(a for a in inner if a not in rows and a is not self.key_pos)
        new = transpose(rename(new, query_pos, self.key_pos), *rows, self.key_pos, *rest)
        grid = jnp.meshgrid(
            *(jnp.arange(cache.size(a), dtype=jnp.int32) for a in rows),
            jnp.arange(n, dtype=jnp.int32),
            indexing="ij",
        )  # [*rows, n] each
        columns = [*grid[:-1], start[..., None] + grid[-1]]
        indexed = [*rows, self.key_pos]
        if stacked:
            assert self.layer is not None
            columns.insert(0, jnp.broadcast_to(self.layer.astype(jnp.int32), grid[-1].shape))
            indexed.insert(0, axes[0])
        dnums = jax.lax.ScatterDimensionNumbers(
            update_window_dims=tuple(range(len(rows) + 1, len(rows) + 1 + len(rest))),
            inserted_window_dims=tuple(sorted(axes.index(a) for a in indexed)),
            scatter_dims_to_operand_dims=tuple(axes.index(a) for a in indexed),
        )
        out = jax.lax.scatter(
            cache.array,
            jnp.stack(columns, axis=-1),
            new.array.astype(cache.array.dtype),
            dnums,
            indices_are_sorted=False,
            unique_indices=True,
            mode=jax.lax.GatherScatterMode.FILL_OR_DROP,
        )
        return Tensor(out, axes)


def empty_lengths(batch: Mapping[type[Axis], int]) -> Tensor[I32, *tuple[Any, ...]]:
    """The lengths of an empty cache: 0 for each row of the ``batch`` axes."""
    return Tensor(jnp.zeros(tuple(batch.values()), jnp.int32), tuple(batch))
