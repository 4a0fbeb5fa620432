"""``Embedding``: integer ids to vectors along a named embedding axis."""

from __future__ import annotations

from typing import Any, Generic, TypeVar, TypeVarTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from ..core import F32, Axis, DType, Tensor
from ..core.internal import axis_name, check_axis_label, fail
from ..ops import take
from . import _init
from ._util import distinct, forbid

__all__ = ["Embedding"]

V = TypeVar("V", bound=Axis)
E = TypeVar("E", bound=Axis)
B = TypeVarTuple("B")


class Embedding(eqx.Module, Generic[V, E]):
    """A lookup table ``Tensor[F32, Vocab, Embed]``: ids ``[*B]`` -> vectors ``[*B, Embed]``.

    The lookup is a gather (``ax.take``); its backward scatter-adds into the rows read.
    Ids outside ``[0, vocab_size)`` are clipped.

    Args:
        vocab_axis, embed_axis: the table's axes.
        vocab_size, embed_size: their sizes.
        weight_init: initialiser of the table (standard normal by default).
        dtype, key: parameter dtype; PRNG key (keyword only).

    Example:
        >>> emb = ax.nn.Embedding(Vocab, Embed, 10_000, 64, key=jax.random.key(0))
        >>> emb(token_ids)           # Tensor[I32, Batch, Time] -> Tensor[F32, Batch, Time, Embed]
    """

    weight: Tensor[F32, V, E]
    vocab_axis: type[V] = eqx.field(static=True)
    embed_axis: type[E] = eqx.field(static=True)

    def __init__(self, vocab_axis: type[V], embed_axis: type[E], vocab_size: int,
                 embed_size: int, *, weight_init: _init.Initializer | None = None,
                 dtype: type[DType] = F32, key: jax.Array) -> None:
        check_axis_label(vocab_axis, "Embedding")
        check_axis_label(embed_axis, "Embedding")
        distinct("Embedding", (vocab_axis, embed_axis))
        self.vocab_axis, self.embed_axis = vocab_axis, embed_axis
        self.weight = (weight_init or _init.normal(1.0))(
            key, {vocab_axis: vocab_size, embed_axis: embed_size}, fan_in=vocab_axis,
            fan_out=embed_axis, dtype=dtype)

    def __call__(self, ids: Tensor[Any, *B], *, key: jax.Array | None = None
                 ) -> Tensor[F32, *B, E]:
        """Look up ``ids`` (an integer Tensor); ``key`` is ignored."""
        n, d = self.weight.shape
        name = (f"Embedding({axis_name(self.vocab_axis)}={n} -> "
                f"{axis_name(self.embed_axis)}={d})")
        if not jnp.issubdtype(ids.dtype.numpy, jnp.integer):
            raise fail(name, (ids,), f"ids must be integers, got {ids.dtype.__name__} "
                       "(convert with astype(ax.I32))")
        forbid(name, (ids,), ids, (self.vocab_axis, self.embed_axis), what="ids")
        return take(self.weight, self.vocab_axis, ids)
