"""The one registry of ops: each ``ax.Op`` in the library is declared here once.

A declaration names the op's class, its public functions, the namespace they are public in
and their *signature kind* (how the static overloads and the mypy plugin type a call).
Everything else is produced from it or checked against it:

- ``tools/gen_overloads.py`` writes the typed overloads (``axjax/ops/_gen_*.py``) and the
  export lists of ``axjax/ops/__init__.py`` from the declarations;
- the mypy plugin builds its tables of functions by kind from them;
- ``Tensor``'s operators (``+``, ``<``, ``@``, ``astype``) call the functions declared with
  those operators (core cannot import the ops package, which builds on it);
- tests check that every declared function is exported by its namespace and by ``axjax``,
  that every ``Op`` subclass is declared, and that ``docs/ops.md`` has a row for each op.

Adding an elementwise op is one declaration in ``axjax/ops/_elementwise.py`` (it makes the
class, the public function and this registration), a test case and a docs row; then
``tools/gen_overloads.py`` writes its static type and export lines (docs/custom-ops.md):

    Cube = unary_op("cube", lambda x: x**3, lambda dy, y, x: 3 * x * x * dy,
                    doc="``x**3``, elementwise.", floating_only=False)

Other ops declare their class with this decorator, ``@register_op("sum", kind="axis",
doc=...)`` on ``class Sum``; with ``doc`` (the public function's docstring) the generator
also writes the function, ``sum(x, over) = cached(Sum, over)(x)``. A function name is
declared once per namespace: a second declaration of it is an error, and
``tests/ops/test_op_table.py`` fails when a declared name means something else in another
public namespace (``ax.nn.swish`` beside a new ``ax.swish`` op).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:  # the registry sits below Op (Tensor's operators read it): types only
    from ._op import Op

__all__ = ["Kind", "OpSpec", "declared_ops", "operator", "register_op"]

#: How a declared function is typed statically (tools/gen_overloads.py, axjax/mypy):
#: ``unary``/``binary`` keep the operand's axes (exact everywhere); ``axis`` names an axis
#: (position overloads, exact at any rank under the plugin); ``positional`` also takes a
#: literal index (``expand_dims``, ``stack``); ``set_algebra`` computes its axes from sets
#: (``contract``); ``matmul`` is ``@``; ``internal`` has no public function (an op other ops
#: apply); ``other`` is typed by its hand-written signature alone.
Kind = Literal[
    "unary", "binary", "axis", "positional", "set_algebra", "matmul", "internal", "other"
]
OpT = TypeVar("OpT", bound="type[Op[Any]]")


@dataclass(frozen=True)
class OpSpec:
    """One op's declaration."""

    op: type[Op[Any]]
    functions: tuple[str, ...]
    kind: Kind
    namespace: str
    operators: tuple[str, ...]
    doc: str | None = None  # the generated public function's docstring (tools/gen_overloads.py)

    @property
    def module(self) -> str:
        """The module that defines the op and its functions."""
        return self.op.__module__


_SPECS: dict[type[Op[Any]], OpSpec] = {}
_BY_OPERATOR: dict[str, OpSpec] = {}
_FUNCTIONS: dict[str, Callable[..., Any]] = {}


def register_op(
    *functions: str,
    kind: Kind,
    namespace: str = "axjax",
    operators: tuple[str, ...] = (),
    doc: str | None = None,
) -> Callable[[OpT], OpT]:
    """Declare an op class: its public functions (defined in the same module), their kind.

    ``operators`` names the ``Tensor`` methods that call the (first) function: ``("__add__",
    "__radd__")`` for ``add``. ``doc`` asks ``tools/gen_overloads.py`` to write the one
    function into the module, with this docstring: ``name(x, *params)`` applies
    ``cached(cls, *params)`` to ``x`` (``params``: those of ``cls.__init__``).
    """
    if kind != "internal" and not functions:
        raise TypeError(f"register_op: a {kind} op needs at least one public function")

    def declare(cls: OpT) -> OpT:
        spec = OpSpec(cls, tuple(functions), kind, namespace, tuple(operators), doc)
        for other in _SPECS.values():
            taken = set(other.functions) & set(functions)
            if other.op is not cls and other.namespace == namespace and taken:
                raise TypeError(
                    f"register_op: {namespace}.{sorted(taken)[0]} is already declared by "
                    f"{other.op.__name__} ({other.module}); choose another name"
                )
        _SPECS[cls] = spec
        for name in operators:
            _BY_OPERATOR[name] = spec
        return cls

    return declare


def declared_ops() -> tuple[OpSpec, ...]:
    """Every declaration, in the order the modules made them."""
    return tuple(_SPECS.values())


def operator(name: str) -> Callable[..., Any]:
    """The function behind ``Tensor.<name>`` (``"__add__"`` -> ``axjax.add``)."""
    fn = _FUNCTIONS.get(name)
    if fn is None:
        spec = _BY_OPERATOR.get(name)
        if spec is None:
            raise TypeError(
                f"Tensor.{name}: no op declares this operator (is axjax.ops "
                "imported? import axjax, not axjax.core alone)"
            )
        fn = getattr(sys.modules[spec.module], spec.functions[0])
        _FUNCTIONS[name] = fn
    return fn
