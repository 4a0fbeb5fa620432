"""``ax.rearrange``: split, merge and reorder axes by a pattern of axis *names*.

``"Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim"`` names the tensor's axes on the left
and the result's on the right. A name is an axis class: one of the tensor's axes, one given
as a keyword (``Head=ax.nn.Head``, or ``Head=(ax.nn.Head, 4)``), or one the caller's code
sees under that name. A group ``(A B)`` on the left splits one of the tensor's axes (the
one named ``Embed=(A B)``, else the next axis no plain name claims); on the right it merges
``A`` and ``B`` into the axis named before it: ``Embed=(Head HeadDim)``. The call lowers to
``unflatten``, ``flatten`` and ``transpose``, so its values are theirs, bit for bit.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from typing import Any, TypeGuard

from ..core import Axis, AxisError
from ..core._internal import axes_names, positive_int
from ._shape import AnyOf, D, flatten, transpose, unflatten

__all__ = ["rearrange"]

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


def _caller_names(depth: int) -> dict[str, Any]:
    """The caller's globals, then locals: where a name the tensor lacks may be defined."""
    frame = sys._getframe(depth)  # pyright: ignore[reportPrivateUsage]
    return {**frame.f_globals, **frame.f_locals}


def _is_axis(v: object) -> TypeGuard[type[Axis]]:
    return isinstance(v, type) and issubclass(v, Axis) and v is not Axis


def rearrange(
    x: AnyOf[D], pattern: str, **axes: int | type[Axis] | tuple[type[Axis], int]
) -> AnyOf[D]:
    """Split, merge and reorder ``x``'s axes by a pattern of axis names.

    ``"left -> right"``: each side lists names and groups ``(A B)`` (first = major). Names
    resolve against ``x``'s axis classes, then the keywords (``Head=4``: a size;
    ``Head=ax.nn.Head``: the class; ``Head=(ax.nn.Head, 4)``: both), then the caller's
    names. On the left a group splits one axis of ``x``: the one named ``Embed=(A B)``, or
    else the next axis of ``x`` that no plain name claims (in ``x``'s order); on the right
    ``Embed=(A B)`` merges ``A`` and ``B`` into ``Embed``. Both sides hold the same axes.
    The call is ``unflatten``, ``flatten`` and ``transpose``: the same values, bit for bit.

    Errors (``AxisError``, naming it): an unknown name, an axis of ``x`` the pattern leaves
    out (or names that ``x`` lacks), a size that does not divide or disagrees.

    Example:
        >>> x = ax.ones((2, 5, 8), Batch, Pos, Embed)
        >>> ax.rearrange(x, "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim", Head=4)
        Tensor[F32, Batch=2, Head=4, Pos=5, HeadDim=2](...)
        >>> ax.rearrange(y, "Batch Head Pos HeadDim -> Batch Pos Embed=(Head HeadDim)")
    """
    if not isinstance(pattern, str) or pattern.count("->") != 1:
        raise TypeError(f"rearrange: the pattern is 'left -> right', got {pattern!r}")
    left_s, right_s = pattern.split("->")
    left, right = _parse_side(left_s, pattern), _parse_side(right_s, pattern)
    have = {a.__name__: a for a in x.axes}
    sizes_of = dict(zip(x.axes, x.shape, strict=True))
    classes: dict[str, type[Axis]] = dict(have)
    sizes: dict[str, int] = {}
    names_in = {n for side in (left, right) for e in side for n in (*(e.parts or ()), e.name) if n}
    for name, value in axes.items():
        if name not in names_in:
            raise _fail(pattern, f"the keyword {name}= names no axis of the pattern")
        given: object = value
        cls: type[Axis] | None = None
        size: object = None
        if isinstance(given, tuple) and len(given) == 2:
            first, size = given[0], given[1]
            if _is_axis(first):
                cls = first
            else:
                size = given
        elif _is_axis(given):
            cls = given
        else:
            size = given
        if cls is not None:
            if name in have and have[name] is not cls:
                raise _fail(pattern, f"{name}= is another class than x's axis {name}")
            classes[name] = cls
        if size is not None:
            sizes[name] = positive_int(
                "rearrange", f"axes keyword {name}= (a size, an axis class or both)", size
            )
    caller: dict[str, Any] | None = None
    for name in sorted(names_in - set(classes)):
        if caller is None:
            caller = _caller_names(2)
        found = caller.get(name)
        if not _is_axis(found):
            raise _fail(
                pattern,
                f"unknown name {name}: not an axis of x ({axes_names(x.axes)}), nor a "
                f"keyword, nor an axis class in the caller's scope (give {name}=TheAxisClass)",
            )
        classes[name] = found
    # the left side: plain names claim x's axes, groups split the rest
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
    free = [a for a in x.axes if a.__name__ not in plain]
    unnamed = [e for e in left if e.parts is not None and e.name is None]
    if len(free) > len(unnamed):
        extra = free[len(unnamed) :] if unnamed else free
        raise _fail(
            pattern,
            f"missing axis {extra[0].__name__}: x has ({axes_names(x.axes)}), the left "
            f"side leaves {axes_names(tuple(extra))} out",
        )
    out = x
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
        if unknown:
            if n is None or n % prod:
                raise _fail(
                    pattern,
                    f"inconsistent size: {axis.__name__} ({n}) does not divide into "
                    f"({' '.join(e.parts)}) by {prod}",
                )
            sizes[unknown[0]] = n // prod
        elif n is not None and prod != n:
            raise _fail(
                pattern,
                f"inconsistent size: ({' '.join(e.parts)}) is {prod}, but {axis.__name__} "
                f"has size {n}",
            )
        parts = tuple(classes[p] for p in e.parts)
        out = unflatten(out, axis, parts, tuple(sizes[p] for p in e.parts))
    # the right side: the same axes, some merged
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
        into = classes[e.name]
        parts = tuple(classes[p] for p in e.parts)
        out = flatten(out, parts, into)
        order.append(into)
    if tuple(out.axes) != tuple(order):
        out = transpose(out, *order)
    return out
