"""Reading and writing ``Tensor[D, *Axes]`` types inside mypy.

``Tensor[F32, A, B]`` is an ``Instance`` of ``axjax.core._tensor.Tensor`` whose ``args`` are
flat: the dtype, then one item per axis. Generic code may put one ``UnpackType`` among the
axes (``Tensor[D, *Bs, I, J]``); ``Tensor[D, *tuple[Any, ...]]`` means "rank unknown".
:class:`TT` is that pair (dtype, axes) with ``axes = None`` for an unknown rank.
"""

from __future__ import annotations

from dataclasses import dataclass

from mypy.maptype import map_instance_to_supertype
from mypy.nodes import TypeInfo
from mypy.subtypes import is_same_type
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    ProperType,
    TupleType,
    Type,
    TypeOfAny,
    TypeType,
    TypeVarLikeType,
    TypeVarTupleType,
    UnpackType,
    get_proper_type,
)

CORE = "axjax.core"
OPS = "axjax.ops"
GRAPH = "axjax.graph"
TENSOR = f"{CORE}._tensor.Tensor"
AXIS = f"{CORE}._axis.Axis"
#: the role bases (``ax.KeyOf[Q]``, ``ax.Out[E]``): generic, not final, subclassed like Axis
KEY_OF = f"{CORE}._roles.KeyOf"
ROLE_BASES = frozenset({KEY_OF, f"{CORE}._roles.Out"})
DTYPE = f"{CORE}._dtype.DType"
#: what a join widens an axis or a dtype to (``[ab, ac]`` is ``list[Tensor[F32, A, Axis]]``)
WIDENED = frozenset({AXIS, DTYPE, "builtins.object"})


@dataclass
class TT:
    """A static tensor type: the dtype and the axes (``None``: rank not known)."""

    dtype: Type
    axes: list[Type] | None

    @property
    def variadic(self) -> bool:
        """Whether the axes contain a ``*Ts`` (generic code)."""
        return self.axes is not None and any(isinstance(a, UnpackType) for a in self.axes)


def tensor_of(t: Type, tensor_info: TypeInfo) -> TT | None:
    """The :class:`TT` of a Tensor (or graph node) type; ``None`` if ``t`` is not one."""
    p = get_proper_type(t)
    if isinstance(p, AnyType):
        return TT(p, None)
    if not isinstance(p, Instance) or not p.type.has_base(TENSOR):
        return None
    if p.type is not tensor_info:
        p = map_instance_to_supertype(p, tensor_info)
    if not p.args:  # a bare `Tensor`
        return TT(AnyType(TypeOfAny.from_omitted_generics), None)
    dtype, axes = p.args[0], list(p.args[1:])
    for a in axes:
        if isinstance(a, UnpackType) and not isinstance(get_proper_type(a.type), TypeVarTupleType):
            inner = get_proper_type(a.type)
            if isinstance(inner, TupleType):  # *tuple[A, B]: spelled out
                axes = _splice(axes, a, inner.items)
                break
            return TT(dtype, None)  # *tuple[Any, ...]
    return TT(dtype, axes)


def _splice(items: list[Type], old: Type, new: list[Type]) -> list[Type]:
    i = items.index(old)
    return items[:i] + list(new) + items[i + 1 :]


def make_tensor(info: TypeInfo, tt: TT, tuple_info: TypeInfo) -> Instance:
    """The ``Instance`` for a :class:`TT` (``axes = None`` gives ``*tuple[Any, ...]``)."""
    if tt.axes is None:
        gradual = Instance(tuple_info, [AnyType(TypeOfAny.special_form)])
        return Instance(info, [tt.dtype, UnpackType(gradual)])
    return Instance(info, [tt.dtype, *tt.axes])


def class_of(t: Type) -> Type | None:
    """The type named by a class *value*: ``B`` (a class object) or ``k: type[K]`` -> ``K``."""
    p = get_proper_type(t)
    if isinstance(p, CallableType) and p.is_type_obj():
        made = get_proper_type(p.ret_type)  # a role's class, `ax.KeyOf[Time]`: argument kept
        if isinstance(made, Instance) and made.type is p.type_object() and made.args:
            return made
        return Instance(p.type_object(), [])
    if isinstance(p, TypeType):
        return p.item
    if isinstance(p, AnyType):
        return p
    return None


def held_label_known(t: Type) -> bool:
    """Whether a label value of static type ``t`` names one axis: a class object, or
    ``type[X]`` for a ``@final`` label ``X`` (or a type variable). ``type[Axis]`` may hold any
    label, ``type[X]`` for a non-final ``X`` any subclass of it."""
    p = get_proper_type(t)
    if not isinstance(p, TypeType):
        return True
    item = get_proper_type(p.item)
    return not isinstance(item, Instance) or (item.type.fullname != AXIS and item.type.is_final)


def fullname(t: Type) -> str:
    p = get_proper_type(t)
    return p.type.fullname if isinstance(p, Instance) else ""


def is_known(t: Type) -> bool:
    """A concrete class (not ``Any``, not a type variable)."""
    return isinstance(get_proper_type(t), Instance)


def same(a: Type, b: Type) -> bool:
    """Two axes (or dtypes) are the same; ``Any`` matches anything, ``*Ts`` only ``*Ts``."""
    if isinstance(a, UnpackType) or isinstance(b, UnpackType):
        return (
            isinstance(a, UnpackType) and isinstance(b, UnpackType) and is_same_type(a.type, b.type)
        )
    pa, pb = get_proper_type(a), get_proper_type(b)
    if isinstance(pa, AnyType) or isinstance(pb, AnyType):
        return True
    return is_same_type(a, b)


def index_of(items: list[Type], axis: Type) -> int | None:
    for i, it in enumerate(items):
        if not isinstance(it, UnpackType) and same(it, axis):
            return i
    return None


def contains(items: list[Type], axis: Type) -> bool:
    return index_of(items, axis) is not None


def name(t: Type) -> str:
    """How an axis or dtype is printed: ``Batch``, ``F32``, ``I`` (a TypeVar), ``*Bs``."""
    if isinstance(t, UnpackType):
        return "*" + name(t.type)
    p: ProperType = get_proper_type(t)
    if isinstance(p, Instance):
        return p.type.name
    if isinstance(p, TypeVarLikeType):
        return p.name
    if isinstance(p, AnyType):
        return "Any"
    return str(p)


def names(items: list[Type]) -> str:
    """``A, B`` (as ``axjax.core._axis.axes_names`` prints them)."""
    return ", ".join(name(a) for a in items)


def describe(tt: TT) -> str:
    """``Tensor[F32, Batch, Pixel]``: the run-time ``describe`` without the sizes."""
    axes = ["*tuple[Any, ...]"] if tt.axes is None else [name(a) for a in tt.axes]
    return "Tensor[" + ", ".join([name(tt.dtype), *axes]) + "]"


def duplicate(items: list[Type]) -> Type | None:
    """The first concrete axis that occurs twice, if any."""
    for i, a in enumerate(items):
        if (
            is_known(a)
            and not isinstance(a, UnpackType)
            and fullname(a) not in WIDENED
            and contains(items[:i], a)
        ):
            return a
    return None
