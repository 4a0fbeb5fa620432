"""Sums in F16 and BF16 accumulate in float32, forward and backward, as ``jnp.sum`` does.

The mechanism is ``Op.accumulates``: an op that sets it (every reduction, softmax and
log-softmax, the average pool, the softmax cross-entropy) runs its forward and backward on
float32 copies of F16/BF16 operands and casts the results back. Matrix products,
convolutions and fused attention are summed in float32 by XLA itself (their inputs stay
narrow, so the accelerators' fast paths are kept); the numeric check covers them too.

- ``test_sums_match_float32``: every op that sums (from the registry), in F16 and BF16,
  over an axis of 70 000 (more than F16's largest value, 65 504), against the same op on
  the same values in float32: value and gradient.
- ``test_no_op_sums_in_low_precision``: every case of the op table (every declared op)
  traced in F16 and BF16: no summing primitive of the forward or the backward takes
  F16/BF16 values, other than those XLA accumulates in float32.
- the mutation test turns the mechanism off and shows both fail.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, final

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jex_core

import axjax as ax
from axjax.core import _lower
from axjax.core._internal import declared_ops
from axjax.nn._fused_attention import FusedAttention
from tests.ops import helpers
from tests.ops.op_cases import CASES, LOSSES

#: `make test-quick` leaves these out (sums of 70 000 values, compiled fully)
pytestmark = pytest.mark.slow

N = 70_000  # more than 65 504, the largest F16: 1 / N in F16 arithmetic is 0
LOW = (ax.F16, ax.BF16)


@final
class Big(ax.Axis): ...


@final
class Row(ax.Axis): ...


@final
class One(ax.Axis): ...


@final
class Dim(ax.Axis): ...


@dataclass(frozen=True)
class SumCase:
    """An op that sums, applied over ``Big``: ``fn`` of operands with these axes (sizes:
    Big = N, Row = 2, Dim = 1, One = 1; ``"label"`` operands are I32 indices along Big)."""

    op: type[ax.Op[Any]]
    name: str
    fn: Callable[..., ax.Tensor[Any, *tuple[Any, ...]]]
    operands: tuple[tuple[type[ax.Axis], ...] | str, ...] = ((Row, Big),)


SIZES = {Big: N, Row: 2, Dim: 1, One: 1}

# every op that sums, with its function: the ops that set `accumulates` (checked against the
# registry below) and those XLA accumulates itself (NATIVE)
CASES_BY_NAME = {
    c.name: c
    for c in [
        SumCase(ax.ops._reduce.Sum, "sum", lambda x: ax.sum(x, Big)),
        SumCase(ax.ops._reduce.Mean, "mean", lambda x: ax.mean(x, Big)),
        SumCase(ax.ops._reduce.Max, "max", lambda x: ax.max(x, Big)),
        SumCase(ax.ops._reduce.Min, "min", lambda x: ax.min(x, Big)),
        SumCase(ax.ops._reduce.LogSumExp, "logsumexp", lambda x: ax.logsumexp(x, Big)),
        SumCase(ax.ops._reduce.Var, "var", lambda x: ax.var(x, Big)),
        SumCase(ax.ops._reduce.Softmax, "softmax", lambda x: ax.softmax(x, Big)),
        SumCase(ax.ops._reduce.LogSoftmax, "log_softmax", lambda x: ax.log_softmax(x, Big)),
        SumCase(ax.ops._pool.Pool, "avg_pool", lambda x: ax.avg_pool(x, Big, window=N)),
        SumCase(ax.ops._pool.Pool, "max_pool", lambda x: ax.max_pool(x, Big, window=N)),
        SumCase(
            ax.train.SoftmaxCrossEntropy,
            "softmax_cross_entropy",
            lambda x, i: ax.train.softmax_cross_entropy(x, i, Big),
            ((Row, Big), "label"),
        ),
        SumCase(
            ax.ops._contract.Contract,
            "contract",
            lambda x, w: ax.contract(x, w),
            ((Row, Big), (Big,)),
        ),
        SumCase(
            ax.ops._contract.MatMul,
            "matmul",
            lambda x, w: ax.matmul(x, w),
            ((Row, Big), (Big, One)),
        ),
        SumCase(
            ax.ops._conv.Conv,
            "conv",
            lambda x, w: ax.conv(x, w, One),
            ((Row, One, Big), (Dim, Big, One)),
        ),
        SumCase(
            FusedAttention,
            "FusedAttention",
            lambda q, k, v: FusedAttention(Dim, Big)(q, k, v),
            ((One, Dim), (Big, Dim), (Big, Dim)),  # one query: F16 attention is slow on CPU
        ),
    ]
}

#: ops whose sums XLA runs in float32 on CPU, GPU and TPU (dot_general, convolutions, the
#: attention kernels): upcasting their operands would leave the fast F16/BF16 paths
NATIVE = {ax.ops._contract.Contract, ax.ops._contract.MatMul, ax.ops._conv.Conv, FusedAttention}
#: primitives that sum, and those of them that XLA accumulates in float32 itself
SUMMING = {"reduce_sum", "reduce_window_sum", "cumsum", "reduce_window", "reduce_and"}
NATIVE_PRIMITIVES = {"dot_general", "conv_general_dilated"}


def _accumulating_ops() -> set[type[ax.Op[Any]]]:
    """The declared ops that set ``accumulates`` (a property, as on Pool, counts)."""
    return {s.op for s in declared_ops() if s.op.accumulates is not False}


# ----------------------------------------------------------------------------- numeric
def _operands(case: SumCase, dtype: type[ax.DType]) -> tuple[list[Any], list[Any]]:
    """The operands in ``dtype`` and the same values in float32."""
    rng = np.random.default_rng(0)
    low, wide = [], []
    for spec in case.operands:
        if spec == "label":
            labels = ax.tensor(jnp.asarray(rng.integers(0, N, size=2), jnp.int32), Row)
            low.append(labels)
            wide.append(labels)
            continue
        assert not isinstance(spec, str)
        values = rng.uniform(0.0, 0.5, size=tuple(SIZES[a] for a in spec))
        a = jnp.asarray(values, dtype.numpy)  # sums stay below F16's largest value
        low.append(ax.tensor(a, *spec))
        wide.append(ax.tensor(a.astype(jnp.float32), *spec))
    return low, wide


def _value_and_grads(case: SumCase, xs: list[Any], cot: Any) -> tuple[Any, list[Any]]:
    floating = [i for i, x in enumerate(xs) if x.dtype is not ax.I32]

    def loss(*arrays: Any) -> Any:
        full = list(xs)
        for i, a in zip(floating, arrays, strict=True):
            full[i] = ax.tensor(a, *xs[i].axes)
        y = case.fn(*full)
        return jnp.sum(y.array.astype(jnp.float32) * cot), y.array

    grads, y = jax.grad(loss, range(len(floating)), has_aux=True)(*[xs[i].array for i in floating])
    return y, list(grads)


def _far(got: Any, want: Any, dtype: type[ax.DType]) -> str:
    """Why ``got`` (in ``dtype``) is not ``want`` (float32) up to a few roundings, or ''."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if not np.isfinite(got).all():
        return f"{int((~np.isfinite(got)).sum())} non-finite values"
    info = jnp.finfo(dtype.numpy)  # a few roundings, of normal or of subnormal numbers
    scale = float(np.abs(want).max()) or 1.0
    err = float(np.abs(got - want).max())
    tol = 8 * float(info.eps) * scale + 4 * float(info.smallest_subnormal)
    return "" if err <= tol else f"off by {err:.3g} (largest value {scale:.3g})"


