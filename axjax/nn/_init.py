"""Initialisers whose fan-in and fan-out come from named axes.

An initialiser is a callable ``init(key, sizes, *, fan_in, fan_out, dtype) -> Tensor``:
``sizes`` maps each axis of the new tensor, in order, to its size; ``fan_in`` and
``fan_out`` name the axes whose sizes multiply to the fan-in and fan-out. The factories
below (``glorot_uniform()``, ``he_normal()``, ``orthogonal()``, ...) build them, as
``jax.nn.initializers`` does, but a convolution kernel ``[Out, In, Height, Width]`` says
``fan_in=(In, Height, Width)`` instead of counting positions.

Example:
    >>> init = ax.nn.init.glorot_uniform()
    >>> w = init(key, {Hidden: 300, Pixel: 784}, fan_in=Pixel, fan_out=Hidden)
    >>> w.axes
    (Hidden, Pixel)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from ..core import F32, AnyTensor, Axis, DType, Tensor
from ..core._internal import (
    axes_names,
    axis_name,
    check_axis_label,
    checks_choices,
    dtype_of_kind,
    finite_float,
    jax_dtype,
    non_negative_float,
    positive_float,
    positive_sizes,
)

__all__ = [
    "Initializer",
    "constant",
    "zeros",
    "ones",
    "uniform",
    "normal",
    "variance_scaling",
    "glorot_uniform",
    "glorot_normal",
    "he_uniform",
    "he_normal",
    "lecun_uniform",
    "lecun_normal",
    "orthogonal",
    "fan",
]

AxisArg = type[Axis] | tuple[type[Axis], ...]


class Initializer(Protocol):
    """``init(key, sizes, *, fan_in, fan_out, dtype) -> Tensor`` (see the module doc)."""

    def __call__(
        self,
        key: jax.Array,
        sizes: Mapping[type[Axis], int],
        *,
        fan_in: AxisArg = (),
        fan_out: AxisArg = (),
        dtype: type[DType] = F32,
    ) -> AnyTensor: ...


def _axes(arg: AxisArg, where: str) -> tuple[type[Axis], ...]:
    axes = arg if isinstance(arg, tuple) else (arg,)
    return tuple(check_axis_label(a, where) for a in axes)


def fan(sizes: Mapping[type[Axis], int], axes: AxisArg, where: str = "fan") -> int:
    """The product of the sizes of ``axes`` (each must be a key of ``sizes``).

    Example:
        >>> ax.nn.init.fan({Out: 8, In: 3, Height: 5, Width: 5}, (In, Height, Width))
        75
    """
    names = _axes(axes, where)
    sizes = positive_sizes(where, "sizes", sizes)
    missing = [a for a in names if a not in sizes]
    if missing:
        raise ValueError(
            f"{where}: fan axis {axis_name(missing[0])} is not an axis of the new tensor "
            f"({axes_names(sizes)}); name fan_in/fan_out among its axes"
        )
    return math.prod(sizes[a] for a in names)


def _floating(dtype: type[DType], where: str) -> np.dtype[Any]:
    """An initialiser's dtype, as numpy's: floating (parameters are trained; an orthogonal
    matrix in integers rounds to zeros), of a width JAX makes."""
    return jax_dtype(dtype_of_kind(where, "dtype", dtype, "floating"), where)


def _make(sizes: Mapping[type[Axis], int], array: jax.Array) -> AnyTensor:
    return Tensor(array, tuple(sizes))


def _shape(sizes: Mapping[type[Axis], int]) -> tuple[int, ...]:
    return tuple(positive_sizes("initializer", "sizes", sizes).values())


def constant(value: float) -> Initializer:
    """Every entry equal to ``value``."""
    value = finite_float("constant", "value", value)

    def init(
        key: jax.Array,
        sizes: Mapping[type[Axis], int],
        *,
        fan_in: AxisArg = (),
        fan_out: AxisArg = (),
        dtype: type[DType] = F32,
    ) -> AnyTensor:
        del key, fan_in, fan_out
        return _make(sizes, jnp.full(_shape(sizes), value, _floating(dtype, "constant")))

    return init


def zeros() -> Initializer:
    """All zeros (the usual bias initialiser)."""
    return constant(0.0)


def ones() -> Initializer:
    """All ones (the usual norm-scale initialiser)."""
    return constant(1.0)


def uniform(limit: float) -> Initializer:
    """Uniform in ``[-limit, limit)``, whatever the fans."""
    limit = non_negative_float("uniform", "limit", limit)

    def init(
        key: jax.Array,
        sizes: Mapping[type[Axis], int],
        *,
        fan_in: AxisArg = (),
        fan_out: AxisArg = (),
        dtype: type[DType] = F32,
    ) -> AnyTensor:
        del fan_in, fan_out
        arr = jax.random.uniform(key, _shape(sizes), _floating(dtype, "uniform"), -limit, limit)
        return _make(sizes, arr)

    return init


def normal(stddev: float) -> Initializer:
    """Normal with standard deviation ``stddev``, whatever the fans."""
    stddev = non_negative_float("normal", "stddev", stddev)

    def init(
        key: jax.Array,
        sizes: Mapping[type[Axis], int],
        *,
        fan_in: AxisArg = (),
        fan_out: AxisArg = (),
        dtype: type[DType] = F32,
    ) -> AnyTensor:
        del fan_in, fan_out
        arr = jax.random.normal(key, _shape(sizes), _floating(dtype, "normal")) * stddev
        return _make(sizes, arr.astype(_floating(dtype, "normal")))

    return init


@checks_choices
def variance_scaling(
    scale: float,
    mode: Literal["fan_in", "fan_out", "fan_avg"],
    distribution: Literal["uniform", "normal"],
) -> Initializer:
    """Variance ``scale / n`` where ``n`` is the fan-in, fan-out or their mean.

    ``normal`` is an untruncated normal; ``uniform`` has limit ``sqrt(3 * scale / n)``.
    Glorot, He and LeCun are special cases.
    """
    scale = positive_float("variance_scaling", "scale", scale)

    def init(
        key: jax.Array,
        sizes: Mapping[type[Axis], int],
        *,
        fan_in: AxisArg = (),
        fan_out: AxisArg = (),
        dtype: type[DType] = F32,
    ) -> AnyTensor:
        where = f"{distribution} {mode} initialiser"
        n_in, n_out = fan(sizes, fan_in, where), fan(sizes, fan_out, where)
        n = {"fan_in": n_in, "fan_out": n_out, "fan_avg": (n_in + n_out) / 2}[mode]
        var = scale / max(n, 1)
        dt = _floating(dtype, "variance_scaling")
        if distribution == "normal":
            arr = jax.random.normal(key, _shape(sizes), dt) * math.sqrt(var)
        else:
            lim = math.sqrt(3.0 * var)
            arr = jax.random.uniform(key, _shape(sizes), dt, -lim, lim)
        return _make(sizes, arr.astype(dt))

    return init


def glorot_uniform() -> Initializer:
    """Glorot/Xavier uniform: limit ``sqrt(6 / (fan_in + fan_out))``."""
    return variance_scaling(1.0, "fan_avg", "uniform")


def glorot_normal() -> Initializer:
    """Glorot/Xavier normal: variance ``2 / (fan_in + fan_out)``."""
    return variance_scaling(1.0, "fan_avg", "normal")


def he_uniform() -> Initializer:
    """He/Kaiming uniform (for ReLU): limit ``sqrt(6 / fan_in)``."""
    return variance_scaling(2.0, "fan_in", "uniform")


def he_normal() -> Initializer:
    """He/Kaiming normal (for ReLU): variance ``2 / fan_in``."""
    return variance_scaling(2.0, "fan_in", "normal")


def lecun_uniform() -> Initializer:
    """LeCun uniform: limit ``sqrt(3 / fan_in)``."""
    return variance_scaling(1.0, "fan_in", "uniform")


def lecun_normal() -> Initializer:
    """LeCun normal: variance ``1 / fan_in``."""
    return variance_scaling(1.0, "fan_in", "normal")


def orthogonal(gain: float = 1.0) -> Initializer:
    """A (semi-)orthogonal map from the fan-in axes to the fan-out axes, times ``gain``.

    The tensor read as a matrix ``[fan_out, fan_in]`` has orthonormal rows or columns
    (whichever are fewer); any other axes (a Gate axis, say) get independent blocks.
    """
    gain = finite_float("orthogonal", "gain", gain)

    def init(
        key: jax.Array,
        sizes: Mapping[type[Axis], int],
        *,
        fan_in: AxisArg = (),
        fan_out: AxisArg = (),
        dtype: type[DType] = F32,
    ) -> AnyTensor:
        dt = _floating(dtype, "orthogonal")
        ins, outs = _axes(fan_in, "orthogonal"), _axes(fan_out, "orthogonal")
        n_in, n_out = fan(sizes, ins, "orthogonal"), fan(sizes, outs, "orthogonal")
        if set(ins) & set(outs):
            raise ValueError("orthogonal: fan_in and fan_out must name different axes")
        rest = tuple(a for a in sizes if a not in ins and a not in outs)
        n_rest = math.prod(sizes[a] for a in rest)
        rows, cols = max(n_out, n_in), min(n_out, n_in)
        a = jax.random.normal(key, (n_rest, rows, cols), jnp.float32)
        q, r = jnp.linalg.qr(a)
        diag: jax.Array = jnp.diagonal(r, axis1=-2, axis2=-1)
        q = q * jnp.sign(diag)[:, None, :]
        mat = q if n_out >= n_in else jnp.swapaxes(q, -1, -2)  # [rest, fan_out, fan_in]
        order = rest + outs + ins
        arr = (gain * mat).reshape(tuple(sizes[a] for a in order))
        perm = tuple(order.index(a) for a in sizes)
        return _make(sizes, jnp.transpose(arr, perm).astype(dt))

    return init
