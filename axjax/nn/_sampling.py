"""The token sampler of generation: temperature, top-k and top-p (nucleus) on raw logits
``[..., vocab]``, with the semantics and the order of Hugging Face transformers' logits
processors, then a draw with ``jax.random.categorical``.

Pure functions of arrays, without named axes (the caller puts the vocabulary axis last):
:func:`sample_tokens` draws the ids, :func:`filtered_logits` gives the distribution it
draws from (the tests compare it with an oracle written from the definitions).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..core._internal import check_float, non_negative_float, optimization_barrier, positive_int

__all__ = ["check_sampler", "filtered_logits", "sample_tokens"]


def _check(
    where: str, logits: jax.Array, temperature: float, top_k: int | None, top_p: float | None
) -> tuple[float, int | None, float | None]:
    """The arguments, checked: float logits with a vocabulary axis, a static temperature
    at least 0, ``top_k`` a positive int, ``top_p`` in ``(0, 1]``."""
    shape = getattr(logits, "shape", None)
    if shape is None or len(shape) == 0 or shape[-1] == 0:
        raise ValueError(
            f"{where}: logits must be an array [..., vocab] with a non-empty vocabulary "
            f"axis last, got shape {shape}"
        )
    if not jnp.issubdtype(logits.dtype, jnp.floating):
        raise TypeError(f"{where}: logits must be floating, got {logits.dtype}")
    return check_sampler(where, temperature, top_k, top_p)


def check_sampler(
    where: str, temperature: float, top_k: int | None, top_p: float | None
) -> tuple[float, int | None, float | None]:
    """The sampler's options, checked: a temperature at least 0, ``top_k`` a positive int,
    ``top_p`` in ``(0, 1]`` (``where`` names the caller in the message)."""
    temperature = non_negative_float(where, "temperature", temperature)
    if top_k is not None:
        top_k = positive_int(where, "top_k", top_k)
    if top_p is not None:
        top_p = check_float(where, "top_p", top_p, 0.0, 1.0, "a number in (0, 1]", low_open=True)
    return temperature, top_k, top_p


def _top_k_values(a: jax.Array, k: int) -> jax.Array:
    """The ``k`` largest of ``a`` along its last axis, in descending order ``[..., k]``.

    The barrier keeps XLA:CPU's ``TopK`` kernel: compared with ``a`` in the same fusion,
    the top-k became a sort of the whole vocabulary (2.6 s against 0.05 s for 64 rows of
    150k on two cores)."""
    return optimization_barrier(jax.lax.top_k(a, k)[0])


def _nucleus_keep(probs: jax.Array, top_p: float) -> jax.Array:
    """Which of the descending ``probs`` the nucleus keeps: those whose mass strictly
    above them (the exclusive cumulative sum) is below ``top_p``, a prefix that always
    holds the first."""
    total = jnp.cumsum(probs, axis=-1)
    above = jnp.concatenate([jnp.zeros_like(total[..., :1]), total[..., :-1]], axis=-1)
    return above < top_p


def _top_p(a: jax.Array, vals: jax.Array | None, top_p: float) -> jax.Array:
    """``a`` with the tokens outside the nucleus at ``-inf``. ``vals`` are the top-k
    stage's kept values in descending order (the kept set is every token at least the
    last of them: ties with the k-th are kept too); ``None``: the whole vocabulary,
    sorted here."""
    if vals is None:
        vals = jnp.flip(jax.lax.sort(a, dimension=a.ndim - 1, is_stable=False), axis=-1)
        extra = jnp.zeros(a.shape[:-1] + (1,), a.dtype)
    else:  # tokens tied with the k-th beyond the k values: their mass counts
        kth = vals[..., -1:]
        count = jnp.sum(a == kth, axis=-1, keepdims=True) - jnp.sum(vals == kth, -1, keepdims=True)
        extra = count.astype(a.dtype) * jnp.exp(kth - vals[..., :1])
    weights = jnp.exp(vals - vals[..., :1])
    probs = weights / (jnp.sum(weights, axis=-1, keepdims=True) + extra)
    keep = _nucleus_keep(probs, top_p)
    cut = jnp.min(jnp.where(keep, vals, jnp.inf), axis=-1, keepdims=True)
    return jnp.where(a < cut, -jnp.inf, a)


def _filter(
    logits: jax.Array, temperature: float, top_k: int | None, top_p: float | None
) -> jax.Array:
    """The scaled logits in float32, ``-inf`` where top-k or top-p cut (not normalised);
    ``temperature > 0``."""
    a = logits.astype(jnp.float32) / temperature
    vals = None
    if top_k is not None and top_k < a.shape[-1]:
        vals = _top_k_values(a, top_k)
        a = jnp.where(a < vals[..., -1:], -jnp.inf, a)
    if top_p is not None and top_p < 1:
        a = _top_p(a, vals, top_p)
    return a


def filtered_logits(
    logits: jax.Array,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> jax.Array:
    """The distribution :func:`sample_tokens` draws from, as float32 log-probabilities
    ``[..., vocab]``: ``log_softmax`` of the scaled logits renormalised over the tokens
    kept, ``-inf`` where cut. ``temperature == 0`` is the point mass on the (first)
    argmax. The arguments are those of :func:`sample_tokens`.

    Example:
        >>> p = jnp.log(jnp.array([0.5, 0.25, 0.125, 0.125]))
        >>> jnp.exp(filtered_logits(p, top_p=0.75))  # 0.5 + 0.25 reaches 0.75: two kept
        Array([0.6666667, 0.3333333, 0.       , 0.       ], dtype=float32)
    """
    temperature, top_k, top_p = _check("filtered_logits", logits, temperature, top_k, top_p)
    if temperature == 0:
        hit = jax.nn.one_hot(jnp.argmax(logits, axis=-1), logits.shape[-1], dtype=jnp.bool_)
        return jnp.where(hit, 0.0, -jnp.inf).astype(jnp.float32)
    return jax.nn.log_softmax(_filter(logits, temperature, top_k, top_p), axis=-1)


def sample_tokens(
    logits: jax.Array,
    key: jax.Array | None,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> jax.Array:
    """One token id per row of ``logits`` ``[..., vocab]`` (any float dtype, computed in
    float32): ``int32 [...]``.

    ``temperature == 0`` is greedy, the first argmax (``key`` may be ``None``). Otherwise
    the logits go through transformers' logits processors, in their order, and one token
    is drawn with ``jax.random.categorical(key, ...)``:

    1. temperature: ``logits / temperature``;
    2. top-k: keep the ``top_k`` largest; ties with the k-th value are kept
       (``logits < kth_value`` is cut, as ``TopKLogitsWarper``);
    3. top-p (nucleus), on the distribution after 1 and 2, renormalised: keep the
       smallest prefix of the tokens in descending order whose cumulative probability
       reaches ``top_p``, the most likely token always. This is ``TopPLogitsWarper``'s
       rule, which keeps the tokens whose cumulative probability in ascending order is
       ``> 1 - top_p``, and its boundary: that ascending cumulative is 1 minus the mass
       strictly above a token, so a token is kept when the mass above it is
       ``< top_p``, and a prefix whose cumulative probability equals ``top_p`` exactly
       ends the nucleus (the next token, ascending cumulative ``== 1 - top_p``, is cut).
       The two are the same in exact arithmetic; in float32 a token within rounding of
       the boundary may fall either side, as between any two implementations. Tokens
       tied in value are kept or cut together (transformers' cut among tied tokens
       follows its sort's order).

    ``top_k >= vocab`` and ``top_p == 1`` change nothing. The arguments but ``logits``
    and ``key`` are static (Python numbers): the function jits with them in
    ``static_argnames`` and vmaps over keys. One sort of the vocabulary for top-p alone;
    with top-k, top-p works on the k values of ``lax.top_k``.

    Example:
        >>> logits = jnp.array([[2.0, 1.0, 0.5, -1.0]])
        >>> sample_tokens(logits, None, temperature=0)
        Array([0], dtype=int32)
        >>> keys = jax.random.split(jax.random.key(0), 1000)
        >>> draws = jax.vmap(lambda k: sample_tokens(logits, k, top_k=3, top_p=0.9))(keys)
    """
    temperature, top_k, top_p = _check("sample_tokens", logits, temperature, top_k, top_p)
    if temperature == 0:
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)
    if key is None:
        raise TypeError("sample_tokens: sampling (temperature > 0) needs a key")
    a = _filter(logits, temperature, top_k, top_p)
    return jax.random.categorical(key, a, axis=-1).astype(jnp.int32)
