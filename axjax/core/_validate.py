"""The one check of numeric arguments: sizes, counts, positions, strides, rates, tolerances.

Every public op, layer, loader, training and checkpoint function that takes an int or a
float *argument* (not tensor data) passes it through one of these helpers before using it,
so that a bad value is an error naming the function, the argument, the value and what is
allowed, never a silent truncation, a ``ZeroDivisionError`` or an ``MLIRError`` later::

    >>> positive_int("Conv2D", "stride", 0)
    Traceback (most recent call last):
    ValueError: Conv2D: stride must be a positive int (1, 2, ...), got 0

The rules (docs/errors.md, "Numeric arguments"):

- an int argument accepts ``int`` and numpy integer scalars (``np.int64(3)``); ``bool`` is
  rejected (``True`` is not a count), and so is every float, ``2.0`` included: a float
  where a count is meant is a computation gone wrong (``n / 2``), so it is a ``TypeError``
  asking for ``int(...)`` or ``//``, never a truncation;
- a float argument accepts ints, floats and numpy scalars; ``bool`` and NaN are rejected;
- a value of the right kind outside the allowed range (``0`` heads, ``-1`` epochs, a
  dropout rate of ``1.5``) is a ``ValueError``, and so is an int beyond 64 bits (``2**64``
  would reach XLA as an overflow);
- a dtype argument has a kind (:func:`dtype_of_kind`: a random normal is floating,
  ``randint`` integer), and a position a rank (:func:`position`).

Each helper returns the value as a plain Python ``int``/``float``, so that the callers
store and hash one kind of number.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import jax
import jax.core  # jax.core.Tracer, imported by name for type checkers
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

from ._calls import calling
from ._dtype import DType, Floating, Integer, dtype_marker

__all__ = [
    "check_int",
    "prng_key",
    "dtype_of_kind",
    "position",
    "check_float",
    "positive_int",
    "non_negative_int",
    "index_int",
    "int_in_range",
    "optional_positive_int",
    "positive_ints",
    "positive_sizes",
    "probability",
    "positive_float",
    "non_negative_float",
    "finite_float",
]


#: the range of every int argument: JAX and XLA index with 64-bit integers at most
INT64 = (-(2**63), 2**63 - 1)


def _shown(value: object) -> str:
    """The value as the message shows it: its repr, with the type when that is not obvious."""
    if isinstance(value, bool | np.bool_):
        return f"{value!r} (a bool)"
    if isinstance(value, float | np.floating):
        return f"{type(value).__name__} {value!r}"
    if isinstance(value, np.generic):
        return f"{value!r} ({type(value).__name__})"
    if isinstance(value, int | str | type(None)):
        return repr(value)
    if isinstance(value, jax.core.Tracer):
        return "a traced value"
    return f"a {type(value).__name__}"


def check_int(
    where: str,
    name: str,
    value: object,
    low: int | None,
    high: int | None,
    what: str,
    fix: str | None = None,
) -> int:
    """``value`` as an int in ``[low, high]`` (either bound may be open: ``None``).

    The one place every int rule is applied: the helpers below only name the range. A
    ``TypeError`` for anything that is not an int (a bool, a float, ``2.0`` included, a
    string, a traced value), a ``ValueError`` for an int outside the range. ``fix``
    replaces the advice the type error ends with.
    """
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        hint = fix
        if hint is None and isinstance(value, float | np.floating):
            hint = "a float where a count or position is meant: convert with int() or use //"
        elif hint is None and isinstance(value, bool | np.bool_):
            hint = "pass an int, not True/False"
        tail = f" ({hint})" if hint else ""
        raise TypeError(f"{where}: {name} must be {what}, got {_shown(value)}{tail}")
    n = int(value)
    if (low is not None and n < low) or (high is not None and n > high):
        raise ValueError(f"{where}: {name} must be {what}, got {n}")
    if not INT64[0] <= n <= INT64[1]:  # no size, count or position is that wide
        raise ValueError(
            f"{where}: {name} must be {what} that fits in 64 bits (at most 2**63 - 1 "
            f"in magnitude), got {n}"
        )
    return n


def check_float(
    where: str,
    name: str,
    value: object,
    low: float | None,
    high: float | None,
    what: str,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """``value`` as a float in the range (bounds ``None`` = unbounded; ``*_open`` excludes
    the bound). A ``TypeError`` for a bool or a non-number, a ``ValueError`` for NaN or a
    number outside the range."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: {name} must be {what}, got {_shown(value)}")
    x = float(value)
    bad = math.isnan(x)
    if low is not None:
        bad = bad or x < low or (low_open and x == low)
    if high is not None:
        bad = bad or x > high or (high_open and x == high)
    if bad:
        raise ValueError(f"{where}: {name} must be {what}, got {value!r}")
    return x


def positive_int(where: str, name: str, value: object) -> int:
    """A size or count that must be at least 1 (features, heads, a stride, a batch size)."""
    return check_int(where, name, value, 1, None, "a positive int (1, 2, ...)")


def non_negative_int(where: str, name: str, value: object) -> int:
    """A count or step number that may be 0 (an axis size, a step, a start position)."""
    return check_int(where, name, value, 0, None, "a non-negative int (0, 1, ...)")


def index_int(
    where: str, name: str, value: object, *, what: str = "", fix: str | None = None
) -> int:
    """A position, negative counting from the end (checked against the size by the op);
    ``what`` and ``fix`` replace the description and the advice of the message."""
    what = what or "an int (negative counts from the end)"
    return check_int(where, name, value, None, None, what, fix)


