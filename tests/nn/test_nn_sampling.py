"""The token sampler (``axjax/nn/_sampling.py``): frequencies of 10^4 draws against an
oracle written here from the definitions (transformers' temperature, top-k and top-p
processors, in their order), by a chi-squared goodness-of-fit test that mutants of the
sampler fail; greedy decoding, batches, bf16, the errors, and ``filtered_logits`` on
hand-made cases whose answer is exact in float32 (dyadic probabilities)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import chi2

from axjax.nn import _sampling
from axjax.nn._sampling import filtered_logits, sample_tokens

Sampler = Callable[..., jax.Array]

#: draws per configuration, all in one vmapped call
DRAWS = 10_000
#: the chi-squared test's significance: the real sampler fails it with probability 1e-4
#: for a random seed (the seeds are fixed, so never here)
ALPHA = 1e-4

#: 16 distinct logits, in no particular order
BASE = (1.9, 0.3, 1.2, -0.6, 0.8, -1.5, 1.5, 0.0, -0.3, 1.0, -1.1, 0.5, -0.9, 2.3, -1.8, 0.15)
#: probabilities 1/2, 1/4, ..., 1/4096, 1/4096: exact in float32, their sums too
DYADIC = tuple(2.0**-i for i in range(1, 13)) + (2.0**-12,)


@dataclass(frozen=True)
class Config:
    """A distribution and the sampler's arguments. ``weights`` are the probabilities at
    temperature 1, unnormalised (the logits are their logarithms)."""

    name: str
    weights: tuple[float, ...]
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    @property
    def logits(self) -> jax.Array:
        return jnp.asarray(np.log(self.weights), jnp.float32)

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(temperature=self.temperature, top_k=self.top_k, top_p=self.top_p)


def _exp(values: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(float(np.exp(v)) for v in values)


CONFIGS = {
    c.name: c
    for c in [
        Config("temperature", _exp(BASE), temperature=0.8),
        Config("top_k", _exp(BASE), temperature=1.3, top_k=6),
        Config("top_p", _exp(BASE), temperature=1.0, top_p=0.8),  # 7 kept
        Config("top_k+top_p", _exp(BASE), temperature=1.3, top_k=8, top_p=0.75),  # 5 kept
        # 1/2 + 1/4 + 1/8 is 0.875 exactly: the nucleus ends there, 3 kept
        Config("top_p_boundary", DYADIC, temperature=1.0, top_p=0.875),
    ]
}


def oracle(config: Config) -> np.ndarray:
    """The distribution the sampler must draw from, in float64 from the definitions:
    ``softmax(logits / T)``; top-k keeps the tokens at least the k-th largest; top-p, as
    transformers' ``TopPLogitsWarper``, sorts ascending and cuts the tokens whose
    cumulative probability is ``<= 1 - top_p``, never the last (the most likely)."""
    w = np.asarray(config.weights, np.float64) ** (1.0 / config.temperature)
    p = w / w.sum()
    if config.top_k is not None and config.top_k < p.size:
        kth = np.sort(p)[::-1][config.top_k - 1]
        p = np.where(p >= kth, p, 0.0)
        p /= p.sum()
    if config.top_p is not None and config.top_p < 1:
        order = np.argsort(p, kind="stable")
        cum = np.cumsum(p[order])
        gap = np.abs(cum - (1 - config.top_p)).min()
        assert gap == 0 or gap > 1e-4, f"{config.name}: a cut float32 could round either way"
        cut = cum <= 1 - config.top_p
        cut[-1] = False
        p[order[cut]] = 0.0
        p /= p.sum()
    return p


def chi_squared(sampler: Sampler, config: Config, seed: int = 0) -> float:
    """Pearson's statistic of ``DRAWS`` tokens from ``sampler`` over the tokens the oracle
    keeps; ``inf`` if a token it cuts is ever drawn."""
    keys = jax.random.split(jax.random.key(seed), DRAWS)
    logits, kwargs = config.logits, config.kwargs
    # a new function each time: a mutant patched into the module is traced afresh
    draw = jax.jit(jax.vmap(lambda k: sampler(logits, k, **kwargs)))
    tokens = np.asarray(draw(keys))
    assert tokens.shape == (DRAWS,) and tokens.dtype == np.int32
    expected = DRAWS * oracle(config)
    observed = np.bincount(tokens, minlength=expected.size)
    kept = expected > 0
    if observed[~kept].any():
        return float("inf")
    return float(np.sum((observed[kept] - expected[kept]) ** 2 / expected[kept]))


def critical_value(config: Config) -> float:
    """The chi-squared quantile at ``1 - ALPHA`` for the kept tokens less one."""
    return float(chi2.isf(ALPHA, int(np.count_nonzero(oracle(config))) - 1))


def check_distribution(sampler: Sampler, config: Config) -> bool:
    """Whether ``sampler``'s frequencies fit the oracle's distribution: no token outside
    the kept set drawn, the statistic under the critical value."""
    return chi_squared(sampler, config) <= critical_value(config)


# ------------------------------------------------------------------ the chi-squared test
@pytest.mark.parametrize("name", list(CONFIGS))
def test_frequencies_fit_the_renormalised_distribution(name: str) -> None:
    """10^4 draws of the real sampler pass the check on every configuration."""
    config = CONFIGS[name]
    stat = chi_squared(sample_tokens, config)
    assert stat <= critical_value(config), (name, stat, critical_value(config))


#: the real helper, held before any mutant replaces it in the module
_real_keep = _sampling._nucleus_keep


def _nucleus_one_longer(probs: jax.Array, top_p: float) -> jax.Array:
    keep = _real_keep(probs, top_p)
    return jnp.concatenate([keep[..., :1], keep[..., :-1]], axis=-1)


def _nucleus_one_shorter(probs: jax.Array, top_p: float) -> jax.Array:
    return jnp.cumsum(probs, axis=-1) < top_p  # the inclusive sum: the crossing token lost


def _nucleus_boundary_kept(probs: jax.Array, top_p: float) -> jax.Array:
    above = jnp.cumsum(probs, axis=-1) - probs
    return above <= top_p  # transformers' boundary flipped: cumulative == 1 - top_p kept


def _top_p_before_top_k(logits: jax.Array, key: jax.Array, **kw: Any) -> jax.Array:
    a = filtered_logits(logits, kw["temperature"], None, kw["top_p"])
    a = filtered_logits(a, 1.0, kw["top_k"], None)
    return jax.random.categorical(key, a).astype(jnp.int32)


def _top_k_off_by(n: int) -> Callable[[jax.Array, int], jax.Array]:
    return lambda a, k: jax.lax.top_k(a, k + n)[0]


#: each mutant: the module helper it replaces (or a whole sampler), the configurations
#: that must catch it
MUTANTS: dict[str, tuple[str | None, Any, tuple[str, ...]]] = {
    "nucleus_one_longer": ("_nucleus_keep", _nucleus_one_longer, ("top_p", "top_p_boundary")),
    "nucleus_one_shorter": ("_nucleus_keep", _nucleus_one_shorter, ("top_p", "top_p_boundary")),
    "nucleus_boundary_kept": ("_nucleus_keep", _nucleus_boundary_kept, ("top_p_boundary",)),
    "top_p_before_top_k": (None, _top_p_before_top_k, ("top_k+top_p",)),
    "top_k_plus_one": ("_top_k_values", _top_k_off_by(1), ("top_k",)),
    "top_k_minus_one": ("_top_k_values", _top_k_off_by(-1), ("top_k",)),
}
MUTANT_CASES = [(m, c) for m, (_, _, configs) in MUTANTS.items() for c in configs]


def mutant_sampler(name: str, monkeypatch: pytest.MonkeyPatch) -> Sampler:
    """The sampler with the mutant ``name`` in it: a helper of the module patched, or a
    sampler of its own."""
    helper, fn, _ = MUTANTS[name]
    if helper is None:
        return fn  # type: ignore[no-any-return]
    monkeypatch.setattr(_sampling, helper, fn)
    return sample_tokens


@pytest.mark.parametrize(("mutant", "name"), MUTANT_CASES)
def test_a_mutant_fails_the_check(mutant: str, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same check that the real sampler passes catches each mutant: an off-by-one in
    the nucleus (one token more, one less, the boundary flipped), top-p applied before
    top-k, top-k keeping k + 1 or k - 1."""
    assert not check_distribution(mutant_sampler(mutant, monkeypatch), CONFIGS[name])


