"""``Op``: a primitive with a type rule, a forward and its own backward, as in the paper.

Applying an op (:func:`apply`) is *infer -> record or lower -> wrap*:

1. **infer**: the type rule :meth:`Op.infer` on the operands' types, cached per operand
   types (raises :class:`AxisError` in Python, at trace time; core/_contract.py checks
   what it declares);
2. **record**: if an operand is symbolic (a graph ``Input``/``Param``/``Apply``), the
   graph node records the op (core/_symbolic.py);
3. **lower**: otherwise the forward's arrays (core/_lower.py): inside a ``jax.custom_vjp``
   whose bwd is :meth:`Op.backward` when JAX is differentiating (an operand is a JAX
   tracer; unless :attr:`Op.jax_vjp`), so reverse mode uses axjax's own derivative;
   directly otherwise (concrete operands: cheap eager dispatch). ``with
   ax.jax_autodiff():`` (or ``ax.config.autodiff = "jax"``) runs every op's forward
   directly, so JAX differentiates it (``jax.jvp``, ``jax.hessian``);
4. **wrap**: the arrays as Tensors with the declared axes.

The switches that decide the lowering are read once per op (autodiff mode, provenance, NaN
checks, the rules of the Explicit-mesh layout: core/_context.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, TypeVarTuple, cast, final

from typing_extensions import TypeVar as DefaultTypeVar  # PEP 696 defaults on 3.11

from . import _provenance
from ._axis import Axis
from ._context import current
from ._contract import checked_infer
from ._dtype import Bool, DType, is_floating
from ._errors import AxisError, HasType
from ._lower import lower
from ._protocols import Arrays, Operand
from ._symbolic import Symbolic
from ._tensor import AnyTensor, Tensor
from ._tensor_type import TensorType

__all__ = ["Op", "apply", "cached"]


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
    #: ``True``: JAX differentiates the forward with its own autodiff, as under
    #: :func:`axjax.jax_autodiff`, instead of a ``jax.custom_vjp`` around it whose bwd is
    #: :meth:`backward` (an op whose forward is built of JAX primitives with good
    #: derivatives, such as a fused attention kernel; core/_lower.py reads it)
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

        def infer(self, *xs: Operand) -> TensorType:
            """The type rule: operand types in, result type out (or ``AxisError``)."""
            raise NotImplementedError(f"{type(self).__name__} must define infer()")

        def forward(self, *xs: Operand) -> Arrays:
            """Compute the result array from the operand Tensors."""
            raise NotImplementedError(f"{type(self).__name__} must define forward()")

        def backward(self, dy: object, y: object, *xs: Operand) -> Sequence[object]:
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

    def same_type(self, x: Tensor[D, *Axes], *others: object) -> Tensor[D, *Axes]:
        """Apply an op whose result has its first operand's dtype and axes (elementwise
        math, softmax, slice, pooling, ...): the result is typed exactly, as ``x``."""
        return cast("Tensor[D, *Axes]", apply(self, (x, *others)))


#: Type-rule results keyed by (op class, op attributes, operand axes/shapes/dtypes). A type
#: rule depends on nothing else, so eager dispatch and re-tracing skip it after the first
#: call (the hot path: see BENCHMARKS.md). Errors are never cached; bounded in size.
_INFER_CACHE: dict[Any, TensorType | tuple[TensorType, ...]] = {}
_INFER_CACHE_MAX = 1 << 16
OpT = TypeVar("OpT", bound="Op[Any]")


@final
class _Unverified:
    """A type rule's result on its first computation, before the forward has been checked
    against it (then it goes into ``_INFER_CACHE``): ``apply`` checks the shape and dtype
    of the forward's result once per cache entry, so cached dispatch pays nothing for it."""

    __slots__ = ("out", "key")

    def __init__(self, out: TensorType | tuple[TensorType, ...], key: tuple[object, ...]) -> None:
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
        return _Unverified(checked_infer(op, xs), k)
    return out


_OPS: dict[Any, Op[Any]] = {}


def cached(cls: type[OpT], *params: object) -> OpT:
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
    return op  # type: ignore[return-value]  # keyed by cls: op is a cls


def apply(op: Op[Any], xs: Sequence[Any]) -> AnyTensor | tuple[AnyTensor, ...]:
    """Apply ``op`` to operand Tensors (or graph nodes): infer -> record or lower -> wrap.

    The forward's result is checked against the type rule (shape and dtype, which are static
    even under tracing) the first time each cache entry is used, and on every uncached call.
    """
    now = current()  # the switches (core/_context.py), read once
    found = _cached_infer(op, xs)
    if found is None:  # not cacheable (a graph node, a traced parameter): check each operand
        out = checked_infer(op, xs)
        for x in xs:
            if type(x)._is_symbolic:  # a graph node records the op (core/_symbolic.py)
                node = cast(Symbolic, x).record_apply(op, tuple(xs), out)
                return _provenance.record(op, xs, node) if now.provenance else node
        verify: tuple[object, ...] | bool | None = True  # check the forward, cache nothing
    elif type(found) is _Unverified:
        out, verify = found.out, found.key  # check the forward, then cache the rule's result
    else:
        out, verify = found, None
    y = lower(op, xs, out, now, verify is not None)
    if verify is not None and verify is not True and len(_INFER_CACHE) < _INFER_CACHE_MAX:
        _INFER_CACHE[verify] = out  # the forward matched the rule: later calls skip both
    result: AnyTensor | tuple[AnyTensor, ...]
    if isinstance(out, tuple):  # several results: one Tensor each
        result = tuple(Tensor._wrap(v, t.axes) for v, t in zip(y, out, strict=True))
    else:
        result = Tensor._wrap(y, out.axes)
    return _provenance.record(op, xs, result) if now.provenance else result


# ----------------------------------------------------------------------------- utilities
def same_sizes(op: Op[Any], xs: Sequence[HasType]) -> None:
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
