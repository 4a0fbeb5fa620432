"""The training loop: exact resume, the NaN guard, early stopping, logs, and no per-step sync."""

from __future__ import annotations

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import axjax as ax
from axjax.train import Batch, Checkpoints, Dataset, Loader, TrainingDiverged
from tests.train.models import TinyMLP, classify


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
    return ax.train.fit(_model(), optax.adam(1e-2), noisy, _loader(), epochs=5,
                        key=jax.random.key(9), checkpoints=ckpts, resume=resume,
                        progress=False, **kw)


def test_resume_continues_exactly(tmp_path):
    straight = _run(max_steps=20)
    first = _run(tmp_path, max_steps=10)   # stops mid-epoch: epoch 1, batch 4
    assert first.step == 10
    manifest = ax.train.read_manifest(Checkpoints(tmp_path / "ckpt").path(10))
    assert (manifest["metadata"]["epoch"], manifest["metadata"]["batch"]) == (1, 4)
    resumed = _run(tmp_path, resume=True, max_steps=20)
    assert resumed.step == straight.step == 20
    for a, b in zip(_leaves(straight.model), _leaves(resumed.model), strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(jax.tree.leaves(straight.opt_state), jax.tree.leaves(resumed.opt_state),
                    strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # a run that is not resumed starts over (and so differs after 10 more steps)
    fresh = _run(tmp_path, max_steps=10)
    assert not np.array_equal(_leaves(fresh.model)[0], _leaves(resumed.model)[0])


def test_fit_learns_and_reports_metrics(tmp_path):
    result = ax.train.fit(_model(), optax.adam(1e-2), classify, _loader(), epochs=8,
                          eval_data=Loader(_dataset(), 50), log_every=5, logdir=tmp_path,
                          progress=False)
    evals = [r for r in result.history if "eval_accuracy" in r]
    assert len(evals) == 8 and evals[-1]["eval_accuracy"] > 0.9
    assert evals[-1]["eval_loss"] < evals[0]["eval_loss"]
    assert ax.train.evaluate(result.model, classify, Loader(_dataset(), 50)) == pytest.approx(
        {"loss": evals[-1]["eval_loss"], "accuracy": evals[-1]["eval_accuracy"]}, rel=1e-5)
    train_rows = [r for r in result.history if "train_loss" in r]
    assert [r["step"] for r in train_rows[:3]] == [5, 6, 10]  # every 5 steps and at epoch ends
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows == result.history
    header = (tmp_path / "metrics.csv").read_text().splitlines()[0].split(",")
    assert header == ["step", "epoch", "time", "train_loss", "train_accuracy", "eval_loss",
                      "eval_accuracy"]
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_resume_keeps_earlier_log_rows(tmp_path):
    _run(tmp_path, max_steps=10, logdir=tmp_path / "log", log_every=5)
    resumed = _run(tmp_path, resume=True, max_steps=14, logdir=tmp_path / "log", log_every=5)
    assert [r["step"] for r in resumed.history] == [5, 6, 10, 12, 14]


def test_nan_guard_names_the_step_and_keeps_the_last_finite_model():
    data = _dataset(nan_at=37)  # unshuffled batches of 16: the 3rd batch, i.e. step 3
    with pytest.raises(TrainingDiverged, match=r"^training stopped at step 3: the loss is nan\. "
                       r"The model and optimizer state from before that step are kept"):
        ax.train.fit(_model(), optax.sgd(0.1), classify, Loader(data, 16), epochs=2,
                     log_every=100, progress=False)
    try:
        ax.train.fit(_model(), optax.sgd(0.1), classify, Loader(data, 16), epochs=2,
                     progress=False)
    except TrainingDiverged as e:
        err = e
    before = ax.train.fit(_model(), optax.sgd(0.1), classify, Loader(data, 16), max_steps=2,
                          progress=False)
    assert err.step == 3 and np.isnan(err.loss)
    for a, b in zip(_leaves(err.model), _leaves(before.model), strict=True):
        np.testing.assert_array_equal(a, b)


def test_nan_guard_catches_an_infinite_gradient():
    def sqrt_loss(model, x, y):  # d/dz sqrt(z) at 0 is inf while the loss is finite
        loss, _ = classify(model, x, y)
        return ax.sqrt(loss * 0.0)

    with pytest.raises(TrainingDiverged, match=r"at step 1: the gradient norm is (inf|nan) "
                       r"\(loss 0.0\)"):
        ax.train.fit(_model(), optax.sgd(0.1), sqrt_loss, _loader(), progress=False)


def test_early_stopping_and_restore_best():
    stop = ax.train.EarlyStopping("eval_loss", patience=2)
    result = ax.train.fit(_model(), optax.sgd(0.0), classify, _loader(), epochs=10,
                          eval_data=Loader(_dataset(), 50), early_stopping=stop, progress=False)
    assert result.stopped_early and result.step == 3 * 6  # epoch 1 is best, 2 and 3 are not
    assert [r["epoch"] for r in result.history if "eval_loss" in r] == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="early_stopping compares evaluations; pass eval_data"):
        ax.train.fit(_model(), optax.sgd(0.0), classify, _loader(), early_stopping=stop)
    with pytest.raises(ValueError, match=r"reports no 'eval_f1'; it has eval_loss, "
                       r"eval_accuracy"):
        ax.train.fit(_model(), optax.sgd(0.0), classify, _loader(), progress=False,
                     eval_data=_loader(), early_stopping=ax.train.EarlyStopping("eval_f1"))


def test_no_host_sync_between_log_points(monkeypatch):
    calls = []
    real = jax.device_get
    monkeypatch.setattr(jax, "device_get", lambda x: calls.append(1) or real(x))
    with jax.transfer_guard_device_to_host("disallow"):  # no implicit reads, e.g. float(loss)
        result = ax.train.fit(_model(), optax.adam(1e-2), classify, _loader(), epochs=3,
                              log_every=1000, progress=False)
    assert result.step == 18 and len(calls) == 3  # one explicit read per epoch, none per step


def test_a_list_of_batches_and_a_key_free_loss():
    x = ax.tensor(np.eye(6, dtype=np.float32)[:3], Batch, ax.train.Pixel)
    y = ax.tensor(np.arange(3), Batch, dtype=ax.I32)
    result = ax.train.fit(_model(), optax.adam(5e-2), classify, [(x, y)], epochs=60,
                          progress=False)
    assert ax.train.evaluate(result.model, classify, [(x, y)])["accuracy"] == 1.0


def test_loss_fn_mistakes_get_clear_errors():
    def per_example(model, x, y):
        return ax.train.softmax_cross_entropy(model(x), y)

    with pytest.raises(ax.AxisError, match=r"the loss must be a scalar, got Tensor\[F32, "
                       r"Batch=16\] \(reduce the remaining axes with ax.mean or ax.sum\)"):
        ax.train.fit(_model(), optax.sgd(0.1), per_example, _loader(), progress=False)
    with pytest.raises(TypeError, match="loss_fn must return a loss or \\(loss, dict of "
                       "metrics\\), got a list"):
        ax.train.fit(_model(), optax.sgd(0.1), lambda m, x, y: (jnp.zeros(()), [1]), _loader(),
                     progress=False)
    with pytest.raises(ValueError, match="log_every must be at least 1"):
        ax.train.fit(_model(), optax.sgd(0.1), classify, _loader(), log_every=0)
    with pytest.raises(TypeError, match="training data must be an axjax.train.Loader"):
        ax.train.fit(_model(), optax.sgd(0.1), classify, 42)


@pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")
def test_donating_path_gives_the_same_result_and_keeps_the_callers_model(monkeypatch):
    """On GPU/TPU the step donates its inputs; run that path on CPU (JAX ignores donation
    there) and check the result and that the caller's model stays usable."""
    plain = ax.train.fit(_model(), optax.adam(1e-2), classify, _loader(), epochs=2,
                         eval_data=Loader(_dataset(), 48),
                         early_stopping=ax.train.EarlyStopping(patience=5), progress=False)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    model = _model()
    donated = ax.train.fit(model, optax.adam(1e-2), classify, _loader(), epochs=2,
                           eval_data=Loader(_dataset(), 48),
                           early_stopping=ax.train.EarlyStopping(patience=5), progress=False)
    for a, b in zip(_leaves(plain.model), _leaves(donated.model), strict=True):
        np.testing.assert_array_equal(a, b)
    assert _leaves(model)[0].shape == (6, 16)  # still readable


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
    result = ax.train.fit(model, optax.adam(1e-2), loss_fn, _loader(), epochs=3,
                          eval_data=Loader(_dataset(), 48), progress=False)
    train_acc = [r["train_accuracy"] for r in result.history if "train_accuracy" in r]
    eval_acc = [r["eval_accuracy"] for r in result.history if "eval_accuracy" in r]
    assert result.model.drop.inference is False  # training mode is kept in the result
    assert eval_acc[-1] > train_acc[-1]  # half the logits dropped in training only
