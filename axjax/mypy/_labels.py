"""Annotation hygiene: what a ``Tensor[...]`` annotation may name, and @final labels.

mypy checks the axes of a ``TypeVarTuple`` *covariantly* (the typing spec says
invariantly, and pyright agrees), so a sub-axis would pass where its parent is expected and
``Tensor[F32, Axis]`` would accept every tensor. Labels that cannot have sub-classes, and
annotations that name only such labels, close that hole.
"""

from __future__ import annotations

from mypy.errorcodes import ErrorCode
from mypy.plugin import AnalyzeTypeContext, ClassDefContext
from mypy.types import Instance, Type, get_proper_type

from ._types import AXIS, DTYPE, ROLE_BASES, TENSOR, name, names

LABEL_ERROR = ErrorCode("axjax-axis-label", "Not a usable axis label or annotation", "axjax")

_analyzing: list[bool] = []  # re-entrancy guard: the default analysis calls the hook again


def check_label_class(ctx: ClassDefContext) -> None:
    """A direct subclass of ``ax.Axis`` or of a role base (``ax.KeyOf[Q]``, ``ax.Out[E]``)
    must be ``@final``; the role bases themselves are generic bases, not labels."""
    if ctx.cls.info.fullname in ROLE_BASES:
        return
    if not ctx.cls.info.is_final:
        ctx.api.fail(
            f"Axis label {ctx.cls.name} must be decorated with @final (mypy treats Tensor "
            "axes covariantly, so a sub-axis would be accepted in its place)",
            ctx.cls,
            code=LABEL_ERROR,
        )


def analyzing() -> bool:
    """Whether the default analysis of a Tensor annotation is running (no hook then)."""
    return bool(_analyzing)


def check_annotation(ctx: AnalyzeTypeContext) -> Type:
    """Analyse ``Tensor[...]`` as usual, then reject non-labels and repeated axes."""
    _analyzing.append(True)
    try:
        # mypy's own analysis (an internal method: the hook replaces it otherwise)
        typ: Type = ctx.api.visit_unbound_type_nonoptional(ctx.type, False)  # type: ignore[attr-defined]  # TypeAnalyser's, not in the interface
    finally:
        _analyzing.pop()
    p = get_proper_type(typ)
    if not isinstance(p, Instance) or not p.type.has_base(TENSOR) or not p.args:
        return typ
    dtype, axes = p.args[0], list(p.args[1:])
    pd = get_proper_type(dtype)
    if isinstance(pd, Instance) and pd.type.fullname == DTYPE:
        ctx.api.fail(
            "DType itself is not a dtype marker: write ax.F32, ax.I32, ... or a type "
            "variable bound to ax.DType",
            ctx.context,
            code=LABEL_ERROR,
        )
    seen: list[Instance] = []
    for a in axes:
        pa = get_proper_type(a)
        if not isinstance(pa, Instance):
            continue  # a type variable, *Ts, Any
        if pa.type.fullname == AXIS:
            ctx.api.fail(
                "Tensor: `Axis` itself is not an axis label; subclass it",
                ctx.context,
                code=LABEL_ERROR,
            )
        elif not pa.type.has_base(AXIS):
            ctx.api.fail(
                f'"{pa.type.name}" is not an axis label: the arguments after the '
                "dtype are @final subclasses of ax.Axis (or type variables)",
                ctx.context,
                code=LABEL_ERROR,
            )
        elif any(s.type is pa.type for s in seen):
            ctx.api.fail(
                f"Tensor: axis {name(pa)} occurs twice in ({names(axes)}); a tensor "
                "never has the same axis twice (rename one of them)",
                ctx.context,
                code=LABEL_ERROR,
            )
        seen.append(pa)
    return typ
