"""The attention's roles and masks: which keys each query may see.

The key axis is a role of the query's position axis (``ax.KeyOf[Pos]``, or ``class
KPos(ax.KeyOf[Pos])``, or ``KeyOfAnyQuery``, the key of any query): the role checks here
refuse a query and key swapped, or the key of another query. The masks are Bool tensors over
score axes, true where a query may attend: the causal mask (lower-right aligned), the key-
length mask (padding), their conjunction; ``attention_weights`` is the softmax over the
keys. Every path takes a mask as a Bool ``mask`` (the fused one takes causality and key
lengths as its own arguments where it can), so a new kind of mask goes here.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Protocol, TypeVarTuple, cast, final

import jax
from typing_extensions import TypeVar

from ..core import I32, AnyTensor, Axis, Bool, DType, Integer, KeyOf, Tensor
from ..core._internal import (
    axes_names,
    axis_name,
    check_axis_label,
    check_indices,
    check_int,
    check_mask,
    check_query_key,
    fail,
    is_key_role,
    is_symbolic,
    key_role,
    positive_int,
    public_call,
    query_of,
)
from ..ops import arange, astype, broadcast, equal, greater_equal, less, rename, softmax, where

__all__ = ["KeyOfAnyQuery", "attention_weights", "causal_mask", "segment_mask"]


@final
class KeyOfAnyQuery(KeyOf[Any]):  # the key of any query
    """The key role of any query axis (``ax.KeyOf`` without a query): ``causal_mask(Time,
    KeyOfAnyQuery, ...)`` is accepted and ``causal_mask(KeyOfAnyQuery, Time, ...)`` (query
    and key swapped) refused, but a softmax over ``Time`` of scores over it is not (no query
    is known). The attention layers' default key axis is ``ax.KeyOf[query_pos]``, tied to
    its queries; ``ax.nn.KeyPos`` is this class's deprecated name."""


class _QueryAxis(Protocol):
    """An axis that is not a key role (every ``ax.Axis`` subclass but ``ax.KeyOf``'s): the
    bound of a query parameter, so that a key axis in the query's place is a type error."""

    _key_role: ClassVar[Literal[False]]


_QPos = TypeVar("_QPos", bound=_QueryAxis)
_KPos = TypeVar("_KPos", bound=Axis)
_DS = TypeVar("_DS", bound=DType)
_S = TypeVarTuple("_S")


def default_key(where: str, query_pos: object, key_pos: object) -> type[Axis]:
    """An attention layer's key axis: ``key_pos``, else ``ax.KeyOf[query_pos]`` (the key tied
    to its queries, so a softmax over the queries is refused); a key role in the query's
    place keeps ``KeyOfAnyQuery`` for the swap check to name."""
    if key_pos is not None:
        return check_axis_label(key_pos, where)
    query = check_axis_label(query_pos, where)
    return KeyOfAnyQuery if is_key_role(query) else key_role(query)


def mask_axes(query_pos: object, key_pos: object) -> tuple[type[Axis], type[Axis]]:
    """``causal_mask``'s axes, checked: labels, and ``key_pos`` a key of ``query_pos`` (the
    mypy plugin runs this on stand-ins, so that its message is the run's)."""
    qa = check_axis_label(query_pos, "causal_mask")
    ka = check_axis_label(key_pos, "causal_mask")
    check_query_key(f"causal_mask({axis_name(qa)}, {axis_name(ka)}, ...)", qa, ka)
    return qa, ka


