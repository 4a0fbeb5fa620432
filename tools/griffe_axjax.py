"""A griffe extension for the API reference (mkdocs.yml), for two habits of axjax's sources:

- a package re-exports its public names as redundant aliases (``from ._tensor import Tensor
  as Tensor``, the typing convention for "exported") and defines no ``__all__``; griffe
  counts only ``__all__`` as an export, so it would document none of them. Here a module's
  redundant aliases, with its own public names, become its exports.
- an ``Args:`` entry may document several parameters at once (``in_axis, out_axis: the
  axes read and written``); griffe takes ``in_axis, out_axis`` for one parameter's name.
  Here each name gets its own entry with the shared description.
- docstrings head their doctest examples ``Example:``, which griffe's Google parser does not
  know (it reads ``Examples:``, and would render the ``>>>`` lines as quoted prose); this
  reads the one as the other, so the examples render as code.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", flags=re.MULTILINE)
_SEVERAL = re.compile(r"^(\s+)(\w+(?:,\s*\w+)+):(.*)$")
_SECTION = re.compile(r"^\s*(\w[\w ]*):\s*$")
_PARAMETER_SECTIONS = {"args", "arguments", "params", "parameters", "keyword args"}


def _split_grouped_args(text: str) -> str:
    """``a, b: text`` in a parameter section -> ``a: text`` and ``b: text``."""
    out: list[str] = []
    in_args = False
    for line in text.splitlines():
        section = _SECTION.match(line)
        if section:
            in_args = section.group(1).lower() in _PARAMETER_SECTIONS
        several = _SEVERAL.match(line) if in_args else None
        if several:
            indent, names, rest = several.groups()
            out += [f"{indent}{name.strip()}:{rest}" for name in names.split(",")]
        else:
            out.append(line)
    return "\n".join(out)


class AxjaxSources(griffe.Extension):
    def on_module_members(self, *, node: ast.AST | Any, mod: griffe.Module, **kwargs: Any) -> None:
        if mod.exports is not None or not isinstance(node, ast.Module):
            return
        aliases = [
            alias.name
            for stmt in node.body
            if isinstance(stmt, ast.ImportFrom)
            for alias in stmt.names
            if alias.asname == alias.name and not alias.name.startswith("_")
        ]
        if aliases:
            own = [n for n, m in mod.members.items() if not m.is_alias and not n.startswith("_")]
            mod.exports = list(dict.fromkeys([*aliases, *own]))

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            text = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
            obj.docstring.value = _split_grouped_args(text)
