"""Layers as arguments of a serialized ``jax.export`` function.

A model passed to an exported function is part of its calling convention: the in_tree
holds each module's class and its static fields (axis labels, sizes, activation
functions). ``jax.export`` serializes only the pytree node types registered with
``jax.export.register_pytree_node_serialization``; :func:`exportable` registers an Equinox
module class. Every layer of ``axjax.nn`` is registered by its declaration
(``register_layer``, ``nn/_registry.py``); decorate a module class of your own with
``@ax.nn.exportable`` to pass it whole.

A static field is written as JSON: numbers, strings, ``None``, tuples, lists and dicts of
them, axis labels and top-level classes and functions by their ``module:QualName`` (found
again by importing the module when the blob is loaded). A value that cannot be written so
(a lambda, a closure, an object) is an :class:`axjax.ExportAxisError` that shows the other
way: close over the model (``jax.jit(lambda x: model(x))``: its arrays become constants of
the exported function).

Example:
    >>> exp = jax.export.export(jax.jit(lambda m, x: m(x)))(model, x)
    >>> y = jax.export.deserialize(exp.serialize()).call(model, x)
"""

from __future__ import annotations

import importlib
import json
from typing import Any, TypeVar

import equinox as eqx
import jax
import jax.export

from ..core import Axis, ExportAxisError
from ..core._internal import axis_reference, resolve_axis

__all__ = ["exportable", "is_exportable", "name_static_value"]

M = TypeVar("M", bound=type[eqx.Module])

_FORMAT = 1
_registered: set[type[Any]] = set()
#: Equinox's marker for "no wrapper fields" in a module's aux data (the first entry)
_MISSING = jax.tree_util.default_registry.flatten_one_level(eqx.nn.Identity())[1][0]

#: static values with no importable name that axjax names itself (``remat``'s policies):
#: ``{id(value): (name, value)}`` and ``{name: value}``
_NAMED: dict[int, tuple[str, Any]] = {}
_BY_NAME: dict[str, Any] = {}

CLOSURE = (
    "or export a function that closes over the model instead of taking it: "
    "jax.export.export(jax.jit(lambda x: model(x)))(x) (its arrays become constants of "
    "the exported function)"
)


def exportable(cls: M) -> M:
    """Register an Equinox module class so that ``jax.export`` serializes a function that
    takes (or returns) such a module (a class decorator; the loading program must import
    the class's module). Every layer of ``ax.nn`` is registered already.

    Example:
        >>> @ax.nn.exportable
        ... class TwoLayers(eqx.Module): ...
    """
    if not (isinstance(cls, type) and issubclass(cls, eqx.Module)):
        raise TypeError(f"exportable: {cls!r} is not an Equinox module class")
    if cls in _registered:
        return cls
    where = f"{cls.__module__}.{cls.__qualname__}"
    jax.export.register_pytree_node_serialization(
        cls,
        serialized_name=f"axjax.module:{where}",
        serialize_auxdata=lambda aux: _serialize(cls, aux),
        deserialize_auxdata=lambda data: _deserialize(cls, data),
    )
    _registered.add(cls)
    return cls


def name_static_value(value: object, name: str) -> None:
    """Write ``value`` (an object axjax's layers keep as a static field, such as a
    ``jax.checkpoint`` policy) as ``name`` in a serialized function."""
    _NAMED[id(value)] = (name, value)
    _BY_NAME[name] = value


def is_exportable(cls: type[Any]) -> bool:
    """Whether :func:`exportable` registered ``cls``."""
    return cls in _registered


def _serialize(cls: type[Any], aux: object) -> bytes:
    return json.dumps({"format": _FORMAT, "aux": _encode(aux, cls, "")}).encode()


def _deserialize(cls: type[Any], data: bytes) -> object:
    try:
        record = json.loads(data.decode())
        fmt, aux = record["format"], record["aux"]
    except (ValueError, KeyError, TypeError) as e:
        raise ExportAxisError(
            f"Cannot read the static fields of a {cls.__qualname__} in a serialized "
            f"jax.export function: {data[:60]!r} is not axjax's record ({e})"
        ) from None
    if fmt != _FORMAT:
        raise ExportAxisError(
            f"Cannot read the static fields of a {cls.__qualname__} in a serialized "
            f"jax.export function: its record has format {fmt}, this axjax reads format "
            f"{_FORMAT} (load it with the axjax version that exported it)"
        )
    return _decode(aux)


def _encode(v: object, cls: type[Any], where: str) -> object:
    """``v`` as tagged JSON; ExportAxisError for a value that cannot be named."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if v is _MISSING:
        return {"$": "missing"}
    if isinstance(v, tuple):
        return {"$": "tuple", "items": [_encode(x, cls, f"{where}[{i}]") for i, x in enumerate(v)]}
    if isinstance(v, list):
        return {"$": "list", "items": [_encode(x, cls, f"{where}[{i}]") for i, x in enumerate(v)]}
    if isinstance(v, dict) and all(isinstance(k, str) for k in v):
        return {"$": "dict", "items": {k: _encode(x, cls, f"{where}[{k!r}]") for k, x in v.items()}}
    named = _NAMED.get(id(v))
    if named is not None and named[1] is v:
        return {"$": "named", "name": named[0]}
    if isinstance(v, type) and issubclass(v, Axis):
        return {"$": "axis", "ref": axis_reference(v)}
    if isinstance(v, type) or callable(v):
        return {"$": "ref", "ref": _reference(v, cls)}
    raise ExportAxisError(
        f"Cannot serialize a {cls.__qualname__} for jax.export: a static field holds "
        f"{v!r} ({type(v).__name__}), which axjax cannot write by name; {CLOSURE}"
    )


def _reference(obj: object, cls: type[Any]) -> str:
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if module is None or qualname is None or "<" in qualname:
        raise ExportAxisError(
            f"Cannot serialize a {cls.__qualname__} for jax.export: its static field "
            f"{obj!r} is not defined at the top level of a module (a lambda, a closure or "
            "an object), so no other process can import it (define it at the top level of "
            f"a module), {CLOSURE}"
        )
    try:
        found = _lookup(module, qualname)
    except (ImportError, AttributeError):
        found = None
    if found is not obj:
        raise ExportAxisError(
            f"Cannot serialize a {cls.__qualname__} for jax.export: its static field "
            f"{module}:{qualname} is {'another object' if found is not None else 'not found'} "
            f"there (defined again, as when a notebook cell runs twice?); {CLOSURE}"
        )
    return f"{module}:{qualname}"


def _lookup(module: str, qualname: str) -> object:
    obj: object = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _decode(v: object) -> object:
    if not isinstance(v, dict):
        return v
    tag = v["$"]
    if tag == "missing":
        return _MISSING
    if tag == "tuple":
        return tuple(_decode(x) for x in v["items"])
    if tag == "list":
        return [_decode(x) for x in v["items"]]
    if tag == "dict":
        return {k: _decode(x) for k, x in v["items"].items()}
    if tag == "axis":
        return resolve_axis(v["ref"])
    if tag == "named":
        return _BY_NAME[v["name"]]
    module, _, qualname = v["ref"].partition(":")
    try:
        return _lookup(module, qualname)
    except (ImportError, AttributeError) as e:
        raise ExportAxisError(
            f"Cannot load {v['ref']}, a static field of a module in a serialized jax.export "
            f"function: {e} (make its module importable before jax.export.deserialize)"
        ) from None
