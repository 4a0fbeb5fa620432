"""``Tensor[D, *Axes]``: a JAX array whose axes are named by :class:`Axis` classes.

At run time a Tensor is a registered JAX pytree whose only leaf is the array; the axes are
static aux data. It therefore passes through ``jax.jit``, ``jax.lax.scan``, ``eqx.filter_jit``
and optax untouched, and ``jax.jit`` caches on the axes. A loss that is a 0-axis Tensor is
differentiated by ``ax.grad`` (``jax.grad`` wants a bare array); a function is mapped over a
named axis by ``ax.vmap`` (a raw ``jax.vmap`` that slices a named axis is refused with a
pointer to it).
"""

from __future__ import annotations

import builtins  # `type` is also a property of Tensor: annotations say builtins.type
import html
import math
from collections.abc import Callable, Collection
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Generic,
    Never,
    NoReturn,
    TypeVar,
    TypeVarTuple,
    cast,
)

import jax
import jax.core  # jax.core.Tracer: the submodule, imported by name for type checkers
import numpy as np
import numpy.typing as npt

from . import _display, _interop, _provenance
from ._arrays import AxesArray
from ._axis import Axis, axes_names, axis_name, check_axis_label
from ._context import Switches
from ._dtype import F32, Bool, DType, dtype_marker
from ._errors import AxisError, check_unique_axes, describe
from ._numpy_habits import NUMPY_ATTRIBUTES as _NUMPY_ATTRIBUTES
from ._numpy_habits import numpy_attribute_error as _numpy_attribute_error
from ._numpy_habits import numpy_function as _numpy_function
from ._registry import declared_ops as _declared_ops
from ._registry import operator as _operator
from ._tensor_type import TensorType

__all__ = ["Tensor", "Scalar", "Vector", "Matrix", "AnyTensor"]

D = TypeVar("D", bound=DType)
D2 = TypeVar("D2", bound=DType)
Axes = TypeVarTuple("Axes")
Bs = TypeVarTuple("Bs")
I = TypeVar("I")  # noqa: E741
J = TypeVar("J")
K = TypeVar("K")
A = TypeVar("A")
B = TypeVar("B")


