"""String options: one check for every parameter typed ``Literal["a", "b", ...]``.

A misspelt option (``EarlyStopping(mode="minimize")``) must not fall through to a default
branch and silently do something else. :func:`check_choice` raises the one ``ValueError``
wording; :func:`checks_choices` applies it, before the body runs, to every parameter of a
function (or ``__init__``) whose annotation is a ``Literal`` of strings, reading the allowed
values from the annotation itself, so the type and the check cannot drift apart.

Example:
    >>> @checks_choices
    ... def pool(x, kind: Literal["max", "avg"] = "max"): ...
    >>> pool(x, kind="mean")
    ValueError: pool: kind must be one of 'max', 'avg', got 'mean'
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any, ParamSpec, TypeVar

__all__ = ["check_choice", "checks_choices", "literal_choices", "string_choices"]

P = ParamSpec("P")
R = TypeVar("R")


def check_choice(where: str, name: str, value: object, allowed: Iterable[str]) -> str:
    """``value`` if it is one of ``allowed``; else ``ValueError`` listing them all.

    Example:
        >>> check_choice("EarlyStopping", "mode", "minimize", ("min", "max"))
        ValueError: EarlyStopping: mode must be one of 'min', 'max', got 'minimize'
    """
    options = tuple(allowed)
    if isinstance(value, str) and value in options:
        return value
    close = [o for o in options if isinstance(value, str) and value.lower().startswith(o[:3])]
    hint = f" (did you mean {close[0]!r}?)" if len(close) == 1 else ""
    raise ValueError(
        f"{where}: {name} must be one of {', '.join(map(repr, options))}, got {value!r}{hint}"
    )


def literal_choices(annotation: object) -> tuple[str, ...] | None:
    """The strings of a ``Literal`` annotation (also inside ``X | None``); ``None`` when the
    annotation is not one, or also admits any ``str``."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        found = tuple(a for a in typing.get_args(annotation) if isinstance(a, str))
        return found or None
    if origin in (typing.Union, types.UnionType):
        parts = typing.get_args(annotation)
        if str in parts:
            return None
        found = tuple(s for a in parts for s in (literal_choices(a) or ()))
        return found or None
    return None


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The resolved annotations of ``fn``'s parameters (those that resolve)."""
    try:
        return typing.get_type_hints(fn)
    except Exception:  # a name that only exists for the type checker: one by one
        module = sys.modules.get(fn.__module__)
        env = {**vars(module)} if module else {}
        out: dict[str, Any] = {}
        for name, text in getattr(fn, "__annotations__", {}).items():
            try:
                out[name] = eval(text, env) if isinstance(text, str) else text  # noqa: S307
            except Exception:  # noqa: S112 - unresolvable: not a Literal we could check
                continue
        return out


def string_choices(fn: Callable[..., Any]) -> dict[str, tuple[str, ...]]:
    """``{parameter: allowed strings}`` for each ``Literal``-of-strings parameter of ``fn``."""
    hints = _hints(fn)
    out: dict[str, tuple[str, ...]] = {}
    for name in inspect.signature(fn).parameters:
        allowed = literal_choices(hints.get(name))
        if allowed:
            out[name] = allowed
    return out


def checks_choices(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate ``fn`` so that each of its ``Literal``-of-strings parameters is checked by
    :func:`check_choice` before ``fn`` runs (a non-string value is left to ``fn``, for
    annotations such as ``Literal["dynamic"] | float``). The annotations are read at the
    first call."""
    signature = inspect.signature(fn)
    names = list(signature.parameters)
    where = fn.__qualname__.removesuffix(".__init__")
    table: list[tuple[str, int, tuple[str, ...]]] = []
    ready = False

    @functools.wraps(fn)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        nonlocal ready
        if not ready:
            table.extend((n, names.index(n), a) for n, a in string_choices(fn).items())
            ready = True
        for name, position, allowed in table:
            if name in kwargs:
                value = kwargs[name]
            elif position < len(args):
                value = args[position]
            else:
                continue
            if isinstance(value, str) or not _admits_others(fn, name):
                check_choice(where, name, value, allowed)
        return fn(*args, **kwargs)

    checked.__dict__["__axjax_checks_choices__"] = True  # a function attribute, as a marker
    return checked


@functools.cache
def _admits_others(fn: Callable[..., Any], name: str) -> bool:
    """Whether the annotation of ``name`` admits values other than its strings."""
    annotation = _hints(fn).get(name)
    if typing.get_origin(annotation) is typing.Literal:
        return any(not isinstance(a, str) for a in typing.get_args(annotation))
    return True
