"""One rule for values that do not fit a dtype, at every place host values meet one.

Generated over every dtype marker and every boundary where axjax converts a Python or
numpy value to a dtype (``ax.tensor``, ``ax.full``, a compiled graph's ``Input``, a number
mixed with a tensor, a concrete ``jax.Array`` given a new dtype): a value the dtype cannot
hold (an integer out of range, a non-integral float for an integer dtype, a finite float
that would overflow to infinity, a bool that is not 0/1) raises an error naming the value
and the dtype; a value it can hold arrives unchanged (up to a float's rounding).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, final

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from axjax.core import _dtype, _op


@final
class A(ax.Axis): ...


@final
class B(ax.Axis): ...


MARKERS = (ax.U8, ax.U32, ax.I8, ax.I32, ax.I64, ax.F16, ax.BF16, ax.F32, ax.F64, ax.Bool)


def out_of_range(d: type[ax.DType]) -> list[Any]:
    """Values ``d`` cannot hold (none for F64: no finite float64 overflows it)."""
    kind = d.numpy.kind
    if kind in "iu":
        info = np.iinfo(d.numpy)
        return [int(info.max) + 1, int(info.min) - 1, 2.5]
    if kind == "b":
        return [2, -1, 0.5]
    top = float(jnp.finfo(d.numpy).max)
    return [] if d is ax.F64 else [min(top * 10, 1e300), -min(top * 10, 1e300)]


def in_range(d: type[ax.DType]) -> list[Any]:
    """Values ``d`` holds: its extremes, and a float to round."""
    kind = d.numpy.kind
    if kind in "iu":
        info = np.iinfo(d.numpy)
        return [int(info.max), int(info.min), 3.0]
    if kind == "b":
        return [True, False, 0, 1]
    return [float(jnp.finfo(d.numpy).max), -1.5, 0.1, float("nan"), float("inf")]


def _compiled(d: type[ax.DType]) -> Callable[[Any], Any]:
    x = ax.Input(d, A)
    return ax.compile(ax.rename(x, A, B))


#: Each boundary: a function of (dtype, value) giving the converted value's array.
BOUNDARIES: dict[str, Callable[[type[ax.DType], Any], Any]] = {
    "tensor(scalar)": lambda d, v: ax.tensor(v, dtype=d).array,
    "tensor(list)": lambda d, v: ax.tensor([v], A, dtype=d).array,
    "tensor(numpy)": lambda d, v: ax.tensor(np.array([v]), A, dtype=d).array,
    "tensor(jax.Array)": lambda d, v: ax.tensor(_device(v), A, dtype=d).array,
    "full": lambda d, v: ax.full(1, A, value=v, dtype=d).array,
    "compiled Input(list)": lambda d, v: _compiled(d)([v]).array,
    "compiled Input(numpy)": lambda d, v: _compiled(d)(np.array([v])).array,
    "number operand": lambda d, v: (
        ax.where(ax.tensor([False], A), ax.zeros(1, A, dtype=d), v).array
    ),
}


def _device(v: Any) -> jax.Array:
    """``v`` as a device array of the widest kind that holds it exactly."""
    if isinstance(v, bool):
        return jnp.array([v])
    if isinstance(v, int):
        return jnp.array([v], jnp.int64 if jax.config.jax_enable_x64 else jnp.int32)
    return jnp.array([v], jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)


@contextlib.contextmanager
def x64_for(d: type[ax.DType]) -> Iterator[None]:
    """64-bit markers need ``jax_enable_x64``; the others run as users run them."""
    if d in (ax.I64, ax.F64):
        with jax.enable_x64(True):
            yield
    else:
        yield


def _unrepresentable_on_device(d: type[ax.DType], v: Any) -> bool:
    """Whether ``v`` cannot even be put on the device as the test's source array (an int
    beyond int64, or beyond int32 without x64)."""
    if isinstance(v, float):  # beyond float32 without x64: inf before axjax sees it
        return not jax.config.jax_enable_x64 and abs(v) > float(jnp.finfo(jnp.float32).max)
    if not isinstance(v, int) or isinstance(v, bool):
        return False
    bits = 63 if jax.config.jax_enable_x64 else 31
    return not -(2**bits) <= v < 2**bits


def stricter(boundary: str, d: type[ax.DType], v: Any) -> bool:
    """Values refused by kind before their value is looked at (docs/tensors.md): a
    compiled graph's integer Input takes no float array, its Bool Input no numbers, and a
    Bool tensor mixes with True/False only."""
    if boundary.startswith("compiled Input"):
        if d.numpy.kind in "iu" and (isinstance(v, float) or not -(2**63) <= v < 2**64):
            return True  # a float array, or Python ints numpy keeps as objects
        return d is ax.Bool and not isinstance(v, bool)
    return boundary == "number operand" and d is ax.Bool and not isinstance(v, bool)


def check(boundary: str, d: type[ax.DType], v: Any, fits: bool) -> str | None:
    """The problem with converting ``v`` to ``d`` at ``boundary``, or ``None``."""
    convert = BOUNDARIES[boundary]
    by_kind = stricter(boundary, d, v)
    fits = fits and not by_kind
    with x64_for(d):
        if boundary == "tensor(jax.Array)" and _unrepresentable_on_device(d, v):
            return None
        try:
            out = np.asarray(convert(d, v))
        except (ValueError, TypeError) as e:  # TypeError: AxisError, the operand's message
            if fits:
                return f"{boundary} {d.__name__} {v!r}: raised {type(e).__name__}: {e}"
            shown = {repr(v), str(v), repr(float(v))} if not isinstance(v, bool) else {str(v)}
            if by_kind:
                shown = {"cannot become", "cannot mix"}
            if d.__name__ not in str(e) or not any(s in str(e) for s in shown):
                return f"{boundary} {d.__name__} {v!r}: the message names neither: {e}"
            return None
        except Exception as e:
            return f"{boundary} {d.__name__} {v!r}: raw {type(e).__name__}: {e}"
    if not fits:
        return f"{boundary} {d.__name__} {v!r}: accepted silently as {out.ravel()[0]!r}"
    want = np.asarray(v).astype(d.numpy)
    if not np.array_equal(out.ravel()[:1], want.ravel(), equal_nan=True):
        return f"{boundary} {d.__name__} {v!r}: became {out.ravel()[0]!r}, not {want!r}"
    return None


def run_all() -> tuple[list[str], int]:
    problems: list[str] = []
    cases = 0
    for boundary in BOUNDARIES:
        for d in MARKERS:
            for v, fits in [(v, False) for v in out_of_range(d)] + [(v, True) for v in in_range(d)]:
                if boundary == "number operand" and fits and isinstance(v, float) and v != v:
                    continue  # where(False, t, nan) is t's value, not the number
                cases += 1
                problem = check(boundary, d, v, fits)
                if problem:
                    problems.append(problem)
    return problems, cases


def test_every_boundary_every_dtype() -> None:
    problems, cases = run_all()
    print(
        f"\nvalues meeting dtypes: {len(BOUNDARIES)} boundaries x {len(MARKERS)} markers, "
        f"{cases} cases"
    )
    assert not problems, "\n".join(problems)


def test_the_check_fails_without_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation: with the rule accepting every value, the generated check must fail."""
    monkeypatch.setattr(_op, "_OPS", {})  # ops built unchecked here must not be reused
    monkeypatch.setattr(_dtype, "misfits", lambda arr, out: np.zeros(arr.shape, bool))
    problems, _ = run_all()
    silent = [p for p in problems if "accepted silently" in p]
    assert len(silent) >= 40, problems