class Tensor(Generic[D, *Axes]):
    """A JAX array with named axes: ``Tensor[F32, Batch, Pixel]``.

    Build one with :func:`axjax.tensor`, :func:`axjax.zeros` and friends. ``t.array`` is
    the ``jax.Array``; ``t.axes`` the tuple of axis classes; ``t.dtype`` the dtype marker;
    ``t.sizes`` maps each axis to its size.

    Elementwise operators accept only identical axes in identical order and the same dtype
    (Python numbers and rank-0 tensors mix with anything); ``@`` is batched matmul.

    Example:
        >>> import jax.numpy as jnp
        >>> x = ax.tensor(jnp.ones((2, 3)), Batch, Pixel, dtype=ax.F32)
        >>> x
        Tensor[F32, Batch=2, Pixel=3](mean=1, std=0, min=1, max=1)
    """

    # _prov: where each axis came from, in the provenance mode only (core/_provenance.py);
    # a slot outside the pytree (not aux data), unset otherwise
    __slots__ = ("_array", "_axes", "_prov")
    _is_symbolic: ClassVar[bool] = False

    _array: jax.Array
    _axes: tuple[type[Axis], ...]

    def __init__(self, array: Any, axes: tuple[type[Axis], ...]) -> None:
        axes = tuple(check_axis_label(a, "Tensor") for a in axes)
        check_unique_axes(axes, "Tensor")
        ndim = getattr(array, "ndim", None)
        if ndim is None:
            raise TypeError(f"Tensor wraps an array, got {type(array).__name__}")
        if ndim != len(axes):
            raise AxisError(
                f"Cannot name the axes of an array of shape {tuple(array.shape)} "
                f"({ndim} dimensions) with {len(axes)} axes ({axes_names(axes)}): "
                "give exactly one axis label per dimension"
            )
        dtype_marker(array.dtype)
        self._array = array
        self._axes = axes
        if Switches.provenance:
            self._prov = _provenance.constructed(len(axes))

    @classmethod
    def _wrap(cls, array: Any, axes: tuple[type[Axis], ...]) -> Tensor[Any, *tuple[Any, ...]]:
        """Trusted constructor: no checks (ops have checked already)."""
        t = object.__new__(Tensor)
        t._array = array
        t._axes = axes
        return t

    # ------------------------------------------------------------------ properties
    @property
    def array(self) -> AxesArray:
        """The underlying ``jax.Array``, one dimension per axis in the order of :attr:`axes`
        (annotated with jaxtyping: ``Shaped[jax.Array, "*Axes"]``)."""
        return self._array

    @property
    def axes(self) -> tuple[type[Axis], ...]:
        """The axis labels, in storage order."""
        return self._axes

    @property
    def dtype(self) -> type[D]:
        """The dtype marker class (``ax.F32``, ...)."""
        return dtype_marker(self._array.dtype)  # type: ignore[return-value]  # the array's is D

    @property
    def shape(self) -> tuple[int, ...]:
        """The sizes in storage order (prefer :attr:`sizes`, which is by name)."""
        return tuple(self._array.shape)

    @property
    def sizes(self) -> dict[type[Axis], int]:
        """``{axis: size}`` in storage order."""
        return dict(zip(self._axes, self._array.shape, strict=True))

    @property
    def ndim(self) -> int:
        return len(self._axes)

    @property
    def type(self) -> TensorType:
        """This tensor's :class:`TensorType` (dtype, axes, sizes)."""
        return TensorType(self.dtype, self._axes, self.shape)

    def size(self, axis: builtins.type[Axis]) -> int:
        """The size of one axis: ``t.size(Batch)``."""
        try:
            return int(self._array.shape[self._axes.index(axis)])
        except ValueError:
            raise AxisError(
                f"Cannot read the size of axis {axis_name(axis)} of {describe(self)}: "
                f"{axis_name(axis)} is not an axis of the tensor (name one of "
                f"{axes_names(self._axes)})"
            ) from None

    def item(self) -> Any:
        """The Python value of a one-element tensor."""
        if math.prod(getattr(self._array, "shape", ())) != 1:
            raise _not_one_value(self, "item()")
        return self._array.item()

    def __float__(self) -> float:
        if getattr(self._array, "ndim", 0):
            raise _not_one_value(self, "float")
        return float(self._array)

    def __int__(self) -> int:
        if getattr(self._array, "ndim", 0):
            raise _not_one_value(self, "int")
        return int(self._array)

    def __bool__(self) -> bool:
        if getattr(self._array, "ndim", 0):
            raise _not_one_value(self, "bool")
        return bool(self._array)

    def __format__(self, spec: str) -> str:
        """``f"{loss:.4f}"``: a 0-axis Tensor formats as its Python number (``bool``,
        ``int`` or ``float`` by its dtype); ``f"{t}"`` (no spec) is ``str(t)`` at any rank.

        Raises:
            TypeError: a format spec for a tensor with axes (it has no single number).
        """
        if not spec:
            return str(self)
        if getattr(self._array, "ndim", 0):
            raise _not_one_value(self, f"a number formatted with {spec!r}")
        return format(self._array.item(), spec)

    def __getitem__(self, key: Never) -> NoReturn:
        """Refused: axjax picks entries by axis name (``ax.index``, ``ax.slice``)."""
        raise _no_positions(self, key)

    def __array__(
        self, dtype: npt.DTypeLike | None = None, copy: bool | None = None
    ) -> np.ndarray[Any, Any]:
        """``np.asarray(t)``: the values in storage order (:attr:`axes`), without the axes."""
        if isinstance(self._array, jax.core.Tracer):
            raise TypeError(
                f"Cannot convert {_shown(self)} to a numpy array while it is traced (inside "
                "jax.jit, jax.grad, ...): its values are not known yet (use axjax ops on the "
                "tensor, and convert the result the transformed function returns)"
            )
        out = np.asarray(self._array, dtype=dtype)
        return out.copy() if copy else out

    def __array_ufunc__(
        self, ufunc: np.ufunc, method: str, *inputs: object, **kwargs: object
    ) -> object:
        """numpy's operators defer to axjax's (``np.sqrt(2.0) * t`` is ``t``'s ``__rmul__``
        rule); any other numpy ufunc on a Tensor is an error, never a silent loss of axes."""
        name = getattr(ufunc, "__name__", str(ufunc))
        operator = _UFUNC_OPERATORS.get(name)
        if operator is not None and method == "__call__" and len(inputs) == 2 and not kwargs:
            a, b = inputs
            if operator in _COMPARISONS:  # numpy hands a scalar to these as a rank-0 array
                a, b = _number(a), _number(b)
            return _operator(operator)(a, b)  # a numpy scalar mixes as a number there
        raise _no_ufunc(self, name, method)

    def __array_function__(
        self,
        func: Callable[..., object],
        types: Collection[builtins.type],
        args: tuple[object, ...],
        kwargs: dict[str, object],
    ) -> object:
        """A numpy function given Tensors (``np.concatenate([a, b])``): the axjax op where one
        keeps the axes (``np.where``), else a ``TypeError`` naming the axjax spelling
        (core/_numpy_habits.py); never a bare array."""
        return _numpy_function(_shown(self), func, args, kwargs)

    if not TYPE_CHECKING:  # for checkers a missing attribute stays an error

        def __getattr__(self, name: str) -> NoReturn:
            """``t.T``, ``t.sum()``, ``t.reshape``: numpy's array attributes are refused with
            the axjax spelling; any other missing attribute is the plain error."""
            if name in _NUMPY_ATTRIBUTES:
                raise _numpy_attribute_error(_shown(self), name)
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def astype(self, dtype: builtins.type[D2]) -> Tensor[D2, *Axes]:
        """Convert the values to another dtype (``t.astype(ax.BF16)``)."""
        return cast("Tensor[D2, *Axes]", _operator("astype")(self, dtype))

    # ------------------------------------------------------------------ operators
    # Identical axes and dtype, or a number / rank-0 ``Tensor[D]`` on either side (design
    # section 1.4); the reflected forms serve ``2 * t`` and ``scalar_tensor * t``.
    def __add__(self, other: Tensor[D, *Axes] | Tensor[D] | float) -> Tensor[D, *Axes]:
        return _same("__add__", self, other)

    def __radd__(self, other: Tensor[D] | float) -> Tensor[D, *Axes]:
        return _rsame("__add__", self, other)

    def __sub__(self, other: Tensor[D, *Axes] | Tensor[D] | float) -> Tensor[D, *Axes]:
        return _same("__sub__", self, other)

    def __rsub__(self, other: Tensor[D] | float) -> Tensor[D, *Axes]:
        return _rsame("__sub__", self, other)

    def __mul__(self, other: Tensor[D, *Axes] | Tensor[D] | float) -> Tensor[D, *Axes]:
        return _same("__mul__", self, other)

    def __rmul__(self, other: Tensor[D] | float) -> Tensor[D, *Axes]:
        return _rsame("__mul__", self, other)

    def __truediv__(self, other: Tensor[D, *Axes] | Tensor[D] | float) -> Tensor[D, *Axes]:
        return _same("__truediv__", self, other)

    def __rtruediv__(self, other: Tensor[D] | float) -> Tensor[D, *Axes]:
        return _rsame("__truediv__", self, other)

    def __pow__(self, other: Tensor[D, *Axes] | Tensor[D] | float) -> Tensor[D, *Axes]:
        return _same("__pow__", self, other)

    def __rpow__(self, other: Tensor[D] | float) -> Tensor[D, *Axes]:
        return _rsame("__pow__", self, other)

    def __neg__(self) -> Tensor[D, *Axes]:
        return cast("Tensor[D, *Axes]", _operator("__neg__")(self))

    def __abs__(self) -> Tensor[D, *Axes]:
        return cast("Tensor[D, *Axes]", _operator("__abs__")(self))

    def __lt__(  # type: ignore[misc]  # reflected form differs only for rank 0
        self, other: Tensor[D, *Axes] | Tensor[D] | float
    ) -> Tensor[Bool, *Axes]:
        return _compare("__lt__", self, other)

    def __le__(  # type: ignore[misc]  # reflected form differs only for rank 0
        self, other: Tensor[D, *Axes] | Tensor[D] | float
    ) -> Tensor[Bool, *Axes]:
        return _compare("__le__", self, other)

    def __gt__(  # type: ignore[misc]  # reflected form differs only for rank 0
        self, other: Tensor[D, *Axes] | Tensor[D] | float
    ) -> Tensor[Bool, *Axes]:
        return _compare("__gt__", self, other)

    def __ge__(  # type: ignore[misc]  # reflected form differs only for rank 0
        self, other: Tensor[D, *Axes] | Tensor[D] | float
    ) -> Tensor[Bool, *Axes]:
        return _compare("__ge__", self, other)

    def __matmul__(self: Tensor[D, *Bs, I, J], other: Tensor[D, *Bs, J, K]) -> Tensor[D, *Bs, I, K]:
        return cast("Tensor[D, *Bs, I, K]", _operator("__matmul__")(self, other))

    # ------------------------------------------------------------------ display
    def __repr__(self) -> str:
        try:
            return self._repr()
        except Exception as e:  # repr never raises: show what could not be shown
            return f"{_axes_only(self)}(unprintable: {type(e).__name__}: {e})"

    def _repr(self) -> str:
        if not _is_array_like(self._array):  # a pytree leaf replaced: eqx.partition's None
            return f"{_axes_only(self)}({self._array!r})"
        problem = unnamed_dims(self)
        if problem:
            return f"{bare_type(self)}({problem})"
        return describe(self) + f"({_summary(self._array)})"

    def _repr_html_(self) -> str:
        try:
            return self._html()
        except Exception:  # never raises: the plain repr says what is wrong
            return f"<code>{html.escape(repr(self))}</code>"

    def _html(self) -> str:
        if not _is_array_like(self._array) or unnamed_dims(self):
            return f"<code>{html.escape(repr(self))}</code>"
        rows = "".join(
            f"<tr><td><b>{html.escape(axis_name(a))}</b></td><td>{n}</td></tr>"
            for a, n in zip(self._axes, self._array.shape, strict=True)
        )
        return (
            "<div class='axjax-tensor'>"
            f"<code>{html.escape(describe(self))}</code>"
            "<table><tr><th>axis</th><th>size</th></tr>"
            f"{rows}</table>{_display.preview_html(self._array, self._axes)}"
            f"<small>{html.escape(_summary(self._array))}</small></div>"
        )

    # treescope (core/_interop.py): imported there, on first use, never by `import axjax`
    def __treescope_repr__(self, path: str | None, subtree_renderer: object) -> object:
        return _interop.treescope_repr(self, path, subtree_renderer)

    def __treescope_ndarray_adapter__(self) -> object:
        return _interop.treescope_adapter()


