"""What a Tensor shows: the summary of ``repr`` and the preview of ``_repr_html_``.

Both read the device as little as possible. The summary's statistics (mean, std, min, max
over the finite values, and how many are NaN or infinite) are one small jitted reduction on
the device, in the array's dtype promoted to F32 at most (BF16 and F16 to F32; F32 and F64
as they are); only its few scalars come back to the host. The preview gathers the edges of
the (last two) axes on the device, at most ``2 * EDGE`` entries per axis, and shows the rest
as an ellipsis, with the axis names as the headers of the rows and the columns.

Example:
    >>> x = ax.tensor(jnp.arange(12.0).reshape(3, 4), Batch, Pixel)
    >>> summary(x.array)
    'mean=5.5, std=3.452, min=0, max=11'
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np

from ._axis import Axis, axis_name

__all__ = ["EDGE", "summary", "preview_html", "edges"]

#: Entries shown at each end of an axis longer than ``2 * EDGE`` (the middle is ``…``).
EDGE = 4
#: Arrays with at most this many elements show all their values instead of statistics.
ALL_VALUES = 6
#: Arrays with at most this many elements (4 MiB of F32) are read whole and summarised on
#: the host; larger ones on the device, where only the statistics are read.
ON_HOST = 1 << 20


@jax.jit
def _float_stats(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(mean, std, min, max) over the finite values, and (finite, nan, +inf, -inf) counts.

    The sum, min and max are finite exactly when every value is (NaN and infinities
    propagate): then the counts are known without a pass over a comparison, which XLA:CPU
    runs ten times slower than the sum; otherwise the second branch counts and masks."""
    x = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    size = x.size
    total, low, high = jnp.sum(x), jnp.min(x), jnp.max(x)
    clean = jnp.isfinite(total) & jnp.isfinite(low) & jnp.isfinite(high)

    def all_finite() -> tuple[jax.Array, jax.Array]:
        mean = total / size
        std = jnp.sqrt(jnp.sum((x - mean) ** 2) / size)
        counts = jnp.array([size, 0, 0, 0], jnp.int32)
        return jnp.stack([mean, std, low, high]), counts

    def some_not_finite() -> tuple[jax.Array, jax.Array]:
        finite = jnp.isfinite(x)
        n = jnp.sum(finite, dtype=jnp.int32)
        div = jnp.maximum(n, 1).astype(x.dtype)
        mean = jnp.sum(jnp.where(finite, x, jnp.zeros((), x.dtype))) / div
        std = jnp.sqrt(jnp.sum(jnp.where(finite, (x - mean) ** 2, 0)) / div)
        counts = jnp.stack(
            [
                n,
                jnp.sum(jnp.isnan(x), dtype=jnp.int32),
                jnp.sum(x == jnp.inf, dtype=jnp.int32),
                jnp.sum(x == -jnp.inf, dtype=jnp.int32),
            ]
        )
        low = jnp.min(jnp.where(finite, x, jnp.inf))
        high = jnp.max(jnp.where(finite, x, -jnp.inf))
        return jnp.stack([mean, std, low, high]), counts

    stats, counts = jax.lax.cond(clean, all_finite, some_not_finite)
    return stats, counts


@jax.jit
def _int_stats(x: jax.Array) -> jax.Array:
    return jnp.stack([jnp.min(x), jnp.max(x)])


@jax.jit
def _true_count(x: jax.Array) -> jax.Array:
    return jnp.sum(x, dtype=jnp.int32)


def _host_float_stats(a: np.ndarray[Any, Any]) -> tuple[list[float], list[int]]:
    """:func:`_float_stats` on the host, for a small array already fetched (same dtype rule,
    same two-pass formula)."""
    a = a.astype(jnp.promote_types(a.dtype, jnp.float32))
    finite = np.isfinite(a)
    n = int(finite.sum())
    kept = a[finite]
    if n:
        mean = kept.mean(dtype=a.dtype)
        std = np.sqrt(((kept - mean) ** 2).mean(dtype=a.dtype))
        stats = [float(mean), float(std), float(kept.min()), float(kept.max())]
    else:
        stats = [0.0, 0.0, 0.0, 0.0]
    counts = [n, int(np.isnan(a).sum()), int((a == np.inf).sum()), int((a == -np.inf).sum())]
    return stats, counts