# ------------------------------------------------------------------ greedy, shapes, dtypes
STATIC = ("temperature", "top_k", "top_p")
#: jitted once each: compiling a program is cheaper than running its ops one by one the
#: first time
SAMPLE = jax.jit(sample_tokens, static_argnames=STATIC)
FILTER = jax.jit(filtered_logits, static_argnames=STATIC)


def test_greedy_is_the_first_argmax() -> None:
    """``temperature=0``: the argmax without a key, the first of tied maxima, whatever
    top-k and top-p say; jitted too."""
    logits = jnp.array([[0.1, 2.0, -1.0, 2.0], [3.0, 0.0, 3.0, 1.0], [-5.0, -4.0, -4.5, -9.0]])
    want = np.array([1, 0, 1], np.int32)
    got = sample_tokens(logits, None, temperature=0)
    assert got.dtype == jnp.int32 and got.shape == (3,)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(sample_tokens(logits, None, temperature=0, top_k=2), want)
    np.testing.assert_array_equal(sample_tokens(logits, None, temperature=0, top_p=0.1), want)
    np.testing.assert_array_equal(SAMPLE(logits, None, temperature=0), want)
    point = jnp.exp(filtered_logits(logits, 0.0))
    np.testing.assert_array_equal(point, np.eye(4)[want])


