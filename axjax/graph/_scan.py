# pyright: reportOverlappingOverload=false
# (a mask's overloads by the scanned axis's position, which pyright takes as overlapping)
"""``fold`` and ``scan`` over a named axis: the paper's foldLeft and scanLeft (§6.3).

A *unit* maps ``(state, input) -> state``; ``fold(unit, over=Time)(init, xs)`` runs it
along axis ``Time`` of ``xs`` and returns the last state, ``scan`` returns every state,
stacked along ``Time``. Either lowers to one ``jax.lax.scan``: the unit is traced once,
whatever the length. States and inputs are Tensors or pytrees of Tensors (an LSTM state
is a pair); inside the unit ``xs`` has lost its ``Time`` axis.

A Bool ``mask`` over ``[*Batch, Time]`` handles sequences of different lengths: where it is
false the state is carried unchanged, so a right-padded batch ends on each sequence's
last real step (and a reverse fold starts there).

On graph nodes (``ax.Input``, ...) the unit is traced once, on placeholders for one step,
into the body of a single ``Loop`` node; compiling the graph runs this same function on
concrete Tensors, so the node lowers to one ``lax.scan`` too (any length, known or not).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Literal, TypeVar, TypeVarTuple, overload

import jax
import jax.numpy as jnp
from jax.sharding import AxisType

from ..core import AnyTensor, Axis, AxisError, Bool, DType, Tensor, TensorType
from ..core._internal import (
    PyTree,
    argument,
    axes_names,
    axis_name,
    check_axis_label,
    check_mask,
    describe,
    flatten,
    index_int,
    is_symbolic,
    is_tensor,
    public_call,
    unflatten,
    user_code,
    wrap,
)
from ..ops import broadcast, where
from ._loop import Carry, Loop, Slice
from ._nodes import mark

__all__ = ["Fold", "Scan", "ScanAt", "fold", "scan"]

S = TypeVar("S")
#: the unit: a function or a module called as ``unit(state, x_t) -> state``
U = TypeVar("U", bound=Callable[[Any, Any], Any])
#: the scanned axis
X = TypeVar("X", bound=Axis)
#: the position of the scanned axis in a scan's states
K = TypeVar("K", bound=int)
D = TypeVar("D", bound=DType)
D2 = TypeVar("D2", bound=DType)
Ss = TypeVarTuple("Ss")
Ss2 = TypeVarTuple("Ss2")
#: a mask's axes around the scanned one: its overloads have ``X`` among the first two or the
#: last two axes (every position up to rank 4), and take any Bool mask of rank 5 and more
Ms = TypeVarTuple("Ms")
M0 = TypeVar("M0")
M1 = TypeVar("M1")
M2 = TypeVar("M2")
M3 = TypeVar("M3")
M4 = TypeVar("M4")
#: a mask: Bool (over the batch axes and the scanned one; their order is free)
Mask = Tensor[Bool, *tuple[Any, ...]]


def _leading(
    t: AnyTensor, over: type[Axis], where_: str
) -> tuple[jax.Array, tuple[type[Axis], ...]]:
    """The array with ``over`` moved to the front (no copy when it is already there)."""
    i = t.axes.index(over)
    arr = t.array if i == 0 else jnp.moveaxis(t.array, i, 0)
    return arr, t.axes[:i] + t.axes[i + 1 :]


def _run(
    unit: Callable[[Any, Any], Any],
    over: type[Axis],
    init: PyTree,
    xs: PyTree,
    mask: AnyTensor | None,
    reverse: bool,
    keep: bool,
    at: int,
    where_: str,
) -> PyTree:
    """Run ``unit`` along ``over`` (fold, or scan when ``keep``): check the state and the
    sequences, then build one Loop node (on graph nodes) or run one ``lax.scan``."""
    over = check_axis_label(over, where_)
    x_leaves, x_def = flatten(xs)
    if not x_leaves:
        raise TypeError(f"{where_}: xs has no Tensors to run over")
    seqs = [*x_leaves, *([] if mask is None else [mask])]
    with argument("xs"):
        _length(x_leaves, over, where_)
    if mask is not None:
        check_mask(where_, mask)
    with argument("mask"):  # the sequences agree: a disagreement is the mask's
        length = _length(seqs, over, where_)
    s_leaves, s_def = flatten(init)
    with argument("init"):
        _check_init(s_leaves, over, where_)
    check = _state_check(s_leaves, s_def, over, where_)
    with user_code(where_):  # the unit: the user's code when they called fold/scan
        return _unit_run(
            unit,
            check,
            over,
            s_leaves,
            s_def,
            x_leaves,
            x_def,
            mask,
            reverse,
            keep,
            at,
            length,
            where_,
        )


def _unit_run(
    unit: Callable[[Any, Any], Any],
    check: Callable[[Any], list[AnyTensor]],
    over: type[Axis],
    s_leaves: list[Any],
    s_def: object,
    x_leaves: list[Any],
    x_def: object,
    mask: AnyTensor | None,
    reverse: bool,
    keep: bool,
    at: int,
    length: int | None,
    where_: str,
) -> object:
    """The loop itself: a graph node on graph nodes, else one ``lax.scan``."""
    if any(is_symbolic(t) for t in [*s_leaves, *x_leaves, *([] if mask is None else [mask])]):
        return _loop(
            unit,
            check,
            over,
            s_leaves,
            s_def,
            x_leaves,
            x_def,
            mask,
            reverse,
            keep,
            at,
            length,
            where_,
        )
    return _eager(
        unit, check, over, s_leaves, s_def, x_leaves, x_def, mask, reverse, keep, at, where_
    )


def _length(seqs: list[Any], over: type[Axis], where_: str) -> int | None:
    """The size of ``over`` the sequences (and mask) share (``None`` while open); each must
    be a Tensor with that axis."""
    for t in seqs:
        if not is_tensor(t):
            raise TypeError(f"{where_}: every leaf of xs must be a Tensor, got {type(t).__name__}")
        if over not in t.axes:
            raise AxisError(
                f"Cannot {where_} over {axis_name(over)}: {describe(t)} has no "
                f"axis {axis_name(over)} (every input must have it)"
            )
    n = {dict(zip(t.axes, t.shape, strict=True))[over] for t in seqs}
    if len(n - {None}) > 1:
        raise AxisError(
            f"Cannot {where_} over {axis_name(over)}: the inputs give it sizes "
            f"{sorted(n - {None})} (equal axes must have equal sizes)"
        )
    return next(iter(n - {None}), None)


def _check_init(s_leaves: list[Any], over: type[Axis], where_: str) -> None:
    """Raise unless every leaf of the initial state is a Tensor without axis ``over``."""
    for t in s_leaves:
        if not is_tensor(t):
            raise TypeError(
                f"{where_}: every leaf of the state must be a Tensor, got {type(t).__name__}"
            )
        if over in t.axes:
            raise AxisError(
                f"Cannot {where_} over {axis_name(over)}: the initial state "
                f"{describe(t)} has axis {axis_name(over)}"
            )


def _state_check(
    s_leaves: list[Any], s_def: object, over: type[Axis], where_: str
) -> Callable[[Any], list[AnyTensor]]:
    """``check(new)``: the leaves of the unit's result, if it is a state like ``s_leaves``
    (same structure, axes and dtypes); an ``AxisError`` otherwise."""
    s_axes = [t.axes for t in s_leaves]

    def check(new: PyTree) -> list[AnyTensor]:
        new_leaves, new_def = flatten(new)
        if new_def != s_def or any(
            not is_tensor(t) or t.axes != a for t, a in zip(new_leaves, s_axes, strict=True)
        ):
            got = ", ".join(describe(t) if is_tensor(t) else type(t).__name__ for t in new_leaves)
            want = ", ".join(f"[{axes_names(a)}]" for a in s_axes)
            raise AxisError(
                f"Cannot {where_} over {axis_name(over)}: the unit returned "
                f"({got}) but the state has axes ({want}); a unit must return "
                "a state like the one it is given (transpose it back)"
            )
        for t, s0 in zip(new_leaves, s_leaves, strict=True):
            if any(
                n is not None and m is not None and n != m
                for n, m in zip(t.shape, s0.shape, strict=True)
            ):
                raise AxisError(
                    f"Cannot {where_} over {axis_name(over)}: the unit returned "
                    f"{describe(t)} for the state {describe(s0)}; a unit must keep the "
                    "state's sizes (the state is carried from step to step)"
                )
            if t.dtype is not s0.dtype:
                raise AxisError(
                    f"Cannot {where_} over {axis_name(over)}: the unit returned "
                    f"{describe(t)} for the state {describe(s0)}; a unit must "
                    f"keep the state's dtype (convert with astype)"
                )
        return new_leaves

    return check


def _eager(
    unit: Callable[[Any, Any], Any],
    check: Callable[[Any], list[AnyTensor]],
    over: type[Axis],
    s_leaves: list[Any],
    s_def: object,
    x_leaves: list[Any],
    x_def: object,
    mask: AnyTensor | None,
    reverse: bool,
    keep: bool,
    at: int,
    where_: str,
) -> PyTree:
    """The Tensor form: one ``jax.lax.scan`` over the arrays, ``over`` moved to the front."""
    s_axes = [t.axes for t in s_leaves]
    moved = [_leading(t, over, where_) for t in x_leaves]
    m_arr, m_axes = (None, ()) if mask is None else _leading(mask, over, where_)

    def body(carry: list[Any], sliced: tuple[list[Any], Any]) -> tuple[list[Any], Any]:
        x_arrays, m = sliced
        state = unflatten(s_def, [wrap(a, ax_) for a, ax_ in zip(carry, s_axes, strict=True)])
        x_t = unflatten(x_def, [wrap(a, ax_) for a, (_, ax_) in zip(x_arrays, moved, strict=True)])
        m_t = None if m is None else wrap(m, m_axes)
        out = [t.array for t in _step(unit, check, state, x_t, m_t, where_)]
        return out, (out if keep else None)

    carry0 = [t.array for t in s_leaves]
    seqs = ([a for a, _ in moved], m_arr)
    if _explicit([*carry0, *seqs[0]]):
        carry0 = _match_carry(body, carry0, seqs)
    final, ys = jax.lax.scan(body, carry0, seqs, reverse=reverse)
    if not keep:
        return unflatten(s_def, [wrap(a, ax_) for a, ax_ in zip(final, s_axes, strict=True)])
    return unflatten(s_def, _stacked(ys, s_axes, over, at, where_))


def _explicit(arrays: list[Any]) -> bool:
    """Whether the arrays run on a mesh with Explicit axes: the current (abstract) mesh, or
    under ``jax.jit`` outside any mesh context the mesh in a traced array's type."""
    mesh = jax.sharding.get_abstract_mesh()
    if not mesh.axis_types:
        for a in arrays:
            m = getattr(getattr(jax.typeof(a), "sharding", None), "mesh", None)
            if m is not None and m.axis_types:
                mesh = m
                break
    return AxisType.Explicit in (mesh.axis_types or ())


