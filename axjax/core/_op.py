"""``Op``: a primitive with a type rule, a forward and its own backward, as in the paper.

Applying an op:

1. runs the type rule :meth:`Op.infer` on the operands' types (raises :class:`AxisError`
   in Python, at trace time);
2. if any operand is symbolic (a graph ``Input``/``Param``/``Apply``), builds a graph node;
3. otherwise computes :meth:`Op.forward`. When JAX is differentiating (any operand is a JAX
   tracer) the forward is wrapped in a ``jax.custom_vjp`` whose bwd is :meth:`Op.backward`,
   so reverse mode uses axjax's own derivative. With concrete operands nothing can be
   differentiated and the forward runs directly (no wrapper: cheap eager dispatch).

``with ax.jax_autodiff():`` (or ``ax.config.autodiff = "jax"``) lowers every op to its
plain forward instead, so JAX differentiates it (``jax.jvp``, ``jax.hessian``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, TypeVarTuple, cast, final

import jax
import jax.core  # jax.core.Tracer: the submodule, imported by name for type checkers
import jax.numpy as jnp
import numpy as np
from jax.export import is_symbolic_dim
from typing_extensions import TypeVar as DefaultTypeVar  # PEP 696 defaults on 3.11

from . import _finite, _provenance
from ._axis import Axis, axes_names, check_axis_label, check_unique_axes
from ._dtype import Bool, DType, accumulation_dtype, is_floating, is_inexact
from ._errors import AxisError, describe
from ._jax_hints import forward_mode_error
from ._placement import Layout, cast_varying, explicit_layout, match_varying
from ._symbolic import Symbolic
from ._tensor import AnyTensor, Tensor, TensorType, bare_type, unnamed_dims

__all__ = ["Op", "config", "jax_autodiff", "apply", "cached"]


class _Config(threading.local):
    """Process-wide switches (thread-local so tests can flip them safely)."""

    def __init__(self) -> None:
        self.autodiff: Literal["axjax", "jax"] = "axjax"

    @property
    def provenance(self) -> bool:
        """Record where each axis came from and say it in ``AxisError`` messages (a debugging
        mode, process-wide; also ``AXJAX_PROVENANCE=1``). See core/_provenance.py."""
        return _provenance.recording

    @provenance.setter
    def provenance(self, on: bool) -> None:
        _provenance.set_enabled(on)


config: _Config = _Config()


@contextlib.contextmanager
def jax_autodiff() -> Generator[None, None, None]:
    """Lower ops to plain JAX autodiff instead of their own backward.

    ``jax.custom_vjp`` has no forward mode; use this around ``jax.jvp``,
    ``jax.jacfwd`` or ``jax.hessian``. Values and gradients are identical.

    Example:
        >>> with ax.jax_autodiff():
        ...     h = jax.hessian(lambda a: ax.sum(ax.tanh(ax.tensor(a, X)), X).array)(x)
    """
    old = config.autodiff
    config.autodiff = "jax"
    try:
        yield
    finally:
        config.autodiff = old


D = TypeVar("D", bound=DType)
Axes = TypeVarTuple("Axes")
#: What applying an op gives: one Tensor (the default), or a tuple for an op with several
#: results (``class Unstack(Op[tuple[AnyTensor, ...]])``).
R = DefaultTypeVar("R", default=AnyTensor)


class Op(Generic[R]):
    """A primitive op: type rule, forward and backward.

    Subclass it to add an op. Static parameters (an axis, a size) are attributes set in
    ``__init__``; operands are the Tensors the op is called with.

    - :meth:`infer` ``(*xs) -> TensorType``: the type rule. Receives the operands (Tensors
      or graph nodes: use only ``.dtype``, ``.axes``, ``.shape``); raises ``AxisError``
      (build it with :meth:`fail`) or returns the result's type.
    - :meth:`forward` ``(*xs) -> jax.Array``: computes the result from operand Tensors.
    - :meth:`backward` ``(dy, y, *xs) -> tuple``: the paper's signature. ``dy`` and ``y``
      are Tensors with the result's axes; returns one cotangent per operand, each an
      array or Tensor in that operand's axis order, or ``None`` for "no gradient".

    An op with several results (``Unstack``) returns a tuple of ``TensorType`` from
    ``infer`` and a tuple of arrays from ``forward``, and is applied to a tuple of Tensors;
    its ``backward`` receives ``dy`` and ``y`` as tuples of Tensors, one per result. A graph
    node has one result, so such an op applies to Tensors only.

    Example:
        >>> class Swish(ax.Op):
        ...     def infer(self, x):
        ...         return x.type
        ...     def forward(self, x):
        ...         return x.array * jax.nn.sigmoid(x.array)
        ...     def backward(self, dy, y, x):
        ...         s = jax.nn.sigmoid(x.array)
        ...         return (dy.array * (s + y.array * (1 - s)),)
        >>> Swish()(t)  # a Tensor with t's axes
    """

    #: name used in messages and graph listings (defaults to the class name)
    name: str = ""
    #: ``True`` for an op that sums (a reduction, a softmax, an average pool): with F16 or
    #: BF16 operands its forward and backward run on float32 copies and the results are
    #: cast back (see :func:`accumulation_dtype`), as ``jnp.sum`` and ``jnp.mean`` do, so
    #: long sums neither lose their low bits nor overflow (``1 / 65536`` is 0 in f16)
    accumulates: bool = False
    #: ``True``: differentiate this op's forward with JAX's own autodiff instead of wrapping
    #: it in axjax's ``jax.custom_vjp`` (as ``ax.jax_autodiff()`` does for every op), for a
    #: forward whose JAX derivative is the better one, e.g. ``jax.nn.dot_product_attention``
    #: (cuDNN's backward kernel, the softmax statistics as residual). ``backward`` then stays
    #: the op's declared derivative but is not what gradients run.
    jax_vjp: bool = False
    #: set on the one shared instance per parameters that ``cached`` makes (never mutated)
    _interned: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):
            cls.name = cls.__name__

    # -- to override ------------------------------------------------------------
    # Each op takes its own number of operands (``infer(self, x)``, ``infer(self, a, b)``):
    # for type checkers these are callables of any arity, so an override is not flagged.
    if TYPE_CHECKING:
        infer: Callable[..., TensorType | tuple[TensorType, ...]]
        forward: Callable[..., Any]
        backward: Callable[..., Sequence[Any]]
    else:

        def infer(self, *xs: Any) -> TensorType:
            """The type rule: operand types in, result type out (or ``AxisError``)."""
            raise NotImplementedError(f"{type(self).__name__} must define infer()")

        def forward(self, *xs: Any) -> Any:
            """Compute the result array from the operand Tensors."""
            raise NotImplementedError(f"{type(self).__name__} must define forward()")

        def backward(self, dy: Any, y: Any, *xs: Any) -> Sequence[Any]:
            """Cotangents of the operands given the result's cotangent ``dy``."""
            raise NotImplementedError(f"{type(self).__name__} must define backward()")

    # -- helpers for subclasses -------------------------------------------------
    def describe(self) -> str:
        """How the op is named in messages (``Sum(Batch)``); override to add parameters."""
        return self.name

    def fail(self, operands: Sequence[Any], why: str) -> AxisError:
        """An ``AxisError`` in the shared wording, naming this op and its operands."""
        from ._errors import fail

        return fail(self.describe(), operands, why)

    def params(self) -> dict[str, Any]:
        """Static parameters shown in graph listings (default: public attributes)."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def __repr__(self) -> str:
        return self.describe()

    # -- application ------------------------------------------------------------
    def __call__(self, *xs: Any) -> R:
        """Apply the op: check the operands' types, then compute (or build a graph node)."""
        return cast(R, apply(self, xs))

    def same_type(self, x: Tensor[D, *Axes], *others: Any) -> Tensor[D, *Axes]:
        """Apply an op whose result has its first operand's dtype and axes (elementwise
        math, softmax, slice, pooling, ...): the result is typed exactly, as ``x``."""
        return cast("Tensor[D, *Axes]", apply(self, (x, *others)))


