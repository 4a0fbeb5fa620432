"""Statistics of F16/BF16 values: right where the result fits, inf (never 0) where it does not.

Enumerated, not hand-picked:

- every declared op (the op registry): elementwise ops (kinds ``unary``/``binary``) sum
  nothing; every other op is classified in ``SUMMING`` (with a case) or ``NOT_SUMMING``
  (with the reason), so a new op fails :func:`test_every_op_is_classified` until it is;
- every registered layer (the layer registry): in ``STATISTIC_LAYERS`` (with a case) or
  ``NO_STATISTIC`` (with the reason);
- every loss and metric of ``ax.train`` (the public functions whose first parameter is
  ``logits`` or ``predictions``).

Each case runs on large-magnitude F16 and BF16 values whose partial sums, squares or
scores overflow the dtype although the result fits, and is compared with float32 on the
same (rounded) values, within the dtype's precision; an op's overflow case (a result beyond
the dtype) must be inf with float32's sign. The layers and losses keep their statistics in
float32 until the result is cast back (``widened``/``narrowed``, ops/_elementwise.py); the
mutation tests switch that off and show the generated test fails.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, final

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from axjax.core import _lower
from axjax.core._internal import declared_ops
from axjax.nn._registry import declared_layers
from axjax.ops import _elementwise

LOW = (ax.F16, ax.BF16)
KEY = jax.random.key(0)


@final
class B(ax.Axis): ...


@final
class C(ax.Axis): ...


@final
class D(ax.Axis): ...


@final
class T(ax.Axis): ...


@final
class S(ax.Axis): ...


def _big_sum(n: int = 64) -> np.ndarray:
    """Partial sums far beyond F16 (32 x 60000), a total that fits (32 x 1000 = 32000)."""
    return np.concatenate([np.full(n // 2, 60000.0), np.full(n // 2, -59000.0)])


def _rows(v: np.ndarray) -> np.ndarray:
    return np.stack([v, v[::-1]])  # [B=2, C]


def _alternating(m: float, n: int = 64) -> np.ndarray:
    return np.where(np.arange(n) % 2, m, -m)


@dataclasses.dataclass(frozen=True)
class Case:
    """``run(x)`` on an input Tensor ``x`` of the dtype under test (and on its float32
    copy for the reference); ``fits``: data whose result fits F16; ``overflows``: data
    whose result is beyond F16 (``None``: no such result, e.g. a mean)."""

    run: Callable[[Any], Any]
    fits: np.ndarray
    overflows: np.ndarray | None = None
    axes: tuple[type[ax.Axis], ...] = (B, C)


def _ones_like_w(x: Any) -> Any:
    return ax.ones((x.size(C), 3), C, D, dtype=x.dtype)


# ----------------------------------------------------------------------------- ops
#: every op that sums, by its public function
SUMMING: dict[str, Case] = {
    "sum": Case(lambda x: ax.sum(x, C), _rows(_big_sum()), _rows(np.full(64, 60000.0))),
    "mean": Case(lambda x: ax.mean(x, C), _rows(np.full(64, 60000.0))),
    "var": Case(lambda x: ax.var(x, C), _rows(_alternating(200.0)), _rows(_alternating(400.0))),
    "logsumexp": Case(lambda x: ax.logsumexp(x, C), _rows(np.full(64, 60000.0))),
    "softmax": Case(lambda x: ax.softmax(x, C), _rows(_alternating(60000.0))),
    "log_softmax": Case(
        lambda x: ax.log_softmax(x, C),
        _rows(np.linspace(0, 60000.0, 64)),
        _rows(_alternating(60000.0)),
    ),
    "contract": Case(
        lambda x: ax.contract(x, _ones_like_w(x)), _rows(_big_sum()), _rows(np.full(64, 60000.0))
    ),
    "matmul": Case(
        lambda x: ax.matmul(x, _ones_like_w(x)), _rows(_big_sum()), _rows(np.full(64, 60000.0))
    ),
    "conv": Case(
        lambda x: ax.conv(x, ax.ones((3, 2, 64), D, C, S, dtype=x.dtype), S),
        np.broadcast_to(_big_sum()[None, :, None], (2, 64, 2)).copy(),
        np.full((2, 64, 2), 60000.0),
        (B, S, C),
    ),
    "avg_pool": Case(lambda x: ax.avg_pool(x, C, window=64), _rows(np.full(64, 60000.0)), None),
    "softmax_cross_entropy": Case(
        lambda x: ax.train.softmax_cross_entropy(x, ax.tensor([1, 1], B), C),
        _rows(np.r_[59990.0, 60000.0, np.full(62, 59990.0)]),
        _rows(np.r_[60000.0, -60000.0, np.zeros(62)]),
    ),
    # the head an identity (its logits are x itself); the loss is float32 whatever x's dtype
    "linear_cross_entropy": Case(
        lambda x: ax.train.linear_cross_entropy(
            x,
            ax.astype(ax.tensor(np.eye(64, dtype=np.float32), S, C), x.dtype),
            ax.tensor([1, 1], B),
            S,
        ),
        _rows(np.r_[59990.0, 60000.0, np.full(62, 59990.0)]),
        None,
    ),
}
#: every other op that is not elementwise, and why it sums nothing
NOT_SUMMING = {
    "max": "picks one value",
    "min": "picks one value",
    "argmax": "picks a position",
    "max_pool": "picks one value per window",
    "astype": "converts each value",
    "where": "picks each value",
    "binary_cross_entropy": "elementwise per example: no sum",
    **{
        name: "moves or selects values"
        for name in (
            "expand_dims squeeze transpose rename broadcast tile concat stack unstack flatten "
            "unflatten index slice take one_hot"
        ).split()
    },
}


def op_functions() -> dict[str, str]:
    """Every declared op's public functions (and internal ops, by class), with their kind."""
    found: dict[str, str] = {}
    for spec in declared_ops():
        for name in spec.functions or (spec.op.__name__,):
            found[name] = spec.kind
    return found


