"""``ax.compile(y, inputs=[x, ...])``: a ``CompiledGraph`` typed by its Inputs.

The declared overloads give ``CompiledGraph[Tensor[D, *A], *tuple[Any, ...]]`` (the result
typed, any arguments). The plugin reads the Inputs listed in the call and returns
``CompiledGraph[R, Tensor[D1, *A1] | Array | ndarray, ...]``: calling it with a Tensor
whose axes, order or dtype differ from an Input's is mypy's own argument error, as arrays
(in the Input's axis order) stay accepted.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.checker import TypeChecker
from mypy.nodes import Expression, ListExpr, SymbolTableNode, TupleExpr, TypeInfo
from mypy.plugin import FunctionContext
from mypy.types import AnyType, Instance, Type, TypeOfAny, UnionType, get_proper_type

from ._types import GRAPH, make_tensor, tensor_of

COMPILE = f"{GRAPH}._compile.compile"
#: what else a compiled graph's argument may be: an array in the Input's axis order
ARRAYS = ("jax.Array", "numpy.ndarray")


def _listed(ctx: FunctionContext, name: str) -> list[Expression] | None:
    """The expressions of ``name=[a, b]`` (or ``name=a``) in the call; ``None``: not given."""
    for i, n in enumerate(ctx.callee_arg_names):
        if n == name and ctx.args[i]:
            e = ctx.args[i][0]
            return list(e.items) if isinstance(e, ListExpr | TupleExpr) else [e]
    return None


def compile_type(
    ctx: FunctionContext,
    tensor: TypeInfo,
    tuple_info: TypeInfo,
    lookup: Callable[[str], SymbolTableNode | None],
) -> Type:
    """``CompiledGraph[R, *Ins]`` with one argument type per listed Input."""
    ret = get_proper_type(ctx.default_return_type)
    items = _listed(ctx, "inputs")
    if not isinstance(ret, Instance) or not ret.args or items is None:
        return ctx.default_return_type
    checker = ctx.api
    if not isinstance(checker, TypeChecker):
        return ctx.default_return_type
    arrays: list[Type] = []
    for full in ARRAYS:
        sym = lookup(full)
        node = sym.node if sym is not None else None
        if not isinstance(node, TypeInfo):
            return ctx.default_return_type  # the arrays' classes are not analysed
        arrays.append(Instance(node, [AnyType(TypeOfAny.special_form)] * len(node.defn.type_vars)))
    ins: list[Type] = []
    for e in items:
        t = checker.lookup_type_or_none(e)
        tt = tensor_of(t, tensor) if t is not None else None
        if tt is None or tt.axes is None:
            return ctx.default_return_type
        ins.append(UnionType([make_tensor(tensor, tt, tuple_info), *arrays]))
    return ret.copy_modified(args=[ret.args[0], *ins])


__all__ = ["COMPILE", "compile_type"]