#: Type-rule results keyed by (op class, op attributes, operand axes/shapes/dtypes). A type
#: rule depends on nothing else, so eager dispatch and re-tracing skip it after the first
#: call (the hot path: see BENCHMARKS.md). Errors are never cached; bounded in size.
_INFER_CACHE: dict[Any, TensorType | tuple[TensorType, ...]] = {}
_INFER_CACHE_MAX = 1 << 16
_Tracer = jax.core.Tracer
OpT = TypeVar("OpT", bound="Op[Any]")


@final
class _Unverified:
    """A type rule's result on its first computation, before the forward has been checked
    against it (then it goes into ``_INFER_CACHE``): ``apply`` checks the shape and dtype
    of the forward's result once per cache entry, so cached dispatch pays nothing for it."""

    __slots__ = ("out", "key")

    def __init__(self, out: TensorType | tuple[TensorType, ...], key: Any) -> None:
        self.out, self.key = out, key


def _cached_infer(
    op: Op[Any], xs: Sequence[Any]
) -> TensorType | tuple[TensorType, ...] | _Unverified | None:
    """``op.infer(*xs)``, memoised when every operand is a Tensor; ``None`` if not cacheable.

    A cache miss returns an :class:`_Unverified`, cached by ``apply`` once the forward's
    result has been checked against it.
    """
    # an interned op (see `cached`) is its own key: it lives, unchanged, for good
    key: list[Any] = [op] if op._interned else [type(op), tuple(op.__dict__.items())]
    for x in xs:
        if type(x) is not Tensor:
            return None
        a = x._array
        key += (x._axes, a.shape, a.dtype)
    try:
        k = tuple(key)
        out = _INFER_CACHE.get(k)
    except (TypeError, AttributeError):  # an unhashable parameter (a traced index), __slots__
        return None
    if out is None:
        for x in xs:
            check_layout(op, x)
        return _Unverified(inferred(op, xs), k)
    return out


