"""Constructors: wrap an array, fill a shape, draw random values with a PRNG key.

Axes follow the shape, one label per dimension::

    x = ax.tensor(images, Batch, Height, Width, dtype=ax.F32)
    w = ax.normal(key, (784, 300), Pixel, Hidden, stddev=0.05)

Data and fill values must fit the dtype (``fit_dtype``): ``ax.full(3, A, value=300,
dtype=ax.U8)`` is a ``ValueError``, not a tensor of 44s (docs/tensors.md). Shapes are
non-negative ints, checked by the one validator of numeric arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from ..core import F32, I32, AnyTensor, Axis, DType, Tensor
from ..core._internal import (
    ArrayData,
    axes_names,
    dtype_marker,
    dtype_of_kind,
    finite_float,
    fit_dtype,
    index_int,
    jax_dtype,
    narrowed_error,
    non_negative_float,
    non_negative_int,
    to_numpy_dtype,
)

__all__ = ["tensor", "zeros", "ones", "full", "normal", "uniform", "randint", "arange"]

D = TypeVar("D", bound=DType)
# Remaining Any: user input checked at run time (array data, a shape, a fill value) and
# the dtype/axes parameters of the Tensor aliases.


def tensor(
    data: ArrayData | AnyTensor, *axes: type[Axis], dtype: type[DType] | None = None
) -> AnyTensor:
    """Wrap an array (or nested lists, a numpy array, a scalar) with one axis per dimension.

    Example:
        >>> ax.tensor([[1.0, 2.0, 3.0]], Batch, Pixel, dtype=ax.F32)
        Tensor[F32, Batch=1, Pixel=3]([[1., 2., 3.]])
    """
    if isinstance(data, Tensor):
        data = data.array
    if isinstance(data, list | tuple):  # numpy would read a list of Tensors as numbers
        problem = _nested_problem(data)
        if problem is not None:
            raise problem
    data = fit_dtype("tensor", data, dtype)  # a value that does not fit is a ValueError
    try:
        arr = jnp.asarray(data, dtype=None if dtype is None else to_numpy_dtype(dtype))
    except (TypeError, ValueError) as e:
        raise _not_array_data(data, e) from None
    if dtype is not None and dtype_marker(arr.dtype) is not dtype_marker(dtype):
        raise narrowed_error("tensor", dtype, arr.dtype)
    return Tensor(arr, tuple(axes))


def _not_array_data(data: object, error: Exception) -> Exception:
    """Why ``data`` cannot be a tensor's array (ragged lists, object or string arrays)."""
    kind = getattr(getattr(data, "dtype", None), "kind", None)
    if isinstance(data, np.ndarray) and kind in ("O", "U", "S", "M", "m", "V"):
        return TypeError(
            f"tensor: a numpy array of dtype {data.dtype} cannot be a tensor: axjax holds "
            "numbers and booleans (convert it first, e.g. np.asarray(data, dtype=np.float32))"
        )
    if isinstance(data, list | tuple):
        problem = _nested_problem(data)
        if problem is not None:
            return problem
    shown = type(data).__name__
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return TypeError(
        f"tensor: cannot make an array from {shown} ({first}); pass a number, nested lists "
        "of numbers or a numpy/JAX array"
    )


def _nested_problem(data: list[Any] | tuple[Any, ...]) -> Exception | None:
    """The first reason nested lists are not a rectangular array of numbers, if any."""
    level: list[Any] = [data]
    shape: tuple[int, ...] = ()
    while True:
        seqs = [x for x in level if isinstance(x, list | tuple)]
        if not seqs:
            break
        lengths = list(dict.fromkeys(len(x) for x in seqs))
        if len(seqs) != len(level) or len(lengths) > 1:
            what = (
                "some entries are lists and some are not"
                if len(seqs) != len(level)
                else "the lists have lengths "
                + ", ".join(map(str, lengths[:-1]))
                + f" and {lengths[-1]}"
            )
            return ValueError(
                f"tensor: the nested lists are ragged: after shape {shape} {what}; every "
                "list at one depth needs the same length (pad them, or make one tensor per row)"
            )
        shape += (len(seqs[0]),)
        level = [y for x in seqs for y in x]
    for x in level:
        if isinstance(x, Tensor):
            return TypeError(
                "tensor: the list holds Tensors; stack them along a new axis with "
                "ax.stack([t1, t2, ...], Axis), or wrap their arrays (t.array)"
            )
        if not isinstance(x, int | float | complex | np.generic) and not hasattr(x, "dtype"):
            return TypeError(
                f"tensor: entry {x!r} ({type(x).__name__}) is not a number; a tensor's data "
                "is numbers or booleans"
            )
    return None


