"""The training loop: exact resume, the NaN guards, early stopping, logs, no per-step sync."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import axjax as ax
from axjax.train import Batch, Checkpoints, Dataset, Loader, TrainingDiverged
from axjax.train import _fit as fit_module
from benchmarks._structure import allowed, compiled_ops, stablehlo_ops
from tests.conftest import set_compile_effort
from tests.train.models import Poisoned, TinyMLP, classify, sqrt_gate


def _dataset(n: int = 96, nan_at: int | None = None) -> Dataset:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    y = np.argmax(x @ rng.normal(size=(6, 3)), axis=1).astype(np.uint8)
    if nan_at is not None:
        x[nan_at, 0] = np.nan
    return Dataset(x, y, name="synthetic")


def _model(seed: int = 0) -> TinyMLP:
    return TinyMLP(jax.random.key(seed), n_in=6, n_hidden=16, n_out=3)


def noisy(model, x, y, *, key):
    """A loss that uses its key (input noise), so the RNG must be restored exactly."""
    if key is not None:
        x = x + ax.normal(key, x.shape, *x.axes, stddev=0.1)
    return classify(model, x, y)


def _leaves(model) -> list[np.ndarray]:
    return [np.asarray(a) for a in jax.tree.leaves(model)]


def _loader() -> Loader:
    return Loader(_dataset(), 16, key=jax.random.key(3))  # 6 batches of 16


def _run(tmp_path=None, resume=False, **kw):
    ckpts = Checkpoints(tmp_path / "ckpt", keep=2) if tmp_path is not None else None
    return ax.train.fit(
        _model(),
        optax.adam(1e-2),
        noisy,
        _loader(),
        epochs=5,
        key=jax.random.key(9),
        checkpoints=ckpts,
        resume=resume,
        progress=False,
        **kw,
    )


def test_resume_continues_exactly(tmp_path):
    straight = _run(max_steps=20)
    first = _run(tmp_path, max_steps=10)  # stops mid-epoch: epoch 1, batch 4
    assert first.step == 10
    manifest = ax.train.read_manifest(Checkpoints(tmp_path / "ckpt").path(10))
    assert (manifest["metadata"]["epoch"], manifest["metadata"]["batch"]) == (1, 4)
    resumed = _run(tmp_path, resume=True, max_steps=20)
    assert resumed.step == straight.step == 20
    for a, b in zip(_leaves(straight.model), _leaves(resumed.model), strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(
        jax.tree.leaves(straight.opt_state), jax.tree.leaves(resumed.opt_state), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # a run that is not resumed starts over (and so differs after 10 more steps)
    fresh = _run(tmp_path, max_steps=10)
    assert not np.array_equal(_leaves(fresh.model)[0], _leaves(resumed.model)[0])


def test_fit_learns_and_reports_metrics(tmp_path):
    result = ax.train.fit(
        _model(),
        optax.adam(1e-2),
        classify,
        _loader(),
        epochs=8,
        eval_data=Loader(_dataset(), 50),
        log_every=5,
        logdir=tmp_path,
        progress=False,
    )
    evals = [r for r in result.history if "eval_accuracy" in r]
    assert len(evals) == 8 and evals[-1]["eval_accuracy"] > 0.9
    assert evals[-1]["eval_loss"] < evals[0]["eval_loss"]
    assert ax.train.evaluate(result.model, classify, Loader(_dataset(), 50)) == pytest.approx(
        {"loss": evals[-1]["eval_loss"], "accuracy": evals[-1]["eval_accuracy"]}, rel=1e-5
    )
    train_rows = [r for r in result.history if "train_loss" in r]
    assert [r["step"] for r in train_rows[:3]] == [5, 6, 10]  # every 5 steps and at epoch ends
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows == result.history
    header = (tmp_path / "metrics.csv").read_text().splitlines()[0].split(",")
    assert header == [
        "step",
        "epoch",
        "time",
        "train_loss",
        "train_accuracy",
        "eval_loss",
        "eval_accuracy",
    ]
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_resume_keeps_earlier_log_rows(tmp_path):
    _run(tmp_path, max_steps=10, logdir=tmp_path / "log", log_every=5)
    resumed = _run(tmp_path, resume=True, max_steps=14, logdir=tmp_path / "log", log_every=5)
    assert [r["step"] for r in resumed.history] == [5, 6, 10, 12, 14]


def test_the_checkpoint_carries_the_history(tmp_path):
    """Without a logdir (as every process but the first of a parallel run) the earlier rows
    come from the checkpoint; a resume after the end gives the whole history back."""
    first = _run(tmp_path, max_steps=10, log_every=5)
    manifest = ax.train.read_manifest(Checkpoints(tmp_path / "ckpt").path(10))
    assert manifest["metadata"]["history"] == first.history
    resumed = _run(tmp_path, resume=True, max_steps=14, log_every=5)
    assert [r["step"] for r in resumed.history] == [5, 6, 10, 12, 14]
    assert resumed.history[:3] == first.history
    again = _run(tmp_path, resume=True, max_steps=14, log_every=5)  # nothing left to train
    assert again.history == resumed.history and again.step == 14


def test_nan_guard_names_the_step_and_keeps_the_last_finite_model():
    data = _dataset(nan_at=37)  # unshuffled batches of 16: the 3rd batch, i.e. step 3
    with pytest.raises(
        TrainingDiverged,
        match=r"^training stopped at step 3: the loss is nan\. "
        r"The model and optimizer state from before that step are kept",
    ):
        ax.train.fit(
            _model(),
            optax.sgd(0.1),
            classify,
            Loader(data, 16),
            epochs=2,
            log_every=100,
            progress=False,
        )
    try:
        ax.train.fit(_model(), optax.sgd(0.1), classify, Loader(data, 16), epochs=2, progress=False)
    except TrainingDiverged as e:
        err = e
    before = ax.train.fit(
        _model(), optax.sgd(0.1), classify, Loader(data, 16), max_steps=2, progress=False
    )
    assert err.step == 3 and np.isnan(err.loss)
    for a, b in zip(_leaves(err.model), _leaves(before.model), strict=True):
        np.testing.assert_array_equal(a, b)


def test_nan_guard_catches_an_infinite_gradient():
    def sqrt_loss(model, x, y):  # d/dz sqrt(z) at 0 is inf while the loss is finite
        loss, _ = classify(model, x, y)
        return ax.sqrt(loss * 0.0)

    with pytest.raises(
        TrainingDiverged,
        match=r"at step 1: the gradient norm is (inf|nan) "
        r"\(loss 0.0\)",
    ):
        ax.train.fit(_model(), optax.sgd(0.1), sqrt_loss, _loader(), progress=False)


def test_early_stopping_and_restore_best():
    stop = ax.train.EarlyStopping("eval_loss", patience=2)
    result = ax.train.fit(
        _model(),
        optax.sgd(0.0),
        classify,
        _loader(),
        epochs=10,
        eval_data=Loader(_dataset(), 50),
        early_stopping=stop,
        progress=False,
    )
    assert result.stopped_early and result.step == 3 * 6  # epoch 1 is best, 2 and 3 are not
    assert [r["epoch"] for r in result.history if "eval_loss" in r] == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="early_stopping compares evaluations; pass eval_data"):
        ax.train.fit(_model(), optax.sgd(0.0), classify, _loader(), early_stopping=stop)
    with pytest.raises(
        ValueError,
        match=r"reports no 'eval_f1'; it has eval_loss, "
        r"eval_accuracy",
    ):
        ax.train.fit(
            _model(),
            optax.sgd(0.0),
            classify,
            _loader(),
            progress=False,
            eval_data=_loader(),
            early_stopping=ax.train.EarlyStopping("eval_f1"),
        )


@pytest.mark.parametrize(("log_every", "reads"), [(1000, 3), (6, 3), (4, 6)])
def test_no_host_sync_between_log_points(monkeypatch, log_every, reads):
    """One read per log point and per epoch end, none per step; an epoch that ends on a
    log point is read (and checked) once (6 batches per epoch; with log_every=4, the log
    points 4, 8, 12, 16 and the epoch ends 6, 12, 18 make 6 reads)."""
    calls = []
    real = jax.device_get
    monkeypatch.setattr(jax, "device_get", lambda x: calls.append(1) or real(x))
    with jax.transfer_guard_device_to_host("disallow"):  # no implicit reads, e.g. float(loss)
        result = ax.train.fit(
            _model(),
            optax.adam(1e-2),
            classify,
            _loader(),
            epochs=3,
            log_every=log_every,
            progress=False,
        )
    assert result.step == 18 and len(calls) == reads


def test_a_list_of_batches_and_a_key_free_loss():
    x = ax.tensor(np.eye(6, dtype=np.float32)[:3], Batch, ax.train.Pixel)
    y = ax.tensor(np.arange(3), Batch, dtype=ax.I32)
    result = ax.train.fit(_model(), optax.adam(5e-2), classify, [(x, y)], epochs=60, progress=False)
    assert ax.train.evaluate(result.model, classify, [(x, y)])["accuracy"] == 1.0


def test_loss_fn_mistakes_get_clear_errors():
    def per_example(model, x, y):
        return ax.train.softmax_cross_entropy(model(x), y)

    with pytest.raises(
        ax.AxisError,
        match=r"the loss must be a scalar, got Tensor\[F32, "
        r"Batch=16\] \(reduce the remaining axes with ax.mean or ax.sum\)",
    ):
        ax.train.fit(_model(), optax.sgd(0.1), per_example, _loader(), progress=False)
    with pytest.raises(
        TypeError, match="loss_fn must return a loss or \\(loss, dict of metrics\\), got a list"
    ):
        ax.train.fit(
            _model(),
            optax.sgd(0.1),
            lambda m, x, y: (jnp.zeros(()), [1]),
            _loader(),
            progress=False,
        )
    with pytest.raises(
        ValueError, match=r"fit: log_every must be a positive int \(1, 2, ...\), got"
    ):
        ax.train.fit(_model(), optax.sgd(0.1), classify, _loader(), log_every=0)
    with pytest.raises(TypeError, match="fit: data: the data must be an axjax.train.Loader"):
        ax.train.fit(_model(), optax.sgd(0.1), classify, 42)


def _not_donating(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``fit`` build its step without donation (the reference of the donated runs)."""
    real = fit_module.make_flat_train_step
    monkeypatch.setattr(
        fit_module, "make_flat_train_step", lambda *a, **kw: real(*a, **(kw | {"donate": False}))
    )


