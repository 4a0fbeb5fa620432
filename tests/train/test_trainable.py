"""``trainable=``: freezing parameters by path or by axes in ``fit``, ``TrainStep`` and
``make_train_step``, and the selectors it takes (``ax.train.by_path`` / ``by_axes``).

The oracle is a hand-written optax loop that differentiates and updates only the selected
leaves (``eqx.partition`` on a hand-built filter): the library's step must give the same
parameters, leave the frozen ones bit for bit, and keep optimizer state for the trained
leaves alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import optax
import pytest

import axjax as ax
from axjax.train import Checkpoints, Class, Dataset, Loader, Pixel
from tests.train.models import Hidden, TinyMLP, classify

ROOT = Path(__file__).resolve().parents[2]


def _model(seed: int = 0) -> TinyMLP:
    return TinyMLP(jax.random.key(seed), n_in=6, n_hidden=16, n_out=3)


def _dataset(n: int = 96) -> Dataset:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    y = np.argmax(x @ rng.normal(size=(6, 3)), axis=1).astype(np.uint8)
    return Dataset(x, y, name="synthetic")


def _loader() -> Loader:
    return Loader(_dataset(), 16, key=jax.random.key(3))  # 6 batches of 16


def _fit(trainable, steps=12, **kw):
    return ax.train.fit(
        _model(),
        optax.adam(1e-2),
        classify,
        _loader(),
        epochs=5,
        max_steps=steps,
        progress=False,
        trainable=trainable,
        **kw,
    )


def _fields(model: TinyMLP) -> dict[str, np.ndarray]:
    return {n: np.asarray(getattr(model, n).array) for n in ("w1", "b1", "w2", "b2")}


def _oracle(names: set[str], steps: int = 12) -> dict[str, np.ndarray]:
    """A hand-written adam loop that trains only the fields ``names``."""
    model = _model()
    spec = jax.tree_util.tree_map(lambda _: False, model)
    spec = eqx.tree_at(
        lambda m: [getattr(m, n) for n in sorted(names)],
        spec,
        replace=[True] * len(names),
    )
    trained, rest = eqx.partition(model, spec)
    opt = optax.adam(1e-2)
    state = opt.init(trained)

    @jax.jit
    def step(trained, state, x, y):
        grads = jax.grad(lambda t: classify(eqx.combine(t, rest), x, y)[0].array)(trained)
        updates, state = opt.update(grads, state, trained)
        return optax.apply_updates(trained, updates), state

    batches = [b for e in range(5) for b in _loader().epoch(e)][:steps]
    for x, y in batches:
        trained, state = step(trained, state, x, y)
    return _fields(eqx.combine(trained, rest))


# ---------------------------------------------------------------- selectors
@pytest.mark.parametrize(
    ("pattern", "path", "hit"),
    [
        ("blocks.*.attn", "blocks.0.attn.query.weight", True),
        ("blocks.*.attn", "blocks.0.mlp.weight", False),
        ("blocks.*.attn.*", "blocks.3.attn.key", True),
        ("blocks.*.attn.*", "blocks.3.attn", False),  # '*' needs a segment
        ("**.bias", "blocks.0.attn.query.bias", True),
        ("**.bias", "blocks.0.attn.query.weight", False),
        ("**.bias", "bias", True),  # '**' spans zero segments too
        ("head", "head.weight", True),
        ("head", "header.weight", False),  # a segment matches whole, not as a prefix
        ("w?", "w1", True),
        ("w[12]", "w3", False),
        ("*", "anything.at.all", True),
    ],
)
def test_by_path_globs_over_dotted_segments(pattern, path, hit):
    assert ax.train.by_path(pattern)(path, None) is hit


def test_selectors_combine_and_describe_themselves():
    x = ax.zeros((2, 3), Pixel, Hidden)
    heads = ax.train.by_axes(Pixel, Hidden)
    assert heads("p", x) and not ax.train.by_axes(Class)("p", x)
    assert not heads("p", ax.zeros((3,), Hidden))  # needs every axis
    both = ax.train.by_path("w*") & ~ax.train.by_path("w2")
    assert both("w1", x) and not both("w2", x) and not both("b1", x)
    either = ax.train.by_path("b1") | "b2"  # a pattern string stands for by_path
    assert either("b2", x) and not either("w2", x)
    assert repr(both) == "(by_path('w*') & ~by_path('w2'))"
    assert repr(heads) == "by_axes(Pixel, Hidden)"
    assert ax.train.by_path is ax.nn.by_path and ax.train.by_axes is ax.nn.by_axes


@pytest.mark.parametrize(
    ("make", "error", "text"),
    [
        (lambda: ax.train.by_path(), ValueError, "give at least one pattern"),
        (lambda: ax.train.by_path("a..b"), ValueError, "has an empty segment"),
        (lambda: ax.train.by_path(3), TypeError, "a pattern must be a string"),
        (lambda: ax.train.by_axes(), ValueError, "give at least one axis"),
        (lambda: ax.train.by_axes(int), TypeError, "int"),
        (lambda: ax.train.by_path("a") & 3, TypeError, "must be a predicate"),
    ],
)
def test_selector_errors_name_the_problem(make, error, text):
    with pytest.raises(error, match=text):
        make()


# ---------------------------------------------------------------- fit
@pytest.mark.parametrize(
    ("trainable", "names"),
    [
        (ax.train.by_path("w2", "b2"), {"w2", "b2"}),
        ("b*", {"b1", "b2"}),  # a bare pattern
        (("w1", "b2"), {"w1", "b2"}),  # a tuple: the union
        (ax.train.by_axes(Hidden) & ~ax.train.by_path("w2"), {"w1", "b1"}),
        (lambda path, leaf: path.startswith("w"), {"w1", "w2"}),  # a plain predicate
    ],
)
def test_fit_trains_the_selection_as_a_hand_written_masked_loop(trainable, names):
    before = _fields(_model())
    got = _fields(_fit(trainable).model)
    want = _oracle(names)
    for n in ("w1", "b1", "w2", "b2"):
        if n in names:
            np.testing.assert_allclose(got[n], want[n], rtol=1e-6, atol=1e-6)
            assert not np.array_equal(got[n], before[n]), n
        else:  # frozen: bit for bit
            np.testing.assert_array_equal(got[n], before[n])


def test_the_optimizer_state_holds_arrays_for_trained_leaves_only():
    def count(trainable):
        state = _fit(trainable, steps=2).opt_state
        return len(jax.tree.leaves(state))

    # adam: a step count, and mu and nu for each trained leaf
    assert count(None) == 1 + 2 * 4
    assert count(ax.train.by_path("w2")) == 1 + 2 * 1
    assert count(("w1", "b1", "b2")) == 1 + 2 * 3


def test_train_step_and_make_train_step_take_trainable():
    sel = ax.train.by_path("w1")
    step = ax.train.TrainStep(_model(), optax.adam(1e-2), classify, trainable=sel)
    batches = [b for e in range(5) for b in _loader().epoch(e)][:12]
    for x, y in batches:
        step(x, y)
    got = _fields(step.model)
    want = _oracle({"w1"})
    np.testing.assert_allclose(got["w1"], want["w1"], rtol=1e-6, atol=1e-6)
    for n in ("b1", "w2", "b2"):
        np.testing.assert_array_equal(got[n], _fields(_model())[n])
    assert len(jax.tree.leaves(step.opt_state)) == 3

    params, static = eqx.partition(_model(), eqx.is_array)
    opt = optax.adam(1e-2)
    raw = ax.train.make_train_step(classify, opt, static, guard=False, trainable=sel)
    mon = ax.train.Monitor.zero(("loss", "accuracy"), guarded=False)
    state = opt.init(eqx.filter(params, lambda x: x is params.w1.array))
    for i, (x, y) in enumerate(batches):
        params, state, mon = raw(params, state, mon, (x, y), jax.random.key(0), i)
    np.testing.assert_allclose(np.asarray(params.w1.array), want["w1"], rtol=1e-6, atol=1e-6)


def test_fit_resumes_a_run_with_a_frozen_part(tmp_path):
    sel = ax.train.by_path("w2", "b1")

    def run(resume, steps):
        ckpts = Checkpoints(tmp_path / "ckpt", keep=2)
        return _fit(sel, steps=steps, checkpoints=ckpts, resume=resume)

    straight = _fit(sel, steps=20)
    first = run(False, 10)
    assert first.step == 10
    resumed = run(True, 20)
    assert resumed.step == 20
    for a, b in zip(
        jax.tree.leaves((straight.model, straight.opt_state)),
        jax.tree.leaves((resumed.model, resumed.opt_state)),
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(_fields(resumed.model)["w1"], _fields(_model())["w1"])


def test_trainable_under_loss_scaling_keeps_the_frozen_leaves():
    policy = ax.nn.Policy.mixed(ax.F16)
    assert policy.loss_scale is not None
    result = _fit(ax.train.by_path("b2"), steps=4, precision=policy)
    got, before = _fields(result.model), _fields(_model())
    for n in ("w1", "b1", "w2"):
        np.testing.assert_array_equal(got[n], before[n])
    assert not np.array_equal(got["b2"], before["b2"])


# ---------------------------------------------------------------- bad input
def test_a_selection_that_freezes_everything_is_an_error():
    with pytest.raises(ValueError, match=r"fit: trainable=by_path\('nothing'\) freezes every"):
        _fit(ax.train.by_path("nothing"))
    with pytest.raises(ValueError, match="w1, b1, w2, b2"):  # it lists the leaves
        _fit(lambda p, x: False)
    with pytest.raises(ValueError, match="TrainStep: trainable=.* freezes every"):
        ax.train.TrainStep(_model(), optax.adam(1e-2), classify, trainable="zzz")


@pytest.mark.parametrize(
    ("trainable", "text"),
    [
        (3, r"fit: trainable must be a predicate \(path, leaf\) -> bool.*got int 3"),
        ((), r"fit: trainable must be a predicate"),
        (lambda p, x: None, r"the predicate returned NoneType None for 'w1'"),
        (lambda p, x: x.array.sum() > 0, r"returned ArrayImpl .* for 'w1'.*not from its values"),
    ],
)
def test_a_bad_trainable_is_a_type_error(trainable, text):
    with pytest.raises(TypeError, match=text):
        _fit(trainable)


def test_an_optimizer_state_for_every_leaf_is_refused_with_a_frozen_part():
    model = _model()
    full = optax.adam(1e-2).init(eqx.filter(model, eqx.is_inexact_array))
    with pytest.raises(TypeError, match="TrainStep: opt_state does not fit this step's"):
        ax.train.TrainStep(
            model, optax.adam(1e-2), classify, opt_state=full, trainable=ax.train.by_path("w1")
        )


# ---------------------------------------------------------------- the graph step
def test_compile_step_trains_the_params_its_selection_names():
    rng = np.random.default_rng(1)
    xs = ax.tensor(rng.normal(size=(8, 6)).astype(np.float32), ax.train.Batch, Pixel)
    ys = ax.tensor(rng.normal(size=(8, 3)).astype(np.float32), ax.train.Batch, Class)
    w0 = ax.normal(jax.random.key(1), (6, 3), Pixel, Class)
    b0 = ax.zeros((3,), Class)
    w, b = ax.Param(w0, name="head.w"), ax.Param(b0, name="head.b")
    x = ax.Input(ax.F32, ax.train.Batch, Pixel)
    y = ax.Input(ax.F32, ax.train.Batch, Class)
    pred = ax.contract(x, w)
    pred = pred + ax.broadcast(b, pred)
    loss = ax.mean(ax.sum((pred - y) ** 2, Class), ax.train.Batch)
    step = ax.compile_step(loss, optax.sgd(0.1), inputs=[x, y], trainable="head.w")
    for _ in range(5):
        step(xs, ys)
    np.testing.assert_array_equal(np.asarray(step.value(b).array), np.asarray(b0.array))
    assert not np.array_equal(np.asarray(step.value(w).array), np.asarray(w0.array))

    # the oracle: five sgd steps on w alone
    def f(wa):
        p = xs.array @ wa + b0.array[None, :]
        return ((p - ys.array) ** 2).sum(-1).mean()

    wa = w0.array
    for _ in range(5):
        wa = wa - 0.1 * jax.grad(f)(wa)
    np.testing.assert_allclose(np.asarray(step.value(w).array), wa, rtol=1e-5, atol=1e-6)

    with pytest.raises(ValueError, match=r"compile_step: trainable=.* selects none of head.w"):
        ax.compile_step(loss, optax.sgd(0.1), inputs=[x, y], trainable="tail")


_PARALLEL = """
import jax, numpy as np, optax
import axjax as ax
from axjax.train import Batch
from tests.train.models import TinyMLP, classify
from tests.train.test_train_step_setup import _data

assert jax.device_count() == 2
par = ax.train.Parallel(jax.make_mesh((2,), ("data",)), {Batch: "data"})
out = {}
for name, parallel in (("one", None), ("mesh", par)):
    step = ax.train.TrainStep(
        TinyMLP(jax.random.key(1), 8, 16, 3), optax.adam(1e-2), classify,
        parallel=parallel, trainable="w2",
    )
    for batch in _data():
        step(*batch)
    out[name] = step.model
    print(name, len(jax.tree.leaves(step.opt_state)))
for a, b in zip(jax.tree.leaves(out["one"]), jax.tree.leaves(out["mesh"]), strict=True):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
w1 = TinyMLP(jax.random.key(1), 8, 16, 3).w1.array
assert np.array_equal(np.asarray(out["mesh"].w1.array), np.asarray(w1))
print("same")
"""


def test_a_frozen_part_over_a_mesh_trains_as_on_one_device():
    """2 simulated CPU devices (a subprocess): the optimizer state of the frozen leaves is
    absent from the state the parameter rules place, and training matches one device."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    done = subprocess.run(
        [sys.executable, "-c", _PARALLEL],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["one", "3", "mesh", "3", "same"], done.stdout