def test_a_batch_draws_each_row_from_its_own_distribution() -> None:
    """Logits ``[2, 3, vocab]``: ids ``[2, 3]``, each row's draws among its own kept tokens
    (top-k and top-p cut a different set per row), a vmap over keys agreeing with a call
    per key, ``filtered_logits`` with it row by row; ``top_k=1`` is the argmax of every
    row."""
    rng = np.random.default_rng(1)
    logits = jnp.asarray(rng.normal(size=(2, 3, 20)) * 2, jnp.float32)
    kw = dict(temperature=0.9, top_k=7, top_p=0.6)
    key = jax.random.key(3)
    got = SAMPLE(logits, key, **kw)
    assert got.shape == (2, 3) and got.dtype == jnp.int32
    keys = jax.random.split(jax.random.key(4), 500)
    draws = np.asarray(jax.jit(jax.vmap(lambda k: sample_tokens(logits, k, **kw)))(keys))
    np.testing.assert_array_equal(draws[7], SAMPLE(logits, keys[7], **kw))
    assert draws.shape == (500, 2, 3)
    batched = np.asarray(FILTER(logits, **kw))
    kept = np.isfinite(batched)  # [2, 3, 20]
    assert len({tuple(r) for r in kept.reshape(6, 20)}) > 1  # the rows' kept sets differ
    rows = jax.jit(jax.vmap(jax.vmap(lambda r: filtered_logits(r, **kw))))(logits)
    np.testing.assert_array_equal(rows, batched)
    for i, j in np.ndindex(2, 3):
        assert kept[i, j, draws[:, i, j]].all()
    best = np.asarray(jnp.argmax(logits, axis=-1))
    np.testing.assert_array_equal(SAMPLE(logits, key, top_k=1), best)


