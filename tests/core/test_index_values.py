"""Every place where data becomes an index or a label applies the one rule (core/_indices.py).

The callables come from introspection: every public callable (``public_callables`` of the
numeric-argument test: ``ax``, ``ax.nn``, ``ax.nn.init``, ``ax.train``, classes through
their constructors and public methods) with a parameter that takes index or label *data*
(``INDEX_PARAMETERS``), and every public ``ax.Op`` class whose forward takes one (called
directly). Each must have a fixture in ``FIXTURES``
(:func:`test_every_index_callable_has_a_fixture`). Each fixture is driven with a value one
past the range, one below it and, for host data, ``0.7``, NaN and ``2**32 + 1``: an axjax
error naming the value and the range, never a clamp, a wrap or a truncation. Tensor
callables are also traced: under ``jax.jit`` inside ``ax.checkify_indices`` the same values
are reported by ``error.throw()``, valid ones are not. The mutation tests switch the
validator's checks off and show that the generated checks then report every callable.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any, final

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from axjax.core import _indices
from tests.core.test_numeric_arguments import public_callables

#: the parameter names that take index or label data
INDEX_PARAMETERS = frozenset(
    {"ids", "indices", "labels", "i", "key_lengths", "lengths", "trees", "dataset"}
)
#: an Op's own methods: the op contract, not an entry point (its ``__call__`` is)
OP_METHODS = frozenset({"forward", "backward", "infer", "describe"})


@final
class A(ax.Axis): ...


@final
class T(ax.Axis): ...


@final
class B(ax.Axis): ...


@final
class C(ax.Axis): ...


@final
class V(ax.Axis): ...


@final
class E(ax.Axis): ...


@final
class HD(ax.Axis): ...


KEY = jax.random.key(0)


@dataclasses.dataclass(frozen=True)
class Fixture:
    """``call(values)`` feeds index ``values`` (a 1-D integer array, a scalar for
    ``scalar``) to the callable; valid ones lie in ``[low, n)`` (``n=None``: int32's range)."""

    call: Callable[[Any], Any]
    n: int | None
    low: int = 0
    host: bool = False  # host data (numpy, lists): also checked for 0.7, NaN, 2**32 + 1
    scalar: bool = False


@functools.cache
def _embedding() -> Any:
    return ax.nn.Embedding(V, E, 10, 4, key=KEY)


def _logits() -> Any:
    return ax.tensor(np.eye(2, 3, dtype=np.float32), B, C)


def _hidden() -> Any:
    return ax.tensor(np.eye(2, 4, dtype=np.float32), B, E)


def _head() -> Any:
    return ax.tensor(np.eye(3, 4, dtype=np.float32), C, E)


def _labels(v: Any) -> Any:
    return ax.tensor(jnp.asarray(v), B)


def _attention(lengths: Any) -> Any:
    q = ax.ones((2, 3, 4), B, T, HD)
    k = ax.ones((2, 5, 4), B, ax.nn.KeyOfAnyQuery, HD)
    return ax.nn.dot_product_attention(
        q,
        k,
        k,
        over=HD,
        key_pos=ax.nn.KeyOfAnyQuery,
        key_lengths=ax.tensor(jnp.asarray(lengths), B),
    )


def _fused(lengths: Any) -> Any:
    q = ax.ones((2, 3, 4), B, T, HD)
    k = ax.ones((2, 5, 4), B, ax.nn.KeyOfAnyQuery, HD)
    op = ax.nn.FusedAttention(HD, ax.nn.KeyOfAnyQuery, lengths=True, implementation="xla")
    return op(q, k, k, ax.tensor(jnp.asarray(lengths), B))


@functools.cache
def _mha_layer() -> Any:
    # built eagerly even when first asked for inside a jit trace (traced_failures): a
    # layer initialised there holds tracers, and this cache would hand them to the next
    # trace (UnexpectedTracerError, seen on a GPU where the traced test ran first)
    with jax.ensure_compile_time_eval():
        return ax.nn.MultiheadAttention(E, 4, num_heads=2, query_pos=T, key=KEY)


def _mha(lengths: Any) -> Any:
    return _mha_layer()(ax.ones((2, 5, 4), B, T, E), key_lengths=ax.tensor(jnp.asarray(lengths), B))


def _dataset_labels(v: Any) -> ax.train.Dataset:
    return ax.train.Dataset(np.zeros((2, 3), np.uint8), np.asarray(v), classes=("a", "b", "c"))


def _loader(v: Any) -> Any:
    ds = ax.train.Dataset(np.zeros((2, 3), np.uint8), np.zeros(2), classes=("a", "b", "c"))
    ds.labels[:] = np.asarray(v, np.float64)  # changed after the Dataset checked them
    return next(iter(ax.train.Loader(ds, 2)))


def _trees(v: Any) -> Any:
    trees = [ax.nn.Tree(x.item() if hasattr(x, "item") else x) for x in np.asarray(v)]
    return ax.nn.TreeBatch.from_trees(trees, B)


def _generate_lengths(lengths: Any) -> Any:
    from tests.core.test_numeric_arguments import _decoder

    rows = int(np.size(lengths))
    prompt = ax.zeros((rows, 3), _decoder_batch(), _decoder_pos(), dtype=ax.I32)
    return ax.nn.generate(_decoder(), prompt, 1, temperature=0, lengths=lengths)


def _decoder_batch() -> Any:
    from tests.core.test_numeric_arguments import A as batch

    return batch


def _decoder_pos() -> Any:
    from tests.core.test_numeric_arguments import T as pos

    return pos


def _cache_lengths(lengths: Any) -> Any:
    layer = ax.nn.MultiheadAttention(E, 4, num_heads=2, query_pos=T, key=KEY)
    cache = layer.init_cache({B: int(np.size(lengths))}, 4)
    return cache.with_lengths(ax.tensor(jnp.asarray(lengths), B))


FIXTURES: dict[str, Fixture] = {
    "ax.take": Fixture(lambda v: ax.take(ax.ones((5, 2), A, B), A, ax.tensor(v, T)), 5),
    "ax.index": Fixture(
        lambda v: ax.index(ax.ones((5, 2), A, B), A, ax.tensor(v)), 5, -5, False, True
    ),
    "ax.one_hot": Fixture(lambda v: ax.one_hot(_labels(v), C, 3), 3),
    "ax.nn.Embedding.__call__": Fixture(lambda v: _embedding()(ax.tensor(v, T)), 10),
    "ax.nn.dot_product_attention": Fixture(_attention, 6),  # a length: 0..5 keys
    "ax.nn.MultiheadAttention.__call__": Fixture(_mha, 6),
    "ax.nn.FusedAttention.__call__": Fixture(_fused, 6),
    "ax.train.softmax_cross_entropy": Fixture(
        lambda v: ax.train.softmax_cross_entropy(_logits(), _labels(v), C), 3
    ),
    "ax.train.SoftmaxCrossEntropy.__call__": Fixture(
        lambda v: ax.train.SoftmaxCrossEntropy(C)(_logits(), _labels(v)), 3
    ),
    "ax.train.linear_cross_entropy": Fixture(
        lambda v: ax.train.linear_cross_entropy(_hidden(), _head(), _labels(v), C), 3
    ),
    "ax.train.LinearCrossEntropy.__call__": Fixture(
        lambda v: ax.train.LinearCrossEntropy(C)(_hidden(), _head(), _labels(v)), 3
    ),
    "ax.train.accuracy": Fixture(lambda v: ax.train.accuracy(_logits(), _labels(v), C), 3),
    "ax.train.Dataset": Fixture(_dataset_labels, 3, host=True),
    "ax.train.Loader": Fixture(_loader, 3, host=True),
    "ax.nn.TreeBatch.from_trees": Fixture(_trees, None, host=True),
    "ax.nn.generate": Fixture(_generate_lengths, 4, low=1),  # a prompt's length: 1..3
    "ax.nn.KVCache.with_lengths": Fixture(_cache_lengths, 5),  # a row's: 0..max_len 4
}


def index_callables() -> set[str]:
    """The public callables that take index or label data, by public name."""
    found: set[str] = set()
    for name, fn in public_callables().items():
        owner = name.rsplit(".", 1)[0]
        if name.rsplit(".", 1)[-1] in OP_METHODS:
            continue
        try:
            params = set(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            continue
        if inspect.isclass(fn) and issubclass(fn, ax.Op):
            forward = set(inspect.signature(fn.forward).parameters)
            if INDEX_PARAMETERS & (forward | params):  # an operand, or a switch for one
                found.add(f"{name}.__call__")
            continue
        if name.endswith(".__call__") and issubclass(_resolve(owner), ax.Op):
            continue  # counted by the class's forward above
        if name.endswith(".__call__") and getattr(_resolve(owner), "_is_protocol", False):
            continue  # a protocol's method (ax.nn.Decoder: the user's model), not an entry point
        if INDEX_PARAMETERS & params:
            found.add(name)
    return found


def _resolve(dotted: str) -> Any:
    obj: Any = ax
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part)
    return obj if inspect.isclass(obj) else object


def test_every_index_callable_has_a_fixture() -> None:
    found = index_callables()
    assert found - set(FIXTURES) == set(), "a public callable takes indices: add its fixture"
    assert set(FIXTURES) - found == set(), "a fixture names no index-taking callable"


def _values(f: Fixture, bad: Any) -> Any:
    if f.scalar:
        return np.asarray(bad)
    good = max(f.low, 0)
    arr = np.array([good, bad], dtype=np.float64 if isinstance(bad, float) else np.int64)
    return arr if f.host or arr.dtype.kind == "f" else arr.astype(np.int32)


def _bad_values(f: Fixture) -> list[Any]:
    high = 2**31 if f.n is None else f.n
    values: list[Any] = [high, f.low - 1]
    if f.host:
        values += [0.7, float("nan"), 2**32 + 1]
    return values


def eager_failures(name: str, f: Fixture) -> list[str]:
    """What the eager check of ``name`` gets wrong (an empty list: nothing)."""
    problems = []
    try:
        f.call(_values(f, max(f.low, 0)))
    except Exception as e:  # noqa: BLE001 (reported)
        problems.append(f"{name}: a valid index raised {type(e).__name__}: {e}")
    for bad in _bad_values(f):
        try:
            f.call(_values(f, bad))
        except (ValueError, TypeError) as e:
            shown = "nan" if isinstance(bad, float) and np.isnan(bad) else str(bad)
            if shown not in str(e):
                problems.append(f"{name}: {bad!r} raised without naming the value: {e}")
            elif isinstance(bad, int) and f.n is not None and f"[{f.low}, " not in str(e):
                problems.append(f"{name}: {bad!r} raised without naming the range: {e}")
            continue
        problems.append(f"{name}: {bad!r} was accepted")
    return problems


def traced_failures(name: str, f: Fixture) -> list[str]:
    """What the checked mode under ``jax.jit`` gets wrong for ``name``."""
    if f.host:
        return []  # host data is never traced

    def run(v: Any) -> Any:
        return jax.tree.leaves(f.call(v))

    checked = jax.jit(ax.checkify_indices(run))
    problems = []
    err, _ = checked(jnp.asarray(_values(f, max(f.low, 0))))
    if err.get() is not None:
        problems.append(f"{name}: a valid traced index was reported: {err.get()}")
    for bad in _bad_values(f):
        err, _ = checked(jnp.asarray(_values(f, bad)))
        message = err.get()
        if message is None:
            problems.append(f"{name}: traced {bad!r} was not reported")
        elif str(bad) not in message:
            problems.append(f"{name}: traced {bad!r} reported without the value: {message}")
    return problems


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_concrete_index_values_are_checked(name: str) -> None:
    assert eager_failures(name, FIXTURES[name]) == []


@pytest.mark.parametrize("name", sorted(n for n, f in FIXTURES.items() if not f.host))
def test_traced_index_values_are_checked_in_the_checked_mode(name: str) -> None:
    assert traced_failures(name, FIXTURES[name]) == []


def test_traced_values_outside_the_checked_mode_take_the_documented_fallback() -> None:
    emb = _embedding()
    clamped = jax.jit(lambda ids: emb(ax.tensor(ids, T)).array)(jnp.array([10, -1]))
    np.testing.assert_allclose(clamped, emb.weight.array[jnp.array([9, 0])])
    row = jax.jit(lambda y: ax.one_hot(ax.tensor(y, B), C, 3).array)(jnp.array([5]))
    np.testing.assert_array_equal(row, [[0.0, 0.0, 0.0]])
    acc = jax.jit(lambda y: ax.train.accuracy(_logits(), ax.tensor(y, B), C).array)
    assert float(acc(jnp.array([0, 5]))) == 0.5  # the bad label is a miss
    loss = jax.jit(lambda y: ax.train.softmax_cross_entropy(_logits(), ax.tensor(y, B), C).array)
    assert float(loss(jnp.array([0, 7]))[1]) == 0.0


def test_the_checked_mode_works_through_grad_and_custom_vjp() -> None:
    def loss(logits: Any, y: Any) -> Any:
        return ax.mean(ax.train.softmax_cross_entropy(logits, y, C), B).array

    step = jax.jit(ax.checkify_indices(jax.grad(loss)))
    err, grad = step(_logits(), _labels(np.array([0, 7], np.int32)))
    with pytest.raises(
        ValueError, match=r"softmax_cross_entropy: label 7 \(at B=1\) is not a class"
    ):
        err.throw()
    err, grad = step(_logits(), _labels(np.array([0, 2], np.int32)))
    err.throw()
    assert grad.array.shape == (2, 3)


# ----------------------------------------------------------------------------- mutation
def test_the_eager_check_fails_without_the_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch the rule off (every value whole and in range): every fixture is reported."""
    monkeypatch.setattr(_indices, "_outside", lambda host, lo, hi: np.zeros(host.shape, bool))
    monkeypatch.setattr(_indices, "_whole", lambda where, host, what, at: _truncated(host))
    reported = {n for n, f in FIXTURES.items() if eager_failures(n, f)}
    assert reported == set(FIXTURES)


def _truncated(host: Any) -> Any:
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(np.asarray(host, dtype=np.float64)).astype(np.int64)


def test_the_traced_check_fails_without_the_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_indices, "_traced_check", lambda *args: None)
    tensors = {n: f for n, f in FIXTURES.items() if not f.host}
    reported = {n for n, f in tensors.items() if traced_failures(n, f)}
    assert reported == set(tensors)


# ----------------------------------------------------------------------------- the examples
def test_embedding_refuses_an_id_past_the_table_and_a_negative_one() -> None:
    emb = _embedding()
    with pytest.raises(
        ValueError,
        match=r"Embedding\(V=10 -> E=4\): id 10 \(at T=1\) is not a row of the table: ids "
        r"must lie in \[0, 10\) for V of size 10 \(fix the ids, or give the table 11 rows",
    ):
        emb(ax.tensor([3, 10], T))
    with pytest.raises(ValueError, match=r"id -1 \(at T=0\) is not a row of the table"):
        emb(ax.tensor([-1], T))


def test_accuracy_refuses_a_label_past_the_classes() -> None:
    with pytest.raises(
        ValueError,
        match=r"accuracy: label 5 \(at B=1\) is not a class: labels must lie in \[0, 3\) for "
        r"C of size 3",
    ):
        ax.train.accuracy(_logits(), ax.tensor([0, 5], B), C)


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (
            np.array([0, 1, 2**32 + 1]),
            r"Dataset: label 4294967297 \(at example 2\) does not fit int32, the index dtype: "
            r"labels must lie in \[0, 2147483647\]",
        ),
        (
            np.array([0.0, 1.0, np.nan]),
            r"Dataset: label nan \(at example 2\) is not a whole number",
        ),
        (np.array([0.7, 1.2, 2.9]), r"Dataset: label 0.7 \(at example 0\) is not a whole number"),
    ],
)
def test_a_loader_of_a_dataset_never_wraps_or_truncates_labels(labels: Any, message: str) -> None:
    images = np.zeros((3, 2, 2), np.uint8)
    with pytest.raises(ValueError, match=message):
        ax.train.Loader(ax.train.Dataset(images, labels), 3)


def test_whole_float_labels_become_int32_exactly() -> None:
    ds = ax.train.Dataset(np.zeros((3, 2), np.uint8), np.array([0.0, 1.0, 2.0]))
    _, y = next(iter(ax.train.Loader(ds, 3)))
    assert y.dtype is ax.I32 and y.array.tolist() == [0, 1, 2]


def test_a_tree_value_is_never_truncated() -> None:
    with pytest.raises(
        ValueError, match=r"TreeBatch.from_trees: value 2.7 \(at node 0\) is not a whole number"
    ):
        ax.nn.TreeBatch.from_trees([ax.nn.Tree(2.7)], B)
    assert ax.nn.TreeBatch.from_trees([ax.nn.Tree(2.0)], B).values.array.tolist() == [2]