def test_every_op_is_classified() -> None:
    unknown = [
        name
        for name, kind in op_functions().items()
        if kind not in ("unary", "binary")
        and name not in SUMMING
        and name not in NOT_SUMMING
        and kind != "internal"
    ]
    assert unknown == [], "classify each op as SUMMING (with a case) or NOT_SUMMING (with why)"
    assert set(SUMMING) <= set(op_functions())


def _eps(dtype: type[ax.DType]) -> float:
    return float(jnp.finfo(dtype.numpy).eps)


def _close(low: Any, ref: Any, dtype: type[ax.DType], ulps: float = 8.0) -> str | None:
    """``None`` if ``low`` (the dtype's result) matches the float32 ``ref`` within the
    dtype's precision (relative to the result's scale), else what differs."""
    got = np.asarray(low, np.float32)
    want = np.asarray(ref, np.float32)
    want = want.astype(dtype.numpy).astype(np.float32)  # the best the dtype can hold
    scale = float(np.max(np.abs(want))) or 1.0
    err = np.abs(got - want)
    if not np.all(np.isfinite(got)) or float(np.max(err)) > ulps * _eps(dtype) * scale:
        return f"got {got.ravel()[:4]}, float32 gives {want.ravel()[:4]}"
    return None


def _leaves(y: Any) -> list[Any]:
    return [np.asarray(a, np.float32) for a in jax.tree.leaves(y)]


def case_failures(name: str, case: Case, dtype: type[ax.DType]) -> list[str]:
    problems = []
    run = case.run  # eagerly, op by op: each op's result is rounded to the dtype (a CPU
    # compiler may keep a fused F16 chain in float32 and hide an overflow)
    x = ax.tensor(case.fits, *case.axes, dtype=dtype)
    want = run(ax.astype(x, ax.F32))
    got = run(x)
    for g, w in zip(_leaves(got), _leaves(want), strict=True):
        if (why := _close(g, w, dtype)) is not None:
            problems.append(f"{name} {dtype.__name__}: {why}")
    if case.overflows is not None:
        x = ax.tensor(case.overflows, *case.axes, dtype=dtype)
        big = float(jnp.finfo(dtype.numpy).max)
        for g, w in zip(_leaves(run(x)), _leaves(run(ax.astype(x, ax.F32))), strict=True):
            beyond = np.abs(w) > big
            if not beyond.any() and dtype is ax.F16:
                problems.append(f"{name}: the overflow case fits F16 (fix the test data)")
            if not np.all(np.isinf(g[beyond]) & (np.sign(g[beyond]) == np.sign(w[beyond]))):
                problems.append(
                    f"{name} {dtype.__name__}: beyond the dtype {g[beyond][:4]}, not inf"
                )
    return problems


