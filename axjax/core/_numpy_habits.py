"""numpy habits on a Tensor: each one keeps the axes or says how axjax spells it.

A Tensor holds an array, but its dimensions are named, so what numpy and ``jax.numpy`` do
by position would lose the names (or, worse, silently apply to the storage order):

- a numpy function given Tensors (``np.concatenate([a, b])``, ``np.sum(t)``) goes to
  ``Tensor.__array_function__``: the few with a one-to-one axjax op that keeps the axes
  run it (``np.where(c, a, b)`` is ``ax.where``; ``np.shape``, ``np.ndim`` and ``np.size``
  read the sizes); every other one raises a ``TypeError`` naming the axjax spelling
  (``ax.concat(ts, Axis)``) — never a bare array;
- ``jnp.asarray(t)`` and ``jnp.array(t)`` ask numpy for the Tensor's dtype
  (``np.result_type``, dispatched here): a ``ValueError`` naming ``t.array``. (JAX's
  ``__jax_array__`` hook is not used: ``jax_array + t`` would call it before ``Tensor``'s
  own operator, whose message names the op);
- numpy array attributes (``t.T``, ``t.sum()``, ``t.reshape(...)``) raise an
  ``AttributeError`` naming the axjax spelling (``Tensor.__getattr__``, for numpy's names
  only: any other missing attribute is the plain ``AttributeError``).

Example:
    >>> np.concatenate([t, t])
    TypeError: Cannot apply numpy.concatenate to Tensor[F32, Batch=2]: numpy would drop
    the axes (use ax.concat(ts, Axis), which keeps the axes; ...)
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ._registry import declared_ops

__all__ = [
    "NUMPY_ATTRIBUTES",
    "numpy_attribute_error",
    "numpy_function",
    "numpy_function_error",
    "jax_array_error",
]

_REDUCE = "ax.{}(t, Axis)"
_CONCAT = "ax.concat(ts, Axis)"
_TRANSPOSE = "ax.transpose(t, *axes) (name the new order)"
_RESHAPE = "ax.flatten(t, (A, B), AB) or ax.unflatten(t, AB, (A, B), sizes)"
_CONTRACT = "ax.contract(a, b, over=Axis) or a @ b (axes matched by name)"
#: fixes that are not an op keeping the axes (used whole, in place of "use ...")
_COPY = (
    "Tensors are immutable: use t itself (ax.tensor(jnp.copy(t.array), *t.axes) for a new buffer)"
)
_COMPARE = (
    "compare the plain values in one axis order: np.asarray(ax.transpose(a, *b.axes)) with "
    "np.asarray(b)"
)
_WHOLE = frozenset({_COPY, _COMPARE})
_LIKE = "ax.{}(t.shape, *t.axes{}dtype=t.dtype)"

#: numpy function name -> the axjax spelling that keeps the axes
_FUNCTIONS: dict[str, str] = {
    **dict.fromkeys(
        ["concatenate", "concat", "hstack", "vstack", "dstack", "column_stack", "append"],
        _CONCAT,
    ),
    "stack": "ax.stack(ts, NewAxis)",
    **{n: _REDUCE.format("sum") for n in ("sum", "nansum")},
    **{n: _REDUCE.format("mean") for n in ("mean", "nanmean", "average")},
    **{n: _REDUCE.format("max") for n in ("max", "amax", "nanmax")},
    **{n: _REDUCE.format("min") for n in ("min", "amin", "nanmin")},
    **{n: _REDUCE.format("var") for n in ("var", "nanvar")},
    **{n: "ax.sqrt(ax.var(t, Axis))" for n in ("std", "nanstd")},
    **{n: _REDUCE.format("argmax") for n in ("argmax", "nanargmax")},
    **{n: "ax.argmax(-t, Axis)" for n in ("argmin", "nanargmin")},
    "any": "ax.max(t, Axis) (of a Bool tensor: true where any entry is)",
    "all": "ax.min(t, Axis) (of a Bool tensor: true where every entry is)",
    **dict.fromkeys(
        ["transpose", "permute_dims", "moveaxis", "swapaxes", "rollaxis", "matrix_transpose"],
        _TRANSPOSE,
    ),
    **dict.fromkeys(["reshape", "ravel"], _RESHAPE),
    "squeeze": "ax.squeeze(t, Axis)",
    "expand_dims": "ax.expand_dims(t, NewAxis)",
    **dict.fromkeys(
        ["dot", "tensordot", "inner", "vdot", "einsum", "outer", "vecdot", "matvec", "vecmat"],
        _CONTRACT,
    ),
    **dict.fromkeys(["take", "take_along_axis"], "ax.take(t, Axis, indices)"),
    **dict.fromkeys(["tile", "repeat"], "ax.tile(t, Axis, n)"),
    **dict.fromkeys(["broadcast_to", "broadcast_arrays"], "ax.broadcast(t, axes, sizes={...})"),
    "clip": "ax.minimum(ax.maximum(t, low), high)",
    **dict.fromkeys(
        ["split", "array_split", "unstack"], "ax.unstack(t, Axis) or ax.slice(t, Axis, start, stop)"
    ),
    "copy": _COPY,
    "zeros_like": _LIKE.format("zeros", ", "),
    "ones_like": _LIKE.format("full", ", value=1, "),
    "empty_like": _LIKE.format("zeros", ", "),
    "full_like": _LIKE.format("full", ", value=v, "),
    "norm": "ax.sqrt(ax.sum(ax.square(t), Axis))",
    **dict.fromkeys(["isclose", "allclose", "array_equal", "array_equiv"], _COMPARE),
}

#: numpy array attribute -> the axjax spelling; the names are numpy's own (``dir(np.ndarray)``
#: and a few of ``jax.Array``'s), so any other missing attribute stays a plain AttributeError
_ATTRIBUTES: dict[str, str] = {
    **dict.fromkeys(["T", "mT", "transpose", "swapaxes"], _TRANSPOSE),
    **{n: _FUNCTIONS[n] for n in ("sum", "mean", "max", "min", "var", "std", "argmax")},
    **{n: _FUNCTIONS[n] for n in ("argmin", "any", "all", "squeeze", "take", "repeat", "clip")},
    **dict.fromkeys(["reshape", "ravel", "flatten", "resize"], _RESHAPE),
    "dot": _CONTRACT,
    "copy": _COPY,
    "tolist": "t.array.tolist() (nested in the order of t.axes)",
    "at": "ax.index(t, Axis, i) / ax.slice(t, Axis, start, stop) to read, ax.where to update",
}
_PUBLIC_NDARRAY = (n for n in dir(np.ndarray) if not n.startswith("_"))
#: every numpy array attribute that a Tensor answers with the axjax spelling
NUMPY_ATTRIBUTES: frozenset[str] = frozenset(_ATTRIBUTES).union(_PUBLIC_NDARRAY)


def _fix(spelling: str | None) -> str:
    if spelling in _WHOLE:
        return spelling
    if spelling is None:
        return (
            "axjax has no such op: compute on t.array, the jax.Array with its dimensions in "
            "the order of t.axes, and name the result's axes with ax.tensor(result, *axes)"
        )
    return f"use {spelling}, which keeps the axes"


def numpy_attribute_error(shown: str, name: str) -> AttributeError:
    """The error for ``t.<name>``, a numpy array attribute that a Tensor does not have."""
    member = getattr(np.ndarray, name, None)
    call = "()" if callable(member) else ""
    spelling = _ATTRIBUTES.get(name)
    if spelling is None:
        kind = "method" if call else "attribute"
        fix = (
            f"axjax has no such op: compute on t.array (the jax.Array, dimensions in the "
            f"order of t.axes; t.array.{name} if it has one) and name the result's axes "
            "with ax.tensor(result, *axes)"
        )
        return AttributeError(
            f"{shown} has no .{name}{call} (a numpy array {kind}): axes are named; {fix}"
        )
    fix = spelling if spelling in _WHOLE else f"use {spelling}"
    return AttributeError(f"{shown} has no .{name}{call}: axes are named; {fix}")


def numpy_function_error(shown: str, name: str) -> TypeError:
    """The error for a numpy function given a Tensor, naming the axjax spelling."""
    short = name.rsplit(".", 1)[-1]
    spelling = _FUNCTIONS.get(name, _FUNCTIONS.get(short))
    return TypeError(
        f"Cannot apply numpy.{name} to {shown}: numpy would drop the axes ({_fix(spelling)}; "
        "np.asarray(t) gives the plain values in the order of t.axes)"
    )


def jax_array_error(shown: str) -> ValueError:
    """The error for ``jnp.asarray(t)``, ``jnp.array(t)`` (which call ``np.result_type``).

    A ``ValueError``, as numpy's own was: JAX takes a ``TypeError`` there as "try
    ``np.asarray`` instead", which would drop the axes silently."""
    return ValueError(
        f"Cannot convert {shown} to a JAX array implicitly (jnp.asarray, jnp.array, "
        "np.result_type: the axes would be lost): use t.array, the jax.Array with its "
        "dimensions in the order of t.axes (t.array.dtype for its numpy dtype), or the "
        "axjax op, which keeps the axes (docs/ops.md lists them)"
    )


