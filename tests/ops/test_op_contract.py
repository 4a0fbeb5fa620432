"""The op contract, checked in one place (core/_contract.py) for every op of the registry.

Each declared op is run on its op-table operands (``tests/ops/op_cases.py``) with one of its
three methods broken on purpose:

- ``infer`` declares an axis twice, or returns something other than a ``TensorType``;
- ``forward`` returns its result transposed, with an axis relabelled, or in another dtype;
- ``backward`` returns, for one operand, a Python float, an integer array, a Tensor with
  other axes, or a bare cotangent instead of a tuple.

Every break must be caught by the contract (an ``AxisError``/``TypeError`` naming the op's
method), never relabelled, cast or turned into a zero gradient. The mutation test switches
the contract off (``_contract.check_contract = False``) and shows the same breaks then go through
or fail elsewhere, so the check above can fail.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, final

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from axjax.core import _contract, _op
from axjax.core._internal import declared_ops
from axjax.nn._fused_attention import FusedAttention
from tests.ops.helpers import ALL_AXES, OpCase, _values
from tests.ops.op_cases import CASES, LOSSES

AnyT = ax.Tensor[Any, *tuple[Any, ...]]


@final
class Z(ax.Axis):
    """A label no op case uses: what a relabelled result carries."""


SIZES = dict(zip(ALL_AXES, (2, 3, 4, 5, 2), strict=True))


def _operands(case: OpCase) -> list[AnyT]:
    """The case's operands in canonical order, with fixed sizes and values."""
    sizes = {**SIZES, **case.sizes}
    rng = np.random.default_rng(0)
    pool = iter((np.arange(200) + 0.5) * np.where(np.arange(200) % 2, 1, -1) / 40)
    out = []
    for arg in case.args:
        shape = tuple(sizes[a] for a in arg.axes)
        v = _values(rng, arg, shape, sizes, pool)
        v = v.astype(np.float32) if arg.floating else v
        out.append(ax.tensor(v, *arg.axes))
    return out


@final
class Time(ax.Axis): ...


def _attention(q: AnyT, k: AnyT, v: AnyT) -> AnyT:
    over, key_pos = ax.nn.HeadDim, ax.KeyOf[Time]
    out: AnyT = ax.nn.dot_product_attention(
        q, k, v, over=over, key_pos=key_pos, implementation="fused"
    )  # type: ignore[arg-type]
    return out


def _attention_operands() -> list[AnyT]:
    rng = np.random.default_rng(0)
    head, dim, key_pos = ax.nn.Head, ax.nn.HeadDim, ax.KeyOf[Time]

    def rand(shape: tuple[int, ...], *axes: type[ax.Axis]) -> AnyT:
        return ax.tensor(rng.normal(size=shape).astype(np.float32), *axes)

    return [
        rand((2, 3, 2, 4), ALL_AXES[0], Time, head, dim),
        rand((2, 5, 2, 4), ALL_AXES[0], key_pos, head, dim),
        rand((2, 5, 2, 4), ALL_AXES[0], key_pos, head, dim),
    ]


def _runners() -> dict[type[ax.Op], tuple[Callable[..., Any], list[AnyT]]]:
    """One (function, operands) per declared op: its first op-table case (the fused
    attention, an internal op of ``ax.nn``, through ``dot_product_attention``)."""
    by_name = {spec.op.__name__: spec.op for spec in declared_ops()}
    found: dict[type[ax.Op], tuple[Callable[..., Any], list[AnyT]]] = {
        FusedAttention: (_attention, _attention_operands())
    }
    DIFFERENTIABLE.add(FusedAttention)
    for case in (*CASES, *LOSSES):
        op = by_name[case.op]
        if op not in found:
            found[op] = (case.fn, _operands(case))
            result = case.out_dtype or (ax.F32 if case.args[0].floating else ax.I32)
            if any(arg.floating for arg in case.args) and ax.core._internal.is_floating(result):
                DIFFERENTIABLE.add(op)
    return found


DIFFERENTIABLE: set[type[ax.Op]] = set()
RUNNERS = _runners()
OPS = [spec.op for spec in declared_ops()]


def _floating(x: Any) -> bool:
    return bool(jnp.issubdtype(x.array.dtype, jnp.inexact))


def _results(y: Any) -> tuple[AnyT, ...]:
    return tuple(y) if isinstance(y, tuple | list) else (y,)


def _differentiable(op: type[ax.Op]) -> bool:
    """Whether the op's run reaches its backward: a floating operand and result."""
    return op in DIFFERENTIABLE


