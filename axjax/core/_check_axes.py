"""``@ax.check_axes``: check a function's Tensor arguments and result against its annotations.

The static checkers verify annotated code before it runs; this decorator verifies the calls
they cannot see (a value typed ``Any``, data from a file, an unchecked caller). Each call
matches every ``Tensor[D, *Axes]`` annotation against the actual tensor: a label must be
that very class, a type variable (``D``, ``I``) binds to one dtype or axis for the whole
call, one ``*Ts`` binds to the run of axes it covers, ``Any`` and ``*tuple[Any, ...]``
accept anything. An axis has one size in the whole call, arguments and result: each tensor
is checked against the jaxtyping annotation of its axes (``Shaped[..., "Batch Pixel"]``,
:mod:`axjax.core._arrays`) inside one ``jaxtyping.jaxtyped`` context, which binds the
sizes. Under ``jax.jit`` the check runs once per trace (decorate inside the jit).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar, TypeVarTuple, cast

from jaxtyping import jaxtyped

from ._arrays import sized
from ._axis import axes_names, axis_name
from ._errors import AxisError, describe
from ._tensor import AnyTensor, Tensor

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


class _Spec:
    """One ``Tensor[...]`` annotation, taken apart once: the axes before and after ``*Ts``."""

    __slots__ = ("cls", "pattern", "dtype", "head", "tail", "star", "inner")

    def __init__(self, cls: type[AnyTensor], pattern: Pattern) -> None:
        self.cls, self.pattern = cls, pattern
        self.dtype, pats = pattern
        stars = [i for i, p in enumerate(pats) if _variadic(p) is not None]
        self.star = bool(stars)  # a *Ts or *tuple[Any, ...] somewhere
        k = stars[0] if stars else len(pats)
        self.head, self.tail = pats[:k], pats[k + 1 :]
        self.inner = _variadic(pats[k]) if stars else None


def _spec(annotation: object) -> _Spec | None:
    """The :class:`_Spec` of a ``Tensor[...]`` annotation, else ``None``."""
    origin = typing.get_origin(annotation)
    if not (isinstance(origin, type) and issubclass(origin, Tensor)):
        return None
    args = typing.get_args(annotation)
    return _Spec(origin, (args[0], tuple(args[1:]))) if args else None


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
    """The bindings of one call, and the words of its failures.

    Axis sizes are not kept here: jaxtyping binds them in the ``jaxtyped`` context the call
    runs in. ``seen`` (the tensors checked so far) only serves to word a size mismatch.
    """

    def __init__(self, name: str) -> None:
        self.name, self.bound = name, cast(Binding, {})
        self.seen: list[tuple[str, AnyTensor]] = []

    def fail(self, value: AnyTensor, what: str, pattern: Pattern, why: str) -> AxisError:
        return AxisError(
            f"Cannot apply {self.name} to {describe(value)}: {what} should be "
            f"{_annotation(pattern, self.bound)}, but {why}"
        )

    def one(self, pat: object, got: Any, where: str) -> str | None:
        """Match one dtype or axis; the reason it does not match, or ``None``."""
        if pat is Any:
            return None
        if isinstance(pat, TypeVar):
            was = self.bound.setdefault(pat, got)
            if was is not got:
                return (
                    f"{pat.__name__} is {axis_name(was)} elsewhere in this call and "
                    f"{axis_name(got)} {where}"
                )
            return None
        if pat is not got:
            return f"it has {axis_name(got)} {where}"
        return None

    def match(self, value: object, what: str, spec: _Spec) -> None:
        if not isinstance(value, spec.cls):
            raise TypeError(
                f"Cannot apply {self.name}: {what} should be "
                f"{_annotation(spec.pattern, self.bound)}, got "
                f"{type(value).__name__}"
            )
        why = self.one(spec.dtype, value.dtype, "as its dtype")
        if why is not None:
            raise self.fail(value, what, spec.pattern, why + " (convert it with astype)")
        axes: tuple[Any, ...] = value.axes
        head, tail = spec.head, spec.tail
        if len(axes) < len(head) + len(tail) or (not spec.star and len(axes) != len(head)):
            count = f"{len(axes)} axis" if len(axes) == 1 else f"{len(axes)} axes"
            raise self.fail(value, what, spec.pattern, f"it has {count}")
        for i, pat in enumerate(head):
            why = self.one(pat, axes[i], f"at axis {i}")
            if why is not None:
                raise self.fail(value, what, spec.pattern, why)
        end = len(axes) - len(tail)
        for i, pat in enumerate(tail, end):
            why = self.one(pat, axes[i], f"at axis {i}")
            if why is not None:
                raise self.fail(value, what, spec.pattern, why)
        inner = spec.inner
        if isinstance(inner, TypeVarTuple):
            run = tuple(axes[len(head) : end])
            was = self.bound.setdefault(inner, run)
            if was != run:
                raise self.fail(
                    value,
                    what,
                    spec.pattern,
                    f"*{inner.__name__} is "
                    f"({axes_names(was)}) elsewhere in this call and "
                    f"({axes_names(run)}) here",
                )
        self.sizes(value, what, spec, axes)

    def sizes(self, value: AnyTensor, what: str, spec: _Spec, axes: tuple[Any, ...]) -> None:
        """Ask jaxtyping whether each axis has the size it has elsewhere in this call."""
        if getattr(type(value), "_is_symbolic", False):  # a graph node: sizes may be None
            carrier: object = value
            known = tuple(n is not None for n in value.shape)
            hint = sized(axes, None if all(known) else known)
        else:
            carrier = value.array
            if getattr(carrier, "shape", None) is None:  # a pytree leaf filtered out
                return
            hint = sized(axes)
        if not isinstance(carrier, hint):
            raise self.fail(value, what, spec.pattern, self.mismatch(value))
        self.seen.append((what, value))

    def mismatch(self, value: AnyTensor) -> str:
        """Which axis has another size elsewhere in this call (jaxtyping said one does)."""
        for i, (axis, size) in enumerate(zip(value.axes, value.shape, strict=True)):
            for where, other in self.seen:
                was = other.sizes.get(axis)
                if size is not None and was is not None and was != size:
                    return f"{axis_name(axis)} has size {was} in {where} and {size} at axis {i}"
        return "its sizes disagree with the sizes bound elsewhere in this call"


def check_axes(fn: F) -> F:
    """Check the ``Tensor[...]`` arguments and result of ``fn`` against its annotations.

    Raises :class:`axjax.AxisError` naming the function, the argument and the annotation
    with what its type variables are bound to, or the axis whose size differs within the
    call. The sizes are checked by jaxtyping: the call runs in a ``jaxtyping.jaxtyped``
    context, so an ``isinstance`` check of a raw array against a jaxtyping annotation inside
    ``fn`` (``array_type(F32, Batch)``) shares the sizes of ``fn``'s tensors.

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
    plan: list[tuple[str, int | None, _Spec]] | None = None
    result: _Spec | None = None
    positional = 0  # a call with no keywords and at most this many arguments skips bind()
    name = getattr(fn, "__qualname__", repr(fn))

    def prepare() -> list[tuple[str, int | None, _Spec]]:
        nonlocal plan, result, positional
        hints = typing.get_type_hints(fn)  # lazily: forward references resolve by now
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        todo = []
        for i, (arg, param) in enumerate(signature.parameters.items()):
            if param.kind in kinds:
                positional = i + 1
            found = _spec(hints.get(arg))
            if found is not None:
                todo.append((arg, i if param.kind in kinds else None, found))
        result = _spec(hints.get("return"))
        plan = todo
        return todo

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        todo = plan if plan is not None else prepare()
        call = _Call(name)
        with jaxtyped("context"):  # one scope of axis sizes: this call
            if not kwargs and len(args) <= positional:
                for arg, i, spec in todo:
                    if i is not None and i < len(args):
                        call.match(args[i], f"argument {arg}", spec)
            else:
                given = signature.bind(*args, **kwargs).arguments
                for arg, _, spec in todo:
                    if arg not in given:
                        continue
                    kind = signature.parameters[arg].kind
                    if kind is inspect.Parameter.VAR_POSITIONAL:  # *xs: each one
                        for j, value in enumerate(given[arg]):
                            call.match(value, f"argument {arg}[{j}]", spec)
                    elif kind is inspect.Parameter.VAR_KEYWORD:  # **kw: each one
                        for key, value in given[arg].items():
                            call.match(value, f"argument {key}", spec)
                    else:
                        call.match(given[arg], f"argument {arg}", spec)
            out = fn(*args, **kwargs)
            if result is not None:
                call.match(out, "its result", result)
        return out

    return cast(F, checked)