def _match_carry(body: Callable[..., Any], carry0: list[Any], seqs: PyTree) -> list[Any]:
    """The initial state resharded to the sharding the unit gives its result.

    On an Explicit mesh a sharding is part of an array's type and ``lax.scan`` needs the
    carry's type unchanged by the body; but the unit's ops give their results the shardings
    of the axis rules, while the initial state (often zeros) may be replicated. So trace one
    step abstractly (``jax.eval_shape``: no computation) and reshard each leaf of the initial
    state whose sharding differs; run only on Explicit meshes, so nothing changes otherwise.
    """
    out = jax.eval_shape(lambda c, s: body(c, jax.tree.map(lambda a: a[0], s))[0], carry0, seqs)
    reshard: Callable[[Any, Any], Any] = jax.sharding.reshard
    return [
        c if jax.typeof(c).sharding.spec == o.sharding.spec else reshard(c, o.sharding)
        for c, o in zip(carry0, out, strict=True)
    ]


def _step(
    unit: Callable[[Any, Any], Any],
    check: Callable[[Any], list[AnyTensor]],
    state: PyTree,
    x_t: PyTree,
    m_t: AnyTensor | None,
    where_: str,
) -> list[AnyTensor]:
    """The leaves of the next state: the unit's, or the old ones where the mask is false."""
    new_leaves = check(unit(state, x_t))
    if m_t is None:
        return new_leaves
    old = flatten(state)[0]
    return [_keep(m_t, t_new, t_old, where_) for t_new, t_old in zip(new_leaves, old, strict=True)]