@public_call()  # inside a layer or generate, re-attributed to that call
def causal_mask(
    query_pos: type[_QPos],
    key_pos: type[_KPos],
    n_query: int,
    n_key: int,
    offset: int | jax.Array | AnyTensor | None = None,
) -> Tensor[Bool, _QPos, _KPos]:
    """``[QPos, KPos]`` mask, true where key ``j`` is not after query ``i``: ``j <= i + offset``.

    ``offset`` is the position of query 0 among the keys. By default the queries are the
    *last* ``n_query`` positions when keys outnumber queries (aligned lower-right, offset
    ``n_key - n_query``: a decode step against a cache of earlier keys sees them all), and
    start at key 0 otherwise (the square case, ``offset=0``). A traced integer (a KV
    cache's length) may be given: the mask of a step inside ``jit``/``scan``.

    The key axis is a plain axis, ``ax.KeyOf[QPos]`` (or a ``class KPos(ax.KeyOf[QPos])``),
    or ``ax.nn.KeyOfAnyQuery`` (the key of any query); a key role in the query's place (query and
    key swapped, an anti-causal mask once aligned by name) or the key of another query is
    an ``AxisError``, and a type error for mypy and pyright.

    Example:
        >>> ax.nn.causal_mask(Time, ax.KeyOf[Time], 3, 3).array
        Array([[ True, False, False], [ True,  True, False], [ True,  True,  True]])
        >>> ax.nn.causal_mask(Time, ax.KeyOf[Time], 2, 5).array  # lower-right: the last 2
        Array([[ True,  True,  True,  True, False], [ True,  True,  True,  True,  True]])
    """
    qa, ka = mask_axes(query_pos, key_pos)
    n_query = positive_int("causal_mask", "n_query", n_query)
    n_key = positive_int("causal_mask", "n_key", n_key)
    if offset is None:
        offset = max(n_key - n_query, 0)
    elif not isinstance(offset, jax.Array | Tensor):
        offset = check_int("causal_mask", "offset", offset, None, None, "an int")
    q: AnyTensor = broadcast(arange(qa, n_query), (qa, ka), {ka: n_key})
    k: AnyTensor = broadcast(arange(ka, n_key), (qa, ka), {qa: n_query})
    if isinstance(offset, Tensor):
        if offset.axes:
            raise fail(
                "causal_mask",
                (offset,),
                f"the offset is a scalar, got axes ({axes_names(offset.axes)})",
            )
        offset = offset.array
    if isinstance(offset, int):
        return greater_equal(q + offset, k) if offset else greater_equal(q, k)
    shift: AnyTensor = Tensor(jax.numpy.asarray(offset, jax.numpy.int32), ())
    return greater_equal(q + shift, k)


@public_call()
def segment_mask(
    segments: Tensor[Any, *tuple[Any, ...]], query_pos: type[Axis], key_pos: type[Axis]
) -> Tensor[Bool, *tuple[Any, ...]]:
    """``[*rows, QPos, KPos]`` mask of packed sequences: true where query ``i`` and key ``j``
    belong to the same document, ``segments[i] == segments[j]``.

    ``segments`` holds each position's document id (``[Batch, QPos]``, e.g. the ``segments``
    of :func:`axjax.train.pack_documents`; padding is a segment of its own); every other
    axis of it is a row. Give it to an attention as ``mask=`` (with ``causal=True`` the two
    are combined): attention never crosses a document boundary, on every path. A mask
    keeps a call off cuDNN flash attention: ``implementation="auto"`` falls back to the
    einsum path with its once-per-reason warning (docs/training.md, "Packed sequences").

    Example:
        >>> seg = ax.tensor([[1, 1, 2]], Batch, Pos)
        >>> ax.nn.segment_mask(seg, Pos, KeyPos).array
        Array([[[ True,  True, False], [ True,  True, False], [False, False,  True]]])
    """
    qa = check_axis_label(query_pos, "segment_mask")
    ka = check_axis_label(key_pos, "segment_mask")
    check_query_key(f"segment_mask(query_pos={axis_name(qa)}, key_pos={axis_name(ka)})", qa, ka)
    if not isinstance(segments, Tensor):
        raise TypeError(
            f"segment_mask: segments must be an integer Tensor, got {type(segments).__name__}"
        )
    if not issubclass(segments.dtype, Integer):
        raise fail(
            "segment_mask",
            (segments,),
            f"segments are integers (one document id per position), got {segments.dtype.__name__}",
        )
    if qa not in segments.axes or ka in segments.axes:
        raise fail(
            "segment_mask",
            (segments,),
            f"segments are over the query positions {axis_name(qa)} (and not the keys "
            f"{axis_name(ka)}), got axes ({axes_names(segments.axes)})",
        )
    rows = tuple(a for a in segments.axes if a != qa)
    axes, sizes = (*rows, qa, ka), {**segments.sizes, ka: segments.size(qa)}
    keys: AnyTensor = rename(segments, qa, ka)
    return equal(broadcast(segments, axes, sizes), broadcast(keys, axes, sizes))