def _usable(tree: Any) -> None:
    for leaf in jax.tree.leaves(tree):
        if isinstance(leaf, jax.Array):
            assert not leaf.is_deleted()
            np.asarray(leaf)


def test_fit_donates_and_keeps_every_array_a_user_holds(monkeypatch):
    """``fit`` updates its state in place (donated buffers), with the same result as a
    step that does not donate; the caller's model, the returned model and optimizer state
    and the early-stopping best all stay usable."""

    def run(model: Any) -> Any:
        return ax.train.fit(
            model,
            optax.adam(1e-2),
            classify,
            _loader(),
            epochs=3,
            log_every=4,
            eval_data=Loader(_dataset(), 48),
            progress=False,
            early_stopping=ax.train.EarlyStopping(patience=1),
        )

    model = _model()
    donated = run(model)
    _usable((model, donated.model, donated.opt_state))
    assert _leaves(model)[0].shape == (6, 16)
    _not_donating(monkeypatch)
    plain = run(_model())
    assert donated.step == plain.step and donated.stopped_early == plain.stopped_early
    _assert_same_leaves(donated.model, plain.model)
    _assert_same_leaves(donated.opt_state, plain.opt_state)


@pytest.mark.optimized  # reads what XLA compiles
def test_the_donated_step_reuses_its_buffers():
    """Every leaf of (params, opt_state, monitor) is aliased to an output of the compiled
    step, and the outputs live in the inputs' buffers (no fresh allocation per step)."""
    from axjax.train import Monitor
    from axjax.train._internal import make_flat_train_step

    params, static = eqx.partition(_model(), eqx.is_array)
    opt = optax.adam(1e-2)
    tree = (params, opt.init(params), Monitor.zero(("loss", "accuracy"), guarded=False))
    leaves, treedef = jax.tree.flatten(jax.tree.map(jnp.copy, tree))
    step = make_flat_train_step(classify, opt, static, treedef, guard=False)
    batch = next(iter(_loader().epoch(0)))
    key = jax.random.key(0)
    hlo = step.lower(leaves, batch, key, 0).compile().as_text()
    aliased = {int(m) for m in re.findall(r"\{\d+\}: \((\d+), \{\}, may-alias\)", hlo)}
    assert aliased == set(range(len(leaves))), f"aliased inputs {sorted(aliased)}"
    before = {a.unsafe_buffer_pointer() for a in leaves}
    out = step(leaves, batch, key, 0)
    assert all(a.is_deleted() for a in leaves)
    assert {a.unsafe_buffer_pointer() for a in out} == before
    again = step(out, batch, key, 1)  # and again: the step runs on its own outputs
    assert {a.unsafe_buffer_pointer() for a in again} == before
    plain = make_flat_train_step(classify, opt, static, treedef, donate=False, guard=False)
    assert "may-alias" not in plain.lower(again, batch, key, 2).compile().as_text()


