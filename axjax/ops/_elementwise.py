"""Elementwise primitives: unary math, binary arithmetic on identical axes, comparisons.

Binary ops accept only identical axes in identical order, equal sizes and the same dtype;
a Python number or a rank-0 tensor mixes with anything. There is no implicit
broadcasting: use :func:`axjax.broadcast`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, TypeVarTuple, cast

import jax
import jax.core  # jax.core.Tracer: the submodule, imported by name for type checkers
import jax.numpy as jnp
import numpy as np

from ..core import AnyTensor, Bool, DType, Floating, Op, Tensor, TensorType
from ..core._internal import (
    HasType,
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
    return jax.jit(rule, inline=True)  # type: ignore[return-value]


def _unary(
    name: str,
    fn: Callable[[Array], Array],
    grad: UnaryRule,
    *,
    floating_only: bool = True,
    doc: str = "",
) -> type[UnaryOp]:
    cls = type(
        name,
        (UnaryOp,),
        {
            "fn": staticmethod(fn),
            "grad": staticmethod(_traced_once(grad)),
            "floating_only": floating_only,
            "__doc__": doc or f"Elementwise {name.lower()}.",
            "__module__": __name__,
        },
    )
    return cls


def _gelu_grad(dy: Array, y: Array, x: Array) -> Array:
    # derivative of the tanh approximation used by jax.nn.gelu (approximate=True)
    c = jnp.sqrt(2.0 / jnp.pi).astype(x.dtype)
    inner = c * (x + 0.044715 * x**3)
    t = jnp.tanh(inner)
    dinner = c * (1.0 + 3 * 0.044715 * x**2)
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t**2) * dinner)


Negative = _unary(
    "Negative", jnp.negative, lambda dy, y, x: -dy, floating_only=False, doc="-x; backward -dy."
)
Abs = _unary(
    "Abs",
    jnp.abs,
    lambda dy, y, x: dy * jnp.sign(x),
    floating_only=False,
    doc="|x|; backward dy·sign(x).",
)
Exp = _unary("Exp", jnp.exp, lambda dy, y, x: dy * y, doc="e^x; backward dy·y.")
Log = _unary("Log", jnp.log, lambda dy, y, x: dy / x, doc="ln x; backward dy/x.")
Log1p = _unary("Log1p", jnp.log1p, lambda dy, y, x: dy / (1 + x), doc="ln(1+x).")
Expm1 = _unary("Expm1", jnp.expm1, lambda dy, y, x: dy * (y + 1), doc="e^x − 1.")
Sqrt = _unary("Sqrt", jnp.sqrt, lambda dy, y, x: dy / (2 * y), doc="√x; backward dy/(2y).")
Rsqrt = _unary("Rsqrt", jax.lax.rsqrt, lambda dy, y, x: -0.5 * dy * y / x, doc="1/√x.")
Square = _unary(
    "Square",
    jnp.square,
    lambda dy, y, x: 2 * x * dy,
    floating_only=False,
    doc="x²; backward 2x·dy.",
)
Reciprocal = _unary("Reciprocal", jnp.reciprocal, lambda dy, y, x: -dy * y * y, doc="1/x.")
Tanh = _unary("Tanh", jnp.tanh, lambda dy, y, x: dy * (1 - y * y), doc="tanh; dy·(1−y²).")
Sigmoid = _unary(
    "Sigmoid",
    jax.nn.sigmoid,
    lambda dy, y, x: dy * y * (1 - y),
    doc="σ(x); backward dy·y·(1−y) (the paper's example).",
)
Relu = _unary(
    "Relu",
    jax.nn.relu,
    lambda dy, y, x: jnp.where(x > 0, dy, jnp.zeros((), dy.dtype)),
    floating_only=False,
    doc="max(x, 0); backward dy·[x>0].",
)
Gelu = _unary("Gelu", jax.nn.gelu, _gelu_grad, doc="GELU (tanh approximation).")
Softplus = _unary(
    "Softplus",
    jax.nn.softplus,
    lambda dy, y, x: dy * jax.nn.sigmoid(x),
    doc="ln(1+eˣ); backward dy·σ(x).",
)
Sin = _unary("Sin", jnp.sin, lambda dy, y, x: dy * jnp.cos(x), doc="sin; dy·cos x.")
Cos = _unary("Cos", jnp.cos, lambda dy, y, x: -dy * jnp.sin(x), doc="cos; −dy·sin x.")
Silu = _unary(
    "Silu",
    jax.nn.silu,
    lambda dy, y, x: dy * (jax.nn.sigmoid(x) * (1 + x * (1 - jax.nn.sigmoid(x)))),
    doc="x·σ(x).",
)
Erf = _unary(
    "Erf",
    jax.scipy.special.erf,
    lambda dy, y, x: dy * (2 / jnp.sqrt(jnp.pi)).astype(x.dtype) * jnp.exp(-x * x),
    doc="the error function.",
)


def negative(x: Tensor[D, *Axes]) -> Tensor[D, *Axes]:
    """``-x``, elementwise."""
    return _NEG.same_type(x)


def abs(x: Tensor[D, *Axes]) -> Tensor[D, *Axes]:  # noqa: A001
    """``|x|``, elementwise."""
    return _ABS.same_type(x)


def exp(x: Tensor[DF, *Axes]) -> Tensor[DF, *Axes]:
    """``e**x``, elementwise. Backward ``dy * y``."""
    return _EXP.same_type(x)


def log(x: Tensor[DF, *Axes]) -> Tensor[DF, *Axes]:
    """Natural logarithm, elementwise."""
    return _LOG.same_type(x)


def log1p(x: Tensor[DF, *Axes]) -> Tensor[DF, *Axes]:
    """``log(1 + x)``, accurate near 0."""
    return _LOG1P.same_type(x)


def expm1(x: Tensor[D, *Axes]) -> Tensor[D, *Axes]:
    """``exp(x) - 1``, accurate near 0."""
    return _EXPM1.same_type(x)


def sqrt(x: Tensor[DF, *Axes]) -> Tensor[DF, *Axes]:
    """Square root, elementwise."""
    return _SQRT.same_type(x)


def rsqrt(x: Tensor[DF, *Axes]) -> Tensor[DF, *Axes]:
    """``1 / sqrt(x)``, elementwise."""
    return _RSQRT.same_type(x)


def square(x: Tensor[D, *Axes]) -> Tensor[D, *Axes]:
    """``x * x``, elementwise."""
    return _SQUARE.same_type(x)


def reciprocal(x: Tensor[DF, *Axes]) -> Tensor[DF, *Axes]:
    """``1 / x``, elementwise."""
    return _RECIPROCAL.same_type(x)


def tanh(x: Tensor[D, *Axes]) -> Tensor[D, *Axes]:
    """Hyperbolic tangent. Backward ``dy * (1 - y**2)``."""
    return _TANH.same_type(x)


def sigmoid(x: Tensor[DF, *Axes]) -> Tensor[DF, *Axes]:
    """Logistic sigmoid. Backward ``dy * y * (1 - y)``.

    Example:
        >>> ax.sigmoid(ax.zeros((2,), Batch))
        Tensor[F32, Batch=2]([0.5, 0.5])
    """
    return _SIGMOID.same_type(x)


def relu(x: Tensor[D, *Axes]) -> Tensor[D, *Axes]:
    """``max(x, 0)``. Backward ``dy * (x > 0)``."""
    return _RELU.same_type(x)


def gelu(x: Tensor[DF, *Axes]) -> Tensor[DF, *Axes]:
    """GELU, tanh approximation (as ``jax.nn.gelu``)."""
    return _GELU.same_type(x)


def silu(x: Tensor[DF, *Axes]) -> Tensor[DF, *Axes]:
    """SiLU / swish: ``x * sigmoid(x)``."""
    return _SILU.same_type(x)


def softplus(x: Tensor[D, *Axes]) -> Tensor[D, *Axes]:
    """``log(1 + exp(x))``, computed stably."""
    return _SOFTPLUS.same_type(x)


def sin(x: Tensor[DF, *Axes]) -> Tensor[DF, *Axes]:
    """Sine, elementwise."""
    return _SIN.same_type(x)


def cos(x: Tensor[DF, *Axes]) -> Tensor[DF, *Axes]:
    """Cosine, elementwise."""
    return _COS.same_type(x)


def erf(x: Tensor[DF, *Axes]) -> Tensor[DF, *Axes]:
    """The error function, elementwise."""
    return _ERF.same_type(x)


_NEG, _ABS, _EXP, _LOG, _LOG1P, _EXPM1 = Negative(), Abs(), Exp(), Log(), Log1p(), Expm1()
_SQRT, _RSQRT, _SQUARE, _RECIPROCAL = Sqrt(), Rsqrt(), Square(), Reciprocal()
_TANH, _SIGMOID, _RELU, _GELU, _SILU = Tanh(), Sigmoid(), Relu(), Gelu(), Silu()
_SOFTPLUS, _SIN, _COS, _ERF = Softplus(), Sin(), Cos(), Erf()


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


def _binary(
    name: str,
    fn: Callable[[Array, Array], Array],
    grads: Callable[[Array, Array, Array, Array], tuple[Array, Array]],
    doc: str,
    accepts: str = "numbers",
) -> type[BinaryOp]:
    return type(
        name,
        (BinaryOp,),
        {
            "fn": staticmethod(fn),
            "grads": staticmethod(_traced_once(grads)),
            "accepts": accepts,
            "__doc__": doc,
            "__module__": __name__,
        },
    )


def _pow_grads(dy: Array, y: Array, a: Array, b: Array) -> tuple[Array, Array]:
    da = dy * jnp.where(b == 0, 0, b * a ** jnp.where(b == 0, 1, b - 1))
    db = dy * y * jnp.log(jnp.where(a == 0, 1, a))
    return da, db


def _chooser(first_wins: Callable[[Array, Array], Array]) -> Callable[..., tuple[Array, Array]]:
    def grads(dy: Array, y: Array, a: Array, b: Array) -> tuple[Array, Array]:
        wa = jnp.where(a == b, 0.5, jnp.where(first_wins(a, b), 1.0, 0.0)).astype(dy.dtype)
        return dy * wa, dy * (1 - wa)

    return grads


Add = _binary("Add", jnp.add, lambda dy, y, a, b: (dy, dy), "a + b; backward (dy, dy).")
Subtract = _binary("Subtract", jnp.subtract, lambda dy, y, a, b: (dy, -dy), "a − b.")
Multiply = _binary(
    "Multiply", jnp.multiply, lambda dy, y, a, b: (dy * b, dy * a), "a · b; backward (dy·b, dy·a)."
)
Divide = _binary(
    "Divide",
    jnp.divide,
    lambda dy, y, a, b: (dy / b, -dy * y / b),
    "a / b; backward (dy/b, −dy·y/b).",
    accepts="floating",
)
Power = _binary("Power", jnp.power, _pow_grads, "a ** b.")
Maximum = _binary(
    "Maximum", jnp.maximum, _chooser(jnp.greater), "max(a, b); ties split.", accepts="any"
)
Minimum = _binary(
    "Minimum", jnp.minimum, _chooser(jnp.less), "min(a, b); ties split.", accepts="any"
)


class Compare(BinaryOp):
    """Base of comparisons: Bool result, no gradient."""

    def infer(self, a: HasType, b: HasType) -> TensorType:
        return _binary_type(self, a, b, out_dtype=Bool)

    def backward(
        self, dy: AnyTensor, y: AnyTensor, a: AnyTensor, b: AnyTensor
    ) -> tuple[None, None]:
        return None, None


def _compare(name: str, fn: Callable[[Array, Array], Array]) -> type[Compare]:
    return type(
        name,
        (Compare,),
        {"fn": staticmethod(fn), "__doc__": f"{name}; Bool result.", "__module__": __name__},
    )


Equal = _compare("Equal", jnp.equal)
NotEqual = _compare("NotEqual", jnp.not_equal)
Less = _compare("Less", jnp.less)
LessEqual = _compare("LessEqual", jnp.less_equal)
Greater = _compare("Greater", jnp.greater)
GreaterEqual = _compare("GreaterEqual", jnp.greater_equal)

_BINARY: dict[str, Op] = {
    c.__name__: c()
    for c in (
        Add,
        Subtract,
        Multiply,
        Divide,
        Power,
        Maximum,
        Minimum,
        Equal,
        NotEqual,
        Less,
        LessEqual,
        Greater,
        GreaterEqual,
    )
}


def _apply_binary(
    name: str, a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float
) -> Tensor[D, *Axes]:
    """Apply a binary op; a number becomes a rank-0 tensor of the other operand's dtype.
    The result has the tensor operands' type (the rule: identical axes, or rank 0)."""
    op = _BINARY[name]
    if not isinstance(a, Tensor):
        out = op(_scalar_like(a, b, op), b)
    elif not isinstance(b, Tensor):
        out = op(a, _scalar_like(b, a, op))
    else:
        out = op(a, b)
    return cast("Tensor[D, *Axes]", out)


