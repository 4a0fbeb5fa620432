"""``ax.train.TrainStep``: the training step for hand-written loops.

Oracles: ``make_train_step`` (the step ``fit`` runs) and a hand-written ``jax.grad`` +
optax loop on plain arrays. Each guard of the object (the copies that keep the caller's
and the handed-out arrays valid, the bounded pytree work per call, no host transfer per
call) has a second test that switches its mechanism off and shows the check failing.
"""

from __future__ import annotations

import re
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import axjax as ax
from axjax.train import Batch, Class, Monitor, Pixel, TrainingDiverged, TrainStep, _train_step
from axjax.train._internal import make_flat_train_step
from tests.train.models import TinyMLP, classify

N_IN, N_HIDDEN, N_OUT, B = 6, 5, 3, 4
LR = 0.05


def _batches(n: int, seed: int = 0) -> list[tuple[Any, Any]]:
    rng = np.random.default_rng(seed)
    return [
        (
            ax.tensor(rng.normal(size=(B, N_IN)).astype(np.float32), Batch, Pixel),
            ax.tensor(rng.integers(0, N_OUT, B).astype(np.int32), Batch),
        )
        for _ in range(n)
    ]


def _model() -> TinyMLP:
    return TinyMLP(jax.random.key(1), n_in=N_IN, n_hidden=N_HIDDEN, n_out=N_OUT)


def _arrays(tree: Any) -> list[jax.Array]:
    return [a for a in jax.tree.leaves(tree) if isinstance(a, jax.Array)]


def _assert_same(a: Any, b: Any, **tol: Any) -> None:
    for x, y in zip(_arrays(a), _arrays(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), **tol)


def _reference(
    loss_fn: Any, batches: list[Any], *, guard: bool = False, key: Any = None
) -> tuple[Any, Any, Monitor]:
    """``make_train_step`` run by hand: ``(model, opt_state, monitor)`` after the batches."""
    params, static = eqx.partition(_model(), eqx.is_array)
    opt = optax.adam(LR)
    step = ax.train.make_train_step(loss_fn, opt, static, donate=False, guard=guard)
    names = ("loss", "accuracy") if loss_fn is classify else ("loss",)
    mon = Monitor.zero(names, guarded=guard)
    state = opt.init(eqx.filter(params, eqx.is_inexact_array))
    key = jax.random.key(0) if key is None else key
    for i, batch in enumerate(batches):
        params, state, mon = step(params, state, mon, batch, key, i)
    return eqx.combine(params, static), state, mon


# ------------------------------------------------------------------------ the updates
def test_updates_equal_make_train_step_and_metrics_are_the_means() -> None:
    batches = _batches(5)
    step = TrainStep(_model(), optax.adam(LR), classify)
    assert step.metrics() == {}  # before the first step
    for x, y in batches:
        step(x, y)
    model, opt_state, mon = _reference(classify, batches)
    _assert_same(step.model, model, rtol=0, atol=0)
    _assert_same(step.opt_state, opt_state, rtol=0, atol=0)
    means, _ = mon.read()
    assert set(means) == {"loss", "accuracy"}
    assert step.metrics() == pytest.approx(means, rel=1e-6)
    assert step.steps == 5 and step.trace_count == 1
    assert step.metrics() == {}  # reset by the read: no step since
    step(batches[0])  # the batch as one tuple: the same call
    assert step.metrics(reset=False) == step.metrics()  # reset=False keeps the sums
    assert step.steps == 6 and step.trace_count == 1