def trusted_tensor(array: Any, axes: tuple[type[Axis], ...]) -> Tensor[Any, *tuple[Any, ...]]:
    """A Tensor from an array whose axes the library has checked already (no checks: the
    ops' fast path; users call :class:`Tensor` or ``ax.tensor``)."""
    return Tensor._wrap(array, axes)


def bare_type(t: Tensor[Any, *tuple[Any, ...]]) -> str:
    """``Tensor[F32, Batch, Pixel]``: the type without sizes."""
    return "Tensor[" + ", ".join([t.dtype.__name__, *(axis_name(a) for a in t._axes)]) + "]"


def unnamed_dims(t: Tensor[Any, *tuple[Any, ...]]) -> str:
    """Why ``t``'s array does not have one dimension per axis, or ``""`` if it does.

    Inside JAX transformations a Tensor may be a *stacked* pytree leaf: ``jax.vmap``
    outputs, ``jax.lax.scan`` results and ``eqx.filter_vmap`` ensembles add unnamed leading
    dimensions, which ``jax.lax.scan`` / ``jax.vmap`` over them take off again.
    """
    if isinstance(t._array, Tensor):
        return _nested(t)
    extra = getattr(t._array, "ndim", len(t._axes)) - len(t._axes)
    if extra > 0:
        lead = tuple(t._array.shape[:extra])
        return (
            f"stacked: array of shape {tuple(t._array.shape)}, {extra} unnamed leading "
            f"dimension{'s' if extra > 1 else ''} {lead}"
        )
    if extra < 0:
        return (
            f"array of shape {tuple(t._array.shape)} has lost {-extra} named "
            f"dimension{'s' if extra < -1 else ''}: a raw jax.vmap or jax.lax.scan sliced "
            "a named axis (use ax.vmap(f, over=Axis))"
        )
    return ""