def _apply_compare(
    name: str, a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float
) -> Tensor[Bool, *Axes]:
    """A comparison: the operands' axes, Bool values."""
    return cast("Tensor[Bool, *Axes]", _apply_binary(name, a, b))


def add(a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float) -> Tensor[D, *Axes]:
    """``a + b`` on identical axes (a number or rank-0 tensor mixes with anything)."""
    return _apply_binary("Add", a, b)


def subtract(a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float) -> Tensor[D, *Axes]:
    """``a - b`` on identical axes."""
    return _apply_binary("Subtract", a, b)


def multiply(a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float) -> Tensor[D, *Axes]:
    """``a * b`` on identical axes."""
    return _apply_binary("Multiply", a, b)


def divide(a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float) -> Tensor[D, *Axes]:
    """``a / b`` on identical axes."""
    return _apply_binary("Divide", a, b)


def power(a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float) -> Tensor[D, *Axes]:
    """``a ** b`` on identical axes."""
    return _apply_binary("Power", a, b)


def maximum(a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float) -> Tensor[D, *Axes]:
    """Elementwise maximum on identical axes (ties share the gradient)."""
    return _apply_binary("Maximum", a, b)


def minimum(a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float) -> Tensor[D, *Axes]:
    """Elementwise minimum on identical axes (ties share the gradient)."""
    return _apply_binary("Minimum", a, b)


