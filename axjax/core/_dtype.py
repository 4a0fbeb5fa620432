"""Dtype markers: the first type parameter of ``Tensor[D, *Axes]``.

Each marker is a class naming one JAX dtype. ``Tensor[F32, Batch]`` holds float32 data;
``t.dtype`` returns the marker class and ``t.array.dtype`` the numpy dtype.
"""

from __future__ import annotations

from typing import Any, ClassVar, final

import jax
import jax.core  # jax.core.Tracer, imported by name for type checkers
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike  # a marker class is one too: a type

from ._jax_typed import finfo_max

__all__ = [
    "DType",
    "FLOATING",
    "Floating",
    "Integer",
    "F16",
    "BF16",
    "F32",
    "F64",
    "I8",
    "I32",
    "I64",
    "U8",
    "U32",
    "Bool",
    "accumulation_dtype",
    "dtype_marker",
    "is_floating",
    "is_inexact",
    "jax_dtype",
    "fit_dtype",
    "narrowed_error",
    "to_numpy_dtype",
]


class DType:
    """Base class of dtype markers; never instantiated."""

    numpy: ClassVar[np.dtype[Any]]

    def __new__(cls, *args: object, **kwargs: object) -> DType:
        raise TypeError(f"dtype marker {cls.__name__} is a type, not a value")


class Floating(DType):
    """Base class of the floating-point markers (``F16``, ``BF16``, ``F32``, ``F64``): the
    bound of a dtype variable for code that needs floats, so that checkers reject integer
    and Bool tensors.

    Example:
        >>> DF = TypeVar("DF", bound=ax.Floating)
        >>> def normalize(x: Tensor[DF, *B, Feature]) -> Tensor[DF, *B, Feature]: ...
    """


class Integer(DType):
    """Base class of the integer markers (``I8``, ``I32``, ``I64``, ``U8``, ``U32``)."""


@final
class F16(Floating):
    """float16."""

    numpy: ClassVar[np.dtype[Any]] = np.dtype(jnp.float16)


@final
class BF16(Floating):
    """bfloat16."""

    numpy: ClassVar[np.dtype[Any]] = np.dtype(jnp.bfloat16)


@final
class F32(Floating):
    """float32."""

    numpy: ClassVar[np.dtype[Any]] = np.dtype(jnp.float32)


@final
class F64(Floating):
    """float64 (needs ``jax.config.update("jax_enable_x64", True)``)."""

    numpy: ClassVar[np.dtype[Any]] = np.dtype(jnp.float64)


@final
class I8(Integer):
    """int8."""

    numpy: ClassVar[np.dtype[Any]] = np.dtype(jnp.int8)


@final
class I32(Integer):
    """int32."""

    numpy: ClassVar[np.dtype[Any]] = np.dtype(jnp.int32)


@final
class I64(Integer):
    """int64 (needs ``jax_enable_x64``)."""

    numpy: ClassVar[np.dtype[Any]] = np.dtype(jnp.int64)


@final
class U8(Integer):
    """uint8."""

    numpy: ClassVar[np.dtype[Any]] = np.dtype(jnp.uint8)


@final
class U32(Integer):
    """uint32."""

    numpy: ClassVar[np.dtype[Any]] = np.dtype(jnp.uint32)


@final
class Bool(DType):
    """bool."""

    numpy: ClassVar[np.dtype[Any]] = np.dtype(jnp.bool_)


_MARKERS: dict[np.dtype[Any], type[DType]] = {
    m.numpy: m for m in (F16, BF16, F32, F64, I8, I32, I64, U8, U32, Bool)
}


def dtype_marker(dtype: DTypeLike) -> type[DType]:
    """The marker class of a numpy/JAX dtype (``float32`` -> ``F32``)."""
    if isinstance(dtype, type) and issubclass(dtype, DType):
        return dtype
    try:
        return _MARKERS[np.dtype(dtype)]
    except (KeyError, TypeError):
        known = ", ".join(m.__name__ for m in _MARKERS.values())
        raise TypeError(f"dtype {dtype!r} has no axjax marker (known: {known})") from None


def to_numpy_dtype(dtype: DTypeLike) -> np.dtype[Any]:
    """The numpy dtype of a marker class or anything ``np.dtype`` accepts."""
    if isinstance(dtype, type) and issubclass(dtype, DType):
        return dtype.numpy
    out: np.dtype[Any] = np.dtype(dtype)
    return out


def narrowed_error(where: str, asked: DTypeLike, made: DTypeLike) -> TypeError:
    """The error for a 64-bit dtype JAX narrows to 32 bits (``jax_enable_x64`` is off)."""
    return TypeError(
        f"{where}: asked for {dtype_marker(asked).__name__} but JAX made "
        f"{dtype_marker(made).__name__} (enable jax_enable_x64 for 64-bit types: "
        'jax.config.update("jax_enable_x64", True), or `with jax.enable_x64(True):`)'
    )