_OPS: dict[Any, Op[Any]] = {}


def cached(cls: type[OpT], *params: Any) -> OpT:
    """``cls(*params)``, made once per distinct (hashable) parameters and then reused.

    Ops are immutable once built, so ``ax.sum(t, Batch)`` need not validate and build a
    ``Sum(Batch)`` on every call. Unhashable parameters (a traced index) build a new op.
    """
    key = (cls, params, tuple(map(type, params)))  # True == 1 and 2.0 == 2: not one op
    try:
        op = _OPS.get(key)
    except TypeError:
        return cls(*params)
    if op is None:
        op = cls(*params)
        if len(_OPS) < _INFER_CACHE_MAX:
            op._interned = True
            _OPS[key] = op
    return op  # type: ignore[return-value]


def apply(op: Op[Any], xs: Sequence[Any]) -> Any:
    """Apply ``op`` to operand Tensors (or graph nodes): check, then compute or record.

    The forward's result is checked against the type rule (shape and dtype, which are static
    even under tracing) the first time each cache entry is used, and on every uncached call.
    """
    found = _cached_infer(op, xs)
    verify: Any = None  # the cache key to store after the check; True: check, store nothing
    out: TensorType | tuple[TensorType, ...]
    if found is None:
        for x in xs:
            if not isinstance(x, Tensor) and not getattr(type(x), "_is_symbolic", False):
                raise not_a_tensor(op, x)
            check_layout(op, x)
        out = inferred(op, xs)
        for x in xs:
            if type(x)._is_symbolic:  # a graph node: it records the op (core/_symbolic.py)
                node = cast(Symbolic, x).record_apply(op, tuple(xs), out)
                return _provenance.record(op, xs, node) if _provenance.recording else node
        verify = True
    elif type(found) is _Unverified:
        verify, out = found.key, found.out
    else:
        out = found
    site = _finite.op_site() if _finite.checking_finite() else None
    check = verify is not None
    for x in xs:
        if isinstance(x._array, _Tracer) and config.autodiff != "jax" and not op.jax_vjp:
            y = _custom_vjp_call(op, xs, out, site, check)
            break
    else:
        y = _forward(op, xs, out, explicit_layout(xs), check)
        if site is not None:
            _finite.check_forward(op, xs, _typed(y, out), site)
    if check and verify is not True and len(_INFER_CACHE) < _INFER_CACHE_MAX:
        _INFER_CACHE[verify] = out  # the forward matched the rule: later calls skip both
    if isinstance(out, tuple):  # several results: one Tensor each
        results = tuple(Tensor._wrap(v, t.axes) for v, t in zip(y, out, strict=True))
        return _provenance.record(op, xs, results) if _provenance.recording else results
    if _provenance.recording:
        return _provenance.record(op, xs, Tensor._wrap(y, out.axes))
    return Tensor._wrap(y, out.axes)


