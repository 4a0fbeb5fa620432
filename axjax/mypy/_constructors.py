"""Constructors at any rank: ``ax.zeros((2, 3), A, B)`` is a ``Tensor[F32, A, B]``.

They compute, so they are not run symbolically: the labels and the shape are checked with
the same helpers the constructors use, and the dtype comes from ``dtype=`` or the default.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.errorcodes import ErrorCode
from mypy.plugin import FunctionContext
from mypy.types import AnyType, NoneType, Type, TypeOfAny, TypeType, get_proper_type

from ..core import Axis
from ..core._internal import check_axis_label, check_unique_axes
from ..ops import _construct
from ._evaluate import CannotEvaluate, Env, Joined, message
from ._host import host_dtype
from ._types import DTYPE, TT, class_of, fullname

#: the stand-in for a label whose class is not known statically (it only counts axes)
_UNKNOWN: type[Axis] = type("Any", (Axis,), {"__module__": "axjax.mypy"})
#: the formal that holds the axes, per constructor
_AXES = {"arange": "axis"}


def _formal(ctx: FunctionContext, name: str) -> int | None:
    try:
        return ctx.callee_arg_names.index(name)
    except ValueError:
        return None


def constructor_type(
    short: str,
    ctx: FunctionContext,
    env: Env,
    default: str,
    marker: Callable[[str], Type | None],
    code: ErrorCode,
) -> TT | None:
    """The result type of a constructor call, reporting bad labels; ``None``: gradual."""
    i = _formal(ctx, _AXES.get(short, "axes"))
    if i is None:
        return None
    statics: list[Type] = []
    labels: list[object] = []  # _UNKNOWN: a label not known (`axis: type[Axis]`, Any)
    for t in ctx.arg_types[i]:
        axis = class_of(t)
        if axis is None:
            return None
        try:
            label = env.klass(axis, held=isinstance(get_proper_type(t), TypeType))
        except CannotEvaluate:  # the rank is known, the axis is not: an Any axis there
            statics.append(AnyType(TypeOfAny.special_form))
            labels.append(_UNKNOWN)
            continue
        statics.append(axis)
        labels.append(label)
    try:
        checked = tuple(a if a is _UNKNOWN else check_axis_label(a, "Tensor") for a in labels)
        check_unique_axes(tuple(a for a in checked if a is not _UNKNOWN), "Tensor")
        _check_shape(short, ctx, env, checked)
    except (CannotEvaluate, Joined):
        return None
    except TypeError as e:
        ctx.api.fail(message(e), ctx.context, code=code)
        return None
    return TT(_dtype(ctx, default, marker), statics)


def _check_shape(short: str, ctx: FunctionContext, env: Env, axes: tuple[type, ...]) -> None:
    """``zeros((2, 3), A)``: the run-time check of the number of sizes, if they are literal."""
    j = _formal(ctx, "shape")
    check = getattr(_construct, "_shape", None)
    if j is None or not ctx.arg_types[j] or check is None:
        return
    try:
        shape = env.value(ctx.args[j][0], ctx.arg_types[j][0])
    except CannotEvaluate:
        return
    if env.placeholders:
        return
    check(shape, axes, short)


def _dtype(ctx: FunctionContext, default: str, marker: Callable[[str], Type | None]) -> Type:
    """The dtype ``dtype=`` names, else the constructor's default; ``ax.tensor``'s default
    (``default`` is ``"Any"``) is its data's dtype where the data's type knows it, else the
    gradual ``Any``, which every dtype accepts (never ``typing.Any``'s class)."""
    j = _formal(ctx, "dtype")
    if j is not None and ctx.arg_types[j]:
        p = get_proper_type(ctx.arg_types[j][0])
        if isinstance(p, NoneType):
            return _host(ctx, marker)
        given = class_of(p)
        if isinstance(p, TypeType) and fullname(p.item) == DTYPE:
            return AnyType(TypeOfAny.special_form)  # `dtype: type[DType]`: some dtype
        if given is not None:
            return given
        if isinstance(p, TypeType):
            return p.item
        return AnyType(TypeOfAny.special_form)
    if default == "Any":
        return _host(ctx, marker)
    return marker(default) or AnyType(TypeOfAny.special_form)


def _host(ctx: FunctionContext, marker: Callable[[str], Type | None]) -> Type:
    """The dtype of ``ax.tensor``'s data, where its static type knows it (:mod:`._host`)."""
    i = _formal(ctx, "data")
    known = host_dtype(ctx.arg_types[i][0]) if i is not None and ctx.arg_types[i] else None
    return (marker(known) if known else None) or AnyType(TypeOfAny.special_form)