def test_bf16_logits_are_computed_in_float32() -> None:
    """bf16 logits: the same distribution and the same draws as their float32 values."""
    logits = jnp.asarray(np.log(CONFIGS["top_p"].weights), jnp.bfloat16)
    up = logits.astype(jnp.float32)
    kw = dict(temperature=0.7, top_k=10, top_p=0.85)
    got = FILTER(logits, **kw)
    assert got.dtype == jnp.float32
    np.testing.assert_array_equal(got, FILTER(up, **kw))
    keys = jax.random.split(jax.random.key(5), 64)
    draw = jax.jit(lambda x: jax.vmap(lambda k: sample_tokens(x, k, **kw))(keys))
    np.testing.assert_array_equal(draw(logits), draw(up))
    assert sample_tokens(logits, None, temperature=0) == jnp.argmax(up)


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        (dict(top_p=0), ValueError, r"top_p must be a number in \(0, 1\], got 0"),
        (dict(top_p=1.5), ValueError, r"top_p must be a number in \(0, 1\], got 1.5"),
        (dict(top_p=float("nan")), ValueError, "top_p must be a number in"),
        (dict(top_k=0), ValueError, r"top_k must be a positive int \(1, 2, ...\), got 0"),
        (dict(top_k=2.0), TypeError, "top_k must be a positive int"),
        (dict(temperature=-0.5), ValueError, "temperature must be a non-negative finite"),
        (dict(key=None), TypeError, r"sampling \(temperature > 0\) needs a key"),
        (dict(logits=jnp.arange(4)), TypeError, "logits must be floating, got int32"),
        (dict(logits=jnp.float32(1)), ValueError, "logits must be an array"),
    ],
)
def test_errors(kwargs: dict[str, Any], error: type[Exception], text: str) -> None:
    """Bad arguments, by the text of their errors (``filtered_logits`` checks the same)."""
    args: dict[str, Any] = dict(logits=jnp.zeros(4), key=jax.random.key(0)) | kwargs
    with pytest.raises(error, match="sample_tokens: " + text):
        sample_tokens(args.pop("logits"), args.pop("key"), **args)
    if "key" not in kwargs:
        logits = kwargs.get("logits", jnp.zeros(4))
        rest = {k: v for k, v in kwargs.items() if k != "logits"}
        with pytest.raises(error, match="filtered_logits: " + text):
            filtered_logits(logits, **rest)


# ------------------------------------------------------------------ exact hand-made cases
def _exact(logits: jax.Array, want: list[float], *, dyadic: bool = False, **kw: Any) -> None:
    """``filtered_logits`` cuts the tokens where ``want`` is 0 (``-inf`` there) and is the
    distribution ``want`` elsewhere, to float32 rounding (``dyadic``: bit for bit, the
    precondition of a boundary: the probabilities before top-p, and their sums, exact)."""
    got = np.asarray(filtered_logits(logits, **kw))
    want_a = np.asarray(want, np.float64)
    np.testing.assert_array_equal(np.isneginf(got), want_a == 0)
    probs = np.exp(got.astype(np.float64))[want_a > 0]
    if dyadic:
        np.testing.assert_array_equal(np.asarray(jnp.exp(got))[want_a > 0], want_a[want_a > 0])
    else:
        np.testing.assert_allclose(probs, want_a[want_a > 0], rtol=1e-6)


def _log(*weights: float) -> jax.Array:
    return jnp.asarray(np.log(weights), jnp.float32)


def test_top_p_at_its_boundary_as_transformers() -> None:
    """Probabilities 3/32, 1/2, 1/32, 1/4, 1/8 (descending 1/2, 1/4, 1/8, 3/32, 1/32):
    transformers cuts a token whose ascending cumulative is ``<= 1 - top_p``, so a prefix
    reaching ``top_p`` exactly ends the nucleus, a hair above it takes the next token."""
    x = _log(3 / 32, 1 / 2, 1 / 32, 1 / 4, 1 / 8)
    _exact(x, [3 / 32, 1 / 2, 1 / 32, 1 / 4, 1 / 8], dyadic=True)
    _exact(x, [0, 1, 0, 0, 0], top_p=0.5)  # 1/2 reaches 0.5
    _exact(x, [0, 1, 0, 0, 0], top_p=0.25)  # the most likely token is always kept
    _exact(x, [0, 1, 0, 0, 0], top_p=1e-9)
    _exact(x, [0, 2 / 3, 0, 1 / 3, 0], top_p=0.5 + 2**-20)
    _exact(x, [0, 2 / 3, 0, 1 / 3, 0], top_p=0.75)
    _exact(x, [0, 4 / 7, 0, 2 / 7, 1 / 7], top_p=0.875)
    _exact(x, [3 / 31, 16 / 31, 0, 8 / 31, 4 / 31], top_p=0.875 + 2**-20)
    _exact(x, [3 / 31, 16 / 31, 0, 8 / 31, 4 / 31], top_p=31 / 32)
    _exact(x, [3 / 32, 1 / 2, 1 / 32, 1 / 4, 1 / 8], top_p=31 / 32 + 2**-20)


