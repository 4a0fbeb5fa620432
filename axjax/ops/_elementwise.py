"""Elementwise primitives: unary math, binary arithmetic on identical axes, comparisons.

Binary ops accept only identical axes in identical order, equal sizes and the same dtype;
a Python number or a rank-0 tensor mixes with anything. There is no implicit
broadcasting: use :func:`axjax.broadcast`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar, TypeVarTuple, cast

import jax
import jax.core  # jax.core.Tracer: the submodule, imported by name for type checkers
import jax.numpy as jnp
import numpy as np

from ..core import AnyTensor, Bool, DType, Floating, Op, Tensor, TensorType
from ..core._internal import (
    HasType,
    accumulation_dtype,
    dtype_marker,
    fit_dtype,
    is_floating,
    jax_dtype,
    not_a_tensor,
    register_op,
    require_floating,
    require_numbers,
    result_dtype,
    same_sizes,
    trusted_tensor,
)

D = TypeVar("D", bound=DType)
D2 = TypeVar("D2", bound=DType)
# the floats-only math: an integer or Bool tensor is a static error (tanh, expm1, softplus
# keep D: axjax.nn's cells and activations call them with a dtype variable bound by DType)
DF = TypeVar("DF", bound=Floating)
Axes = TypeVarTuple("Axes")
F = TypeVar("F", bound=Callable[..., Any])

Array = jax.Array
UnaryRule = Callable[[Array, Array, Array], Array]
# Remaining Any: a number or array mixed into a binary op and its partner (both found by
# run-time checks), JAX's loosely typed dtypes, and the public Tensor aliases' parameters.


# ============================================================================ unary
class UnaryOp(Op):
    """Base of elementwise unary primitives: the result has the operand's type."""

    floating_only = True

    def infer(self, x: HasType) -> TensorType:
        if self.floating_only:
            require_floating(self, (x,))
        else:
            require_numbers(self, (x,))
        return TensorType(x.dtype, x.axes, x.shape)

    @staticmethod
    def fn(x: Array) -> Array:
        raise NotImplementedError

    @staticmethod
    def grad(dy: Array, y: Array, x: Array) -> Array:
        raise NotImplementedError

    def forward(self, x: AnyTensor) -> Array:
        return self.fn(x.array)

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array]:
        return (self.grad(dy.array, y.array, x.array),)


def _traced_once(rule: F) -> F:
    """A backward rule as an inlined ``jax.jit``: traced once per operand shapes and dtypes,
    then replayed from JAX's cache (as ``jax.nn.gelu`` is). Each ``jnp`` call in a rule is a
    nested jit of its own when traced; a deep model with one rule per layer would trace the
    same dozen calls at every layer (GELU's backward: 1.6 ms per layer). ``inline=True``
    leaves no call in the program: the compiled step is the same."""
    return jax.jit(rule, inline=True)  # type: ignore[return-value]  # jitted, rule is called the same


#: The public function of each unary and binary op, made by its declaration below
#: (:func:`unary_op`, :func:`binary_op`, :func:`compare_op`) and bound in this module under
#: its name; ``_gen_elementwise.py`` (generated from the registry) gives each its static type
#: and exports it. Adding an op is its declaration, its test case and its docs/ops.md row.
FUNCTIONS: dict[str, Callable[..., Any]] = {}


def _declare_function(name: str, fn: Callable[..., Any], doc: str) -> None:
    if name in FUNCTIONS or name in globals():  # the names below are bound after this
        raise TypeError(f"{name}: a function of this name is already defined in {__name__}")
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    fn.__module__ = __name__
    FUNCTIONS[name] = fn
    globals()[name] = fn


def _class_name(function: str) -> str:
    """``log_softmax`` -> ``LogSoftmax``: an op class is named after its function."""
    return "".join(part[:1].upper() + part[1:] for part in function.split("_"))


