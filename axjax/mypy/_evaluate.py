"""Evaluate an op call at type-check time by running axjax's own type rules symbolically.

The static types of the arguments become run-time stand-ins: each axis (a class, a type
variable, ``*Ts``) a fresh ``Axis`` subclass of the same name, each Tensor operand an
``ax.Input`` with those axes and open sizes, numbers and literals their values. The public
function is then called for real, so the graph machinery runs the op's ``infer`` and either
returns an ``Apply`` node, whose axes map back to static types, or raises the very
``AxisError`` a run would raise. Static and run-time messages therefore agree by
construction (sizes print as ``?``, which is dropped). A rule that cannot run on open sizes
(a convolution's window arithmetic) runs again with every size :data:`SIZE`.
"""

from __future__ import annotations

import itertools
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mypy.maptype import map_instance_to_supertype
from mypy.nodes import (
    DictExpr,
    Expression,
    FloatExpr,
    IntExpr,
    ListExpr,
    MemberExpr,
    NameExpr,
    TupleExpr,
    TypeInfo,
    UnaryExpr,
)
from mypy.types import (
    AnyType,
    CallableType,
    FunctionLike,
    Instance,
    LiteralType,
    NoneType,
    TupleType,
    Type,
    TypeOfAny,
    TypeType,
    TypeVarTupleType,
    TypeVarType,
    UnpackType,
    get_proper_type,
)

from .. import core as _core
from ..core import Axis, AxisError, DType, KeyOf, Tensor
from ..graph import Input, Node
from ._types import AXIS, DTYPE, KEY_OF, TT, WIDENED, class_of, describe, fullname, tensor_of

_SIZES = re.compile(r"=(\?|\d+)(?=[,\]])")
#: the size every axis gets when a rule cannot run on open sizes (a convolution's window)
SIZE = 32
_fresh = itertools.count()


class CannotEvaluate(Exception):
    """The arguments are not known well enough: the call gets the gradual type."""


class Joined(Exception):
    """An operand's axis or dtype was widened to a base class by a join (or the operand to
    ``object``): ``what`` shows the widened type."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class Named(int):
    """A non-literal int: behaves as 1 and prints as its source expression (``i``)."""

    text: str

    def __new__(cls, text: str, value: int = 1) -> Named:
        out = super().__new__(cls, value)
        out.text = text
        return out

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return self.text


class Opaque:
    """A value the type rules only carry along (a traced index, a key)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


