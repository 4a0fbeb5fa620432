"""``fit``'s guard names the op behind a NaN: after finding the bad step it replays that
step op by op and attaches the report of the first op whose forward or backward result was
not finite (``TrainingDiverged.report``), on the plain and the donating path."""

from __future__ import annotations

import inspect
import math
from typing import Any

import equinox as eqx
import jax
import numpy as np
import optax
import pytest

import axjax as ax
from axjax.train import Batch, Dataset, Loader, Pixel, TrainingDiverged
from tests.train import models
from tests.train.models import Poisoned, TinyMLP, classify, sqrt_gate


def _line(text: str) -> str:
    """``models.py:N`` of the line of tests/train/models.py that holds ``text``."""
    with open(models.__file__) as f:
        for n, line in enumerate(f, 1):
            if text in line:
                return f"models.py:{n}"
    raise AssertionError(text)


def _loader() -> Loader:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(96, 6)).astype(np.float32)
    y = np.argmax(x @ rng.normal(size=(6, 3)), axis=1).astype(np.uint8)
    return Loader(Dataset(x, y, name="synthetic"), 16, key=jax.random.key(3))


def log_gate(model: Any, x: Any, y: Any) -> Any:
    """``classify`` plus ``0 · log(mean(x²))``: ``log(0)`` on an all-zero batch."""
    loss, metrics = classify(model, x, y)
    return loss + 0.0 * ax.log(ax.mean(x * x, (Batch, Pixel))), metrics


LOG_SITE = f"test_nan_report_fit.py:{inspect.getsourcelines(log_gate)[1] + 3}"


def _diverged(source: Any, loss: Any = classify, model: Any = None, **kw: Any) -> TrainingDiverged:
    model = model if model is not None else TinyMLP(jax.random.key(0), 6, 16, 3)
    with pytest.raises(TrainingDiverged) as info:
        ax.train.fit(
            model, optax.adam(1e-2), loss, source, epochs=2, progress=False, log_every=7, **kw
        )
    return info.value


def test_nan_in_the_data_is_traced_to_the_first_op_that_read_it():
    err = _diverged(Poisoned(_loader(), 9, "nan"))
    assert err.step == 9 and err.report is not None
    site = _line("h = ax.contract(x, self.w1)")
    assert (err.report.op, err.report.phase, err.report.site) == ("Contract", "forward", site)
    assert "operand 0 Tensor[F32, Batch=16, Pixel=6]: 96 NaN of 96" in str(err)
    assert str(err).endswith(
        "(operand 0 already held non-finite values: they came from this "
        "op's inputs, the data or a parameter, not from the op)"
    )
    assert (
        f"\nReplayed op by op, the first non-finite value came from the forward of "
        f"Contract at {site}\n" in str(err)
    )


def test_an_infinite_parameter_is_named_as_the_operand_it_is():
    tiny = TinyMLP(jax.random.key(0), 6, 16, 3)
    tiny = eqx.tree_at(
        lambda m: m.w2, tiny, ax.Tensor(tiny.w2.array.at[0, 0].set(math.inf), tiny.w2.axes)
    )
    err = _diverged(_loader(), model=tiny)
    assert err.step == 1 and err.report is not None
    assert (err.report.op, err.report.site) == ("Contract", _line("o = ax.contract(h, self.w2)"))
    assert "operand 1 Tensor[F32, Hidden=16, Class=3]: 1 +inf of 48" in str(err.report)


def test_log_of_zero_is_named_at_the_loss_line():
    err = _diverged(Poisoned(_loader(), 9, "zero"), log_gate)
    assert err.step == 9 and err.report is not None
    assert (err.report.op, err.report.phase, err.report.site) == ("Log", "forward", LOG_SITE)
    assert "operand 0 Tensor[F32]: range [0, 0]" in str(err.report)


@pytest.mark.parametrize("guard", ["step", "replay-donating"])
def test_the_derivative_of_sqrt_at_zero_on_every_guard_path(monkeypatch, guard):
    if guard == "replay-donating":
        monkeypatch.setattr(jax, "default_backend", lambda: "gpu")  # fit donates off CPU
    err = _diverged(Poisoned(_loader(), 9, "zero"), sqrt_gate, guard=guard.split("-")[0])
    assert err.step == 9 and err.report is not None
    assert (err.report.op, err.report.phase, err.report.site) == (
        "Sqrt",
        "backward",
        _line("gate = ax.sqrt("),
    )
    assert str(err.report).splitlines()[1].startswith("  cotangent 0 Tensor[F32]: 1 +inf of 1")