def _qualified(func: Callable[..., Any]) -> str:
    """``concatenate``, ``linalg.norm``: the function's name under ``numpy``."""
    module = getattr(func, "__module__", "") or ""
    name = getattr(func, "__name__", repr(func))
    sub = module.removeprefix("numpy").lstrip(".").split(".")[0]
    return f"{sub}.{name}" if sub and not sub.startswith("_") else name


def _sizes(x: Any) -> tuple[int, ...]:
    """The sizes in storage order (a Tensor's, or whatever numpy makes of ``x``)."""
    array = getattr(x, "_array", None)
    return tuple(array.shape) if array is not None else tuple(np.shape(x))


def _where(cond: object, a: object, b: object) -> object:
    spec = next(s for s in declared_ops() if "where" in s.functions and s.namespace == "axjax")
    return sys.modules[spec.module].where(cond, a, b)


#: numpy functions that a Tensor answers itself: a one-to-one axjax op keeping the axes, or
#: a read of the sizes. Each takes the call's ``args`` and ``kwargs``, or returns
#: ``NotImplemented`` for a form it does not serve (then the call is an error).
_SERVED: dict[str, Callable[[tuple[Any, ...], dict[str, Any]], Any]] = {
    "where": lambda args, kw: _where(*args) if len(args) == 3 and not kw else NotImplemented,
    "shape": lambda args, kw: _sizes(args[0]) if len(args) == 1 and not kw else NotImplemented,
    "ndim": lambda args, kw: len(_sizes(args[0])) if len(args) == 1 and not kw else NotImplemented,
    "size": lambda args, kw: (
        math.prod(_sizes(args[0])) if len(args) == 1 and not kw else NotImplemented
    ),
}


def numpy_function(
    shown: str, func: Callable[..., object], args: tuple[object, ...], kwargs: dict[str, object]
) -> object:
    """What ``func(*args, **kwargs)`` (a numpy function given Tensors) gives: the axjax op's
    result, or a ``TypeError`` naming the axjax spelling."""
    name = _qualified(func)
    if name == "result_type":  # what jnp.asarray(t) and jnp.array(t) ask first
        raise jax_array_error(shown)
    serve = _SERVED.get(name)
    if serve is not None:
        out = serve(args, kwargs)
        if out is not NotImplemented:
            return out
    raise numpy_function_error(shown, name)