# ----------------------------------------------------------------------------- the quoted examples
def test_full_u8_300() -> None:
    with pytest.raises(
        ValueError,
        match=r"^full: value 300 does not fit U8 \(integers in \[0, 255\]\); clip or rescale",
    ):
        ax.full(3, A, value=300, dtype=ax.U8)


def test_compiled_u8_input_given_300() -> None:
    f = _compiled(ax.U8)
    with pytest.raises(
        ValueError,
        match=r"^Cannot call the compiled graph: input input0 is Tensor\[U8, A=\?\]: value 300 "
        r"\(at index \(1,\)\) does not fit U8",
    ):
        f([1, 300])


def test_f16_given_1e6() -> None:
    with pytest.raises(
        ValueError,
        match=r"value 1000000.0 \(at index \(0,\)\) does not fit F16 \(magnitudes up to 65504; "
        r"a larger finite value would become inf\)",
    ):
        _compiled(ax.F16)([1e6])
    with pytest.raises(ValueError, match=r"^tensor: value 1000000.0 does not fit F16"):
        ax.tensor(1e6, dtype=ax.F16)


def test_int64_data_without_x64_names_x64() -> None:
    assert not jax.config.jax_enable_x64
    with pytest.raises(
        ValueError,
        match=r"^tensor: value 1099511627776 \(at index \(0,\)\) does not fit I32 .*"
        r"jax_enable_x64 is off: enable it",
    ):
        ax.tensor(np.array([2**40]), A)
    assert ax.tensor(np.array([2**31 - 1]), A).dtype is ax.I32  # fits: narrowed as before
    with pytest.raises(ValueError, match=r"^tensor: value 1e\+39 .*does not fit F32"):
        ax.tensor(np.array([1e39]), A)


def test_number_operand_that_does_not_fit() -> None:
    with pytest.raises(ax.AxisError, match=r"the number 1000000.0 does not fit in F16"):
        ax.zeros(2, A, dtype=ax.F16) + 1e6
    assert (ax.zeros(2, A, dtype=ax.F16) + float("inf")).array[0] == np.inf  # inf is inf
