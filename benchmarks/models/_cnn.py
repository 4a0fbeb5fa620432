"""A LeNet-style CNN on MNIST: conv 5x5 1->8, ReLU, max-pool 2, conv 5x5 8->16, ReLU,
max-pool 2, dense 256->10; softmax cross-entropy, Adam 1e-3. Per framework.

Kernels are ``OIHW`` (PyTorch, Equinox and axjax's layout). Raw JAX and axjax keep the
activations channels-last (``[Batch, Height, Width, Feature]``, no transposes) and flatten
``(Height, Width, Feature)``; Equinox and PyTorch are channels-first and flatten
``(Feature, Height, Width)``: the dense weight is permuted once to match.
"""

from __future__ import annotations

import functools
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import axjax as ax
from axjax.train import Batch, Class, Height, Width

from .._common import LR, Runner, jit_train_step, uniform
from ._frameworks import (
    eqx_runner,
    fit_runner,
    graph_runner,
    int_xent,
    onehot_xent,
    put_jax,
    torch_runner,
    train_step_runner,
)

NAME = "cnn"
TITLE = "CNN conv8-conv16-dense (LeNet-style)"


@final
class Chan(ax.Axis):
    """Input channels (1)."""


@final
class Feature1(ax.Axis):
    """Channels of the first convolution (8)."""


@final
class Feature2(ax.Axis):
    """Channels of the second convolution (16)."""


@final
class Flat(ax.Axis):
    """The flattened feature maps (4 * 4 * 16 = 256)."""


def init(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "k1": uniform(rng, (8, 1, 5, 5), 25),
        "c1": uniform(rng, (8,), 25),
        "k2": uniform(rng, (16, 8, 5, 5), 200),
        "c2": uniform(rng, (16,), 200),
        "w": uniform(rng, (10, 256), 256),
        "b": uniform(rng, (10,), 256),
    }


def _dense_hwc(w: np.ndarray) -> np.ndarray:
    """The dense weight's columns from ``(Feature, H, W)`` to ``(H, W, Feature)`` order."""
    return np.ascontiguousarray(w.reshape(10, 16, 4, 4).transpose(0, 2, 3, 1).reshape(10, 256))


# ----------------------------------------------------------------------------- raw JAX
def _conv(x: Any, k: Any, b: Any) -> Any:
    y = jax.lax.conv_general_dilated(
        x, k, (1, 1), "VALID", dimension_numbers=("NHWC", "OIHW", "NHWC")
    )
    return jax.nn.relu(y + b)


def _pool(x: Any) -> Any:
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def raw_loss(p: Any, x: Any, y: Any) -> Any:
    h = _pool(_conv(x[..., None], p["k1"], p["c1"]))
    h = _pool(_conv(h, p["k2"], p["c2"]))
    logits = h.reshape(h.shape[0], -1) @ p["w"] + p["b"]
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def build_jax(p: dict[str, np.ndarray]) -> Runner:
    params = {k: jnp.asarray(v) for k, v in p.items()}
    params["w"] = jnp.asarray(_dense_hwc(p["w"]).T)
    return jit_train_step(raw_loss, params, put_jax)


# ----------------------------------------------------------------------------- expert JAX
def expert_loss(xent: Any, p: Any, x: Any, y: Any) -> Any:
    """:func:`raw_loss` with the dense weight stored ``[Class, Flat]`` as axjax stores it
    (``h @ w.T``) and the given optax loss."""
    h = _pool(_conv(x[..., None], p["k1"], p["c1"]))
    h = _pool(_conv(h, p["k2"], p["c2"]))
    return xent(h.reshape(h.shape[0], -1) @ p["w"].T + p["b"], y)


def _expert(p: dict[str, np.ndarray], xent: Any) -> Runner:
    params = {k: jnp.asarray(v) for k, v in p.items()}
    params["w"] = jnp.asarray(_dense_hwc(p["w"]))
    return jit_train_step(functools.partial(expert_loss, xent), params, put_jax)


def build_expert(p: dict[str, np.ndarray]) -> Runner:
    return _expert(p, onehot_xent)


def build_expert_int(p: dict[str, np.ndarray]) -> Runner:
    return _expert(p, int_xent)


# ----------------------------------------------------------------------------- axjax
class AxCNN(eqx.Module):
    conv1: ax.nn.Conv2D
    conv2: ax.nn.Conv2D
    pool: ax.nn.MaxPool2D
    dense: ax.nn.Affine[Flat, Class]

    def __init__(self, p: dict[str, np.ndarray]) -> None:
        k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
        hw = (Height, Width)
        conv1 = ax.nn.Conv2D(hw, Chan, Feature1, 1, 8, 5, key=k1)
        conv2 = ax.nn.Conv2D(hw, Feature1, Feature2, 8, 16, 5, key=k2)
        dense = ax.nn.Affine(Flat, Class, 256, 10, key=k3)
        self.conv1 = _set(
            conv1, ax.tensor(p["k1"], Feature1, Chan, *hw), ax.tensor(p["c1"], Feature1)
        )
        self.conv2 = _set(
            conv2, ax.tensor(p["k2"], Feature2, Feature1, *hw), ax.tensor(p["c2"], Feature2)
        )
        self.dense = _set(
            dense, ax.tensor(_dense_hwc(p["w"]), Class, Flat), ax.tensor(p["b"], Class)
        )
        self.pool = ax.nn.MaxPool2D(hw, 2)

    def __call__(self, x: Any) -> Any:
        h = ax.expand_dims(x, Chan, at=-1)  # [Batch, Height, Width, Chan]
        h = self.pool(ax.relu(self.conv1(h)))  # [Batch, 12, 12, Feature1]
        h = self.pool(ax.relu(self.conv2(h)))  # [Batch, 4, 4, Feature2]
        return self.dense(ax.flatten(h, (Height, Width, Feature2), Flat))


