"""The Pool op (max/avg) and the pooling layers: lax/Equinox oracles, gradients, errors."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import axjax as ax
from tests.nn.helpers import Batch, Chan, Height, Time, Width, arr, close, rand
from tests.ops.helpers import A, Arg, B, C, OpCase, check_op


def _window(
    x: jax.Array, kind: str, window: tuple[int, int], stride: tuple[int, int], padding: Any
) -> jax.Array:
    """Oracle on canonical (A, B, C) arrays, pooling over B and C."""
    pads = padding if isinstance(padding, str) else ((0, 0), *padding)
    if kind == "max":
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, *window), (1, *stride), pads)
    total = lax.reduce_window(x, 0.0, lax.add, (1, *window), (1, *stride), pads)
    return total / (window[0] * window[1])


POOL_CASES = [
    ("max", (2, 2), None, "VALID"),
    ("max", (3, 2), (1, 2), "SAME"),
    ("avg", (2, 3), (2, 1), ((1, 0), (1, 1))),
]


@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: f"{c[0]}-{c[3]}")
def test_pool_op_against_lax(case: tuple[Any, ...]) -> None:
    kind, window, stride, padding = case
    fn = ax.max_pool if kind == "max" else ax.avg_pool

    def ax_fn(x: Any) -> Any:
        return fn(x, (B, C), window, stride, padding)

    def oracle(x: jax.Array) -> jax.Array:
        return _window(x, kind, window, stride or window, padding)

    check_op(
        OpCase(
            "Pool",
            ax_fn,
            oracle,
            (Arg((A, B, C), "spaced"),),
            (A, B, C),
            sizes={B: 5, C: 4},
            hessian=padding == "VALID",
            id=f"{kind} pool",
        ),
        max_examples=2,
    )


def test_pool_layers_match_equinox() -> None:
    x = rand((2, 3, 7, 6), Batch, Chan, Height, Width)
    for ours, theirs in [
        (ax.nn.MaxPool2D((Height, Width), 2), eqx.nn.MaxPool2d(2, 2)),
        (
            ax.nn.AvgPool2D((Height, Width), 3, stride=1, padding=1),
            eqx.nn.AvgPool2d(3, 1, padding=1),
        ),
    ]:
        y = ours(x)
        assert y.axes == x.axes
        close(y.array, jax.vmap(theirs)(x.array), 1e-6)
        y_last = ours(ax.transpose(x, Batch, Height, Width, Chan))
        close(arr(y_last, *x.axes), y.array, 1e-6)
    seq = rand((2, 9, 3), Batch, Time, Chan)
    close(
        arr(ax.nn.MaxPool1D(Time, 3)(seq), Batch, Chan, Time),
        jax.vmap(eqx.nn.MaxPool1d(3, 3))(arr(seq, Batch, Chan, Time)),
        1e-6,
    )
    close(
        arr(ax.nn.AvgPool1D(Time, 2, stride=1)(seq), Batch, Chan, Time),
        jax.vmap(eqx.nn.AvgPool1d(2, 1))(arr(seq, Batch, Chan, Time)),
        1e-6,
    )


def test_global_pooling_removes_the_axes() -> None:
    x = rand((2, 4, 5, 3), Batch, Height, Width, Chan)
    gmax = ax.nn.GlobalMaxPool((Height, Width))(x)
    gavg = ax.nn.GlobalAvgPool((Height, Width))(x)
    assert gmax.axes == gavg.axes == (Batch, Chan)
    close(gmax.array, np.asarray(x.array).max(axis=(1, 2)))
    close(gavg.array, np.asarray(x.array).mean(axis=(1, 2)), 1e-6)


def test_max_pool_gradient_goes_to_the_maximum() -> None:
    x = ax.tensor(np.arange(16, dtype=np.float32).reshape(4, 4), Height, Width)
    g = ax.grad(lambda t: ax.sum(ax.max_pool(t, (Height, Width), 2), (Height, Width)))(x)
    want = np.zeros((4, 4), np.float32)
    want[1::2, 1::2] = 1.0
    np.testing.assert_array_equal(np.asarray(g.array), want)


def test_pool_gradients_under_jit_match_lax() -> None:
    x = rand((2, 6, 5, 3), Batch, Height, Width, Chan)
    for kind, fn in (("max", ax.max_pool), ("avg", ax.avg_pool)):

        def ours(a: jax.Array, fn: Any = fn) -> jax.Array:
            y = fn(ax.tensor(a, Batch, Height, Width, Chan), (Height, Width), 2, 1, "SAME")
            return jnp.sum(jnp.sin(y.array))

        def oracle(a: jax.Array, kind: str = kind) -> jax.Array:
            init, op = (-jnp.inf, lax.max) if kind == "max" else (0.0, lax.add)
            y = lax.reduce_window(
                a, init, op, (1, 2, 2, 1), (1, 1, 1, 1), ((0, 0), (0, 1), (0, 1), (0, 0))
            )
            return jnp.sum(jnp.sin(y if kind == "max" else y / 4))

        close(jax.jit(jax.grad(ours))(x.array), jax.jit(jax.grad(oracle))(x.array), 1e-5)


def test_pool_errors() -> None:
    x = ax.zeros((2, 3, 3), Batch, Height, Width)
    with pytest.raises(
        ax.AxisError,
        match=r"Cannot apply MaxPool\(Height, Time, "
        r"window=\(2, 2\)\) to Tensor\[F32, Batch=2, Height=3, Width=3\]: Time "
        r"is not an axis of the tensor",
    ):
        ax.max_pool(x, (Height, Time), 2)
    with pytest.raises(
        ax.AxisError,
        match=r"the window \(4\) is larger than the padded "
        r"Height axis \(size 3\)",
    ):
        ax.nn.AvgPool2D((Height, Width), 4)(x)
    with pytest.raises(ax.AxisError, match=r"needs floating-point values, got I32"):
        ax.max_pool(ax.zeros((2, 4), Batch, Height, dtype=ax.I32), Height, 2)
    with pytest.raises(ValueError, match=r"window must be a positive int or 2 positive ints"):
        ax.max_pool(x, (Height, Width), (2, 2, 2))