def unary_op(
    function: str,
    fn: Callable[[Array], Array],
    grad: UnaryRule,
    *,
    doc: str,
    floating_only: bool = True,
    typed: Literal["floating", "any"] | None = None,
    operators: tuple[str, ...] = (),
) -> type[UnaryOp]:
    """Declare an elementwise unary op: its class, its public function ``ax.<function>``
    and its registration, from the forward ``fn(x)`` and the backward ``grad(dy, y, x)``
    (``y`` is the forward's result, as in the paper).

    ``floating_only`` rejects integer and Bool tensors at run time; ``typed`` bounds the
    dtype in the function's static type: ``"floating"`` (``ax.Floating``, the default for
    floats-only ops) or ``"any"`` (``ax.DType``).

    Example (the whole declaration of ``ax.exp``):
        >>> Exp = unary_op("exp", jnp.exp, lambda dy, y, x: dy * y, doc="``e**x``.")
    """
    cls = type(
        _class_name(function),
        (UnaryOp,),
        {
            "fn": staticmethod(fn),
            "grad": staticmethod(_traced_once(grad)),
            "floating_only": floating_only,
            "static_dtype": typed or ("floating" if floating_only else "any"),
            "__doc__": doc,
            "__module__": __name__,
        },
    )
    op: UnaryOp = cls()

    def public(x: Tensor[D, *Axes]) -> Tensor[D, *Axes]:
        return op.same_type(x)

    _declare_function(function, public, doc)
    register_op(function, kind="unary", operators=operators)(cls)
    return cls


def _gelu_grad(dy: Array, y: Array, x: Array) -> Array:
    # derivative of the tanh approximation used by jax.nn.gelu (approximate=True)
    c = jnp.sqrt(2.0 / jnp.pi).astype(x.dtype)
    inner = c * (x + 0.044715 * x**3)
    t = jnp.tanh(inner)
    dinner = c * (1.0 + 3 * 0.044715 * x**2)
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t**2) * dinner)


def _silu_grad(dy: Array, y: Array, x: Array) -> Array:
    s = jax.nn.sigmoid(x)
    return dy * (s * (1 + x * (1 - s)))


def _erf_grad(dy: Array, y: Array, x: Array) -> Array:
    return dy * (2 / jnp.sqrt(jnp.pi)).astype(x.dtype) * jnp.exp(-x * x)


def _relu_grad(dy: Array, y: Array, x: Array) -> Array:
    return jnp.where(x > 0, dy, jnp.zeros((), dy.dtype))


