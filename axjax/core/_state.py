"""State handed back to a stateful call, checked against what it was made for: the one
check of an optimizer state, a KV cache, a model's parameters or a restored tree, at the
boundary where the state enters (construction, or a jitted step's trace, which JAX runs
again only for a new structure, shape or dtype: never per-step host work).

:func:`check_state` compares a tree with the one it should be (the structure, then each
leaf's axes, shape and dtype) and raises a ``TypeError`` naming the call, the argument,
what it must fit (what it was made for), what that needs and what it got;
:func:`check_not_donated` names a buffer that a donating step deleted, with the remedy.
:func:`state_mismatch` is the message both use, for a call that compares sizes of its own
(a cache made for another batch).

Example:
    >>> want = jax.eval_shape(optimizer.init, params)
    >>> check_state("TrainStep", "opt_state", opt_state, want,
    ...             fits="this step's optimizer and model",
    ...             remedy="build it with optimizer.init(...) or leave opt_state out")
"""

from __future__ import annotations

from typing import Any, cast

import jax
import jax.core  # jax.core.Tracer, imported by name for type checkers
import numpy as np

from ._axis import axis_name
from ._errors import HasType, describe

__all__ = [
    "check_not_donated",
    "check_some_data",
    "check_state",
    "donated_leaves",
    "outline",
    "state_mismatch",
]

#: an outline longer than this is cut (a large model's tree)
_WIDTH = 160


def _is_tensor(x: object) -> bool:
    return hasattr(x, "axes") and hasattr(x, "dtype") and hasattr(x, "shape")


def _leaf(x: object) -> str:
    if _is_tensor(x) and hasattr(x, "axes"):
        return describe(cast(HasType, x))  # a Tensor: axes, shape and dtype, checked above
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is None or dtype is None:
        return type(x).__name__
    return f"{np.dtype(dtype).name}{list(shape)}"


def outline(tree: object, depth: int = 3) -> str:
    """A short picture of a tree: its containers' types and field names, its leaves' dtypes
    and shapes (``(ScaleByAdamState(count=int32[], mu=..., nu=...), EmptyState())``)."""
    text = _outline(tree, depth)
    return text if len(text) <= _WIDTH else text[: _WIDTH - 3] + "..."


def _outline(tree: object, depth: int) -> str:
    if tree is None or _is_tensor(tree) or isinstance(tree, jax.Array | np.ndarray):
        return "None" if tree is None else _leaf(tree)
    if depth == 0:
        return type(tree).__name__
    fields = getattr(tree, "_fields", None)
    if isinstance(tree, tuple) and fields is not None:
        inner = ", ".join(f"{f}={_outline(getattr(tree, f), depth - 1)}" for f in fields)
        return f"{type(tree).__name__}({inner})"
    if isinstance(tree, tuple | list):
        inner = ", ".join(_outline(v, depth - 1) for v in tree)
        if isinstance(tree, list):
            return f"[{inner}]"
        return f"({inner}{',' if len(tree) == 1 else ''})"
    if isinstance(tree, dict):
        return "{" + ", ".join(f"{k!r}: {_outline(v, depth - 1)}" for k, v in tree.items()) + "}"
    return type(tree).__name__ if not hasattr(tree, "shape") else _leaf(tree)


def state_mismatch(
    where: str, argument: str, fits: str, needs: str, got: str, remedy: str, at: str = ""
) -> TypeError:
    """The one message: ``<where>: <argument> does not fit <fits>: it needs <needs>, got
    <got>[ (at <path>)]; <remedy>``."""
    place = f" (at {argument}{at})" if at else ""
    return TypeError(
        f"{where}: {argument} does not fit {fits}: it needs {needs}, got {got}{place}; {remedy}"
    )


def _path(path: tuple[Any, ...]) -> str:
    return jax.tree_util.keystr(path)


def donated_leaves(tree: object) -> list[str]:
    """The paths of the arrays of ``tree`` whose buffers were deleted (donated to a step)."""
    out: list[str] = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        deleted = getattr(leaf, "is_deleted", None)
        if (
            isinstance(leaf, jax.Array)
            and deleted is not None
            and not isinstance(leaf, jax.core.Tracer)
        ):
            if deleted():
                out.append(_path(path))
    return out


def check_not_donated(where: str, argument: str, tree: object, remedy: str) -> None:
    """A ``ValueError`` when an array of ``tree`` was donated to an earlier step (its buffer
    deleted), naming the argument, the first such leaf and the remedy."""
    gone = donated_leaves(tree)
    if gone:
        more = f" and {len(gone) - 1} more" if len(gone) > 1 else ""
        raise ValueError(
            f"{where}: {argument} holds arrays donated to an earlier step (their buffers were "
            f"deleted: {argument}{gone[0]}{more}); {remedy}"
        )


def check_state(
    where: str, argument: str, got: object, want: object, *, fits: str, remedy: str
) -> None:
    """``got`` against ``want`` (a tree of arrays, Tensors or ``jax.ShapeDtypeStruct``): a
    donated buffer, then the structure, then each leaf's axes, shape and dtype; the first
    difference is a ``TypeError`` naming ``where``, ``argument``, what it must ``fit``,
    what that needs and what it got (see :func:`state_mismatch`)."""
    check_not_donated(where, argument, got, remedy)
    g, g_def = jax.tree_util.tree_flatten_with_path(got, is_leaf=_is_tensor)
    w, w_def = jax.tree_util.tree_flatten_with_path(want, is_leaf=_is_tensor)
    if not _same_structure(g_def, w_def):
        g_paths = [p for p, _ in g]
        w_paths = [p for p, _ in w]
        first = next(
            (i for i, (a, b) in enumerate(zip(g_paths, w_paths, strict=False)) if a != b),
            min(len(g_paths), len(w_paths)),
        )
        at = _path(w_paths[first]) if first < len(w_paths) else ""
        raise state_mismatch(where, argument, fits, outline(want), outline(got), remedy, at)
    for (path, a), (_, b) in zip(g, w, strict=True):
        if _signature(a) != _signature(b):
            raise state_mismatch(where, argument, fits, _leaf(b), _leaf(a), remedy, _path(path))


def _same_structure(a: Any, b: Any) -> bool:
    """Two ``PyTreeDef``s (jaxlib has no stub the type checkers can use) are equal."""
    same: bool = a == b
    return same


def _signature(x: object) -> object:
    """What a leaf must match: a Tensor's dtype, axes and sizes; an array's shape and dtype."""
    if _is_tensor(x) and hasattr(x, "axes"):
        return _leaf(x)
    dtype = getattr(x, "dtype", None)
    return (getattr(x, "shape", None), None if dtype is None else np.dtype(dtype))


def check_some_data(where: str, argument: str, t: Any, over: tuple[Any, ...]) -> None:
    """The empty-data rule of ``fit`` and ``Loader``, for a reduction over data: a
    ``ValueError`` naming ``argument`` when an axis of ``over`` has size 0 (a mean over no
    examples is undefined, never a NaN)."""
    empty = [
        f"{axis_name(a)}=0"
        for a, n in zip(t.axes, t.shape, strict=True)
        if a in over and n is not None and n == 0
    ]
    if empty:
        raise ValueError(
            f"{where}: {argument} holds no data ({', '.join(empty)}): a mean over no examples "
            "is undefined; leave empty batches out"
        )