def _stacked(
    ys: list[Any], s_axes: list[tuple[type[Axis], ...]], over: type[Axis], at: int, where_: str
) -> list[AnyTensor]:
    """Every state of a scan as Tensors: axis ``over`` (leading in ``ys``) moved to ``at``."""
    out: list[AnyTensor] = []
    for arr, axes in zip(ys, s_axes, strict=True):
        k = _position(at, len(axes), where_)
        out.append(wrap(arr if k == 0 else jnp.moveaxis(arr, 0, k), axes[:k] + (over,) + axes[k:]))
    return out


def _position(at: int, rank: int, where_: str) -> int:
    k = at if at >= 0 else rank + 1 + at
    if not 0 <= k <= rank:
        raise ValueError(f"{where_}: at={at} is out of range for a state of rank {rank}")
    return k


def _without(t: AnyTensor, over: type[Axis]) -> TensorType:
    """The type of one step of ``t``: its type without axis ``over``."""
    keep = [i for i, a in enumerate(t.axes) if a is not over]
    return TensorType(t.dtype, tuple(t.axes[i] for i in keep), tuple(t.shape[i] for i in keep))


def _loop(
    unit: Callable[[Any, Any], Any],
    check: Callable[[Any], list[AnyTensor]],
    over: type[Axis],
    s_leaves: list[Any],
    s_def: object,
    x_leaves: list[Any],
    x_def: object,
    mask: AnyTensor | None,
    reverse: bool,
    keep: bool,
    at: int,
    length: int | None,
    where_: str,
) -> PyTree:
    """The graph form: trace ``unit`` once on placeholders into one ``Loop`` node.

    The axes are checked here, as the graph is built (the unit's ops run their type rules
    on the placeholders); compiling runs :func:`_run` on concrete Tensors (one lax.scan).
    """
    start = mark()
    carries: list[Any] = [Carry(t.type) for t in s_leaves]
    slices: list[Any] = [Slice(_without(t, over)) for t in x_leaves]
    results = check(unit(unflatten(s_def, carries), unflatten(x_def, slices)))
    if mask is not None:  # the mask's axes, checked on one step (the nodes are dropped)
        m_t: AnyTensor = Slice(_without(mask, over))
        for new, old in zip(results, carries, strict=True):
            _keep(m_t, new, old, where_)
    types = []
    for c, r in zip(carries, results, strict=True):
        shape = tuple(a if a is not None else b for a, b in zip(c.shape, r.shape, strict=True))
        if keep:
            k = _position(at, len(c.axes), where_)
            types.append(
                TensorType(
                    c.dtype, c.axes[:k] + (over,) + c.axes[k:], shape[:k] + (length,) + shape[k:]
                )
            )
        else:
            types.append(TensorType(c.dtype, c.axes, shape))
    flags = (
        ", reverse" * reverse
        + (f", at={at}" if keep and at else "")
        + ", masked" * (mask is not None)
    )
    what = f"{'Scan' if keep else 'Fold'}({axis_name(over)}{flags})"

    def lowering(
        unit_: Callable[[Any, Any], Any], init: PyTree, xs: PyTree, mask_: AnyTensor | None
    ) -> PyTree:
        return _run(unit_, over, init, xs, mask_, reverse, keep, at, where_)

    loop = Loop(
        what,
        lowering,
        s_leaves,
        x_leaves,
        mask,
        carries,
        slices,
        results,
        types,
        s_def,
        x_def,
        start,
    )
    return unflatten(s_def, loop.parts)


