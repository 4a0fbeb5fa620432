"""Tensors through JAX, Equinox and Optax: jit, grad, vmap, scan, filter_jit, modules, adam;
tracing happens once per distinct axes and sizes; display in a terminal and a notebook."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import axjax as ax
from tests.axes import Batch, Hidden, Pixel, Time


def data(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def test_jit_returns_tensors_with_their_axes() -> None:
    x, w = ax.tensor(data(4, 3), Batch, Pixel), ax.tensor(data(3, 2), Pixel, Hidden)
    y = jax.jit(lambda a, b: ax.tanh(a @ b))(x, w)
    assert isinstance(y, ax.Tensor) and y.axes == (Batch, Hidden) and y.dtype is ax.F32
    np.testing.assert_allclose(y.array, np.tanh(x.array @ w.array), rtol=1e-6)


def test_jax_grad_gives_a_tensor_gradient_with_the_same_axes() -> None:
    x, w = ax.tensor(data(4, 3), Batch, Pixel), ax.tensor(data(3, 2), Pixel, Hidden)
    g = jax.grad(lambda w: ax.sum(ax.sigmoid(x @ w), (Batch, Hidden)).array)(w)
    assert isinstance(g, ax.Tensor) and g.axes == (Pixel, Hidden)
    want = jax.grad(lambda w: jnp.sum(jax.nn.sigmoid(x.array @ w)))(w.array)
    np.testing.assert_allclose(g.array, want, rtol=1e-5)


def test_raw_vmap_over_a_plain_array_with_a_shared_tensor() -> None:
    w = ax.tensor(data(3, 2), Pixel, Hidden)
    scales = jnp.array([1.0, 2.0, 3.0])

    def f(s: Any, w: Any) -> Any:
        return ax.sum(w * s, (Pixel, Hidden)).array

    out = jax.vmap(f, in_axes=(0, None))(scales, w)
    np.testing.assert_allclose(out, np.asarray(scales) * w.array.sum(), rtol=1e-6)


def test_raw_vmap_outputs_are_stacked_and_ops_refuse_them_until_named() -> None:
    ys = jax.vmap(lambda s: ax.ones((2,), Batch) * s)(jnp.arange(3.0))
    assert ys.axes == (Batch,) and ys.array.shape == (3, 2)
    assert repr(ys) == (
        "Tensor[F32, Batch](stacked: array of shape (3, 2), 1 unnamed leading dimension (3,))"
    )
    with pytest.raises(TypeError, match=r"^Cannot apply Exp to Tensor\[F32, Batch\]: stacked"):
        ax.exp(ys)
    named = ax.tensor(ys.array, Time, *ys.axes)
    assert named.sizes == {Time: 3, Batch: 2}


def test_lax_scan_with_tensor_carry_and_stacked_tensor_xs() -> None:
    steps = [ax.tensor(data(2, 3, seed=i), Batch, Pixel) for i in range(4)]
    xs = {"x": jax.tree.map(lambda *a: jnp.stack(a), *steps), "k": jnp.arange(4.0)}
    w = ax.tensor(data(3, 3, seed=9), Pixel, Hidden)

    def run(w: Any) -> Any:
        def body(h: Any, inp: Any) -> tuple[Any, Any]:
            z = ax.rename(inp["x"] @ w, Hidden, Pixel)
            h = ax.tanh(h + z * inp["k"])  # a rank-0 array slice mixes like a number
            return h, ax.sum(h, Pixel)

        return jax.lax.scan(body, ax.zeros((2, 3), Batch, Pixel), xs)

    h, ys = jax.jit(run)(w)
    assert h.axes == (Batch, Pixel) and ys.axes == (Batch,) and ys.array.shape == (4, 2)
    ref = np.zeros((2, 3), np.float32)
    for i, s in enumerate(steps):
        ref = np.tanh(ref + (s.array @ w.array) * i)
    np.testing.assert_allclose(h.array, ref, rtol=1e-5, atol=1e-6)

    g = jax.grad(lambda w: ax.sum(run(w)[0], (Batch, Pixel)).array)(w)
    assert g.axes == (Pixel, Hidden) and np.all(np.isfinite(g.array)) and np.any(g.array != 0)


def test_eqx_filter_jit_with_tensors_and_static_values() -> None:
    @eqx.filter_jit
    def f(x: Any, axis: type[ax.Axis], scale: float) -> Any:
        return ax.sum(x, axis) * scale

    x = ax.tensor(data(2, 3), Batch, Pixel)
    y = f(x, Pixel, 2.0)
    assert y.axes == (Batch,)
    np.testing.assert_allclose(y.array, 2 * x.array.sum(1), rtol=1e-6)


class Affine(eqx.Module):
    w: ax.Tensor[ax.F32, Pixel, Hidden]
    b: ax.Tensor[ax.F32, Hidden]

    def __call__(self, x: ax.Tensor[ax.F32, Batch, Pixel]) -> ax.Tensor[ax.F32, Batch, Hidden]:
        return x @ self.w + ax.broadcast(self.b, (Batch, Hidden), sizes={Batch: x.size(Batch)})


def test_equinox_module_with_tensor_fields_trains_with_optax_adam() -> None:
    model = Affine(ax.tensor(data(3, 2) * 0.1, Pixel, Hidden), ax.zeros((2,), Hidden))
    x = ax.tensor(data(8, 3, seed=1), Batch, Pixel)
    y = ax.tensor(data(8, 2, seed=2), Batch, Hidden)
    opt = optax.adam(0.05)
    state = opt.init(eqx.filter(model, eqx.is_array))

    def loss(m: Affine) -> Any:
        return ax.mean(ax.sum(ax.square(m(x) - y), Hidden), Batch)

    @eqx.filter_jit
    def step(m: Affine, s: Any) -> tuple[Affine, Any, Any]:
        value, grads = ax.value_and_grad(loss)(m)
        assert isinstance(grads.w, ax.Tensor) and grads.w.axes == (Pixel, Hidden)
        updates, s = opt.update(grads, s, m)
        return eqx.apply_updates(m, updates), s, value

    first = None
    for _ in range(30):
        model, state, value = step(model, state)
        first = value if first is None else first
    assert model.w.axes == (Pixel, Hidden) and model.b.axes == (Hidden,)
    assert float(loss(model)) < 0.7 * float(first)
    assert not np.allclose(model.b.array, 0)


def test_a_jitted_function_traces_once_per_axes_and_sizes() -> None:
    traces: list[tuple[Any, ...]] = []

    @jax.jit
    def f(x: Any, w: Any) -> Any:
        traces.append(x.axes)
        return ax.relu(x @ w)

    w = ax.tensor(data(3, 2), Pixel, Hidden)
    for seed in range(3):
        f(ax.tensor(data(4, 3, seed=seed), Batch, Pixel), w)
    assert len(traces) == 1  # same axes and sizes: compiled once
    f(ax.tensor(data(5, 3), Batch, Pixel), w)
    assert len(traces) == 2  # a new size
    f(ax.tensor(data(4, 3), Time, Pixel), w)
    assert len(traces) == 3  # same shape, a new axis label
    f(ax.tensor(data(4, 3, seed=7), Batch, Pixel), w)
    assert len(traces) == 3  # back to the first: cached


def test_repr_shows_type_sizes_and_a_summary() -> None:
    assert repr(ax.ones((2,), Batch)) == "Tensor[F32, Batch=2]([1., 1.])"
    big = ax.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4), Batch, Pixel)
    assert repr(big) == "Tensor[F32, Batch=3, Pixel=4](mean=5.5, std=3.452, min=0, max=11)"
    assert (
        repr(ax.tensor(np.arange(8, dtype=np.int32), Time)) == "Tensor[I32, Time=8](min=0, max=7)"
    )
    assert repr(ax.zeros((8,), Time, dtype=ax.Bool)) == "Tensor[Bool, Time=8](true=0/8)"
    assert repr(ax.tensor(np.float32(2.5))) == "Tensor[F32](2.5)"
    seen = []
    jax.jit(lambda t: seen.append(repr(t)) or t)(big)
    assert seen == ["Tensor[F32, Batch=3, Pixel=4](traced)"]


def test_html_repr_has_the_axes_table_and_a_preview() -> None:
    t = ax.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3), Batch, Pixel)
    page = t._repr_html_()
    assert "<code>Tensor[F32, Batch=2, Pixel=3]</code>" in page
    assert "<tr><th>axis</th><th>size</th></tr>" in page
    assert (
        "<tr><td><b>Batch</b></td><td>2</td></tr><tr><td><b>Pixel</b></td><td>3</td></tr>" in page
    )
    assert (
        "<tr><th>Batch ↓ Pixel →</th><th>0</th><th>1</th><th>2</th></tr>"
        "<tr><th>0</th><td>0</td><td>1</td><td>2</td></tr>"
        "<tr><th>1</th><td>3</td><td>4</td><td>5</td></tr>"
    ) in page
    assert "<small>[[0., 1., 2.],\n [3., 4., 5.]]</small>" in page
    assert "mean=5.5" in ax.tensor(np.arange(12.0).reshape(3, 4), Batch, Pixel)._repr_html_()
    deep = ax.zeros((2, 2, 2), Batch, Pixel, Hidden)._repr_html_()
    assert "<caption>Batch=0 of 2</caption>" in deep and "<td><b>Hidden</b></td><td>2</td>" in deep


def test_a_tensor_never_holds_the_same_axis_twice() -> None:
    x = ax.zeros((2, 3), Batch, Pixel)
    attempts = [
        lambda: ax.tensor(np.zeros((2, 2)), Batch, Batch),
        lambda: ax.rename(x, Batch, Pixel),
        lambda: ax.expand_dims(x, Pixel),
        lambda: ax.stack([x], Batch),
        lambda: ax.unflatten(x, Pixel, (Batch, Hidden), (3, 1)),
        lambda: ax.flatten(ax.zeros((2, 3, 1), Batch, Pixel, Hidden), (Batch, Pixel), Hidden),
        lambda: ax.one_hot(ax.zeros((2,), Batch, dtype=ax.I32), Batch, 3),
        lambda: ax.take(x, Pixel, ax.zeros((4,), Batch, dtype=ax.I32)),
        lambda: x @ ax.zeros((3, 2), Pixel, Batch),
        lambda: ax.broadcast(x, (Batch, Batch, Pixel)),
    ]
    for attempt in attempts:
        with pytest.raises(TypeError, match="twice|already present"):
            attempt()
