"""The op contract: an op's ``infer``, ``forward`` and ``backward`` checked against each other.

Checked in one place, at trace time (types, shapes and dtypes are static), so compiled code
is unchanged:

- :func:`inferred`: what ``infer`` declares is a well-formed type (labels, no axis twice,
  sizes);
- :func:`forward_arrays`: what ``forward`` returns is the declared type (axes in the declared
  order, shape, dtype), never relabelled;
- :func:`check_cotangents`: each cotangent ``backward`` returns has its operand's axes, shape
  and floating dtype;
- :func:`checked_infer`, :func:`check_layout`, :func:`not_a_tensor`: the operands are Tensors
  (or graph nodes) whose arrays have one dimension per axis.

:data:`check_contract` switches the checks off (for the tests that prove they are needed).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.export import is_symbolic_dim

from ._axis import axes_names, check_axis_label
from ._dtype import DType, is_inexact
from ._errors import AxisError, check_unique_axes, describe
from ._protocols import Arrays, Cotangents, Operand
from ._tensor import Tensor, bare_type, unnamed_dims
from ._tensor_type import TensorType

if TYPE_CHECKING:  # the contract sits below Op (core/_op.py applies it): types only
    from ._op import Op

__all__ = [
    "check_contract",
    "check_cotangents",
    "check_layout",
    "checked_infer",
    "forward_arrays",
    "inferred",
    "not_a_tensor",
]

check_contract = True


def checked_infer(op: Op[Any], xs: Sequence[Any]) -> TensorType | tuple[TensorType, ...]:
    """The type rule's result on operands not yet known to be well formed: each must be a
    Tensor or a graph node, its array one dimension per axis (an uncached call)."""
    for x in xs:
        if not isinstance(x, Tensor) and not getattr(type(x), "_is_symbolic", False):
            raise not_a_tensor(op, x)
        check_layout(op, x)
    return inferred(op, xs)


def inferred(op: Op[Any], xs: Sequence[Any]) -> TensorType | tuple[TensorType, ...]:
    """``op.infer(*xs)``, checked to be a well-formed result type."""
    out = op.infer(*xs)
    if not check_contract:
        return out
    if isinstance(out, tuple):
        if not out:
            raise TypeError(
                f"{op.describe()}.infer returned an empty tuple: it returns the result's "
                "ax.TensorType (a tuple of them for an op with several results)"
            )
        for i, t in enumerate(out):
            _check_declared(op, t, f" result {i}")
    else:
        _check_declared(op, out, "")
    return out


def _check_declared(op: Op[Any], t: object, which: str) -> None:
    name = f"{op.describe()}.infer"
    if not isinstance(t, TensorType):
        raise TypeError(
            f"{name} returned{which} a {type(t).__name__}: it returns the result's "
            "ax.TensorType(dtype, axes, shape) (x.type for an operand's type)"
        )
    if not (isinstance(t.dtype, type) and issubclass(t.dtype, DType) and t.dtype is not DType):
        raise TypeError(
            f"{name} declared{which} dtype {t.dtype!r}: the dtype is a marker class such as "
            "ax.F32 (x.dtype for an operand's)"
        )
    if not isinstance(t.axes, tuple) or not isinstance(t.shape, tuple):
        raise TypeError(
            f"{name} declared{which} axes {t.axes!r} and shape {t.shape!r}: both are tuples"
        )
    for a in t.axes:
        check_axis_label(a, name)
    check_unique_axes(t.axes, f"{name} declared{which} {describe(t)}")
    if len(t.shape) != len(t.axes) or not all(
        n is None or (isinstance(n, int | np.integer) and n >= 0) or is_symbolic_dim(n)
        for n in t.shape
    ):
        raise TypeError(
            f"{name} declared{which} axes ({axes_names(t.axes)}) with shape {t.shape!r}: the "
            "shape has one size (an int >= 0, None if unknown in a graph, or a jax.export "
            "symbolic size) per axis"
        )


def forward_arrays(
    op: Op[Any], out: TensorType | tuple[TensorType, ...], y: object, check: bool
) -> Arrays:
    """The arrays of ``op.forward``'s result ``y``: a Tensor's axes must be the declared ones,
    in the declared order (never relabelled); with ``check`` (the first call per operand
    types, and every uncached call), shape and dtype must be the declared ones too."""
    if isinstance(out, tuple):
        if not isinstance(y, tuple | list) or len(y) != len(out):
            if not check_contract:
                return tuple(getattr(v, "_array", v) for v in cast("Iterable[Any]", y))
            got = f"{len(y)} results" if isinstance(y, tuple | list) else f"one {_what(y)}"
            raise TypeError(
                f"{op.describe()}.forward returned {got}, but {op.describe()}.infer declared "
                f"{len(out)} ({', '.join(map(describe, out))}): forward returns one array per "
                "declared result"
            )
        return tuple(
            _result_array(op, t, v, check, f" result {i}") for i, (v, t) in enumerate(zip(y, out))
        )
    return _result_array(op, out, y, check, "")


def _result_array(op: Op[Any], t: TensorType, y: object, check: bool, which: str) -> jax.Array:
    if isinstance(y, Tensor):
        if y._axes != t.axes and check_contract:
            raise AxisError(
                f"{op.describe()}.forward returned{which} a Tensor with axes "
                f"({axes_names(y._axes)}), but {op.describe()}.infer declared {describe(t)}: "
                f"return the declared axes in the declared order (ax.transpose(y, "
                f"{axes_names(t.axes)}) if only the order differs), or fix infer"
            )
        y = y._array
    if check and check_contract:
        _check_result(op, t, y, which)
    return cast(jax.Array, y)  # checked above (or the contract is off)


def _what(y: object) -> str:
    shape, dtype = getattr(y, "shape", None), getattr(y, "dtype", None)
    if shape is None or dtype is None:
        return (
            f"{type(y).__name__} ({y!r})"
            if isinstance(y, int | float | complex)
            else type(y).__name__
        )
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = str(dtype)
    return f"array of shape {tuple(shape)} and dtype {name}"


def _check_result(op: Op[Any], t: TensorType, y: object, which: str) -> None:
    shape, dtype = getattr(y, "shape", None), getattr(y, "dtype", None)
    want = t.dtype.numpy
    if (
        shape is not None
        and dtype is not None
        and dtype == want
        and all(n is None or n == m for n, m in zip(t.shape, shape, strict=False))
        and len(shape) == len(t.shape)
    ):
        return
    declared = tuple("?" if n is None else n for n in t.shape)
    if (
        dtype is not None
        and dtype != want
        and shape is not None
        and len(shape) == len(t.shape)
        and jax.dtypes.canonicalize_dtype(want) == dtype
    ):
        raise TypeError(
            f"{op.describe()} declares {describe(t)}, but JAX computed it in "
            f"{np.dtype(dtype).name}: "
            f"{want.name} needs 64-bit mode (jax.config.update('jax_enable_x64', True) before "
            f"creating arrays), or use the 32-bit dtype"
        )
    raise TypeError(
        f"{op.describe()}.forward returned{which} {'a' if shape is None else 'an'} {_what(y)}, "
        f"but {op.describe()}.infer declared {describe(t)} (shape {declared}, dtype "
        f"{want.name}): forward must return the declared shape and dtype (fix forward, or "
        "infer if its rule is wrong)"
    )


def check_layout(op: Op[Any], x: object) -> None:
    """Raise unless a concrete Tensor's array has one dimension per axis (not stacked)."""
    if not isinstance(x, Tensor) or x._is_symbolic:
        return
    problem = unnamed_dims(x)
    if problem:
        fix = (
            ""
            if problem.startswith("array")
            else (
                " (name them with ax.tensor(t.array, Axis, *t.axes), or take them off with "
                "jax.vmap / jax.lax.scan first)"
            )
        )
        raise TypeError(f"Cannot apply {op.describe()} to {bare_type(x)}: {problem}{fix}")


