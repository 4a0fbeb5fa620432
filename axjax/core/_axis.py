"""Axis labels: nominal classes that name what an axis of a tensor means.

An axis label is a class, never an instance::

    from typing import final
    import axjax as ax

    @final
    class Batch(ax.Axis): ...

The runtime identity of an axis is its class and its printed name is the class name.
Sizes are not part of the label: each tensor binds a size to each of its axes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Literal

__all__ = [
    "Axis",
    "axis_name",
    "axes_names",
    "check_axis_label",
    "same_named_axes",
    "same_name_note",
]


class _AxisLabel(type):
    """The type of axis labels: an axis prints as its name, so ``print(t.axes)`` shows
    ``(Batch, Pixel)`` (not ``(<class '__main__.Batch'>, ...)``)."""

    def __repr__(cls) -> str:
        return cls.__name__


class Axis(metaclass=_AxisLabel):
    """Base class of every axis label. Subclass it once per axis; never instantiate.

    Decorate labels with ``@typing.final``: mypy treats tensor axes covariantly, so a
    sub-axis could pass where its parent is expected (the ``axjax.mypy`` plugin insists).

    Example:
        >>> from typing import final
        >>> import axjax as ax
        >>> @final
        ... class Pixel(ax.Axis): ...
        >>> Pixel.__name__, (Pixel,)
        ('Pixel', (Pixel,))
    """

    #: ``False`` on every axis but a key role (``ax.KeyOf[Q]``): the static mark by which a
    #: query parameter (``causal_mask``'s first) refuses a key axis (see ``core/_roles.py``)
    _key_role: ClassVar[Literal[False]] = False

    def __new__(cls, *args: object, **kwargs: object) -> Axis:
        raise TypeError(
            f"axis label {cls.__name__} is a type, not a value: write `{cls.__name__}`, "
            f"not `{cls.__name__}()`"
        )


def axis_name(axis: object) -> str:
    """The printed name of an axis label (its class name)."""
    return getattr(axis, "__name__", repr(axis))


def axes_names(axes: Iterable[object]) -> str:
    """``(A, B)`` -> ``"A, B"``."""
    return ", ".join(axis_name(a) for a in axes)


def check_axis_label(axis: object, where: str) -> type[Axis]:
    """Raise a clear ``TypeError`` unless ``axis`` is a subclass of :class:`Axis`."""
    if isinstance(axis, type) and issubclass(axis, Axis) and axis is not Axis:
        return axis
    if axis is Axis:
        raise TypeError(f"{where}: `Axis` itself is not an axis label; subclass it")
    if isinstance(axis, Axis):  # pragma: no cover - Axis cannot be instantiated
        raise TypeError(f"{where}: pass the axis class, not an instance")
    if isinstance(axis, str):
        raise TypeError(
            f"{where}: {axis!r} is not an axis label but a string: pass the axis class "
            "itself (axis labels are subclasses of ax.Axis: `@final class Batch(ax.Axis): ...`)"
        )
    raise TypeError(
        f"{where}: {axis!r} is not an axis label; axis labels are subclasses of ax.Axis "
        "(`@final class Batch(ax.Axis): ...`)"
    )


def axis_labels(value: object, where: str) -> tuple[type[Axis], ...]:
    """One axis label or a sequence of them, as a checked tuple. A string is refused as a
    whole (iterated, ``"Batch"`` would be the labels ``'B'``, ``'a'``, ...)."""
    items = value if isinstance(value, tuple | list) else (value,)
    return tuple(check_axis_label(a, where) for a in items)


def same_named_axes(axes: Iterable[object]) -> list[str]:
    """The names that two or more *different* axis classes among ``axes`` share.

    Axes are compared by identity, so a label class defined twice under one name (a
    notebook cell run again, a module reloaded) gives two axes that print alike but differ.
    """
    seen: dict[str, object] = {}
    shared: list[str] = []
    for a in axes:
        name = axis_name(a)
        first = seen.setdefault(name, a)
        if first is not a and name not in shared:
            shared.append(name)
    return shared


def same_name_note(axes: Iterable[object]) -> str:
    """``""``, or the sentence saying that different axis classes among ``axes`` share a name
    (appended to a message that would otherwise read "axes differ" for identical-looking
    axes)."""
    names = same_named_axes(axes)
    if not names:
        return ""
    if len(names) == 1:
        return (
            f"two different axis classes are both named {names[0]} (was the class defined "
            "twice, as when a notebook cell runs again? Define each axis once, in a module, "
            "and rebuild the tensors that use the old class)"
        )
    return (
        f"different axis classes share the names {', '.join(names)} (were the classes "
        "defined twice, as when a notebook cell runs again? Define each axis once, in a "
        "module, and rebuild the tensors that use the old classes)"
    )
