"""Tensor in other tools: ``jax.export`` serialization and treescope.

**jax.export.** A Tensor's axes are pytree aux data, part of an exported function's calling
convention (its ``in_tree`` and ``out_tree``). :func:`register_export` registers Tensor
with ``jax.export.register_pytree_node_serialization`` (done by ``import axjax``): each axis
label is written as its qualified name, ``module:QualName``, and found again by importing
the module when the serialized function is loaded, in this process or another. A label
that cannot be named that way (a class defined inside a function) is refused when the
function is serialized; one that cannot be found when it is loaded (its module is not
importable there, or no longer defines it) is an :class:`ExportAxisError` that names it.

Example:
    >>> exp = jax.export.export(jax.jit(f))(x)  # x: Tensor[F32, Batch, Pixel]
    >>> blob = exp.serialize()
    >>> jax.export.deserialize(blob).call(x)  # a Tensor with f's axes

**treescope.** ``treescope.render_array(t)`` and the array autovisualizer find
:class:`TensorAdapter` (built on first use) through
``Tensor.__treescope_ndarray_adapter__``: the axes are named (``NamedPositionlessAxisInfo``,
by the labels' names). A Tensor inside a rendered tree shows
its type with sizes and its summary (``Tensor.__treescope_repr__``), and in HTML treescope
adds the tensor's own ``_repr_html_`` below it: the axes and a preview of the values.
treescope is imported by these methods only, when treescope calls them: ``import axjax``
never imports it.
"""

from __future__ import annotations

import importlib
import json
from typing import TYPE_CHECKING, Any

import jax
import jax.core  # jax.core.Tracer: the submodule, imported by name for type checkers
import jax.export
import jax.numpy as jnp
import numpy as np

from . import _display
from ._axis import Axis, axis_name
from ._errors import describe
from ._roles import KeyOf, Out

if TYPE_CHECKING:  # Tensor's treescope methods call this module: types only here
    from ._tensor import Tensor

__all__ = [
    "ExportAxisError",
    "SERIALIZED_NAME",
    "axis_reference",
    "resolve_axis",
    "register_export",
    "treescope_adapter",
    "treescope_repr",
]

#: The name Tensor's pytree nodes carry in a serialized ``jax.export.Exported``.
SERIALIZED_NAME = "axjax.Tensor"
_FORMAT = 1


class ExportAxisError(ValueError):
    """An axis label that cannot be written into, or read back from, a serialized
    ``jax.export.Exported``."""

    __module__ = "axjax"


def axis_reference(axis: type[Axis]) -> str:
    """``"module:QualName"``, the name by which a loading process finds ``axis`` again.

    Raises :class:`ExportAxisError` for a label that no import can find (defined inside a
    function) or that its module no longer holds (a class defined again, as when a notebook
    cell runs a second time).
    """
    role = _role_of(axis)
    if role is not None:  # ax.KeyOf[Pos], ax.Out[Embed]: made on demand, named by their axis
        kind, inner = role
        return f"axjax:{kind}[{axis_reference(inner)}]"
    module, qualname = axis.__module__, axis.__qualname__
    ref = f"{module}:{qualname}"
    if "<locals>" in qualname:
        raise ExportAxisError(
            f"Cannot serialize axis label {axis_name(axis)} ({ref}) for jax.export: it is "
            "defined inside a function, so no other process can import it (define the "
            "label at the top level of a module)"
        )
    try:
        found = _lookup(module, qualname)
    except (ImportError, AttributeError):
        found = None
    if found is not axis:
        raise ExportAxisError(
            f"Cannot serialize axis label {axis_name(axis)} for jax.export: {ref} is "
            + ("another class" if found is not None else "not found")
            + " (was the label defined again, as when a notebook cell runs twice? Define "
            "each label once, at the top level of a module, and rebuild the tensors)"
        )
    return ref