class _WithDropout(eqx.Module):
    inner: TinyMLP
    drop: ax.nn.Dropout

    def __call__(self, x, *, key=None):
        return self.drop(self.inner(x), key=key)


def test_dropout_gets_a_key_in_training_and_is_off_in_evaluation():
    def loss_fn(model, x, y, *, key):
        return classify(lambda v: model(v, key=key), x, y)

    model = _WithDropout(_model(), ax.nn.Dropout(0.5))
    ev = ax.train.evaluate(model, loss_fn, Loader(_dataset(), 48))
    assert ev == ax.train.evaluate(model.inner, classify, Loader(_dataset(), 48))
    result = ax.train.fit(
        model,
        optax.adam(1e-2),
        loss_fn,
        _loader(),
        epochs=3,
        eval_data=Loader(_dataset(), 48),
        progress=False,
    )
    train_acc = [r["train_accuracy"] for r in result.history if "train_accuracy" in r]
    eval_acc = [r["eval_accuracy"] for r in result.history if "eval_accuracy" in r]
    assert result.model.drop.inference is False  # training mode is kept in the result
    assert eval_acc[-1] > train_acc[-1]  # half the logits dropped in training only


# ------------------------------------------------------------------ the three guards


def _guarded(guard: str, source: Any, loss: Any = noisy, **kw: Any) -> Any:
    return ax.train.fit(
        _model(),
        optax.adam(1e-2),
        loss,
        source,
        key=jax.random.key(9),
        progress=False,
        guard=guard,
        **{"epochs": 3} | kw,
    )


