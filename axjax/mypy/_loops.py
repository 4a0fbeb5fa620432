"""``ax.fold`` / ``ax.scan``: the unit, the initial state, ``xs`` and the mask, checked.

``ax.fold(unit, over=X)`` is a ``Fold[U, X]`` (``ax.scan``: ``Scan[U, X]``, or
``ScanAt[U, X, K]`` for ``at=K``). Calling it, ``(init, xs, mask=None)``, the plugin

1. calls the unit's static type with ``(init, one step of xs)`` (``xs`` without ``X``), as
   mypy checks any call: a unit given the wrong input or state axes is mypy's own argument
   error, and its result type is the new state;
2. runs the real ``fold``/``scan`` on stand-ins (as for every op, :mod:`._evaluate`) with a
   unit that returns a stand-in of that result: ``xs`` without ``X``, an initial state with
   ``X``, a unit that returns another state, a mask over axes the state lacks are reported
   in the run-time words (``axjax-axes``), and the result (the state, or every state with
   ``X`` inserted at ``at``) is read back from the loop node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mypy.checker import TypeChecker
from mypy.nodes import ARG_POS, CallExpr, Expression, LambdaExpr, TempNode, TypeInfo
from mypy.plugin import FunctionContext, MethodContext
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    LiteralType,
    NoneType,
    TupleType,
    Type,
    TypeOfAny,
    get_proper_type,
)

from ..graph import Node
from ..graph import fold as _fold
from ..graph import scan as _scan
from ._calls import AXES_ERROR, literal_int
from ._evaluate import CannotEvaluate, Env, Joined, deliberate, message
from ._origins import note_origins
from ._types import GRAPH, TT, make_tensor, same, tensor_of

FOLD = f"{GRAPH}._scan.Fold"
SCAN = f"{GRAPH}._scan.Scan"
SCAN_AT = f"{GRAPH}._scan.ScanAt"
SCAN_FUNCTION = f"{GRAPH}._scan.scan"
CALLS = frozenset(f"{c}.__call__" for c in (FOLD, SCAN, SCAN_AT))


def scan_position(ctx: FunctionContext) -> Type:
    """``ax.scan(unit, over=X, at=2)`` is a ``ScanAt[U, X, Literal[2]]``: the position, kept
    in the type for the call."""
    ret = get_proper_type(ctx.default_return_type)
    at = [e for i, n in enumerate(ctx.callee_arg_names) if n == "at" for e in ctx.args[i]]
    k = literal_int(at[0]) if at else None
    if not isinstance(ret, Instance) or ret.type.fullname != SCAN_AT or k is None:
        return ctx.default_return_type
    fallback = ctx.api.named_generic_type("builtins.int", [])
    return ret.copy_modified(args=[*ret.args[:2], LiteralType(k, fallback)])


def _argument(ctx: MethodContext, name: str) -> Type | None:
    for i, n in enumerate(ctx.callee_arg_names):
        if n == name and ctx.arg_types[i]:
            return ctx.arg_types[i][0]
    return None


def _step(t: Type, over: Type, tensor: TypeInfo, tuple_info: TypeInfo) -> Type | None:
    """One step of ``xs``: its type without axis ``over`` (``None``: not known)."""
    p = get_proper_type(t)
    if isinstance(p, TupleType):
        items = [_step(i, over, tensor, tuple_info) for i in p.items]
        return (
            None
            if any(i is None for i in items)
            else p.copy_modified(items=[i for i in items if i is not None])
        )
    tt = tensor_of(t, tensor)
    if tt is None or tt.axes is None or isinstance(get_proper_type(tt.dtype), AnyType):
        return None
    kept = [a for a in tt.axes if not same(a, over)]
    if len(kept) != len(tt.axes) - 1:
        return None  # no axis `over` (the run reports it) or an Any axis
    return make_tensor(tensor, TT(tt.dtype, kept), tuple_info)


def loop_call_type(
    ctx: MethodContext, make_env: Callable[[], Env], tensor: TypeInfo, tuple_info: TypeInfo
) -> Type:
    """The result of calling a ``Fold`` / ``Scan`` / ``ScanAt``, errors reported."""
    this = get_proper_type(ctx.type)
    init, xs, mask = (_argument(ctx, n) for n in ("init", "xs", "mask"))
    if not isinstance(this, Instance) or len(this.args) < 2 or init is None or xs is None:
        return ctx.default_return_type
    unit, over = this.args[0], this.args[1]
    if not isinstance(get_proper_type(over), Instance):
        return ctx.default_return_type  # a label not known statically
    kind = this.type.fullname
    at: int | None = 0
    if kind == SCAN_AT:
        k = get_proper_type(this.args[2]) if len(this.args) > 2 else None
        at = k.value if isinstance(k, LiteralType) and isinstance(k.value, int) else None

    # 1. the unit, called as mypy calls anything: its own argument errors, its result
    new: Type | None = None
    step = _step(xs, over, tensor, tuple_info)
    checker = ctx.api
    if step is not None and isinstance(checker, TypeChecker):
        unit = _lambda_unit(ctx, checker, unit, init, step) or unit
    if (
        step is not None
        and not isinstance(get_proper_type(unit), AnyType)
        and isinstance(checker, TypeChecker)
    ):
        args: list[Expression] = [
            TempNode(init, context=ctx.context),
            TempNode(step, context=ctx.context),
        ]
        new, _ = checker.expr_checker.check_call(unit, args, [ARG_POS, ARG_POS], ctx.context)

    # 2. the real fold / scan on stand-ins, with a unit returning a stand-in of `new`
    env = make_env()
    try:
        label = env.axis(over)
        init_v = env.value(None, init)
        xs_v = env.value(None, xs)
        mask_v: Any = None  # a stand-in node (a Tensor) when the mask is given
        if mask is not None and not _is_none(mask):
            mask_v = env.value(None, mask)

        def unit_v(state: object, x: object) -> object:
            if new is None or isinstance(get_proper_type(new), AnyType):
                return state
            return env.value(None, new)

        if kind == FOLD:
            out = _fold(unit_v, label)(init_v, xs_v, mask=mask_v)
        else:
            out = _scan(unit_v, label, at=at or 0)(init_v, xs_v, mask=mask_v)
        if at is None:
            return ctx.default_return_type
        return _read(out, env, tensor, tuple_info)
    except (CannotEvaluate, Joined):
        return ctx.default_return_type
    except Exception as e:  # noqa: BLE001 - the run-time error, or a rule we cannot run
        if (
            isinstance(e, TypeError)
            and deliberate(e)
            and not env.uncertain
            and not env.variadic
            and not env.placeholders
        ):
            ctx.api.fail(message(e), ctx.context, code=AXES_ERROR)
            note_origins(ctx)
        return ctx.default_return_type


def _lambda_unit(
    ctx: MethodContext, checker: TypeChecker, unit: Type, init: Type, step: Type
) -> Type | None:
    """A lambda unit written in the call (``ax.fold(lambda h, x: ..., over=T)(h0, xs)``),
    typed again with the state and one step of ``xs`` for its parameters: mypy typed it from
    ``fold``'s context, where its parameters are ``Any``. Its body's errors are reported at
    this call (where the run time raises them); ``None`` where the unit is no such lambda."""
    p = get_proper_type(unit)
    callee = ctx.context.callee if isinstance(ctx.context, CallExpr) else None
    if not isinstance(p, CallableType) or not p.implicit or not isinstance(callee, CallExpr):
        return None
    lam = next((a for a in callee.args if isinstance(a, LambdaExpr)), None)
    if lam is None or lam.arg_kinds != [ARG_POS, ARG_POS]:
        return None
    context = p.copy_modified(arg_types=[init, step], ret_type=AnyType(TypeOfAny.special_form))
    with checker.msg.filter_errors(save_filtered_errors=True) as watcher:
        typed = checker.expr_checker.accept(lam, type_context=context)
    for error in watcher.filtered_errors():
        if error.severity == "error":
            ctx.api.fail(error.message, ctx.context, code=error.code)
    return typed


def _is_none(t: Type) -> bool:
    return isinstance(get_proper_type(t), NoneType)


def _read(out: object, env: Env, tensor: TypeInfo, tuple_info: TypeInfo) -> Type:
    """The static type of the loop's result: a node, or a tuple of them."""
    if isinstance(out, Node):
        return make_tensor(tensor, env.result(out), tuple_info)
    if isinstance(out, tuple):
        items = [_read(o, env, tensor, tuple_info) for o in out]
        return TupleType(items, Instance(tuple_info, [AnyType(TypeOfAny.special_form)]))
    raise CannotEvaluate


__all__ = ["CALLS", "SCAN_FUNCTION", "loop_call_type", "scan_position"]
