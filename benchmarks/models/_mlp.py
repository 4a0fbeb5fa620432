"""The paper's MNIST MLP 784-300-100-10 (ReLU, softmax cross-entropy, Adam 1e-3), per framework.

Weights are ``W[out, in]`` and ``b[out]``, drawn once in numpy; every framework copies
them (raw JAX stores ``W.T``, the layout a JAX user writes ``x @ W`` with).
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
from axjax.train import Batch, Class, Pixel

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

NAME = "mlp"
TITLE = "MLP 784-300-100-10"
SIZES = (784, 300, 100, 10)


@final
class Hidden1(ax.Axis):
    """The first hidden layer (300)."""


@final
class Hidden2(ax.Axis):
    """The second hidden layer (100)."""


def init(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for i, (n, m) in enumerate(zip(SIZES, SIZES[1:], strict=False)):
        out[f"w{i}"] = uniform(rng, (m, n), n)
        out[f"b{i}"] = uniform(rng, (m,), n)
    return out


def flat(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x.reshape(len(x), -1), y


# ----------------------------------------------------------------------------- raw JAX
def raw_forward(params: Any, x: Any) -> Any:
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def raw_loss(params: Any, x: Any, y: Any) -> Any:
    return optax.softmax_cross_entropy_with_integer_labels(raw_forward(params, x), y).mean()


def build_jax(p: dict[str, np.ndarray]) -> Runner:
    params = [(jnp.asarray(p[f"w{i}"].T), jnp.asarray(p[f"b{i}"])) for i in range(3)]
    return jit_train_step(raw_loss, params, lambda x, y: put_jax(*flat(x, y)))


# ----------------------------------------------------------------------------- expert JAX
def expert_loss(xent: Any, params: Any, x: Any, y: Any) -> Any:
    """Weights stored ``W[out, in]`` as axjax's modules store them (``x @ W.T``: one
    ``dot_general``, no transposed copy), ``jax.nn.relu``, the given optax loss."""
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w.T + b)
    w, b = params[-1]
    return xent(x @ w.T + b, y)


def _expert(p: dict[str, np.ndarray], xent: Any) -> Runner:
    params = [(jnp.asarray(p[f"w{i}"]), jnp.asarray(p[f"b{i}"])) for i in range(3)]
    return jit_train_step(
        functools.partial(expert_loss, xent), params, lambda x, y: put_jax(*flat(x, y))
    )


def build_expert(p: dict[str, np.ndarray]) -> Runner:
    return _expert(p, onehot_xent)


def build_expert_int(p: dict[str, np.ndarray]) -> Runner:
    return _expert(p, int_xent)


# ----------------------------------------------------------------------------- axjax
def axjax_model(p: dict[str, np.ndarray]) -> ax.nn.MLP[Pixel, Class]:
    model = ax.nn.MLP(
        Pixel, Class, 784, 10, hidden={Hidden1: 300, Hidden2: 100}, key=jax.random.key(0)
    )
    axes = [(Hidden1, Pixel), (Hidden2, Hidden1), (Class, Hidden2)]
    layers = tuple(
        eqx.tree_at(
            lambda lay: (lay.weight, lay.bias),
            layer,
            (ax.tensor(p[f"w{i}"], *axes[i]), ax.tensor(p[f"b{i}"], axes[i][0])),
        )
        for i, layer in enumerate(model.layers)
    )
    return eqx.tree_at(lambda m: m.layers, model, layers)


def axjax_loss(model: Any, x: Any, y: Any) -> Any:
    return ax.mean(ax.train.softmax_cross_entropy(model(x), y, Class), Batch)


def put_axjax(x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
    x, y = flat(x, y)
    return ax.tensor(x, Batch, Pixel), ax.tensor(y, Batch)


def build_axjax(p: dict[str, np.ndarray]) -> Runner:
    return train_step_runner(axjax_model(p), axjax_loss, put_axjax)


def build_axjax_jit(p: dict[str, np.ndarray]) -> Runner:
    """axjax modules under the user's own ``jax.jit`` (the cost of Equinox modules as
    arguments: their Python flatten and unflatten on every call)."""
    return jit_train_step(
        lambda m, x, y: axjax_loss(m, x, y).array, axjax_model(p), put_axjax, split=True
    )


def build_fit(p: dict[str, np.ndarray]) -> Runner:
    return fit_runner(axjax_model(p), axjax_loss, put_axjax)


def build_graph(p: dict[str, np.ndarray]) -> Runner:
    x = ax.Input(ax.F32, Batch, Pixel, sizes={Pixel: 784}, name="x")
    y = ax.Input(ax.I32, Batch, name="y")
    return graph_runner(axjax_model(p), lambda m: axjax_loss(m, x, y), [x, y], put_axjax)


# ----------------------------------------------------------------------------- Equinox
class EqxMLP(eqx.Module):
    layers: list[eqx.nn.Linear]

    def __init__(self, p: dict[str, np.ndarray]) -> None:
        keys = jax.random.split(jax.random.key(0), 3)
        self.layers = [
            eqx.nn.Linear(n, m, key=k) for n, m, k in zip(SIZES, SIZES[1:], keys, strict=False)
        ]
        for i in range(3):
            self.layers[i] = eqx.tree_at(
                lambda lay: (lay.weight, lay.bias),
                self.layers[i],
                (jnp.asarray(p[f"w{i}"]), jnp.asarray(p[f"b{i}"])),
            )

    def __call__(self, x: Any) -> Any:
        for layer in self.layers[:-1]:
            x = jax.nn.relu(layer(x))
        return self.layers[-1](x)


def eqx_loss(model: Any, x: Any, y: Any) -> Any:
    logits = jax.vmap(model)(x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def build_equinox(p: dict[str, np.ndarray]) -> Runner:
    return eqx_runner(EqxMLP(p), eqx_loss, lambda x, y: put_jax(*flat(x, y)))


# ----------------------------------------------------------------------------- Haliax
def build_haliax(p: dict[str, np.ndarray]) -> Runner:
    import haliax as hax
    import haliax.nn as hnn

    axes = [hax.Axis(n, s) for n, s in zip(("in", "h1", "h2", "out"), SIZES, strict=True)]
    out = axes[-1]

    class HaxMLP(eqx.Module):
        layers: list[Any]

        def __call__(self, x: Any) -> Any:
            for layer in self.layers[:-1]:
                x = hnn.relu(layer(x))
            return self.layers[-1](x)

    layers = []
    for i in range(3):
        lin = hnn.Linear.init(axes[i], axes[i + 1], key=jax.random.key(i))
        lin = eqx.tree_at(
            lambda lay: (lay.weight, lay.bias),
            lin,
            (
                hax.named(jnp.asarray(p[f"w{i}"]), (axes[i + 1], axes[i])),
                hax.named(jnp.asarray(p[f"b{i}"]), (axes[i + 1],)),
            ),
        )
        layers.append(lin)

    def loss(model: Any, x: Any, y: Any) -> Any:
        logits = model(x)
        target = hnn.one_hot(y, out, dtype=jnp.float32)
        return hnn.cross_entropy_loss(logits, out, target, reduction=hax.mean).scalar()

    def put(x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
        x, y = flat(x, y)
        b = hax.Axis("batch", len(x))
        return hax.named(jnp.asarray(x), (b, axes[0])), hax.named(jnp.asarray(y), (b,))

    return eqx_runner(HaxMLP(layers), loss, put)


# ----------------------------------------------------------------------------- PyTorch
def build_torch(p: dict[str, np.ndarray]) -> Runner:
    import torch

    layers: list[Any] = []
    for i, (n, m) in enumerate(zip(SIZES, SIZES[1:], strict=False)):
        lin = torch.nn.Linear(n, m)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(p[f"w{i}"]))
            lin.bias.copy_(torch.from_numpy(p[f"b{i}"]))
        layers += [lin, torch.nn.ReLU()] if i < 2 else [lin]
    model = torch.nn.Sequential(*layers)
    return torch_runner(model, lambda x, y: flat(x, y), LR)