def _loss_grad(fn: Callable[..., Any], operands: list[AnyT]) -> Any:
    """``jax.grad`` of the sum of the floating results, by each floating operand, traced
    (``jax.make_jaxpr``: the contract runs at trace time; nothing is compiled)."""
    which = [i for i, x in enumerate(operands) if _floating(x)]

    def loss(*arrays: jax.Array) -> jax.Array:
        xs = list(operands)
        for i, a in zip(which, arrays, strict=True):
            xs[i] = ax.tensor(a, *operands[i].axes)
        ys = [y for y in _results(fn(*xs)) if _floating(y)]
        return sum((jnp.sum(y.array.astype(jnp.float32)) for y in ys), jnp.zeros(()))

    grad = jax.grad(loss, argnums=tuple(range(len(which))))
    return jax.make_jaxpr(grad)(*[operands[i].array for i in which])


# --------------------------------------------------------------------------- the breaks
def _other_order(y: AnyT, declared: ax.TensorType) -> AnyT:
    """The result with its axes in another order (or one more axis, below rank 2)."""
    a = y.array if isinstance(y, ax.Tensor) else y
    if len(declared.axes) >= 2:
        return ax.Tensor(jnp.transpose(a), tuple(reversed(declared.axes)))
    return ax.Tensor(jnp.expand_dims(a, -1), (*declared.axes, Z))


def _relabelled(y: AnyT, declared: ax.TensorType) -> AnyT:
    a = y.array if isinstance(y, ax.Tensor) else y
    if declared.axes:
        return ax.Tensor(a, (Z, *declared.axes[1:]))
    return ax.Tensor(jnp.expand_dims(a, 0), (Z,))


def _other_dtype(y: AnyT, declared: ax.TensorType) -> Any:
    a = y.array if isinstance(y, ax.Tensor) else y
    other = jnp.float16 if a.dtype != jnp.float16 else jnp.float32
    return a.astype(jnp.int32 if a.dtype == jnp.bool_ else other)


FORWARD_BREAKS: dict[str, Callable[[Any, ax.TensorType], Any]] = {
    "other-order": _other_order,
    "relabelled": _relabelled,
    "other-dtype": _other_dtype,
}


def _axis_twice(t: ax.TensorType) -> Any:
    if len(t.axes) >= 2:
        return ax.TensorType(t.dtype, (t.axes[0], *t.axes[:1], *t.axes[2:]), t.shape)
    if t.axes:
        return ax.TensorType(t.dtype, (t.axes[0], t.axes[0]), (t.shape[0], t.shape[0]))
    return ax.TensorType(t.dtype, (Z, Z), (1, 1))


INFER_BREAKS: dict[str, Callable[[ax.TensorType], Any]] = {
    "axis-twice": _axis_twice,
    "not-a-type": lambda t: f"{t!r}",
}


def _other_axes(g: Any, x: AnyT) -> AnyT:
    a = g.array if isinstance(g, ax.Tensor) else g
    if len(x.axes) >= 2:
        return ax.Tensor(jnp.transpose(a), tuple(reversed(x.axes)))
    return _relabelled(a, x.type)


BACKWARD_BREAKS: dict[str, Callable[[Any, AnyT], Any]] = {
    "python-float": lambda g, x: 1.0,
    "integer-array": lambda g, x: jnp.ones(x.array.shape, jnp.int32),
    "other-axes": _other_axes,
}
#: a backward returning one cotangent bare, not in a tuple
NOT_A_TUPLE = "not-a-tuple"


def _first(out: Any) -> Any:
    return out[0] if isinstance(out, tuple) else out


def _break(op: type[ax.Op], method: str, name: str, mp: pytest.MonkeyPatch) -> None:
    """Patch one method of ``op`` (for ``mp``'s duration) to break the contract one way."""
    mp.setattr(_op, "_INFER_CACHE", {})  # every call runs the type rule and the checks
    mp.setattr(_op, "_INFER_CACHE_MAX", 0)
    infer, forward, backward = op.infer, op.forward, op.backward
    declared: dict[int, Any] = {}

    def recording_infer(self: ax.Op, *xs: Any) -> Any:
        out = infer(self, *xs)
        declared[id(self)] = out
        if method != "infer":
            return out
        broken = INFER_BREAKS[name](_first(out))
        return (broken, *out[1:]) if isinstance(out, tuple) else broken

    def broken_forward(self: ax.Op, *xs: Any) -> Any:
        y = forward(self, *xs)
        wrong = FORWARD_BREAKS[name]
        out = declared[id(self)]
        if isinstance(out, tuple):
            return (wrong(y[0], out[0]), *y[1:])
        return wrong(y, out)

    def broken_backward(self: ax.Op, dy: Any, y: Any, *xs: Any) -> Any:
        grads = list(backward(self, dy, y, *xs))
        i = next(
            i
            for i, (g, x) in enumerate(zip(grads, xs, strict=True))
            if g is not None and _floating(x)
        )
        if name == NOT_A_TUPLE:
            return grads[i]
        grads[i] = BACKWARD_BREAKS[name](grads[i], xs[i])
        return tuple(grads)

    mp.setattr(op, "infer", recording_infer)
    if method == "forward":
        mp.setattr(op, "forward", broken_forward)
    if method == "backward":
        mp.setattr(op, "backward", broken_backward)
        # an op that JAX differentiates (``Op.jax_vjp``: FusedAttention) keeps a declared
        # backward all the same: check it through axjax's custom_vjp
        mp.setattr(op, "jax_vjp", False)


