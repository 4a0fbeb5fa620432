"""Training semantics: evaluation weighted by the batch axis (time-major data, a scalar
leaf), ``restore_best`` at the end of any run (resumed ones too), integer model fields
through every training entry point, and a resume under another schedule."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import axjax as ax
from axjax.train import Batch, Checkpoints, EarlyStopping, Pixel
from tests.nn.helpers import Time


class Centre(eqx.Module):
    """A point ``w`` (Pixel) and an integer counter and mask the step must leave alone."""

    w: ax.Tensor[ax.F32, Pixel]
    count: jax.Array
    mask: ax.Tensor[ax.I32, Pixel]

    def __init__(self, w: float = 0.5) -> None:
        self.w = ax.Tensor(jnp.full((2,), w, jnp.float32), (Pixel,))
        self.count = jnp.asarray(7, jnp.int32)
        self.mask = ax.Tensor(jnp.asarray([1, 0], jnp.int32), (Pixel,))


def distance(model: Centre, x: Any) -> Any:
    """Mean squared distance of the points ``x`` (any axes, Pixel last) from ``model.w``."""
    d = x - ax.broadcast(model.w, x)
    return ax.mean(d * d, x.axes)


def _points(value: float, batch: int, time: int | None = None) -> ax.Tensor[Any, Any]:
    if time is None:
        return ax.Tensor(jnp.full((batch, 2), value, jnp.float32), (Batch, Pixel))
    return ax.Tensor(jnp.full((time, batch, 2), value, jnp.float32), (Time, Batch, Pixel))


# ------------------------------------------------------------------------ evaluate()
def test_evaluate_weights_time_major_batches_by_the_batch_axis() -> None:
    model = Centre(0.0)
    data = [(_points(1.0, batch=1, time=4),), (_points(3.0, batch=3, time=4),)]
    # losses 1 and 9 over 1 and 3 examples: (1 + 27) / 4, not (1 + 9) / 2 by the Time size
    assert ax.train.evaluate(model, distance, data) == {"loss": pytest.approx(7.0)}


def test_evaluate_with_a_scalar_leaf_and_another_batch_axis() -> None:
    def weighted(model: Centre, scale: Any, x: Any) -> Any:
        return distance(model, x) * scale

    data = [(jnp.float32(1.0), _points(1.0, batch=1)), (jnp.float32(1.0), _points(3.0, batch=3))]
    assert ax.train.evaluate(Centre(0.0), weighted, data) == {"loss": pytest.approx(7.0)}
    by_time = [(_points(1.0, batch=1, time=2),), (_points(3.0, batch=3, time=6),)]
    got = ax.train.evaluate(Centre(0.0), distance, by_time, batch_axis=Time)
    assert got == {"loss": pytest.approx((2 * 1 + 6 * 9) / 8)}


def test_evaluate_without_the_batch_axis_is_a_clear_error() -> None:
    data = [(ax.Tensor(jnp.ones((3, 2)), (Time, Pixel)),)]
    with pytest.raises(
        ValueError,
        match=re.escape(
            "evaluate: no Tensor of the batch has the batch axis Batch, which weights each "
            "batch's mean by its number of examples (the batch holds Tensor[F32, Time=3, "
            "Pixel=2]); name the batch axis Batch in the data, or pass batch_axis=<your "
            "batch axis>"
        ),
    ):
        ax.train.evaluate(Centre(), distance, data)


# ------------------------------------------------------------------------ restore_best
def _fit(**kw: Any) -> ax.train.FitResult:
    """Train toward 10 while evaluating the distance from 0: the first evaluation is the
    best, and the run never stops early (patience 100)."""
    kw.setdefault("early_stopping", EarlyStopping("eval_loss", patience=100))
    return ax.train.fit(
        Centre(0.5),
        optax.sgd(0.05),
        distance,
        [(_points(10.0, 4),)],
        eval_data=[(_points(0.0, 4),)],
        progress=False,
        **kw,
    )


def _eval_losses(result: ax.train.FitResult) -> list[float]:
    return [r["eval_loss"] for r in result.history if "eval_loss" in r]


def test_restore_best_applies_without_an_early_stop(tmp_path: Path) -> None:
    straight = _fit(epochs=3)
    losses = _eval_losses(straight)
    assert not straight.stopped_early and losses == sorted(losses)  # the first is the best
    best = ax.train.evaluate(straight.model, distance, [(_points(0.0, 4),)])["loss"]
    assert best == pytest.approx(losses[0]) and best < losses[-1]
    assert int(straight.model.count) == 7  # the integer field passed through
    # stopped after epoch 2 and resumed: the best parameters come back from the checkpoint
    ckpts = Checkpoints(tmp_path / "ckpt")
    _fit(epochs=3, max_steps=2, checkpoints=ckpts)
    resumed = _fit(epochs=3, checkpoints=ckpts, resume=True)
    assert resumed.step == 3
    for a, b in zip(jax.tree.leaves(resumed.model), jax.tree.leaves(straight.model), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    last = _fit(epochs=3, early_stopping=EarlyStopping("eval_loss", 100, restore_best=False))
    assert ax.train.evaluate(last.model, distance, [(_points(0.0, 4),)])["loss"] == (
        pytest.approx(losses[-1])
    )


# ------------------------------------------------------------------------ integer fields
@pytest.mark.parametrize("guard", ["replay", "step"])
def test_fit_trains_the_floats_and_passes_integer_fields_through(guard: Any) -> None:
    result = ax.train.fit(
        Centre(0.5),
        optax.adamw(0.1),
        distance,
        [(_points(1.0, 4),)],
        epochs=2,
        guard=guard,
        progress=False,
    )
    assert float(result.model.w.array[0]) > 0.5  # trained
    assert int(result.model.count) == 7 and result.model.count.dtype == jnp.int32
    np.testing.assert_array_equal(result.model.mask.array, [1, 0])  # weight decay skipped it


def test_make_train_step_differentiates_only_floating_arrays() -> None:
    params, static = eqx.partition(Centre(0.5), eqx.is_array)
    opt = optax.sgd(0.1)
    step = ax.train.make_train_step(distance, opt, static, donate=False, guard=False)
    monitor = ax.train.Monitor.zero(("loss",), guarded=False)
    batch = (_points(1.0, 4),)
    new, _, _ = step(params, opt.init(eqx.filter(params, eqx.is_inexact_array)), monitor,
                     batch, jax.random.key(0), 0)  # fmt: skip
    assert float(new.w.array[0]) == pytest.approx(0.55)  # d/dw mean((1 - w)²) over 2 pixels
    assert int(new.count) == 7
    with pytest.raises(
        TypeError,
        match=re.escape(
            "make_train_step's step: opt_state does not fit this step's optimizer and model"
        ),
    ):
        step(params, optax.adam(0.1).init(params), monitor, batch, jax.random.key(0), 0)


def test_compile_step_leaves_integer_params_alone() -> None:
    w = ax.Param(ax.zeros((2,), Pixel), name="w")
    scale = ax.Param(ax.Tensor(jnp.asarray([1, 2], jnp.int32), (Pixel,)), name="scale")
    x = ax.Input(ax.F32, Pixel, sizes={Pixel: 2}, name="x")
    d = w - x
    loss = ax.sum(d * d * ax.astype(scale, ax.F32), Pixel)
    step = ax.compile_step(loss, optax.sgd(0.1), inputs=[x])
    step(ax.ones((2,), Pixel))
    np.testing.assert_allclose(step.value(w).array, [0.2, 0.4])
    np.testing.assert_array_equal(step.value(scale).array, [1, 2])


# ------------------------------------------------------------------------ resume
def test_resume_under_other_epochs_warns(tmp_path: Path) -> None:
    ckpts = Checkpoints(tmp_path / "ckpt")
    _fit(epochs=2, max_steps=1, checkpoints=ckpts, early_stopping=None)
    with pytest.warns(
        UserWarning,
        match=r"fit: resuming from .*ckpt-000000001.npz \(step 1\) under another schedule "
        r"than the one it was saved with \(epochs=2 then, 4 now\): the run now ends at "
        r"another step, an optax learning-rate schedule sized for the old length",
    ):
        _fit(epochs=4, checkpoints=ckpts, resume=True, early_stopping=None)


def test_resume_from_a_checkpoint_not_written_by_fit(tmp_path: Path) -> None:
    ckpts = Checkpoints(tmp_path / "ckpt")
    model = Centre(0.5)
    state = {
        "model": model,
        "opt_state": optax.sgd(0.05).init(eqx.filter(model, eqx.is_inexact_array)),
        "key": jax.random.key(0),
    }
    ckpts.save(3, state, {"note": "by hand"})
    with pytest.raises(
        ax.train.CheckpointError,
        match=r"fit: cannot resume from .*ckpt-000000003.npz: its metadata has no integer "
        r"epoch or batch \(it was not saved by fit\)",
    ):
        _fit(epochs=2, checkpoints=ckpts, resume=True, early_stopping=None)


def test_mutation_weighting_by_the_first_leaf_fails_the_time_major_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The old weighting (the first leaf's leading dimension) gives the Time-weighted mean:
    the time-major test can fail."""
    from axjax.train import _step

    monkeypatch.setattr(_step, "batch_size", lambda batch, axis: jax.tree.leaves(batch)[0].shape[0])
    data = [(_points(1.0, batch=1, time=4),), (_points(3.0, batch=3, time=4),)]
    assert ax.train.evaluate(Centre(0.0), distance, data) == {"loss": pytest.approx(5.0)}


def test_resume_across_runs_with_and_without_restore_best(tmp_path: Path) -> None:
    """A checkpoint without the best parameters resumes under restore_best (and one with
    them resumes without early stopping): the other layout is read."""
    ckpts = Checkpoints(tmp_path / "ckpt")
    _fit(epochs=3, max_steps=1, checkpoints=ckpts, early_stopping=None)
    with pytest.warns(UserWarning, match=r"holds no best parameters \(it was saved without"):
        rule = EarlyStopping("eval_loss", patience=100)
        rule.best = 100.0  # as a rule carried over from an earlier run
        result = _fit(epochs=3, max_steps=2, checkpoints=ckpts, resume=True, early_stopping=rule)
    assert result.step == 2
    assert ax.train.read_manifest(ckpts.path(2))["metadata"]["has_best"] is True
    assert _fit(epochs=3, checkpoints=ckpts, resume=True, early_stopping=None).step == 3