@public_call()
def attention_weights(scores: Tensor[_DS, *_S], over: type[KeyOf[Any]]) -> Tensor[_DS, *_S]:
    """The attention weights: ``ax.softmax(scores, over)`` over the *key* axis ``over``.

    ``over`` is a key role (``ax.KeyOf[Pos]``, a ``KPos`` declared ``ax.KeyOf[Pos]``, or
    ``ax.nn.KeyOfAnyQuery``); a
    softmax over the query axis (the scores' other position axis) is an ``AxisError`` at
    run time and a type error for mypy and pyright. A plain axis is accepted at run time
    only on scores that hold no key role.

    Example:
        >>> w = ax.nn.attention_weights(scores, over=KPos)   # scores [Head, Pos, KPos]
    """
    name = f"attention_weights(over={axis_name(over)})"
    check_axis_label(over, name)
    keys = [a for a in scores.axes if is_key_role(a)]
    if not is_key_role(over) and keys:
        k = next((a for a in keys if query_of(a) is over), keys[0])
        raise fail(
            name,
            (scores,),
            f"{axis_name(over)} is not a key axis: the scores' key axis is {axis_name(k)}, and "
            f"attention normalises over the keys (over={axis_name(k)}); a softmax over the "
            f"queries {axis_name(over)} is ax.softmax(scores, {axis_name(over)}, "
            "allow_query=True)",
        )
    # gradual inside (softmax's overloads need a floating dtype); the signature keeps the type
    out: Tensor[_DS, *_S] = softmax(cast(AnyTensor, scores), over)
    return out


def check_roles(
    name: str, q: AnyTensor, k: AnyTensor, over: type[Axis], key_pos: type[Axis]
) -> None:
    """The key axis against the query's own position axes (those the key lacks): a key role
    among them (query and key swapped), or a key declared for another query, is refused."""
    own = [a for a in q.axes if a not in k.axes and a != over]
    if len(own) == 1:
        check_query_key(name, own[0], key_pos)
        return
    for a in own:
        if is_key_role(a):
            check_query_key(name, a, key_pos)
    want = query_of(key_pos)
    if want is not None and want not in own:
        raise fail(
            name,
            (q, k),
            f"the key axis {axis_name(key_pos)} is declared the key of {axis_name(want)} "
            f"(ax.KeyOf[{axis_name(want)}]), which is not a position axis of the query (it "
            f"has {axes_names(tuple(own)) or 'none'})",
        )


def check_score_mask(
    mask: AnyTensor,
    q: AnyTensor,
    k: AnyTensor,
    over: type[Axis],
    key_pos: type[Axis],
    heads: type[Axis] | None,
) -> None:
    """A mask over the score axes (the query's but ``over``, and the keys'), their sizes."""
    known = {
        **dict(zip(k.axes, k.shape, strict=True)),
        **dict(zip(q.axes, q.shape, strict=True)),
    }
    score_axes = (*(a for a in q.axes if a != over), key_pos, *((heads,) if heads else ()))
    check_mask("Attention", mask, {a: known.get(a) for a in score_axes})


def length_mask(lengths: AnyTensor, key_pos: type[Axis], n_key: int) -> AnyTensor:
    """``[*lengths.axes, key_pos]``: true for the first ``lengths`` keys."""
    n = astype(lengths, I32)
    positions: AnyTensor = arange(key_pos, n_key)
    axes = (*n.axes, key_pos)
    sizes = {**n.sizes, key_pos: n_key}
    return less(broadcast(positions, axes, sizes), broadcast(n, axes, sizes))