def _diverged(guard: str, source: Any, loss: Any = noisy, **kw: Any) -> TrainingDiverged:
    with pytest.raises(TrainingDiverged) as info:
        _guarded(guard, source, loss, **kw)
    return info.value


def _assert_same_leaves(a: Any, b: Any) -> None:
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


# (bad step, log_every): a replay from the start of the run across the epoch end of step 6
# is impossible (every epoch end is a flush), so the bad step is found from: the first
# snapshot (step 0), an epoch end (step 6), a log point inside the epoch (step 7)
CASES = [
    pytest.param(3, 100, id="from-start"),
    pytest.param(9, 100, id="from-epoch-end"),
    pytest.param(9, 7, id="from-log-point"),
]


@pytest.mark.parametrize("guard", ["replay", "step"])
@pytest.mark.parametrize(("bad", "log_every"), CASES)
def test_a_nan_loss_stops_at_its_step_with_the_last_finite_model(guard, bad, log_every):
    source = Poisoned(_loader(), bad, "nan")
    err = _diverged(guard, source, log_every=log_every)
    assert err.step == bad and math.isnan(err.loss)
    assert str(err).startswith(
        f"training stopped at step {bad}: the loss is nan. The model "
        "and optimizer state from before that step are kept"
    )
    before = _guarded(guard, source, max_steps=bad - 1, log_every=log_every)
    assert before.step == bad - 1
    _assert_same_leaves(err.model, before.model)
    _assert_same_leaves(err.opt_state, before.opt_state)


def test_an_infinite_gradient_under_a_finite_loss_stops_at_its_step():
    source = Poisoned(_loader(), 9, "zero")  # sqrt_gate: d sqrt(z)/dz at z = 0 is inf
    errors = {}
    for guard in ("replay", "step"):
        err = errors[guard] = _diverged(guard, source, sqrt_gate, log_every=7)
        assert err.step == 9 and math.isfinite(err.loss) and math.isnan(err.grad_norm)
        assert str(err).startswith("training stopped at step 9: the gradient norm is nan (loss ")
        before = _guarded(guard, source, sqrt_gate, max_steps=8, log_every=7)
        _assert_same_leaves(err.model, before.model)
    assert str(errors["replay"]) == str(errors["step"])  # the same loss, to the last digit


def test_replay_reports_what_the_per_step_guard_reports():
    source = Poisoned(_loader(), 9, "nan")
    fast, slow = _diverged("replay", source), _diverged("step", source)
    assert (fast.step, str(fast)) == (slow.step, str(slow))
    for a, b in zip(jax.tree.leaves(fast.model), jax.tree.leaves(slow.model), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)


