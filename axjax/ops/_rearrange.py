"""``ax.rearrange``: split, merge and reorder axes by a pattern of axis *names*.

``"Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim"`` names the tensor's axes on the left
and the result's on the right. A name is an axis class: one of the tensor's axes, or one
passed to the call, after the pattern (``ax.rearrange(x, pattern, Head, HeadDim, Head=4)``)
or as a keyword (``Head=ax.nn.Head``, ``Head=(ax.nn.Head, 4)``). Nothing else is looked
up (no caller's scope, no registry of names): the call means the same wherever it is
written, and the mypy plugin resolves a literal pattern exactly as the run does.
A group ``(A B)`` on the left splits one of the tensor's axes (the
one named ``Embed=(A B)``, else the next axis no plain name claims); on the right it merges
``A`` and ``B`` into the axis named before it: ``Embed=(Head HeadDim)``. The call lowers to
``unflatten``, ``flatten`` and ``transpose``, so its values are theirs, bit for bit.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, TypeGuard, TypeVar, overload

from ..core import Axis, AxisError, DType, Tensor
from ..core._internal import axes_names, positive_int
from ._shape import AnyOf, flatten, transpose, unflatten

__all__ = ["rearrange"]

D = TypeVar("D", bound=DType)
A0 = TypeVar("A0", bound=Axis)  # rearrange(out=)'s axes
A1 = TypeVar("A1", bound=Axis)
A2 = TypeVar("A2", bound=Axis)
A3 = TypeVar("A3", bound=Axis)
A4 = TypeVar("A4", bound=Axis)
A5 = TypeVar("A5", bound=Axis)

_TOKEN = re.compile(r"\s*(?:([A-Za-z_]\w*)\s*=\s*\(|(\()|(\))|([A-Za-z_]\w*))")


@dataclass(frozen=True)
class _Entry:
    """One place of a pattern side: a plain name, or a group (``name`` = its axis, or
    ``None`` when unnamed) of ``parts``."""

    name: str | None
    parts: tuple[str, ...] | None = None


def _names(e: _Entry) -> tuple[str, ...]:
    """The axes an entry stands for on its side: a group's parts, else its name."""
    if e.parts is not None:
        return e.parts
    return (e.name,) if e.name is not None else ()


def _fail(pattern: str, why: str) -> AxisError:
    return AxisError(f"Cannot rearrange by {pattern!r}: {why}")


def _parse_side(side: str, pattern: str) -> list[_Entry]:
    entries: list[_Entry] = []
    pos = 0
    group: list[str] | None = None
    group_name: str | None = None
    while pos < len(side):
        if side[pos:].strip() == "":
            break
        m = _TOKEN.match(side, pos)
        if m is None:
            raise _fail(pattern, f"cannot read {side[pos:].strip()!r} (names, '(', ')')")
        named_open, open_, close, name = m.groups()
        pos = m.end()
        if named_open is not None or open_ is not None:
            if group is not None:
                raise _fail(pattern, "groups do not nest")
            group, group_name = [], named_open
        elif close is not None:
            if group is None:
                raise _fail(pattern, "')' without '('")
            if not group:
                raise _fail(pattern, "an empty group '()'")
            entries.append(_Entry(group_name, tuple(group)))
            group = None
        elif group is not None:
            group.append(str(name))
        else:
            entries.append(_Entry(str(name)))
    if group is not None:
        raise _fail(pattern, "'(' without ')'")
    return entries


def _is_axis(v: object) -> TypeGuard[type[Axis]]:
    return isinstance(v, type) and issubclass(v, Axis) and v is not Axis