def _plain_loss(p: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
    h = jax.nn.relu(x @ p["w1"] + p["b1"][None])
    logits = h @ p["w2"] + p["b2"][None]
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def test_updates_equal_a_hand_written_optax_loop() -> None:
    model, batches, opt = _model(), _batches(6, seed=3), optax.adam(LR)
    params = {k: getattr(model, k).array for k in ("w1", "b1", "w2", "b2")}
    state = opt.init(params)

    @jax.jit
    def plain_step(p: Any, s: Any, x: jax.Array, y: jax.Array) -> tuple[Any, Any]:
        grads = jax.grad(_plain_loss)(p, x, y)
        updates, s = opt.update(grads, s, p)
        return optax.apply_updates(p, updates), s

    step = TrainStep(model, opt, classify)
    for x, y in batches:
        params, state = plain_step(params, state, x.array, y.array)
        step(x, y)
    got = step.model
    for k, want in params.items():
        np.testing.assert_allclose(getattr(got, k).array, want, rtol=1e-5, atol=1e-6)


def test_the_model_handed_back_is_typed_cached_and_usable() -> None:
    (x, y), *_ = _batches(1)
    step = TrainStep(_model(), optax.adam(LR), classify)
    before = step.model
    assert isinstance(before, TinyMLP) and step.model is before  # kept until the next step
    step(x, y)
    after = step.model
    assert isinstance(after, TinyMLP) and after is not before
    assert after.activation is ax.relu  # the static part is the model's own
    logits = after(x)
    assert logits.axes == (Batch, Class) and logits.shape == (B, N_OUT)
    assert repr(step) == "TrainStep(TinyMLP, steps=1, guard=False, donate=True)"


# ------------------------------------------------------------------------ donation
def test_the_callers_model_and_handed_out_arrays_stay_valid() -> None:
    model, batches = _model(), _batches(4)
    start = [np.asarray(a) for a in _arrays(model)]
    step = TrainStep(model, optax.adam(LR), classify)
    step(*batches[0])
    lent_model, lent_state = step.model, step.opt_state
    kept = [np.asarray(a) for a in _arrays((lent_model, lent_state))]
    for x, y in batches[1:]:
        step(x, y)  # donates its own arrays: the first one copies the lent ones first
    assert not any(a.is_deleted() for a in _arrays((model, lent_model, lent_state)))
    for a, want in zip(_arrays(model), start, strict=True):
        np.testing.assert_array_equal(a, want)  # the caller's model never changed
    for a, want in zip(_arrays((lent_model, lent_state)), kept, strict=True):
        np.testing.assert_array_equal(a, want)
    _assert_same(step.model, _reference(classify, batches)[0], rtol=0, atol=0)


def test_without_the_copies_donation_deletes_those_arrays(monkeypatch: Any) -> None:
    """The mutation of the test above: with the copies off, the step donates the caller's
    arrays, then the lent ones, and JAX deletes them."""
    monkeypatch.setattr(_train_step, "copy_tree", lambda tree: tree)
    model, (b0, b1) = _model(), _batches(2)
    step = TrainStep(model, optax.adam(LR), classify)
    step(*b0)
    assert all(a.is_deleted() for a in _arrays(eqx.filter(model, eqx.is_inexact_array)))
    lent = step.model
    step(*b1)
    assert all(a.is_deleted() for a in _arrays(lent))


def test_donate_false_makes_no_copies_and_trains_the_same() -> None:
    batches = _batches(3)
    copies: list[Any] = []
    real = _train_step.copy_tree
    step = TrainStep(_model(), optax.adam(LR), classify, donate=False)
    try:
        _train_step.copy_tree = lambda tree: copies.append(tree) or real(tree)  # type: ignore[assignment]  # a spy
        lent = step.model
        for x, y in batches:
            step(x, y)
    finally:
        _train_step.copy_tree = real
    assert copies == [] and not any(a.is_deleted() for a in _arrays(lent))
    _assert_same(step.model, _reference(classify, batches)[0], rtol=0, atol=0)


# ------------------------------------------------------------------------ keys
def noisy(model: Any, x: Any, y: Any, key: Any) -> Any:
    """``classify`` on inputs with noise drawn from ``key`` (a fresh key per step)."""
    noise = ax.tensor(jax.random.normal(key, (B, N_IN)), Batch, Pixel)
    return classify(model, x + 0.5 * noise, y)[0]


def test_a_loss_with_a_key_gets_fold_in_of_the_run_key_and_the_step() -> None:
    batches = _batches(4)
    step = TrainStep(_model(), optax.adam(LR), noisy, key=jax.random.key(7))
    for x, y in batches:
        step(x, y)
    want = _reference(noisy, batches, key=jax.random.key(7))[0]
    _assert_same(step.model, want, rtol=0, atol=0)
    other = _reference(noisy, batches, key=jax.random.key(8))[0]
    with pytest.raises(AssertionError):  # the key matters: another one trains differently
        _assert_same(step.model, other, rtol=0, atol=0)


# ------------------------------------------------------------------------ NaN/Inf
def _poisoned(n: int, at: int) -> list[tuple[Any, Any]]:
    """``n`` batches, the one trained at step ``at`` (1-based) made NaN."""
    batches = _batches(n)
    x, y = batches[at - 1]
    batches[at - 1] = (ax.Tensor(x.array * jnp.nan, x.axes), y)
    return batches


# bit for bit against another program (the reference's): compiled as a user's, since XLA:CPU's
# cheaper code generator (tests/conftest.py) may round the two programs apart by an ulp
@pytest.mark.optimized
def test_guard_stops_the_updates_and_raises_at_the_next_read() -> None:
    batches = _poisoned(5, at=3)
    step = TrainStep(_model(), optax.adam(LR), classify, guard=True)
    for x, y in batches:
        step(x, y)
    message = (
        "training stopped at step 3: the loss is nan. The model and optimizer state from "
        "before that step are kept (error.model, error.opt_state)."
    )
    with pytest.raises(TrainingDiverged, match=re.escape(message)) as info:
        step.metrics()
    err = info.value
    assert err.step == 3 and not np.isfinite(err.loss)
    model2, state2, _ = _reference(classify, batches[:2])
    _assert_same(err.model, model2, rtol=0, atol=0)  # the state from before step 3
    _assert_same(err.opt_state, state2, rtol=0, atol=0)
    with pytest.raises(TrainingDiverged, match="training stopped at step 3"):
        _ = step.model
    with pytest.raises(TrainingDiverged, match="training stopped at step 3"):
        _ = step.opt_state


def test_without_guard_a_nan_goes_into_the_model_and_the_loss_mean() -> None:
    step = TrainStep(_model(), optax.adam(LR), classify)
    for x, y in _poisoned(4, at=2):
        step(x, y)
    assert np.isnan(step.metrics()["loss"])
    assert not all(np.isfinite(a).all() for a in _arrays(step.model))


# ------------------------------------------------------------------------ arguments
class Counts(eqx.Module):
    n: jax.Array


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"optimizer": "adam"},
            TypeError,
            "TrainStep: optimizer must be an optax.GradientTransformation "
            "(optax.adam(1e-3), ...), got an object of type str",
        ),
        (
            {"loss_fn": 3},
            TypeError,
            "TrainStep: loss_fn must be a function loss_fn(model, *batch) returning the loss "
            "(or the loss and a dict of metrics), got an object of type int",
        ),
        (
            {"key": 0},
            TypeError,
            "TrainStep: key must be a PRNG key (jax.random.key(0)), got an object of type int",
        ),
        (
            {"key": jnp.zeros(3)},
            TypeError,
            "TrainStep: key must be a PRNG key (jax.random.key(0)), got an array of float32 "
            "and shape (3,)",
        ),
        ({"guard": "step"}, TypeError, "TrainStep: guard must be True or False, got 'step'"),
        ({"donate": 1}, TypeError, "TrainStep: donate must be True or False, got 1"),
        (
            {"model": Counts(jnp.arange(3))},
            ValueError,
            "TrainStep: the model holds no floating-point array to train (arrays found: 1, "
            "none floating-point); pass the module itself, with its Tensors, not its static "
            "part",
        ),
    ],
    ids=["optimizer", "loss_fn", "key", "key-array", "guard", "donate", "no-floats"],
)
def test_bad_arguments_are_clear_errors(kwargs: dict[str, Any], error: Any, message: str) -> None:
    args: dict[str, Any] = {"model": _model(), "optimizer": optax.adam(LR), "loss_fn": classify}
    args |= kwargs
    with pytest.raises(error, match=re.escape(message)):
        TrainStep(args.pop("model"), args.pop("optimizer"), args.pop("loss_fn"), **args)