def test_replay_builds_its_checking_step_only_when_something_is_bad(monkeypatch):
    def refuse(*args: Any) -> Any:
        raise AssertionError("the replay step was built for a finite run")

    monkeypatch.setattr(fit_module, "make_replay_step", refuse)
    result = _guarded("replay", _loader(), log_every=4)
    assert all(np.isfinite(a).all() for a in _leaves(result.model))


def _blow_up_at_step_8(**kw: Any) -> Any:
    """``fit`` with SGD whose update becomes infinite at step 8 (loss and gradients stay
    finite), two epochs of 6 steps: the snapshot at the epoch end (step 6) is replayed."""
    blow_up = optax.scale_by_schedule(lambda count: jnp.where(count >= 7, jnp.inf, 1.0))
    return ax.train.fit(
        _model(),
        optax.chain(optax.sgd(1e-2), blow_up),
        classify,
        _loader(),
        **{"epochs": 2, "progress": False} | kw,
    )


def test_replay_catches_a_state_that_turns_non_finite_under_finite_gradients():
    """An update can overflow although the loss and gradients are finite; the per-step
    guard lets that through, the replay names the step that did it."""
    with pytest.raises(
        TrainingDiverged,
        match=r"at step 8: the update made the parameters "
        r"or optimizer state non-finite \(loss [0-9.e-]+, gradient norm "
        r"[0-9.e-]+\)",
    ) as info:
        _blow_up_at_step_8()
    before = _blow_up_at_step_8(max_steps=7)
    assert before.step == 7
    _assert_same_leaves(info.value.model, before.model)


def _last_bit_off(tree: Any) -> Any:
    """Each floating-point array of ``tree`` moved by one unit in the last place."""
    return jax.tree.map(lambda a: jnp.nextafter(a, jnp.inf) if _floating(a) else a, tree)


def _floating(a: Any) -> bool:
    return isinstance(a, jax.Array) and jnp.issubdtype(a.dtype, jnp.floating)


def test_the_replayed_state_is_the_runs_own_step_not_the_checking_steps(monkeypatch):
    """The replay recomputes the state with the run's own compiled step; the checking
    step (its own ``jax.jit``: gradient norm, finiteness) only judges each step. Two
    compilations of one update need not agree to the last bit on a GPU (fusion, autotuned
    matrix-product algorithms, TF32), so a state taken from the checking step would differ
    from the run's. Mutation: a checking step whose new state is one ulp off (what such a
    second compilation may give) leaves the replayed state bit-identical to the run's; and
    the run's step is compiled once: the replay calls the very program the loop called."""
    real, real_flat = fit_module.make_replay_step, fit_module._flat_step
    built: list[Any] = []

    def counted(*args: Any, **kw: Any) -> Any:
        built.append(real_flat(*args, **kw))
        return built[-1]

    def one_ulp_off(*args: Any) -> Any:
        step = real(*args)

        def checking(params: Any, opt_state: Any, *rest: Any) -> Any:
            new_params, new_opt_state, *verdict = step(params, opt_state, *rest)
            return (_last_bit_off(new_params), _last_bit_off(new_opt_state), *verdict)

        return checking

    monkeypatch.setattr(fit_module, "make_replay_step", one_ulp_off)
    monkeypatch.setattr(fit_module, "_flat_step", counted)
    with pytest.raises(TrainingDiverged, match="at step 8: the update made") as info:
        _blow_up_at_step_8()
    assert len(built) == 1 and built[0]._cache_size() == 1  # one step, one executable
    before = _blow_up_at_step_8(max_steps=7)
    _assert_same_leaves(info.value.model, before.model)


def test_guard_off_lets_nan_through():
    result = _guarded("off", Poisoned(_loader(), 3, "nan"), epochs=1)
    assert result.step == 6 and np.isnan(_leaves(result.model)[0]).any()
    assert math.isnan(result.history[-1]["train_loss"])


def test_an_unknown_guard_is_a_clear_error():
    with pytest.raises(
        ValueError,
        match=r"^fit: guard must be 'replay' \(check at log "
        r"points, replay on NaN\), 'step' \(check every step\) or 'off', "
        r"got 'fast'$",
    ):
        _guarded("fast", _loader())