def _typed(y: Any, out: TensorType | tuple[TensorType, ...]) -> Any:
    """The forward's result ``y`` as Tensors of the declared types (for reports)."""
    if isinstance(out, tuple):
        return tuple(
            Tensor._wrap(getattr(v, "_array", v), t.axes) for v, t in zip(y, out, strict=True)
        )
    return Tensor._wrap(getattr(y, "_array", y), out.axes)


# ----------------------------------------------------------------------------- the op contract
# An op's three methods are checked against each other in one place, at trace time (types,
# shapes and dtypes are static), so compiled code is unchanged:
# - `inferred`: what `infer` declares is a well-formed type (labels, no axis twice, sizes);
# - `forward_arrays`: what `forward` returns is the declared type (axes in the declared order,
#   shape, dtype), never relabelled;
# - `_check_cotangents`: each cotangent `backward` returns has its operand's axes, shape and
#   floating dtype.
# `check_contract` switches the checks off (for the tests that prove the checks are needed).
check_contract = True


def inferred(op: Op[Any], xs: Sequence[Any]) -> TensorType | tuple[TensorType, ...]:
    """``op.infer(*xs)``, checked to be a well-formed result type."""
    out = op.infer(*xs)
    if not check_contract:
        return out
    if isinstance(out, tuple):
        if not out:
            raise TypeError(
                f"{op.describe()}.infer returned an empty tuple: it returns the result's "
                "ax.TensorType (a tuple of them for an op with several results)"
            )
        for i, t in enumerate(out):
            _check_declared(op, t, f" result {i}")
    else:
        _check_declared(op, out, "")
    return out


def _check_declared(op: Op[Any], t: Any, which: str) -> None:
    name = f"{op.describe()}.infer"
    if not isinstance(t, TensorType):
        raise TypeError(
            f"{name} returned{which} a {type(t).__name__}: it returns the result's "
            "ax.TensorType(dtype, axes, shape) (x.type for an operand's type)"
        )
    if not (isinstance(t.dtype, type) and issubclass(t.dtype, DType) and t.dtype is not DType):
        raise TypeError(
            f"{name} declared{which} dtype {t.dtype!r}: the dtype is a marker class such as "
            "ax.F32 (x.dtype for an operand's)"
        )
    if not isinstance(t.axes, tuple) or not isinstance(t.shape, tuple):
        raise TypeError(
            f"{name} declared{which} axes {t.axes!r} and shape {t.shape!r}: both are tuples"
        )
    for a in t.axes:
        check_axis_label(a, name)
    check_unique_axes(t.axes, f"{name} declared{which} {describe(t)}")
    if len(t.shape) != len(t.axes) or not all(
        n is None or (isinstance(n, int | np.integer) and n >= 0) or is_symbolic_dim(n)
        for n in t.shape
    ):
        raise TypeError(
            f"{name} declared{which} axes ({axes_names(t.axes)}) with shape {t.shape!r}: the "
            "shape has one size (an int >= 0, None if unknown in a graph, or a jax.export "
            "symbolic size) per axis"
        )


