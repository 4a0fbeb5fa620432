"""Typed doors to the JAX calls whose annotations are incomplete.

JAX leaves a few public functions unannotated (``PartitionSpec``'s constructor,
``jax.sharding.reshard``, ``jax.lax.with_sharding_constraint``, ``jax.ShapeDtypeStruct``,
``jax.config.update``, ``jnp.finfo``, ``jax.block_until_ready``): under ``mypy --strict`` each
call is an ``untyped call``. axjax calls them through the functions here, so the one
ignore comment each needs, with its reason, stands in one place, and every caller sees a
precise signature. Each function does exactly what the JAX call does, nothing more.

``unused-ignore`` goes with each ignore: a JAX version that annotates the call makes the
ignore unused, which must not fail the check either.

Example:
    >>> spec = pspec("data", None)        # PartitionSpec('data', None)
    >>> y = reshard(x, spec)              # x's type, placed by spec
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec, Sharding
from jax.typing import DTypeLike

__all__ = [
    "PyTree",
    "block_until_ready",
    "config_update",
    "effects_barrier",
    "finfo_max",
    "finfo_min",
    "optimization_barrier",
    "pspec",
    "reshard",
    "shape_dtype_struct",
    "with_sharding_constraint",
]

PyTree: TypeAlias = Any
"""A JAX pytree: a leaf (an array, a Tensor, a scalar, ``None``) or a nesting of lists,
tuples, dicts and registered nodes (Equinox modules) of them. An alias of ``Any`` (a pytree
has no static type), written where a signature means a tree rather than anything."""

T = TypeVar("T")

#: One entry of a ``PartitionSpec``: a mesh axis, several mesh axes, or ``None`` (replicated).
SpecEntry: TypeAlias = str | tuple[str, ...] | None


def pspec(*entries: SpecEntry) -> PartitionSpec:
    """``PartitionSpec(*entries)``: which mesh axes split each dimension, position by position.

    Example:
        >>> pspec("data", None)
        PartitionSpec('data', None)
    """
    return PartitionSpec(*entries)  # type: ignore[no-untyped-call, unused-ignore]  # JAX leaves it unannotated


def reshard(x: T, spec: PartitionSpec | Sharding) -> T:
    """``jax.sharding.reshard(x, spec)``: ``x`` moved to the sharding ``spec`` gives (under an
    Explicit mesh axis), the same kind of array or tree as ``x``.

    Example:
        >>> y = reshard(x, pspec(None, "model"))
    """
    out: T = jax.sharding.reshard(x, spec)  # type: ignore[no-untyped-call, unused-ignore]  # JAX leaves it unannotated
    return out


def with_sharding_constraint(x: T, sharding: PartitionSpec | Sharding) -> T:
    """``jax.lax.with_sharding_constraint(x, sharding)``: ``x``, constrained under ``jit`` to
    ``sharding`` (Auto mesh axes); the same kind of array or tree as ``x``.

    Example:
        >>> y = with_sharding_constraint(x, NamedSharding(mesh, pspec("data")))
    """
    out: T = jax.lax.with_sharding_constraint(x, sharding)  # type: ignore[no-untyped-call, unused-ignore]  # JAX leaves it unannotated
    return out


def shape_dtype_struct(
    shape: tuple[int, ...], dtype: DTypeLike, *, sharding: Sharding | None = None
) -> jax.ShapeDtypeStruct:
    """``jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)``: an abstract array (``dtype``
    is anything ``numpy.dtype`` takes).

    Example:
        >>> shape_dtype_struct((2, 3), np.float32).shape
        (2, 3)
    """
    out: jax.ShapeDtypeStruct = jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)  # type: ignore[no-untyped-call, unused-ignore]  # JAX leaves it unannotated
    return out


def config_update(name: str, value: bool | int | str) -> None:
    """``jax.config.update(name, value)``: set one of JAX's flags.

    Example:
        >>> config_update("jax_num_cpu_devices", 8)  # doctest: +SKIP
    """
    jax.config.update(name, value)  # type: ignore[no-untyped-call, unused-ignore]  # JAX leaves it unannotated


def _finfo(dtype: DTypeLike) -> np.finfo[Any]:  # JAX's is ml_dtypes.finfo, a numpy.finfo
    return jnp.finfo(dtype)  # type: ignore[no-untyped-call, unused-ignore]  # JAX leaves it unannotated


def finfo_max(dtype: DTypeLike) -> float:
    """``float(jnp.finfo(dtype).max)``: the largest finite value of a floating ``dtype``.

    Example:
        >>> finfo_max(jnp.float16)
        65504.0
    """
    return float(_finfo(dtype).max)


def finfo_min(dtype: DTypeLike) -> float:
    """``float(jnp.finfo(dtype).min)``: the most negative finite value of a floating ``dtype``.

    Example:
        >>> finfo_min(jnp.float16)
        -65504.0
    """
    return float(_finfo(dtype).min)


def block_until_ready(tree: T) -> T:
    """``jax.block_until_ready(tree)``: wait until every array in ``tree`` is computed; the
    same tree back.

    Example:
        >>> out = block_until_ready(step(x))
    """
    out: T = jax.block_until_ready(tree)  # type: ignore[no-untyped-call, unused-ignore]  # JAX leaves it unannotated
    return out


# JAX leaves these unannotated: typed once here, by assignment (no ignore at each call)
_optimization_barrier: Callable[[Any], Any] = jax.lax.optimization_barrier
_effects_barrier: Callable[[], None] = jax.effects_barrier


def optimization_barrier(x: T) -> T:
    """``jax.lax.optimization_barrier(x)``: ``x`` unchanged, kept out of the fusions of what
    surrounds it.

    Example:
        >>> values = optimization_barrier(jax.lax.top_k(a, k)[0])
    """
    out: T = _optimization_barrier(x)
    return out


def effects_barrier() -> None:
    """``jax.effects_barrier()``: wait until every host callback issued so far has run.

    Example:
        >>> effects_barrier()
    """
    _effects_barrier()
