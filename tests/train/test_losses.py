"""Losses and metrics: jax.numpy oracles, gradients (jax.grad oracle and finite differences),
several axis orders, and the text of every error."""

from __future__ import annotations

from typing import final

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from axjax.core._internal import declared_ops
from axjax.train import Batch, Class, RunningMean
from tests.ops.helpers import OpCase, check_op
from tests.ops.op_cases import LOSSES


@final
class Time(ax.Axis): ...


@pytest.mark.parametrize("case", LOSSES, ids=lambda c: c.name)
def test_loss_op(case: OpCase) -> None:
    """The op matrix's checks (tests/ops/helpers.py): forward against the jax.numpy
    oracle over random sizes and storage orders, the op's own backward against jax.grad
    of the oracle and against finite differences in float64, jax_autodiff, jvp, hessian."""
    check_op(case)


def test_every_loss_op_has_a_case() -> None:
    declared = {spec.op.__name__ for spec in declared_ops() if spec.namespace == "axjax.train"}
    assert declared == {c.op for c in LOSSES}


def _logits(key, order):
    sizes = {Batch: 4, Time: 3, Class: 5}
    arr = jax.random.normal(key, tuple(sizes[a] for a in order)) * 3
    return ax.tensor(arr, *order, dtype=ax.F32)


def _labels(key, axes, sizes):
    return ax.tensor(
        jax.random.randint(key, tuple(sizes[a] for a in axes), 0, 5), *axes, dtype=ax.I32
    )


@pytest.mark.parametrize(
    "order", [(Batch, Class), (Class, Batch), (Batch, Time, Class), (Time, Class, Batch)]
)
def test_softmax_cross_entropy_matches_oracle_and_gradients(order):
    k1, k2 = jax.random.split(jax.random.key(0))
    logits = _logits(k1, order)
    rest = tuple(a for a in order if a is not Class)
    labels = _labels(k2, rest, logits.sizes)
    p = order.index(Class)

    def oracle(x):
        logp = jax.nn.log_softmax(x, axis=p)
        return -jnp.squeeze(jnp.take_along_axis(logp, jnp.expand_dims(labels.array, p), p), p)

    out = ax.train.softmax_cross_entropy(logits, labels, Class)
    assert out.axes == rest
    np.testing.assert_allclose(
        np.asarray(out.array), np.asarray(oracle(logits.array)), rtol=1e-5, atol=1e-6
    )

    def ours(x):
        return ax.sum(
            ax.train.softmax_cross_entropy(ax.tensor(x, *order), labels, Class), rest
        ).array

    g = jax.jit(jax.grad(ours))(logits.array)
    g_ref = jax.grad(lambda x: jnp.sum(oracle(x)))(logits.array)
    np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), rtol=1e-5, atol=1e-6)


def test_softmax_cross_entropy_is_stable_for_huge_logits():
    logits = ax.tensor([[1000.0, -1000.0]], Batch, Class, dtype=ax.F32)
    labels = ax.tensor([1], Batch, dtype=ax.I32)
    assert float(ax.train.softmax_cross_entropy(logits, labels).array[0]) == pytest.approx(2000)


def test_softmax_cross_entropy_errors():
    logits = ax.zeros((4, 5), Batch, Class)
    with pytest.raises(
        ax.AxisError,
        match=r"^Cannot apply SoftmaxCrossEntropy\(Class\) to "
        r"Tensor\[F32, Batch=4, Class=5\] and Tensor\[F32, Batch=4\]: labels must "
        r"be integer class indices, got F32",
    ):
        ax.train.softmax_cross_entropy(logits, ax.zeros((4,), Batch))
    with pytest.raises(
        ax.AxisError,
        match=r"labels have axes \(Time\); the labels need the "
        r"logits' axes without Class: \(Batch\)",
    ):
        ax.train.softmax_cross_entropy(logits, ax.zeros((4,), Time, dtype=ax.I32))
    with pytest.raises(
        ax.AxisError,
        match=r"labels have axes \(Time, Batch\); same axes in a "
        r"different order: transpose the labels",
    ):
        ax.train.softmax_cross_entropy(
            ax.zeros((4, 3, 5), Batch, Time, Class), ax.zeros((3, 4), Time, Batch, dtype=ax.I32)
        )
    with pytest.raises(
        ax.AxisError, match="axis Batch has size 4 in the logits and 3 in the labels"
    ):
        ax.train.softmax_cross_entropy(logits, ax.zeros((3,), Batch, dtype=ax.I32))
    with pytest.raises(ax.AxisError, match=r"the logits have no axis Time \(name the class axis"):
        ax.train.softmax_cross_entropy(logits, ax.zeros((4,), Batch, dtype=ax.I32), Time)
    with pytest.raises(ax.AxisError, match="logits must be floating-point, got I32"):
        ax.train.softmax_cross_entropy(
            ax.zeros((4, 5), Batch, Class, dtype=ax.I32), ax.zeros((4,), Batch, dtype=ax.I32)
        )