def forward_arrays(
    op: Op[Any], out: TensorType | tuple[TensorType, ...], y: Any, check: bool
) -> Any:
    """The arrays of ``op.forward``'s result ``y``: a Tensor's axes must be the declared ones,
    in the declared order (never relabelled); with ``check`` (the first call per operand
    types, and every uncached call), shape and dtype must be the declared ones too."""
    if isinstance(out, tuple):
        if not isinstance(y, tuple | list) or len(y) != len(out):
            if not check_contract:
                return tuple(getattr(v, "_array", v) for v in y)
            got = f"{len(y)} results" if isinstance(y, tuple | list) else f"one {_what(y)}"
            raise TypeError(
                f"{op.describe()}.forward returned {got}, but {op.describe()}.infer declared "
                f"{len(out)} ({', '.join(map(describe, out))}): forward returns one array per "
                "declared result"
            )
        return tuple(
            _result_array(op, t, v, check, f" result {i}") for i, (v, t) in enumerate(zip(y, out))
        )
    return _result_array(op, out, y, check, "")


def _result_array(op: Op[Any], t: TensorType, y: Any, check: bool, which: str) -> Any:
    if isinstance(y, Tensor):
        if y._axes != t.axes and check_contract:
            raise AxisError(
                f"{op.describe()}.forward returned{which} a Tensor with axes "
                f"({axes_names(y._axes)}), but {op.describe()}.infer declared {describe(t)}: "
                f"return the declared axes in the declared order (ax.transpose(y, "
                f"{axes_names(t.axes)}) if only the order differs), or fix infer"
            )
        y = y._array
    if check and check_contract:
        _check_result(op, t, y, which)
    return y


def _what(y: Any) -> str:
    shape, dtype = getattr(y, "shape", None), getattr(y, "dtype", None)
    if shape is None or dtype is None:
        return (
            f"{type(y).__name__} ({y!r})"
            if isinstance(y, int | float | complex)
            else type(y).__name__
        )
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = str(dtype)
    return f"array of shape {tuple(shape)} and dtype {name}"


def _check_result(op: Op[Any], t: TensorType, y: Any, which: str) -> None:
    shape, dtype = getattr(y, "shape", None), getattr(y, "dtype", None)
    want = t.dtype.numpy
    if (
        shape is not None
        and dtype is not None
        and dtype == want
        and all(n is None or n == m for n, m in zip(t.shape, shape, strict=False))
        and len(shape) == len(t.shape)
    ):
        return
    declared = tuple("?" if n is None else n for n in t.shape)
    if (
        dtype is not None
        and dtype != want
        and shape is not None
        and len(shape) == len(t.shape)
        and jax.dtypes.canonicalize_dtype(want) == dtype
    ):
        raise TypeError(
            f"{op.describe()} declares {describe(t)}, but JAX computed it in "
            f"{np.dtype(dtype).name}: "
            f"{want.name} needs 64-bit mode (jax.config.update('jax_enable_x64', True) before "
            f"creating arrays), or use the 32-bit dtype"
        )
    raise TypeError(
        f"{op.describe()}.forward returned{which} {'a' if shape is None else 'an'} {_what(y)}, "
        f"but {op.describe()}.infer declared {describe(t)} (shape {declared}, dtype "
        f"{want.name}): forward must return the declared shape and dtype (fix forward, or "
        "infer if its rule is wrong)"
    )


def check_layout(op: Op[Any], x: Any) -> None:
    """Raise unless a concrete Tensor's array has one dimension per axis (not stacked)."""
    problem = unnamed_dims(x) if isinstance(x, Tensor) and not x._is_symbolic else ""
    if problem:
        fix = (
            ""
            if problem.startswith("array")
            else (
                " (name them with ax.tensor(t.array, Axis, *t.axes), or take them off with "
                "jax.vmap / jax.lax.scan first)"
            )
        )
        raise TypeError(f"Cannot apply {op.describe()} to {bare_type(x)}: {problem}{fix}")


