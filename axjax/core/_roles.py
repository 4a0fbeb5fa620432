"""Axis roles: an axis declared as the key of a query axis, or as the output copy of an axis.

Attention has two position axes, the queries' and the keys', and two mistakes that no name
check sees: a softmax over the query axis instead of the key axis, and a causal mask built
with the two swapped (``causal_mask(KeyPos, Time, ...)``, anti-causal once aligned by
name). A *key role* says which axis is the key of which query::

    @final
    class Pos(ax.Axis): ...

    @final
    class KPos(ax.KeyOf[Pos]): ...   # the key positions of the queries Pos

and the attention functions check it: a mask pairs ``Pos`` with ``KPos`` only in that
order, a softmax over ``Pos`` of scores that hold ``KPos`` is refused (``allow_query=True``
says it is meant), ``ax.nn.attention_weights(scores, over=KPos)`` normalises over the keys.
``class KeyPos(ax.KeyOf): ...`` (no query) is the key of any query.

An *output role* ``ax.Out[Embed]`` is the axis a square layer writes before it is read back
as ``Embed``: ``ax.nn.Linear(Embed, Embed, ...)`` has the weight ``[Out[Embed], Embed]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Generic, Literal, TypeVar, get_args, get_origin

from ._axis import Axis, axis_name, check_axis_label
from ._errors import AxisError

__all__ = [
    "KeyOf",
    "Out",
    "is_key_role",
    "query_of",
    "output_role",
    "key_role",
    "role_base",
    "rule_names",
    "check_query_key",
    "softmax_role_problem",
]

_Q = TypeVar("_Q", bound=Axis)
_E = TypeVar("_E", bound=Axis)


class KeyOf(Axis, Generic[_Q]):
    """The key axis of the query axis ``Q``: a role base, subclassed once per key axis.

    ``class KPos(ax.KeyOf[Pos]): ...`` declares ``KPos`` the key positions of the queries
    ``Pos``; ``class KeyPos(ax.KeyOf): ...`` (no query) is a key of any query. Decorate the
    subclass with ``@typing.final``, as every axis label. ``ax.KeyOf[Pos]`` itself is an
    axis too, one class per query (``ax.KeyOf[Pos] is ax.KeyOf[Pos]``), printed
    ``KeyOf[Pos]``: the key axis the attention layers derive when given no ``key_pos``.

    Example:
        >>> from typing import final
        >>> import axjax as ax
        >>> @final
        ... class Pos(ax.Axis): ...
        >>> @final
        ... class KPos(ax.KeyOf[Pos]): ...
        >>> issubclass(KPos, ax.KeyOf)
        True
        >>> ax.KeyOf[Pos].__name__, ax.KeyOf[Pos] is ax.KeyOf[Pos]
        ('KeyOf[Pos]', True)
    """

    # a key role: a query parameter (bound to ``_PlainAxis``) refuses it statically
    _key_role: ClassVar[Literal[True]] = True  # type: ignore[assignment]  # the mark that tells a key from a query
    #: the query axis (``None``: the key of any query)
    _query: ClassVar[type[Axis] | None] = None

    _made: ClassVar[dict[type[Axis], type[Axis]]] = {}

    def __class_getitem__(cls, query: Any) -> Any:
        if cls is not KeyOf or isinstance(query, TypeVar | str) or query is Any:
            generic: Any = super()  # Generic's own: KeyOf[Q] (or a forward ref) in an annotation
            return generic.__class_getitem__(query)
        query = check_axis_label(query, "ax.KeyOf[...]")
        if is_key_role(query):
            raise TypeError(
                f"ax.KeyOf[{axis_name(query)}]: {axis_name(query)} is itself a key axis; the "
                "query of a key is a plain axis (`class Pos(ax.Axis)`)"
            )
        made = cls._made.get(query)
        if made is None:
            name = f"KeyOf[{axis_name(query)}]"
            made = type(
                name,
                (KeyOf,),
                {"_query": query, "__module__": query.__module__, "__qualname__": name},
            )
            cls._made[query] = made
        return made

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__dict__.get("__orig_bases__", ()):
            if get_origin(base) is KeyOf:
                (query,) = get_args(base)
                if isinstance(query, TypeVar) or query is Any:
                    cls._query = None
                    return
                query = check_axis_label(query, f"KeyOf[...] (declaring {cls.__name__})")
                if is_key_role(query):
                    raise TypeError(
                        f"class {cls.__name__}(ax.KeyOf[{axis_name(query)}]): "
                        f"{axis_name(query)} is itself a key axis; the query of a key is a "
                        "plain axis (`class Pos(ax.Axis)`)"
                    )
                cls._query = query
                return


class Out(Axis, Generic[_E]):
    """The output role of an axis: ``ax.Out[Embed]`` is the axis a square layer writes.

    A weight never has an axis twice, so a layer from ``Embed`` to ``Embed`` keeps its output
    rows on ``Out[Embed]`` (``[Out[Embed], Embed]`` in axjax's ``[Out, In]`` order) and hands
    back ``Embed``. ``Out[Embed]`` is one class per axis (``Out[Embed] is Out[Embed]``),
    printed ``Out[Embed]``; sharding rules for ``Embed`` apply to it unless it has its own.

    Example:
        >>> from typing import final
        >>> import axjax as ax
        >>> @final
        ... class Embed(ax.Axis): ...
        >>> ax.Out[Embed].__name__, ax.Out[Embed] is ax.Out[Embed]
        ('Out[Embed]', True)
    """

    #: the axis this is the output copy of
    _base: ClassVar[type[Axis] | None] = None
    _made: ClassVar[dict[type[Axis], type[Axis]]] = {}

    def __class_getitem__(cls, base: Any) -> Any:
        if isinstance(base, TypeVar):  # Out[E] in a generic annotation
            return super().__class_getitem__(base)  # type: ignore[misc]  # Generic's own
        base = check_axis_label(base, "ax.Out[...]")
        if issubclass(base, Out):
            raise TypeError(
                f"ax.Out[{axis_name(base)}]: {axis_name(base)} is already an output role"
            )
        made = cls._made.get(base)
        if made is None:
            name = f"Out[{axis_name(base)}]"
            made = type(
                name, (Out,), {"_base": base, "__module__": base.__module__, "__qualname__": name}
            )
            cls._made[base] = made
        return made


def key_role(query: type[Axis]) -> type[Axis]:
    """``ax.KeyOf[query]`` (for a computed ``query``): the key axis tied to ``query``."""
    made: type[Axis] = KeyOf.__class_getitem__(query)
    return made


def output_role(axis: type[Axis]) -> type[Axis]:
    """``ax.Out[axis]`` (for a computed ``axis``)."""
    made: type[Axis] = Out.__class_getitem__(axis)
    return made


def is_key_role(axis: object) -> bool:
    """Whether ``axis`` is declared a key (a subclass of ``ax.KeyOf``)."""
    return isinstance(axis, type) and issubclass(axis, KeyOf) and axis is not KeyOf


def query_of(axis: type[Axis]) -> type[Axis] | None:
    """The query axis a key role was declared for (``None``: not a key, or a key of any
    query)."""
    return axis._query if is_key_role(axis) else None  # type: ignore[attr-defined]  # KeyOf's


def role_base(axis: type[Axis]) -> type[Axis] | None:
    """The axis an output role copies (``Embed`` for ``ax.Out[Embed]``), else ``None``."""
    return axis._base if isinstance(axis, type) and issubclass(axis, Out) else None


def _declare(query: type[Axis], key: type[Axis]) -> str:
    q, k = axis_name(query), axis_name(key)
    if k.startswith("KeyOf["):  # the derived key of a query: the query's own is its name
        return f"use ax.KeyOf[{q}]"
    return f"declare `@final class {k}(ax.KeyOf[{q}]): ...`"


def check_query_key(where: str, query: type[Axis], key: type[Axis]) -> None:
    """Raise ``AxisError`` unless ``key`` may be the key axis of ``query``.

    A plain key axis (not a role) is accepted, a generic key role (``ax.KeyOf``) goes with
    any query, a ``KeyOf[Q]`` only with ``Q``; a key role in the query's place is refused.
    """
    if is_key_role(query):
        own = query_of(query)
        hint = (
            f"{axis_name(query)} is declared the key of {axis_name(own)}"
            if own is not None
            else f"{axis_name(query)} is declared a key axis (ax.KeyOf)"
        )
        raise AxisError(
            f"{where}: query and key are swapped: the query axis {axis_name(query)} is a key "
            f"role and the key axis is {axis_name(key)} ({hint}); pass {axis_name(key)} as the "
            f"query axis and {axis_name(query)} as the key axis"
        )
    own = query_of(key)
    if own is not None and own is not query:
        raise AxisError(
            f"{where}: the key axis {axis_name(key)} is declared the key of {axis_name(own)} "
            f"(ax.KeyOf[{axis_name(own)}]), not of the query axis {axis_name(query)}; pass "
            f"{axis_name(own)} as the query, or {_declare(query, key)} for the queries "
            f"{axis_name(query)}"
        )


def softmax_role_problem(axes: tuple[type[Axis], ...], over: tuple[type[Axis], ...]) -> str | None:
    """Why a softmax over ``over`` of a tensor with ``axes`` is refused: ``over`` names a
    query axis whose key role is among ``axes`` (a softmax over the queries of attention
    scores; ``allow_query=True`` skips this). ``None`` when it is not."""
    for a in over:
        keys = [k for k in axes if query_of(k) is a]
        if keys:
            k = keys[0]
            declared = (
                ""
                if axis_name(k) == f"KeyOf[{axis_name(a)}]"
                else f" ({axis_name(k)} is declared ax.KeyOf[{axis_name(a)}])"
            )
            return (
                f"a softmax over the query axis {axis_name(a)} of scores that hold its key "
                f"axis {axis_name(k)}{declared}: "
                f"attention normalises over the keys, write ax.softmax(scores, {axis_name(k)}) "
                f"or ax.nn.attention_weights(scores, over={axis_name(k)}); pass "
                "allow_query=True if this model does normalise over the queries"
            )
    return None


def rule_names(
    table: Mapping[type[Axis], tuple[str, ...]], axes: Sequence[type[Axis]]
) -> list[tuple[str, ...]]:
    """The mesh axes of each of ``axes`` under a rules table: an axis's own rule, else, for
    an output role ``Out[E]``, the rule of ``E`` less the mesh axes that the tensor's own
    rules already use (``[Out[Embed], Embed]`` under ``{Embed: "model"}`` splits ``Embed``,
    the axis that holds the rule, and keeps ``Out[Embed]`` whole)."""
    own = [table.get(a) for a in axes]
    used = {m for names in own if names for m in names}
    out: list[tuple[str, ...]] = []
    for a, names in zip(axes, own, strict=True):
        if names is None:
            base = role_base(a)
            inherited = table.get(base, ()) if base is not None else ()
            names = tuple(m for m in inherited if m not in used)
            used.update(names)
        out.append(names)
    return out