def int_in_range(where: str, name: str, value: object, low: int, high: int) -> int:
    """An int in ``[low, high]``."""
    return check_int(where, name, value, low, high, f"an int in [{low}, {high}]")


def optional_positive_int(where: str, name: str, value: object) -> int | None:
    """``None`` or a positive int (an optional limit such as ``max_steps``)."""
    if value is None:
        return None
    return check_int(where, name, value, 1, None, "None or a positive int (1, 2, ...)")


def positive_ints(where: str, name: str, value: object, n: int) -> tuple[int, ...]:
    """One positive int for all ``n`` axes, or a sequence of ``n`` of them (a window)."""
    what = f"a positive int or {n} positive ints"
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != n:
            raise ValueError(f"{where}: {name} must be {what}, got {len(value)} values {value!r}")
        return tuple(check_int(where, name, v, 1, None, what) for v in value)
    return (check_int(where, name, value, 1, None, what),) * n


def positive_sizes(
    where: str, name: str, sizes: Mapping[Any, Any], *, zero_ok: bool = False
) -> dict[Any, int]:
    """A mapping ``{axis: size}`` with every size a positive (or, ``zero_ok``, a
    non-negative) int; the message names the axis."""
    from ._axis import axis_name  # noqa: PLC0415  (axis names for the message only)

    if not isinstance(sizes, Mapping):
        raise TypeError(f"{where}: {name} must map axes to sizes, got {_shown(sizes)}")
    low, what = (0, "a non-negative int") if zero_ok else (1, "a positive int")
    return {
        a: check_int(where, f"{name}[{axis_name(a)}]", n, low, None, what) for a, n in sizes.items()
    }


def probability(where: str, name: str, value: object, *, one_ok: bool = False) -> float:
    """A rate in ``[0, 1)`` (``[0, 1]`` with ``one_ok``): a dropout rate."""
    what = "a probability in [0, 1]" if one_ok else "a probability in [0, 1)"
    return check_float(where, name, value, 0.0, 1.0, what, high_open=not one_ok)


def positive_float(where: str, name: str, value: object) -> float:
    """A finite number above 0 (an epsilon, a standard deviation, a timeout)."""
    return check_float(
        where, name, value, 0.0, math.inf, "a positive finite number", low_open=True, high_open=True
    )


def non_negative_float(where: str, name: str, value: object) -> float:
    """A finite number at least 0 (a tolerance)."""
    return check_float(
        where, name, value, 0.0, math.inf, "a non-negative finite number", high_open=True
    )


def finite_float(where: str, name: str, value: object) -> float:
    """Any finite number (a slope, a mean, a fill value)."""
    return check_float(
        where,
        name,
        value,
        -math.inf,
        math.inf,
        "a finite number",
        low_open=True,
        high_open=True,
    )


#: each kind of dtype: its class of markers and the words of the message
_KINDS: dict[str, tuple[type[DType] | tuple[type[DType], ...], str]] = {
    "floating": (Floating, "a floating dtype (ax.F32, ax.BF16, ax.F16, ax.F64)"),
    "integer": (Integer, "an integer dtype (ax.I32, ax.I8, ax.U8, ax.U32, ax.I64)"),
    "number": ((Floating, Integer), "a dtype of numbers (floating or integer, not ax.Bool)"),
}


def dtype_of_kind(
    where: str, name: str, dtype: DTypeLike, kind: Literal["floating", "integer", "number"]
) -> type[DType]:
    """``dtype`` (a marker, or a numpy/JAX dtype) if it is of ``kind``: a random normal or an
    initialiser makes no integers (JAX raises deep inside, or an orthogonal matrix rounds to
    zeros), ``randint`` no floats. The message names the public call running
    (core/_calls.py) before ``where``: ``Affine (initializer)``, not the initialiser alone."""
    cls, what = _KINDS[kind]
    try:
        marker = dtype_marker(dtype)
    except (TypeError, ValueError):
        marker = None
    if marker is not None and issubclass(marker, cls):
        return marker
    outer = calling()
    said = f"{outer} ({where})" if outer and outer != where else where
    shown = marker.__name__ if marker is not None else _shown(dtype)
    raise TypeError(f"{said}: {name} must be {what}, got {shown}")


def position(where: str, name: str, value: object, rank: int) -> int:
    """A position among ``rank`` places (``at=`` of a new axis in a result of ``rank`` axes,
    so ``0 .. rank``; negative counts from the end), as a non-negative int."""
    what = f"a position in [{-(rank + 1)}, {rank}] (a result of {rank} axes)"
    n = check_int(where, name, value, -(rank + 1), rank, what)
    return n % (rank + 1)


def prng_key(where: str, name: str, key: object) -> Any:
    """``key`` if it is a PRNG key (a typed key, or a legacy ``uint32[2]`` one); else a
    ``TypeError`` naming the argument (JAX's own says "unexpected PRNG key type")."""
    if isinstance(key, jax.Array):
        if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) and key.shape == ():
            return key
        if key.dtype == jnp.uint32 and key.shape == (2,):
            return key
    got = (
        f"an array of {getattr(key, 'dtype', None)} and shape {getattr(key, 'shape', None)}"
        if hasattr(key, "dtype")
        else repr(key)
        if key is None
        else f"an object of type {type(key).__name__}"
    )
    raise TypeError(f"{where}: {name} must be a PRNG key (jax.random.key(0)), got {got}")