def _resolve(
    x: AnyOf[D],
    pattern: str,
    names_in: set[str],
    new: tuple[type[Axis], ...],
    axes: dict[str, int | type[Axis] | tuple[type[Axis], int]],
) -> tuple[dict[str, type[Axis]], dict[str, int]]:
    """The class and the given size of each name: ``x``'s axes, the classes passed after the
    pattern, the keywords; an unknown name, a class or keyword the pattern does not name, or
    two classes for one name is an ``AxisError``."""
    have = {a.__name__: a for a in x.axes}
    classes: dict[str, type[Axis]] = dict(have)
    sizes: dict[str, int] = {}

    def claim(name: str, cls: type[Axis], how: str) -> None:
        if classes.get(name, cls) is not cls:
            raise _fail(pattern, f"{how} is another class than the axis {name} it names")
        classes[name] = cls

    for cls in new:
        if not _is_axis(cls):
            raise TypeError(
                f"rearrange: after the pattern come the axis classes it names, got {cls!r}"
            )
        if cls.__name__ not in names_in:
            raise _fail(pattern, f"the axis class {cls.__name__} names no axis of the pattern")
        claim(cls.__name__, cls, f"the class {cls.__module__}.{cls.__qualname__}")
    for name, value in axes.items():
        if name not in names_in:
            raise _fail(pattern, f"the keyword {name}= names no axis of the pattern")
        given: object = value
        size: object = None
        if isinstance(given, tuple) and len(given) == 2 and _is_axis(given[0]):
            claim(name, given[0], f"{name}=")
            size = given[1]
        elif _is_axis(given):
            claim(name, given, f"{name}=")
        else:
            size = given
        if size is not None:
            sizes[name] = positive_int(
                "rearrange", f"axes keyword {name}= (a size, an axis class or both)", size
            )
    for name in sorted(names_in - set(classes)):
        raise _fail(
            pattern,
            f"unknown name {name}: not an axis of x ({axes_names(x.axes)}) nor a class "
            f"passed; pass it after the pattern (rearrange(x, pattern, {name})) or as "
            f"{name}=TheAxisClass",
        )
    return classes, sizes


# rearrange(out=(A, B)) is Tensor[D, A, B] in every checker (the plugin also checks the pattern)
# BEGIN GENERATED by tools/gen_overloads.py: rearrange's result by out= (do not edit)
@overload
def rearrange(
    x: Tensor[D, *tuple[Any, ...]],
    pattern: str,
    *new: type[Axis],
    out: None = None,
    **axes: int | type[Axis] | tuple[type[Axis], int],
) -> Tensor[D, *tuple[Any, ...]]: ...
@overload
def rearrange(
    x: Tensor[D, *tuple[Any, ...]],
    pattern: str,
    *new: type[Axis],
    out: tuple[type[A0]],
    **axes: int | type[Axis] | tuple[type[Axis], int],
) -> Tensor[D, A0]: ...
@overload
def rearrange(
    x: Tensor[D, *tuple[Any, ...]],
    pattern: str,
    *new: type[Axis],
    out: tuple[type[A0], type[A1]],
    **axes: int | type[Axis] | tuple[type[Axis], int],
) -> Tensor[D, A0, A1]: ...
@overload
def rearrange(
    x: Tensor[D, *tuple[Any, ...]],
    pattern: str,
    *new: type[Axis],
    out: tuple[type[A0], type[A1], type[A2]],
    **axes: int | type[Axis] | tuple[type[Axis], int],
) -> Tensor[D, A0, A1, A2]: ...
@overload
def rearrange(
    x: Tensor[D, *tuple[Any, ...]],
    pattern: str,
    *new: type[Axis],
    out: tuple[type[A0], type[A1], type[A2], type[A3]],
    **axes: int | type[Axis] | tuple[type[Axis], int],
) -> Tensor[D, A0, A1, A2, A3]: ...
@overload
def rearrange(
    x: Tensor[D, *tuple[Any, ...]],
    pattern: str,
    *new: type[Axis],
    out: tuple[type[A0], type[A1], type[A2], type[A3], type[A4]],
    **axes: int | type[Axis] | tuple[type[Axis], int],
) -> Tensor[D, A0, A1, A2, A3, A4]: ...
@overload
def rearrange(
    x: Tensor[D, *tuple[Any, ...]],
    pattern: str,
    *new: type[Axis],
    out: tuple[type[A0], type[A1], type[A2], type[A3], type[A4], type[A5]],
    **axes: int | type[Axis] | tuple[type[Axis], int],
) -> Tensor[D, A0, A1, A2, A3, A4, A5]: ...
@overload
def rearrange(
    x: Tensor[D, *tuple[Any, ...]],
    pattern: str,
    *new: type[Axis],
    out: tuple[
        type[Axis],
        type[Axis],
        type[Axis],
        type[Axis],
        type[Axis],
        type[Axis],
        type[Axis],
        *tuple[type[Axis], ...],
    ],
    **axes: int | type[Axis] | tuple[type[Axis], int],
) -> Tensor[D, *tuple[Any, ...]]: ...
# END GENERATED
def rearrange(
    x: AnyOf[D],
    pattern: str,
    *new: type[Axis],
    out: tuple[type[Axis], ...] | None = None,
    **axes: int | type[Axis] | tuple[type[Axis], int],
) -> AnyOf[D]:
    """Split, merge and reorder ``x``'s axes by a pattern of axis names.

    ``"left -> right"``: each side lists names and groups ``(A B)`` (first = major). A name
    is one of ``x``'s axis classes or a class passed to the call: after the pattern
    (``Head, HeadDim``) or as a keyword (``Head=ax.nn.Head``; ``Head=(ax.nn.Head, 4)``
    with its size). A keyword int is a size (``Head=4``). On the left a group splits one
    axis of ``x``: the one named ``Embed=(A B)``, or else the next axis of ``x`` that no
    plain name claims (in ``x``'s order); on the right ``Embed=(A B)`` merges ``A`` and
    ``B`` into ``Embed``. Both sides hold the same axes. The call is ``unflatten``,
    ``flatten`` and ``transpose``: the same values, bit for bit. With the mypy plugin a
    literal pattern is typed exactly; without it the result is ``Tensor[D, ...]``, unless
    ``out=(A, B, ...)`` (keyword only) names the result's axes in order: then it is
    ``Tensor[D, A, B, ...]`` in every checker, and a run (or the plugin) whose pattern gives
    other axes is an ``AxisError``. So no axis of the pattern can be named ``out=``.

    Errors (``AxisError``, naming it): an unknown name, an axis of ``x`` the pattern leaves
    out (or names that ``x`` lacks), a size that does not divide or disagrees, ``out=``
    that is not the result's axes.

    Example:
        >>> x = ax.ones((2, 5, 8), Batch, Pos, Embed)
        >>> pattern = "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim"
        >>> ax.rearrange(x, pattern, Head, HeadDim, Head=4)
        Tensor[F32, Batch=2, Head=4, Pos=5, HeadDim=2](...)
        >>> ax.rearrange(y, "Batch Head Pos HeadDim -> Batch Pos Embed=(Head HeadDim)", Embed)
        >>> ax.rearrange(x, "Batch Pos Embed -> Pos Batch Embed", out=(Pos, Batch, Embed))
    """
    plan = _plan(x, pattern, new, axes, out)
    return _run(x, plan, pattern)


