"""The attention's kernels and the call that runs one: ``dot_product_attention`` and
``attend`` (its masks and key lengths checked, the path chosen, then the einsum path or the
fused op), and the einsum path itself.

Queries and keys have *different* position axes (``QPos`` and ``KPos``), so the score
``q ⋈ k`` over ``HeadDim`` keeps both, batched over every shared axis (batch, heads): a
contraction can never sum away a batch axis or pair a query with only "its" key by
accident, which positional code does silently when two axes have the same size.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..core import AnyTensor, Axis
from ..core._internal import (
    axes_names,
    axis_name,
    checks_choices,
    fail,
    finfo_min,
    is_floating,
    public_call,
)
from ..ops import broadcast, contract, softmax, transpose, where
from ..ops._internal import narrowed, widened
from ._attention_masks import (
    and_masks,
    causal_mask,
    check_lengths,
    check_roles,
    check_score_mask,
    length_mask,
    window_mask,
)
from ._attention_paths import AttentionPath, choose_path
from ._fused_attention import FusedAttention
from ._util import known_size, require

__all__ = ["dot_product_attention"]


@public_call()
@checks_choices
def dot_product_attention(
    query: AnyTensor,
    key: AnyTensor,
    value: AnyTensor,
    *,
    over: type[Axis],
    key_pos: type[Axis],
    mask: AnyTensor | None = None,
    key_lengths: AnyTensor | None = None,
    causal: bool = False,
    implementation: AttentionPath = "auto",
) -> AnyTensor:
    """``softmax(q ⋈ k / sqrt(d), key_pos) ⋈ v``: attention by axis names.

    ``query`` and ``key`` share the feature axis ``over`` (summed, scaled by
    ``1/sqrt(size)``); ``key`` and ``value`` share ``key_pos`` (softmaxed, then summed).
    Every other shared axis (batch, heads) is kept once. ``mask`` (Bool, true = attend) may
    have any subset of the score axes and is broadcast to them. ``key_lengths`` (integers
    over some of the batch axes) is the number of valid keys of each sequence: padding
    without a mask tensor; concrete lengths outside ``[0, n_keys]`` are a ``ValueError``
    (traced ones are not checked, unless inside ``ax.checkify_indices``). For F16/BF16 the
    scores and their softmax are computed in float32. ``causal``: each query sees the keys
    up to its own position, aligned as :func:`causal_mask` (lower-right when keys outnumber
    queries: the queries are the last positions; the query needs one position axis of its
    own). ``implementation``: ``"einsum"`` (contractions), ``"xla"``/``"cudnn"``
    (``jax.nn.dot_product_attention`` with that kernel), ``"fused"`` (JAX picks the kernel),
    ``"auto"`` (cuDNN where it can run, else einsum: :func:`default_attention_path`).

    Example:
        >>> out = ax.nn.dot_product_attention(q, k, v, over=HeadDim, key_pos=KeyPos)
        >>> # q [Batch, Time, Head, HeadDim], k/v [Batch, KeyPos, Head, HeadDim]
        >>> # -> [Batch, Time, Head, HeadDim]
    """
    name = f"Attention(over={axis_name(over)}, key_pos={axis_name(key_pos)})"
    require(name, (query, key, value), query, over, None, "query")
    require(name, (query, key, value), key, over, None, "key")
    require(name, (query, key, value), key, key_pos, None, "key")
    require(name, (query, key, value), value, key_pos, None, "value")
    if not is_floating(value.dtype):  # the weights are cast to the value's dtype
        raise fail(
            name,
            (query, key, value),
            f"the value must be floating-point, got {value.dtype.__name__}",
            subject=value,
        )
    if key_pos in query.axes:
        raise fail(
            name,
            (query, key, value),
            f"the query has the key position axis "
            f"{axis_name(key_pos)}; queries and keys need different position axes "
            "(rename one, e.g. ax.rename(k, Time, KeyPos))",
        )
    check_roles(name, query, key, over, key_pos)
    causal_axis = None
    if causal:
        own = [a for a in query.axes if a not in key.axes]
        if len(own) != 1:
            raise fail(
                name,
                (query, key),
                f"causal attention needs one query position axis that the key lacks, the "
                f"query has {len(own)} ({axes_names(tuple(own))})",
            )
        causal_axis = (own[0], known_size(query, own[0]))
    return attend(
        query,
        key,
        value,
        over,
        key_pos,
        mask,
        None,
        implementation=implementation,
        causal=causal_axis,
        key_lengths=key_lengths,
    )


def attend(
    q: AnyTensor,
    k: AnyTensor,
    v: AnyTensor,
    over: type[Axis],
    key_pos: type[Axis],
    mask: AnyTensor | None,
    drop: Callable[[AnyTensor], AnyTensor] | None,
    *,
    implementation: AttentionPath = "auto",
    heads: type[Axis] | None = None,
    group: type[Axis] | None = None,
    causal: tuple[type[Axis], int] | None = None,
    key_lengths: AnyTensor | None = None,
    window: int | None = None,
) -> AnyTensor:
    """Attention by the einsum or the fused path; ``causal``: (query_pos, its size);
    ``group``: the query heads that share one of the key's ``heads`` (grouped-query
    attention: an axis of the query alone, kept through the scores on every path);
    ``window``: a sliding window on top of ``causal`` (:func:`window_mask`; the fused
    kernels' ``local_window_size``)."""
    if window is not None and causal is None:
        raise ValueError("attention: a sliding window goes with causal attention")
    heads = heads if heads in k.axes else None
    group = group if group in q.axes and group not in k.axes else None
    if mask is not None:  # over the score axes: the query's but ``over``, and the keys'
        check_score_mask(mask, q, k, over, key_pos, heads)
    if key_lengths is not None:
        check_lengths(key_lengths, q, k, over, heads, key_pos)
    masked, dropped = mask is not None, drop is not None
    path = choose_path(q, k, v, over, key_pos, masked, dropped, causal, implementation, group)
    if path == "einsum":
        return _einsum(q, k, v, over, key_pos, mask, drop, causal, key_lengths, window)
    if causal is not None and causal[1] != known_size(k, key_pos):
        # the fused kernels' causal flag aligns top-left; causal_mask aligns lower-right
        # when keys outnumber queries, so such a call takes the mask instead of the flag
        c = _causal(causal, key_pos, known_size(k, key_pos), window)
        mask = c if mask is None else and_masks(mask, c)
        causal, window = None, None
    op = FusedAttention(
        over,
        key_pos,
        heads=heads,
        group=group,
        causal=causal is not None,
        masked=mask is not None,
        lengths=key_lengths is not None,
        implementation=path or None,
        window=window,
    )
    return op(q, k, v, *(t for t in (mask, key_lengths) if t is not None))


def _einsum(
    q: AnyTensor,
    k: AnyTensor,
    v: AnyTensor,
    over: type[Axis],
    key_pos: type[Axis],
    mask: AnyTensor | None,
    drop: Callable[[AnyTensor], AnyTensor] | None,
    causal: tuple[type[Axis], int] | None,
    key_lengths: AnyTensor | None,
    window: int | None = None,
) -> AnyTensor:
    """The einsum path: the scores by a contraction, the causal (and sliding-window) and
    key-length masks and ``mask`` applied to them, the softmax over the keys, ``drop`` on
    the weights, and the weights contracted with the values."""
    if causal is not None:
        c = _causal(causal, key_pos, known_size(k, key_pos), window)
        mask = c if mask is None else and_masks(mask, c)
    if key_lengths is not None:
        padding = length_mask(key_lengths, key_pos, known_size(k, key_pos))
        mask = padding if mask is None else and_masks(mask, padding)
    d = known_size(q, over)  # a graph's open size cannot scale the scores: the size error
    # the scores and their softmax in float32 for F16/BF16 (as the fused path's logits),
    # the weights cast back to the value's dtype: q·k of F16 values overflows long before
    # the attention's output could
    wide_q, wide_k = (widened(q), widened(k)) if q.dtype is k.dtype else (q, k)
    query = transpose(wide_q * (1.0 / math.sqrt(d)), *_score_layout(q, k, over))
    scores = contract(query, wide_k, over=over)
    if mask is not None:
        extra = [a for a in mask.axes if a not in scores.axes]
        if extra:
            raise fail(
                "Attention mask",
                (scores, mask),
                f"the mask has axis "
                f"{axis_name(extra[0])}, which the scores lack (they have "
                f"{axes_names(scores.axes)})",
            )
        low = finfo_min(scores.dtype.numpy)
        scores = where(broadcast(mask, scores), scores, low)
    weights = narrowed(softmax(scores, key_pos), v.dtype)
    if drop is not None:
        weights = drop(weights)
    out = contract(weights, v, over=key_pos)
    # the axes of the query without ``over``, then the value's own (as the fused op)
    kept = tuple(a for a in q.axes if a != over) + tuple(a for a in k.axes if a not in q.axes)
    order = tuple(a for a in kept if a != key_pos) + tuple(a for a in v.axes if a not in kept)
    return transpose(out, *order)


def _causal(
    causal: tuple[type[Axis], int], key_pos: type[Axis], n_key: int, window: int | None
) -> AnyTensor:
    """The causal mask of ``causal`` (query_pos, its size) over ``n_key`` keys, and the
    sliding ``window``'s where one is given."""
    c = causal_mask(causal[0], key_pos, causal[1], n_key)
    if window is None:
        return c
    return and_masks(c, window_mask(causal[0], key_pos, causal[1], n_key, window))


def _score_layout(q: AnyTensor, k: AnyTensor, over: type[Axis]) -> tuple[type[Axis], ...]:
    """The query's axes for the score contraction: those it shares with the key (batch,
    heads) first, then its own (the positions), then ``over``. The scores then come out of
    ``dot_general`` as they are laid out, ``[*batch, Head, Pos, KeyPos]``: no transpose of
    the position-by-position tensor, and every product over it has its batch dimensions
    leading (only the query, ``Pos x HeadDim`` per head, is transposed)."""
    shared = tuple(a for a in q.axes if a in k.axes and a != over)
    own = tuple(a for a in q.axes if a not in k.axes)
    return (*shared, *own, over)