# One declaration per op. tanh, expm1 and softplus need floats at run time but keep the
# DType bound statically: axjax.nn's cells and activations call them with a dtype variable.
Negative = unary_op(
    "negative",
    jnp.negative,
    lambda dy, y, x: -dy,
    doc="``-x``, elementwise. Backward ``-dy``.",
    floating_only=False,
    operators=("__neg__",),
)
Abs = unary_op(
    "abs",
    jnp.abs,
    lambda dy, y, x: dy * jnp.sign(x),
    doc="``|x|``, elementwise. Backward ``dy * sign(x)``.",
    floating_only=False,
    operators=("__abs__",),
)
Exp = unary_op(
    "exp", jnp.exp, lambda dy, y, x: dy * y, doc="``e**x``, elementwise. Backward ``dy * y``."
)
Log = unary_op(
    "log",
    jnp.log,
    lambda dy, y, x: dy / x,
    doc="Natural logarithm, elementwise. Backward ``dy / x``.",
)
Log1p = unary_op(
    "log1p", jnp.log1p, lambda dy, y, x: dy / (1 + x), doc="``log(1 + x)``, accurate near 0."
)
Expm1 = unary_op(
    "expm1",
    jnp.expm1,
    lambda dy, y, x: dy * (y + 1),
    doc="``exp(x) - 1``, accurate near 0.",
    typed="any",
)
Sqrt = unary_op(
    "sqrt",
    jnp.sqrt,
    lambda dy, y, x: dy / (2 * y),
    doc="Square root, elementwise. Backward ``dy / (2y)``.",
)
Rsqrt = unary_op(
    "rsqrt", jax.lax.rsqrt, lambda dy, y, x: -0.5 * dy * y / x, doc="``1 / sqrt(x)``, elementwise."
)
Square = unary_op(
    "square",
    jnp.square,
    lambda dy, y, x: 2 * x * dy,
    doc="``x * x``, elementwise. Backward ``2x * dy``.",
    floating_only=False,
)
Reciprocal = unary_op(
    "reciprocal", jnp.reciprocal, lambda dy, y, x: -dy * y * y, doc="``1 / x``, elementwise."
)
Tanh = unary_op(
    "tanh",
    jnp.tanh,
    lambda dy, y, x: dy * (1 - y * y),
    doc="Hyperbolic tangent. Backward ``dy * (1 - y**2)``.",
    typed="any",
)
Sigmoid = unary_op(
    "sigmoid",
    jax.nn.sigmoid,
    lambda dy, y, x: dy * y * (1 - y),
    doc="""Logistic sigmoid. Backward ``dy * y * (1 - y)`` (the paper's example).

Example:
    >>> ax.sigmoid(ax.zeros((2,), Batch))
    Tensor[F32, Batch=2]([0.5, 0.5])""",
)
Relu = unary_op(
    "relu",
    jax.nn.relu,
    _relu_grad,
    doc="``max(x, 0)``. Backward ``dy * (x > 0)``.",
    floating_only=False,
)
Gelu = unary_op(
    "gelu", jax.nn.gelu, _gelu_grad, doc="GELU, tanh approximation (as ``jax.nn.gelu``)."
)
Softplus = unary_op(
    "softplus",
    jax.nn.softplus,
    lambda dy, y, x: dy * jax.nn.sigmoid(x),
    doc="``log(1 + exp(x))``, computed stably. Backward ``dy * sigmoid(x)``.",
    typed="any",
)
Sin = unary_op("sin", jnp.sin, lambda dy, y, x: dy * jnp.cos(x), doc="Sine, elementwise.")
Cos = unary_op("cos", jnp.cos, lambda dy, y, x: -dy * jnp.sin(x), doc="Cosine, elementwise.")
Silu = unary_op("silu", jax.nn.silu, _silu_grad, doc="SiLU / swish: ``x * sigmoid(x)``.")
Erf = unary_op("erf", jax.scipy.special.erf, _erf_grad, doc="The error function, elementwise.")


# ============================================================================ binary
def _scalar_like(value: Any, other: Any, op: Op[Any]) -> Tensor[Any]:
    """A Python number as a rank-0 tensor of ``other``'s dtype (a rank-0 array as is)."""
    eager = type(other) is Tensor and not isinstance(other.array, jax.core.Tracer)
    if eager and type(value) in (float, int, bool):  # eager `t * 0.5`: reuse the tensor
        key = (type(value), repr(value), other.array.dtype)
        hit = _SCALARS.get(key)
        if hit is not None:
            return hit
    if isinstance(value, Tensor):  # a Tensor or a graph node
        return value
    if isinstance(value, np.generic):  # np.float32(2), np.int64(3), a bfloat16 scalar:
        item = value.item()  # it mixes as the Python number it holds
        if isinstance(item, int | float):  # bool is an int
            value = item
    if not isinstance(value, int | float | bool):
        if getattr(value, "ndim", None) == 0 and hasattr(value, "dtype"):
            wrapped: Tensor[Any] = trusted_tensor(value, ())  # a rank-0 array mixes as rank-0
            return wrapped
        raise not_a_tensor(op, value, numbers_ok=True)
    dtype = other.dtype
    if isinstance(value, float) and not isinstance(value, bool) and not is_floating(dtype):
        if not float(value).is_integer():
            raise op.fail(
                (other,),
                f"the float {value} cannot mix with {dtype.__name__} values "
                "(convert the tensor with astype(ax.F32))",
            )
    if dtype is Bool and not isinstance(value, bool):
        raise op.fail(
            (other,),
            f"the number {value} cannot mix with Bool values (use True "
            "or False, or convert the tensor with astype(ax.I32))",
        )
    try:  # the one rule for a value meeting a dtype (docs/tensors.md): 1e6 is no F16
        arr = fit_dtype(op.name, value, dtype)
    except (OverflowError, ValueError):
        raise op.fail(
            (other,),
            f"the number {value} does not fit in {dtype.__name__} "
            "(convert the tensor to a wider dtype with astype)",
        ) from None
    if not eager:  # tracing: a numpy constant is a literal in the jaxpr (never a tracer)
        return trusted_tensor(arr, ())
    out = trusted_tensor(jnp.asarray(arr), ())
    if len(_SCALARS) < 4096:
        _SCALARS[(type(value), repr(value), other.array.dtype)] = out
    return out


