"""Widen a declared signature so that mypy accepts any operands and the plugin decides."""

from __future__ import annotations

from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    ProperType,
    TupleType,
    Type,
    TypeType,
    TypeVarLikeType,
    UninhabitedType,
    UnionType,
    UnpackType,
    get_proper_type,
)

from ._types import TENSOR


def involves_axes(t: Type) -> bool:
    """Whether a parameter type mentions a Tensor, a type variable or ``Any``."""
    p: ProperType = get_proper_type(t)
    if isinstance(p, TypeVarLikeType | AnyType | UninhabitedType):
        return True  # Never: a type variable that the declared signature could not solve
    if isinstance(p, Instance):
        return p.type.has_base(TENSOR) or any(involves_axes(a) for a in p.args)
    if isinstance(p, UnionType):
        return any(involves_axes(i) for i in p.items)
    if isinstance(p, TupleType):
        return any(involves_axes(i) for i in p.items)
    if isinstance(p, TypeType):
        return involves_axes(p.item)
    if isinstance(p, UnpackType):
        return True
    return False


def widen(sig: CallableType, obj: Instance, ret: Type) -> CallableType:
    """``sig`` with each parameter that involves axes typed ``object``, returning ``ret``.

    The other parameters (a shape, a size, a dtype marker) keep their types, so mypy still
    checks them; the plugin's return hook computes the result from the actual arguments.
    """
    return sig.copy_modified(
        arg_types=[obj if involves_axes(t) else t for t in sig.arg_types],
        ret_type=ret,
        variables=[],
    )