def _role_of(axis: type[Axis]) -> tuple[str, type[Axis]] | None:
    """``("KeyOf", Pos)`` for ``ax.KeyOf[Pos]``, ``("Out", E)`` for ``ax.Out[E]``: the role
    classes axjax makes on demand (no module holds them), else ``None``."""
    for kind, role in (("KeyOf", KeyOf), ("Out", Out)):
        if role in axis.__bases__ and axis.__qualname__.startswith(f"{kind}["):
            inner = role.__class_getitem__(_inner_axis(axis))
            if inner is axis:
                return kind, _inner_axis(axis)
    return None


def _inner_axis(axis: type[Axis]) -> type[Axis]:
    """The axis a made role is of: ``KeyOf[Pos]``'s query, ``Out[E]``'s base."""
    inner = vars(axis).get("_query") or vars(axis).get("_base")
    assert isinstance(inner, type) and issubclass(inner, Axis), axis
    return inner


def resolve_axis(ref: str) -> type[Axis]:
    """The axis label that :func:`axis_reference` named, imported in this process."""
    for kind in ("KeyOf", "Out"):  # a role made on demand: made again from its axis
        if ref.startswith(f"axjax:{kind}[") and ref.endswith("]"):
            role: Any = KeyOf if kind == "KeyOf" else Out
            made: type[Axis] = role.__class_getitem__(resolve_axis(ref[len(kind) + 7 : -1]))
            return made
    module, _, qualname = ref.partition(":")
    where = "this program's __main__" if module == "__main__" else f"module {module}"
    try:
        found = _lookup(module, qualname)
    except ImportError as e:
        raise ExportAxisError(
            f"Cannot load the axis label {ref} of a serialized jax.export function: "
            f"{module} cannot be imported here ({e}); make the module that defines the "
            "label importable (install it, or add its folder to sys.path) before "
            "jax.export.deserialize"
        ) from None
    except AttributeError:
        raise ExportAxisError(
            f"Cannot load the axis label {ref} of a serialized jax.export function: "
            f"{where} has no {qualname} (define the label there, as the exporting program "
            "did, before jax.export.deserialize)"
        ) from None
    if not (isinstance(found, type) and issubclass(found, Axis) and found is not Axis):
        raise ExportAxisError(
            f"Cannot load the axis label {ref} of a serialized jax.export function: "
            f"{qualname} in {where} is {found!r}, not an axis label (a subclass of ax.Axis)"
        )
    return found


