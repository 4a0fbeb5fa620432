"""Hooks for calls that are not ops: ``ax.vmap``, user functions, and the hooks' safety net."""

from __future__ import annotations

import functools
import hashlib
import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from mypy.errorcodes import ErrorCode
from mypy.nodes import Expression, IntExpr, TypeInfo, UnaryExpr
from mypy.plugin import FunctionContext, MethodContext
from mypy.subtypes import is_same_type
from mypy.types import (
    CallableType,
    Instance,
    TupleType,
    Type,
    UnionType,
    UnpackType,
    get_proper_type,
)

from ._types import (
    TENSOR,
    TT,
    class_of,
    describe,
    duplicate,
    held_label_known,
    make_tensor,
    name,
    names,
    tensor_of,
)

AXES_ERROR = ErrorCode("axjax-axes", "Axes or dtypes of an axjax op do not line up", "axjax")
JOIN_ERROR = ErrorCode("axjax-joined-axis", "An axis was widened to a base class", "axjax")
DEBUG = bool(os.environ.get("AXJAX_MYPY_DEBUG"))  # print the tracebacks the hooks swallow

C = TypeVar("C")
R = TypeVar("R")


def safe(hook: Callable[[C], R], fallback: Callable[[C], R]) -> Callable[[C], R]:
    """A hook that never takes mypy down: on an unexpected error, mypy's own answer."""

    def guarded(ctx: C) -> R:
        try:
            return hook(ctx)
        except Exception:  # noqa: BLE001 - a bug here must not crash the user's type check
            if DEBUG:
                traceback.print_exc()
            return fallback(ctx)

    return guarded


def default(ctx: FunctionContext | MethodContext) -> Type:
    return ctx.default_return_type


def literal_int(e: Expression) -> int | None:
    """``3`` or ``-1`` written in the call, else ``None``."""
    if isinstance(e, IntExpr):
        return e.value
    if isinstance(e, UnaryExpr) and e.op == "-" and isinstance(e.expr, IntExpr):
        return -e.expr.value
    return None


def no_repeated_axis(ctx: FunctionContext | MethodContext) -> Type:
    """A generic user function whose result would name one axis twice (``I`` and ``L`` both
    bound to ``A``) cannot return: no tensor has an axis twice."""
    context: object = getattr(ctx.api, "type_context", None)  # a list on the TypeChecker
    stack = context() if callable(context) else context
    if isinstance(stack, list) and stack and stack[-1] is not None:
        return ctx.default_return_type  # inferred from the context: mypy reports a mismatch
    ret = get_proper_type(ctx.default_return_type)
    if isinstance(ret, Instance) and ret.type.has_base(TENSOR) and ret.args:
        twice = duplicate(list(ret.args[1:]))
        if twice is not None:
            axes = list(ret.args[1:])
            ctx.api.fail(
                f"The call returns {describe(TT(ret.args[0], axes))}: axis "
                f"{name(twice)} occurs twice in ({names(axes)}); a tensor never has the "
                "same axis twice (rename one of them)",
                ctx.context,
                code=AXES_ERROR,
            )
    return ctx.default_return_type


def vmap_type(
    ctx: FunctionContext,
    tensor: TypeInfo,
    tuple_info: TypeInfo,
    obj: Instance,
    gradual: Callable[[], Instance],
) -> Type:
    """``ax.vmap(f, over=X, at=k)``: ``f``'s parameters, its Tensor results with ``X``
    inserted at ``k`` (the arguments are not checked: any may carry ``X`` anywhere)."""
    args = {n: ctx.arg_types[i] for i, n in enumerate(ctx.callee_arg_names) if n is not None}
    fun = get_proper_type(args["fun"][0]) if args.get("fun") else None
    over = class_of(args["over"][0]) if args.get("over") else None
    at_expr = [e for i, n in enumerate(ctx.callee_arg_names) if n == "at" for e in ctx.args[i]]
    at = literal_int(at_expr[0]) if at_expr else 0
    if (
        not isinstance(fun, CallableType)
        or over is None
        or at is None
        or not held_label_known(args["over"][0])
    ):
        return ctx.default_return_type

    def batched(t: Type) -> Type:
        tt = tensor_of(t, tensor)
        p = get_proper_type(t)
        if tt is None:
            if isinstance(p, TupleType):
                return p.copy_modified(items=[batched(i) for i in p.items])
            return t
        if tt.axes is None or tt.variadic:
            return gradual()
        k = at if at >= 0 else len(tt.axes) + 1 + at
        if not 0 <= k <= len(tt.axes):
            return gradual()
        return make_tensor(tensor, TT(tt.dtype, [*tt.axes[:k], over, *tt.axes[k:]]), tuple_info)

    over_t = Instance(over.type, []) if isinstance(over, Instance) else None
    several = len(fun.arg_types) > 1
    params = [
        _mapped(t, over_t, several, tensor, tuple_info) or obj if over_t is not None else obj
        for t in fun.arg_types
    ]
    return fun.copy_modified(arg_types=params, ret_type=batched(fun.ret_type), variables=[])


def _mapped(
    t: Type, over: Instance, shared: bool, tensor: TypeInfo, tuple_info: TypeInfo
) -> Type | None:
    """What a batched function's argument may be, for ``f``'s exact parameter type ``t``:
    ``t`` with ``over`` anywhere (the run time maps it wherever it is), or ``t`` itself when
    ``f`` has other parameters (an argument without ``over`` is shared; one of them must
    have it). ``None``: not an exact Tensor type (anything goes)."""
    tt = tensor_of(t, tensor)
    if tt is None or tt.axes is None or tt.variadic:
        return None
    known = [tt.dtype, *tt.axes]
    if any(not isinstance(get_proper_type(a), Instance) for a in known):
        return None  # a type variable or Any: gradual
    if any(is_same_type(a, over) for a in tt.axes):
        return None  # f takes `over` itself: whatever the run time maps, f judges
    options = [
        make_tensor(tensor, TT(tt.dtype, [*tt.axes[:k], over, *tt.axes[k:]]), tuple_info)
        for k in range(len(tt.axes) + 1)
    ]
    return UnionType.make_union([*options, *([t] if shared else [])])


def exact_index(
    ctx: FunctionContext, pos: list[object], kw: dict[str, object], tensor: TypeInfo
) -> bool:
    """With ``*Ts`` in the operand, a literal index is exact only outside the variadic part."""
    at = kw.get("at", pos[2] if len(pos) > 2 else 0)
    operand = ctx.arg_types[0][0] if ctx.arg_types and ctx.arg_types[0] else None
    tt = tensor_of(operand, tensor) if operand is not None else None
    if tt is None and operand is not None:  # stack: a sequence of tensors
        p = get_proper_type(operand)
        tt = tensor_of(p.args[0], tensor) if isinstance(p, Instance) and p.args else None
    if tt is None or tt.axes is None or not isinstance(at, int):
        return False
    k = next(i for i, a in enumerate(tt.axes) if isinstance(a, UnpackType))
    return 0 <= at <= k or (at < 0 and -at - 1 <= len(tt.axes) - 1 - k)


def fingerprint_files() -> list[Path]:
    """Every module of the package: the plugin runs the type rules of core, ops, graph, nn
    and train (ops' ``infer``, layers' checks, losses' rules...), so any of them changing
    must re-check the modules that used them."""
    package = Path(__file__).resolve().parent.parent
    return sorted(package.rglob("*.py"))


@functools.cache
def fingerprint() -> str:
    """A hash of the plugin and of every module whose type rules it runs
    (:func:`fingerprint_files`)."""
    digest = hashlib.sha256()
    for path in fingerprint_files():
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