def _keep(m: AnyTensor, new: AnyTensor, old: AnyTensor, where_: str) -> AnyTensor:
    extra = [a for a in m.axes if a not in new.axes]
    if extra:
        raise AxisError(
            f"Cannot {where_} with mask {describe(m)}: the state {describe(new)} "
            f"has no axis {axis_name(extra[0])} (the mask may only have the "
            "state's batch axes and the scanned axis)"
        )
    return where(broadcast(m, new), new, old)


class Fold(Generic[U, X]):
    """``fold(unit, over=X)``: call it as ``(init, xs, mask=None)`` for the last state.

    The result has the initial state's type. Typed by the unit ``U`` and the axis ``X``
    (the mypy plugin checks the unit's arguments, the state it returns, ``xs`` and the mask
    against them; see docs/typing.md).
    """

    unit: U
    over: type[X]
    reverse: bool

    def __init__(self, unit: U, over: type[X], reverse: bool) -> None:
        self.unit, self.over, self.reverse = unit, over, reverse

    @overload
    def __call__(self, init: S, xs: PyTree, *, mask: None = None) -> S: ...
    @overload
    def __call__(self, init: S, xs: PyTree, *, mask: Tensor[Bool, X, *Ms]) -> S: ...
    @overload
    def __call__(self, init: S, xs: PyTree, *, mask: Tensor[Bool, *Ms, X]) -> S: ...
    @overload
    def __call__(self, init: S, xs: PyTree, *, mask: Tensor[Bool, M0, X, *Ms]) -> S: ...
    @overload
    def __call__(self, init: S, xs: PyTree, *, mask: Tensor[Bool, *Ms, X, M0]) -> S: ...
    @overload
    def __call__(
        self, init: S, xs: PyTree, *, mask: Tensor[Bool, M0, M1, M2, M3, M4, *Ms]
    ) -> S: ...
    @public_call("fold")
    def __call__(self, init: S, xs: PyTree, *, mask: Mask | None = None) -> S:
        out: S = _run(self.unit, self.over, init, xs, mask, self.reverse, False, 0, "fold")
        return out