#: Rank-0 device tensors for eager ``t * 0.5`` by (type, repr, dtype) of the number: making
#: one costs several times the op itself. The repr keeps ``-0.0`` and ``nan`` apart; a
#: number only gets here after its checks passed for that dtype. Bounded.
_SCALARS: dict[tuple[type, str, Any], Tensor[Any]] = {}


def _binary_type(
    op: Op[Any], a: HasType, b: HasType, *, out_dtype: type[DType] | None = None
) -> TensorType:
    dtype = result_dtype(op, (a, b))
    if a.axes != b.axes and a.axes and b.axes:
        if set(a.axes) == set(b.axes) and len(a.axes) == len(b.axes):
            why = "same axes in a different order (transpose one operand first)"
        else:
            why = (
                "axes differ (elementwise ops need identical axes: use ax.broadcast, "
                "ax.transpose or ax.rename to line them up)"
            )
        raise op.fail((a, b), why)
    same_sizes(op, (a, b))
    full, other = (a, b) if a.axes or not b.axes else (b, a)
    shape = full.shape
    if other.axes:  # fill sizes a graph leaves open from the other operand
        shape = tuple(m if n is None else n for n, m in zip(full.shape, other.shape, strict=True))
    return TensorType(out_dtype or dtype, full.axes, shape)


def _unbroadcast(g: Array, x: Array) -> Array:
    """Sum a full-shape cotangent down to a rank-0 operand."""
    return jnp.sum(g) if x.ndim == 0 and g.ndim else g


class BinaryOp(Op):
    """Base of elementwise binary primitives on identical axes."""

    #: "floating", "numbers" (any dtype but Bool) or "any": the operand dtypes accepted
    accepts = "numbers"

    def infer(self, a: HasType, b: HasType) -> TensorType:
        t = _binary_type(self, a, b)
        if self.accepts == "floating":
            require_floating(self, (a, b))
        elif self.accepts == "numbers":
            require_numbers(self, (a, b))
        return t

    @staticmethod
    def fn(a: Array, b: Array) -> Array:
        raise NotImplementedError

    @staticmethod
    def grads(dy: Array, y: Array, a: Array, b: Array) -> tuple[Array, Array]:
        raise NotImplementedError

    def forward(self, a: AnyTensor, b: AnyTensor) -> Array:
        return self.fn(a.array, b.array)

    def backward(
        self, dy: AnyTensor, y: AnyTensor, a: AnyTensor, b: AnyTensor
    ) -> tuple[Array | None, Array | None]:
        ga, gb = self.grads(dy.array, y.array, a.array, b.array)
        return _unbroadcast(ga, a.array), _unbroadcast(gb, b.array)