def _nested(t: Tensor[Any, *tuple[Any, ...]]) -> str:
    """``unnamed_dims`` of a Tensor whose leaf is a Tensor: what ``jax.jacobian`` and
    ``jax.hessian`` return for Tensor arguments (the input's Tensor inside the output's)."""
    levels: list[str] = []
    axes: list[type[Axis]] = list(t._axes)
    leaf: object = t._array
    while isinstance(leaf, Tensor) and len(levels) < 8:
        levels.append(_axes_only(leaf))
        axes += leaf._axes
        leaf = leaf._array
    shape = tuple(getattr(leaf, "shape", ()))
    held = "".join(f"a {level}, which holds " for level in levels)
    return (
        f"array is nested: it holds {held}an array of shape {shape} for the axes "
        f"({axes_names(tuple(axes))}) of all levels, outermost first; jax.jacobian and "
        "jax.hessian nest the argument's Tensor in the result's (name the dimensions with "
        "ax.tensor(jax.tree_util.tree_leaves(t)[0], *axes), giving a repeated axis a new label)"
    )


def _axes_only(t: Tensor[Any, *tuple[Any, ...]]) -> str:
    """``Tensor[Batch, Pixel]``: the axes alone (no dtype, no sizes), for broken leaves."""
    return "Tensor[" + ", ".join(axis_name(a) for a in getattr(t, "_axes", ())) + "]"