class Scan(Generic[U, X]):
    """``scan(unit, over=X)`` (``at=0``): call it as ``(init, xs, mask=None)`` for every
    state, axis ``X`` first: a ``Tensor[D, *S]`` state gives ``Tensor[D, X, *S]``."""

    at = 0

    unit: U
    over: type[X]
    reverse: bool

    def __init__(self, unit: U, over: type[X], reverse: bool) -> None:
        self.unit, self.over, self.reverse = unit, over, reverse

    @overload
    def __call__(
        self, init: Tensor[D, *Ss], xs: PyTree, *, mask: None = None
    ) -> Tensor[D, X, *Ss]: ...
    @overload
    def __call__(
        self, init: Tensor[D, *Ss], xs: PyTree, *, mask: Tensor[Bool, X, *Ms]
    ) -> Tensor[D, X, *Ss]: ...
    @overload
    def __call__(
        self, init: Tensor[D, *Ss], xs: PyTree, *, mask: Tensor[Bool, *Ms, X]
    ) -> Tensor[D, X, *Ss]: ...
    @overload
    def __call__(
        self, init: Tensor[D, *Ss], xs: PyTree, *, mask: Tensor[Bool, M0, X, *Ms]
    ) -> Tensor[D, X, *Ss]: ...
    @overload
    def __call__(
        self, init: Tensor[D, *Ss], xs: PyTree, *, mask: Tensor[Bool, *Ms, X, M0]
    ) -> Tensor[D, X, *Ss]: ...
    @overload
    def __call__(
        self, init: Tensor[D, *Ss], xs: PyTree, *, mask: Tensor[Bool, M0, M1, M2, M3, M4, *Ms]
    ) -> Tensor[D, X, *Ss]: ...
    @overload
    def __call__(
        self, init: tuple[Tensor[D, *Ss], Tensor[D2, *Ss2]], xs: PyTree, *, mask: None = None
    ) -> tuple[Tensor[D, X, *Ss], Tensor[D2, X, *Ss2]]: ...
    @overload
    def __call__(
        self,
        init: tuple[Tensor[D, *Ss], Tensor[D2, *Ss2]],
        xs: PyTree,
        *,
        mask: Tensor[Bool, X, *Ms],
    ) -> tuple[Tensor[D, X, *Ss], Tensor[D2, X, *Ss2]]: ...
    @overload
    def __call__(
        self,
        init: tuple[Tensor[D, *Ss], Tensor[D2, *Ss2]],
        xs: PyTree,
        *,
        mask: Tensor[Bool, *Ms, X],
    ) -> tuple[Tensor[D, X, *Ss], Tensor[D2, X, *Ss2]]: ...
    @overload
    def __call__(
        self,
        init: tuple[Tensor[D, *Ss], Tensor[D2, *Ss2]],
        xs: PyTree,
        *,
        mask: Tensor[Bool, M0, X, *Ms],
    ) -> tuple[Tensor[D, X, *Ss], Tensor[D2, X, *Ss2]]: ...
    @overload
    def __call__(
        self,
        init: tuple[Tensor[D, *Ss], Tensor[D2, *Ss2]],
        xs: PyTree,
        *,
        mask: Tensor[Bool, *Ms, X, M0],
    ) -> tuple[Tensor[D, X, *Ss], Tensor[D2, X, *Ss2]]: ...
    @overload
    def __call__(
        self,
        init: tuple[Tensor[D, *Ss], Tensor[D2, *Ss2]],
        xs: PyTree,
        *,
        mask: Tensor[Bool, M0, M1, M2, M3, M4, *Ms],
    ) -> tuple[Tensor[D, X, *Ss], Tensor[D2, X, *Ss2]]: ...
    @overload
    def __call__(self, init: object, xs: PyTree, *, mask: None = None) -> PyTree: ...
    @overload
    def __call__(self, init: object, xs: PyTree, *, mask: Tensor[Bool, X, *Ms]) -> PyTree: ...
    @overload
    def __call__(self, init: object, xs: PyTree, *, mask: Tensor[Bool, *Ms, X]) -> PyTree: ...
    @overload
    def __call__(self, init: object, xs: PyTree, *, mask: Tensor[Bool, M0, X, *Ms]) -> PyTree: ...
    @overload
    def __call__(self, init: object, xs: PyTree, *, mask: Tensor[Bool, *Ms, X, M0]) -> PyTree: ...
    @overload
    def __call__(
        self, init: object, xs: PyTree, *, mask: Tensor[Bool, M0, M1, M2, M3, M4, *Ms]
    ) -> PyTree: ...
    @public_call("scan")
    def __call__(self, init: PyTree, xs: PyTree, *, mask: Mask | None = None) -> PyTree:
        return _run(self.unit, self.over, init, xs, mask, self.reverse, True, self.at, "scan")


