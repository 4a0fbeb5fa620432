"""Every floating dtype (``F16``, ``BF16``, ``F32``, ``F64``) is floating everywhere.

One predicate, ``axjax.core._dtype.is_floating`` over the ``FLOATING`` table, decides what is
floating; bfloat16 is not a numpy floating subtype, so a numpy-only test treats it as an
integer. The checks below are generated over ``FLOATING`` × every place that asks the
question (the NaN report of ``debug_nans``, ``check_finite``, ``fit``'s guard, ``nn.cast``,
``nn.Policy``), and a mutation test puts the numpy-only test back and shows them fail for
BF16 alone.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import axjax as ax
from axjax.core import _dtype
from axjax.core._internal import FLOATING
from axjax.train import Batch, Dataset, Loader, Pixel, TrainingDiverged
from tests.train.models import Poisoned, TinyMLP, classify

Check = Callable[[type[ax.DType]], None]


@contextlib.contextmanager
def _mode(dtype: type[ax.DType], check: Check | None = None) -> Iterator[None]:
    """64-bit mode for F64 (JAX would make float32 otherwise) and for the round trips
    (through every dtype); nothing for the others (a compiled fit costs more in it)."""
    x64 = dtype is ax.F64 or check is cast_round_trips
    with jax.enable_x64(True) if x64 else contextlib.nullcontext():
        yield


def _vec(dtype: type[ax.DType], *values: float) -> ax.Tensor[Any, Batch]:
    return ax.tensor(jnp.array(values, dtype.numpy), Batch)


def _report(run: Callable[[], object]) -> ax.NonFiniteReport:
    with pytest.raises(ax.NonFiniteError) as info:
        run()
    report = info.value.report
    assert report is not None, str(info.value)
    return report


# ----------------------------------------------------------------------------- the checks
def debug_nans_forward(dtype: type[ax.DType]) -> None:
    """``log(0)`` under ``debug_nans`` names the forward of Log, with the dtype's ranges."""

    def run() -> None:
        with ax.debug_nans():
            ax.exp(ax.log(_vec(dtype, 0.0, 1.0, 2.0)))

    report = _report(run)
    assert (report.op, report.phase) == ("Log", "forward")
    assert report.values[0].startswith(f"result Tensor[{dtype.__name__}, Batch=3]: 1 -inf of 3")


def debug_nans_backward(dtype: type[ax.DType]) -> None:
    """The derivative of ``sqrt`` at 0 under jit names the backward of Sqrt."""
    grad = jax.jit(ax.grad(lambda x: ax.sum(ax.sqrt(x), Batch)))

    def run() -> None:
        with ax.debug_nans():
            grad(_vec(dtype, 0.0, 1.0, 4.0))

    report = _report(run)
    assert (report.op, report.phase) == ("Sqrt", "backward")
    assert report.values[0].startswith(f"cotangent 0 Tensor[{dtype.__name__}, Batch=3]: 1 +inf")


def check_finite_names_the_op(dtype: type[ax.DType]) -> None:
    """``check_finite`` of a jitted function explains its NaN by the op, not by jnp."""
    checked = ax.check_finite(jax.jit(lambda x: ax.log(x)))
    report = _report(lambda: checked(_vec(dtype, 0.0, 1.0)))
    assert (report.op, report.phase) == ("Log", "forward")


def fit_guard_reports(dtype: type[ax.DType]) -> None:
    """``fit`` computing in ``dtype`` (a Policy) names the op behind the NaN it stops at."""
    err = _diverged(ax.nn.Policy(compute=dtype))
    assert err.step == 3 and err.report is not None, str(err)
    assert (err.report.op, err.report.phase) == ("Log", "forward")
    assert f"operand 0 Tensor[{dtype.__name__}]: range [0, 0]" in str(err.report)


def cast_round_trips(dtype: type[ax.DType]) -> None:
    """``nn.cast`` to ``dtype`` (its marker, numpy dtype or JAX scalar type) from every
    floating dtype, of Tensors and arrays; integers stay."""
    ids = ax.tensor(jnp.arange(3, dtype=jnp.int32), Batch)
    for source in FLOATING:  # (the test runs under 64-bit mode: F64 is a source too)
        x = _vec(source, 0.5, -1.25, 3.0)
        for target in (dtype, dtype.numpy, dtype.numpy.type):
            y, a, i = ax.nn.cast((x, x.array, ids), target)
            assert y.dtype is dtype and a.dtype == dtype.numpy and i is ids, (source, target)
            np.testing.assert_array_equal(np.asarray(y.array, np.float64), [0.5, -1.25, 3.0])
            assert ax.nn.cast(y, source).dtype is source


def policy_takes_it(dtype: type[ax.DType]) -> None:
    """A Policy accepts ``dtype`` in every role, as a marker or a JAX dtype."""
    for given in (dtype, dtype.numpy.type):
        policy = ax.nn.Policy(param=given, compute=given, output=given)
        assert (policy.param, policy.compute, policy.output) == (dtype, dtype, dtype)


CHECKS: list[Check] = [
    debug_nans_forward,
    debug_nans_backward,
    check_finite_names_the_op,
    fit_guard_reports,
    cast_round_trips,
    policy_takes_it,
]


def failures(dtype: type[ax.DType], checks: list[Check] = CHECKS) -> list[str]:
    """``"name: error"`` of each of ``checks`` that fails for ``dtype``."""
    failed = []
    for check in checks:
        with _mode(dtype, check):
            try:
                check(dtype)
            except (AssertionError, TypeError, pytest.fail.Exception) as e:
                failed.append(f"{check.__name__}: {type(e).__name__}: {e}")
    return failed