@pytest.mark.parametrize("order", [(Batch, Class), (Class, Batch)])
def test_binary_cross_entropy(order):
    k1, k2 = jax.random.split(jax.random.key(1))
    x = _logits(k1, order)
    t = ax.tensor(jax.random.uniform(k2, x.shape), *order, dtype=ax.F32)

    def oracle(a, b):
        return -(b * jax.nn.log_sigmoid(a) + (1 - b) * jax.nn.log_sigmoid(-a))

    out = ax.train.binary_cross_entropy(x, t)
    assert out.axes == order
    np.testing.assert_allclose(
        np.asarray(out.array), np.asarray(oracle(x.array, t.array)), rtol=1e-5, atol=1e-6
    )

    def ours(a, b):
        return ax.sum(
            ax.train.binary_cross_entropy(ax.tensor(a, *order), ax.tensor(b, *order)), order
        ).array

    g = jax.jit(jax.grad(ours, argnums=(0, 1)))(x.array, t.array)
    g_ref = jax.grad(lambda a, b: jnp.sum(oracle(a, b)), argnums=(0, 1))(x.array, t.array)
    for a, b in zip(g, g_ref, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
    big = ax.tensor([[80.0, -80.0]], Batch, Class, dtype=ax.F32)
    assert np.isfinite(
        np.asarray(ax.train.binary_cross_entropy(big, ax.zeros((1, 2), Batch, Class)).array)
    ).all()


def test_binary_cross_entropy_errors():
    x = ax.zeros((2, 3), Batch, Class)
    with pytest.raises(
        ax.AxisError,
        match=r"^Cannot apply BinaryCrossEntropy to Tensor\[F32, "
        r"Batch=2, Class=3\] and Tensor\[F32, Class=3, Batch=2\]: logits and "
        r"targets have different axes \(same axes in a different order",
    ):
        ax.train.binary_cross_entropy(x, ax.zeros((3, 2), Class, Batch))
    with pytest.raises(ax.AxisError, match="same floating-point dtype"):
        ax.train.binary_cross_entropy(x, ax.zeros((2, 3), Batch, Class, dtype=ax.I32))


def test_mean_squared_error():
    a = ax.tensor([[1.0, 2.0], [3.0, 5.0]], Batch, Class, dtype=ax.F32)
    b = ax.zeros((2, 2), Batch, Class)
    assert float(ax.train.mean_squared_error(a, b).array) == pytest.approx(39 / 4)
    per = ax.train.mean_squared_error(a, b, over=Class)
    assert per.axes == (Batch,)
    np.testing.assert_allclose(np.asarray(per.array), [2.5, 17.0])
    g = jax.grad(lambda x: ax.train.mean_squared_error(ax.tensor(x, Batch, Class), b).array)(
        a.array
    )
    np.testing.assert_allclose(np.asarray(g), np.asarray(a.array) / 2)
    with pytest.raises(
        ax.AxisError,
        match=r"^Cannot apply mean_squared_error to predictions=Tensor\[F32, "
        r"Batch=2, Class=2\] and targets=Tensor\[F32, Class=2, Batch=2\]: predictions and "
        r"targets have different axes \(same axes in a different order",
    ):
        ax.train.mean_squared_error(a, ax.zeros((2, 2), Class, Batch))


def test_accuracy():
    logits = ax.tensor([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]], Batch, Class, dtype=ax.F32)
    labels = ax.tensor([1, 1, 1], Batch, dtype=ax.I32)
    acc = ax.train.accuracy(logits, labels, Class)
    assert acc.axes == () and float(acc) == pytest.approx(2 / 3)
    u8 = ax.tensor(np.array([1, 0, 1], np.uint8), Batch, dtype=ax.U8)
    assert float(ax.train.accuracy(logits, u8)) == pytest.approx(1.0)
    assert float(
        jax.jit(lambda a, b: ax.train.accuracy(a, b).array)(logits, labels)
    ) == pytest.approx(2 / 3)
    with pytest.raises(ax.AxisError, match="labels must be integer class indices, got F32"):
        ax.train.accuracy(logits, ax.zeros((3,), Batch))
    with pytest.raises(ax.AxisError, match=r"the logits have no axis Time"):
        ax.train.accuracy(logits, labels, Time)
    with pytest.raises(ax.AxisError, match="the labels need the logits' axes without Class"):
        ax.train.accuracy(logits, ax.zeros((3,), Time, dtype=ax.I32))


def test_running_mean():
    m = RunningMean.zero()
    assert np.isnan(m.value())
    m = m.update(ax.tensor(2.0, dtype=ax.F32), weight=3).update(jnp.float32(6.0))
    assert m.value() == pytest.approx((6 + 6) / 4)
    jitted = jax.jit(lambda m, v: m.update(v, 2))(m, jnp.float32(0.0))
    assert jitted.value() == pytest.approx(12 / 6)