@pytest.mark.parametrize("guard", ["replay", "step"])
def test_no_checkpoint_is_written_after_a_bad_step(tmp_path, guard):
    """Checkpoints every 2 steps, logs every 100: the save at step 10 checks first, so the
    NaN of step 9 stops the run there, and resuming from step 8 stops at step 9 again."""
    ckpts = Checkpoints(tmp_path / "ckpt", keep=10, every=2)
    source = Poisoned(_loader(), 9, "nan")
    err = _diverged(guard, source, checkpoints=ckpts)
    assert err.step == 9 and ckpts.steps() == [2, 4, 6, 8]
    for s in ckpts.steps():
        tree = ckpts.restore(
            {"model": _model(), "opt_state": err.opt_state, "key": jax.random.key(0)}, step=s
        ).tree
        assert all(np.isfinite(np.asarray(a)).all() for a in jax.tree.leaves(tree["model"]))
    again = _diverged(guard, source, checkpoints=ckpts, resume=True)
    assert again.step == 9
    _assert_same_leaves(again.model, err.model)
    _assert_same_leaves(again.opt_state, err.opt_state)


def test_replay_on_the_donating_path_keeps_its_snapshot(monkeypatch):
    """The replay starts from the snapshot, a copy the donating step never overwrites: the
    same step, loss and last finite state as without donation, all of it usable."""
    source = Poisoned(_loader(), 9, "nan")
    donated = _diverged("replay", source, log_every=7)
    _usable((donated.model, donated.opt_state))
    _not_donating(monkeypatch)
    plain = _diverged("replay", source, log_every=7)
    assert donated.step == plain.step == 9
    _assert_same_leaves(donated.model, plain.model)
    _assert_same_leaves(donated.opt_state, plain.opt_state)


@pytest.mark.parametrize("every", [None, 5], ids=["at-epoch-end", "at-checkpoint"])
def test_a_bad_state_that_a_replay_cannot_reproduce_is_a_warning(monkeypatch, tmp_path, every):
    """A non-deterministic device may give NaN once and not again: the replay's finite
    state is kept, the sums of the discarded steps are dropped, and training goes on. The
    run's step is made so: its ninth update gives NaN the first time only."""
    real = fit_module._flat_step

    def nan_once_at_step_9(*args: Any, **kw: Any) -> Any:
        step, spoilt = real(*args, **kw), []

        def flaky(leaves: Any, batch: Any, key: Any, k: int) -> Any:
            out = step(leaves, batch, key, k)
            if k == 8 and not spoilt:
                spoilt.append(k)
                out = [jnp.full_like(a, jnp.nan) if _floating(a) else a for a in out]
            return out

        return flaky

    monkeypatch.setattr(fit_module, "_flat_step", nan_once_at_step_9)
    ckpts = Checkpoints(tmp_path, keep=10, every=every) if every else None
    found = "7-12" if every is None else "7-10"  # at the epoch end, or at the save of 10
    with pytest.warns(
        UserWarning,
        match=rf"fit: steps {found} left a non-finite loss or "
        r"state, but replaying them gave finite values throughout",
    ):
        got = _guarded("replay", _loader(), classify, checkpoints=ckpts)
    monkeypatch.setattr(fit_module, "_flat_step", real)
    want = _guarded("replay", _loader(), classify)
    assert got.step == want.step == 18
    # the row of step 12 is dropped, or covers steps 11-12 only
    assert [r["step"] for r in got.history] == ([6, 18] if every is None else [6, 12, 18])
    assert all(math.isfinite(r["train_loss"]) for r in got.history)
    _assert_same_leaves(got.model, want.model)  # the replay ran the run's own step
    if ckpts is not None:
        assert ckpts.steps() == [5, 6, 10, 12, 15, 18]


def _op_counts(lowered: Any) -> tuple[Counter[str], int]:
    return stablehlo_ops(lowered.as_text()), sum(compiled_ops(lowered.compile().as_text()).values())