def jax_dtype(dtype: DTypeLike, where: str) -> np.dtype[Any]:
    """The numpy dtype of a marker that JAX will really make: ``F64``/``I64`` without
    ``jax_enable_x64`` raise (JAX would silently make them 32-bit)."""
    want = to_numpy_dtype(dtype)
    made = jax.dtypes.canonicalize_dtype(want)
    if made != want:
        raise narrowed_error(where, want, made)
    return want


#: The floating-point markers, narrowest first. "Floating" means one of these (or one of
#: JAX's float8 types, which have no marker) everywhere in axjax: :func:`is_floating` is
#: the only test of it, and the dtype tests are generated over this table.
FLOATING: tuple[type[Floating], ...] = (F16, BF16, F32, F64)


def _numpy_or_none(dtype: object) -> np.dtype[Any] | None:
    """The numpy dtype of a marker, a dtype-like (``jnp.bfloat16``, ``"float16"``) or of
    anything with a ``.dtype`` (an array, a Tensor, a numpy scalar); ``None`` if none."""
    if isinstance(dtype, type) and issubclass(dtype, DType):
        return dtype.numpy
    like: DTypeLike | None
    if isinstance(dtype, type | np.dtype | str):
        like = dtype
    else:
        like = getattr(dtype, "dtype", None)
        if like is None:
            return None
        if isinstance(like, type) and issubclass(like, DType):
            return like.numpy
    try:
        out: np.dtype[Any] = np.dtype(like)
    except TypeError:
        return None
    return out


_FLOATING_SEEN: dict[np.dtype[Any], bool] = {}


def _floating_rule(dtype: np.dtype[Any]) -> bool:
    # JAX's hierarchy, not numpy's: bfloat16 (and the float8 types) are not numpy floating
    # subtypes (np.issubdtype(jnp.bfloat16, np.floating) is False); memoised (eager dispatch)
    known = _FLOATING_SEEN.get(dtype)
    if known is None:
        known = _FLOATING_SEEN[dtype] = bool(jnp.issubdtype(dtype, jnp.floating))
    return known


def is_floating(dtype: object) -> bool:
    """Whether ``dtype`` is floating-point: ``F16``, ``BF16``, ``F32`` or ``F64`` (or a
    float8 type), alike.

    ``dtype`` is a marker, a numpy/JAX dtype or scalar type (``jnp.bfloat16``,
    ``np.float16``, ``"float32"``) or anything with a ``.dtype`` (an array, a Tensor);
    anything else is not floating. The one test of "floating" in axjax: never test with
    numpy's hierarchy, in which bfloat16 is not floating.

    Example:
        >>> is_floating(ax.BF16), is_floating(jnp.bfloat16), is_floating(ax.I32)
        (True, True, False)
    """
    d = _numpy_or_none(dtype)
    return d is not None and _floating_rule(d)


def is_inexact(dtype: object) -> bool:
    """:func:`is_floating`, or complex: values that can be NaN or infinite and that carry
    gradients (takes what :func:`is_floating` takes)."""
    d = _numpy_or_none(dtype)
    return d is not None and (_floating_rule(d) or d.kind == "c")


def accumulation_dtype(dtype: DTypeLike) -> np.dtype[Any]:
    """The dtype that sums over ``dtype`` values accumulate in: float32 for floating
    dtypes narrower than 32 bits (``F16``, ``BF16``), as ``jnp.sum`` and ``jnp.mean`` do;
    the dtype itself otherwise.

    Example:
        >>> accumulation_dtype(ax.BF16), accumulation_dtype(ax.F64)
        (dtype('float32'), dtype('float64'))
    """
    wide = _WIDE.get(dtype)
    if wide is None:
        d = to_numpy_dtype(dtype)
        wide = np.dtype(np.float32) if is_floating(d) and d.itemsize < 4 else d
        if isinstance(dtype, np.dtype):
            _WIDE[dtype] = wide
    return wide


_WIDE: dict[object, np.dtype[Any]] = {}  # keyed by numpy dtypes only


def _first_bad(bad: np.ndarray[Any, Any], arr: np.ndarray[Any, Any]) -> str:
    """``value 300 (at index (1,))``: the first entry ``bad`` marks, for a message."""
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    value = arr[at].item() if arr.ndim else arr.item()
    count = int(bad.sum())
    more = f"; {count} of {arr.size} values do not fit" if count > 1 else ""
    return f"value {value!r}{f' (at index {at})' if at else ''}{more}"


def _range(dtype: np.dtype[Any]) -> str:
    if dtype.kind == "b":
        return "False/True (0 or 1)"
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return f"integers in [{info.min}, {info.max}]"
    top = finfo_max(dtype)
    return f"magnitudes up to {top:.6g}; a larger finite value would become inf"