def binary_op(
    function: str,
    fn: Callable[[Array, Array], Array],
    grads: Callable[[Array, Array, Array, Array], tuple[Array, Array]],
    *,
    doc: str,
    accepts: Literal["floating", "numbers", "any"] = "numbers",
    operators: tuple[str, ...] = (),
) -> type[BinaryOp]:
    """Declare an elementwise binary op on identical axes: its class, its public function
    ``ax.<function>(a, b)`` (a number or rank-0 tensor mixes with either side) and its
    registration, from the forward ``fn(a, b)`` and ``grads(dy, y, a, b) -> (da, db)``."""
    cls = type(
        _class_name(function),
        (BinaryOp,),
        {
            "fn": staticmethod(fn),
            "grads": staticmethod(_traced_once(grads)),
            "accepts": accepts,
            "__doc__": doc,
            "__module__": __name__,
        },
    )
    _declare_binary(function, cls, doc, operators)
    return cls


def compare_op(
    function: str, fn: Callable[[Array, Array], Array], *, doc: str, operators: tuple[str, ...] = ()
) -> type[Compare]:
    """Declare a comparison: as :func:`binary_op`, with a Bool result and no gradient."""
    cls = type(
        _class_name(function),
        (Compare,),
        {"fn": staticmethod(fn), "__doc__": doc, "__module__": __name__},
    )
    _declare_binary(function, cls, doc, operators)
    return cls


def _declare_binary(
    function: str, cls: type[BinaryOp], doc: str, operators: tuple[str, ...]
) -> None:
    op: BinaryOp = cls()

    def public(a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float) -> Tensor[D, *Axes]:
        if not isinstance(a, Tensor):
            out = op(_scalar_like(a, b, op), b)
        elif not isinstance(b, Tensor):
            out = op(a, _scalar_like(b, a, op))
        else:
            out = op(a, b)
        return cast("Tensor[D, *Axes]", out)  # the rule: identical axes, or rank 0

    _declare_function(function, public, doc)
    register_op(function, kind="binary", operators=operators)(cls)


def _pow_grads(dy: Array, y: Array, a: Array, b: Array) -> tuple[Array, Array]:
    da = dy * jnp.where(b == 0, 0, b * a ** jnp.where(b == 0, 1, b - 1))
    db = dy * y * jnp.log(jnp.where(a == 0, 1, a))
    return da, db


def _chooser(first_wins: Callable[[Array, Array], Array]) -> Callable[..., tuple[Array, Array]]:
    def grads(dy: Array, y: Array, a: Array, b: Array) -> tuple[Array, Array]:
        wa = jnp.where(a == b, 0.5, jnp.where(first_wins(a, b), 1.0, 0.0)).astype(dy.dtype)
        return dy * wa, dy * (1 - wa)

    return grads


class Compare(BinaryOp):
    """Base of comparisons: Bool result, no gradient."""

    def infer(self, a: HasType, b: HasType) -> TensorType:
        return _binary_type(self, a, b, out_dtype=Bool)

    def backward(
        self, dy: AnyTensor, y: AnyTensor, a: AnyTensor, b: AnyTensor
    ) -> tuple[None, None]:
        return None, None


Add = binary_op(
    "add",
    jnp.add,
    lambda dy, y, a, b: (dy, dy),
    doc="``a + b`` on identical axes (a number or rank-0 tensor mixes with anything).",
    operators=("__add__",),
)
Subtract = binary_op(
    "subtract",
    jnp.subtract,
    lambda dy, y, a, b: (dy, -dy),
    doc="``a - b`` on identical axes.",
    operators=("__sub__",),
)
Multiply = binary_op(
    "multiply",
    jnp.multiply,
    lambda dy, y, a, b: (dy * b, dy * a),
    doc="``a * b`` on identical axes. Backward ``(dy * b, dy * a)``.",
    operators=("__mul__",),
)
Divide = binary_op(
    "divide",
    jnp.divide,
    lambda dy, y, a, b: (dy / b, -dy * y / b),
    doc="``a / b`` on identical axes. Backward ``(dy / b, -dy * y / b)``.",
    accepts="floating",
    operators=("__truediv__",),
)


