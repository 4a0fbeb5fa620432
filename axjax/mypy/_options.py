"""The plugin's own options, and the ``axjax-untyped`` report they turn on.

Read from ``[tool.axjax-mypy]`` in ``pyproject.toml`` (or ``[axjax-mypy]`` in ``mypy.ini``
/ ``setup.cfg``), next to mypy's own configuration::

    [tool.axjax-mypy]
    warn_untyped = true            # or a list of modules: ["mypkg.model", "mypkg.train.*"]
    op_modules = ["mypkg.ops"]     # modules whose ops the plugin may import and run

``warn_untyped`` reports every call whose Tensor result has degraded to ``Any`` (its dtype,
an axis, or its rank unknown), naming the cause, under the error code ``axjax-untyped``.
``op_modules`` lists the modules whose public functions the plugin evaluates like axjax's
own ops (it imports them): a user op's own ``infer`` then types its calls. No other user
code is ever imported.
"""

from __future__ import annotations

import configparser
import fnmatch
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from mypy.errorcodes import ErrorCode
from mypy.nodes import CallExpr, Expression, MemberExpr, NameExpr, TypeInfo
from mypy.plugin import FunctionContext, MethodContext
from mypy.types import AnyType, Instance, Type, UnpackType, get_proper_type

from ._types import describe, tensor_of

UNTYPED_ERROR = ErrorCode("axjax-untyped", "A Tensor type degraded to Any", "axjax")
SECTION = "axjax-mypy"


@dataclass(frozen=True)
class Options:
    """``warn_untyped``: module patterns (``["*"]`` for ``true``); ``op_modules``: modules."""

    warn_untyped: tuple[str, ...] = ()
    op_modules: frozenset[str] = field(default_factory=frozenset)

    def warns(self, module: str) -> bool:
        return any(fnmatch.fnmatchcase(module, p) for p in self.warn_untyped)


def _patterns(value: object) -> tuple[str, ...]:
    if value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1")):
        return ("*",)
    if isinstance(value, str):
        return tuple(
            v.strip()
            for v in value.replace(",", " ").split()
            if v.strip() and v.strip().lower() not in ("false", "0")
        )
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return ()


def read_options(config_file: str | None) -> Options:
    """The ``[tool.axjax-mypy]`` / ``[axjax-mypy]`` section of mypy's configuration file."""
    if not config_file or not Path(config_file).is_file():
        return Options()
    path = Path(config_file)
    raw: dict[str, object] = {}
    if path.suffix == ".toml":
        data = tomllib.loads(path.read_text())
        section = data.get("tool", {}).get(SECTION, {})
        raw = dict(section) if isinstance(section, dict) else {}
    else:
        parser = configparser.ConfigParser()
        parser.read(path)
        if parser.has_section(SECTION):
            raw = dict(parser.items(SECTION))
    ops = _patterns(raw.get("op_modules", ()))
    return Options(_patterns(raw.get("warn_untyped", ())), frozenset(ops))


def _text(e: Expression) -> str:
    if isinstance(e, NameExpr):
        return e.name
    if isinstance(e, MemberExpr):
        return f"{_text(e.expr)}.{e.name}"
    if isinstance(e, CallExpr):
        return f"{_text(e.callee)}(...)"
    return "an expression"


def _degraded(t: Type, tensor: TypeInfo) -> str | None:
    """How a Tensor type has degraded (``None``: it has not, or it is no Tensor)."""
    p = get_proper_type(t)
    if isinstance(p, AnyType):
        return "Any"
    tt = tensor_of(t, tensor) if isinstance(p, Instance) else None
    if tt is None:
        return None
    if tt.axes is None:
        return f"{describe(tt)} (rank unknown)"
    if isinstance(get_proper_type(tt.dtype), AnyType):
        return f"{describe(tt)} (dtype unknown)"
    if any(
        not isinstance(a, UnpackType) and isinstance(get_proper_type(a), AnyType) for a in tt.axes
    ):
        return f"{describe(tt)} (an axis unknown)"
    return None


def report_untyped(
    ctx: FunctionContext | MethodContext, result: Type, callee: str, tensor: TypeInfo
) -> None:
    """Report a call whose Tensor result has degraded, naming the cause (not where the
    result meets a declared, exact Tensor type: ``x: Tensor[F32, N] = load()``)."""
    got = _degraded(result, tensor)
    if got is None or got == "Any":
        return
    context: object = getattr(ctx.api, "type_context", None)
    stack = context() if callable(context) else context
    target = stack[-1] if isinstance(stack, list) and stack else None
    if (
        isinstance(target, Type)
        and _degraded(target, tensor) is None
        and isinstance(get_proper_type(target), Instance)
        and tensor_of(target, tensor) is not None
    ):
        return
    causes = []
    for exprs, types in zip(ctx.args, ctx.arg_types, strict=True):
        for e, t in zip(exprs, types, strict=True):
            bad = _degraded(t, tensor)
            if bad is not None:
                causes.append(f"its argument {_text(e)} is {bad}")
    if not causes:
        causes.append(
            "its declared result or its type rule is gradual for these arguments "
            "(see docs/typing.md, Known limits)"
        )
    ctx.api.fail(
        f"{callee} returns {got}: the axes are no longer checked after this call; "
        f"{'; '.join(causes)}",
        ctx.context,
        code=UNTYPED_ERROR,
    )


__all__ = ["UNTYPED_ERROR", "Options", "read_options", "report_untyped"]
