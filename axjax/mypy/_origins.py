"""The static counterpart of axis provenance: where an offending operand got its type.

At run time ``ax.config.provenance`` makes an ``AxisError`` say where each axis came from.
The plugin cannot follow values, but it can point at the variable: after an axis error it
adds, for each Tensor operand that is a variable assigned elsewhere, a note with the
variable's type and the line that gave it that type (its assignment, or the ``def`` of a
parameter)::

    model.py:30: error: Cannot apply Add to Tensor[F32, Batch, Hidden] and ...  [axjax-axes]
    model.py:30: note: "h" is "Tensor[F32, Hidden, Batch]", typed at line 21  [axjax-axes]
"""

from __future__ import annotations

from mypy.messages import format_type
from mypy.nodes import CallExpr, Expression, MemberExpr, NameExpr, OpExpr, Var
from mypy.plugin import FunctionContext, MethodContext
from mypy.types import Instance, get_proper_type

from ._calls import AXES_ERROR
from ._types import TENSOR

__all__ = ["note_origins"]


def _operands(ctx: FunctionContext | MethodContext) -> list[Expression]:
    call = ctx.context
    exprs: list[Expression] = []
    if isinstance(call, OpExpr):  # a + b, a @ b
        exprs += [call.left, call.right]
    elif isinstance(call, CallExpr) and isinstance(call.callee, MemberExpr):
        exprs.append(call.callee.expr)  # the receiver of a method or a layer's __call__
    for group in ctx.args:
        exprs += group
    return exprs


def note_origins(ctx: FunctionContext | MethodContext) -> None:
    """After an axis error at ``ctx``: a note per Tensor variable operand typed elsewhere."""
    seen: set[str] = set()
    for e in _operands(ctx):
        if not isinstance(e, NameExpr) or not isinstance(e.node, Var) or e.name in seen:
            continue
        var = e.node
        t = get_proper_type(var.type) if var.type is not None else None
        if not isinstance(t, Instance) or not t.type.has_base(TENSOR):
            continue
        if var.line <= 0 or var.line == ctx.context.line:
            continue
        seen.add(e.name)
        ctx.api.msg.note(
            f'"{e.name}" is {format_type(t, ctx.api.options)}, typed at line {var.line}',
            ctx.context,
            code=AXES_ERROR,
        )
