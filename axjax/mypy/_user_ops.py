"""User ops run by the plugin (``op_modules``), and ``D**-0.5`` typed as a float.

A module listed in ``op_modules`` (see :mod:`._options`) is imported by the plugin, as
axjax's own ops are: its public functions are evaluated on stand-ins like ``ax.sum`` (the
user op's own ``infer`` runs and its ``AxisError`` is the message), and so is a call
``Norm(Pixel)(x)`` of one of its ``ax.Op`` classes written in one expression (the plugin
rebuilds the op from the constructor's arguments). An op instance held in a variable keeps
the type its class declares (a typed base, ``ax.Op[R]``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from mypy.checker import TypeChecker
from mypy.nodes import ARG_NAMED, ARG_POS, CallExpr, TypeInfo
from mypy.plugin import MethodContext
from mypy.types import AnyType, Instance, Type, get_proper_type

from ._evaluate import CannotEvaluate, Env


def power_type(ctx: MethodContext) -> Type:
    """``n ** 0.5`` or ``n ** -0.5`` with ``n: int`` (``float.__rpow__``) or a float is a
    ``float`` (typeshed says ``Any``, as a negative base would give a complex number; the
    sizes and counts such scales are made of are not negative)."""
    ret = get_proper_type(ctx.default_return_type)
    if not isinstance(ret, AnyType) or not ctx.arg_types or not ctx.arg_types[0]:
        return ctx.default_return_type
    operands = [get_proper_type(ctx.type), get_proper_type(ctx.arg_types[0][0])]
    names = {o.type.fullname for o in operands if isinstance(o, Instance)}
    if (
        len(names) == len(operands)
        and "builtins.float" in names
        and names <= {"builtins.int", "builtins.float"}
    ):
        return ctx.api.named_generic_type("builtins.float", [])
    return ctx.default_return_type


#: ``ax.Op``, and the typed bases whose calls every checker types (core/_typed_ops.py)
OP = "axjax.core._op.Op"
TYPED_BASES = tuple(
    f"axjax.core._typed_ops.{n}" for n in ("ElementwiseOp", "FloatElementwiseOp", "_AxisReduction")
)


def untyped_op(info: object, op_modules: set[str] | frozenset[str]) -> bool:
    """Whether ``info`` is a user's ``ax.Op`` subclass that nothing types: not on a typed
    base, not axjax's own, its module not in ``op_modules``."""
    if not isinstance(info, TypeInfo) or info.fullname.startswith("axjax."):
        return False
    if not info.has_base(OP) or any(info.has_base(b) for b in TYPED_BASES):
        return False
    return info.module_name not in op_modules


def untyped_op_note(ctx: MethodContext, noted: set[str]) -> Type:
    """A note (never an error), once per class: a call of an op whose rule no checker runs."""
    this = get_proper_type(ctx.type)
    if isinstance(this, Instance) and this.type.fullname not in noted:
        noted.add(this.type.fullname)
        ctx.api.msg.note(
            f"{this.type.name} is an ax.Op whose rule (its infer) no type checker runs: its "
            "operands are not checked. Subclass a typed base (ax.ElementwiseOp, "
            "ax.FloatElementwiseOp, ax.ReductionOp[X], ax.FloatReductionOp[X]), or list its "
            f'module "{this.type.module_name}" in op_modules under [tool.axjax-mypy] '
            "(docs/typing.md)",
            ctx.context,
        )
    return ctx.default_return_type


def inline_op(call: object) -> bool:
    """Whether a call applies an op built in the same expression: ``Norm(Pixel)(x)``."""
    return isinstance(call, CallExpr) and isinstance(call.callee, CallExpr)


def user_op_call(
    ctx: MethodContext, evaluate: Callable[[MethodContext, str, Callable[[Env], object]], Type]
) -> Type:
    """``Norm(Pixel)(x)`` for an op class of a listed module: its own ``infer`` decides."""
    this = get_proper_type(ctx.type)
    call = ctx.context
    if not isinstance(this, Instance) or not isinstance(call, CallExpr) or not inline_op(call):
        return ctx.default_return_type  # an op held in a variable: its declared type
    module, _, name = this.type.fullname.rpartition(".")
    #: the op class: its instances are called on the operands
    cls: Callable[..., Callable[..., object]] = getattr(importlib.import_module(module), name)
    checker = ctx.api
    if not isinstance(checker, TypeChecker):
        return ctx.default_return_type

    def run(env: Env) -> object:
        pos: list[object] = []
        kw: dict[str, object] = {}
        for e, kind, key in zip(ctor.args, ctor.arg_kinds, ctor.arg_names, strict=True):
            t = checker.lookup_type_or_none(e)
            if t is None or kind not in (ARG_POS, ARG_NAMED):
                raise CannotEvaluate
            if key is None:
                pos.append(env.value(e, t))
            else:
                kw[key] = env.value(e, t)
        op = cls(*pos, **kw)
        xs = [
            env.value(e, t)
            for es, ts in zip(ctx.args, ctx.arg_types, strict=True)
            for e, t in zip(es, ts, strict=True)
        ]
        return op(*xs)

    assert isinstance(call.callee, CallExpr)
    ctor = call.callee
    return evaluate(ctx, "user:" + name, run)


__all__ = ["inline_op", "power_type", "untyped_op", "untyped_op_note", "user_op_call"]
