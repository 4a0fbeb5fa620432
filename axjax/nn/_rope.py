"""Rotary position embeddings (RoPE) by axis name, in the Hugging Face Llama convention.

The per-head feature axis is split into two halves, ``x = [x1, x2]``; the pair
``(x1[i], x2[i])`` is rotated by the angle ``p * theta ** (-2i / d)`` for position ``p``:
``x * cos + rotate_half(x) * sin`` with ``rotate_half(x) = [-x2, x1]``. Positions start at
``offset`` (a KV cache's length: the positions of a decode step follow those cached).
"""

from __future__ import annotations

from typing import TypeVarTuple

import jax
import jax.numpy as jnp
from typing_extensions import TypeVar

from ..core import AnyTensor, Axis, DType, Tensor
from ..core._internal import (
    axes_names,
    axis_name,
    check_axis_label,
    check_int,
    fail,
    is_floating,
    is_symbolic,
    positive_float,
    public_call,
)
from ._registry import checks_axes
from ._util import require

__all__ = ["rotary_embedding", "rope_frequencies"]

D = TypeVar("D", bound=DType)
S = TypeVarTuple("S")


def rope_frequencies(head_size: int, theta: float = 10000.0) -> jax.Array:
    """The ``head_size // 2`` inverse frequencies ``theta ** (-2i / head_size)`` (float32).

    Example:
        >>> ax.nn.rope_frequencies(4, theta=100.0)
        Array([1. , 0.1], dtype=float32)
    """
    head_size = check_int("rope_frequencies", "head_size", head_size, 2, None, "an int >= 2")
    if head_size % 2:
        raise ValueError(f"rope_frequencies: head_size {head_size} is odd; RoPE rotates pairs")
    theta = positive_float("rope_frequencies", "theta", theta)
    exponents = jnp.arange(0, head_size, 2, dtype=jnp.float32) / head_size
    return 1.0 / (theta**exponents)


def _offset(
    name: str, x: AnyTensor, pos: type[Axis], over: type[Axis], offset: int | jax.Array | AnyTensor
) -> tuple[int | jax.Array, tuple[type[Axis], ...]]:
    """The offset's value and axes: ``()`` for a scalar, the rows of a per-row offset."""
    if isinstance(offset, Tensor):
        rows = offset.axes
        if set(rows) - (set(x.axes) - {pos, over}):
            raise fail(
                name,
                (x, offset),
                f"the offset is a scalar or one position per row of x's other axes, got axes "
                f"({axes_names(rows)})",
            )
        if not jnp.issubdtype(offset.array.dtype, jnp.integer):
            raise fail(name, (offset,), f"the offset is an integer, got {offset.dtype.__name__}")
        return offset.array, rows
    if isinstance(offset, jax.Array):
        if offset.ndim or not jnp.issubdtype(offset.dtype, jnp.integer):
            raise TypeError(
                f"{name}: the offset is an integer scalar (a cache's length), got an array "
                f"of shape {offset.shape} and dtype {offset.dtype}"
            )
        return offset, ()
    return check_int(name, "offset", offset, 0, None, "an int >= 0"), ()


def _positions(
    name: str,
    x: AnyTensor,
    pos: type[Axis],
    over: type[Axis],
    positions: object,
    offset: object,
) -> tuple[jax.Array, tuple[type[Axis], ...]]:
    """Each entry's position (float32, ``[*rows, pos]``) and the rows: ``positions`` checked
    (an integer Tensor over ``pos`` and some of ``x``'s other axes, no ``offset`` beside)."""
    if not isinstance(positions, Tensor):
        raise TypeError(f"{name}: positions must be an integer Tensor, got {type(positions)}")
    if not (isinstance(offset, int) and offset == 0):
        raise ValueError(f"{name}: give positions= or offset=, not both")
    if not jnp.issubdtype(positions.array.dtype, jnp.integer):
        raise fail(name, (positions,), f"positions are integers, got {positions.dtype.__name__}")
    others = set(x.axes) - {pos, over}
    if pos not in positions.axes or set(positions.axes) - others - {pos}:
        raise fail(
            name,
            (x, positions),
            f"positions are over {axis_name(pos)} and some of x's other axes but "
            f"{axis_name(over)}, got axes ({axes_names(positions.axes)})",
        )
    if positions.size(pos) != x.size(pos):
        raise fail(
            name,
            (x, positions),
            f"positions has {positions.size(pos)} entries along {axis_name(pos)}, x has "
            f"{x.size(pos)}",
        )
    rows = tuple(a for a in positions.axes if a != pos)
    order = [positions.axes.index(a) for a in (*rows, pos)]
    return jnp.transpose(positions.array, order).astype(jnp.float32), rows