def not_a_tensor(op: Op[Any], x: Any, numbers_ok: bool = False) -> TypeError:
    """The ``TypeError`` for an operand that is neither a Tensor nor a graph node."""
    shape = getattr(x, "shape", None)
    what = "jax.Array" if isinstance(x, jax.Array) else type(x).__name__
    what += "" if shape is None else f" of shape {tuple(shape)}"
    kinds = "Tensors or Python numbers" if numbers_ok else "Tensors"
    return TypeError(
        f"Cannot apply {op.describe()} to {what}: operands must be {kinds} "
        "(wrap arrays with ax.tensor(array, *axes))"
    )


def _custom_vjp_call(
    op: Op[Any],
    xs: Sequence[Tensor[Any, *tuple[Any, ...]]],
    out: TensorType | tuple[TensorType, ...],
    site: str | None,
    check: bool,
) -> Any:
    """``op.forward`` in a ``jax.custom_vjp`` whose bwd is ``op.backward``; with ``site``
    (inside :func:`axjax.debug_nans`), both check their results for NaN and infinity.
    ``check``: also check the forward's shapes and dtypes (see :func:`forward_arrays`)."""
    in_axes = [x._axes for x in xs]
    layout = explicit_layout(xs)

    def wrap_out(a: Any) -> Any:
        if isinstance(out, tuple):
            return tuple(Tensor._wrap(v, t.axes) for v, t in zip(a, out, strict=True))
        return Tensor._wrap(a, out.axes)

    def fwd_arrays(*arrays: Any) -> Any:
        wrapped = [Tensor._wrap(a, ax_) for a, ax_ in zip(arrays, in_axes, strict=True)]
        y = _forward(op, wrapped, out, layout, check)
        if site is not None:
            _finite.check_forward(op, wrapped, wrap_out(y), site)
        return y

    def fwd(*arrays: Any) -> tuple[Any, Any]:
        y = fwd_arrays(*arrays)
        return y, (y, arrays)

    def bwd(res: Any, dy: Any) -> tuple[Any, ...]:
        y, arrays = res
        wrapped = [Tensor._wrap(a, ax_) for a, ax_ in zip(arrays, in_axes, strict=True)]
        grads = _backward(op, wrap_out, dy, y, wrapped, layout)
        if site is not None:
            _finite.check_backward(
                op,
                wrap_out(dy),
                wrapped,
                [
                    Tensor._wrap(g, x._axes) if g.shape == x._array.shape else g
                    for g, x in zip(grads, wrapped, strict=True)
                ],
                site,
            )
        return grads

    f = jax.custom_vjp(fwd_arrays)
    f.defvjp(fwd, bwd)
    try:
        return f(*match_varying([x._array for x in xs]))
    except TypeError as e:  # JAX refusing forward mode: say to use ax.jax_autodiff()
        error = forward_mode_error(op.describe(), e)
        if error is e:
            raise
        raise error from e


def _forward(
    op: Op[Any],
    xs: Sequence[Any],
    out: TensorType | tuple[TensorType, ...],
    layout: Layout | None,
    check: bool,
) -> Any:
    """``op.forward(*xs)``'s arrays, checked by :func:`forward_arrays`; on an Explicit mesh
    with sharded operands, run with the result sharded by axis name (``core/_placement.py``)."""
    if layout is None:
        return forward_arrays(op, out, _run_forward(op, xs, out), check)
    in_axes = [x._axes for x in xs]

    def arrays_fn(*arrays: Any) -> Any:
        wrapped = [Tensor._wrap(a, ax_) for a, ax_ in zip(arrays, in_axes, strict=True)]
        return forward_arrays(op, out, _run_forward(op, wrapped, out), check)

    return layout.run(arrays_fn, layout.out_sharding(out), *[x._array for x in xs])