def summary(array: object) -> str:
    """The part of ``repr`` after the type: the values of a small array, else statistics.

    ``traced`` inside a transformation, the leaf's type name for a leaf that is no array
    (``ShapeDtypeStruct`` from ``jax.eval_shape``), ``deleted`` for a donated buffer, and no
    values for an array whose shards span several processes (reading it would need every
    process to take part). Every
    read from the device is an explicit ``jax.device_get`` (so a
    ``jax.transfer_guard("disallow")`` does not refuse a repr), of the whole array only when
    it has at most ``ON_HOST`` elements (then computing there costs less than compiling the
    device's reduction for its shape), else of the reduction's few scalars.
    """
    if isinstance(array, jax.core.Tracer):
        return "traced"
    if not isinstance(array, (jax.Array, np.ndarray, np.generic)):
        return type(array).__name__  # jax.ShapeDtypeStruct from eval_shape, ...
    if isinstance(array, jax.Array) and array.is_deleted():
        return "deleted: its buffer was donated to a jitted call or deleted"
    if isinstance(array, jax.Array) and not array.is_fully_addressable:
        # a reduction would be a collective that every process must join: never from a repr
        processes = len({getattr(d, "process_index", 0) for d in array.sharding.device_set})
        return f"spans {processes} processes: the values are not read"
    size = int(np.prod(array.shape))
    on_host = size <= ON_HOST or not isinstance(array, jax.Array)
    host = np.asarray(jax.device_get(array)) if on_host else None
    if size <= ALL_VALUES:
        return np.array2string(np.asarray(host), precision=4, separator=", ")
    dtype = np.dtype(array.dtype)
    if dtype == np.bool_:
        true = int(host.sum()) if host is not None else int(jax.device_get(_true_count(array)))
        return f"true={true}/{size}"
    if np.issubdtype(dtype, np.integer):
        if host is not None:
            low, high = host.min().item(), host.max().item()
        else:
            low, high = np.asarray(jax.device_get(_int_stats(array))).tolist()
        return f"min={low}, max={high}"
    if host is not None:
        stats, counts = _host_float_stats(host)
    else:
        got, counted = jax.device_get(_float_stats(array))
        stats, counts = [float(v) for v in got], [int(c) for c in counted]
    mean, std, low, high = stats
    finite, nan, pos, neg = counts
    bad = [f"{name}={k}" for name, k in (("nan", nan), ("+inf", pos), ("-inf", neg)) if k]
    if not finite:
        return "no finite values: " + ", ".join(bad)
    return ", ".join([f"mean={mean:.4g}, std={std:.4g}, min={low:.4g}, max={high:.4g}", *bad])


def _kept(n: int) -> np.ndarray[Any, Any]:
    """The indices shown along an axis of size ``n``: all, or ``EDGE`` at each end."""
    if n <= 2 * EDGE:
        return np.arange(n)
    return np.concatenate([np.arange(EDGE), np.arange(n - EDGE, n)])


def edges(array: Any) -> tuple[np.ndarray[Any, Any], tuple[np.ndarray[Any, Any], ...]]:
    """The values the preview shows: the first entry along every axis but the last two, the
    edges of those two. Returns the values (at most 2-d) and the indices kept along each
    shown axis. A large array is gathered on the device and only the entries shown are read
    (a small one is read whole, as :func:`summary` does)."""
    ndim = array.ndim
    shown = tuple(_kept(n) for n in array.shape[max(ndim - 2, 0) :])
    lead = (0,) * max(ndim - 2, 0)
    if int(np.prod(array.shape)) <= ON_HOST or not isinstance(array, jax.Array):
        array = np.asarray(jax.device_get(array))
    if not shown:
        return np.asarray(jax.device_get(array)), ()
    if len(shown) == 1:
        picked = array[(*lead, shown[0])]
    else:
        picked = array[(*lead, *np.ix_(shown[0], shown[1]))]
    return np.asarray(jax.device_get(picked)), shown


def _cell(v: Any) -> str:
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return f"{float(v):.4g}"


def _with_gaps(
    values: Sequence[str], kept: np.ndarray[Any, Any], n: int, gap: str = "…"
) -> list[str]:
    """``values`` with ``gap`` where the kept indices skip the middle of the axis."""
    if len(kept) == n:
        return list(values)
    return [*values[:EDGE], gap, *values[EDGE:]]


def _lead_note(axes: tuple[type[Axis], ...], shape: tuple[int, ...]) -> str:
    """``Time=0 of 3, Chan=0 of 2``: the slice shown of a tensor of rank 3 or more."""
    lead = zip(axes[: len(axes) - 2], shape[: len(shape) - 2], strict=True)
    return ", ".join(f"{axis_name(a)}=0 of {n}" for a, n in lead)


def preview_html(array: Any, axes: tuple[type[Axis], ...]) -> str:
    """A table of the values with the axis names as headers: the rows along the
    second-to-last axis, the columns along the last (a rank-1 tensor: one row), ``…`` for
    the middle of a long axis; for rank 3 or more the first slice of the leading axes, which
    the caption names. ``""`` for a rank-0 tensor or a leaf that is no concrete array."""
    if not isinstance(array, (jax.Array, np.ndarray)) or isinstance(array, jax.core.Tracer):
        return ""
    if isinstance(array, jax.Array) and (array.is_deleted() or not array.is_fully_addressable):
        return ""
    if array.ndim == 0:
        return ""
    values, kept = edges(array)
    shape = tuple(int(n) for n in array.shape)
    esc = html.escape
    col_axis = axes[-1]
    cols = _with_gaps([str(i) for i in kept[-1]], kept[-1], shape[-1])
    if len(kept) == 1:
        corner = f"{esc(axis_name(col_axis))} →"
        head = "".join(f"<th>{c}</th>" for c in cols)
        cells = _with_gaps([_cell(v) for v in values], kept[0], shape[0])
        body = "<tr><th></th>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>"
        return f"<table class='axjax-values'><tr><th>{corner}</th>{head}</tr>{body}</table>"
    row_axis = axes[-2]
    corner = f"{esc(axis_name(row_axis))} ↓ {esc(axis_name(col_axis))} →"
    head = "".join(f"<th>{c}</th>" for c in cols)
    rows: list[str] = []
    for i, r in enumerate(kept[0]):
        if len(kept[0]) < shape[-2] and i == EDGE:
            rows.append("<tr><th>⋮</th>" + "<td>⋮</td>" * len(cols) + "</tr>")
        cells = _with_gaps([_cell(v) for v in values[i]], kept[1], shape[-1])
        rows.append(f"<tr><th>{r}</th>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    note = _lead_note(axes, shape)
    caption = f"<caption>{esc(note)}</caption>" if note else ""
    return (
        f"<table class='axjax-values'>{caption}<tr><th>{corner}</th>{head}</tr>"
        + "".join(rows)
        + "</table>"
    )
