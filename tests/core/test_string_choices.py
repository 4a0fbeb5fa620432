"""Every string option of the public API is checked: a parameter typed ``Literal["a", "b"]``
given any other string raises a ``ValueError`` naming the parameter and listing every
allowed value, before anything else happens (``EarlyStopping(mode="minimize")`` used to act
as ``"max"``). The parameters are found by reading the annotations of every public callable
of ``ax``, ``ax.nn``, ``ax.nn.init`` and ``ax.train``; other arguments get ``None``."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import axjax as ax
from axjax.core import _choices

NAMESPACES = {"ax": ax, "ax.nn": ax.nn, "ax.nn.init": ax.nn.init, "ax.train": ax.train}
BOGUS = "no-such-option"


def _strings(annotation: Any) -> tuple[str, ...]:
    """The strings of a ``Literal`` (also inside a union), unless the union admits ``str``."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return tuple(a for a in typing.get_args(annotation) if isinstance(a, str))
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        return () if str in args else tuple(s for a in args for s in _strings(a))
    return ()


def _options() -> Iterator[tuple[str, Callable[..., Any], str, tuple[str, ...]]]:
    """``(name, callable, parameter, allowed)`` for each Literal-of-strings parameter."""
    seen: set[int] = set()
    for prefix, namespace in NAMESPACES.items():
        for name in sorted(dir(namespace)):
            obj = getattr(namespace, name)
            if name.startswith("_") or isinstance(obj, types.ModuleType) or id(obj) in seen:
                continue
            seen.add(id(obj))
            fn = obj.__init__ if inspect.isclass(obj) else obj
            if not callable(obj) or not inspect.isfunction(inspect.unwrap(fn)):
                continue
            hints = typing.get_type_hints(inspect.unwrap(fn))
            for param in inspect.signature(fn).parameters:
                allowed = _strings(hints.get(param))
                if allowed:
                    yield f"{prefix}.{name}", obj, param, allowed


OPTIONS = sorted(_options(), key=lambda o: (o[0], o[2]))


def _call_with(obj: Callable[..., Any], param: str, value: Any) -> None:
    """``obj`` called with ``param=value`` by keyword and, for each other required argument,
    ``None`` (or the first allowed value of another string option) by position."""
    sig = inspect.signature(obj)
    fn = obj.__init__ if inspect.isclass(obj) else obj
    hints = typing.get_type_hints(inspect.unwrap(fn))
    args: list[Any] = []
    kwargs: dict[str, Any] = {param: value}
    for p in sig.parameters.values():
        if p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        placeholder = (_strings(hints.get(p.name)) or (None,))[0]
        if p.name == param:
            continue
        if (
            p.kind is p.KEYWORD_ONLY
            or param
            in [q.name for q in sig.parameters.values()][: list(sig.parameters).index(p.name)]
        ):
            kwargs[p.name] = placeholder  # after the option: by keyword
        else:
            args.append(placeholder)
    obj(*args, **kwargs)


def _finding(name: str, obj: Callable[..., Any], param: str, allowed: tuple[str, ...]) -> str:
    """What is wrong with how ``obj`` treats a bogus ``param`` (``""``: nothing)."""
    try:
        _call_with(obj, param, BOGUS)
    except ValueError as e:
        text = str(e)
        missing = [repr(a) for a in allowed if repr(a) not in text]
        if param not in text or BOGUS not in text or missing:
            return f"{name}({param}=...): message lacks {missing or param}: {text}"
        return ""
    except Exception as e:  # noqa: BLE001 - the point: any other error is a finding
        return f"{name}({param}=...): {type(e).__name__} instead of ValueError: {e}"
    return f"{name}({param}={BOGUS!r}) was accepted"


def test_the_public_api_has_string_options() -> None:
    names = {(o[0], o[2]) for o in OPTIONS}
    assert ("ax.train.EarlyStopping", "mode") in names
    assert ("ax.nn.MultiheadAttention", "implementation") in names
    assert len(OPTIONS) >= 10


@pytest.mark.parametrize(
    ("name", "obj", "param", "allowed"), OPTIONS, ids=[f"{o[0]}.{o[2]}" for o in OPTIONS]
)
def test_a_bogus_string_option_is_a_value_error_listing_the_allowed_values(
    name: str, obj: Callable[..., Any], param: str, allowed: tuple[str, ...]
) -> None:
    assert _finding(name, obj, param, allowed) == ""


def test_early_stopping_minimize_is_refused() -> None:
    """The issue's example, with its message."""
    with pytest.raises(
        ValueError,
        match=r"^EarlyStopping: mode must be one of 'min', 'max', got 'minimize' "
        r"\(did you mean 'min'\?\)$",
    ):
        ax.train.EarlyStopping(mode="minimize")  # type: ignore[arg-type]
    assert ax.train.EarlyStopping("eval_accuracy", mode="min").direction == "min"
    assert ax.train.EarlyStopping("eval_accuracy").direction == "max"


def test_mutation_without_the_check_options_are_accepted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With :func:`check_choice` made a no-op everywhere it is bound, the generated check
    reports the callables that rely on it: the test can fail."""
    original = _choices.check_choice
    for module in list(__import__("sys").modules.values()):
        if getattr(module, "__name__", "").startswith("axjax") and (
            getattr(module, "check_choice", None) is original
        ):
            monkeypatch.setattr(module, "check_choice", lambda where, name, value, allowed: value)
    found = {o[0] for o in OPTIONS if _finding(*o)}
    assert {"ax.train.EarlyStopping", "ax.nn.MultiheadAttention", "ax.NonFiniteReport"} <= found