def _lookup(module: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _serialize_axes(axes: tuple[type[Axis], ...]) -> bytes:
    refs = [axis_reference(a) for a in axes]
    return json.dumps({"format": _FORMAT, "axes": refs}).encode()


def _deserialize_axes(data: bytes) -> tuple[type[Axis], ...]:
    try:
        record = json.loads(data.decode())
        refs = record["axes"]
        fmt = record["format"]
    except (ValueError, KeyError, TypeError) as e:
        raise ExportAxisError(
            f"Cannot read the axes of a Tensor in a serialized jax.export function: "
            f"{data[:60]!r} is not axjax's record ({e})"
        ) from None
    if fmt != _FORMAT:
        raise ExportAxisError(
            f"Cannot read the axes of a Tensor in a serialized jax.export function: its "
            f"record has format {fmt}, this axjax reads format {_FORMAT} (load it with the "
            "axjax version that exported it)"
        )
    return tuple(resolve_axis(r) for r in refs)


_registered = False


def register_export(tensor: type[Tensor[Any, *tuple[Any, ...]]]) -> None:
    """Make ``tensor`` (the Tensor class) serializable in ``jax.export`` (once; ``import
    axjax`` calls it)."""
    global _registered
    if _registered:
        return
    jax.export.register_pytree_node_serialization(
        tensor,
        serialized_name=SERIALIZED_NAME,
        serialize_auxdata=_serialize_axes,
        deserialize_auxdata=_deserialize_axes,
    )
    _registered = True


# ---------------------------------------------------------------------------- treescope


def treescope_adapter() -> Any:
    """The treescope ``NDArrayAdapter`` of Tensors (treescope imported here)."""
    global _adapter
    if _adapter is None:
        _adapter = _make_adapter()
    return _adapter


_adapter: Any = None


def _aligned_mask(mask: Any, t: Tensor[Any, *tuple[Any, ...]]) -> Any:
    """A Tensor mask's values laid out for ``t``: its axes, a subset of ``t``'s, moved into
    ``t``'s order, and size-1 dimensions for the axes it lacks."""
    if not isinstance(mask, type(t)):  # an array: treescope's own
        return mask
    extra = [a for a in mask.axes if a not in t.axes]
    if extra:
        raise ValueError(
            f"Cannot use {describe(mask)} as the mask of {describe(t)} in treescope: the "
            f"mask has axes {', '.join(axis_name(a) for a in extra)} that the tensor lacks"
        )
    order = sorted(range(mask.ndim), key=lambda i: t.axes.index(mask.axes[i]))
    arr = jnp.transpose(jnp.asarray(mask.array), order)
    present = {a for a in mask.axes}
    shape = [t.size(a) if a in present else 1 for a in t.axes]
    return arr.reshape(shape)


def _make_adapter() -> Any:
    from treescope import ndarray_adapters
    from treescope.external import jax_support

    arrays = jax_support.JAXArrayAdapter()

    # Tensor is a name for type checkers only here (core/_tensor.py imports this module)
    class TensorAdapter(ndarray_adapters.NDArrayAdapter["Tensor[Any, *tuple[Any, ...]]"]):  # type: ignore[misc]  # treescope has no types: the base is Any
        """Renders a Tensor's values with its axes named by their labels."""

        def get_axis_info_for_array_data(
            self, array: Tensor[Any, *tuple[Any, ...]]
        ) -> tuple[ndarray_adapters.AxisInfo, ...]:
            return tuple(
                ndarray_adapters.NamedPositionlessAxisInfo(axis_name=axis_name(a), size=int(n))
                for a, n in zip(array.axes, array.array.shape, strict=True)
            )

        def get_array_data_with_truncation(
            self,
            array: Tensor[Any, *tuple[Any, ...]],
            mask: Any,
            edge_items_per_axis: tuple[int | None, ...],
        ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
            data, kept = arrays.get_array_data_with_truncation(
                jnp.asarray(array.array), _aligned_mask(mask, array), edge_items_per_axis
            )
            return np.asarray(data), np.asarray(kept)

        def get_array_summary(self, array: Tensor[Any, *tuple[Any, ...]], fast: bool) -> str:
            if fast:
                return describe(array)
            return f"{describe(array)}({_display.summary(array.array)})"

        def get_numpy_dtype(self, array: Tensor[Any, *tuple[Any, ...]]) -> np.dtype[Any]:
            return np.dtype(array.array.dtype)

        def get_sharding_info_for_array_data(
            self, array: Tensor[Any, *tuple[Any, ...]]
        ) -> ndarray_adapters.ShardingInfo | None:
            if not isinstance(array.array, jax.Array):
                return None
            return arrays.get_sharding_info_for_array_data(array.array)

        def should_autovisualize(self, array: Tensor[Any, *tuple[Any, ...]]) -> bool:
            leaf = array.array
            return isinstance(leaf, jax.Array | np.ndarray) and not (
                isinstance(leaf, jax.core.Tracer)
                or (isinstance(leaf, jax.Array) and leaf.is_deleted())
            )

    TensorAdapter.__module__ = __name__
    TensorAdapter.__qualname__ = "TensorAdapter"
    return TensorAdapter()


def treescope_repr(t: Tensor[Any, *tuple[Any, ...]], path: str | None, renderer: object) -> Any:
    """A Tensor in a treescope rendering: its ``repr``, the type with sizes and the summary,
    on one line (treescope itself adds the ``_repr_html_`` preview below it in HTML). The
    values of a small tensor of rank 2 or more, which numpy prints on several lines, are
    joined into one (treescope's text parts hold no newline)."""
    from treescope import rendering_parts

    del path, renderer
    line = " ".join(part.strip() for part in repr(t).splitlines())
    return rendering_parts.abbreviation_color(rendering_parts.text(line))