def standin(
    x: AnyOf[D],
    pattern: str,
    *new: type[Axis],
    out: tuple[type[Axis], ...] | None = None,
    **axes: int | type[Axis] | tuple[type[Axis], int],
) -> AnyOf[D]:
    """``rearrange`` on a graph input of open sizes, as the mypy plugin runs it: a size that
    only a run knows (a part of a group that splits an open axis) is taken as 1, so the
    result's axes, and every error that does not depend on sizes, are the run's."""
    return _run(x, _plan(x, pattern, new, axes, out), pattern, open_size=1)


def _check_out(pattern: str, out: object, order: tuple[type[Axis], ...]) -> None:
    """``out=`` must be the result's axes, in order."""
    if not isinstance(out, tuple) or not all(_is_axis(a) for a in out):
        raise TypeError(f"rearrange: out= is a tuple of axis classes, got {out!r}")
    if out != order:
        raise _fail(
            pattern,
            f"out=({axes_names(out)}) says the result's axes, but the pattern gives "
            f"({axes_names(order)})",
        )


@dataclass(frozen=True)
class _Plan:
    """What a pattern does: the splits (axis, parts, sizes; ``None`` for a size that an open
    axis leaves unknown), the merges (parts, into), and the result's order."""

    splits: list[tuple[type[Axis], tuple[type[Axis], ...], tuple[int | None, ...]]]
    merges: list[tuple[tuple[type[Axis], ...], type[Axis]]]
    order: tuple[type[Axis], ...]


def _plan(
    x: AnyOf[D],
    pattern: object,
    new: tuple[type[Axis], ...],
    axes: dict[str, int | type[Axis] | tuple[type[Axis], int]],
    out: object = None,
) -> _Plan:
    if not isinstance(pattern, str) or pattern.count("->") != 1:
        raise TypeError(f"rearrange: the pattern is 'left -> right', got {pattern!r}")
    left_s, right_s = pattern.split("->")
    left, right = _parse_side(left_s, pattern), _parse_side(right_s, pattern)
    names_in = {n for side in (left, right) for e in side for n in (*(e.parts or ()), e.name) if n}
    classes, sizes = _resolve(x, pattern, names_in, new, axes)
    splits = _splits(x, pattern, left, classes, sizes)
    plan = _Plan(splits, *_merges(pattern, left, right, classes))
    if out is not None:
        _check_out(pattern, out, plan.order)
    return plan