@public_call("rotary_embedding")  # its errors name the argument, as the function's do
def rope_axes(
    x: AnyTensor,
    pos: type[Axis],
    over: type[Axis],
    *,
    theta: float = 10000.0,
    offset: object = 0,
    positions: object = None,
) -> AnyTensor:
    """:func:`rotary_embedding`'s axis and dtype rules (labels, ``pos`` and ``over`` axes of
    ``x``, a floating ``x``); returns ``x``. The mypy plugin runs it on stand-ins."""
    name = f"rotary_embedding(pos={axis_name(pos)}, over={axis_name(over)})"
    check_axis_label(pos, name)
    check_axis_label(over, name)
    if pos is over:
        raise ValueError(f"{name}: the position and feature axes must differ")
    require(name, (x,), x, pos, None)
    require(name, (x,), x, over, None)
    if not is_floating(x.dtype):
        raise fail(name, (x,), f"RoPE rotates floating-point features, got {x.dtype.__name__}")
    return x


@checks_axes(rope_axes)
@public_call()
def rotary_embedding(
    x: Tensor[D, *S],
    pos: type[Axis],
    over: type[Axis],
    *,
    theta: float = 10000.0,
    offset: int | jax.Array | AnyTensor = 0,
    positions: AnyTensor | None = None,
) -> Tensor[D, *S]:
    """Rotate the feature axis ``over`` of ``x`` by its position along ``pos`` (RoPE).

    The Hugging Face Llama convention (``rotate_half``: the two halves of ``over`` are the
    pairs, not neighbouring features): ``x * cos + rotate_half(x) * sin`` with the angle
    ``(offset + p) * theta ** (-2i / d)`` of feature ``i`` at position ``p``, ``d`` the size
    of ``over``. ``offset`` (an int, or a traced integer scalar) is the position of the first
    entry along ``pos``; an integer Tensor over some of ``x``'s other axes gives each row
    its own (a KV cache's ``length``: the rows of a ragged batch). ``positions``, an integer
    Tensor over ``pos`` (and some of the other axes), gives every entry its own position
    instead: packed documents, each starting again at 0. Every other axis is a
    batch axis (the heads, the batch); the result has ``x``'s axes in ``x``'s order and
    dtype (the angles are computed in float32).

    Example:
        >>> q = ax.nn.rotary_embedding(q, Time, HeadDim, theta=10000.0)  # any axis order
        >>> k = ax.nn.rotary_embedding(k, Time, HeadDim, offset=cache.length)
        >>> q = ax.nn.rotary_embedding(q, Pos, HeadDim, positions=batch.positions)  # packed
    """
    name = f"rotary_embedding(pos={axis_name(pos)}, over={axis_name(over)})"
    if is_symbolic(x):
        raise TypeError(f"{name}: runs on tensors (eager or traced by jit), not graph nodes")
    rope_axes(x, pos, over)
    d = int(x.size(over))
    if d % 2:
        raise fail(
            name, (x,), f"the feature axis {axis_name(over)} has odd size {d}; RoPE rotates pairs"
        )
    theta = positive_float(name, "theta", theta)
    if positions is not None:
        at, rows = _positions(name, x, pos, over, positions, offset)
    else:
        start, rows = _offset(name, x, pos, over, offset)
        n = int(x.size(pos))
        first = jnp.asarray(start, jnp.float32)
        at = first[..., None] + jnp.arange(n, dtype=jnp.float32).reshape((1,) * first.ndim + (n,))
    inverse = rope_frequencies(d, theta).reshape((1,) * at.ndim + (-1,))
    freqs = at[..., None] * inverse  # [*rows, pos, d/2]
    angles = jnp.concatenate([freqs, freqs], axis=-1)  # [*rows, pos, d]: the halves share
    a = x.array
    io = x.axes.index(over)
    given = (*rows, pos, over)
    layout = sorted(range(len(given)), key=lambda i: x.axes.index(given[i]))  # x's order
    shape = [int(x.size(ax_)) if ax_ in given else 1 for ax_ in x.axes]
    cos = jnp.transpose(jnp.cos(angles), layout).reshape(shape).astype(a.dtype)
    sin = jnp.transpose(jnp.sin(angles), layout).reshape(shape).astype(a.dtype)
    x1, x2 = jnp.split(a, 2, axis=io)
    rotated = jnp.concatenate([-x2, x1], axis=io)
    return Tensor(a * cos + rotated * sin, x.axes)