def _is_array_like(leaf: object) -> bool:
    return hasattr(leaf, "shape") and hasattr(leaf, "dtype")


def _summary(array: object) -> str:
    return _display.summary(array)


# The pytree node: the array is the one child, the axes the static data. JAX calls these
# two on every flatten and unflatten of a tree holding Tensors (a jitted call's arguments
# and results), so they do the least Python can: no checks, no global lookups (bound as
# defaults), the key built once. ``python -m benchmarks.host_overhead`` times them.
_ARRAY_KEY = jax.tree_util.GetAttrKey("array")


def _flatten_with_keys(
    t: Tensor[Any, *tuple[Any, ...]], _key: object = _ARRAY_KEY
) -> tuple[tuple[tuple[object, jax.Array]], tuple[type[Axis], ...]]:  # object: a GetAttrKey
    return ((_key, t._array),), t._axes


def _flatten(t: Tensor[Any, *tuple[Any, ...]]) -> tuple[tuple[jax.Array], tuple[type[Axis], ...]]:
    return (t._array,), t._axes


def _unflatten(
    axes: tuple[type[Axis], ...],
    leaves: Any,
    _new: Callable[
        [type[Tensor[Any, *tuple[Any, ...]]]], Tensor[Any, *tuple[Any, ...]]
    ] = object.__new__,
    _tensor: type[Tensor[Any, *tuple[Any, ...]]] = Tensor,
) -> Tensor[Any, *tuple[Any, ...]]:
    t: Tensor[Any, *tuple[Any, ...]] = _new(_tensor)
    t._array = leaves[0]
    t._axes = axes
    return t


jax.tree_util.register_pytree_with_keys(Tensor, _flatten_with_keys, _unflatten, _flatten)

#: Any tensor, of any dtype and rank (the gradual form; assignable both ways).
AnyTensor = Tensor[Any, *tuple[Any, ...]]

#: ``Tensor[F32]``, ``Tensor[F32, A]``, ``Tensor[F32, A, B]``: the paper's aliases.
Scalar = Tensor[F32]
Vector = Tensor[F32, A]
Matrix = Tensor[F32, A, B]


def _same(method: str, x: Tensor[D, *Axes], other: object) -> Tensor[D, *Axes]:
    """``x.<method>(other)``, by the function an op declares for it (core/_registry.py); the
    result has ``x``'s type (the elementwise rule: identical axes, or a scalar; a numpy
    scalar mixes like the Python number it holds, as every binary function lets it)."""
    return cast("Tensor[D, *Axes]", _operator(method)(x, other))


def _rsame(method: str, x: Tensor[D, *Axes], other: object) -> Tensor[D, *Axes]:
    """The reflected form, ``other <method> x`` (``2 * t``, ``np.float32(2) * t``)."""
    return cast("Tensor[D, *Axes]", _operator(method)(other, x))


def _compare(method: str, x: Tensor[D, *Axes], other: object) -> Tensor[Bool, *Axes]:
    """A comparison operator: ``x``'s axes, Bool values."""
    return cast("Tensor[Bool, *Axes]", _operator(method)(x, other))


def _number(v: object) -> object:
    """A rank-0 numpy array as the Python number it holds; anything else as it is."""
    if isinstance(v, np.ndarray) and v.ndim == 0:
        n = v.item()
        if isinstance(n, int | float):  # bool is an int
            return n
    return v