def test_top_k_runs_before_top_p_and_keeps_ties() -> None:
    """Weights 8, 4, 3, 1, 0.75, 0.25 (17 in all). Top-k 4 first: 1/2, 1/4, 3/16, 1/16,
    where top-p 0.75 is reached by two tokens (top-p first would keep three: 12/17 <
    0.75). Ties with the k-th value are kept, and their mass counts in top-p."""
    x = _log(8, 4, 3, 1, 0.75, 0.25)
    _exact(x, [1 / 2, 1 / 4, 3 / 16, 1 / 16, 0, 0], top_k=4, dyadic=True)
    _exact(x, [2 / 3, 1 / 3, 0, 0, 0, 0], top_k=4, top_p=0.75)
    _exact(x, [8 / 15, 4 / 15, 3 / 15, 0, 0, 0], top_k=4, top_p=0.75 + 2**-20)
    ties = _log(1, 4, 1, 2, 0.5)  # top-k 3: the k-th value 1 is tied, both 1s kept
    _exact(ties, [1 / 8, 1 / 2, 1 / 8, 1 / 4, 0], top_k=3, dyadic=True)
    _exact(ties, [0, 1, 0, 0, 0], top_k=1)
    # the tied token beyond the k values counts: 1/2 + 1/4 = 0.75 < 0.8 above the 1s keeps
    # them (without its mass the three would be 4/7, 2/7, 1/7, and 6/7 above the 1s cut)
    _exact(ties, [1 / 8, 1 / 2, 1 / 8, 1 / 4, 0], top_k=3, top_p=0.8)
    _exact(ties, [0, 2 / 3, 0, 1 / 3, 0], top_k=3, top_p=0.75)
    np.testing.assert_array_equal(
        filtered_logits(ties, top_k=3, top_p=0.8), filtered_logits(ties, top_k=4, top_p=0.8)
    )


def test_top_p_keeps_or_cuts_tied_tokens_together() -> None:
    """Tokens of equal logits share their fate in top-p (transformers' would follow its
    sort's order): four tied at 1/4 with top-p 0.5 all stay."""
    _exact(jnp.zeros(4), [1 / 4] * 4, top_p=0.5)
    _exact(_log(2, 1, 1, 4), [0, 0, 0, 1], top_p=0.5)
    _exact(_log(2, 1, 1, 4), [1 / 3, 0, 0, 2 / 3], top_p=0.75)
    _exact(_log(2, 1, 1, 4), [1 / 4, 1 / 8, 1 / 8, 1 / 2], top_p=0.75 + 2**-20)


def test_no_ops_and_temperature() -> None:
    """``top_k >= vocab`` and ``top_p == 1`` change nothing; the temperature divides."""
    x = CONFIGS["top_p"].logits
    ref = filtered_logits(x, 0.6)
    np.testing.assert_allclose(ref, jax.nn.log_softmax(x / 0.6), rtol=1e-6, atol=1e-6)
    for kw in (dict(top_k=16), dict(top_k=100), dict(top_p=1.0), dict(top_k=16, top_p=1)):
        np.testing.assert_array_equal(filtered_logits(x, 0.6, **kw), ref)