def misfits(arr: np.ndarray[Any, Any], out: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Where ``out`` (``arr`` converted) does not hold ``arr``'s value: the rule of
    :func:`fit_dtype` (an integer in range, a float that stays finite, a bool 0/1)."""
    want = out.dtype
    bad: np.ndarray[Any, Any]
    if want.kind == "b":
        bad = (arr != 0) & (arr != 1)
    elif want.kind in "iu" and arr.dtype.kind in "biu":
        info = np.iinfo(want)
        bad = (arr < info.min) | (arr > info.max)
    elif want.kind in "iu":  # float -> int: the value must come back unchanged
        bad = out.astype(arr.dtype) != arr
    else:  # a finite value must stay finite
        bad = np.isinf(out) & np.isfinite(arr.astype(np.float64))
    return bad


def _check_big_ints(where: str, arr: np.ndarray[Any, Any], dtype: DTypeLike | None) -> None:
    """Raise for a Python int no 64-bit integer holds (``-2**63 - 1``, ``2**64``) when the
    dtype is an integer one (or not given); other objects are the caller's to report."""
    want = np.dtype(np.int64) if dtype is None else to_numpy_dtype(dtype)
    if want.kind not in "iu":
        return
    info = np.iinfo(want)
    flat = list(arr.ravel())
    for i, x in enumerate(flat):
        if isinstance(x, int) and not isinstance(x, bool) and not info.min <= x <= info.max:
            at = f" (at index {i})" if arr.ndim else ""
            name = dtype_marker(want).__name__ if dtype is not None else "any integer dtype"
            raise ValueError(
                f"{where}: value {x!r}{at} does not fit {name} ({_range(want)}); clip or "
                "rescale the values first"
            )


def fit_dtype(where: str, data: Any, dtype: DTypeLike | None = None) -> Any:
    """Host data (a Python number, nested lists, a numpy array) converted to ``dtype``, or
    to the dtype JAX makes of it when ``dtype`` is ``None`` (int64 data becomes int32
    unless ``jax_enable_x64`` is on), raising a ``ValueError`` when a value does not fit.

    The one rule for values that meet a dtype at axjax's boundary (``ax.tensor``,
    ``ax.full``, a compiled graph's inputs, a number mixed with a tensor): a value fits when
    the conversion keeps it, up to the rounding of a float. So an integer dtype takes only
    integers within its range (``300`` is not a ``U8``, ``2.5`` is not an ``I32``), a float
    dtype takes any value whose magnitude does not overflow to infinity (``1e6`` is not an
    ``F16``; NaN and infinities stay what they are), ``Bool`` takes ``0``/``1``/booleans.
    A concrete ``jax.Array`` is checked the same way when its dtype must change unsafely
    (its values are read back to the host for that); a traced one is returned as it is
    (its values are not known: converting it is ``astype``'s cast, see docs/tensors.md), as
    is anything numpy cannot read (the caller reports it).

    Example:
        >>> fit_dtype("full", 300, U8)
        Traceback (most recent call last):
        ValueError: full: value 300 does not fit U8 (integers in [0, 255]) ...
    """
    if isinstance(data, jax.Array):
        if isinstance(data, jax.core.Tracer) or dtype is None:
            return data
        if np.can_cast(data.dtype, to_numpy_dtype(dtype), "safe"):
            return data
    try:
        arr = np.asarray(data)
    except (TypeError, ValueError, OverflowError):
        return data
    if arr.dtype.kind == "O":  # Python ints beyond 64 bits, which numpy keeps as objects
        _check_big_ints(where, arr, dtype)
        return data
    if arr.dtype.kind not in "biuf" and arr.dtype != BF16.numpy:
        return data
    if dtype is None:
        want = np.dtype(jax.dtypes.canonicalize_dtype(arr.dtype))
        narrowed = want != arr.dtype
    else:
        want, narrowed = to_numpy_dtype(dtype), False
    if want == arr.dtype or np.can_cast(arr.dtype, want, "safe") or arr.size == 0:
        return arr.astype(want, copy=False)
    with np.errstate(all="ignore"):
        out = arr.astype(want)
        bad = misfits(arr, out)
    if not bad.any():
        return out
    name = dtype_marker(want).__name__
    if narrowed:
        fix = (
            f"JAX makes {name} of {arr.dtype} data because jax_enable_x64 is off: enable it "
            '(jax.config.update("jax_enable_x64", True)) or bring the values into range'
        )
    elif want.kind == "b":
        fix = "make booleans explicitly (e.g. data != 0)"
    elif want.kind in "iu" and arr.dtype.kind == "f":
        fix = "round or clip the values first (np.round, np.clip), or use a float dtype"
    else:
        fix = "clip or rescale the values first, or use a wider dtype"
    raise ValueError(f"{where}: {_first_bad(bad, arr)} does not fit {name} ({_range(want)}); {fix}")