def test_a_legacy_key_is_accepted_and_reset_is_checked() -> None:
    step = TrainStep(_model(), optax.adam(LR), classify, key=jax.random.PRNGKey(0))
    step(*_batches(1)[0])
    with pytest.raises(TypeError, match=re.escape("TrainStep: reset must be True or False")):
        step.metrics(reset="yes")  # type: ignore[arg-type]  # the wrong type on purpose


# ------------------------------------------------------------------------ per-call work
class Scale(eqx.Module):
    w: ax.Tensor[ax.F32, Pixel]


class Deep(eqx.Module):
    """``depth`` nested modules, one Tensor each: the pytree grows with the depth."""

    layers: tuple[Scale, ...]

    def __init__(self, depth: int) -> None:
        self.layers = tuple(Scale(ax.full((N_IN,), Pixel, value=1.0 + i)) for i in range(depth))

    def __call__(self, x: Any) -> Any:
        for layer in self.layers:
            x = x * ax.broadcast(layer.w, x)
        return x


def squares(model: Any, x: Any) -> Any:
    y = model(x)
    return ax.mean(y * y, (Batch, Pixel))


def _inner_nodes(tree: Any) -> int:
    """The pytree nodes that are not leaves: what Python-level flattening walks through."""
    treedef = jax.tree.structure(tree)
    return int(treedef.num_nodes - treedef.num_leaves)


