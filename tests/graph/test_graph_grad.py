"""Gradients over a graph (each op's own backward) and the optax graph training step."""

from __future__ import annotations

from typing import Any, final

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import axjax as ax


@final
class Batch(ax.Axis): ...


@final
class In(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


@final
class Class(ax.Axis): ...


def _forward(x: Any, y: Any, w1: Any, b1: Any, w2: Any) -> Any:
    """The same model for eager Tensors and for graph nodes."""
    h = x @ w1
    h = ax.gelu(h + ax.broadcast(b1, h))
    logits = h @ w2
    return -ax.mean(ax.sum(ax.log_softmax(logits, Class) * y, Class), Batch)


_eager_loss = jax.jit(lambda xs, ys, vs: _forward(xs, ys, *vs))


def _setup() -> tuple[list[ax.Tensor], ax.Tensor, ax.Tensor]:
    rng = np.random.default_rng(3)
    f32 = lambda *shape: rng.normal(size=shape).astype(np.float32)  # noqa: E731
    values = [
        ax.tensor(f32(4, 6), In, Hidden),
        ax.tensor(f32(6), Hidden),
        ax.tensor(f32(6, 3), Hidden, Class),
    ]
    xs = ax.tensor(f32(5, 4), Batch, In)
    ys = ax.tensor(np.eye(3, dtype=np.float32)[rng.integers(0, 3, size=5)], Batch, Class)
    return values, xs, ys


def test_graph_gradients_equal_jax_grad_of_the_eager_model() -> None:
    values, xs, ys = _setup()
    params = [ax.Param(v, name=n) for v, n in zip(values, ["w1", "b1", "w2"], strict=True)]
    x = ax.Input(ax.F32, Batch, In, name="x")
    y = ax.Input(ax.F32, Batch, Class, name="y")
    loss = _forward(x, y, *params)
    grads = ax.grad(loss, wrt=params, inputs=[x, y])(xs, ys)
    eager = jax.jit(jax.grad(lambda vs: _forward(xs, ys, *vs).array))(values)
    assert isinstance(grads, tuple) and len(grads) == 3
    for g, e, p in zip(grads, eager, params, strict=True):
        assert isinstance(g, ax.Tensor) and g.axes == p.axes
        np.testing.assert_allclose(g.array, e.array, rtol=1e-5, atol=1e-6)
    value, g1 = ax.value_and_grad(loss, wrt=params[0], inputs=[x, y])(xs, ys)
    np.testing.assert_allclose(float(value), float(_eager_loss(xs, ys, values)), rtol=1e-6)
    np.testing.assert_allclose(g1.array, eager[0].array, rtol=1e-5, atol=1e-6)
    all_grads = ax.grad(loss, inputs=[x, y])(x=xs, y=ys)  # wrt: every Param
    assert len(all_grads) == 3
    with ax.jax_autodiff():  # plain JAX autodiff
        plain = ax.grad(loss, wrt=params, inputs=[x, y])(xs, ys)
    for g, e in zip(plain, eager, strict=True):
        np.testing.assert_allclose(g.array, e.array, rtol=1e-5, atol=1e-6)


class SignSTE(ax.Op):
    """sign(x) forward; straight-through backward (dy passes unchanged)."""

    calls = 0

    def infer(self, x: Any) -> ax.TensorType:
        return x.type  # type: ignore[no-any-return]

    def forward(self, x: Any) -> Any:
        return jnp.sign(x.array)

    def backward(self, dy: Any, y: Any, x: Any) -> tuple[Any]:
        SignSTE.calls += 1
        return (dy.array,)


def test_the_graph_uses_a_user_ops_own_backward() -> None:
    x = ax.Input(ax.F32, Batch, In, name="x")
    w = ax.Param(ax.full((3,), In, value=0.5), name="w")
    loss = ax.sum(ax.sum(SignSTE()(x * ax.broadcast(w, x)), In), Batch)
    xs = jnp.array([[1.0, -2.0, 3.0], [0.5, 0.5, -1.0]])
    SignSTE.calls = 0
    grad = ax.grad(loss, wrt=w, inputs=[x])
    g = grad(xs)
    assert SignSTE.calls >= 1
    np.testing.assert_allclose(g.array, xs.sum(axis=0))  # straight through: d/dw = Σ x
    with ax.jax_autodiff():  # the switch retraces once
        g0 = grad(xs)
    np.testing.assert_array_equal(g0.array, np.zeros(3))  # true derivative of sign
    np.testing.assert_allclose(grad(xs).array, xs.sum(axis=0))
    assert grad.trace_count == 2


def test_grad_errors() -> None:
    x = ax.Input(ax.F32, Batch, name="x")
    w = ax.Param(ax.ones((2,), Batch), name="w")
    y = x * w
    with pytest.raises(
        ax.AxisError,
        match=r"ax.grad: the loss must be a floating-point scalar, "
        r"got Tensor\[F32, Batch=2\] \(reduce the remaining axes",
    ):
        ax.grad(y, wrt=w, inputs=[x])
    loss = ax.sum(y, Batch)
    with pytest.raises(TypeError, match=r"wrt= lists Params, got Input x.*make it an ax.Param"):
        ax.grad(loss, wrt=[x], inputs=[x])
    with pytest.raises(TypeError, match="Param v: .* is not used by the loss"):
        ax.grad(loss, wrt=[ax.Param(ax.ones((2,), Batch), name="v")], inputs=[x])
    i = ax.Param(ax.ones((2,), Batch, dtype=ax.I32), name="i")
    with pytest.raises(TypeError, match="Param i: .* holds I32 values, which have no gradient"):
        ax.grad(loss + ax.sum(i, Batch).astype(ax.F32), wrt=[i], inputs=[x])
    with pytest.raises(TypeError, match="wrt= and inputs= are for graph losses"):
        ax.grad(lambda t: ax.sum(t, Batch), wrt=[w])


def test_eager_grad_is_unchanged() -> None:
    t = ax.tensor(jnp.array([1.0, 2.0]), Batch)
    g = ax.grad(lambda a: ax.sum(a * a, Batch))(t)
    np.testing.assert_allclose(g.array, [2.0, 4.0])
    v, g = ax.value_and_grad(lambda a: ax.sum(a * a, Batch))(t)
    assert float(v) == 5.0


def test_training_step_updates_params_and_reads_them_back() -> None:
    values, xs, ys = _setup()
    params = [ax.Param(v, name=n) for v, n in zip(values, ["w1", "b1", "w2"], strict=True)]
    x = ax.Input(ax.F32, Batch, In, name="x")
    y = ax.Input(ax.F32, Batch, Class, name="y")
    loss = _forward(x, y, *params)
    step = ax.compile_step(loss, optax.sgd(0.1), inputs=[x, y], wrt=params[:2])
    eager_grads = jax.jit(jax.grad(lambda vs: _forward(xs, ys, *vs).array))(values)
    first = step(xs, ys)
    np.testing.assert_allclose(float(first), float(_eager_loss(xs, ys, values)), rtol=1e-6)
    np.testing.assert_allclose(
        step.value(params[0]).array,
        values[0].array - 0.1 * eager_grads[0].array,
        rtol=1e-5,
        atol=1e-6,
    )
    np.testing.assert_array_equal(step.value(params[2]).array, values[2].array)  # not in wrt
    losses = [float(step(xs, ys)) for _ in range(30)]
    assert losses[-1] < float(first) and step.trace_count == 1
    new = step.params
    assert [p == q for p, q in zip(new, params, strict=True)] == [True] * 3
    value_now = ax.compile(loss, inputs=[x, y])(xs, ys, params=new)
    np.testing.assert_allclose(
        float(value_now), float(_eager_loss(xs, ys, ax.as_values(new))), rtol=1e-6
    )
    assert params[0].value is values[0]  # the original Param is unchanged
    with pytest.raises(TypeError, match="is not a Param of the loss graph"):
        step.value(ax.Param(values[0]))
    with pytest.raises(TypeError, match="optimizer must be an optax.GradientTransformation"):
        ax.compile_step(loss, 0.1, inputs=[x, y])  # type: ignore[arg-type]