def _power(a: Array, b: Array) -> Array:
    """``a ** b``; an integer base with a negative exponent known now (a number, a concrete
    Tensor) is refused: its result is no integer (JAX raises deep inside, or gives 0)."""
    if jnp.issubdtype(a.dtype, jnp.integer) and not isinstance(b, jax.core.Tracer):
        if bool(np.any(np.asarray(b) < 0)):
            raise ValueError(
                f"power: an integer tensor ({a.dtype}) raised to a negative power has no "
                "integer result (convert the base to floats first: ax.astype(t, ax.F32))"
            )
    return jnp.power(a, b)


Power = binary_op(
    "power", _power, _pow_grads, doc="``a ** b`` on identical axes.", operators=("__pow__",)
)
Maximum = binary_op(
    "maximum",
    jnp.maximum,
    _chooser(jnp.greater),
    doc="Elementwise maximum on identical axes (ties share the gradient).",
    accepts="any",
)
Minimum = binary_op(
    "minimum",
    jnp.minimum,
    _chooser(jnp.less),
    doc="Elementwise minimum on identical axes (ties share the gradient).",
    accepts="any",
)
Equal = compare_op("equal", jnp.equal, doc="``a == b`` elementwise (Bool).")
NotEqual = compare_op("not_equal", jnp.not_equal, doc="``a != b`` elementwise (Bool).")
Less = compare_op("less", jnp.less, doc="``a < b`` elementwise (Bool).", operators=("__lt__",))
LessEqual = compare_op(
    "less_equal", jnp.less_equal, doc="``a <= b`` elementwise (Bool).", operators=("__le__",)
)
Greater = compare_op(
    "greater", jnp.greater, doc="``a > b`` elementwise (Bool).", operators=("__gt__",)
)
GreaterEqual = compare_op(
    "greater_equal",
    jnp.greater_equal,
    doc="``a >= b`` elementwise (Bool).",
    operators=("__ge__",),
)


# ============================================================================ where, astype
@register_op("where", kind="binary")
class Where(Op):
    """``where(cond, a, b)``: ``cond`` is Bool; all three share axes (rank-0 mixes)."""

    def infer(self, cond: HasType, a: HasType, b: HasType) -> TensorType:
        if cond.dtype is not Bool:
            raise self.fail((cond, a, b), f"the condition must be Bool, got {cond.dtype.__name__}")
        t = _binary_type(self, a, b)
        if cond.axes and not t.axes:  # rank-0 values spread over the condition's axes
            return TensorType(t.dtype, cond.axes, cond.shape)
        if cond.axes and cond.axes != t.axes:
            raise self.fail(
                (cond, a, b),
                "the condition's axes differ from the values' axes "
                "(transpose or broadcast the condition first)",
            )
        same_sizes(self, (cond, a, b))
        return t

    def forward(self, cond: AnyTensor, a: AnyTensor, b: AnyTensor) -> Array:
        return jnp.where(cond.array, a.array, b.array)

    def backward(
        self, dy: AnyTensor, y: AnyTensor, cond: AnyTensor, a: AnyTensor, b: AnyTensor
    ) -> tuple[Array | None, ...]:
        c, g = cond.array, dy.array
        zero = jnp.zeros((), g.dtype)
        return (
            None,
            _unbroadcast(jnp.where(c, g, zero), a.array),
            _unbroadcast(jnp.where(c, zero, g), b.array),
        )


_WHERE = Where()


def where(
    cond: Tensor[Bool, *Axes], a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float
) -> Tensor[D, *Axes]:
    """Pick ``a`` where ``cond`` holds, else ``b`` (identical axes)."""
    like = a if isinstance(a, Tensor) or getattr(type(a), "_is_symbolic", False) else b
    if not isinstance(like, Tensor) and not getattr(type(like), "_is_symbolic", False):
        raise TypeError(
            "where: at least one of a, b must be a Tensor (wrap a number with "
            "ax.full(shape, *axes, value=...))"
        )
    out = _WHERE(cond, _scalar_like(a, like, _WHERE), _scalar_like(b, like, _WHERE))
    return cast("Tensor[D, *Axes]", out)  # the rule: a's dtype, the shared axes


