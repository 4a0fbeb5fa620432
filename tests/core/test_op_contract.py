"""The op contract, checked in one place (core/_op.py) for every op of the registry.

Each declared op is run on its op-table operands (``tests/core/op_cases.py``) with one of its
three methods broken on purpose:

- ``infer`` declares an axis twice, or returns something other than a ``TensorType``;
- ``forward`` returns its result transposed, with an axis relabelled, or in another dtype;
- ``backward`` returns, for one operand, a Python float, an integer array, a Tensor with
  other axes, or a bare cotangent instead of a tuple.

Every break must be caught by the contract (an ``AxisError``/``TypeError`` naming the op's
method), never relabelled, cast or turned into a zero gradient. The mutation test switches
the contract off (``_op.check_contract = False``) and shows the same breaks then go through
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
from axjax.core import _op
from axjax.core._internal import declared_ops
from axjax.nn._fused_attention import FusedAttention
from tests.core.helpers import ALL_AXES, OpCase, _values
from tests.core.op_cases import CASES, LOSSES

AnyT = ax.Tensor[Any, *tuple[Any, ...]]
Run = Callable[[], Any]


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
    over, key_pos = ax.nn.HeadDim, ax.nn.KeyPos
    out: AnyT = ax.nn.dot_product_attention(
        q, k, v, over=over, key_pos=key_pos, implementation="fused"
    )  # type: ignore[arg-type]
    return out


def _attention_operands() -> list[AnyT]:
    rng = np.random.default_rng(0)
    head, dim, key_pos = ax.nn.Head, ax.nn.HeadDim, ax.nn.KeyPos

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
    monkeypatch.setattr(_op, "check_contract", False)
    sample = PAIRS[:: max(1, len(PAIRS) // 120)]
    caught_anyway = [p for p in sample if missed(*p) is None]
    assert not caught_anyway, caught_anyway
