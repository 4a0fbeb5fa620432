"""``AxisError`` and the wording every axis message shares with the mypy plugin.

Every message has the form::

    Cannot apply <Op> to <operand>[ and <operand>...]: <what is wrong> (<how to fix it>)

where each operand is written ``Tensor[F32, Batch=128, Pixel=784]``. The ``axjax.mypy``
plugin reports the same sentence with the sizes left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from . import _provenance
from ._axis import Axis, axes_names, axis_name, same_name_note
from ._context import Switches

if TYPE_CHECKING:
    from ._dtype import DType

__all__ = ["AxisError", "HasType", "check_unique_axes", "describe", "fail"]


class AxisError(TypeError):
    """Axes, sizes or dtypes of an op's operands do not line up.

    Raised in Python while an op is applied (eagerly, while ``jax.jit`` traces, or while a
    graph is built), never from compiled code. The message names the op, shows each
    operand with its axes and sizes, says what is wrong and how to fix it.

    Example:
        >>> import axjax as ax
        >>> try:
        ...     ax.zeros((2, 3), A, B) + ax.zeros((3, 2), B, A)
        ... except ax.AxisError as e:
        ...     print(e)  # doctest: +SKIP
        Cannot apply Add to Tensor[F32, A=2, B=3] and Tensor[F32, B=3, A=2]: same axes in a
        different order (transpose one operand first)
    """

    __module__ = "axjax"

    #: what ``fail`` knew of the failure, read by the call context (core/_calls.py) to
    #: name the public call and its argument at fault: the op, its operands, the reason
    op: str | None = None
    operands: tuple[HasType, ...] = ()
    why: str | None = None
    #: the operand at fault, when the check knows it (``fail(..., subject=x)``)
    subject: HasType | None = None
    #: the argument of the public call it is about (``with argument("mask"):``)
    argument: str | None = None
    #: the public call that named it (set once, by the outermost call; ``""``: the
    #: user's own code, which names itself by its traceback)
    call: str | None = None
    #: the message as the op raised it, before the public call named it
    inner: str | None = None


def check_unique_axes(axes: tuple[type[Axis], ...], where: str) -> None:
    """Raise :class:`AxisError` if an axis occurs twice."""
    if len(set(axes)) != len(axes):
        dup = next(a for i, a in enumerate(axes) if a in axes[:i])
        raise AxisError(
            f"{where}: axis {axis_name(dup)} occurs twice in ({axes_names(axes)}); "
            "a tensor never has the same axis twice (rename one of them)"
        )


class HasType(Protocol):
    """Anything with a dtype marker, axes and a shape (a Tensor, a graph node, a type)."""

    @property
    def dtype(self) -> type[DType]: ...
    @property
    def axes(self) -> tuple[type[Axis], ...]: ...
    @property
    def shape(self) -> tuple[int | None, ...]: ...


def describe(t: HasType) -> str:
    """``Tensor[F32, Batch=128, Pixel=784]`` (``?`` for a size not yet known)."""
    parts = [getattr(t.dtype, "__name__", str(t.dtype))]
    parts += [
        f"{axis_name(a)}={'?' if n is None else n}" for a, n in zip(t.axes, t.shape, strict=True)
    ]
    return "Tensor[" + ", ".join(parts) + "]"


def fail(
    op: str, operands: Sequence[HasType], why: str, subject: HasType | None = None
) -> AxisError:
    """Build the standard message (``raise fail("Add", (x, y), "axes differ")``).

    When two different axis classes among the operands print the same name (a class defined
    twice), the message says so: otherwise "axes differ" would show identical-looking types.
    ``subject``: the operand at fault, when it is one of them (the public call whose
    argument it is names that argument: core/_calls.py).
    """
    shown = " and ".join(describe(t) for t in operands)
    note = same_name_note(a for t in operands for a in getattr(t, "axes", ()))
    reason = why + (f"; {note}" if note else "")
    text = f"Cannot apply {op} to {shown}: {reason}"
    if Switches.provenance:  # the debugging mode: where the axes it names came from
        origins = _provenance.explain(operands, why)
        text += f"\nAxis provenance: {origins}" if origins else ""
    error = AxisError(text)
    error.op, error.operands, error.why, error.subject = op, tuple(operands), reason, subject
    return error
