"""Constructors: wrap an array, fill a shape, draw random values with a PRNG key.

Axes follow the shape, one label per dimension::

    x = ax.tensor(images, Batch, Height, Width, dtype=ax.F32)
    w = ax.normal(key, (784, 300), Pixel, Hidden, stddev=0.05)
"""

from __future__ import annotations

import operator
from typing import Any, TypeVar

import jax
import jax.numpy as jnp

from ..core import F32, I32, Axis, DType, Tensor
from ..core.internal import ArrayData, axes_names, dtype_marker, to_numpy_dtype

__all__ = ["tensor", "zeros", "ones", "full", "normal", "uniform", "randint", "arange"]

D = TypeVar("D", bound=DType)
AnyTensor = Tensor[Any, *tuple[Any, ...]]


def tensor(data: ArrayData | AnyTensor, *axes: type[Axis], dtype: type[DType] | None = None
           ) -> AnyTensor:
    """Wrap an array (or nested lists, a numpy array, a scalar) with one axis per dimension.

    Example:
        >>> ax.tensor([[1.0, 2.0, 3.0]], Batch, Pixel, dtype=ax.F32)
        Tensor[F32, Batch=1, Pixel=3]([[1., 2., 3.]])
    """
    if isinstance(data, Tensor):
        data = data.array
    arr = jnp.asarray(data, dtype=None if dtype is None else to_numpy_dtype(dtype))
    if dtype is not None and dtype_marker(arr.dtype) is not dtype_marker(dtype):
        raise TypeError(
            f"tensor: asked for {dtype_marker(dtype).__name__} but JAX made "
            f"{dtype_marker(arr.dtype).__name__} (enable jax_enable_x64 for 64-bit types)"
        )
    return Tensor(arr, tuple(axes))


def _shape(shape: Any, axes: tuple[type[Axis], ...], where: str) -> tuple[int, ...]:
    try:
        sizes: tuple[int, ...] = ((int(shape),) if isinstance(shape, int) else
                                  tuple(operator.index(n) for n in shape))
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


def zeros(shape: Any, *axes: type[Axis], dtype: type[DType] = F32) -> AnyTensor:
    """A tensor of zeros: ``ax.zeros((2, 3), Batch, Pixel)``."""
    return Tensor(jnp.zeros(_shape(shape, axes, "zeros"), to_numpy_dtype(dtype)), axes)


def ones(shape: Any, *axes: type[Axis], dtype: type[DType] = F32) -> AnyTensor:
    """A tensor of ones: ``ax.ones((2, 3), Batch, Pixel)``."""
    return Tensor(jnp.ones(_shape(shape, axes, "ones"), to_numpy_dtype(dtype)), axes)


def full(shape: Any, *axes: type[Axis], value: Any, dtype: type[DType] = F32) -> AnyTensor:
    """A tensor filled with ``value``: ``ax.full((2,), Batch, value=0.5)``."""
    return Tensor(jnp.full(_shape(shape, axes, "full"), value, to_numpy_dtype(dtype)), axes)


def normal(key: jax.Array, shape: Any, *axes: type[Axis], stddev: float = 1.0,
           mean: float = 0.0, dtype: type[DType] = F32) -> AnyTensor:
    """Normal samples: ``ax.normal(key, (784, 300), Pixel, Hidden, stddev=0.05)``."""
    s = _shape(shape, axes, "normal")
    arr = jax.random.normal(key, s, to_numpy_dtype(dtype)) * stddev + mean
    return Tensor(arr.astype(to_numpy_dtype(dtype)), axes)


def uniform(key: jax.Array, shape: Any, *axes: type[Axis], minval: float = 0.0,
            maxval: float = 1.0, dtype: type[DType] = F32) -> AnyTensor:
    """Uniform samples in ``[minval, maxval)``."""
    s = _shape(shape, axes, "uniform")
    return Tensor(jax.random.uniform(key, s, to_numpy_dtype(dtype), minval, maxval), axes)


def randint(key: jax.Array, shape: Any, *axes: type[Axis], minval: int, maxval: int,
            dtype: type[DType] = I32) -> AnyTensor:
    """Uniform integers in ``[minval, maxval)``."""
    s = _shape(shape, axes, "randint")
    return Tensor(jax.random.randint(key, s, minval, maxval, to_numpy_dtype(dtype)), axes)


def arange(axis: type[Axis], n: int, dtype: type[DType] = I32) -> AnyTensor:
    """``0, 1, ..., n-1`` along ``axis``: ``ax.arange(Time, 28)``."""
    return Tensor(jnp.arange(n, dtype=to_numpy_dtype(dtype)), (axis,))