class ScanAt(Generic[U, X, K]):
    """``scan(unit, over=X, at=k)`` with ``k != 0``: axis ``X`` at position ``k`` of each
    state Tensor (``K`` is the position, exact under the mypy plugin; gradual axes
    otherwise)."""

    unit: U
    over: type[X]
    reverse: bool
    at: K

    def __init__(self, unit: U, over: type[X], reverse: bool, at: K) -> None:
        self.unit, self.over, self.reverse, self.at = unit, over, reverse, at

    @overload
    def __call__(
        self, init: Tensor[D, *Ss], xs: PyTree, *, mask: None = None
    ) -> Tensor[D, *tuple[Any, ...]]: ...
    @overload
    def __call__(
        self, init: Tensor[D, *Ss], xs: PyTree, *, mask: Tensor[Bool, X, *Ms]
    ) -> Tensor[D, *tuple[Any, ...]]: ...
    @overload
    def __call__(
        self, init: Tensor[D, *Ss], xs: PyTree, *, mask: Tensor[Bool, *Ms, X]
    ) -> Tensor[D, *tuple[Any, ...]]: ...
    @overload
    def __call__(
        self, init: Tensor[D, *Ss], xs: PyTree, *, mask: Tensor[Bool, M0, X, *Ms]
    ) -> Tensor[D, *tuple[Any, ...]]: ...
    @overload
    def __call__(
        self, init: Tensor[D, *Ss], xs: PyTree, *, mask: Tensor[Bool, *Ms, X, M0]
    ) -> Tensor[D, *tuple[Any, ...]]: ...
    @overload
    def __call__(
        self, init: Tensor[D, *Ss], xs: PyTree, *, mask: Tensor[Bool, M0, M1, M2, M3, M4, *Ms]
    ) -> Tensor[D, *tuple[Any, ...]]: ...
    @overload
    def __call__(self, init: object, xs: PyTree, *, mask: None = None) -> PyTree: ...
    @overload
    def __call__(self, init: object, xs: PyTree, *, mask: Tensor[Bool, X, *Ms]) -> PyTree: ...
    @overload
    def __call__(self, init: object, xs: PyTree, *, mask: Tensor[Bool, *Ms, X]) -> PyTree: ...
    @overload
    def __call__(self, init: object, xs: PyTree, *, mask: Tensor[Bool, M0, X, *Ms]) -> PyTree: ...
    @overload
    def __call__(self, init: object, xs: PyTree, *, mask: Tensor[Bool, *Ms, X, M0]) -> PyTree: ...
    @overload
    def __call__(
        self, init: object, xs: PyTree, *, mask: Tensor[Bool, M0, M1, M2, M3, M4, *Ms]
    ) -> PyTree: ...
    @public_call("scan")
    def __call__(self, init: PyTree, xs: PyTree, *, mask: Mask | None = None) -> PyTree:
        return _run(self.unit, self.over, init, xs, mask, self.reverse, True, self.at, "scan")