def check_key_lengths(where: str, lengths: object, k: object, key_pos: type[Axis]) -> None:
    """Key lengths by the index rule (core's ``check_indices``): a length counts keys, so it
    lies in ``[0, n]`` for ``n`` keys. Concrete lengths only (traced: checked inside
    ``ax.checkify_indices``; else a length past the keys attends to all of them)."""
    if not isinstance(k, Tensor) or key_pos not in k.axes:
        return
    n_key = k.size(key_pos)
    check_indices(
        where,
        lengths,
        n_key + 1,
        what="key length",
        noun="a number of keys",
        of=f"for {axis_name(key_pos)} of size {n_key}",
    )


def check_lengths(
    lengths: AnyTensor,
    q: AnyTensor,
    k: AnyTensor,
    over: type[Axis],
    heads: type[Axis] | None,
    key_pos: type[Axis],
) -> None:
    """Key lengths: integers over batch axes of the query and key (not the heads), each a
    number of keys in ``[0, n]``."""
    name = "Attention key_lengths"
    if not isinstance(lengths, Tensor) and not is_symbolic(lengths):
        raise TypeError(
            f"{name}: expected an integer Tensor over batch axes, got {type(lengths).__name__}"
        )
    if not issubclass(lengths.dtype, Integer):
        raise fail(
            name,
            (lengths,),
            f"key lengths are integers (a number of keys), got {lengths.dtype.__name__}",
        )
    batch = tuple(a for a in q.axes if a in k.axes and a not in (over, heads))
    other = [a for a in lengths.axes if a not in batch]
    if other:
        raise fail(
            name,
            (lengths, q, k),
            f"axis {axis_name(other[0])} is not a batch axis of the query and key (those "
            f"are: {axes_names(batch) or 'none'}); key lengths are one number per sequence",
        )
    check_key_lengths(name, lengths, k, key_pos)  # a length bounds key positions: [0, n]


def and_masks(a: AnyTensor, b: AnyTensor) -> AnyTensor:
    """The conjunction of two masks, over the union of their axes."""
    axes = tuple(dict.fromkeys((*a.axes, *b.axes)))
    sizes = {**a.sizes, **b.sizes}
    ab, bb = broadcast(a, axes, sizes), broadcast(b, axes, sizes)
    return where(ab, bb, False)


def window_mask(
    query_pos: type[Axis], key_pos: type[Axis], n_query: int, n_key: int, window: int
) -> AnyTensor:
    """``[QPos, KPos]`` sliding-window mask, aligned as :func:`causal_mask` (the queries are
    the last ``n_query`` of ``n_key`` positions): query ``i`` at position ``p = i + n_key -
    n_query`` sees key ``j`` where ``p - j < window`` (the query itself counts: ``window``
    keys up to and including its own, with the causal mask; Mistral's ``sliding_window``)."""
    qa, ka = mask_axes(query_pos, key_pos)
    jnp = jax.numpy
    p = jnp.arange(n_query, dtype=jnp.int32)[:, None] + max(n_key - n_query, 0)
    k = jnp.arange(n_key, dtype=jnp.int32)[None, :]
    return Tensor(p - k < window, (qa, ka))


def cached_causal_mask(
    query_pos: type[Axis],
    key_pos: type[Axis],
    n_query: int,
    n_key: int,
    start: AnyTensor,
    window: int | None = None,
) -> AnyTensor:
    """``[*rows, QPos, KPos]`` mask of queries that follow a cache of ``start`` (``[*rows]``,
    each row's length) positions: query ``i`` of a row sees key ``j <= start + i``, none of
    the positions past it (a shorter row's padding, the empty rest of the cache); with a
    sliding ``window``, only the keys with ``start + i - j < window`` among them (the keys
    older than the window are masked, as :func:`window_mask`)."""
    qa, ka = mask_axes(query_pos, key_pos)
    jnp = jax.numpy
    lead = (1,) * start.array.ndim
    q = start.array[..., None, None] + jnp.arange(n_query, dtype=jnp.int32).reshape(*lead, -1, 1)
    k = jnp.arange(n_key, dtype=jnp.int32).reshape(*lead, 1, -1)
    allowed = k <= q  # [*rows, n_query, n_key]
    if window is not None:
        allowed = allowed & (q - k < window)
    return Tensor(allowed, (*start.axes, qa, ka))
