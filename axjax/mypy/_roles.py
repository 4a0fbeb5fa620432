"""Axis roles at type-check time (issue 34): ``ax.nn.causal_mask(query, key, ...)``.

The signature's TypeVar bound rejects a key role in the query's place (M2) in every
checker, but mypy words it as "Value of type variable ... cannot be ...". With the plugin the
bound is widened to ``ax.Axis`` and the call runs the run time's own check
(``nn._attention_masks.mask_axes``) on stand-in axes that keep their declared query
(:meth:`Env._role`): M2 and a ``KeyOf[Other]`` key paired with the query ``Pos``, which no
signature can state, are reported in the run's words. The result stays the declared
``Tensor[Bool, Q, K]``.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.plugin import FunctionContext, FunctionSigContext
from mypy.types import CallableType, Instance, Type, TypeVarType

from ._calls import AXES_ERROR
from ._evaluate import CannotEvaluate, Env, message

CAUSAL_MASK = "axjax.nn._attention_masks.causal_mask"
#: the TypeVar of causal_mask's query, bound to the axes that are no key role
QUERY_VAR = "_QPos"


def mask_signature(ctx: FunctionSigContext, axis: Instance) -> CallableType:
    """``causal_mask``'s signature, its query's bound widened to ``ax.Axis``: the hook below
    reports a key role in the query's place, in axjax's words."""
    sig = ctx.default_signature
    variables = [
        v.copy_modified(upper_bound=axis)
        if isinstance(v, TypeVarType) and v.name == QUERY_VAR
        else v
        for v in sig.variables
    ]
    return sig.copy_modified(variables=variables)


def mask_type(ctx: FunctionContext, env: Callable[[], Env]) -> Type:
    """The declared ``Tensor[Bool, Q, K]``, after the run's role check on stand-ins."""
    from ..core import AxisError
    from ..nn._attention_masks import mask_axes

    if len(ctx.args) < 2 or len(ctx.args[0]) != 1 or len(ctx.args[1]) != 1:
        return ctx.default_return_type
    e = env()
    try:
        query = e.value(ctx.args[0][0], ctx.arg_types[0][0])
        key = e.value(ctx.args[1][0], ctx.arg_types[1][0])
    except CannotEvaluate:
        return ctx.default_return_type
    if e.uncertain or not (isinstance(query, type) and isinstance(key, type)):
        return ctx.default_return_type
    try:
        mask_axes(query, key)
    except AxisError as error:
        ctx.api.fail(message(error), ctx.context, code=AXES_ERROR)
    except TypeError:  # not an axis label: mypy's own check of the argument says so
        pass
    return ctx.default_return_type


__all__ = ["CAUSAL_MASK", "mask_signature", "mask_type"]