def test_the_fast_step_adds_only_the_running_sums_to_a_hand_written_step():
    """Same model and loss: beyond ``jax.value_and_grad`` + optax (returning the loss and
    metrics), the ``"replay"``/``"off"`` step has one scalar ``add`` per running sum and the
    count, and its constant 1; no gradient norm, no selection."""
    model, opt = _model(), optax.adam(1e-2)
    params, static = eqx.partition(model, eqx.is_array)
    batch = next(iter(_loader()))
    state = opt.init(params)

    def hand_written(params, opt_state, batch):
        def loss_of(p):
            loss, metrics = classify(eqx.combine(p, static), *batch)
            return loss.array, {k: v.array for k, v in metrics.items()}

        (loss, metrics), grads = jax.value_and_grad(loss_of, has_aux=True)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, metrics

    ref, _ = _op_counts(jax.jit(hand_written).lower(params, state, batch))
    names = ("loss", "accuracy")
    fast, _ = _op_counts(
        ax.train.make_train_step(classify, opt, static, guard=False).lower(
            params, state, ax.train.Monitor.zero(names, guarded=False), batch, jax.random.key(0), 0
        )
    )
    assert fast - ref == Counter({"stablehlo.add": len(names) + 1, "stablehlo.constant": 1})
    assert not ref - fast


@pytest.fixture(scope="module")
def mnist_mlp_steps() -> dict[str, tuple[int, int]]:
    from benchmarks._common import load_mnist

    set_compile_effort(False)  # counted as a user's program compiles
    from benchmarks.models import _mlp

    data = load_mnist()
    idx = data.batches(seed=1, count=1)[0]
    ref = _mlp.build_jax(_mlp.init(0))
    assert ref.lowered is not None
    with jax.numpy_rank_promotion("allow"):  # hand-written JAX broadcasts its bias implicitly
        out = {"jax": ref.lowered(*ref.put(data.images[idx], data.labels[idx]))}
    params, static = eqx.partition(_mlp.axjax_model(_mlp.init(0)), eqx.is_array)
    opt = optax.adam(1e-3)
    batch = _mlp.put_axjax(data.images[idx], data.labels[idx])
    for guard in (False, True):
        step = ax.train.make_train_step(_mlp.axjax_loss, opt, static, guard=guard)
        mon = ax.train.Monitor.zero(("loss",), guarded=guard)
        out[f"guard={guard}"] = step.lower(
            params, opt.init(params), mon, batch, jax.random.key(0), 0
        )
    return {k: (sum(c.values()), n) for k, (c, n) in ((k, _op_counts(v)) for k, v in out.items())}


@pytest.mark.optimized  # reads what XLA compiles
@pytest.mark.parametrize(("ir", "at"), [("stablehlo", 0), ("compiled", 1)])
def test_the_fast_step_has_no_more_ops_than_hand_written_jax(mnist_mlp_steps, ir, at):
    """The benchmark MLP (784-300-100-10, Adam): ``fit``'s default step against the
    hand-written JAX + optax step, with the allowance of ``benchmarks/_structure.py``; the
    per-step guard is over it, so the comparison can fail."""
    ref = mnist_mlp_steps["jax"][at]
    fast, guarded = mnist_mlp_steps["guard=False"][at], mnist_mlp_steps["guard=True"][at]
    assert ref > 50, f"the hand-written step has only {ref} {ir} ops"
    assert fast <= allowed(ref), f"fast step: {fast} {ir} ops against {ref} ({allowed(ref)})"
    assert guarded > allowed(ref), f"guarded step: {guarded} {ir} ops, allowed {allowed(ref)}"


def test_the_graph_step_donates_and_keeps_what_a_user_holds():
    """``ax.compile_step`` updates its own copies of the Params' values in place: the
    caller's arrays, and the values ``step.params`` / ``step.value`` handed out earlier,
    stay readable and unchanged while later steps run in the same buffers."""
    from tests.train.models import Hidden

    x = ax.Input(ax.F32, Batch, ax.train.Pixel, sizes={ax.train.Pixel: 3}, name="x")
    w0 = ax.normal(jax.random.key(0), (3, 2), ax.train.Pixel, Hidden)
    w = ax.Param(w0, name="w")
    loss = ax.mean(ax.square(ax.contract(x, w)), (Batch, Hidden))
    step = ax.compile_step(loss, optax.adam(0.1), inputs=[x])
    xs = ax.tensor(np.ones((4, 3), np.float32), Batch, ax.train.Pixel)
    step(xs)
    held, held_param = step.value(w), step.params[0]
    before = np.asarray(held.array).copy()
    pointer = step._values[0].array.unsafe_buffer_pointer()
    for _ in range(3):
        step(xs)
    assert step._values[0].array.unsafe_buffer_pointer() == pointer  # the same buffer
    assert not np.array_equal(np.asarray(step.value(w).array), before)  # it trained
    np.testing.assert_array_equal(np.asarray(held.array), before)
    np.testing.assert_array_equal(np.asarray(held_param.value.array), before)
    _usable(w0)