def numeric_problems(case: SumCase, dtype: type[ax.DType], grads: bool = True) -> list[str]:
    """How ``case`` in ``dtype`` differs from it in float32 (values, then gradients unless
    ``grads`` is false)."""
    low, wide = _operands(case, dtype)
    shape = jax.eval_shape(lambda *xs: case.fn(*xs).array, *low).shape
    cot = jnp.asarray(np.random.default_rng(1).normal(size=shape), dtype.numpy)
    cot = cot.astype(jnp.float32)  # the cotangent the low-precision op sees, exactly
    if not grads:
        why = _far(case.fn(*low).array, case.fn(*wide).array, dtype)
        return [f"forward {why}"] if why else []
    y, g_low = _value_and_grads(case, low, cot)
    y_ref, g_ref = _value_and_grads(case, wide, cot)
    problems = [f"forward {why}" for why in [_far(y, y_ref, dtype)] if why]
    for i, (g, h) in enumerate(zip(g_low, g_ref, strict=True)):
        if why := _far(g, h, dtype):
            problems.append(f"gradient {i} {why}")
    return problems


@pytest.mark.optimized  # 70 000 values a sum: unoptimised, the average pool takes 100 s
@pytest.mark.parametrize("dtype", LOW, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", sorted(CASES_BY_NAME))
def test_sums_match_float32(name: str, dtype: type[ax.DType]) -> None:
    assert numeric_problems(CASES_BY_NAME[name], dtype) == []


def test_every_op_that_sums_has_a_case() -> None:
    """Every declared op that accumulates (and every one XLA accumulates) has a numeric case
    for each of its functions; the table names no op that does neither."""
    summing = _accumulating_ops() | NATIVE
    covered = {c.op for c in CASES_BY_NAME.values()}
    assert summing == covered, (summing - covered, covered - summing)
    for spec in declared_ops():
        if spec.op in summing:
            missing = [f for f in spec.functions if f not in CASES_BY_NAME]
            assert not missing, f"{spec.op.__name__}: add a SumCase for {missing}"


# ----------------------------------------------------------------------------- structural
def _equations(jaxpr: Any) -> Iterator[Any]:
    for e in jaxpr.eqns:
        yield e
        for p in e.params.values():
            for sub in p if isinstance(p, tuple | list) else (p,):
                if isinstance(sub, jex_core.ClosedJaxpr):
                    yield from _equations(sub.jaxpr)
                elif isinstance(sub, jex_core.Jaxpr):
                    yield from _equations(sub)


def narrow_sums(case: helpers.OpCase, dtype: type[ax.DType]) -> list[str]:
    """The summing primitives that take ``dtype`` values in ``case``'s forward and backward
    (sizes 3; traced only: nothing runs)."""
    rng = np.random.default_rng(0)
    sizes = {a: 3 for a in helpers.ALL_AXES} | case.sizes
    spaced = iter(np.linspace(-1.5, 1.5, 997))
    arrays = []
    for arg in case.args:
        v = helpers._values(rng, arg, tuple(sizes[a] for a in arg.axes), sizes, spaced)
        arrays.append(jnp.asarray(v, dtype.numpy) if arg.floating else jnp.asarray(v))
    nums = [i for i, arg in enumerate(case.args) if arg.floating]

    def loss(*floats: Any) -> Any:
        full = list(arrays)
        for i, a in zip(nums, floats, strict=True):
            full[i] = a
        y = case.fn(*[ax.tensor(a, *arg.axes) for a, arg in zip(full, case.args, strict=True)])
        return jnp.sum(y.array.astype(jnp.float32))

    fn = jax.value_and_grad(loss, range(len(nums))) if nums else loss
    found = []
    for e in _equations(jax.make_jaxpr(fn)(*[arrays[i] for i in nums]).jaxpr):
        name = e.primitive.name
        if name not in SUMMING or name == "reduce_window" and "max" in str(e.params):
            continue
        if any(getattr(v.aval, "dtype", None) == dtype.numpy for v in e.invars):
            found.append(name)
    return found


@pytest.mark.parametrize("dtype", LOW, ids=lambda d: d.__name__)
def test_no_op_sums_in_low_precision(dtype: type[ax.DType]) -> None:
    narrow = {c.name: s for c in CASES + LOSSES if (s := narrow_sums(c, dtype))}
    assert narrow == {}, f"set `accumulates = True` on these ops: {narrow}"


def test_ops_that_xla_sums_use_its_float32_primitives_only() -> None:
    """The NATIVE ops sum by dot_general / conv_general_dilated, nothing else."""
    for case in CASES:
        if case.op in {op.__name__ for op in NATIVE}:
            assert narrow_sums(case, ax.F16) == [], case.name


# ----------------------------------------------------------------------------- mutation
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_without_the_mechanism_both_checks_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Operands no longer widened: mean's F16 gradient (1 / 70 000) and the average pool
    come out wrong (its forward only: the gradient of a 70 000 window summed in F16 takes
    minutes on a CPU), and the average pool's window sums are found in F16."""
    monkeypatch.setattr(_lower, "accumulation_dtype", lambda d: np.dtype(d))
    (mean,) = numeric_problems(CASES_BY_NAME["mean"], ax.F16)
    off, largest = re.fullmatch(r"gradient 0 off by (\S+) \(largest value (\S+)\)", mean).groups()
    assert off == largest  # all of it: 1 / N was 0
    for dtype in LOW:
        assert numeric_problems(CASES_BY_NAME["avg_pool"], dtype, grads=False), dtype
    pool = next(c for c in CASES if c.name == "Pool-avg-2d")
    assert set(narrow_sums(pool, ax.F16)) == {"reduce_window_sum"}


# ----------------------------------------------------------------------------- the issue
def test_f16_mean_over_65536_elements_has_its_gradient() -> None:
    x = ax.tensor(jnp.full((65536,), 0.5, jnp.float16), Big)
    g = ax.grad(lambda t: ax.mean(t, Big))(x)
    assert g.dtype is ax.F16 and float(g.array[0]) == 1 / 65536


def test_avg_pool_over_a_large_window_is_the_mean() -> None:
    x = ax.tensor(jnp.full((2, N), 0.25, jnp.bfloat16), Row, Big)
    assert ax.avg_pool(x, Big, window=N).array.tolist() == [[0.25], [0.25]]
