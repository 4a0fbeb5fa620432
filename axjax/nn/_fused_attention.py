"""Fused attention: ``jax.nn.dot_product_attention`` as an ``ax.Op``, by axis names.

The fused call wants ``[B, T, N, H]`` arrays (batch, query positions, heads, features);
:class:`FusedAttention` moves the named axes into that layout (every axis the query and key
share, except the heads, is flattened into ``B``), calls the fused function (cuDNN flash
attention on a GPU with ``implementation="cudnn"``, XLA's otherwise) and restores the names.
Its ``backward`` is the VJP of that same fused call, so graphs and ``ax.jax_autodiff()`` keep
working. The result has the axes of the einsum path (``ax.nn.dot_product_attention``): the
query's axes without ``over``, then ``over``.

Which path is the default depends on the backend, by measurement (``benchmarks/transformer.py``):
on CPU the einsums are faster than the fused call, on GPU the fused call.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import jax
import jax.numpy as jnp

from ..core import AnyTensor, Axis, Bool, Op, TensorType
from ..core._internal import axes_names, axis_name, is_floating, register_op, result_dtype

__all__ = ["AttentionPath", "FusedAttention", "default_attention_path"]

#: ``"einsum"``: contractions and a softmax (has dropout); ``"xla"`` / ``"cudnn"``: the fused
#: ``jax.nn.dot_product_attention`` with that ``implementation``; ``"fused"``: fused, JAX
#: chooses; ``"auto"``: the faster path on this backend (:func:`default_attention_path`).
AttentionPath = Literal["auto", "einsum", "fused", "xla", "cudnn"]


def default_attention_path() -> Literal["einsum", "fused"]:
    """The faster path on the default backend: ``"einsum"`` on CPU, ``"fused"`` elsewhere
    (measured by ``benchmarks/transformer.py``)."""
    return "einsum" if jax.default_backend() == "cpu" else "fused"


@register_op(kind="internal", namespace="axjax.nn")
class FusedAttention(Op):
    """``softmax(q ⋈ k · scale [+ mask], key_pos) ⋈ v`` in one ``jax.nn.dot_product_attention``.

    Operands: ``query``, ``key``, ``value`` and, if ``masked``, a Bool mask over a subset of
    the score axes (true = attend). ``query`` has ``over`` and exactly one position axis of
    its own; ``key`` and ``value`` have ``key_pos`` and ``over``; all other axes are shared
    by the three (batch axes, and ``heads`` if given).

    Example:
        >>> op = FusedAttention(HeadDim, KeyPos, heads=Head, causal=True)
        >>> op(q, k, v)              # q [Batch, Pos, Head, HeadDim] -> same axes
    """

    def __init__(
        self,
        over: type[Axis],
        key_pos: type[Axis],
        *,
        heads: type[Axis] | None = None,
        causal: bool = False,
        masked: bool = False,
        implementation: str | None = None,
    ) -> None:
        self.over: type[Axis] = over
        self.key_pos: type[Axis] = key_pos
        self.heads: type[Axis] | None = heads
        self.causal: bool = causal
        self.masked: bool = masked
        self.implementation: str | None = implementation

    def describe(self) -> str:
        return f"FusedAttention(over={axis_name(self.over)}, key_pos={axis_name(self.key_pos)})"

    def _layout(self, q: Any, k: Any) -> tuple[tuple[type[Axis], ...], type[Axis]]:
        """The batch axes (in the query's order) and the query's position axis."""
        own = [a for a in q.axes if a not in k.axes]
        if len(own) != 1:
            raise self.fail(
                (q, k),
                f"the query needs exactly one position axis that the key "
                f"lacks, has {len(own)} ({axes_names(tuple(own))})",
            )
        batch = tuple(a for a in q.axes if a in k.axes and a not in (self.over, self.heads))
        return batch, own[0]

    def infer(self, q: Any, k: Any, v: Any, *mask: Any) -> TensorType:
        xs = (q, k, v, *mask)
        dtype = result_dtype(self, (q, k, v))
        if not is_floating(dtype):
            raise self.fail(xs, f"attention needs floating-point values, got {dtype.__name__}")
        batch, qpos = self._layout(q, k)
        sizes: dict[type[Axis], int | None] = {}
        want = {*batch, self.over, *((self.heads,) if self.heads else ())}
        for name, t, axes in (
            ("query", q, want | {qpos}),
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
        if mask:
            m = mask[0]
            if m.dtype is not Bool:
                raise self.fail(xs, f"the mask must be Bool, got {m.dtype.__name__}")
            extra = [a for a in m.axes if a not in (*batch, qpos, self.key_pos, self.heads)]
            if extra:
                raise self.fail(
                    xs, f"the mask has axis {axis_name(extra[0])}, which the scores lack"
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
        qa: jax.Array,
        ka: jax.Array,
        va: jax.Array,
    ) -> jax.Array:
        batch, qpos = self._layout(q, k)
        heads = (self.heads,) if self.heads else ()
        sizes = {**q.sizes, **k.sizes}
        nb = math.prod(sizes[a] for a in batch)
        nh = sizes[self.heads] if self.heads else 1

        def to4(t: AnyTensor, a: jax.Array, pos: type[Axis]) -> jax.Array:
            order = (*batch, pos, *heads, self.over)
            a = jnp.transpose(a, [t.axes.index(x) for x in order])
            return a.reshape(nb, sizes[pos], nh, sizes[self.over])

        m4 = None
        if mask is not None:
            order = (*batch, *heads, qpos, self.key_pos)
            present = [a for a in order if a in mask.axes]
            m = jnp.transpose(mask.array, [mask.axes.index(a) for a in present])
            m = m.reshape([sizes[a] if a in mask.axes else 1 for a in order])
            m = jnp.broadcast_to(m, [sizes[a] for a in order])
            m4 = m.reshape(nb, nh, sizes[qpos], sizes[self.key_pos])
        impl: Any = self.implementation
        y = jax.nn.dot_product_attention(
            to4(q, qa, qpos),
            to4(k, ka, self.key_pos),
            to4(v, va, self.key_pos),
            mask=m4,
            scale=1.0 / math.sqrt(sizes[self.over]),
            is_causal=self.causal,
            implementation=impl,
        )
        y = y.reshape(
            *(sizes[a] for a in batch), sizes[qpos], *(sizes[a] for a in heads), sizes[self.over]
        )
        have = (*batch, qpos, *heads, self.over)
        out = tuple(a for a in q.axes if a != self.over) + (self.over,)
        return jnp.transpose(y, [have.index(a) for a in out])

    def forward(self, q: AnyTensor, k: AnyTensor, v: AnyTensor, *mask: AnyTensor) -> jax.Array:
        return self._call(q, k, v, mask[0] if mask else None, q.array, k.array, v.array)

    def backward(
        self,
        dy: AnyTensor,
        y: AnyTensor,
        q: AnyTensor,
        k: AnyTensor,
        v: AnyTensor,
        *mask: AnyTensor,
    ) -> tuple[jax.Array | None, ...]:
        m = mask[0] if mask else None
        _, vjp = jax.vjp(lambda a, b, c: self._call(q, k, v, m, a, b, c), q.array, k.array, v.array)
        dq, dk, dv = vjp(dy.array)
        return (dq, dk, dv, *((None,) if mask else ()))