def not_a_tensor(op: Op[Any], x: object, numbers_ok: bool = False) -> TypeError:
    """The ``TypeError`` for an operand that is neither a Tensor nor a graph node."""
    shape = getattr(x, "shape", None)
    what = "jax.Array" if isinstance(x, jax.Array) else type(x).__name__
    what += "" if shape is None else f" of shape {tuple(shape)}"
    kinds = "Tensors or Python numbers" if numbers_ok else "Tensors"
    return TypeError(
        f"Cannot apply {op.describe()} to {what}: operands must be {kinds} "
        "(wrap arrays with ax.tensor(array, *axes))"
    )


def check_cotangents(op: Op[Any], grads: object, xs: Sequence[Operand]) -> Cotangents:
    """The arrays of ``op.backward``'s cotangents, one per operand (zeros for ``None``, no
    gradient for a non-floating operand); each must be a Tensor with its operand's axes, or
    an array of its shape, with its floating dtype (the op contract: see ``inferred``)."""
    name = f"{op.describe()}.backward"
    if not check_contract:
        grads = tuple(cast("Iterable[Any]", grads))  # unchecked: whatever backward gave
    elif not isinstance(grads, tuple | list):
        raise TypeError(
            f"{name} returned {_what(grads)}: it returns a tuple with one cotangent per "
            f"operand ({len(xs)} here), e.g. (dx,) for one operand"
        )
    elif len(grads) != len(xs):
        raise TypeError(f"{name} returned {len(grads)} cotangents for {len(xs)} operands")
    out = []
    for i, (g, x) in enumerate(zip(grads, xs, strict=True)):
        arr = x._array
        floating = is_inexact(arr)
        if g is None or not floating:
            out.append(jnp.zeros(arr.shape, arr.dtype) if floating else _float0(arr))
            continue
        if not check_contract:
            out.append(getattr(g, "_array", g))
            continue
        operand = f"operand {i} ({describe(x)})"
        if isinstance(g, Tensor):
            if g._axes != x._axes:
                raise AxisError(
                    f"{name}: cotangent {i} has axes ({axes_names(g._axes)}) but operand {i} "
                    f"has ({axes_names(x._axes)}) (transpose it to the operand's order)"
                )
            g = g._array
        shape, dtype = getattr(g, "shape", None), getattr(g, "dtype", None)
        if shape is None or dtype is None:
            raise TypeError(
                f"{name} returned {_what(g)} as cotangent {i}, for {operand}: a cotangent "
                f"is a Tensor with the operand's axes ({axes_names(x._axes)}) or an array of "
                f"its shape {tuple(arr.shape)}, or None for no gradient (a constant "
                "derivative still needs the shape: jnp.full_like(x.array, c) * dy.array)"
            )
        if tuple(shape) != tuple(arr.shape):
            raise TypeError(
                f"{name}: cotangent {i} has shape {tuple(shape)}, {operand} has shape "
                f"{tuple(arr.shape)} (return one value per element of the operand, in its "
                "axis order)"
            )
        if dtype != arr.dtype:
            if not jnp.issubdtype(dtype, jnp.inexact):
                raise TypeError(
                    f"{name}: cotangent {i} has dtype {np.dtype(dtype).name}, {operand} "
                    f"holds {np.dtype(arr.dtype).name}: a cotangent holds floating-point "
                    "values of its operand's dtype (compute it from dy and the operands, or "
                    "convert it with .astype(x.array.dtype))"
                )
            g = g.astype(arr.dtype)  # another float precision (an f32 derivative of a bf16 x)
        out.append(g)
    return tuple(out)


def _float0(arr: jax.Array) -> np.ndarray[Any, np.dtype[Any]]:
    return np.zeros(arr.shape, dtype=jax.dtypes.float0)
