"""The Conv op and the Conv layers: lax/Equinox oracles, gradients, layouts, errors."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.test_util import check_grads

import axjax as ax
from tests.nn.helpers import Batch, Chan, Extra, Feature, Height, Time, Width, arr, close, rand

CASES = [  # (stride, padding, dilation, groups) against lax.conv_general_dilated
    (1, "VALID", 1, 1),
    (2, "SAME", 1, 1),
    ((1, 2), ((1, 0), (2, 1)), 1, 1),
    (1, 1, (2, 1), 1),
    (2, "SAME", 1, 2),
]


def _oracle(
    x: jax.Array, w: jax.Array, stride: Any, padding: Any, dilation: Any, groups: int
) -> jax.Array:
    """NHWC input, OIHW kernel -> NHWC output."""
    s = (stride, stride) if isinstance(stride, int) else stride
    d = (dilation, dilation) if isinstance(dilation, int) else dilation
    p = ((padding, padding),) * 2 if isinstance(padding, int) else padding
    return lax.conv_general_dilated(
        x,
        w,
        s,
        p,
        rhs_dilation=d,
        feature_group_count=groups,
        dimension_numbers=("NHWC", "OIHW", "NHWC"),
    )


def _vg(f: Any, cot: jax.Array) -> Any:
    """``(f(a, b), grad of sum(f * cot))`` in one function."""

    def both(a: jax.Array, b: jax.Array) -> tuple[jax.Array, Any]:
        y, vjp = jax.vjp(f, a, b)
        return y, vjp(cot)

    return both


@pytest.mark.parametrize("case", CASES, ids=lambda c: str(c))
def test_conv_op_matches_lax_in_every_layout(case: tuple[Any, ...], key: jax.Array) -> None:
    stride, padding, dilation, groups = case
    k1, k2, k3 = jax.random.split(key, 3)
    x = rand((2, 7, 6, 4), Batch, Height, Width, Chan, seed=1)
    w = rand((6, 4 // groups, 3, 2), Feature, Chan, Height, Width, seed=2)
    want = _oracle(x.array, w.array, stride, padding, dilation, groups)
    cot = jnp.asarray(np.random.default_rng(3).normal(size=want.shape), jnp.float32)
    layouts = [
        ((Batch, Height, Width, Chan), (Feature, Chan, Height, Width)),
        ((Chan, Batch, Width, Height), (Height, Width, Chan, Feature)),
        ((Width, Chan, Height, Batch), (Chan, Height, Feature, Width)),
    ]
    for xa, wa in layouts:
        xs, ws = ax.transpose(x, *xa), ax.transpose(w, *wa)

        def f(xv: jax.Array, wv: jax.Array, xa: Any = xa, wa: Any = wa) -> jax.Array:
            y = ax.conv(
                ax.tensor(xv, *xa),
                ax.tensor(wv, *wa),
                (Height, Width),
                stride,
                padding,
                dilation,
                groups,
            )
            assert y.axes == tuple(Feature if a is Chan else a for a in xa)
            return arr(y, Batch, Height, Width, Feature)

        y, g = jax.jit(_vg(f, cot))(xs.array, ws.array)
        close(y, want, 1e-4)
        g_ref = jax.jit(jax.grad(lambda a, b: jnp.sum(_oracle(a, b, *case) * cot), (0, 1)))(
            x.array, w.array
        )
        close(arr(ax.tensor(g[0], *xa), *x.axes), g_ref[0], 1e-4)
        close(arr(ax.tensor(g[1], *wa), *w.axes), g_ref[1], 1e-4)


def test_conv_backward_matches_finite_differences(key: jax.Array) -> None:
    k1, k2 = jax.random.split(key)
    with jax.enable_x64(True):
        x = np.random.default_rng(1).normal(size=(5, 2, 4, 3))  # Width, Batch, Height, Chan
        w = np.random.default_rng(2).normal(size=(3, 3, 2, 4))  # Height, Chan, Width, Feature

        def f(xv: jax.Array, wv: jax.Array) -> jax.Array:
            y = ax.conv(
                ax.tensor(xv, Width, Batch, Height, Chan),
                ax.tensor(wv, Height, Chan, Width, Feature),
                (Height, Width),
                stride=(2, 1),
                padding="SAME",
            )
            return jnp.sum(jnp.tanh(y.array))

        check_grads(f, (x, w), order=1, modes=["rev"])


def test_conv_layouts_lower_without_transposes(key: jax.Array) -> None:
    x = rand((2, 3, 8, 8), Batch, Chan, Height, Width, seed=3)  # NCHW
    w = rand((3, 3, 3, 4), Height, Width, Chan, Feature, seed=4)  # HWIO
    jaxpr = str(jax.make_jaxpr(lambda a, b: ax.conv(a, b, (Height, Width)).array)(x, w))
    assert "transpose" not in jaxpr and jaxpr.count("conv_general_dilated") == 1


def test_conv_merges_several_batch_axes_or_none(key: jax.Array) -> None:
    k1, k2 = jax.random.split(key)
    x = rand((2, 6, 3, 5, 4), Batch, Height, Extra, Width, Chan, seed=5)
    w = rand((2, 4, 3, 3), Feature, Chan, Height, Width, seed=6)
    y = ax.conv(x, w, (Height, Width), padding="SAME")
    assert y.axes == (Batch, Height, Extra, Width, Feature)
    for e in range(3):
        single = ax.conv(ax.index(x, Extra, e), w, (Height, Width), padding="SAME")
        close(arr(ax.index(y, Extra, e), *single.axes), single.array, 1e-5)
    one = ax.conv(ax.index(x, Batch, 0), w, (Height, Width), padding="SAME")
    close(arr(one, *ax.index(y, Batch, 0).axes), ax.index(y, Batch, 0).array, 1e-5)


def test_conv_op_errors(key: jax.Array) -> None:
    x = ax.zeros((2, 5, 5, 3), Batch, Height, Width, Chan)
    with pytest.raises(
        ax.AxisError,
        match=r"Cannot apply Conv2D\(Height, Width\) to "
        r"Tensor\[F32, Batch=2, Height=5, Width=5, Chan=3\] and "
        r"Tensor\[F32, Feature=4, Extra=3, Height=3, Width=3\]: the kernel "
        r"must share exactly one non-spatial axis",
    ):
        ax.conv(x, ax.zeros((4, 3, 3, 3), Feature, Extra, Height, Width), (Height, Width))
    with pytest.raises(ax.AxisError, match=r"spatial axis Time is not an axis of the input"):
        ax.conv(x, ax.zeros((4, 3, 3, 3), Feature, Chan, Height, Time), (Height, Time))
    with pytest.raises(
        ax.AxisError,
        match=r"the input has 3 Chan channels but the kernel "
        r"reads 2 x 1 groups",
    ):
        ax.conv(x, ax.zeros((4, 2, 3, 3), Feature, Chan, Height, Width), (Height, Width))
    with pytest.raises(
        ax.AxisError,
        match=r"the kernel \(extent 7\) is larger than the "
        r"padded Height axis \(size 5\)",
    ):
        ax.conv(
            x, ax.zeros((4, 3, 4, 3), Feature, Chan, Height, Width), (Height, Width), dilation=2
        )
    with pytest.raises(ValueError, match="padding must be 'SAME', 'VALID' or explicit"):
        ax.conv(
            x, ax.zeros((4, 3, 3, 3), Feature, Chan, Height, Width), (Height, Width), padding="FULL"
        )


def _eqx_conv(layer: ax.nn.Conv, n_spatial: int, **kw: Any) -> Any:
    n_out, n_in = layer.weight.shape[:2]
    kernel = layer.weight.shape[2:]
    ref = eqx.nn.Conv(
        n_spatial, n_in * kw.get("groups", 1), n_out, kernel, key=jax.random.key(9), **kw
    )
    return eqx.tree_at(
        lambda m: (m.weight, m.bias),
        ref,
        (layer.weight.array, layer.bias.array.reshape((n_out,) + (1,) * n_spatial)),
    )


def test_conv2d_layer_matches_equinox(key: jax.Array) -> None:
    k1, k2 = jax.random.split(key)
    layer = ax.nn.Conv2D(
        (Height, Width),
        Chan,
        Feature,
        4,
        6,
        (3, 2),
        stride=2,
        padding=1,
        dilation=(1, 2),
        groups=2,
        key=k1,
        bias_init=ax.nn.init.normal(1.0),
    )
    assert layer.weight.axes == (Feature, Chan, Height, Width)
    ref = _eqx_conv(layer, 2, stride=2, padding=1, dilation=(1, 2), groups=2)
    x = rand((2, 4, 9, 8), Batch, Chan, Height, Width, seed=7)  # channel-first
    y = layer(x)
    assert y.axes == (Batch, Feature, Height, Width)
    close(y.array, jax.vmap(ref)(x.array), 1e-4)
    y_last = layer(ax.transpose(x, Batch, Height, Width, Chan))  # channel-last
    assert y_last.axes == (Batch, Height, Width, Feature)
    close(arr(y_last, *y.axes), y.array, 1e-5)

    def loss(m: Any) -> jax.Array:
        return jnp.sum(jnp.sin(m(x).array))

    g = jax.grad(loss)(layer)
    g_ref = jax.grad(lambda m: jnp.sum(jnp.sin(jax.vmap(m)(x.array))))(ref)
    close(g.weight.array, g_ref.weight, 1e-4)
    close(g.bias.array, g_ref.bias.reshape(-1), 1e-4)


def test_conv1d_layer_matches_equinox(key: jax.Array) -> None:
    layer = ax.nn.Conv1D(Time, Chan, Feature, 3, 5, 4, padding="SAME", key=key)
    ref = _eqx_conv(layer, 1, padding="SAME")
    x = rand((10, 2, 3), Time, Batch, Chan, seed=8)
    y = layer(x)
    assert y.axes == (Time, Batch, Feature)
    close(arr(y, Batch, Feature, Time), jax.vmap(ref)(arr(x, Batch, Chan, Time)), 1e-4)


def test_conv_layer_errors(key: jax.Array) -> None:
    layer = ax.nn.Conv2D((Height, Width), Chan, Feature, 3, 4, 3, key=key)
    with pytest.raises(
        ax.AxisError,
        match=r"Cannot apply Conv2D\(\(Height, Width\), Chan -> "
        r"Feature\) to x=Tensor\[F32, Batch=1, Height=5, Width=5, Chan=2\]: axis "
        r"Chan of the input has size 2, the layer expects 3",
    ):
        layer(ax.zeros((1, 5, 5, 2), Batch, Height, Width, Chan))
    with pytest.raises(ax.AxisError, match=r"Width is not an axis of the input"):
        layer(ax.zeros((1, 5, 5, 3), Batch, Height, Time, Chan))
    with pytest.raises(
        ax.AxisError,
        match=r"the kernel \(extent 3\) is larger than the "
        r"padded Height axis \(size 2\)",
    ):
        layer(ax.zeros((1, 2, 5, 3), Batch, Height, Width, Chan))
    with pytest.raises(ax.AxisError, match=r"Conv2D: the axes \(Height, Width, Chan, Chan\)"):
        ax.nn.Conv2D((Height, Width), Chan, Chan, 3, 3, 3, key=key)
    with pytest.raises(ValueError, match="must both divide into 2 groups"):
        ax.nn.Conv2D((Height, Width), Chan, Feature, 3, 4, 3, groups=2, key=key)
    with pytest.raises(TypeError, match="Conv2D: spatial must be two axes"):
        ax.nn.Conv2D(Height, Chan, Feature, 3, 4, 3, key=key)  # type: ignore[arg-type]


def test_cnn_builds_a_graph(key: jax.Array) -> None:
    k1, k2 = jax.random.split(key)
    model = ax.nn.Sequential(
        [
            ax.nn.Conv2D((Height, Width), Chan, Feature, 1, 4, 3, padding="SAME", key=k1),
            ax.relu,
            ax.nn.MaxPool2D((Height, Width), 2),
            ax.nn.GlobalAvgPool((Height, Width)),
            ax.nn.Affine(Feature, Extra, 4, 2, key=k2),
        ]
    )
    x = ax.Input(ax.F32, Batch, Height, Width, Chan, sizes={Chan: 1}, name="images")
    y = ax.as_params(model)(x)
    assert y.axes == (Batch, Extra)
    xv = rand((2, 6, 6, 1), Batch, Height, Width, Chan, seed=9)
    close(ax.compile(y, inputs=[x])(xv).array, model(xv).array, 1e-5)
    np.testing.assert_array_equal(model(xv).shape, (2, 2))
