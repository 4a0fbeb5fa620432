# mypy: disable-error-code="overload-overlap"
# pyright: reportOverlappingOverload=false
"""The language-model head and its loss in one blockwise op: ``linear_cross_entropy``.

``softmax_cross_entropy(contract(h, W, over=Embed), labels, Vocab)`` holds the whole float32
``[..., Vocab]`` logits, and its backward a few more of the same size: at GPT-2's 50,257
tokens, 3.3 GB for one batch of 16 x 1024. :class:`LinearCrossEntropy` computes the same
loss over chunks of positions, never holding more than one chunk's logits; its backward
recomputes each chunk's logits (one more matrix product) instead of keeping them. The
anchor is Levanter's blockwise cross-entropy.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar, TypeVarTuple, cast, overload

import jax
import jax.numpy as jnp

from ..core import F32, F64, AnyTensor, Axis, DType, Floating, Integer, Op, Tensor, TensorType
from ..core._internal import (
    HasType,
    axes_names,
    axis_name,
    check_axis_label,
    is_floating,
    is_symbolic,
    optional_positive_int,
    register_op,
)
from ._axes import Class
from ._losses import check_labels

__all__ = ["LinearCrossEntropy", "linear_cross_entropy"]

Ts = TypeVarTuple("Ts")
D = TypeVar("D", bound=Floating)
DL = TypeVar("DL", bound=Integer)
Array = jax.Array

#: the default chunk holds at most this many float32 logits (128 MiB)
CHUNK_ELEMENTS = 1 << 25


def _integer(t: HasType) -> bool:
    return bool(jnp.issubdtype(t.dtype.numpy, jnp.integer))


def _loss_dtype(dtype: type[DType]) -> type[DType]:
    """float32, or float64 for float64 operands."""
    return F64 if dtype is F64 else F32


@register_op("linear_cross_entropy", kind="other", namespace="axjax.train")
class LinearCrossEntropy(Op):
    """``softmax_cross_entropy(contract(hidden, weight, over), labels, axis)``, blockwise.

    Operands: floating ``hidden`` with the contracted axis ``over``; ``weight`` of the same
    dtype with two axes, the class ``axis`` and ``over`` (an embedding table
    ``[Vocab, Embed]``, or ``[Embed, Vocab]``); integer ``labels`` with ``hidden``'s other
    axes in order. The result has the labels' axes, in float32 (float64 for float64
    operands). ``chunk`` positions of the labels' last axis are computed at a time.
    """

    def __init__(self, axis: type[Axis] = Class, chunk: int | None = None) -> None:
        self.axis: type[Axis] = check_axis_label(axis, "LinearCrossEntropy")
        self.chunk = optional_positive_int("linear_cross_entropy", "chunk", chunk)

    def describe(self) -> str:
        return f"LinearCrossEntropy({axis_name(self.axis)})"

    def __call__(self, *xs: object) -> AnyTensor:
        """Apply the loss: the axes and dtypes checked first, then the labels' values (the
        index rule: core's check_indices)."""
        if len(xs) == 3 and all(isinstance(x, Tensor) and not is_symbolic(x) for x in xs):
            hidden, weight, labels = xs
            assert isinstance(hidden, Tensor) and isinstance(weight, Tensor)
            assert isinstance(labels, Tensor)
            self.infer(hidden, weight, labels)  # raises an AxisError naming the operands
            check_labels("linear_cross_entropy", labels, weight.size(self.axis), self.axis)
        out: AnyTensor = super().__call__(*xs)
        return out

    def _over(self, weight: HasType) -> type[Axis]:
        """The contracted axis: the weight's axis that is not the class axis."""
        return next(a for a in weight.axes if a is not self.axis)

    def infer(self, hidden: HasType, weight: HasType, labels: HasType) -> TensorType:
        ops = (hidden, weight, labels)
        klass = axis_name(self.axis)
        if len(weight.axes) != 2 or self.axis not in weight.axes:
            raise self.fail(
                ops,
                f"the weight must have two axes, the class axis {klass} and the axis it "
                f"contracts with the hidden states; got ({axes_names(weight.axes)}) (name the "
                "class axis with axis=...)",
            )
        over = self._over(weight)
        if over not in hidden.axes:
            raise self.fail(
                ops,
                f"the hidden states have no axis {axis_name(over)} to contract with the weight "
                f"(its class axis is {klass}: name the class axis with axis=...)",
            )
        if self.axis in hidden.axes:
            raise self.fail(ops, f"the hidden states already have the class axis {klass}")
        self._check_dtypes(ops)
        p = hidden.axes.index(over)
        rest = hidden.axes[:p] + hidden.axes[p + 1 :]
        sizes = hidden.shape[:p] + hidden.shape[p + 1 :]
        self._check_sizes(ops, over, rest, sizes)
        return TensorType(_loss_dtype(hidden.dtype), rest, sizes)

    def _check_dtypes(self, ops: tuple[HasType, HasType, HasType]) -> None:
        hidden, weight, labels = ops
        for what, t in (("hidden states", hidden), ("weight", weight)):
            if not is_floating(t.dtype):
                raise self.fail(ops, f"the {what} must be floating-point, got {t.dtype.__name__}")
        if hidden.dtype is not weight.dtype:
            raise self.fail(
                ops,
                f"the hidden states are {hidden.dtype.__name__} and the weight "
                f"{weight.dtype.__name__}: cast one (ax.astype) so both have one dtype",
            )
        if not _integer(labels):
            raise self.fail(
                ops, f"labels must be integer class indices, got {labels.dtype.__name__}"
            )

    def _check_sizes(
        self, ops: tuple[HasType, HasType, HasType], over: type[Axis], rest: Any, sizes: Any
    ) -> None:
        hidden, weight, labels = ops
        n, m = hidden.shape[hidden.axes.index(over)], weight.shape[weight.axes.index(over)]
        if n is not None and m is not None and n != m:
            raise self.fail(
                ops,
                f"axis {axis_name(over)} has size {n} in the hidden states and {m} in the weight",
            )
        if tuple(labels.axes) != tuple(rest):
            hint = (
                "same axes in a different order: transpose the labels"
                if set(labels.axes) == set(rest)
                else f"the labels need the hidden states' axes without {axis_name(over)}: "
                f"({axes_names(rest)})"
            )
            raise self.fail(ops, f"labels have axes ({axes_names(labels.axes)}); {hint}")
        for a, n, m in zip(rest, sizes, labels.shape, strict=True):
            if n is not None and m is not None and n != m:
                raise self.fail(
                    ops,
                    f"axis {axis_name(a)} has size {n} in the hidden states and {m} in the labels",
                )

    # -- the computation: ``over`` last, chunks of the labels' last axis ------------------
    def _arrays(self, hidden: AnyTensor, weight: AnyTensor) -> tuple[Array, Array, int]:
        """The hidden states with ``over`` last (moved only if it is not), the weight as
        ``[V, E]``, and the index of the position axis chunked (``-1``: none)."""
        over = self._over(weight)
        p = hidden.axes.index(over)
        h = hidden.array if p == hidden.array.ndim - 1 else jnp.moveaxis(hidden.array, p, -1)
        w = weight.array if weight.axes[1] is over else weight.array.T
        return h, w, h.ndim - 2

    def _chunking(self, h: Array, w: Array, t: int) -> tuple[int, int]:
        """(chunk, number of chunks) along axis ``t`` of ``h`` (``t < 0``: no position axis)."""
        if t < 0:
            return 1, 1
        n, rows = h.shape[t], math.prod(h.shape[:t])
        c = self.chunk or max(1, CHUNK_ELEMENTS // max(1, rows * w.shape[0]))
        c = min(c, max(n, 1))
        return c, -(-n // c)

    def forward(self, hidden: AnyTensor, weight: AnyTensor, labels: AnyTensor) -> Array:
        h, w, t = self._arrays(hidden, weight)
        out_dtype = _loss_dtype(hidden.dtype).numpy
        c, k = self._chunking(h, w, t)
        if k == 1:  # one chunk: the plain computation, nothing sliced
            return _chunk_loss(h, w, labels.array, out_dtype)
        n = h.shape[t]
        hp, lab = _padded(h, t, k * c), _padded(labels.array, t, k * c, fill=-1)

        def body(i: Array, loss: Array) -> Array:
            hc = jax.lax.dynamic_slice_in_dim(hp, i * c, c, axis=t)
            lc = jax.lax.dynamic_slice_in_dim(lab, i * c, c, axis=t)
            return jax.lax.dynamic_update_slice_in_dim(
                loss, _chunk_loss(hc, w, lc, out_dtype), i * c, axis=t
            )

        loss = jax.lax.fori_loop(0, k, body, jnp.zeros(lab.shape, out_dtype))
        return jax.lax.slice_in_dim(loss, 0, n, axis=t)

    def backward(
        self, dy: AnyTensor, y: AnyTensor, hidden: AnyTensor, weight: AnyTensor, labels: AnyTensor
    ) -> tuple[Array, Array, None]:
        h, w, t = self._arrays(hidden, weight)
        c, k = self._chunking(h, w, t)
        if k == 1:
            dh, dw = _chunk_grads(h, w, labels.array, dy.array)
        else:
            dh, dw = _chunked_grads(h, w, labels.array, dy.array, t, c, k)
        p = hidden.axes.index(self._over(weight))
        dh = dh if p == dh.ndim - 1 else jnp.moveaxis(dh, -1, p)
        dw = dw if weight.axes[1] is self._over(weight) else dw.T
        return dh, dw.astype(w.dtype), None


def _chunked_grads(
    h: Array, w: Array, lab: Array, dy: Array, t: int, c: int, k: int
) -> tuple[Array, Array]:
    """``d hidden`` and ``d weight`` over ``k`` chunks of ``c`` positions along axis ``t``."""
    n = h.shape[t]
    hp, lab, dy = _padded(h, t, k * c), _padded(lab, t, k * c, fill=-1), _padded(dy, t, k * c)

    def body(i: Array, acc: tuple[Array, Array]) -> tuple[Array, Array]:
        dh, dw = acc
        hc, lc, gc = (jax.lax.dynamic_slice_in_dim(a, i * c, c, axis=t) for a in (hp, lab, dy))
        dhc, dwc = _chunk_grads(hc, w, lc, gc)
        return jax.lax.dynamic_update_slice_in_dim(dh, dhc, i * c, axis=t), dw + dwc

    acc = jnp.promote_types(w.dtype, jnp.float32)
    dh, dw = jax.lax.fori_loop(0, k, body, (jnp.zeros_like(hp), jnp.zeros(w.shape, acc)))
    return jax.lax.slice_in_dim(dh, 0, n, axis=t), dw


def _padded(x: Array, axis: int, n: int, fill: int = 0) -> Array:
    """``x`` padded along ``axis`` to ``n`` entries with ``fill`` (itself if it has them)."""
    pad = n - x.shape[axis]
    if not pad:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, pad)
    return jnp.pad(x, widths, constant_values=fill)


def _logits(h: Array, w: Array) -> Array:
    """``h @ w.T`` accumulated (and kept) in float32 or wider, whatever the operands' dtype."""
    acc = jnp.promote_types(h.dtype, jnp.float32)
    return jnp.einsum("...e,ve->...v", h, w, preferred_element_type=acc)


def _chunk_loss(h: Array, w: Array, lab: Array, out_dtype: Any) -> Array:
    """One chunk's per-position loss; an out-of-range label (only possible under jit) picks
    no class: zero loss, as in ``softmax_cross_entropy``."""
    logits = _logits(h, w)
    valid = (lab >= 0) & (lab < w.shape[0])
    safe = jnp.where(valid, lab, 0)
    picked = jnp.take_along_axis(logits, safe[..., None], axis=-1, mode="promise_in_bounds")
    loss = jax.nn.logsumexp(logits, axis=-1) - picked[..., 0]
    return jnp.where(valid, loss, 0).astype(out_dtype)


def _chunk_grads(h: Array, w: Array, lab: Array, dy: Array) -> tuple[Array, Array]:
    """One chunk's ``d hidden`` and ``d weight`` (``[V, E]``, float32), its logits recomputed."""
    logits = _logits(h, w)
    valid = (lab >= 0) & (lab < w.shape[0])
    g = jnp.where(valid, dy, 0).astype(logits.dtype)
    onehot = jax.nn.one_hot(lab, w.shape[0], dtype=logits.dtype)
    dlogits = (g[..., None] * (jax.nn.softmax(logits, axis=-1) - onehot)).astype(h.dtype)
    acc = jnp.promote_types(h.dtype, jnp.float32)
    dh = jnp.einsum("...v,ve->...e", dlogits, w, preferred_element_type=acc)
    rows = dlogits.reshape(-1, dlogits.shape[-1])
    dw = jnp.einsum("nv,ne->ve", rows, h.reshape(-1, h.shape[-1]), preferred_element_type=acc)
    return dh.astype(h.dtype), dw


@overload
def linear_cross_entropy(
    hidden: Tensor[F64, *tuple[Any, ...]],
    weight: Tensor[F64, Any, Any],
    labels: Tensor[DL, *Ts],
    axis: type[Axis] = ...,
    *,
    chunk: int | None = None,
) -> Tensor[F64, *Ts]: ...
@overload
def linear_cross_entropy(
    hidden: Tensor[D, *tuple[Any, ...]],
    weight: Tensor[D, Any, Any],
    labels: Tensor[DL, *Ts],
    axis: type[Axis] = ...,
    *,
    chunk: int | None = None,
) -> Tensor[F32, *Ts]: ...
def linear_cross_entropy(
    hidden: Tensor[Any, *tuple[Any, ...]],
    weight: Tensor[Any, Any, Any],
    labels: Tensor[Any, *Ts],
    axis: type[Axis] = Class,
    *,
    chunk: int | None = None,
) -> Tensor[Any, *Ts]:
    """A language model's head and its loss in one: the cross-entropy of integer ``labels``
    under ``softmax(contract(hidden, weight))`` along ``axis``, without the full logits.

    The same values and gradients as
    ``softmax_cross_entropy(contract(hidden, weight, over=Embed), labels, axis)``, computed
    over chunks of ``chunk`` positions (the labels' last axis): the float32 logits are never
    held whole, and the backward recomputes each chunk's logits instead of keeping them.
    For GPT-2's 50,257 tokens and a batch of 16 x 1024, that saves 3.3 GB per copy of the
    logits the plain form keeps.

    Args:
        hidden: the final hidden states, e.g. ``Tensor[BF16, Batch, Pos, Embed]``.
        weight: the output projection with two axes, the class ``axis`` and the contracted
            one: a tied embedding table ``Tensor[BF16, Vocab, Embed]`` (or ``[Embed, Vocab]``),
            in the hidden states' dtype.
        labels: integer targets with the hidden states' other axes, in order
            (``Tensor[I32, Batch, Pos]``).
        axis: the class axis of ``weight``.
        chunk: positions per chunk; by default, as many as keep one chunk's float32 logits
            within 128 MiB.

    Returns:
        The per-position loss with the labels' axes, in float32 (float64 for float64
        operands) whatever the hidden states' dtype; the products run in their dtype with
        float32 accumulation.

    Raises:
        ValueError: a concrete label outside ``[0, n)``, as ``softmax_cross_entropy``; under
            ``jax.jit`` such a label contributes zero loss and zero gradient.

    Example:
        >>> h = model.hidden(ids)                    # Tensor[BF16, Batch, Pos, Embed]
        >>> per_token = ax.train.linear_cross_entropy(h, model.tokens.weight, targets, Vocab)
        >>> loss = ax.mean(ax.mean(per_token, Pos), Batch)
    """
    # the op's rule gives the labels' axes (checked at run time and by the plugin)
    return cast("Tensor[Any, *Ts]", LinearCrossEntropy(axis, chunk)(hidden, weight, labels))
