"""``@ax.check_axes``: check a function's Tensor arguments and result against its annotations.

The static checkers verify annotated code before it runs; this decorator verifies the calls
they cannot see (a value typed ``Any``, data from a file, an unchecked caller). Each call
matches every ``Tensor[D, *Axes]`` annotation against the actual tensor: a label must be
that very class, a type variable (``D``, ``I``) binds to one dtype or axis for the whole
call, one ``*Ts`` binds to the run of axes it covers, ``Any`` and ``*tuple[Any, ...]``
accept anything. Under ``jax.jit`` the check runs once per trace (decorate inside the jit).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar, TypeVarTuple, cast

from ._axis import axes_names, axis_name
from ._errors import AxisError, describe
from ._tensor import Tensor

__all__ = ["check_axes"]

F = TypeVar("F", bound=Callable[..., Any])
Binding = dict[object, Any]  # TypeVar -> class, TypeVarTuple -> tuple of classes
Pattern = tuple[Any, tuple[Any, ...]]  # (dtype, axes) of a Tensor[...] annotation


def _variadic(item: object) -> object | None:
    """The inside of ``*Ts`` / ``Unpack[Ts]`` / ``*tuple[Any, ...]``; ``None`` otherwise."""
    if typing.get_origin(item) is typing.Unpack:
        inner: object = typing.get_args(item)[0]
        return inner
    if getattr(item, "__unpacked__", False):  # *tuple[Any, ...] is a GenericAlias
        return tuple
    return None


def _pattern(annotation: object) -> tuple[type, Pattern] | None:
    """``(Tensor class, (dtype, axes))`` for a ``Tensor[...]`` annotation, else ``None``."""
    origin = typing.get_origin(annotation)
    if not (isinstance(origin, type) and issubclass(origin, Tensor)):
        return None
    args = typing.get_args(annotation)
    return (origin, (args[0], tuple(args[1:]))) if args else None


def _show(item: object, bound: Binding) -> str:
    inner = _variadic(item)
    if isinstance(inner, TypeVarTuple):
        got = bound.get(inner)
        return f"*{inner.__name__}" + ("" if got is None else f"=({axes_names(got)})")
    if inner is not None:
        return "*tuple[Any, ...]"
    if isinstance(item, TypeVar):
        got = bound.get(item)
        return item.__name__ + ("" if got is None else f"={axis_name(got)}")
    return "Any" if item is Any else axis_name(item)


def _annotation(pattern: Pattern, bound: Binding) -> str:
    dtype, axes = pattern
    return "Tensor[" + ", ".join(_show(a, bound) for a in (dtype, *axes)) + "]"


class _Call:
    """The bindings of one call, and the words of its failures."""

    def __init__(self, name: str) -> None:
        self.name, self.bound = name, cast(Binding, {})

    def fail(self, value: Any, what: str, pattern: Pattern, why: str) -> AxisError:
        return AxisError(f"Cannot apply {self.name} to {describe(value)}: {what} should be "
                         f"{_annotation(pattern, self.bound)}, but {why}")

    def one(self, pat: object, got: Any, where: str) -> str | None:
        """Match one dtype or axis; the reason it does not match, or ``None``."""
        if pat is Any:
            return None
        if isinstance(pat, TypeVar):
            was = self.bound.setdefault(pat, got)
            if was is not got:
                return (f"{pat.__name__} is {axis_name(was)} elsewhere in this call and "
                        f"{axis_name(got)} {where}")
            return None
        if pat is not got:
            return f"it has {axis_name(got)} {where}"
        return None

    def match(self, value: Any, what: str, cls: type[Any], pattern: Pattern) -> None:
        if not isinstance(value, cls):
            raise TypeError(f"Cannot apply {self.name}: {what} should be "
                            f"{_annotation(pattern, self.bound)}, got {type(value).__name__}")
        dtype, pats = pattern
        why = self.one(dtype, value.dtype, "as its dtype")
        if why is not None:
            raise self.fail(value, what, pattern, why + " (convert it with astype)")
        axes: tuple[Any, ...] = value.axes
        star = [i for i, p in enumerate(pats) if _variadic(p) is not None]
        fixed = len(pats) - len(star)
        if (not star and len(axes) != fixed) or len(axes) < fixed:
            count = f"{len(axes)} axis" if len(axes) == 1 else f"{len(axes)} axes"
            raise self.fail(value, what, pattern, f"it has {count}")
        k = star[0] if star else len(pats)
        tail = len(pats) - k - 1 if star else 0
        places = list(range(k)) + list(range(len(axes) - tail, len(axes)))
        for pat, i in zip((*pats[:k], *pats[k + 1:]), places, strict=True):
            why = self.one(pat, axes[i], f"at axis {i}")
            if why is not None:
                raise self.fail(value, what, pattern, why)
        inner = _variadic(pats[k]) if star else None
        if isinstance(inner, TypeVarTuple):
            run = tuple(axes[k:len(axes) - tail])
            was = self.bound.setdefault(inner, run)
            if was != run:
                raise self.fail(value, what, pattern, f"*{inner.__name__} is "
                                f"({axes_names(was)}) elsewhere in this call and "
                                f"({axes_names(run)}) here")


def check_axes(fn: F) -> F:
    """Check the ``Tensor[...]`` arguments and result of ``fn`` against its annotations.

    Raises :class:`axjax.AxisError` naming the function, the argument and the annotation
    with what its type variables are bound to.

    Example:
        >>> @ax.check_axes
        ... def affine(x: Tensor[D, *Bs, In], w: Tensor[D, In, Out]) -> Tensor[D, *Bs, Out]:
        ...     return ax.contract(x, w, over=w.axes[0])
        >>> affine(images, ax.ones((10, 784), Class, Pixel))   # doctest: +SKIP
        AxisError: Cannot apply affine to Tensor[F32, Class=10, Pixel=784]: argument w should
        be Tensor[D=F32, In=Pixel, Out], but In is Pixel elsewhere in this call and Class at
        axis 0
    """
    signature = inspect.signature(fn)
    plan: list[tuple[str, type, Pattern]] | None = None
    result: tuple[type, Pattern] | None = None
    name = getattr(fn, "__qualname__", repr(fn))

    def prepare() -> list[tuple[str, type, Pattern]]:
        nonlocal plan, result
        hints = typing.get_type_hints(fn)  # lazily: forward references resolve by now
        plan = []
        for arg in signature.parameters:
            found = _pattern(hints.get(arg))
            if found is not None:
                plan.append((arg, *found))
        result = _pattern(hints.get("return"))
        return plan

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        todo = plan if plan is not None else prepare()
        call = _Call(name)
        given = signature.bind(*args, **kwargs).arguments
        for arg, cls, pattern in todo:
            if arg in given:
                call.match(given[arg], f"argument {arg}", cls, pattern)
        out = fn(*args, **kwargs)
        if result is not None:
            call.match(out, "its result", *result)
        return out

    return cast(F, checked)
