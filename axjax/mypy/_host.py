"""The dtype of host data, where its static type knows it: ``ax.tensor(data, Batch)``.

``ax.tensor`` without ``dtype=`` takes the dtype of its data. Where the data's static type
names it, the plugin asks the real constructor: it builds a small sample of that host type (a
numpy array of the annotated scalar type, a list of ``int``, ``float`` or ``bool``) and reads
the dtype ``ax.tensor`` gives it, so the static answer is the run-time one (JAX's 64-bit
setting included: ``np.int64`` data is ``I32`` unless ``jax_enable_x64`` is on). Anything else
(``Any``, ``ndarray[Any, dtype[Any]]``, a union that could give two dtypes) is ``None``: the
dtype stays gradual (``Any``), compatible with every dtype.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from mypy.maptype import map_instance_to_supertype
from mypy.types import Instance, LiteralType, TupleType, Type, UnionType, get_proper_type

#: numpy's scalar classes by kind (``np.int32`` is ``signedinteger[_32Bit]`` in its stubs)
_NUMPY_KINDS = {
    "numpy.signedinteger": "int",
    "numpy.unsignedinteger": "uint",
    "numpy.floating": "float",
}
_NUMPY_BOOL = ("numpy.bool", "numpy.bool_")
#: Python scalars, most specific first (``bool`` is an ``int``, ``int`` promotes to ``float``)
_PYTHON = {"builtins.bool": "True", "builtins.int": "1", "builtins.float": "1.0"}
_SCALARS: dict[str, bool | int | float] = {"True": True, "1": 1, "1.0": 1.0}
_SEQUENCES = ("builtins.list", "builtins.tuple", "typing.Sequence", "collections.abc.Sequence")


@functools.cache
def _marker_of(sample: str) -> str | None:
    """The name of the dtype marker ``ax.tensor`` gives a sample (``"np.int32"``, ``"1"``)."""
    import numpy as np

    from ..ops._construct import tensor

    try:
        value = np.zeros((), dtype=sample[3:]) if sample.startswith("np.") else _SCALARS[sample]
        return tensor(value).dtype.__name__
    except Exception:  # noqa: BLE001 - no marker for it (int16): gradual
        return None


def _numpy_samples(scalar: Type) -> list[str] | None:
    """``np.<dtype>`` names for a numpy scalar type (several for a union of bit widths)."""
    p = get_proper_type(scalar)
    if not isinstance(p, Instance):
        return None
    if p.type.fullname in _NUMPY_BOOL:
        return ["np.bool_"]
    for base, kind in _NUMPY_KINDS.items():
        if not p.type.has_base(base):
            continue
        sup = map_instance_to_supertype(p, p.type.mro[[c.fullname for c in p.type.mro].index(base)])
        if not sup.args:
            return None
        bits = get_proper_type(sup.args[0])
        widths = bits.items if isinstance(bits, UnionType) else [bits]
        out = []
        for w in widths:
            wp = get_proper_type(w)
            name = wp.type.name if isinstance(wp, Instance) else ""
            if not (name.startswith("_") and name.endswith("Bit") and name[1:-3].isdigit()):
                return None
            out.append(f"np.{kind}{name[1:-3]}")
        return out
    return None


def _samples(t: Type, depth: int = 0) -> list[str] | None:
    """Samples of the host type ``t``: a numpy array, nested sequences, a Python scalar."""
    p = get_proper_type(t)
    if isinstance(p, LiteralType):
        p = p.fallback
    if isinstance(p, TupleType):  # (1, 2): each item's
        return _all(p.items, depth)
    if not isinstance(p, Instance) or depth > 8:
        return None
    name = p.type.fullname
    if name == "numpy.ndarray" and len(p.args) == 2:
        dtype = get_proper_type(p.args[1])
        if isinstance(dtype, Instance) and dtype.type.fullname == "numpy.dtype" and dtype.args:
            return _numpy_samples(dtype.args[0])
        return None
    if name in _PYTHON:
        return [_PYTHON[name]]
    if _NUMPY_KINDS.keys() & {c.fullname for c in p.type.mro} or name in _NUMPY_BOOL:
        return _numpy_samples(p)  # a numpy scalar
    if name in _SEQUENCES and p.args:
        return _all(p.args[:1], depth)
    return None


def _all(items: Sequence[Type], depth: int) -> list[str] | None:
    out: list[str] = []
    for item in items:
        got = _samples(item, depth + 1)
        if got is None:
            return None
        out += got
    return out


def host_dtype(t: Type) -> str | None:
    """The dtype marker's name ``ax.tensor`` gives data of static type ``t``, or ``None``
    (not knowable: keep the dtype gradual)."""
    samples = _samples(t)
    if not samples:
        return None
    markers = {_marker_of(s) for s in samples}
    if len(markers) != 1:
        return None
    return markers.pop()