def fold(unit: U, over: type[X], *, reverse: bool = False) -> Fold[U, X]:
    """The paper's foldLeft: run ``unit(state, x_t)`` along axis ``over``; return the last state.

    ``fold(unit, over=Time)(init, xs, mask=None)``: ``xs`` is a Tensor (or pytree of
    Tensors) with axis ``Time`` anywhere; ``mask`` is an optional Bool Tensor over
    ``[*Batch, Time]`` (false = padding: the state is carried unchanged). ``reverse=True``
    runs from the last step to the first. One ``jax.lax.scan``. The result has ``init``'s
    type.

    Example:
        >>> cell = ax.nn.GRUCell(Pixel, Hidden, 28, 128, key=key)
        >>> h = ax.fold(cell, over=Row)(cell.init_state({Batch: 32}), images)
        >>> # images [Batch, Row, Pixel] -> h [Batch, Hidden]
    """
    return Fold(unit, over, reverse)


@overload
def scan(  # type: ignore[overload-overlap]  # at=0 is also an int: the first wins
    unit: U,
    over: type[X],
    *,
    reverse: bool = False,
    at: Literal[0] = 0,
) -> Scan[U, X]: ...
@overload
def scan(unit: U, over: type[X], *, reverse: bool = False, at: int) -> ScanAt[U, X, int]: ...
def scan(
    unit: U, over: type[X], *, reverse: bool = False, at: int = 0
) -> Scan[U, X] | ScanAt[U, X, int]:
    """The paper's scanLeft: every state of :func:`fold`, stacked along ``over``.

    Returns the states after each step (not the initial one), with axis ``over`` inserted
    at position ``at`` of each state Tensor (0 by default: no data movement), so a state
    ``Tensor[D, *S]`` gives ``Tensor[D, over, *S]``. With ``reverse=True`` entry ``t`` is
    still the state after consuming step ``t``.

    Example:
        >>> hs = ax.scan(cell, over=Time)(cell.init_state({Batch: 32}), xs)
        >>> # xs [Batch, Time, In] -> hs [Time, Batch, Hidden]
    """
    if index_int("scan", "at", at) == 0:
        return Scan(unit, over, reverse)
    return ScanAt(unit, over, reverse, at)