def _backward(
    op: Op[Any],
    wrap_out: Callable[[Any], Any],
    dy: Any,
    y: Any,
    xs: Sequence[Any],
    layout: Layout | None,
) -> tuple[Any, ...]:
    """``op.backward``'s checked cotangents, each with its primal's sharding (Explicit mesh)
    and varying mesh axes (``shard_map``), as ``jax.custom_vjp`` requires."""
    if layout is None:
        grads = _check_cotangents(op, _run_backward(op, wrap_out(dy), wrap_out(y), xs), xs)
    else:
        in_axes = [x._axes for x in xs]
        floating = [i for i, x in enumerate(xs) if is_inexact(x._array)]

        def arrays_fn(dy: Any, y: Any, *arrays: Any) -> tuple[Any, ...]:
            ws = [Tensor._wrap(a, ax_) for a, ax_ in zip(arrays, in_axes, strict=True)]
            gs = _check_cotangents(op, _run_backward(op, wrap_out(dy), wrap_out(y), ws), ws)
            return tuple(gs[i] for i in floating)

        specs = tuple(layout.primal_spec(xs[i]._array) for i in floating)
        got = layout.run(arrays_fn, specs, dy, y, *[x._array for x in xs])
        filled = list(_check_cotangents(op, [None] * len(xs), xs))
        for i, g in zip(floating, got, strict=True):
            filled[i] = g
        grads = tuple(filled)
    return tuple(
        g if isinstance(g, np.ndarray) else cast_varying(g, x._array)
        for g, x in zip(grads, xs, strict=True)
    )


def _widened(op: Op[Any], values: Sequence[Any]) -> list[Any] | None:
    """For an op that :attr:`~Op.accumulates`: ``values`` (Tensors, or tuples of them)
    with every F16/BF16 array cast to float32; ``None`` when none is (nothing to do)."""
    if not op.accumulates:
        return None
    widened, any_low = [], False
    for v in values:
        if isinstance(v, tuple):
            inner = _widened(op, v)
            widened.append(v if inner is None else tuple(inner))
            any_low = any_low or inner is not None
            continue
        a = v._array
        wide = accumulation_dtype(a.dtype)
        if wide != a.dtype:
            v, any_low = Tensor._wrap(a.astype(wide), v._axes), True
        widened.append(v)
    return widened if any_low else None


def _run_forward(op: Op[Any], xs: Sequence[Any], out: TensorType | tuple[TensorType, ...]) -> Any:
    """``op.forward(*xs)``; for an op that accumulates, on float32 copies of F16/BF16
    operands, its results cast back to the declared dtypes."""
    wide = _widened(op, xs)
    if wide is None:
        return op.forward(*xs)
    y = op.forward(*wide)
    if isinstance(out, tuple):
        return tuple(_narrowed(v, t) for v, t in zip(y, out, strict=True))
    return _narrowed(y, out)


def _narrowed(y: Any, t: TensorType) -> Any:
    """A result computed in float32 for ``t``'s F16/BF16, cast back (anything else is left
    for ``forward_arrays`` to judge)."""
    a = getattr(y, "_array", y)
    want = t.dtype.numpy
    dtype = getattr(a, "dtype", None)
    if dtype == want or dtype != accumulation_dtype(want):
        return y
    return Tensor._wrap(a.astype(want), y._axes) if isinstance(y, Tensor) else a.astype(want)


def _run_backward(op: Op[Any], dy: Any, y: Any, xs: Sequence[Any]) -> Sequence[Any]:
    """``op.backward(dy, y, *xs)``; for an op that accumulates, on float32 copies of
    F16/BF16 values (``_check_cotangents`` casts the cotangents back to the operands')."""
    wide = _widened(op, (dy, y, *xs))
    if wide is None:
        return op.backward(dy, y, *xs)
    return op.backward(*wide)


