"""NaN provenance: ``ax.debug_nans`` and ``ax.check_finite`` name the first op whose forward
or backward result is not finite, its operands' ranges and the line that applied it: in
eager code, under ``jax.jit`` and ``jax.grad``, under ``jax.vmap`` and in compiled graphs."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from tests.axes import Batch, Hidden, Pixel


def _line(offset: int = 0) -> str:
    """``test_nan_report.py:N`` for the caller's line plus ``offset``."""
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return f"test_nan_report.py:{frame.f_back.f_lineno + offset}"


def _vec(*values: float) -> ax.Tensor[ax.F32, Batch]:
    return ax.tensor(jnp.array(values, jnp.float32), Batch)


def _report(run) -> ax.NonFiniteReport:
    with pytest.raises(ax.NonFiniteError) as info:
        with ax.debug_nans():
            run()
    report = info.value.report
    assert report is not None and str(info.value) == str(report)
    return report


def test_log_of_zero_names_the_forward_of_log_and_its_line():
    x = _vec(0.0, 1.0, 2.0)
    site = _line(1)
    report = _report(lambda: ax.exp(ax.log(x)))
    assert (report.op, report.phase, report.site) == ("Log", "forward", site)
    assert str(report) == (
        f"the first non-finite value came from the forward of Log at {site}\n"
        "  result Tensor[F32, Batch=3]: 1 -inf of 3 (finite range [0, 0.6931])\n"
        "  operand 0 Tensor[F32, Batch=3]: range [0, 2]"
    )


def _root_sum(x: ax.Tensor[ax.F32, Batch]) -> ax.Tensor[ax.F32]:
    return ax.sum(ax.sqrt(x), Batch)


SQRT_SITE = f"test_nan_report.py:{inspect.getsourcelines(_root_sum)[1] + 1}"


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_the_derivative_of_sqrt_at_zero_names_the_backward_of_sqrt(jit):
    grad = ax.grad(_root_sum)
    report = _report(lambda: (jax.jit(grad) if jit else grad)(_vec(0.0, 1.0, 4.0)))
    assert (report.op, report.phase, report.site) == ("Sqrt", "backward", SQRT_SITE)
    assert str(report) == (
        f"the first non-finite value came from the backward (its cotangents) of Sqrt at "
        f"{SQRT_SITE}\n"
        "  cotangent 0 Tensor[F32, Batch=3]: 1 +inf of 3 (finite range [0.25, 0.5])\n"
        "  incoming cotangent Tensor[F32, Batch=3]: range [1, 1]\n"
        "  operand 0 Tensor[F32, Batch=3]: range [0, 4]"
    )


def _mlp(
    w: ax.Tensor[ax.F32, Pixel, Hidden], x: ax.Tensor[ax.F32, Batch, Pixel]
) -> ax.Tensor[ax.F32]:
    return ax.sum(ax.tanh(ax.contract(x, w)), (Batch, Hidden))


@pytest.mark.parametrize(("where", "operand"), [("data", 0), ("parameter", 1)])
def test_nan_in_the_data_or_a_parameter_is_traced_to_the_op_that_read_it(where, operand):
    w = ax.normal(jax.random.key(0), (4, 3), Pixel, Hidden)
    x = ax.normal(jax.random.key(1), (2, 4), Batch, Pixel)
    if where == "data":
        x = ax.Tensor(x.array.at[1, 2].set(jnp.nan), x.axes)
    else:
        w = ax.Tensor(w.array.at[0, 0].set(jnp.inf), w.axes)
    report = _report(lambda: jax.jit(ax.value_and_grad(_mlp))(w, x))
    assert (report.op, report.phase) == ("Contract", "forward")
    lines, first = inspect.getsourcelines(_mlp)
    contract = first + next(i for i, t in enumerate(lines) if "ax.contract(x, w)" in t)
    assert report.site == f"test_nan_report.py:{contract}"
    bad = "1 NaN of 8" if where == "data" else "1 +inf of 12"
    assert bad in report.values[operand + 1]
    assert report.values[-1] == (
        f"(operand {operand} already held non-finite values: they "
        "came from this op's inputs, the data or a parameter, not "
        "from the op)"
    )


def test_under_vmap_the_report_comes_when_the_context_ends():
    def f(a: jax.Array) -> jax.Array:
        return ax.log(ax.tensor(a, Batch)).array

    site = _line(1)
    report = _report(lambda: jax.vmap(f)(jnp.array([[1.0, 2.0], [0.0, 3.0]])))
    assert (report.op, report.phase) == ("Log", "forward")
    assert report.site == f"test_nan_report.py:{int(site.split(':')[1]) - 3}"


def test_a_compiled_graph_reports_the_line_that_built_the_node():
    x = ax.Input(ax.F32, Batch)
    site = _line(1)
    y = ax.sum(ax.log(x), Batch)
    predict = ax.compile(y, inputs=[x])
    report = _report(lambda: predict(_vec(1.0, 0.0)))
    assert (report.op, report.phase, report.site) == ("Log", "forward", site)
    w = ax.Param(_vec(0.0, 1.0))
    site = _line(1)
    loss = ax.sum(ax.sqrt(w), Batch)
    step = ax.grad(loss, wrt=[w])
    report = _report(lambda: step())
    assert (report.op, report.phase, report.site) == ("Sqrt", "backward", site)


def test_check_finite_returns_finite_results_and_explains_the_others():
    grad = ax.check_finite(jax.jit(ax.grad(_root_sum)))
    np.testing.assert_allclose(grad(_vec(1.0, 4.0)).array, [0.5, 0.25])
    with pytest.raises(
        ax.NonFiniteError,
        match=(
            r"^the first non-finite value came from the backward \(its cotangents\) of Sqrt "
            rf"at {SQRT_SITE}\n"
        ),
    ):
        grad(_vec(0.0, 4.0))


def test_check_finite_says_when_no_op_produced_the_value():
    double = ax.check_finite(lambda t: jnp.asarray(t.array) * 2)
    with pytest.raises(
        ax.NonFiniteError,
        match=(
            r"^<lambda> returned NaN or infinity, but no axjax op produced it when run again "
            r"op by op: its inputs already hold non-finite values$"
        ),
    ) as info:
        double(_vec(jnp.nan))
    assert info.value.report is None


def test_nothing_is_checked_outside_the_context_and_the_program_is_unchanged():
    x = _vec(0.0, 1.0)
    assert np.isneginf(ax.log(x).array[0])  # no error outside
    lowered = jax.jit(ax.grad(_root_sum)).lower(x).as_text()
    with pytest.raises(ax.NonFiniteError):
        with ax.debug_nans():
            ax.grad(_root_sum)(x)
    assert jax.jit(ax.grad(_root_sum)).lower(x).as_text() == lowered
    assert "callback" not in lowered