def _shape(shape: int | Sequence[int], axes: tuple[type[Axis], ...], where: str) -> tuple[int, ...]:
    """The sizes of ``shape``, one non-negative int per axis (``0`` makes an empty axis)."""
    items = shape if isinstance(shape, Sequence) and not isinstance(shape, str) else (shape,)
    try:
        sizes = tuple(non_negative_int(where, "shape", n) for n in items)
    except TypeError:
        raise TypeError(
            f"{where}: the shape must be an int or a tuple of ints, one per axis (e.g. "
            f"(128, 784) for Batch, Pixel), got "
            f"{shape.__name__ if isinstance(shape, type) else repr(shape)}"
        ) from None
    if len(sizes) != len(axes):
        raise TypeError(
            f"{where}: shape {sizes} has {len(sizes)} sizes but {len(axes)} axes were named "
            f"({axes_names(axes)}); give one size per axis"
        )
    return sizes


def zeros(shape: int | Sequence[int], *axes: type[Axis], dtype: type[DType] = F32) -> AnyTensor:
    """A tensor of zeros: ``ax.zeros((2, 3), Batch, Pixel)``."""
    return Tensor(jnp.zeros(_shape(shape, axes, "zeros"), jax_dtype(dtype, "zeros")), axes)


def ones(shape: int | Sequence[int], *axes: type[Axis], dtype: type[DType] = F32) -> AnyTensor:
    """A tensor of ones: ``ax.ones((2, 3), Batch, Pixel)``."""
    return Tensor(jnp.ones(_shape(shape, axes, "ones"), jax_dtype(dtype, "ones")), axes)


def full(
    shape: int | Sequence[int], *axes: type[Axis], value: Any, dtype: type[DType] = F32
) -> AnyTensor:
    """A tensor filled with ``value``: ``ax.full((2,), Batch, value=0.5)``."""
    sizes, dt = _shape(shape, axes, "full"), jax_dtype(dtype, "full")
    return Tensor(jnp.full(sizes, fit_dtype("full", value, dt), dt), axes)


def normal(
    key: jax.Array,
    shape: int | Sequence[int],
    *axes: type[Axis],
    stddev: float = 1.0,
    mean: float = 0.0,
    dtype: type[DType] = F32,
) -> AnyTensor:
    """Normal samples: ``ax.normal(key, (784, 300), Pixel, Hidden, stddev=0.05)``."""
    s, dt = (
        _shape(shape, axes, "normal"),
        jax_dtype(dtype_of_kind("normal", "dtype", dtype, "floating"), "normal"),
    )
    if not isinstance(stddev, jax.Array):  # a traced scale is the caller's to check
        stddev = non_negative_float("normal", "stddev", stddev)
    if not isinstance(mean, jax.Array):
        mean = finite_float("normal", "mean", mean)
    arr = jax.random.normal(key, s, dt) * stddev + mean
    return Tensor(arr.astype(dt), axes)


def uniform(
    key: jax.Array,
    shape: int | Sequence[int],
    *axes: type[Axis],
    minval: float = 0.0,
    maxval: float = 1.0,
    dtype: type[DType] = F32,
) -> AnyTensor:
    """Uniform samples in ``[minval, maxval)``."""
    s, dt = (
        _shape(shape, axes, "uniform"),
        jax_dtype(dtype_of_kind("uniform", "dtype", dtype, "floating"), "uniform"),
    )
    if not isinstance(minval, jax.Array):  # traced bounds are the caller's to check
        minval = finite_float("uniform", "minval", minval)
    if not isinstance(maxval, jax.Array):
        maxval = finite_float("uniform", "maxval", maxval)
    if isinstance(minval, float) and isinstance(maxval, float) and minval > maxval:
        raise ValueError(f"uniform: minval ({minval}) must not exceed maxval ({maxval})")
    return Tensor(jax.random.uniform(key, s, dt, minval, maxval), axes)


def randint(
    key: jax.Array,
    shape: int | Sequence[int],
    *axes: type[Axis],
    minval: int,
    maxval: int,
    dtype: type[DType] = I32,
) -> AnyTensor:
    """Uniform integers in ``[minval, maxval)``."""
    s, dt = (
        _shape(shape, axes, "randint"),
        jax_dtype(dtype_of_kind("randint", "dtype", dtype, "integer"), "randint"),
    )
    lo, hi = index_int("randint", "minval", minval), index_int("randint", "maxval", maxval)
    if lo >= hi:
        raise ValueError(f"randint: minval ({lo}) must be below maxval ({hi}): [minval, maxval)")
    fit_dtype("randint", [lo, hi - 1], dt)  # the values drawn must fit the dtype
    return Tensor(jax.random.randint(key, s, minval, maxval, dt), axes)


def arange(axis: type[Axis], n: int, dtype: type[DType] = I32) -> AnyTensor:
    """``0, 1, ..., n-1`` along ``axis``: ``ax.arange(Time, 28)``."""
    n = non_negative_int("arange", "n", n)
    dt = jax_dtype(dtype_of_kind("arange", "dtype", dtype, "number"), "arange")
    fit_dtype("arange", max(n - 1, 0), dt)  # the last value must fit the dtype
    return Tensor(jnp.arange(n, dtype=dt), (axis,))