def _check_cotangents(op: Op[Any], grads: Any, xs: Sequence[Any]) -> tuple[Any, ...]:
    """The arrays of ``op.backward``'s cotangents, one per operand (zeros for ``None``, no
    gradient for a non-floating operand); each must be a Tensor with its operand's axes, or
    an array of its shape, with its floating dtype (the op contract: see ``inferred``)."""
    name = f"{op.describe()}.backward"
    if not check_contract:
        grads = tuple(grads)
    elif not isinstance(grads, tuple | list):
        raise TypeError(
            f"{name} returned {_what(grads)}: it returns a tuple with one cotangent per "
            f"operand ({len(xs)} here), e.g. (dx,) for one operand"
        )
    elif len(grads) != len(xs):
        raise TypeError(f"{name} returned {len(grads)} cotangents for {len(xs)} operands")
    out = []
    for i, (g, x) in enumerate(zip(grads, xs, strict=True)):
        arr = x._array
        floating = is_inexact(arr)
        if g is None or not floating:
            out.append(jnp.zeros(arr.shape, arr.dtype) if floating else _float0(arr))
            continue
        if not check_contract:
            out.append(getattr(g, "_array", g))
            continue
        operand = f"operand {i} ({describe(x)})"
        if isinstance(g, Tensor):
            if g._axes != x._axes:
                raise AxisError(
                    f"{name}: cotangent {i} has axes ({axes_names(g._axes)}) but operand {i} "
                    f"has ({axes_names(x._axes)}) (transpose it to the operand's order)"
                )
            g = g._array
        shape, dtype = getattr(g, "shape", None), getattr(g, "dtype", None)
        if shape is None or dtype is None:
            raise TypeError(
                f"{name} returned {_what(g)} as cotangent {i}, for {operand}: a cotangent "
                f"is a Tensor with the operand's axes ({axes_names(x._axes)}) or an array of "
                f"its shape {tuple(arr.shape)}, or None for no gradient (a constant "
                "derivative still needs the shape: jnp.full_like(x.array, c) * dy.array)"
            )
        if tuple(shape) != tuple(arr.shape):
            raise TypeError(
                f"{name}: cotangent {i} has shape {tuple(shape)}, {operand} has shape "
                f"{tuple(arr.shape)} (return one value per element of the operand, in its "
                "axis order)"
            )
        if dtype != arr.dtype:
            if not jnp.issubdtype(dtype, jnp.inexact):
                raise TypeError(
                    f"{name}: cotangent {i} has dtype {np.dtype(dtype).name}, {operand} "
                    f"holds {np.dtype(arr.dtype).name}: a cotangent holds floating-point "
                    "values of its operand's dtype (compute it from dy and the operands, or "
                    "convert it with .astype(x.array.dtype))"
                )
            g = g.astype(arr.dtype)  # another float precision (an f32 derivative of a bf16 x)
        out.append(g)
    return tuple(out)


def _float0(arr: Any) -> Any:
    return np.zeros(arr.shape, dtype=jax.dtypes.float0)


# ----------------------------------------------------------------------------- utilities
def same_sizes(op: Op[Any], xs: Sequence[Any]) -> None:
    """Check that equal axes have equal sizes across operands (``None`` = unknown)."""
    seen: dict[type[Axis], int] = {}
    for x in xs:
        for a, n in zip(x.axes, x.shape, strict=True):
            if n is None:
                continue
            m = seen.setdefault(a, n)
            if m != n:
                raise op.fail(
                    xs,
                    f"axis {a.__name__} has size {m} in one operand and {n} in another "
                    "(equal axes must have equal sizes)",
                )


def result_dtype(op: Op[Any], xs: Sequence[Any]) -> type[DType]:
    """The common dtype of the operands, or an ``AxisError`` if they differ."""
    dtypes = {x.dtype for x in xs}
    if len(dtypes) > 1:
        names = " and ".join(sorted(d.__name__ for d in dtypes))
        raise op.fail(xs, f"dtypes {names} differ (convert one operand with astype)")
    first: type[DType] = next(iter(dtypes))
    return first


def require_floating(op: Op[Any], xs: Sequence[Any]) -> None:
    for x in xs:
        if not is_floating(x.dtype):
            raise op.fail(
                xs,
                f"{op.name} needs floating-point values, got {x.dtype.__name__} "
                "(convert with astype(ax.F32))",
            )


def require_numbers(op: Op[Any], xs: Sequence[Any]) -> None:
    """Raise unless every operand holds numbers (any dtype but Bool)."""
    for x in xs:
        if x.dtype is Bool:
            raise op.fail(
                xs,
                f"{op.name} needs numbers, got Bool (convert with astype(ax.I32) or "
                "astype(ax.F32))",
            )
