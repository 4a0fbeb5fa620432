"""``ax.grad``, ``ax.value_and_grad`` and ``ax.vmap(f, over=Axis)``."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from tests.axes import Batch, Hidden, Pixel


def data(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


X = ax.tensor(data(4, 3), Batch, Pixel)
W = ax.tensor(data(3, 2, seed=1), Pixel, Hidden)


def loss(w: Any, x: Any) -> Any:
    return ax.mean(ax.sum(ax.tanh(x @ w), Hidden), Batch)


def loss_raw(w: Any, x: Any) -> Any:
    return jnp.mean(jnp.sum(jnp.tanh(x @ w), 1))


#: two float32 programs of the same gradient sum in other orders: an entry near 0 (-0.0059
#: among entries up to 0.15) differs by one ulp of the larger terms (6e-8), beyond rtol alone
GRAD_TOL = {"rtol": 1e-5, "atol": 1e-6}


def test_grad_matches_jax_and_keeps_axes() -> None:
    g = ax.grad(loss)(W, X)
    assert isinstance(g, ax.Tensor) and g.axes == (Pixel, Hidden)
    np.testing.assert_allclose(g.array, jax.grad(loss_raw)(W.array, X.array), **GRAD_TOL)


def test_value_and_grad_returns_a_scalar_tensor() -> None:
    value, g = ax.value_and_grad(loss)(W, X)
    assert isinstance(value, ax.Tensor) and value.axes == ()
    np.testing.assert_allclose(float(value), loss_raw(W.array, X.array), rtol=1e-6)
    assert g.axes == (Pixel, Hidden)


def test_the_quoted_jax_grad_of_a_tensor_loss_and_ax_grad() -> None:
    """Issue 33: ``jax.grad`` of a function returning a 0-axis Tensor fails with JAX's own
    check (no hook changes it); ``ax.grad`` takes the Tensor loss."""
    with pytest.raises(
        TypeError,
        match=r"Gradient only defined for scalar-output functions\. "
        r"Output was Tensor\[F32\]",
    ):
        jax.grad(loss)(W, X)
    assert ax.grad(loss)(W, X).axes == (Pixel, Hidden)


def test_argnums_tuple() -> None:
    gw, gx = ax.grad(loss, argnums=(0, 1))(W, X)
    assert gw.axes == (Pixel, Hidden) and gx.axes == (Batch, Pixel)
    rw, rx = jax.grad(loss_raw, argnums=(0, 1))(W.array, X.array)
    np.testing.assert_allclose(gw.array, rw, **GRAD_TOL)
    np.testing.assert_allclose(gx.array, rx, **GRAD_TOL)
    (_, (gw2, gx2)) = ax.value_and_grad(loss, argnums=(0, 1))(W, X)
    np.testing.assert_allclose(gx2.array, rx, **GRAD_TOL)


def test_has_aux() -> None:
    def with_aux(w: Any, x: Any) -> tuple[Any, dict[str, Any]]:
        h = x @ w
        return ax.sum(ax.square(h), (Batch, Hidden)), {"h": h, "n": 3}

    g, aux = ax.grad(with_aux, has_aux=True)(W, X)
    assert g.axes == (Pixel, Hidden) and aux["h"].axes == (Batch, Hidden) and aux["n"] == 3
    (value, aux2), g2 = ax.value_and_grad(with_aux, has_aux=True)(W, X)
    assert value.axes == () and aux2["h"].axes == (Batch, Hidden)
    np.testing.assert_allclose(g2.array, g.array, rtol=1e-6)
    want = jax.grad(lambda w: jnp.sum(jnp.square(X.array @ w)))(W.array)
    np.testing.assert_allclose(g.array, want, **GRAD_TOL)


def test_grad_of_a_function_returning_an_array_and_pytree_arguments() -> None:
    params = {"w": W, "scale": jnp.float32(2.0)}
    g = ax.grad(lambda p: jnp.sum((X @ p["w"]).array) * p["scale"])(params)
    assert g["w"].axes == (Pixel, Hidden) and g["scale"].shape == ()


def test_grad_works_under_jit() -> None:
    g = jax.jit(ax.grad(loss))(W, X)
    np.testing.assert_allclose(g.array, jax.grad(loss_raw)(W.array, X.array), **GRAD_TOL)


def predict(x: ax.Tensor[ax.F32, Pixel], w: ax.Tensor[ax.F32, Pixel, Hidden]) -> Any:
    """Written for one example: ``x`` has no Batch axis."""
    assert Batch not in x.axes
    return ax.softmax(ax.contract(x, w), Hidden)


@pytest.mark.parametrize("batch_first", [True, False])
def test_vmap_maps_the_named_axis_wherever_it_is(batch_first: bool) -> None:
    x = X if batch_first else ax.transpose(X, Pixel, Batch)
    y = ax.vmap(predict, over=Batch)(x, W)  # W has no Batch axis: shared
    assert y.axes == (Batch, Hidden)
    want = jax.nn.softmax(X.array @ W.array, axis=1)
    np.testing.assert_allclose(y.array, want, rtol=1e-5)


def test_vmap_puts_the_axis_at_the_requested_position() -> None:
    y = ax.vmap(predict, over=Batch, at=-1)(X, W)
    assert y.axes == (Hidden, Batch) and y.sizes == {Hidden: 2, Batch: 4}


def test_vmap_pytree_outputs_and_non_tensor_leaves() -> None:
    def stats(x: Any, scale: Any) -> dict[str, Any]:
        return {"sum": ax.sum(x, Pixel) * scale, "max": ax.max(x, Pixel), "raw": x.array[0]}

    out = ax.vmap(stats, over=Batch)(X, jnp.float32(2.0))
    assert out["sum"].axes == (Batch,) and out["max"].axes == (Batch,)
    assert out["raw"].shape == (4,)
    np.testing.assert_allclose(out["sum"].array, 2 * X.array.sum(1), rtol=1e-5)
    np.testing.assert_allclose(out["raw"], X.array[:, 0])


def test_vmap_under_grad_and_jit() -> None:
    def total(w: Any) -> Any:
        return ax.sum(ax.vmap(predict, over=Batch)(X, w), (Batch, Hidden))

    g = jax.jit(ax.grad(total))(W)
    want = jax.grad(lambda w: jnp.sum(jax.nn.softmax(X.array @ w, axis=1)))(W.array)
    assert g.axes == (Pixel, Hidden)
    np.testing.assert_allclose(g.array, want, atol=1e-6)


def test_vmap_two_mapped_arguments_with_the_axis_in_different_places() -> None:
    a = ax.tensor(data(4, 3), Batch, Pixel)
    b = ax.tensor(data(3, 4, seed=2), Pixel, Batch)
    y = ax.vmap(lambda u, v: ax.sum(u * v, Pixel), over=Batch)(a, b)
    assert y.axes == (Batch,)
    np.testing.assert_allclose(y.array, (a.array * b.array.T).sum(1), rtol=1e-5)


@pytest.mark.parametrize("at", [1, -2])
def test_vmap_at_counts_from_either_end_of_the_result(at: int) -> None:
    def outer(x: Any, w: Any) -> Any:  # [Pixel], [Pixel, Hidden] -> [Pixel, Hidden]
        return ax.broadcast(x, (Pixel, Hidden), sizes={Hidden: 2}) * w

    y = ax.vmap(outer, over=Batch, at=at)(X, W)
    assert y.axes == (Pixel, Batch, Hidden)
    np.testing.assert_allclose(y.array, np.einsum("bp,ph->pbh", X.array, W.array), rtol=1e-6)


def test_vmap_pytree_arguments_mix_mapped_shared_and_raw_leaves() -> None:
    def f(inputs: dict[str, Any]) -> tuple[Any, Any]:
        assert inputs["x"].axes == (Pixel,) and inputs["w"].axes == (Pixel, Hidden)
        y = ax.contract(inputs["x"], inputs["w"]) * inputs["scale"]
        return y, (ax.sum(inputs["x"], Pixel), jnp.sum(y.array))

    x = ax.transpose(X, Pixel, Batch)
    y, (s, raw) = ax.vmap(f, over=Batch)({"x": x, "w": W, "scale": jnp.float32(3.0)})
    assert y.axes == (Batch, Hidden) and s.axes == (Batch,) and raw.shape == (4,)
    np.testing.assert_allclose(y.array, 3 * X.array @ W.array, rtol=1e-5)
    np.testing.assert_allclose(raw, 3 * (X.array @ W.array).sum(1), rtol=1e-5)