def _step_arguments(depth: int, monkeypatch: Any) -> list[Any]:
    """The arguments each call of a TrainStep passes to its jitted function."""
    seen: list[Any] = []

    def spying(*args: Any, **kwargs: Any) -> Any:
        real = make_flat_train_step(*args, **kwargs)

        def spy(*call: Any) -> Any:
            seen.append(call)
            return real(*call)

        return spy

    monkeypatch.setattr(_train_step, "make_flat_train_step", spying)
    step = TrainStep(Deep(depth), optax.adam(LR), squares)
    for x, _ in _batches(3):
        step(x)
    return seen


def test_the_pytree_work_per_call_does_not_grow_with_the_model(monkeypatch: Any) -> None:
    shallow, deep = _step_arguments(1, monkeypatch), _step_arguments(6, monkeypatch)
    assert len(shallow) == len(deep) == 3
    for call in shallow + deep:
        # (leaves, batch, None): the argument tuple, the list, the batch's one Tensor, and
        # None for the key (a loss without one is not passed the run's key)
        assert _inner_nodes(call) == 4
        leaves = call[0]
        assert isinstance(leaves, list) and all(isinstance(a, jax.Array) for a in leaves)
    # a leaf per array: the parameters, Adam's two moments and count, the monitor, the step
    assert len(jax.tree.leaves(deep[0])) == len(jax.tree.leaves(shallow[0])) + 5 * 3


def test_the_module_trees_a_users_jit_takes_do_grow(key: Any) -> None:
    """The mutation of the test above: the arguments of ``make_train_step`` (the model
    and optimizer state as modules) make the same count grow with the depth."""

    def arguments(depth: int) -> Any:
        params, _ = eqx.partition(Deep(depth), eqx.is_array)
        state = optax.adam(LR).init(params)
        x = _batches(1)[0][0]
        return (params, state, Monitor.zero(("loss",), guarded=False), x, key, 0)

    shallow, deep = _inner_nodes(arguments(1)), _inner_nodes(arguments(6))
    assert deep > shallow + 5 * 3  # a module and a Tensor per layer, in params and moments


def test_no_host_transfer_per_call() -> None:
    batches = _batches(4)
    # the key's fold_in and the guard's record both read the step number
    step = TrainStep(_model(), optax.adam(LR), noisy, guard=True)
    step(*batches[0])
    with jax.transfer_guard("disallow"):
        for x, y in batches[1:]:
            step(x, y)  # the step number rides on the device
    assert step.steps == 4


def test_a_python_step_number_is_a_transfer(key: Any) -> None:
    """The mutation of the test above: the flat step with the step number as a Python int
    (``carry_step=False``, as ``fit`` calls it) is refused by the same guard. (A step that
    reads no step number, without key or guard, would not transfer it: JAX drops unused
    arguments.)"""
    params, static = eqx.partition(_model(), eqx.is_array)
    opt = optax.adam(LR)
    tree = (params, opt.init(params), Monitor.zero(("loss",), guarded=True))
    leaves, treedef = jax.tree.flatten(tree)
    flat = make_flat_train_step(noisy, opt, static, treedef, donate=False, guard=True)
    batch = _batches(1)[0]
    flat(leaves, batch, key, 0)
    with jax.transfer_guard("disallow"), pytest.raises(Exception, match="[Dd]isallowed"):
        flat(leaves, batch, key, 1)


def test_lower_shows_the_compiled_step() -> None:
    x, y = _batches(1)[0]
    step = TrainStep(_model(), optax.adam(LR), classify)
    text = step.lower(x, y).as_text()
    assert "stablehlo.dot_general" in text and step.steps == 0  # nothing ran
