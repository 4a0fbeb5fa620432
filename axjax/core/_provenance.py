"""Axis provenance: where each axis of a tensor came from, for error messages.

A debugging mode, off by default: ``ax.config.provenance = True`` (or ``AXJAX_PROVENANCE=1``
in the environment before ``import axjax``). Then every Tensor and graph node that an op or a
constructor makes remembers, per axis, the op and the ``file:line`` that introduced the axis
or last moved it, and an :class:`~axjax.AxisError` ends with where the axes it names came
from::

    Cannot apply Add to Tensor[F32, Batch=2, Hidden=3] and ...: same axes in a different order
    (transpose one operand first)
    Axis provenance: Hidden: introduced by Rename(Pixel -> Hidden) at model.py:41;
    Batch: from ax.tensor at data.py:12

The record is a slot of the Python object, outside the pytree: never in a Tensor's static aux
data, so ``jax.jit`` caches and ``jax.lax.scan`` carries are unaffected, and nothing reaches
the compiled program. Tensors rebuilt by JAX from their leaves (a jitted function's
arguments, a transformation's results) start without a record; what is built while tracing
has one.

Rules, per result axis: an axis no operand has is *introduced* by the op (``rename``,
``expand_dims``, ``flatten``, ``broadcast``); an axis whose order among the operand's axes
the op changes is *moved* by it (``transpose``); any other axis keeps its operand's record.
Constructors (``ax.tensor``, ``ax.zeros``, a layer's parameters, ``ax.Input``) record the
function the user called (``from ax.zeros``, ``from Affine``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, TypeVar

from ._axis import Axis, axis_name
from ._context import Switches
from ._source import entry_name, user_site

T = TypeVar("T")

__all__ = [
    "Origin",
    "constructed",
    "explain",
    "origin",
    "origins",
    "provenance_enabled",
    "record",
]


def provenance_enabled() -> bool:
    """Whether the recording is on (``ax.config.provenance``; core/_context.py holds it)."""
    return Switches.provenance


class Origin(NamedTuple):
    """Where one axis came from: ``how`` (``"introduced by Rename(A -> B)"``, ``"moved by
    Transpose(B, A)"``, ``"from ax.tensor"``) and ``site`` (``"model.py:41"``)."""

    how: str
    site: str

    def __str__(self) -> str:
        return f"{self.how} at {self.site}"


Record = tuple[Origin | None, ...]


def origins(t: object) -> Record | None:
    """The per-axis record of a Tensor or graph node (``None`` if it has none)."""
    rec = getattr(t, "_prov", None)
    return rec if isinstance(rec, tuple) else None


def origin(t: object, axis: type[Axis]) -> Origin | None:
    """Where ``axis`` of ``t`` came from, if recorded."""
    rec = origins(t)
    axes = getattr(t, "axes", ())
    if rec is None or axis not in axes or len(rec) != len(axes):
        return None
    return rec[axes.index(axis)]


def constructed(n: int, name: str | None = None) -> Record:
    """The record of a tensor with ``n`` axes made by a constructor: the function the user
    called (``ax.zeros``; ``name`` if given) at the user's line."""
    o = Origin(f"from {name or entry_name()}", user_site())
    return (o,) * n


def record(op: object, operands: Sequence[object], result: T) -> T:
    """Attach the record of ``result`` (a Tensor, a node, or a tuple of them) made by ``op``
    from ``operands``; returns ``result``."""
    for y in result if isinstance(result, tuple) else (result,):
        _record_one(op, operands, y)
    return result


def _record_one(op: object, operands: Sequence[Any], y: object) -> None:
    out: tuple[type[Axis], ...] = getattr(y, "axes", ())
    tensors = [x for x in operands if isinstance(getattr(x, "axes", None), tuple)]
    if tensors and tensors[0].axes == out:  # every axis in place (elementwise): its record
        rec0 = origins(tensors[0])
        if rec0 is not None and None not in rec0:
            object.__setattr__(y, "_prov", rec0)
            return
    site: str | None = None
    rec: list[Origin | None] = []
    for a in out:
        having = [x for x in tensors if a in x.axes]
        if having and not _moved(a, having[0].axes, out):
            rec.append(next((o for o in (origin(x, a) for x in having) if o is not None), None))
            continue
        site = user_site() if site is None else site
        describe = getattr(op, "describe", None)
        name = describe() if describe is not None else str(op)
        rec.append(Origin(f"{'moved' if having else 'introduced'} by {name}", site))
    object.__setattr__(y, "_prov", tuple(rec))


def _moved(a: type[Axis], before: tuple[type[Axis], ...], after: tuple[type[Axis], ...]) -> bool:
    """Whether ``a``'s place among the axes both tuples share differs between them."""
    common = [x for x in before if x in after]
    return common.index(a) != [x for x in after if x in common].index(a)


def explain(operands: Sequence[Any], why: str) -> str:
    """``"Hidden: introduced by ... at model.py:41; Batch: from ax.tensor at data.py:12"``
    for the axes ``why`` names (every axis of the operands if it names none); ``""`` when
    nothing is recorded."""
    axes: list[type[Axis]] = []
    for t in operands:
        axes += [a for a in getattr(t, "axes", ()) if a not in axes]
    named = [a for a in axes if re.search(rf"\b{re.escape(axis_name(a))}\b", why)]
    parts: list[str] = []
    for a in named or axes:
        parts += _lines(a, operands)
    return "; ".join(parts)


def _lines(a: type[Axis], operands: Sequence[Any]) -> Iterable[str]:
    found = [(i, origin(t, a)) for i, t in enumerate(operands) if a in getattr(t, "axes", ())]
    known = [(i, o) for i, o in found if o is not None]
    if not known:
        return []
    if len({o for _, o in known}) == 1:
        return [f"{axis_name(a)}: {known[0][1]}"]
    ordinal = ("first", "second", "third", "fourth", "fifth", "sixth")
    return [
        f"{axis_name(a)} ({ordinal[i] if i < len(ordinal) else f'#{i + 1}'} operand): {o}"
        for i, o in known
    ]