#: numpy ufuncs that Python operators with a numpy left operand call, and the Tensor
#: operator each stands for (``np.float32(2) * t`` is ``multiply(np.float32(2), t)``).
_UFUNC_OPERATORS = {
    "add": "__add__",
    "subtract": "__sub__",
    "multiply": "__mul__",
    "divide": "__truediv__",
    "true_divide": "__truediv__",
    "power": "__pow__",
    "less": "__lt__",
    "less_equal": "__le__",
    "greater": "__gt__",
    "greater_equal": "__ge__",
}
_COMPARISONS = frozenset({"__lt__", "__le__", "__gt__", "__ge__"})
#: numpy names whose axjax function is spelled differently (``ufunc.reduce`` by method).
_AX_NAMES = {
    "absolute": "abs",
    "true_divide": "divide",
    "add.reduce": "sum",
    "maximum.reduce": "max",
    "minimum.reduce": "min",
    "matmul": "matmul",
}


def _no_ufunc(t: Tensor[Any, *tuple[Any, ...]], name: str, method: str) -> TypeError:
    called = name if method == "__call__" else f"{name}.{method}"
    ax_name = _AX_NAMES.get(called, called)
    public = {f for spec in _declared_ops() if spec.namespace == "axjax" for f in spec.functions}
    if ax_name in public:
        fix = f"use ax.{ax_name}, which keeps the axes"
    else:
        fix = "use the axjax op (docs/ops.md lists them)"
    return TypeError(
        f"Cannot apply numpy.{called} to {_shown(t)}: numpy would drop the axes ({fix}; "
        "np.asarray(t) gives the plain values in the order of t.axes)"
    )


def _not_one_value(t: Tensor[Any, *tuple[Any, ...]], to: str) -> TypeError:
    """The error for ``bool(t)``, ``float(t)``, ``int(t)``, ``t.item()`` of a tensor with axes."""
    shape = tuple(getattr(t._array, "shape", ()))
    n = math.prod(shape)
    axes = t._axes
    over = axis_name(axes[0]) if len(axes) == 1 else "(" + axes_names(axes) + ")"
    what = (
        f"Cannot convert {_shown(t)} to {to}"
        if to != "item()"
        else (f"Cannot read {_shown(t)} with item()")
    )
    if n == 1:
        return TypeError(
            f"{what}: it has axes {axes_names(axes)} (read its one value with "
            "t.item(), or take the axes off with ax.squeeze)"
        )
    if to == "bool":
        fix = (
            f"reduce it first: ax.max(t, {over}) is true if any entry is, ax.min(t, {over}) "
            f"if all are; or compare a reduction, e.g. ax.sum(t, {over}) > 0"
        )
    else:
        fix = (
            f"reduce it first, e.g. ax.sum(t, {over}), ax.mean or ax.max, or pick one entry "
            "with ax.index"
        )
    return TypeError(f"{what}: it has {n} elements, not one ({fix})")


def _no_positions(t: Tensor[Any, *tuple[Any, ...]], key: object) -> TypeError:
    """The error for ``t[0]``: axjax names axes instead of numbering them."""
    what = f"Cannot index {_shown(t)} by position (t[{_key_text(key)}])"
    if not t._axes:
        return TypeError(f"{what}: a rank-0 tensor has no axes (read its value with t.item())")
    a = axis_name(t._axes[0])
    if isinstance(key, builtins.slice):
        start = "None" if key.start is None else repr(key.start)
        stop = "None" if key.stop is None else repr(key.stop)
        step = "" if key.step is None else f", step={key.step!r}"
        fix = (
            f"use ax.slice(t, {a}, {start}, {stop}{step}) for that range along {a}, or "
            f"ax.index(t, {a}, i) for one entry"
        )
    else:
        i = key if isinstance(key, int) else "i"
        fix = (
            f"use ax.index(t, {a}, {i}) for entry {i} along {a}, or "
            f"ax.slice(t, {a}, start, stop) for a range"
        )
    return TypeError(f"{what}: axjax picks entries by axis name, not position ({fix})")


def _key_text(key: object) -> str:
    if isinstance(key, builtins.slice):
        parts = ["" if v is None else repr(v) for v in (key.start, key.stop, key.step)]
        return ":".join(parts[:2] if key.step is None else parts)
    if isinstance(key, tuple):
        return ", ".join(_key_text(k) for k in cast("tuple[object, ...]", key))
    return "..." if key is Ellipsis else repr(key)


def _shown(t: Tensor[Any, *tuple[Any, ...]]) -> str:
    """``Tensor[F32, Batch=2]``, or the type without sizes where the array does not fit."""
    try:
        return describe(t) if not unnamed_dims(t) else bare_type(t)
    except Exception:
        return _axes_only(t)
