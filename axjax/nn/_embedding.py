"""``Embedding``: integer ids to vectors along a named embedding axis."""

from __future__ import annotations

from typing import Any, Generic, TypeVarTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from typing_extensions import TypeVar

from ..core import F32, Axis, DType, Integer, Tensor
from ..core._internal import axis_name, check_axis_label, fail
from ..ops import take
from . import _init
from ._registry import register_layer
from ._util import distinct, forbid

__all__ = ["Embedding"]

# the table's dtype and axes; a bare `Embedding` is `Embedding[F32, Any, Any]`
D = TypeVar("D", bound=DType, default=F32)
V = TypeVar("V", bound=Axis, default=Any)
E = TypeVar("E", bound=Axis, default=Any)
Int = TypeVar("Int", bound=Integer)  # the dtype of the ids: an integer kind
B = TypeVarTuple("B")


@register_layer()
class Embedding(eqx.Module, Generic[D, V, E]):
    """A lookup table ``Tensor[D, Vocab, Embed]``: ids ``[*B]`` -> vectors ``[*B, Embed]``.

    An ``Embedding[D, Vocab, Embed]``; the ids are an integer Tensor (statically too), which
    has neither of the table's axes.

    The lookup is a gather (``ax.take``); its backward scatter-adds into the rows read.
    Ids outside ``[0, vocab_size)`` are clipped.

    Args:
        vocab_axis, embed_axis: the table's axes.
        vocab_size, embed_size: their sizes.
        weight_init: initialiser of the table (standard normal by default).
        dtype, key: parameter dtype (``F32`` by default); PRNG key (keyword only).

    Example:
        >>> emb = ax.nn.Embedding(Vocab, Embed, 10_000, 64, key=jax.random.key(0))
        >>> emb                      # Embedding[F32, Vocab, Embed]
        >>> emb(token_ids)           # Tensor[I32, Batch, Time] -> Tensor[F32, Batch, Time, Embed]
    """

    weight: Tensor[D, V, E]
    vocab_axis: type[V] = eqx.field(static=True)
    embed_axis: type[E] = eqx.field(static=True)

    def __init__(
        self,
        vocab_axis: type[V],
        embed_axis: type[E],
        vocab_size: int,
        embed_size: int,
        *,
        weight_init: _init.Initializer | None = None,
        dtype: type[D] = F32,  # type: ignore[assignment]  # D defaults to F32
        key: jax.Array,
    ) -> None:
        check_axis_label(vocab_axis, "Embedding")
        check_axis_label(embed_axis, "Embedding")
        distinct("Embedding", (vocab_axis, embed_axis))
        self.vocab_axis, self.embed_axis = vocab_axis, embed_axis
        self.weight = (weight_init or _init.normal(1.0))(
            key,
            {vocab_axis: vocab_size, embed_axis: embed_size},
            fan_in=vocab_axis,
            fan_out=embed_axis,
            dtype=dtype,
        )

    def __call__(self, ids: Tensor[Int, *B], *, key: jax.Array | None = None) -> Tensor[D, *B, E]:
        """Look up ``ids`` (an integer Tensor); ``key`` is ignored."""
        n, d = self.weight.shape  # None in the type checker's stand-in
        name = (
            f"Embedding({axis_name(self.vocab_axis)}{'' if n is None else f'={n}'} -> "
            f"{axis_name(self.embed_axis)}{'' if d is None else f'={d}'})"
        )
        if not jnp.issubdtype(ids.dtype.numpy, jnp.integer):
            raise fail(
                name,
                (ids,),
                f"ids must be integers, got {ids.dtype.__name__} (convert with astype(ax.I32))",
            )
        forbid(name, (ids,), ids, (self.vocab_axis, self.embed_axis), what="ids")
        out: Tensor[D, *B, E] = take(self.weight, self.vocab_axis, ids)
        return out
