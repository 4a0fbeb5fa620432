"""Fused attention: ``jax.nn.dot_product_attention`` as an ``ax.Op``, by axis names.

The fused call wants ``[B, T, N, H]`` arrays (batch, query positions, heads, features);
:class:`FusedAttention` moves the named axes into that layout (every axis the query and key
share, except the heads, is flattened into ``B``), calls the fused function and restores the
names. The result has the axes of the einsum path (``ax.nn.dot_product_attention``): the
query's axes without ``over``, then ``over``. JAX differentiates the call itself
(:attr:`FusedAttention.jax_vjp`): cuDNN's backward kernel, with the softmax statistics of
the forward as residual, instead of a second forward inside the backward. Which kernel it
asks for (``implementation``) is the path's choice (``_attention_paths``).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from ..core import AnyTensor, Axis, Bool, Integer, Op, TensorType
from ..core._internal import (
    HasType,
    axes_names,
    axis_name,
    check_query_key,
    is_floating,
    register_op,
    result_dtype,
)
from ._attention_masks import check_key_lengths

__all__ = ["FusedAttention"]


@register_op(kind="internal", namespace="axjax.nn")
class FusedAttention(Op):
    """``softmax(q ⋈ k · scale [+ mask], key_pos) ⋈ v`` in one ``jax.nn.dot_product_attention``.

    Operands: ``query``, ``key``, ``value``; then, if ``masked``, a Bool mask over a subset
    of the score axes (true = attend); then, if ``lengths``, an integer tensor over a subset
    of the batch axes: the number of valid keys (the first ones) of each sequence. ``query``
    has ``over`` and exactly one position axis of its own; ``key`` and ``value`` have
    ``key_pos`` and ``over``; all other axes are shared by the three (batch axes, and
    ``heads`` if given). ``group``: a second heads axis of the query alone (grouped-query
    attention: the query heads that read one key-value head of ``heads``); the call gets
    the query heads ``(heads, group)`` flattened in that order and the keys and values with
    ``heads`` only, JAX's native grouped-query layout (no key or value is repeated).
    ``causal``: the kernels' flag, top-left aligned (query ``i`` sees
    keys ``0..i``); ``ax.nn`` gives it only with as many queries as keys, and passes the
    lower-right :func:`axjax.nn.causal_mask` as a mask otherwise. ``window``: with
    ``causal``, a sliding window (query ``i`` sees keys ``i - window + 1 .. i``), the
    kernels' ``local_window_size=(window - 1, 0)``.

    JAX differentiates the forward (``jax_vjp``): with ``implementation="cudnn"`` that is
    cuDNN's backward kernel. :meth:`backward` (the VJP of the same call) is the op's declared
    derivative, checked by the op contract.

    Example:
        >>> op = FusedAttention(HeadDim, KeyPos, heads=Head, causal=True)
        >>> op(q, k, v)              # q [Batch, Pos, Head, HeadDim] -> same axes
        >>> gqa = FusedAttention(HeadDim, KeyPos, heads=KVHead, group=GroupHead)
        >>> gqa(q, k, v)  # q [Batch, Pos, KVHead, GroupHead, HeadDim]: the same axes
        >>> # (k and v [Batch, KeyPos, KVHead, HeadDim])
    """

    jax_vjp = True

    def __init__(
        self,
        over: type[Axis],
        key_pos: type[Axis],
        *,
        heads: type[Axis] | None = None,
        group: type[Axis] | None = None,
        causal: bool = False,
        masked: bool = False,
        lengths: bool = False,
        implementation: str | None = None,
        window: int | None = None,
    ) -> None:
        self.over: type[Axis] = over
        self.key_pos: type[Axis] = key_pos
        self.heads: type[Axis] | None = heads
        self.group: type[Axis] | None = group
        self.causal: bool = causal
        self.masked: bool = masked
        self.lengths: bool = lengths
        self.implementation: str | None = implementation
        self.window: int | None = window

    def describe(self) -> str:
        return f"FusedAttention(over={axis_name(self.over)}, key_pos={axis_name(self.key_pos)})"

    def __call__(self, *xs: object) -> AnyTensor:
        """Apply the op, its key lengths (when it takes them) checked first (the index rule)."""
        lengths = xs[-1] if self.lengths and len(xs) == 4 + self.masked else None
        if lengths is not None and len(xs) > 1:
            check_key_lengths("Attention key_lengths", lengths, xs[1], self.key_pos)
        out: AnyTensor = super().__call__(*xs)
        return out

    def _layout(self, q: HasType, k: HasType) -> tuple[tuple[type[Axis], ...], type[Axis]]:
        """The batch axes (in the query's order) and the query's position axis."""
        own = [a for a in q.axes if a not in k.axes and a != self.group]
        if len(own) != 1:
            raise self.fail(
                (q, k),
                f"the query needs exactly one position axis that the key "
                f"lacks, has {len(own)} ({axes_names(tuple(own))})",
            )
        # the key axis against the query's (ax.KeyOf): swapped, or the key of another query
        check_query_key(f"Cannot apply {self.describe()}", own[0], self.key_pos)
        batch = tuple(a for a in q.axes if a in k.axes and a not in (self.over, self.heads))
        return batch, own[0]

    def _extras(self, extra: tuple[Any, ...]) -> tuple[Any, Any]:
        """``(mask, lengths)`` among the operands after ``value`` (``None`` where absent)."""
        rest = list(extra)
        mask = rest.pop(0) if self.masked and rest else None
        lengths = rest.pop(0) if self.lengths and rest else None
        return mask, lengths

    def infer(self, q: HasType, k: HasType, v: HasType, *extra: HasType) -> TensorType:
        xs = (q, k, v, *extra)
        if len(extra) != self.masked + self.lengths:
            raise self.fail(
                xs,
                f"expected {3 + self.masked + self.lengths} operands (query, key, value"
                f"{', mask' if self.masked else ''}{', lengths' if self.lengths else ''}), "
                f"got {len(xs)}",
            )
        dtype = result_dtype(self, (q, k, v))
        if not is_floating(dtype):
            raise self.fail(xs, f"attention needs floating-point values, got {dtype.__name__}")
        if self.group is not None and self.group in k.axes:
            raise self.fail(
                xs,
                f"the group axis {axis_name(self.group)} is the query's alone (the query "
                "heads that share one key-value head), but the key has it",
            )
        batch, qpos = self._layout(q, k)
        sizes: dict[type[Axis], int | None] = {}
        want = {*batch, self.over, *((self.heads,) if self.heads else ())}
        group = {self.group} if self.group else set()
        for name, t, axes in (
            ("query", q, want | {qpos} | group),
            ("key", k, want | {self.key_pos}),
            ("value", v, want | {self.key_pos}),
        ):
            if set(t.axes) != axes:
                raise self.fail(
                    xs,
                    f"the {name} has axes ({axes_names(t.axes)}), expected "
                    f"({axes_names(tuple(axes))}) in any order",
                )
            for a, n in zip(t.axes, t.shape, strict=True):
                if sizes.setdefault(a, n) != n:
                    raise self.fail(
                        xs,
                        f"axis {axis_name(a)} has size {sizes[a]} in one "
                        f"operand and {n} in another",
                    )
        m, lengths = self._extras(extra)
        if m is not None:
            if m.dtype is not Bool:
                raise self.fail(xs, f"the mask must be Bool, got {m.dtype.__name__}")
            scores = (*batch, qpos, self.key_pos, self.heads, self.group)
            extra_axes = [a for a in m.axes if a not in scores]
            if extra_axes:
                raise self.fail(
                    xs, f"the mask has axis {axis_name(extra_axes[0])}, which the scores lack"
                )
            for a, n in zip(m.axes, m.shape, strict=True):
                expected = sizes.get(a)
                if n is not None and expected is not None and n != expected:
                    raise self.fail(
                        xs, f"axis {axis_name(a)} of the mask has size {n}, the scores {expected}"
                    )
        if lengths is not None:
            if not issubclass(lengths.dtype, Integer):
                raise self.fail(
                    xs, f"the key lengths must be integers, got {lengths.dtype.__name__}"
                )
            other = [a for a in lengths.axes if a not in batch]
            if other:
                raise self.fail(
                    xs,
                    f"the key lengths have axis {axis_name(other[0])}, which is not a batch "
                    f"axis of the query and key (those are: {axes_names(batch) or 'none'})",
                )
        out = tuple(a for a in q.axes if a != self.over) + (self.over,)
        return TensorType(dtype, out, tuple(sizes[a] for a in out))

    # -- the fused call on arrays ------------------------------------------------------
    def _call(
        self,
        q: AnyTensor,
        k: AnyTensor,
        v: AnyTensor,
        mask: AnyTensor | None,
        lengths: AnyTensor | None,
        qa: jax.Array,
        ka: jax.Array,
        va: jax.Array,
    ) -> jax.Array:
        batch, qpos = self._layout(q, k)
        heads = (self.heads,) if self.heads else ()
        # the query's heads: the key's, then the group (query head n reads key head n // g)
        qheads = (*heads, *((self.group,) if self.group else ()))
        sizes = {**q.sizes, **k.sizes}
        nb = math.prod(sizes[a] for a in batch)

        def to4(t: AnyTensor, a: jax.Array, pos: type[Axis]) -> jax.Array:
            own = qheads if pos is qpos else heads
            order = (*batch, pos, *own, self.over)
            a = jnp.transpose(a, [t.axes.index(x) for x in order])
            n = math.prod(sizes[h] for h in own)
            return a.reshape(nb, sizes[pos], n, sizes[self.over])

        def spread(t: AnyTensor, order: tuple[type[Axis], ...]) -> jax.Array:
            """``t``'s array over ``order`` (its axes a subset): transposed, broadcast."""
            present = [a for a in order if a in t.axes]
            m = jnp.transpose(t.array, [t.axes.index(a) for a in present])
            m = m.reshape([sizes[a] if a in t.axes else 1 for a in order])
            return jnp.broadcast_to(m, [sizes[a] for a in order])

        m4 = None
        if mask is not None:
            order = (*batch, *qheads, qpos, self.key_pos)
            nq = math.prod(sizes[h] for h in qheads)
            m4 = spread(mask, order).reshape(nb, nq, sizes[qpos], sizes[self.key_pos])
        seq = None
        if lengths is not None:  # one length per sequence: [B], never a [B, N, T, S] mask
            seq = spread(lengths, batch).reshape(nb).astype(jnp.int32)
        impl: Any = self.implementation
        y = jax.nn.dot_product_attention(
            to4(q, qa, qpos),
            to4(k, ka, self.key_pos),
            to4(v, va, self.key_pos),
            mask=m4,
            scale=1.0 / math.sqrt(sizes[self.over]),
            is_causal=self.causal,
            key_value_seq_lengths=seq,
            # the sliding window with the causal flag: query i sees keys i - window + 1 .. i
            local_window_size=None if self.window is None else (self.window - 1, 0),
            implementation=impl,
        )
        have = (*batch, qpos, *qheads, self.over)
        y = y.reshape([sizes[a] for a in have])
        out = tuple(a for a in q.axes if a != self.over) + (self.over,)
        return jnp.transpose(y, [have.index(a) for a in out])

    def forward(self, q: AnyTensor, k: AnyTensor, v: AnyTensor, *extra: AnyTensor) -> jax.Array:
        m, lengths = self._extras(extra)
        return self._call(q, k, v, m, lengths, q.array, k.array, v.array)

    def backward(
        self,
        dy: AnyTensor,
        y: AnyTensor,
        q: AnyTensor,
        k: AnyTensor,
        v: AnyTensor,
        *extra: AnyTensor,
    ) -> tuple[jax.Array | None, ...]:
        m, lengths = self._extras(extra)
        _, vjp = jax.vjp(
            lambda a, b, c: self._call(q, k, v, m, lengths, a, b, c), q.array, k.array, v.array
        )
        dq, dk, dv = vjp(dy.array)
        return (dq, dk, dv, *((None,) * len(extra)))
