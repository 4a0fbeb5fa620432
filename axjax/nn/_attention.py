"""Multi-head attention with named heads and distinct query/key position axes.

Queries and keys have *different* position axes (``QPos`` and ``KPos``), so the score
``q ⋈ k`` over ``HeadDim`` keeps both, batched over every shared axis (batch, heads): a
contraction can never sum away a batch axis or pair a query with only "its" key by
accident, which positional code does silently when two axes have the same size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import (
    Any,
    ClassVar,
    Generic,
    Literal,
    Protocol,
    TypeVarTuple,
    cast,
    final,
    overload,
)

import equinox as eqx
import jax
from typing_extensions import TypeVar

from ..core import F32, I32, AnyTensor, Axis, AxisError, Bool, DType, Integer, KeyOf, Tensor
from ..core._internal import (
    axes_names,
    axis_name,
    check_axis_label,
    check_int,
    check_mask,
    check_query_key,
    checks_choices,
    dtype_of_kind,
    fail,
    finfo_min,
    is_floating,
    is_key_role,
    is_symbolic,
    optional_positive_int,
    positive_int,
    probability,
    public_call,
    query_of,
)
from ..ops import (
    arange,
    astype,
    broadcast,
    contract,
    greater_equal,
    less,
    rename,
    softmax,
    transpose,
    where,
    zeros,
)
from ..ops._internal import narrowed, widened
from . import _init
from ._dropout import Dropout
from ._fused_attention import (
    AttentionPath,
    FusedAttention,
    check_key_lengths,
    cudnn_refusal,
    warn_fallback,
)
from ._registry import register_layer
from ._util import distinct, require

__all__ = [
    "Head",
    "HeadDim",
    "KVCache",
    "KeyPos",
    "MultiheadAttention",
    "attention_weights",
    "dot_product_attention",
    "causal_mask",
]


@final
class Head(Axis):
    """The attention-head axis (default label of :class:`MultiheadAttention`)."""


@final
class HeadDim(Axis):
    """The per-head feature axis (default label of :class:`MultiheadAttention`)."""


@final
class KeyPos(KeyOf):  # type: ignore[type-arg]  # the key of any query: KeyOf[Any]
    """Key/value positions in self-attention (the query positions, renamed): the key role of
    any query axis (``ax.KeyOf`` without a query), so ``causal_mask(Time, KeyPos, ...)``
    is accepted and ``causal_mask(KeyPos, Time, ...)`` (query and key swapped) refused.
    Declare ``class KPos(ax.KeyOf[Pos])`` to tie a key axis to one query axis."""


# MultiheadAttention's dtype and axes (the defaults are the constructor's)
D = TypeVar("D", bound=DType, default=F32)
Q = TypeVar("Q", bound=Axis, default=Any)
K = TypeVar("K", bound=Axis, default=KeyPos)
E = TypeVar("E", bound=Axis, default=Any)
H = TypeVar("H", bound=Axis, default=Head)
HD = TypeVar("HD", bound=Axis, default=HeadDim)
B = TypeVarTuple("B")
BK = TypeVarTuple("BK")


class _QueryAxis(Protocol):
    """An axis that is not a key role (every ``ax.Axis`` subclass but ``ax.KeyOf``'s): the
    bound of a query parameter, so that a key axis in the query's place is a type error."""

    _key_role: ClassVar[Literal[False]]


_QPos = TypeVar("_QPos", bound=_QueryAxis)
_KPos = TypeVar("_KPos", bound=Axis)
_DS = TypeVar("_DS", bound=DType)
#: a KVCache's dtype and key axis (``KVCache[F32, KPos]``; bare ``KVCache``: any)
_CD = TypeVar("_CD", bound=DType, default=Any)
_CK = TypeVar("_CK", bound=Axis, default=Any)
_S = TypeVarTuple("_S")


def mask_axes(query_pos: object, key_pos: object) -> tuple[type[Axis], type[Axis]]:
    """``causal_mask``'s axes, checked: labels, and ``key_pos`` a key of ``query_pos`` (the
    mypy plugin runs this on stand-ins, so that its message is the run's)."""
    qa = check_axis_label(query_pos, "causal_mask")
    ka = check_axis_label(key_pos, "causal_mask")
    check_query_key(f"causal_mask({axis_name(qa)}, {axis_name(ka)}, ...)", qa, ka)
    return qa, ka


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

    The key axis is a plain axis, ``ax.nn.KeyPos`` (the key of any query) or a key role of
    the query (``class KPos(ax.KeyOf[QPos])``); a key role in the query's place (query and
    key swapped, an anti-causal mask once aligned by name) or the key of another query is
    an ``AxisError``, and a type error for mypy and pyright.

    Example:
        >>> ax.nn.causal_mask(Time, KeyPos, 3, 3).array
        Array([[ True, False, False], [ True,  True, False], [ True,  True,  True]])
        >>> ax.nn.causal_mask(Time, KeyPos, 2, 5).array    # lower-right: the last 2 queries
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
def attention_weights(scores: Tensor[_DS, *_S], over: type[KeyOf[Any]]) -> Tensor[_DS, *_S]:
    """The attention weights: ``ax.softmax(scores, over)`` over the *key* axis ``over``.

    ``over`` is a key role (``ax.nn.KeyPos``, or ``KPos`` declared ``ax.KeyOf[Pos]``); a
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
    _check_roles(name, query, key, over, key_pos)
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
        causal_axis = (own[0], _size(query, own[0]))
    return _attention(
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


def _check_roles(
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


def _size(t: AnyTensor, axis: type[Axis]) -> int:
    n = dict(zip(t.axes, t.shape, strict=True))[axis]
    if n is None:  # a graph node with an open size
        return t.size(axis)  # raises the standard "Cannot read the size" error
    return int(n)


def _path(
    q: AnyTensor,
    k: AnyTensor,
    v: AnyTensor,
    over: type[Axis],
    key_pos: type[Axis],
    masked: bool,
    dropout: bool,
    causal: tuple[type[Axis], int] | None,
    implementation: AttentionPath,
    group: type[Axis] | None = None,
) -> str:
    """The path of one call: ``"einsum"``, or the fused call's ``implementation=``
    (``"xla"``, ``"cudnn"``, ``""`` for JAX's choice). ``"auto"`` warns once per reason when
    it falls back on a GPU; an explicit ``"cudnn"`` that cannot run raises. ``group``: the
    query's second heads axis (grouped-query attention), not a position axis."""
    if implementation == "einsum" or (dropout and implementation != "cudnn"):
        return "einsum"  # dropout: the fused call has none
    sizes = {**dict(zip(k.axes, k.shape, strict=True)), **dict(zip(q.axes, q.shape, strict=True))}
    refused = None
    if implementation in ("auto", "cudnn"):
        refused = cudnn_refusal(
            q.dtype,
            sizes.get(over),
            causal=causal is not None,
            n_query=causal[1] if causal is not None else None,
            n_key=sizes.get(key_pos),
            masked=masked,
            dropout=dropout,
        )
    if implementation == "cudnn":
        if refused is not None:
            what, why = refused
            raise ValueError(
                f"attention: implementation='cudnn' cannot run this call ({what}): {why} "
                "(implementation='auto' falls back to the einsum path)"
            )
        return "cudnn"
    if implementation != "auto":
        return "" if implementation == "fused" else implementation
    own = [a for a in q.axes if a not in k.axes and a != group]
    fits = set(v.axes) == set(k.axes) and over in v.axes and len(own) == 1
    if refused is None and not fits:
        refused = (
            "layout",
            "the value's axes are not the key's, or the query has several position axes of its own",
        )
    if refused is not None:
        warn_fallback(refused)
        return "einsum"
    return "cudnn"


def _score_layout(q: AnyTensor, k: AnyTensor, over: type[Axis]) -> tuple[type[Axis], ...]:
    """The query's axes for the score contraction: those it shares with the key (batch,
    heads) first, then its own (the positions), then ``over``. The scores then come out of
    ``dot_general`` as they are laid out, ``[*batch, Head, Pos, KeyPos]``: no transpose of
    the position-by-position tensor, and every product over it has its batch dimensions
    leading (only the query, ``Pos x HeadDim`` per head, is transposed)."""
    shared = tuple(a for a in q.axes if a in k.axes and a != over)
    own = tuple(a for a in q.axes if a not in k.axes)
    return (*shared, *own, over)


def _length_mask(lengths: AnyTensor, key_pos: type[Axis], n_key: int) -> AnyTensor:
    """``[*lengths.axes, key_pos]``: true for the first ``lengths`` keys."""
    n = astype(lengths, I32)
    positions: AnyTensor = arange(key_pos, n_key)
    axes = (*n.axes, key_pos)
    sizes = {**n.sizes, key_pos: n_key}
    return less(broadcast(positions, axes, sizes), broadcast(n, axes, sizes))


def _check_lengths(
    lengths: AnyTensor,
    q: AnyTensor,
    k: AnyTensor,
    over: type[Axis],
    heads: type[Axis] | None,
    key_pos: type[Axis],
) -> None:
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


def _attention(
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
) -> AnyTensor:
    """Attention by the einsum or the fused path; ``causal``: (query_pos, its size);
    ``group``: the query heads that share one of the key's ``heads`` (grouped-query
    attention: an axis of the query alone, kept through the scores on every path)."""
    heads = heads if heads in k.axes else None
    group = group if group in q.axes and group not in k.axes else None
    if mask is not None:  # over the score axes: the query's but ``over``, and the keys'
        known = {
            **dict(zip(k.axes, k.shape, strict=True)),
            **dict(zip(q.axes, q.shape, strict=True)),
        }
        score_axes = (*(a for a in q.axes if a != over), key_pos, *((heads,) if heads else ()))
        check_mask("Attention", mask, {a: known.get(a) for a in score_axes})
    if key_lengths is not None:
        _check_lengths(key_lengths, q, k, over, heads, key_pos)
    masked, dropped = mask is not None, drop is not None
    path = _path(q, k, v, over, key_pos, masked, dropped, causal, implementation, group)
    if path != "einsum" and causal is not None and causal[1] != _size(k, key_pos):
        # the fused kernels' causal flag aligns top-left; causal_mask aligns lower-right
        # when keys outnumber queries, so such a call takes the mask instead of the flag
        c = causal_mask(causal[0], key_pos, causal[1], _size(k, key_pos))
        mask = c if mask is None else _and(mask, c)
        causal = None
    if path != "einsum":
        op = FusedAttention(
            over,
            key_pos,
            heads=heads,
            group=group,
            causal=causal is not None,
            masked=mask is not None,
            lengths=key_lengths is not None,
            implementation=path or None,
        )
        return op(q, k, v, *(t for t in (mask, key_lengths) if t is not None))
    if causal is not None:
        c = causal_mask(causal[0], key_pos, causal[1], _size(k, key_pos))
        mask = c if mask is None else _and(mask, c)
    if key_lengths is not None:
        padding = _length_mask(key_lengths, key_pos, _size(k, key_pos))
        mask = padding if mask is None else _and(mask, padding)
    d = _size(q, over)  # a graph's open size cannot scale the scores: the size error
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


@register_layer()
class MultiheadAttention(eqx.Module, Generic[D, Q, K, E, H, HD]):
    """Multi-head attention: project, attend per head, project back.

    A ``MultiheadAttention[D, QPos, KPos, Embed, Head, HeadDim]`` (dtype, query and key
    position axes, feature axis, head axes; ``MultiheadAttention(Embed, 64, num_heads=4,
    query_pos=Time, ...)`` is a ``MultiheadAttention[F32, Time, KeyPos, Embed, Head,
    HeadDim]``) maps a query ``Tensor[D, *B, QPos, Embed]`` (keys and values ``[*B, KPos,
    Embed]``) to ``Tensor[D, *B, QPos, Embed]``. The mypy plugin runs the layer's own checks
    (any layout, the mask's axes); pyright accepts the batch-first and time-first layouts.

    Projections are ``Tensor[F32, Head, HeadDim, Embed]`` (query, key, value) and
    ``Tensor[F32, Embed, Head, HeadDim]`` (output), so heads are an axis, not a reshape.

    Args:
        embed_axis, embed_size: the model's feature axis and its size.
        num_heads: number of heads; ``head_size`` defaults to ``embed_size // num_heads``.
        query_pos: the position axis of the queries (``Time``, say).
        key_pos: the position axis of keys and values (``KeyPos`` by default; in
            self-attention the query positions are renamed to it).
        head_axis, head_dim_axis: labels of the heads and per-head features.
        causal: mask out keys after the query (self-attention).
        use_bias: add biases to the projections.
        dropout_p: dropout on the attention weights (needs ``key`` when training; its
            ``inference`` flag is a bool leaf, so differentiate with ``eqx.filter_grad``).
        implementation: the attention path, as for :func:`dot_product_attention`
            (dropout while training takes the einsum path, the fused call has none;
            ``"cudnn"`` with it raises).
        dtype, key: parameter dtype; PRNG key (keyword only).

    Example:
        >>> mha = ax.nn.MultiheadAttention(Embed, 64, num_heads=4, query_pos=Time,
        ...                                causal=True, key=jax.random.key(0))
        >>> mha(h)          # [Batch, Time, Embed] -> [Batch, Time, Embed] (self-attention)
        >>> mha(h, memory)  # cross-attention; memory is [Batch, KeyPos, Embed]
    """

    query_proj: AnyTensor
    key_proj: AnyTensor
    value_proj: AnyTensor
    output_proj: AnyTensor
    biases: tuple[AnyTensor, AnyTensor, AnyTensor, AnyTensor] | None
    dropout: Dropout | None
    embed_axis: type[Axis] = eqx.field(static=True)
    query_pos: type[Axis] = eqx.field(static=True)
    key_pos: type[Axis] = eqx.field(static=True)
    head_axis: type[Axis] = eqx.field(static=True)
    head_dim_axis: type[Axis] = eqx.field(static=True)
    causal: bool = eqx.field(static=True)
    implementation: AttentionPath = eqx.field(static=True)

    @checks_choices
    def __init__(
        self,
        embed_axis: type[E],
        embed_size: int,
        *,
        num_heads: int,
        query_pos: type[Q],
        key_pos: type[K] = KeyPos,  # type: ignore[assignment]  # K's default
        head_size: int | None = None,
        head_axis: type[H] = Head,  # type: ignore[assignment]  # H's default
        head_dim_axis: type[HD] = HeadDim,  # type: ignore[assignment]  # HD's default
        causal: bool = False,
        use_bias: bool = False,
        dropout_p: float = 0.0,
        weight_init: _init.Initializer | None = None,
        dtype: type[D] = F32,  # type: ignore[assignment]  # D defaults to F32
        implementation: AttentionPath = "auto",
        key: jax.Array,
    ) -> None:
        axes = (embed_axis, query_pos, key_pos, head_axis, head_dim_axis)
        for a in axes:
            check_axis_label(a, "MultiheadAttention")
        distinct("MultiheadAttention", axes)
        check_query_key("MultiheadAttention", query_pos, key_pos)
        (self.embed_axis, self.query_pos, self.key_pos, self.head_axis, self.head_dim_axis) = axes
        embed_size = positive_int("MultiheadAttention", "embed_size", embed_size)
        num_heads = positive_int("MultiheadAttention", "num_heads", num_heads)
        head_size = optional_positive_int("MultiheadAttention", "head_size", head_size)
        dropout_p = probability("MultiheadAttention", "dropout_p", dropout_p, one_ok=True)
        if head_size is None:
            if embed_size % num_heads:
                raise ValueError(
                    f"MultiheadAttention: embed_size {embed_size} does not "
                    f"divide into {num_heads} heads; give head_size"
                )
            head_size = embed_size // num_heads
        init = weight_init or _init.glorot_uniform()
        heads = {head_axis: num_heads, head_dim_axis: head_size}
        k1, k2, k3, k4 = jax.random.split(key, 4)
        self.query_proj, self.key_proj, self.value_proj = (
            init(
                k,
                {**heads, embed_axis: embed_size},
                fan_in=embed_axis,
                fan_out=(head_axis, head_dim_axis),
                dtype=dtype,
            )
            for k in (k1, k2, k3)
        )
        self.output_proj = init(
            k4,
            {embed_axis: embed_size, **heads},
            fan_in=(head_axis, head_dim_axis),
            fan_out=embed_axis,
            dtype=dtype,
        )
        zeros = _init.zeros()
        self.biases = (
            (
                zeros(k1, heads, dtype=dtype),
                zeros(k1, heads, dtype=dtype),
                zeros(k1, heads, dtype=dtype),
                zeros(k1, {embed_axis: embed_size}, dtype=dtype),
            )
            if use_bias
            else None
        )
        self.dropout = Dropout(dropout_p) if dropout_p > 0 else None
        self.causal = causal
        self.implementation = implementation

    def _project(self, x: AnyTensor, w: AnyTensor, i: int) -> AnyTensor:
        y = contract(x, w, over=self.embed_axis)
        return y + broadcast(self.biases[i], y) if self.biases is not None else y

    @overload
    def init_cache(
        self, batch: Mapping[type[Axis], int], max_len: int, dtype: None = None
    ) -> KVCache[D, K]: ...
    @overload
    def init_cache(
        self, batch: Mapping[type[Axis], int], max_len: int, dtype: type[_DS]
    ) -> KVCache[_DS, K]: ...
    def init_cache(
        self, batch: Mapping[type[Axis], int], max_len: int, dtype: type[DType] | None = None
    ) -> KVCache[Any, K]:
        """An empty :class:`KVCache` of ``max_len`` positions for queries with the ``batch``
        axes (``{Batch: 16}``): keys and values ``[*batch, Head, KeyPos, HeadDim]`` in
        ``dtype`` (the projections' by default), length 0."""
        max_len = positive_int("MultiheadAttention.init_cache", "max_len", max_len)
        for a in batch:
            check_axis_label(a, "MultiheadAttention.init_cache")
        sizes = {
            **{a: positive_int("init_cache", "batch", n) for a, n in batch.items()},
            self.head_axis: self.key_proj.size(self.head_axis),
            self.key_pos: max_len,
            self.head_dim_axis: self.key_proj.size(self.head_dim_axis),
        }
        dt = (
            self.key_proj.dtype
            if dtype is None
            else dtype_of_kind("MultiheadAttention.init_cache", "dtype", dtype, "floating")
        )
        empty: AnyTensor = zeros(tuple(sizes.values()), *sizes, dtype=dt)
        key_pos = cast("type[K]", self.key_pos)
        return KVCache(empty, empty, jax.numpy.zeros((), jax.numpy.int32), key_pos)

    @overload  # the two layouts overlap where the batch is empty (the same result)
    def __call__(  # type: ignore[overload-overlap]  # as the line above says
        self,
        query: Tensor[D, *B, Q, E],
        *,
        cache: KVCache[_DS, K],
        mask: Tensor[Bool, *tuple[Any, ...]] | None = None,
        key_lengths: Tensor[Any, *tuple[Any, ...]] | None = None,
        key: jax.Array | None = None,
        inference: bool | None = None,
    ) -> tuple[Tensor[D, *B, Q, E], KVCache[_DS, K]]: ...
    @overload
    def __call__(
        self,
        query: Tensor[D, Q, *B, E],
        *,
        cache: KVCache[_DS, K],
        mask: Tensor[Bool, *tuple[Any, ...]] | None = None,
        key_lengths: Tensor[Any, *tuple[Any, ...]] | None = None,
        key: jax.Array | None = None,
        inference: bool | None = None,
    ) -> tuple[Tensor[D, Q, *B, E], KVCache[_DS, K]]: ...
    @overload
    def __call__(  # type: ignore[overload-overlap]  # the layouts overlap (see above)
        self,
        query: Tensor[D, *B, Q, E],
        key_: Tensor[D, *BK, K, E] | None = None,
        value: Tensor[D, *BK, K, E] | None = None,
        *,
        mask: Tensor[Bool, *tuple[Any, ...]] | None = None,
        key_lengths: Tensor[Any, *tuple[Any, ...]] | None = None,
        key: jax.Array | None = None,
        inference: bool | None = None,
    ) -> Tensor[D, *B, Q, E]: ...
    @overload
    def __call__(
        self,
        query: Tensor[D, Q, *B, E],
        key_: Tensor[D, K, *BK, E] | None = None,
        value: Tensor[D, K, *BK, E] | None = None,
        *,
        mask: Tensor[Bool, *tuple[Any, ...]] | None = None,
        key_lengths: Tensor[Any, *tuple[Any, ...]] | None = None,
        key: jax.Array | None = None,
        inference: bool | None = None,
    ) -> Tensor[D, Q, *B, E]: ...
    def __call__(
        self,
        query: AnyTensor,
        key_: AnyTensor | None = None,
        value: AnyTensor | None = None,
        *,
        mask: AnyTensor | None = None,
        key_lengths: AnyTensor | None = None,
        key: jax.Array | None = None,
        inference: bool | None = None,
        cache: KVCache[Any, Any] | None = None,
    ) -> AnyTensor | tuple[AnyTensor, KVCache[Any, Any]]:
        """Attend from ``query`` to ``key_``/``value`` (both default to ``query``).

        With ``cache=`` (a :class:`KVCache`, self-attention only) the query's positions are
        the next ones after the ``cache.length`` cached: their keys and values are written
        into the cache, the query attends to every filled position (causally: to those not
        after its own) and the call returns ``(y, cache)``: the prefill of a prompt and each
        decode step are the same call.

        ``mask`` is a Bool tensor over any of the score axes (batch axes, ``query_pos``,
        ``head_axis``, ``key_pos``), true where attention is allowed. ``key_lengths`` is an
        integer tensor over (some of) the batch axes: how many keys of each sequence are
        real, the rest padding (cuDNN takes it as sequence lengths, a mask would be a
        ``[batch, heads, queries, keys]`` tensor). ``key`` drives the attention dropout.
        """
        name = f"MultiheadAttention({axis_name(self.embed_axis)})"
        e = self.query_proj.size(self.embed_axis)
        require(name, (query,), query, self.embed_axis, e, "query")
        require(name, (query,), query, self.query_pos, None, "query")
        if cache is not None:
            if key_ is not None or value is not None:
                raise TypeError(
                    f"{name}: a KVCache is for self-attention; give the query only "
                    "(its keys and values go into the cache)"
                )
            return self._cached(query, cache, mask, key_lengths, key, inference)
        keys = rename(query, self.query_pos, self.key_pos) if key_ is None else key_
        values = keys if value is None else value
        for what, t in (("key", keys), ("value", values)):
            require(name, (query, keys, values), t, self.embed_axis, e, what)
            require(name, (query, keys, values), t, self.key_pos, None, what)
        q = self._project(query, self.query_proj, 0)
        k = self._project(keys, self.key_proj, 1)
        v = self._project(values, self.value_proj, 2)
        causal = (self.query_pos, query.size(self.query_pos)) if self.causal else None
        return self._attend(q, k, v, mask, key_lengths, key, inference, causal)

    def _dropout(
        self, key: jax.Array | None, inference: bool | None
    ) -> Callable[[AnyTensor], AnyTensor] | None:
        drop: Callable[[AnyTensor], AnyTensor] | None = None
        off = self.dropout is None or (
            (self.dropout.inference if inference is None else inference) is True
        )
        if self.dropout is not None and not off:  # off in inference: every path can run
            dropout = self.dropout

            def dropped(w: AnyTensor) -> AnyTensor:
                return dropout(w, key=key, inference=inference)

            drop = dropped
        return drop

    def _attend(
        self,
        q: AnyTensor,
        k: AnyTensor,
        v: AnyTensor,
        mask: AnyTensor | None,
        key_lengths: AnyTensor | None,
        key: jax.Array | None,
        inference: bool | None,
        causal: tuple[type[Axis], int] | None,
    ) -> AnyTensor:
        out = _attention(
            q,
            k,
            v,
            self.head_dim_axis,
            self.key_pos,
            mask,
            self._dropout(key, inference),
            implementation=self.implementation,
            heads=self.head_axis,
            causal=causal,
            key_lengths=key_lengths,
        )
        y = contract(out, self.output_proj, over=(self.head_axis, self.head_dim_axis))
        return y + broadcast(self.biases[3], y) if self.biases is not None else y

    def _cached(
        self,
        query: AnyTensor,
        cache: KVCache[Any, Any],
        mask: AnyTensor | None,
        key_lengths: AnyTensor | None,
        key: jax.Array | None,
        inference: bool | None,
    ) -> tuple[AnyTensor, KVCache[Any, Any]]:
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache= takes a KVCache, got {type(cache).__name__}")
        if cache.key_pos is not self.key_pos:
            raise AxisError(
                f"MultiheadAttention: the cache's key axis is {axis_name(cache.key_pos)}, "
                f"the layer's {axis_name(self.key_pos)} (make it with this layer's init_cache)"
            )
        q = self._project(query, self.query_proj, 0)
        cache = cache.write(
            self._project(query, self.key_proj, 1),
            self._project(query, self.value_proj, 2),
            self.query_pos,
        )
        n_query, n_key = _size(query, self.query_pos), cache.max_len
        start = cache.length - n_query  # the position of the first query
        if self.causal:  # keys up to each query's own position: none of the empty ones
            filled = causal_mask(self.query_pos, self.key_pos, n_query, n_key, start)
        else:
            length: AnyTensor = Tensor(cache.length, ())
            filled = less(arange(self.key_pos, n_key), length)
        mask = filled if mask is None else _and(mask, filled)
        out = self._attend(q, cache.keys, cache.values, mask, key_lengths, key, inference, None)
        return out, cache


def _and(a: AnyTensor, b: AnyTensor) -> AnyTensor:
    axes = tuple(dict.fromkeys((*a.axes, *b.axes)))
    sizes = {**a.sizes, **b.sizes}
    ab, bb = broadcast(a, axes, sizes), broadcast(b, axes, sizes)
    return where(ab, bb, False)


#: the attention core and the conjunction of masks, for the package's other attention
#: layers (``GroupedQueryAttention``)
attend = _attention
and_masks = _and
