"""The KV cache: the keys and values a decoder has seen, written one call at a time.

Attention layers make it (``init_cache``) and take it back (``cache=``): the prefill of a
prompt and each decode step are the same call, the cache's ``length`` advanced by the
positions written.
"""

from __future__ import annotations

from typing import Any, Generic

import equinox as eqx
import jax
from typing_extensions import TypeVar

from ..core import AnyTensor, Axis, AxisError, DType, Tensor
from ..core._internal import axis_name
from ..ops import rename, transpose

__all__ = ["KVCache"]

#: a KVCache's dtype and key axis (``KVCache[F32, KPos]``; bare ``KVCache``: any)
_CD = TypeVar("_CD", bound=DType, default=Any)
_CK = TypeVar("_CK", bound=Axis, default=Any)


class KVCache(eqx.Module, Generic[_CD, _CK]):
    """The keys and values a decoder has seen: heads-major ``[*Batch, Head, KeyPos,
    HeadDim]`` tensors of a static ``max_len`` positions, and ``length``, how many are filled.

    A ``KVCache[D, KPos]`` holds ``D`` keys along ``KPos``: the layer whose ``init_cache``
    made it, and only a layer of that key axis, takes it (statically in both checkers).

    Made by :meth:`MultiheadAttention.init_cache`; ``mha(x, cache=cache)`` writes the keys
    and values of ``x``'s positions at ``length`` and returns ``(y, cache)`` with ``length``
    advanced, so that a prefill (the prompt) and each decode step (one position) run the
    same layer, the same weights. Writing past ``max_len`` is an error, never a wrap-around.
    A pytree: it can be carried through ``jax.lax.scan`` and ``jit``.

    Example:
        >>> cache = mha.init_cache({Batch: 2}, max_len=16)
        >>> y, cache = mha(prompt, cache=cache)     # [Batch, Time=5, Embed]
        >>> y, cache = mha(token, cache=cache)      # [Batch, Time=1, Embed]; length 6
    """

    keys: Tensor[_CD, *tuple[Any, ...]]
    values: Tensor[_CD, *tuple[Any, ...]]
    length: jax.Array
    key_pos: type[_CK] = eqx.field(static=True)

    @property
    def max_len(self) -> int:
        """The static number of positions the cache holds."""
        return int(self.keys.size(self.key_pos))

    def write(self, keys: AnyTensor, values: AnyTensor, query_pos: type[Axis]) -> KVCache[_CD, _CK]:
        """The cache with ``keys``/``values`` (over ``query_pos`` instead of ``key_pos``, and
        otherwise the cache's axes) written at ``length``; an error where they overflow."""
        n = int(keys.size(query_pos))
        if n > self.max_len:
            raise AxisError(
                f"KVCache: {n} new positions ({axis_name(query_pos)}) overflow the cache of "
                f"max_len {self.max_len} ({axis_name(self.key_pos)}); make a larger cache "
                "with init_cache(..., max_len=...)"
            )
        length = eqx.error_if(
            self.length,
            self.length + n > self.max_len,
            f"KVCache overflow: writing {n} position(s) past the static max_len "
            f"{self.max_len} ({axis_name(self.key_pos)}); make a larger cache with "
            "init_cache(..., max_len=...)",
        )

        def put(
            cache: Tensor[_CD, *tuple[Any, ...]], new: AnyTensor
        ) -> Tensor[_CD, *tuple[Any, ...]]:
            new = transpose(rename(new, query_pos, self.key_pos), *cache.axes)
            at = cache.axes.index(self.key_pos)
            out = jax.lax.dynamic_update_slice_in_dim(
                cache.array, new.array.astype(cache.array.dtype), length, at
            )
            return Tensor(out, cache.axes)

        return KVCache(put(self.keys, keys), put(self.values, values), length + n, self.key_pos)