def _splits(
    x: AnyOf[D],
    pattern: str,
    left: list[_Entry],
    classes: dict[str, type[Axis]],
    sizes: dict[str, int],
) -> list[tuple[type[Axis], tuple[type[Axis], ...], tuple[int | None, ...]]]:
    """The left side: plain names claim ``x``'s axes, groups split the rest."""
    sizes_of = dict(zip(x.axes, x.shape, strict=True))
    plain = [e.name for e in left if e.name is not None]  # plain names, named groups
    for name in plain:
        if classes[name] not in x.axes:
            raise _fail(
                pattern,
                f"missing axis {name}: x has ({axes_names(x.axes)})",
            )
    if len(set(plain)) != len(plain):
        twice = next(n for n in plain if plain.count(n) > 1)
        raise _fail(pattern, f"{twice} occurs twice on the left")
    claimed = {classes[n] for n in plain}
    free = [a for a in x.axes if a not in claimed]
    unnamed = [e for e in left if e.parts is not None and e.name is None]
    if len(free) > len(unnamed):
        extra = free[len(unnamed) :] if unnamed else free
        raise _fail(
            pattern,
            f"missing axis {extra[0].__name__}: x has ({axes_names(x.axes)}), the left "
            f"side leaves {axes_names(tuple(extra))} out",
        )
    out: list[tuple[type[Axis], tuple[type[Axis], ...], tuple[int | None, ...]]] = []
    for e in left:
        if e.parts is None:
            continue
        if e.name is None:
            if not free:
                raise _fail(pattern, f"the group ({' '.join(e.parts)}) has no axis of x left")
            axis = free.pop(0)
        else:
            axis = classes[e.name]
        n = sizes_of[axis]
        known = [sizes.get(p) for p in e.parts]
        unknown = [p for p, s in zip(e.parts, known, strict=True) if s is None]
        if len(unknown) > 1:
            raise _fail(
                pattern,
                f"the group ({' '.join(e.parts)}) needs the sizes of all but one of its axes "
                f"(give {unknown[0]}=...)",
            )
        prod = math.prod(s for s in known if s is not None)
        if unknown and n is None:
            known[e.parts.index(unknown[0])] = None  # an open axis: known when it runs
        elif unknown:
            if n % prod:
                raise _fail(
                    pattern,
                    f"inconsistent size: {axis.__name__} ({n}) does not divide into "
                    f"({' '.join(e.parts)}) by {prod}",
                )
            known[e.parts.index(unknown[0])] = sizes[unknown[0]] = n // prod
        elif n is not None and prod != n:
            raise _fail(
                pattern,
                f"inconsistent size: ({' '.join(e.parts)}) is {prod}, but {axis.__name__} "
                f"has size {n}",
            )
        out.append((axis, tuple(classes[p] for p in e.parts), tuple(known)))
    return out


def _merges(
    pattern: str, left: list[_Entry], right: list[_Entry], classes: dict[str, type[Axis]]
) -> tuple[list[tuple[tuple[type[Axis], ...], type[Axis]]], tuple[type[Axis], ...]]:
    """The right side: the same axes as the left, some merged."""
    left_axes = [p for e in left for p in _names(e)]
    right_axes = [p for e in right for p in _names(e)]
    for name in right_axes:
        if name not in left_axes:
            raise _fail(pattern, f"missing axis {name}: the right side has it, the left not")
    for name in left_axes:
        if name not in right_axes:
            raise _fail(pattern, f"missing axis {name}: the left side has it, the right not")
    if len(set(right_axes)) != len(right_axes):
        twice = next(n for n in right_axes if right_axes.count(n) > 1)
        raise _fail(pattern, f"{twice} occurs twice on the right")
    order: list[type[Axis]] = []
    merges: list[tuple[tuple[type[Axis], ...], type[Axis]]] = []
    for e in right:
        if e.parts is None:
            assert e.name is not None
            order.append(classes[e.name])
            continue
        if e.name is None:
            raise _fail(
                pattern,
                f"a merged group needs the new axis's name: Name=({' '.join(e.parts)})",
            )
        merges.append((tuple(classes[p] for p in e.parts), classes[e.name]))
        order.append(classes[e.name])
    return merges, tuple(order)


def _run(x: AnyOf[D], plan: _Plan, pattern: str, open_size: int | None = None) -> AnyOf[D]:
    """``unflatten``, ``flatten`` and ``transpose``, as ``plan`` says."""
    out = x
    for axis, parts, sizes in plan.splits:
        if None in sizes and open_size is None:
            unknown = parts[sizes.index(None)].__name__
            raise _fail(
                pattern,
                f"the size of {axis.__name__} is open (a graph input without it): give "
                f"{unknown}=... as well",
            )
        filled = tuple(n if n is not None else open_size or 1 for n in sizes)
        out = unflatten(out, axis, parts, filled)
    for parts, into in plan.merges:
        out = flatten(out, parts, into)
    if tuple(out.axes) != plan.order:
        out = transpose(out, *plan.order)
    return out
