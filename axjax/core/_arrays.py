"""Raw arrays at axjax's boundaries, described with jaxtyping: dimension names are axis names.

Where a plain ``jax.Array`` enters or leaves axjax (``Tensor.array``, the data given to
``ax.tensor``, a loader's batches), its annotation says which axis each dimension is::

    def array(self) -> Shaped[jax.Array, "Batch Pixel"]: ...

To mypy and pyright a jaxtyping annotation is ``Annotated[jax.Array, ...]``, i.e. exactly
``jax.Array``; at run time it is a class whose ``isinstance`` checks rank, dtype and, inside
one ``jaxtyping.jaxtyped`` context, that a dimension name has one size throughout. That is how
:func:`axjax.check_axes` checks sizes (:func:`dims`, :func:`sized`).

Each axis class gets one dimension name, its class name, unique within the process: a second,
different class with the same name is ``Batch_2`` (see :func:`dim_name`).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias

import jax
import jaxtyping
from jax.typing import ArrayLike
from jaxtyping import Shaped

from ._axis import axis_name
from ._dtype import BF16, F16, F32, F64, I8, I32, I64, U8, U32, Bool, DType

__all__ = ["Array", "ArrayData", "AxesArray", "array_type", "dim_name", "dims", "sized"]

Array: TypeAlias = Shaped[jax.Array, "..."]
"""A ``jax.Array`` of any rank and dtype (statically: ``jax.Array``)."""

if TYPE_CHECKING:  # what checkers see of the alias below; pyright --verifytypes needs it spelt
    AxesArray: TypeAlias = Annotated[jax.Array, "*Axes"]  # noqa: F722
else:
    AxesArray = Shaped[jax.Array, "*Axes"]
"""The array of a ``Tensor[D, *Axes]``: one dimension per axis, in order (``Tensor.array``).

Name dimensions the same way elsewhere (``Float32[jax.Array, "Batch Pixel"]`` as a
module-level alias); mypy and pyright see ``jax.Array``.
"""

ArrayData: TypeAlias = Shaped[ArrayLike, "..."] | Sequence[Any]
"""What ``ax.tensor`` accepts: a JAX or numpy array, a scalar, or nested sequences."""

# jaxtyping's dtype class for each axjax marker (``Shaped`` accepts every dtype).
_JAXTYPING_DTYPES: dict[type[DType], Any] = {
    F16: jaxtyping.Float16,
    BF16: jaxtyping.BFloat16,
    F32: jaxtyping.Float32,
    F64: jaxtyping.Float64,
    I8: jaxtyping.Int8,
    I32: jaxtyping.Int32,
    I64: jaxtyping.Int64,
    U8: jaxtyping.UInt8,
    U32: jaxtyping.UInt32,
    Bool: jaxtyping.Bool,
}

_names: dict[object, str] = {}  # axis class -> its dimension name, never reused
_taken: set[str] = set()
_lock = threading.Lock()


def dim_name(axis: object) -> str:
    """The jaxtyping dimension name of an axis class: its name, made unique.

    The first class called ``Batch`` is ``Batch``; a different class also called ``Batch``
    (another module, a class made in a function) is ``Batch_2``. A name is a Python
    identifier that does not start with ``_`` (jaxtyping reads ``_x`` as anonymous).
    """
    name = _names.get(axis)
    if name is not None:
        return name
    with _lock:
        name = _names.get(axis)
        if name is None:
            base = re.sub(r"\W", "_", axis_name(axis)).lstrip("_")
            if not base.isidentifier():  # empty, or starts with a digit
                base = "Axis_" + base
            name, n = base, 1
            while name in _taken:
                n += 1
                name = f"{base}_{n}"
            _names[axis] = name
            _taken.add(name)
        return name


def dims(axes: tuple[object, ...], known: tuple[bool, ...] | None = None) -> str:
    """The jaxtyping shape string of ``axes`` (``"Batch Pixel"``); ``_`` where not ``known``."""
    if known is None:
        return " ".join(dim_name(a) for a in axes)
    return " ".join(dim_name(a) if k else "_" for a, k in zip(axes, known, strict=True))


@functools.lru_cache(maxsize=4096)
def sized(axes: tuple[object, ...], known: tuple[bool, ...] | None = None) -> Any:
    """``Shaped[Any, dims(axes)]``: anything with a ``shape`` and ``dtype`` whose sizes agree
    with the sizes bound to these axes in the current ``jaxtyped`` context (and binds them).
    """
    return Shaped[Any, dims(axes, known)]


def array_type(dtype: type[DType] | None, *axes: object) -> Any:
    """The jaxtyping annotation of a ``jax.Array`` holding ``dtype`` with these axes.

    ``array_type(F32, Batch, Pixel)`` is ``Float32[jax.Array, "Batch Pixel"]``;
    ``array_type(None, ...)`` uses ``Shaped`` (any dtype). Use it at run time, e.g.
    ``isinstance(x, array_type(F32, Batch, Pixel))`` inside a function decorated with
    :func:`axjax.check_axes`, where ``Batch`` must then have the size it has in the
    function's tensors. (A static annotation needs a literal string:
    ``Float32[jax.Array, "Batch Pixel"]``.)
    """
    marker: Any = Shaped if dtype is None else _JAXTYPING_DTYPES[dtype]
    return marker[jax.Array, dims(tuple(axes))]