@pytest.mark.parametrize("dtype", LOW, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", sorted(SUMMING))
def test_every_summing_op_fits_or_is_inf(name: str, dtype: type[ax.DType]) -> None:
    assert case_failures(name, SUMMING[name], dtype) == []


# ----------------------------------------------------------------------------- layers
def _mha() -> Any:
    return ax.nn.MultiheadAttention(C, 8, num_heads=2, query_pos=T, key=KEY)


def _gqa() -> Any:
    # no RoPE: identical tokens then give identical scores, as for _mha
    return ax.nn.GroupedQueryAttention(
        C, 8, num_heads=2, num_kv_heads=1, query_pos=T, rope_theta=None, key=KEY
    )


def _layer(make: Callable[[], Any]) -> Callable[[Any], Any]:
    """Apply the layer made by ``make``, cast to the input's dtype (its parameters rounded
    to it, so the float32 reference runs on the same values)."""

    def run(x: Any) -> Any:
        low = ax.nn.cast(make(), _CASE_DTYPE[0])
        return ax.nn.cast(low, x.dtype)(x)

    return run


_CASE_DTYPE: list[type[ax.DType]] = [ax.F16]  # the dtype under test: the layer is rounded to it

_SAME_TOKEN = np.broadcast_to(_alternating(3000.0, 8), (2, 3, 8)).copy()  # [B, T, C]

STATISTIC_LAYERS: dict[str, Case] = {
    "LayerNorm": Case(_layer(lambda: ax.nn.LayerNorm(C, 64)), _rows(_alternating(400.0))),
    "RMSNorm": Case(_layer(lambda: ax.nn.RMSNorm(C, 64)), _rows(np.full(64, 400.0))),
    # identical tokens: every score in a row is equal (~10^5, beyond F16), the output fits
    "MultiheadAttention": Case(_layer(_mha), _SAME_TOKEN, None, (B, T, C)),
    "GroupedQueryAttention": Case(_layer(_gqa), _SAME_TOKEN, None, (B, T, C)),
    "AvgPool": Case(_layer(lambda: ax.nn.AvgPool(C, 64)), _rows(np.full(64, 60000.0))),
    "AvgPool1D": Case(_layer(lambda: ax.nn.AvgPool1D(C, 64)), _rows(np.full(64, 60000.0))),
    "AvgPool2D": Case(
        _layer(lambda: ax.nn.AvgPool2D((S, C), 8)),
        np.full((2, 8, 8), 60000.0),
        None,
        (B, S, C),
    ),
    "GlobalAvgPool": Case(_layer(lambda: ax.nn.GlobalAvgPool(C)), _rows(np.full(64, 60000.0))),
}
NO_STATISTIC = {
    **dict.fromkeys(
        ("Affine", "Linear", "LoRA", "MLP", "Conv", "Conv1D", "Conv2D", "Conv3D"),
        "a contraction: its sums are the contract/conv op cases",
    ),
    "Embedding": "a gather",
    "Dropout": "elementwise",
    "SwiGLU": "contractions and elementwise gates",
    **dict.fromkeys(
        ("MaxPool", "MaxPool1D", "MaxPool2D", "GlobalMaxPool"), "picks one value per window"
    ),
    **dict.fromkeys(
        ("RNNCell", "GRUCell", "LSTMCell", "ChildSumTreeLSTMCell"),
        "contractions and elementwise gates",
    ),
    **dict.fromkeys(
        (
            "Remat",
            "Recurrent",
            "Bidirectional",
            "Stacked",
            "Lambda",
            "Sequential",
            "LayerStack",
            "Ensemble",
        ),
        "runs other layers, computes nothing itself",
    ),
}


def test_every_layer_is_classified() -> None:
    names = {spec.layer.__name__ for spec in declared_layers()}
    assert names - set(STATISTIC_LAYERS) - set(NO_STATISTIC) == set()
    assert set(STATISTIC_LAYERS) <= names


@pytest.mark.parametrize("dtype", LOW, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", sorted(STATISTIC_LAYERS))
def test_every_layer_statistic_stays_in_float32(name: str, dtype: type[ax.DType]) -> None:
    assert layer_failures(name, dtype) == []


def layer_failures(name: str, dtype: type[ax.DType]) -> list[str]:
    _CASE_DTYPE[0] = dtype
    return case_failures(name, STATISTIC_LAYERS[name], dtype)


# ----------------------------------------------------------------------------- losses, metrics
def losses_and_metrics() -> list[str]:
    """The public functions of ``ax.train`` that score predictions (first parameter
    ``logits`` or ``predictions``)."""
    found = []
    for name in dir(ax.train):
        fn = getattr(ax.train, name)
        if name.startswith("_") or not inspect.isfunction(fn):
            continue
        params = list(inspect.signature(fn).parameters)
        if params and params[0] in ("logits", "predictions"):
            found.append(name)
    return sorted(found)


def _mse(x: Any) -> Any:
    zeros = ax.astype(ax.zeros(tuple(x.sizes.values()), *x.axes), x.dtype)
    return ax.train.mean_squared_error(x, zeros, C)


LOSSES: dict[str, Case] = {
    # one difference of 300 among 64: its square (90 000) is beyond F16, the mean (1406) fits
    "mean_squared_error": Case(_mse, _rows(np.r_[300.0, np.zeros(63)]), _rows(np.full(64, 400.0))),
    "softmax_cross_entropy": SUMMING["softmax_cross_entropy"],
    "binary_cross_entropy": Case(
        lambda x: ax.train.binary_cross_entropy(x, ax.astype(ax.zeros((2, 64), B, C), x.dtype)),
        _rows(np.full(64, 60000.0)),
    ),
    "accuracy": Case(
        lambda x: ax.train.accuracy(x, ax.tensor([0, 63], B), C),
        _rows(np.r_[60000.0, np.zeros(63)]),
    ),
}


def test_every_loss_and_metric_has_a_case() -> None:
    assert losses_and_metrics() == sorted(LOSSES)


@pytest.mark.parametrize("dtype", LOW, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_every_loss_and_metric_fits_or_is_inf(name: str, dtype: type[ax.DType]) -> None:
    assert case_failures(name, LOSSES[name], dtype) == []


# ----------------------------------------------------------------------------- mutation
def test_layers_and_losses_fail_without_float32_statistics(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch ``widened`` off (statistics in the input's dtype): the norms, attention and the
    squared error are reported in F16."""
    monkeypatch.setattr(_elementwise, "accumulation_dtype", lambda d: np.dtype(d.numpy))
    failing = {n for n in STATISTIC_LAYERS if layer_failures(n, ax.F16)}
    failing |= {n for n in LOSSES if case_failures(n, LOSSES[n], ax.F16)}
    assert {"LayerNorm", "RMSNorm", "MultiheadAttention", "mean_squared_error"} <= failing


def test_ops_fail_without_float32_accumulation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch the ops' float32 accumulation off (``Op.accumulates``, core/_lower.py): the
    reductions whose partial results leave F16 are reported."""
    monkeypatch.setattr(_lower, "_widened", lambda op, values: None)
    failing = {n for n, c in SUMMING.items() if case_failures(n, c, ax.F16)}
    assert {"avg_pool", "softmax_cross_entropy"} <= failing


# ----------------------------------------------------------------------------- the examples
def test_layer_norm_and_rms_norm_in_f16_on_400_are_right() -> None:
    x = ax.tensor(np.tile([400.0, -400.0], 32), C, dtype=ax.F16)
    y = ax.nn.LayerNorm(C, 64, dtype=ax.F16)(x)
    assert y.dtype is ax.F16
    np.testing.assert_allclose(np.asarray(y.array, np.float32), np.tile([1.0, -1.0], 32), 1e-2)
    r = ax.nn.RMSNorm(C, 64, dtype=ax.F16)(ax.full(64, C, value=400.0, dtype=ax.F16))
    np.testing.assert_allclose(np.asarray(r.array, np.float32), np.ones(64), 1e-2)


def test_a_public_reduction_keeps_its_dtype_and_overflows_to_inf() -> None:
    x = ax.tensor(np.tile([400.0, -400.0], 32), C, dtype=ax.F16)
    v = ax.var(x, C)
    assert v.dtype is ax.F16 and np.isinf(np.asarray(v.array, np.float32))
    assert float(ax.var(ax.astype(x, ax.F32), C).array) == 160000.0