def _set(layer: Any, weight: Any, bias: Any) -> Any:
    return eqx.tree_at(lambda m: (m.weight, m.bias), layer, (weight, bias))


def axjax_loss(model: Any, x: Any, y: Any) -> Any:
    return ax.mean(ax.train.softmax_cross_entropy(model(x), y, Class), Batch)


def put_axjax(x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
    return ax.tensor(x, Batch, Height, Width), ax.tensor(y, Batch)


def build_axjax(p: dict[str, np.ndarray]) -> Runner:
    return train_step_runner(AxCNN(p), axjax_loss, put_axjax)


def build_axjax_jit(p: dict[str, np.ndarray]) -> Runner:
    """axjax modules under the user's own ``jax.jit`` (the cost of Equinox modules as
    arguments: their Python flatten and unflatten on every call)."""
    return jit_train_step(
        lambda m, x, y: axjax_loss(m, x, y).array, AxCNN(p), put_axjax, split=True
    )


def build_fit(p: dict[str, np.ndarray]) -> Runner:
    return fit_runner(AxCNN(p), axjax_loss, put_axjax)


def build_graph(p: dict[str, np.ndarray]) -> Runner:
    x = ax.Input(ax.F32, Batch, Height, Width, sizes={Height: 28, Width: 28}, name="x")
    y = ax.Input(ax.I32, Batch, name="y")
    return graph_runner(AxCNN(p), lambda m: axjax_loss(m, x, y), [x, y], put_axjax)


# ----------------------------------------------------------------------------- Equinox
class EqxCNN(eqx.Module):
    conv1: eqx.nn.Conv2d
    conv2: eqx.nn.Conv2d
    pool: eqx.nn.MaxPool2d
    dense: eqx.nn.Linear

    def __init__(self, p: dict[str, np.ndarray]) -> None:
        k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
        c1, c2 = eqx.nn.Conv2d(1, 8, 5, key=k1), eqx.nn.Conv2d(8, 16, 5, key=k2)
        dense = eqx.nn.Linear(256, 10, key=k3)
        a = jnp.asarray
        self.conv1 = _set(c1, a(p["k1"]), a(p["c1"])[:, None, None])
        self.conv2 = _set(c2, a(p["k2"]), a(p["c2"])[:, None, None])
        self.dense = _set(dense, a(p["w"]), a(p["b"]))
        self.pool = eqx.nn.MaxPool2d(2, 2)

    def __call__(self, x: Any) -> Any:
        h = self.pool(jax.nn.relu(self.conv1(x[None])))
        h = self.pool(jax.nn.relu(self.conv2(h)))
        return self.dense(h.reshape(-1))


def eqx_loss(model: Any, x: Any, y: Any) -> Any:
    return optax.softmax_cross_entropy_with_integer_labels(jax.vmap(model)(x), y).mean()


def build_equinox(p: dict[str, np.ndarray]) -> Runner:
    return eqx_runner(EqxCNN(p), eqx_loss, put_jax)


# ----------------------------------------------------------------------------- PyTorch
def build_torch(p: dict[str, np.ndarray]) -> Runner:
    import torch

    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(1, 8, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(256, 10),
    )
    with torch.no_grad():
        for i, (k, b) in ((0, ("k1", "c1")), (3, ("k2", "c2")), (7, ("w", "b"))):
            model[i].weight.copy_(torch.from_numpy(p[k]))
            model[i].bias.copy_(torch.from_numpy(p[b]))
    return torch_runner(model, lambda x, y: (x[:, None], y), LR)


# ----------------------------------------------------------------------------- Haliax
def build_haliax(p: dict[str, np.ndarray]) -> Runner:
    import haliax as hax
    import haliax.nn as hnn

    Ax = hax.Axis
    h, w, c, f1, f2 = Ax("h", 28), Ax("w", 28), Ax("c", 1), Ax("f1", 8), Ax("f2", 16)
    flat, out = Ax("flat", 256), Ax("out", 10)
    window = (Ax("h", 2), Ax("w", 2))
    kernel = (Ax("h", 5), Ax("w", 5))
    a = jnp.asarray
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    conv1 = _set(
        hnn.Conv.init((h, w), c, f1, 5, key=k1),
        hax.named(a(p["k1"]), (f1, c, *kernel)),
        hax.named(a(p["c1"]), (f1,)),
    )
    conv2 = _set(
        hnn.Conv.init((h, w), f1, f2, 5, key=k2),
        hax.named(a(p["k2"]), (f2, f1, *kernel)),
        hax.named(a(p["c2"]), (f2,)),
    )
    dense = _set(
        hnn.Linear.init(flat, out, key=k3),
        hax.named(a(_dense_hwc(p["w"])), (out, flat)),
        hax.named(a(p["b"]), (out,)),
    )

    class HaxCNN(eqx.Module):
        conv1: Any
        conv2: Any
        dense: Any

        def __call__(self, x: Any) -> Any:
            x = hnn.max_pool(window, hnn.relu(self.conv1(x)), stride=2)
            x = hnn.max_pool(window, hnn.relu(self.conv2(x)), stride=2)
            return self.dense(hax.flatten_axes(x, ("h", "w", "f2"), flat))

    def loss(model: Any, x: Any, y: Any) -> Any:
        target = hnn.one_hot(y, out, dtype=jnp.float32)
        return hnn.cross_entropy_loss(model(x), out, target, reduction=hax.mean).scalar()

    def put(x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
        b = Ax("batch", len(x))
        return hax.named(a(x[..., None]), (b, h, w, c)), hax.named(a(y), (b,))

    return eqx_runner(HaxCNN(conv1, conv2, dense), loss, put)