def missed(op: type[ax.Op], method: str, name: str) -> str | None:
    """``None`` when the contract catches the break, else what happened instead."""
    fn, operands = RUNNERS[op]
    with pytest.MonkeyPatch.context() as mp:
        _break(op, method, name, mp)
        try:
            if method == "backward":
                _loss_grad(fn, operands)
            else:  # traced: the forward runs in the op's jax.custom_vjp, as under jit
                jax.make_jaxpr(lambda *xs: [y.array for y in _results(fn(*xs))])(*operands)
        except (TypeError, ax.AxisError) as e:
            if re.search(rf"\.{method}\b", str(e)):
                return None
            return f"{type(e).__name__}: {str(e)[:300]}"
        except Exception as e:  # an error from elsewhere: the contract missed it
            return f"{type(e).__name__}: {str(e)[:300]}"
    return "no error: the break went through"


def _pairs() -> Iterator[tuple[type[ax.Op], str, str]]:
    for op in OPS:
        for name in INFER_BREAKS:
            yield op, "infer", name
        for name in FORWARD_BREAKS:
            yield op, "forward", name
        if _differentiable(op):
            for name in (*BACKWARD_BREAKS, NOT_A_TUPLE):
                yield op, "backward", name


PAIRS = list(_pairs())


def test_every_declared_op_has_operands() -> None:
    assert set(RUNNERS) == set(OPS), set(OPS) ^ set(RUNNERS)
    # the ops without a backward run are those whose results or operands are not floats
    no_backward = {op.__name__ for op in OPS if not _differentiable(op)}
    assert no_backward <= {
        "Equal",
        "NotEqual",
        "Less",
        "LessEqual",
        "Greater",
        "GreaterEqual",
        "ArgMax",
        "OneHot",
    }, no_backward


@pytest.mark.parametrize(
    ("op", "method", "name"), PAIRS, ids=[f"{o.__name__}-{m}-{n}" for o, m, n in PAIRS]
)
def test_the_contract_catches_a_broken_op(op: type[ax.Op], method: str, name: str) -> None:
    assert missed(op, method, name) is None, missed(op, method, name)