def equal(a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float) -> Tensor[Bool, *Axes]:
    """``a == b`` elementwise (Bool)."""
    return _apply_compare("Equal", a, b)


def not_equal(a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float) -> Tensor[Bool, *Axes]:
    """``a != b`` elementwise (Bool)."""
    return _apply_compare("NotEqual", a, b)


def less(a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float) -> Tensor[Bool, *Axes]:
    """``a < b`` elementwise (Bool)."""
    return _apply_compare("Less", a, b)


def less_equal(a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float) -> Tensor[Bool, *Axes]:
    """``a <= b`` elementwise (Bool)."""
    return _apply_compare("LessEqual", a, b)


def greater(a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float) -> Tensor[Bool, *Axes]:
    """``a > b`` elementwise (Bool)."""
    return _apply_compare("Greater", a, b)


def greater_equal(a: Tensor[D, *Axes] | float, b: Tensor[D, *Axes] | float) -> Tensor[Bool, *Axes]:
    """``a >= b`` elementwise (Bool)."""
    return _apply_compare("GreaterEqual", a, b)


# ============================================================================ where, astype
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


# ----------------------------------------------------------------------------- registry
# One declaration per op (axjax/core/_registry.py): its public functions and their kind.
register_op("negative", kind="unary", operators=("__neg__",))(Negative)
register_op("abs", kind="unary", operators=("__abs__",))(Abs)
register_op("exp", kind="unary")(Exp)
register_op("log", kind="unary")(Log)
register_op("log1p", kind="unary")(Log1p)
register_op("expm1", kind="unary")(Expm1)
register_op("sqrt", kind="unary")(Sqrt)
register_op("rsqrt", kind="unary")(Rsqrt)
register_op("square", kind="unary")(Square)
register_op("reciprocal", kind="unary")(Reciprocal)
register_op("tanh", kind="unary")(Tanh)
register_op("sigmoid", kind="unary")(Sigmoid)
register_op("relu", kind="unary")(Relu)
register_op("gelu", kind="unary")(Gelu)
register_op("softplus", kind="unary")(Softplus)
register_op("sin", kind="unary")(Sin)
register_op("cos", kind="unary")(Cos)
register_op("silu", kind="unary")(Silu)
register_op("erf", kind="unary")(Erf)
register_op("add", kind="binary", operators=("__add__",))(Add)
register_op("subtract", kind="binary", operators=("__sub__",))(Subtract)
register_op("multiply", kind="binary", operators=("__mul__",))(Multiply)
register_op("divide", kind="binary", operators=("__truediv__",))(Divide)
register_op("power", kind="binary", operators=("__pow__",))(Power)
register_op("maximum", kind="binary")(Maximum)
register_op("minimum", kind="binary")(Minimum)
register_op("equal", kind="binary")(Equal)
register_op("not_equal", kind="binary")(NotEqual)
register_op("less", kind="binary", operators=("__lt__",))(Less)
register_op("less_equal", kind="binary", operators=("__le__",))(LessEqual)
register_op("greater", kind="binary", operators=("__gt__",))(Greater)
register_op("greater_equal", kind="binary", operators=("__ge__",))(GreaterEqual)
register_op("where", kind="binary")(Where)
register_op("astype", kind="other", operators=("astype",))(AsType)
