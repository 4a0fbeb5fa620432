"""Mixed precision: the policy's casts, dtype safety, loss scaling, and bf16/f16 training in
``fit`` reaching the f32 loss."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import axjax as ax
from axjax.train import Batch, Class, Pixel
from axjax.train._internal import for_training
from tests.train.models import TinyMLP, classify

#: bf16 keeps 8 bits of mantissa: its training loss may differ from f32's by this much
#: (nats) after the short runs below; f16 with loss scaling keeps 11 bits.
TOLERANCE = {ax.BF16: 0.05, ax.F16: 0.02}


def _data() -> list[tuple[Any, Any]]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 16)).astype(np.float32)
    teacher = rng.normal(size=(16, 4)).astype(np.float32)
    y = (x @ teacher).argmax(1).astype(np.int32)
    return [
        (
            ax.tensor(x[i : i + 32], Batch, Pixel, dtype=ax.F32),
            ax.tensor(y[i : i + 32], Batch, dtype=ax.I32),
        )
        for i in range(0, 256, 32)
    ]


def test_cast_changes_floating_tensors_only() -> None:
    model = TinyMLP(jax.random.key(0), 16, 8, 4)
    half = ax.nn.cast(model, ax.BF16)
    assert half.w1.dtype is ax.BF16 and half.b2.dtype is ax.BF16
    assert half.activation is model.activation
    ids = ax.tensor(jnp.arange(3), Batch, dtype=ax.I32)
    assert ax.nn.cast((ids, 1.5), ax.F16) == (ids, 1.5)
    with pytest.raises(TypeError, match="cast: I32 is not a floating-point dtype"):
        ax.nn.cast(model, ax.I32)


def test_a_bf16_activation_meeting_an_f32_weight_is_an_error() -> None:
    model = TinyMLP(jax.random.key(0), 16, 8, 4)
    x = ax.nn.cast(_data()[0][0], ax.BF16)
    with pytest.raises(ax.AxisError, match="dtypes BF16 and F32 differ"):
        model(x)
    out = ax.nn.Policy.mixed(ax.BF16).cast_to_compute(model)(x)  # the policy casts it
    assert out.dtype is ax.BF16


def test_policy_arguments_are_checked() -> None:
    assert ax.nn.Policy.mixed(ax.F16).loss_scale == "dynamic"
    assert ax.nn.Policy.mixed().compute is ax.BF16 and ax.nn.Policy.mixed().loss_scale is None
    with pytest.raises(TypeError, match="compute must be a floating-point dtype"):
        ax.nn.Policy(compute=ax.I32)
    with pytest.raises(
        ValueError, match="loss_scale must be None, .dynamic. or a finite positive number"
    ):
        ax.nn.Policy(loss_scale=-1.0)
    with pytest.raises(ValueError, match="guard='step' stops at the first overflow"):
        ax.train.fit(
            TinyMLP(jax.random.key(0), 16, 8, 4),
            optax.sgd(0.1),
            classify,
            _data(),
            guard="step",
            precision=ax.nn.Policy.mixed(ax.F16),
            progress=False,
        )


def test_scale_gradient_scales_only_the_cotangent() -> None:
    f = lambda x: ax.nn.scale_gradient(x * x, jnp.float32(8.0))  # noqa: E731
    assert float(f(3.0)) == 9.0
    assert float(jax.grad(f)(1.0)) == 16.0


def test_dynamic_loss_scale_skips_overflow_and_moves_the_scale() -> None:
    policy = ax.nn.Policy(compute=ax.F16, loss_scale="dynamic", period=2)
    model = TinyMLP(jax.random.key(0), 16, 8, 4)
    scaled, opt, _, unwrap = for_training(policy, model, optax.sgd(0.1), classify, False)
    params = ax.nn.LossScaled(model, jnp.float32(4.0), jnp.float32(0.0))
    state = opt.init(params)
    ones = jax.tree.map(jnp.ones_like, params)
    bad = jax.tree.map(lambda a: jnp.full_like(a, jnp.inf), params)
    upd, _ = opt.update(bad, state, params)
    after = optax.apply_updates(params, upd)
    assert float(after.scale) == 2.0 and float(after.good) == 0.0
    assert jnp.array_equal(after.model.w1.array, model.w1.array)  # the step was skipped
    for scale, good in ((4.0, 1.0), (8.0, 0.0), (8.0, 1.0)):  # doubles after period=2
        upd, state = opt.update(ones, state, params)
        params = optax.apply_updates(params, upd)
        assert (float(params.scale), float(params.good)) == (scale, good)
    # three steps of sgd(0.1) on the unscaled gradient (1 / scale each)
    assert np.allclose(params.model.w1.array, model.w1.array - 0.1 * (1 / 4 + 1 / 4 + 1 / 8))
    assert isinstance(scaled, ax.nn.LossScaled) and unwrap(scaled) is scaled.model


@functools.cache
def _train(policy: ax.nn.Policy | None) -> tuple[float, Any]:
    data = _data()
    result = ax.train.fit(
        TinyMLP(jax.random.key(1), 16, 32, 4),
        optax.adam(1e-2),
        classify,
        data,
        epochs=6,
        log_every=8,
        eval_data=data[:2],
        progress=False,
        precision=policy,
    )
    return result.history[-1]["eval_loss"], result.model


@pytest.mark.parametrize("compute", [ax.BF16, ax.F16])
def test_mixed_precision_training_reaches_the_f32_loss(compute: type[ax.DType]) -> None:
    f32_loss, _ = _train(None)
    loss, model = _train(ax.nn.Policy.mixed(compute))
    assert model.w1.dtype is ax.F32  # f32 master weights come back, unwrapped
    assert f32_loss < 0.6  # it learned something
    assert abs(loss - f32_loss) < TOLERANCE[compute], (loss, f32_loss)


def test_the_graph_step_trains_in_bf16_with_f32_params() -> None:
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(64, 16)).astype(np.float32)
    ys = xs @ rng.normal(size=(16, 4)).astype(np.float32)
    final: dict[bool, tuple[float, Any]] = {}
    for mixed in (False, True):
        x, y = ax.Input(ax.F32, Batch, Pixel), ax.Input(ax.F32, Batch, Class)
        w = ax.Param(ax.zeros((16, 4), Pixel, Class))
        d = ax.contract(x, w) - y
        policy = ax.nn.Policy.mixed(ax.BF16) if mixed else None
        step = ax.compile_step(
            ax.mean(d * d, (Batch, Class)), optax.adam(0.05), inputs=[x, y], precision=policy
        )
        for _ in range(60):
            loss = step(ax.tensor(xs, Batch, Pixel), ax.tensor(ys, Batch, Class))
        final[mixed] = (float(loss.array), step.value(w).dtype)
    assert final[True][1] is ax.F32  # the Param is updated in f32
    assert final[False][0] < 0.5 and abs(final[True][0] - final[False][0]) < 0.05, final


def test_the_graph_step_trains_in_f16_with_dynamic_loss_scaling() -> None:
    """f16 compute with the policy's dynamic loss scale: the step reaches the f32 loss, and
    an overflowing step (a huge batch) is skipped with the Params unchanged and the scale
    halved (its growth after ``period`` finite steps: the test of ``ScaledOptimizer``
    above; here a short period would keep doubling it into overflow every few steps)."""
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(64, 16)).astype(np.float32)
    ys = xs @ rng.normal(size=(16, 4)).astype(np.float32)
    final: dict[bool, float] = {}
    for mixed in (False, True):
        x, y = ax.Input(ax.F32, Batch, Pixel), ax.Input(ax.F32, Batch, Class)
        w = ax.Param(ax.zeros((16, 4), Pixel, Class))
        d = ax.contract(x, w) - y
        policy = ax.nn.Policy(compute=ax.F16, loss_scale="dynamic") if mixed else None
        step = ax.compile_step(
            ax.mean(d * d, (Batch, Class)), optax.adam(0.05), inputs=[x, y], precision=policy
        )
        assert step.loss_scale == (2.0**15 if mixed else None)
        for _ in range(60):
            loss = step(ax.tensor(xs, Batch, Pixel), ax.tensor(ys, Batch, Class))
        final[mixed] = float(loss.array)
        if mixed:
            assert step.value(w).dtype is ax.F32  # f32 master weights
            before, scale = np.asarray(step.value(w).array), step.loss_scale
            assert scale is not None
            step(ax.tensor(xs * 3e4, Batch, Pixel), ax.tensor(ys, Batch, Class))  # overflows
            assert np.array_equal(np.asarray(step.value(w).array), before)
            assert step.loss_scale == scale / 2
    assert final[False] < 0.5 and abs(final[True] - final[False]) < 0.05, final