@register_op("astype", kind="other", operators=("astype",))
class AsType(Op):
    """Convert the dtype; the cotangent is converted back (none for integer operands)."""

    def __init__(self, dtype: type[DType]) -> None:
        self.dtype = dtype_marker(dtype)

    def describe(self) -> str:
        return f"AsType({self.dtype.__name__})"

    def infer(self, x: HasType) -> TensorType:
        return TensorType(self.dtype, x.axes, x.shape)

    def forward(self, x: AnyTensor) -> Array:

        # F64/I64 without jax_enable_x64: an error, not a silent F32 (checked when the values
        # are made, so a graph may still be built with F64 and compiled where x64 is on)
        return x.array.astype(jax_dtype(self.dtype, "astype"))

    def backward(self, dy: AnyTensor, y: AnyTensor, x: AnyTensor) -> tuple[Array | None]:
        if not is_floating(dtype_marker(x.array.dtype)) or not is_floating(self.dtype):
            return (None,)
        return (dy.array.astype(x.array.dtype),)


def astype(x: Tensor[Any, *Axes], dtype: type[D2]) -> Tensor[D2, *Axes]:
    """Convert to another dtype marker: ``ax.astype(t, ax.BF16)``."""
    if x.dtype is dtype:
        return x
    return cast("Tensor[D2, *Axes]", AsType(dtype)(x))  # the rule keeps the axes


def widened(x: Tensor[Any, *Axes]) -> Tensor[Any, *Axes]:
    """``x`` in the dtype statistics are computed in: float32 for F16/BF16 (core's
    ``accumulation_dtype``), ``x`` itself otherwise.

    The one rule of layers and losses that compute a statistic (a variance, a mean of
    squares, attention scores, a squared error): widen the inputs, compute and combine in
    float32, and cast the result back once with :func:`narrowed`, so that a statistic
    beyond the input's range (the variance 160 000 of F16 values ±400) never overflows
    on the way. Public reductions (``ax.var``, ``ax.sum``) instead keep their input's dtype.
    """
    wide = dtype_marker(accumulation_dtype(x.dtype))
    return x if wide is x.dtype else astype(x, wide)


def narrowed(y: Tensor[Any, *Axes], dtype: type[D2]) -> Tensor[D2, *Axes]:
    """A result computed on :func:`widened` values, cast back to ``dtype``."""
    return astype(y, dtype)


# BEGIN GENERATED by tools/gen_overloads.py: the declared functions, by name
negative = FUNCTIONS["negative"]
abs = FUNCTIONS["abs"]
exp = FUNCTIONS["exp"]
log = FUNCTIONS["log"]
log1p = FUNCTIONS["log1p"]
expm1 = FUNCTIONS["expm1"]
sqrt = FUNCTIONS["sqrt"]
rsqrt = FUNCTIONS["rsqrt"]
square = FUNCTIONS["square"]
reciprocal = FUNCTIONS["reciprocal"]
tanh = FUNCTIONS["tanh"]
sigmoid = FUNCTIONS["sigmoid"]
relu = FUNCTIONS["relu"]
gelu = FUNCTIONS["gelu"]
softplus = FUNCTIONS["softplus"]
sin = FUNCTIONS["sin"]
cos = FUNCTIONS["cos"]
silu = FUNCTIONS["silu"]
erf = FUNCTIONS["erf"]
add = FUNCTIONS["add"]
subtract = FUNCTIONS["subtract"]
multiply = FUNCTIONS["multiply"]
divide = FUNCTIONS["divide"]
power = FUNCTIONS["power"]
maximum = FUNCTIONS["maximum"]
minimum = FUNCTIONS["minimum"]
equal = FUNCTIONS["equal"]
not_equal = FUNCTIONS["not_equal"]
less = FUNCTIONS["less"]
less_equal = FUNCTIONS["less_equal"]
greater = FUNCTIONS["greater"]
greater_equal = FUNCTIONS["greater_equal"]
# END GENERATED