def log_gate(model: Any, x: Any, y: Any) -> Any:
    """``classify`` plus ``0 · log(mean(x²))``: ``log(0)`` on an all-zero batch."""
    loss, metrics = classify(model, x, y)
    return loss + 0.0 * ax.log(ax.mean(x * x, (Batch, Pixel))), metrics


@functools.cache
def _data() -> Dataset:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 6)).astype(np.float32)
    y = np.argmax(x @ rng.normal(size=(6, 3)), axis=1).astype(np.uint8)
    return Dataset(x, y, name="synthetic")


def _diverged(policy: ax.nn.Policy, guard: str = "step") -> TrainingDiverged:
    """``fit`` stopped by its guard (the per-step one unless told: it compiles one step
    less than ``"replay"``, and both explain the step the same way)."""
    source = Poisoned(Loader(_data(), 8, key=jax.random.key(3)), 3, "zero")
    with pytest.raises(TrainingDiverged) as info:
        ax.train.fit(
            TinyMLP(jax.random.key(0), 6, 8, 3),
            optax.sgd(1e-2),
            log_gate,
            source,
            epochs=1,
            progress=False,
            log_every=4,
            precision=policy,
            guard=guard,
        )
    return info.value


# ----------------------------------------------------------------------------- the tests
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("dtype", FLOATING, ids=lambda d: d.__name__)
def test_every_floating_dtype_is_floating_everywhere(dtype: type[ax.DType], check: Check) -> None:
    with _mode(dtype, check):
        check(dtype)


def test_the_numpy_only_test_fails_the_generated_checks_for_bf16(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The mutation: the old test (numpy's hierarchy, where bfloat16 is not floating) in
    place of the predicate's rule fails every check for BF16; F16 (a numpy floating type)
    fails only its round trip through BF16 (its fit, which costs a compilation, is not
    run again)."""
    monkeypatch.setattr(_dtype, "_floating_rule", lambda d: bool(np.issubdtype(d, np.floating)))
    assert [f.split(":")[0] for f in failures(ax.BF16)] == [c.__name__ for c in CHECKS]
    f16 = failures(ax.F16, [c for c in CHECKS if c is not fit_guard_reports])
    assert [f.split(":")[0] for f in f16] == ["cast_round_trips"] and "BF16" in f16[0], f16


# ----------------------------------------------------------------------------- the issue
def test_debug_nans_reports_a_bfloat16_nan() -> None:
    x = _vec(ax.BF16, 0.0, 1.0, 2.0)
    with pytest.raises(ax.NonFiniteError) as info, ax.debug_nans():
        ax.log(x)
    assert str(info.value).splitlines()[1:] == [
        "  result Tensor[BF16, Batch=3]: 1 -inf of 3 (finite range [0, 0.6914])",
        "  operand 0 Tensor[BF16, Batch=3]: range [0, 2]",
    ]


def test_check_finite_on_bfloat16_blames_the_op_not_jax_numpy() -> None:
    with pytest.raises(ax.NonFiniteError) as info:
        ax.check_finite(lambda x: ax.log(x))(_vec(ax.BF16, 0.0, 1.0))
    assert str(info.value).startswith("the first non-finite value came from the forward of Log")
    assert "plain jax.numpy" not in str(info.value)


def test_fit_under_a_bf16_policy_reports_the_op() -> None:
    err = _diverged(ax.nn.Policy.mixed(ax.BF16), guard="replay")  # fit's default guard
    assert "Replayed op by op, the first non-finite value came from the forward of Log" in str(err)


@pytest.mark.parametrize("scale", [float("inf"), float("nan"), 0.0, -2.0, True, "big"])
def test_policy_rejects_a_loss_scale_that_is_not_a_finite_positive_number(scale: Any) -> None:
    with pytest.raises(ValueError) as info:
        ax.nn.Policy(loss_scale=scale)
    assert str(info.value) == (
        "Policy: loss_scale must be None, 'dynamic' or a finite positive number (the factor "
        f"the loss's gradient is multiplied by, e.g. 2.0**15), got {scale!r}"
    )


def test_policy_rejects_a_loss_scale_its_output_dtype_cannot_hold() -> None:
    with pytest.raises(ValueError) as info:
        ax.nn.Policy(compute=ax.F16, output=ax.F16, loss_scale=1e5)
    assert str(info.value) == (
        "Policy: loss_scale 100000.0 overflows F16 (its largest value is 65504): use a "
        "smaller factor, or 'dynamic'"
    )
    assert ax.nn.Policy(loss_scale=np.float32(128)).initial_scale() == 128.0


def test_cast_takes_a_jax_dtype_and_rejects_what_is_not_a_floating_dtype() -> None:
    model = TinyMLP(jax.random.key(0), 4, 3, 2)
    assert ax.nn.cast(model, jnp.bfloat16).w1.dtype is ax.BF16
    with pytest.raises(TypeError) as info:
        ax.nn.cast(model, jnp.int32)
    assert str(info.value) == (
        "cast: I32 is not a floating-point dtype (cast integer tensors one by one with ax.astype)"
    )
    with pytest.raises(TypeError) as info:
        ax.nn.cast(model, "half-ish")
    assert str(info.value) == (
        "cast: 'half-ish' is not a dtype (give a floating-point one: ax.F16, ax.BF16, ax.F32, "
        "ax.F64, or jnp.bfloat16, ...)"
    )
    with pytest.raises(TypeError) as info:
        ax.nn.Policy(compute=jnp.int8)
    assert str(info.value) == (
        "Policy: compute must be a floating-point dtype (ax.F16, ax.BF16, ax.F32, ax.F64, or "
        "jnp.float32, jnp.bfloat16, ...), got I8"
    )