def test_without_the_contract_the_breaks_go_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutation test: with the one check switched off, the generated test above fails
    for every break of a sample (they go through, or fail later, elsewhere)."""
    monkeypatch.setattr(_contract, "check_contract", False)
    sample = PAIRS[:: max(1, len(PAIRS) // 120)]
    caught_anyway = [p for p in sample if missed(*p) is None]
    assert not caught_anyway, caught_anyway


# --------------------------------------------------------------- the user ops
@final
class Row(ax.Axis): ...


@final
class Col(ax.Axis): ...


def _square() -> AnyT:
    return ax.tensor(np.arange(4.0, dtype=np.float32).reshape(2, 2), Row, Col)


class SwapsAxes(ax.Op):
    """Declares its operand's type, returns the transpose as a Tensor (a square one: the
    shape alone cannot tell)."""

    def infer(self, x: Any) -> ax.TensorType:
        return x.type

    def forward(self, x: AnyT) -> AnyT:
        return ax.Tensor(x.array.T, (x.axes[1], x.axes[0]))

    def backward(self, dy: AnyT, y: AnyT, x: AnyT) -> tuple[Any]:
        return (dy.array.T,)


class AxisTwice(ax.Op):
    def infer(self, x: Any) -> ax.TensorType:
        return ax.TensorType(x.dtype, (x.axes[0], x.axes[0]), (x.shape[0], x.shape[0]))

    def forward(self, x: AnyT) -> jax.Array:
        return x.array

    def backward(self, dy: AnyT, y: AnyT, x: AnyT) -> tuple[Any]:
        return (dy.array,)


def _doubling(cotangent: Callable[[AnyT, AnyT], Any]) -> type[ax.Op]:
    class Double(ax.Op):
        def infer(self, x: Any) -> ax.TensorType:
            return x.type

        def forward(self, x: AnyT) -> jax.Array:
            return 2 * x.array

        def backward(self, dy: AnyT, y: AnyT, x: AnyT) -> tuple[Any]:
            return (cotangent(dy, x),)

    return Double


def _grad_of(op: type[ax.Op]) -> Any:
    def loss(a: jax.Array) -> jax.Array:
        return ax.sum(ax.sum(op()(ax.tensor(a, Row, Col)), Row), Col).array

    return jax.grad(loss)(_square().array)


def test_a_forward_in_another_axis_order_is_an_error_not_relabelled() -> None:
    message = (
        "SwapsAxes.forward returned a Tensor with axes (Col, Row), but SwapsAxes.infer "
        "declared Tensor[F32, Row=2, Col=2]: return the declared axes in the declared order "
        "(ax.transpose(y, Row, Col) if only the order differs), or fix infer"
    )
    with pytest.raises(ax.AxisError, match=re.escape(message)):
        SwapsAxes()(_square())  # eager
    with pytest.raises(ax.AxisError, match=re.escape(message)):
        jax.jit(lambda t: SwapsAxes()(t))(_square())  # traced: in the custom_vjp


def test_an_infer_declaring_an_axis_twice_is_an_error() -> None:
    with pytest.raises(
        ax.AxisError,
        match=re.escape(
            "AxisTwice.infer declared Tensor[F32, Row=2, Row=2]: axis Row occurs twice in "
            "(Row, Row); a tensor never has the same axis twice (rename one of them)"
        ),
    ):
        AxisTwice()(_square())


@pytest.mark.parametrize(
    ("cotangent", "kind", "message"),
    [
        (
            lambda dy, x: 2.0,
            TypeError,
            "Double.backward returned float (2.0) as cotangent 0, for operand 0 (Tensor[F32, "
            "Row=2, Col=2]): a cotangent is a Tensor with the operand's axes (Row, Col) or an "
            "array of its shape (2, 2), or None for no gradient (a constant derivative still "
            "needs the shape: jnp.full_like(x.array, c) * dy.array)",
        ),
        (
            lambda dy, x: jnp.float32(2.0),
            TypeError,
            "Double.backward: cotangent 0 has shape (), operand 0 (Tensor[F32, Row=2, Col=2]) "
            "has shape (2, 2) (return one value per element of the operand, in its axis order)",
        ),
        (
            lambda dy, x: (2 * dy.array).astype(jnp.int32),
            TypeError,
            "Double.backward: cotangent 0 has dtype int32, operand 0 (Tensor[F32, Row=2, "
            "Col=2]) holds float32: a cotangent holds floating-point values of its operand's "
            "dtype (compute it from dy and the operands, or convert it with "
            ".astype(x.array.dtype))",
        ),
        (
            lambda dy, x: ax.transpose(2 * dy, Col, Row),
            ax.AxisError,
            "Double.backward: cotangent 0 has axes (Col, Row) but operand 0 has (Row, Col) "
            "(transpose it to the operand's order)",
        ),
    ],
    ids=["python-float", "rank-0-array", "integer-array", "other-axes"],
)
def test_a_backward_with_a_wrong_cotangent_names_the_op_and_operand(
    cotangent: Callable[[AnyT, AnyT], Any], kind: type[Exception], message: str
) -> None:
    with pytest.raises(kind, match=re.escape(message)):
        _grad_of(_doubling(cotangent))


@pytest.mark.parametrize(
    "cotangent",
    [lambda dy, x: 2 * dy, lambda dy, x: 2 * dy.array, lambda dy, x: np.full((2, 2), 2.0)],
    ids=["tensor", "jax-array", "numpy-array"],
)
def test_a_right_cotangent_as_tensor_or_array_gives_the_gradient(
    cotangent: Callable[[AnyT, AnyT], Any],
) -> None:
    np.testing.assert_allclose(_grad_of(_doubling(cotangent)), np.full((2, 2), 2.0))


@pytest.mark.parametrize("base", [ax.ElementwiseOp, ax.FloatElementwiseOp])
def test_user_elementwise_ops_refuse_mismatched_sizes(base: type[ax.Op]) -> None:
    class AddBoth(base):  # type: ignore[valid-type,misc]
        def forward(self, a: AnyT, b: AnyT) -> jax.Array:
            return a.array + b.array

        def backward(self, dy: AnyT, y: AnyT, a: AnyT, b: AnyT) -> tuple[Any, Any]:
            return dy, dy

    row = ax.tensor(np.ones((1, 2), np.float32), Row, Col)
    with pytest.raises(
        ax.AxisError,
        match=re.escape(
            "Cannot apply AddBoth to Tensor[F32, Row=2, Col=2] and Tensor[F32, Row=1, Col=2]: "
            "axis Row has size 2 in one operand and 1 in another (equal axes must have equal "
            "sizes)"
        ),
    ):
        AddBoth()(_square(), row)
    assert AddBoth()(_square(), _square()).sizes == {Row: 2, Col: 2}