@dataclass
class Env:
    """Stand-ins made for one call, and what they stand for."""

    tensor_info: TypeInfo
    type_of: Callable[[Expression], Type | None]  # the inferred type of a list element
    marker: Callable[[str], Type | None]  # F32 -> the static type of the dtype marker
    flavour: str = "float"  # numpy kind given to dtype type variables
    reverse: dict[object, Type] = field(default_factory=dict)
    cache: dict[object, type[Any]] = field(default_factory=dict)
    uncertain: bool = False  # an Any axis or dtype was seen
    any_axis: bool = False  # an Any axis was seen
    variadic: bool = False  # a *Ts was seen
    dtype_vars: bool = False  # a dtype type variable was seen
    placeholders: bool = False  # a value was not known (Named / Opaque)
    sized: bool = False  # give every axis the size SIZE instead of leaving it open
    standins: set[type[DType]] = field(default_factory=set)  # dtypes of type variables, Any

    # --------------------------------------------------------------- stand-ins
    def axis(self, t: Type) -> type[Axis]:
        """The stand-in class of one static axis."""
        p = get_proper_type(t)
        if isinstance(t, UnpackType):
            self.variadic = True
            key: object = ("*", str(t.type))
            label = "*" + _label(t.type)
        elif isinstance(p, Instance):  # a role base's arguments tell its classes apart
            key = ("class", p.type.fullname, *(str(a) for a in p.args))
            label = p.type.name + (f"[{', '.join(map(_label, p.args))}]" if p.args else "")
        elif isinstance(p, TypeVarType):
            key, label = ("var", p.fullname, p.id.raw_id), p.name
        else:  # Any, or something odd: a fresh axis that matches nothing else
            self.uncertain = self.any_axis = True
            key, label = ("any", next(_fresh)), "Any"
        cls = self.cache.get(key)
        if cls is None:
            cls = self._role(p) or type(label, (Axis,), {"__module__": "axjax.mypy"})
            self.cache[key] = cls
            self.reverse[cls] = t
        return cls

    def _role(self, p: Type) -> type[Axis] | None:
        """The stand-in of a key role (``class KPos(ax.KeyOf[Pos])``, or ``ax.KeyOf[Pos]``
        itself): a ``KeyOf`` subclass with the stand-in of its query, so that the run-time
        role checks run statically."""
        if not isinstance(p, Instance):
            return None
        base = next((b for b in p.type.mro if b.fullname == KEY_OF), None)
        if base is None:
            return None
        query = get_proper_type(map_instance_to_supertype(p, base).args[0])
        ns: dict[str, object] = {"__module__": "axjax.mypy"}
        if isinstance(query, Instance):
            ns["_query"] = self.axis(query)
        name = p.type.name
        if p.type is base and isinstance(query, Instance):  # ax.KeyOf[Pos] itself
            name = f"KeyOf[{query.type.name}]"
        return type(name, (KeyOf,), ns)

    def dtype(self, t: Type) -> type[DType]:
        """A real dtype marker, or a stand-in marker for a type variable / ``Any``."""
        p = get_proper_type(t)
        if isinstance(p, Instance):
            real = getattr(_core, p.type.name, None)
            if not (isinstance(real, type) and issubclass(real, DType)) or real is DType:
                raise CannotEvaluate
            self.reverse[real] = t
            return real
        if isinstance(p, TypeVarType):
            self.dtype_vars = True
            key: object = ("dvar", p.fullname, p.id.raw_id)
            label = p.name
        else:
            self.uncertain = True
            key, label = ("dany",), "Any"
        cls = self.cache.get(key)
        if cls is None:
            kind = np.dtype(np.float32 if self.flavour == "float" else np.int32)
            cls = type(label, (DType,), {"__module__": "axjax.mypy", "numpy": kind})
            self.cache[key] = cls
            self.reverse[cls] = t
            self.standins.add(cls)
        return cls

    def fake(self, tt: TT) -> Input[Any, *tuple[Any, ...]]:
        """An ``ax.Input`` with the operand's dtype and axes, sizes open."""
        if tt.axes is None:
            raise CannotEvaluate
        if fullname(tt.dtype) == DTYPE or any(fullname(a) in WIDENED for a in tt.axes):
            raise Joined(describe(tt))
        axes = [self.axis(a) for a in tt.axes]
        sizes = [SIZE] * len(axes) if self.sized else None
        try:
            return Input(self.dtype(tt.dtype), *axes, sizes=sizes)
        except (AxisError, TypeError):
            raise CannotEvaluate from None

    # --------------------------------------------------------------- values
    def value(self, expr: Expression | None, typ: Type) -> object:
        """The run-time value standing for an argument of static type ``typ``."""
        p = get_proper_type(typ)
        tt = tensor_of(p, self.tensor_info)
        if tt is not None:
            if isinstance(p, AnyType):
                raise CannotEvaluate
            return self.fake(tt)
        if isinstance(p, CallableType) and p.is_type_obj():  # ax.KeyOf[Time]: argument kept
            return self.klass(class_of(p) or Instance(p.type_object(), []))
        if isinstance(p, FunctionLike) and p.is_type_obj():
            return self.klass(Instance(p.type_object(), []))
        if isinstance(p, TypeType):
            return self.klass(p.item, held=True)
        if isinstance(p, TupleType):
            exprs = (
                expr.items
                if isinstance(expr, TupleExpr) and len(expr.items) == len(p.items)
                else [None] * len(p.items)
            )
            return tuple(self.value(e, t) for e, t in zip(exprs, p.items, strict=True))
        if isinstance(p, NoneType):
            return None
        if isinstance(p, LiteralType):
            return p.value
        if isinstance(p, Instance):
            return self.instance_value(expr, p)
        raise CannotEvaluate

    def klass(self, t: Type, held: bool = False) -> object:
        """A class passed as a value: an axis label, a dtype marker, or something else.

        ``held``: the class comes from a value of type ``type[X]`` (a variable, a field), which
        may hold any subclass of ``X``. Unless ``X`` is a concrete label (a ``@final`` axis
        class) the axis is not known: the call gets the gradual type, never an error.
        """
        p = get_proper_type(t)
        if isinstance(p, Instance):
            if p.type.fullname == AXIS:
                if held:  # `axis: type[Axis]`: some label, not Axis itself
                    raise CannotEvaluate
                return Axis
            if p.type.has_base(AXIS):
                if held and not p.type.is_final:
                    raise CannotEvaluate
                return self.axis(p)
            if p.type.has_base(DTYPE):
                return self.dtype(p)
            return type(p.type.name, (), {"__module__": "builtins"})  # prints as <class 'int'>
        if isinstance(p, TypeVarType):
            bound = get_proper_type(p.upper_bound)
            if isinstance(bound, Instance) and bound.type.has_base(DTYPE):
                return self.dtype(p)
            return self.axis(p)
        raise CannotEvaluate

    def instance_value(self, expr: Expression | None, p: Instance) -> object:
        if p.last_known_value is not None:
            return p.last_known_value.value
        full = p.type.fullname
        if full in ("builtins.int", "builtins.float", "builtins.bool"):
            literal = _literal(expr)
            if literal is not None:
                return literal
            self.placeholders = True
            return {
                "builtins.int": Named(_text(expr)),
                "builtins.float": 1.0,
                "builtins.bool": True,
            }[full]
        if full in ("builtins.list", "builtins.tuple") or p.type.has_base("typing.Sequence"):
            elem = p.args[0] if p.args else AnyType(TypeOfAny.special_form)
            if isinstance(expr, ListExpr | TupleExpr):
                return [self.value(e, self._element(e, elem)) for e in expr.items]
            return [self.value(None, elem)]
        if isinstance(expr, DictExpr) and len(p.args) == 2:
            return {
                self.value(k, self._element(k, p.args[0]) if k else p.args[0]): self.value(
                    v, self._element(v, p.args[1])
                )
                for k, v in expr.items
            }
        if full == "builtins.str":
            raise CannotEvaluate
        if full == "builtins.object":  # the join of tensors of different ranks or dtypes
            raise Joined("object")
        self.placeholders = True
        return Opaque(_text(expr))

    def lift(self, operands: list[object]) -> list[object]:
        """Numbers among the operands of an elementwise op, as rank-0 inputs of the tensor
        operands' dtype when that is a stand-in (a type variable, ``Any``).

        At run time a number takes the dtype of the tensor it meets (``x * 0.5`` with ``x``
        in ``BF16`` multiplies by a ``BF16`` 0.5). The op does that through numpy, which turns
        a stand-in back into the real ``F32``, so ``x * 0.5`` with ``x: Tensor[D, ...]`` would
        read as ``D`` against ``F32``. Concrete dtypes are left to the op, which also checks
        that the number fits (no ``0.5`` into ``I32``).
        """
        dtypes = {v.dtype for v in operands if isinstance(v, Node)}
        if len(dtypes) != 1 or not dtypes <= self.standins:
            return operands
        (dtype,) = dtypes
        return [Input(dtype) if isinstance(v, int | float) else v for v in operands]

    def _element(self, e: Expression, fallback: Type) -> Type:
        """The exact type of a list element (not the join of all elements) if mypy has it."""
        return self.type_of(e) or fallback

    # --------------------------------------------------------------- results
    def result(self, out: object) -> TT:
        """The static type of the run-time result (an ``Apply`` node, or an operand)."""
        if not isinstance(out, Node):
            raise CannotEvaluate
        node: Tensor[Any, *tuple[Any, ...]] = out
        dtype = self.reverse.get(node.dtype) or self.marker(node.dtype.__name__)
        try:
            axes = [self.reverse[a] for a in node.axes]
        except KeyError:
            raise CannotEvaluate from None
        if dtype is None:
            raise CannotEvaluate
        return TT(dtype, axes)


def _literal(expr: Expression | None) -> int | float | None:
    if isinstance(expr, IntExpr | FloatExpr):
        return expr.value
    if isinstance(expr, UnaryExpr) and expr.op == "-":
        inner = _literal(expr.expr)
        return None if inner is None else -inner
    return None


def _text(expr: Expression | None) -> str:
    if isinstance(expr, NameExpr):
        return expr.name
    if isinstance(expr, MemberExpr):
        return f"{_text(expr.expr)}.{expr.name}"
    return "?"


def _label(t: Type) -> str:
    p = get_proper_type(t)
    return p.name if isinstance(p, TypeVarTupleType) else str(p)


def message(error: Exception) -> str:
    """The run-time message as the static checker shows it (the sizes dropped, and the
    axis provenance that ``AXJAX_PROVENANCE=1`` adds: it would point into the plugin)."""
    return _SIZES.sub("", str(error).split("\nAxis provenance: ")[0])


def deliberate(error: BaseException) -> bool:
    """Whether a ``raise`` statement of axjax made the error (not a ``None - 1`` in a rule
    that cannot handle open sizes)."""
    frames = traceback.extract_tb(error.__traceback__)
    line = (frames[-1].line or "") if frames else ""
    return line.lstrip().startswith("raise")
