"""The one rule for values that become indices or labels, and its checked mode under ``jit``.

Wherever data becomes an index or a class label (``ax.take``, ``ax.index``, ``ax.one_hot``,
``Embedding``, the losses and metrics, attention's key lengths, ``Dataset``, ``Loader``,
``TreeBatch.from_trees``), the values pass through :func:`check_indices`. The rule:

- **integral**: an integer dtype, or (host data) whole floats; NaN, infinity, ``0.7`` and
  bools are refused, never truncated;
- **in range**: ``low <= v < n`` (``n``: the table's rows, the classes, the axis size);
- **representable** in the index dtype, int32: ``2**32 + 1`` is refused, never wrapped.

Concrete values (eager Tensors, numpy arrays, lists) are always checked: a ``ValueError``
(``TypeError`` for a wrong kind) names the caller, the first bad value, its position and
the range. Traced values (inside ``jax.jit``, ``vmap``, ``scan``) cannot be read while
tracing, so nothing is checked and each caller's documented fallback applies (a gather
clamps, a one-hot row is zero, a loss is zero), unless the function is traced inside
:func:`checkify_indices`: there each check is a ``jax.experimental.checkify`` check whose
message is the eager one with the value and position filled in.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Generator, Sequence
from contextvars import ContextVar
from typing import Any, cast

import jax
import jax.core  # jax.core.Tracer, imported by name for type checkers
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from ._axis import Axis, axis_name
from ._tensor import Tensor

__all__ = ["INDEX_DTYPE", "check_indices", "checking_indices", "checkify_indices"]

#: The dtype every index and label becomes.
INDEX_DTYPE = np.dtype(np.int32)
_I32_MAX = int(np.iinfo(np.int32).max)
_I32_MIN = int(np.iinfo(np.int32).min)

#: Inside :func:`checkify_indices`: traced values are checked with ``checkify.check``.
_CHECKED: ContextVar[bool] = ContextVar("axjax_checked_indices", default=False)


@contextlib.contextmanager
def checking_indices() -> Generator[None, None, None]:
    """Inside the block (in this thread) traced index and label values are checked with
    ``checkify.check``; the code must be traced under ``checkify.checkify`` (see
    :func:`checkify_indices`, which does both)."""
    token = _CHECKED.set(True)
    try:
        yield
    finally:
        _CHECKED.reset(token)


def checkify_indices(fn: Callable[..., Any]) -> Callable[..., tuple[checkify.Error, Any]]:
    """``fn`` with every index and label value checked, traced values included.

    The checked mode for debugging: ``fn`` is traced with the index checks on, through
    ``jax.experimental.checkify.checkify(fn, errors=checkify.user_checks)``, so the call
    returns ``(error, result)``; ``error.throw()`` raises (a ``ValueError``) naming the
    first bad value, as the eager check does. It works under ``jax.jit`` (either side),
    ``jax.grad`` and the ops' ``custom_vjp``; the arguments are pytrees of arrays (Tensors,
    layers), as for ``checkify.checkify``.

    Example:
        >>> checked = jax.jit(ax.checkify_indices(lambda emb, ids: emb(ids)))
        >>> err, vectors = checked(emb, ids)
        >>> err.throw()      # ValueError: Embedding(...): id 10 (at Time=1) is not a row ...
    """
    checked = checkify.checkify(fn, errors=checkify.user_checks)

    @functools.wraps(fn)
    def run(*args: object, **kwargs: object) -> tuple[checkify.Error, Any]:
        with checking_indices():
            return checked(*args, **kwargs)

    return run


def _plural(what: str) -> str:
    return {"index": "indices"}.get(what, what + "s")


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _position(at: Sequence[type[Axis]] | str, pos: Sequence[Any]) -> str:
    """`` (at Batch=1)`` / `` (at example 2)``; empty for a scalar."""
    if not len(pos):
        return ""
    if isinstance(at, str):
        return f" (at {at} {', '.join(str(p) for p in pos)})"
    if len(at) != len(pos):
        return f" (at {tuple(int(p) for p in pos)})"
    return " (at " + ", ".join(f"{axis_name(a)}={p}" for a, p in zip(at, pos, strict=True)) + ")"


def _host(values: object) -> np.ndarray[Any, Any]:
    """``values`` as a numpy array; Python ints beyond int64 stay exact (object dtype)."""
    try:
        return np.asarray(values)
    except OverflowError:
        return np.asarray(values, dtype=object)


def _whole(
    where: str, host: np.ndarray[Any, Any], what: str, at: Sequence[type[Axis]] | str
) -> np.ndarray[Any, Any]:
    """``host`` as an array of exact integers (int64, or object for huge ones); a
    ``TypeError`` for a bool or a non-number, a ``ValueError`` for a fraction, NaN or inf."""
    kind = host.dtype.kind
    plural = _plural(what)
    if kind == "b":
        raise TypeError(
            f"{where}: {plural} must be integers, got bools (True is not a number: "
            "convert with astype(int) if 0/1 is meant)"
        )
    if kind in "iu":
        return host
    if kind == "f":
        ok = np.isfinite(host) & (host == np.floor(np.where(np.isfinite(host), host, 0)))
        if not ok.all():
            first = tuple(int(i) for i in np.argwhere(~ok)[0])
            raise ValueError(
                f"{where}: {what} {float(host[first])!r}{_position(at, first)} is not a whole "
                "number: "
                f"{plural} must be integers, never rounded or truncated (fix the data, or "
                "round it yourself if that is meant)"
            )
        if host.size and np.abs(host).max() < 2.0**62:
            return host.astype(np.int64)
        return np.vectorize(int, otypes=[object])(host) if host.size else host.astype(np.int64)
    if kind == "O":
        flat = host.ravel()
        for i, v in enumerate(flat):
            if isinstance(v, bool | np.bool_) or not isinstance(v, int | np.integer):
                where_in = tuple(int(p) for p in np.unravel_index(i, host.shape))
                raise TypeError(
                    f"{where}: {what} {v!r}{_position(at, where_in)} is not an integer "
                    f"({plural} must be integers)"
                )
        return host
    raise TypeError(f"{where}: {plural} must be integers, got {host.dtype} values")


def _outside(host: np.ndarray[Any, Any], lo: int, hi: int) -> np.ndarray[Any, Any]:
    """Where whole ``host`` values fall outside ``[lo, hi)``."""
    return np.asarray((host < lo) | (host >= hi), dtype=bool)


def check_indices(
    where: str,
    values: object,
    n: int | None,
    *,
    low: int = 0,
    what: str = "index",
    noun: str = "",
    of: str = "",
    at: Sequence[type[Axis]] | str | None = None,
    fix_high: str = "",
    fix_low: str = "",
) -> np.ndarray[Any, Any] | None:
    """Check index/label ``values`` against the one rule: integral, in ``[low, n)``,
    representable as int32 (``n=None``: only that).

    ``values``: a Tensor (its axes name the position), a JAX or numpy array, or a list.
    ``what``: the word for one value (``"label"``, ``"id"``); ``noun``: what a good one is
    (``"a class"``); ``of``: what the range belongs to (``"for Class of size 3"``); ``at``:
    the axes of the values, or a word for the rows of host data (``"example"``);
    ``fix_high``/``fix_low``: the advice for a value too large (``{top}`` becomes the largest
    value + 1) / too small.

    Returns the values as an int32 numpy array when they are concrete, ``None`` when they
    are traced (checked with ``checkify`` inside :func:`checkify_indices`, else not at all)
    or symbolic (a graph node: checked when the graph runs).
    """
    axes: Sequence[type[Axis]] | str = () if at is None else at
    if getattr(type(values), "_is_symbolic", False):
        return None  # a graph node: its values exist when the graph runs
    arr = values
    if isinstance(values, Tensor):
        if not np.issubdtype(np.dtype(values.dtype.numpy), np.integer):
            return None  # a float or Bool Tensor: the caller's type rule reports the dtype
        arr = values.array
        axes = tuple(values.axes) if at is None else at
    hi = _I32_MAX + 1 if n is None else min(int(n), _I32_MAX + 1)
    lo = max(int(low), _I32_MIN)
    noun = noun or f"a valid {what}"
    plural = _plural(what)
    if isinstance(arr, jax.core.Tracer):
        if _CHECKED.get():
            _traced_check(where, cast(jax.Array, arr), lo, hi, what, noun, of, axes)
        return None
    host = _whole(where, _host(arr), what, axes)
    if host.size == 0:
        return host.astype(INDEX_DTYPE)
    bad = _outside(host, lo, hi)
    if not bad.any():
        return host.astype(INDEX_DTYPE)
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    value, count = int(host[first]), int(bad.sum())
    more = f"; {count} of {host.size} {plural} are out of range" if count > 1 else ""
    if n is None or n > _I32_MAX + 1:
        rule = f"lie in [{lo}, {_I32_MAX}] (they become int32)"
    else:
        rule = f"lie in [{lo}, {hi}){f' {of}' if of else ''}"
    if value >= hi:
        fix = (
            fix_high.format(top=int(host.max()) + 1)
            if fix_high and hi == n
            else f"fix the {plural}"
        )
    else:
        fix = fix_low or f"fix the {plural}"
    unfit = value > _I32_MAX or value < _I32_MIN
    problem = "does not fit int32, the index dtype" if unfit else f"is not {noun}"
    raise ValueError(
        f"{where}: {what} {value}{_position(axes, first)} {problem}: {plural} must "
        f"{rule}{more} ({fix})"
    )


def _traced_check(
    where: str,
    arr: jax.Array,
    lo: int,
    hi: int,
    what: str,
    noun: str,
    of: str,
    axes: Sequence[type[Axis]] | str,
) -> None:
    """The rule as a ``checkify.check`` on traced integer values (the dtype is static and
    was checked by the caller), its message the eager one with the first bad value."""
    a = jnp.asarray(arr)
    if a.size == 0 or not jnp.issubdtype(a.dtype, jnp.integer):
        return
    bad = (a < lo) | (a >= hi)
    first = jnp.argmax(jnp.ravel(bad))
    pos = jnp.unravel_index(first, a.shape) if a.ndim else ()
    # checkify formats positional arguments: {0} the value, {1}... its position
    slots = ["{" + str(i + 1) + "}" for i in range(len(pos))]
    if isinstance(axes, str) or len(axes) != len(pos):
        at = f" (at {', '.join(slots)})" if slots else ""
    else:
        named = (f"{_escape(axis_name(x))}={p}" for x, p in zip(axes, slots, strict=True))
        at = f" (at {', '.join(named)})" if slots else ""
    rule = f"lie in [{lo}, {hi}){f' {of}' if of else ''}"
    message = (
        f"{_escape(where)}: {what} {{0}}{at} is not {_escape(noun)}: "
        f"{_plural(what)} must {_escape(rule)}"
    )
    checkify.check(~jnp.any(bad), message, jnp.ravel(a)[first], *pos)
