"""An LSTM over the 28 rows of an MNIST image (28 features each, hidden 64), then a dense
layer from the last hidden state to the 10 classes; softmax cross-entropy, Adam 1e-3.

Weights as PyTorch and Equinox lay them out: ``weight_ih [4H, In]``, ``weight_hh [4H, H]``,
one bias ``[4H]``, gates in the order input, forget, cell, output. Every framework runs
one ``lax.scan`` (PyTorch: its fused ``nn.LSTM``) whose step computes both products.
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
from axjax.train import Batch, Class

from .._common import LR, Runner, jit_train_step, uniform
from ._frameworks import (
    eqx_runner,
    fit_runner,
    int_xent,
    onehot_xent,
    put_jax,
    torch_runner,
    train_step_runner,
)

NAME = "lstm"
TITLE = "LSTM 28x28 rows, hidden 64"
HIDDEN = 64


@final
class Time(ax.Axis):
    """The image rows, read one per step (28)."""


@final
class Feat(ax.Axis):
    """The pixels of a row (28)."""


@final
class Hidden(ax.Axis):
    """The LSTM state (64)."""


def init(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    h = HIDDEN
    return {
        "wih": uniform(rng, (4 * h, 28), h),
        "whh": uniform(rng, (4 * h, h), h),
        "bias": uniform(rng, (4 * h,), h),
        "w": uniform(rng, (10, h), h),
        "b": uniform(rng, (10,), h),
    }


# ----------------------------------------------------------------------------- raw JAX
def raw_loss(p: Any, x: Any, y: Any) -> Any:
    def cell(carry: Any, xt: Any) -> tuple[Any, None]:
        h, c = carry
        z = xt @ p["wih"] + h @ p["whh"] + p["bias"]
        i, f, g, o = jnp.split(z, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        return (jax.nn.sigmoid(o) * jnp.tanh(c), c), None

    zero = jnp.zeros((x.shape[0], HIDDEN), x.dtype)
    (h, _), _ = jax.lax.scan(cell, (zero, zero), jnp.swapaxes(x, 0, 1))
    logits = h @ p["w"] + p["b"]
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def build_jax(p: dict[str, np.ndarray]) -> Runner:
    params = {k: jnp.asarray(v.T if v.ndim == 2 else v) for k, v in p.items()}
    return jit_train_step(raw_loss, params, put_jax)


# ----------------------------------------------------------------------------- expert JAX
def expert_loss(xent: Any, p: Any, x: Any, y: Any) -> Any:
    """:func:`raw_loss` (input-major weights, as axjax's ``LSTMCell`` stores them), the
    dense weight stored ``[Class, Hidden]`` as axjax stores it, the given optax loss."""

    def cell(carry: Any, xt: Any) -> tuple[Any, None]:
        h, c = carry
        z = xt @ p["wih"] + h @ p["whh"] + p["bias"]
        i, f, g, o = jnp.split(z, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        return (jax.nn.sigmoid(o) * jnp.tanh(c), c), None

    zero = jnp.zeros((x.shape[0], HIDDEN), x.dtype)
    (h, _), _ = jax.lax.scan(cell, (zero, zero), jnp.swapaxes(x, 0, 1))
    return xent(h @ p["w"].T + p["b"], y)


def _expert(p: dict[str, np.ndarray], xent: Any) -> Runner:
    params = {k: jnp.asarray(v.T if k in ("wih", "whh") else v) for k, v in p.items()}
    return jit_train_step(functools.partial(expert_loss, xent), params, put_jax)


def build_expert(p: dict[str, np.ndarray]) -> Runner:
    return _expert(p, onehot_xent)


def build_expert_int(p: dict[str, np.ndarray]) -> Runner:
    return _expert(p, int_xent)


# ----------------------------------------------------------------------------- axjax
class AxLSTM(eqx.Module):
    cell: ax.nn.LSTMCell
    dense: ax.nn.Affine[Hidden, Class]

    def __init__(self, p: dict[str, np.ndarray]) -> None:
        k1, k2 = jax.random.split(jax.random.key(0))
        gate, prev = ax.nn.Gate, ax.nn.Prev
        cell = ax.nn.LSTMCell(Feat, Hidden, 28, HIDDEN, key=k1)
        self.cell = eqx.tree_at(
            lambda c: (c.weight_ih, c.weight_hh, c.bias),
            cell,
            (
                ax.tensor(p["wih"].reshape(4, HIDDEN, 28).transpose(2, 0, 1), Feat, gate, Hidden),
                ax.tensor(
                    p["whh"].reshape(4, HIDDEN, HIDDEN).transpose(2, 0, 1), prev, gate, Hidden
                ),
                ax.tensor(p["bias"].reshape(4, HIDDEN), gate, Hidden),
            ),
        )
        dense = ax.nn.Affine(Hidden, Class, HIDDEN, 10, key=k2)
        self.dense = eqx.tree_at(
            lambda d: (d.weight, d.bias),
            dense,
            (ax.tensor(p["w"], Class, Hidden), ax.tensor(p["b"], Class)),
        )

    def __call__(self, x: Any) -> Any:
        state = self.cell.init_state({Batch: x.size(Batch)})
        h, _ = ax.nn.fold(self.cell, Time)(state, x)
        return self.dense(h)


def axjax_loss(model: Any, x: Any, y: Any) -> Any:
    return ax.mean(ax.train.softmax_cross_entropy(model(x), y, Class), Batch)


def put_axjax(x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
    return ax.tensor(x, Batch, Time, Feat), ax.tensor(y, Batch)


def build_axjax(p: dict[str, np.ndarray]) -> Runner:
    return train_step_runner(AxLSTM(p), axjax_loss, put_axjax)


def build_axjax_jit(p: dict[str, np.ndarray]) -> Runner:
    """axjax modules under the user's own ``jax.jit`` (the cost of Equinox modules as
    arguments: their Python flatten and unflatten on every call)."""
    return jit_train_step(
        lambda m, x, y: axjax_loss(m, x, y).array, AxLSTM(p), put_axjax, split=True
    )


def build_fit(p: dict[str, np.ndarray]) -> Runner:
    return fit_runner(AxLSTM(p), axjax_loss, put_axjax)


# ----------------------------------------------------------------------------- Equinox
class EqxLSTM(eqx.Module):
    cell: eqx.nn.LSTMCell
    dense: eqx.nn.Linear

    def __init__(self, p: dict[str, np.ndarray]) -> None:
        k1, k2 = jax.random.split(jax.random.key(0))
        a = jnp.asarray
        self.cell = eqx.tree_at(
            lambda c: (c.weight_ih, c.weight_hh, c.bias),
            eqx.nn.LSTMCell(28, HIDDEN, key=k1),
            (a(p["wih"]), a(p["whh"]), a(p["bias"])),
        )
        self.dense = eqx.tree_at(
            lambda d: (d.weight, d.bias), eqx.nn.Linear(HIDDEN, 10, key=k2), (a(p["w"]), a(p["b"]))
        )

    def __call__(self, xs: Any) -> Any:
        zero = jnp.zeros(HIDDEN, xs.dtype)
        (h, _), _ = jax.lax.scan(lambda s, xt: (self.cell(xt, s), None), (zero, zero), xs)
        return self.dense(h)


def eqx_loss(model: Any, x: Any, y: Any) -> Any:
    return optax.softmax_cross_entropy_with_integer_labels(jax.vmap(model)(x), y).mean()


def build_equinox(p: dict[str, np.ndarray]) -> Runner:
    return eqx_runner(EqxLSTM(p), eqx_loss, put_jax)


# ----------------------------------------------------------------------------- PyTorch
def build_torch(p: dict[str, np.ndarray]) -> Runner:
    import torch

    class TorchLSTM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = torch.nn.LSTM(28, HIDDEN, batch_first=True)
            self.dense = torch.nn.Linear(HIDDEN, 10)

        def forward(self, x: Any) -> Any:
            out, _ = self.lstm(x)
            return self.dense(out[:, -1])

    model = TorchLSTM()
    t = torch.from_numpy
    with torch.no_grad():
        model.lstm.weight_ih_l0.copy_(t(p["wih"]))
        model.lstm.weight_hh_l0.copy_(t(p["whh"]))
        model.lstm.bias_ih_l0.copy_(t(p["bias"]))
        model.lstm.bias_hh_l0.zero_()
        model.dense.weight.copy_(t(p["w"]))
        model.dense.bias.copy_(t(p["b"]))
    return torch_runner(model, lambda x, y: (x, y), LR)


# ----------------------------------------------------------------------------- Haliax
def build_haliax(p: dict[str, np.ndarray]) -> Runner:
    import haliax as hax
    import haliax.nn as hnn

    Ax = hax.Axis
    time, feat, gate = Ax("time", 28), Ax("feat", 28), Ax("gate", 4)
    hid, prev, out = Ax("hidden", HIDDEN), Ax("prev", HIDDEN), Ax("out", 10)
    a = jnp.asarray
    dense = hnn.Linear.init(hid, out, key=jax.random.key(0))
    dense = eqx.tree_at(
        lambda d: (d.weight, d.bias),
        dense,
        (hax.named(a(p["w"]), (out, hid)), hax.named(a(p["b"]), (out,))),
    )

    class HaxLSTM(eqx.Module):
        wih: Any
        whh: Any
        bias: Any
        dense: Any

        def __call__(self, x: Any) -> Any:
            def cell(state: Any, xt: Any) -> Any:
                h, c = state
                z = (
                    hax.dot(xt, self.wih, axis=feat)
                    + hax.dot(h.rename({hid: prev}), self.whh, axis=prev)
                    + self.bias
                )
                i, f = hnn.sigmoid(z[gate, 0]), hnn.sigmoid(z[gate, 1])
                g, o = hax.tanh(z[gate, 2]), hnn.sigmoid(z[gate, 3])
                c = f * c + i * g
                return o * hax.tanh(c), c

            zero = hax.zeros((x.resolve_axis("batch"), hid))
            h, _ = hax.fold(cell, time)((zero, zero), x)
            return self.dense(h)

    model = HaxLSTM(
        hax.named(a(p["wih"].reshape(4, HIDDEN, 28)), (gate, hid, feat)),
        hax.named(a(p["whh"].reshape(4, HIDDEN, HIDDEN)), (gate, hid, prev)),
        hax.named(a(p["bias"].reshape(4, HIDDEN)), (gate, hid)),
        dense,
    )

    def loss(model: Any, x: Any, y: Any) -> Any:
        target = hnn.one_hot(y, out, dtype=jnp.float32)
        return hnn.cross_entropy_loss(model(x), out, target, reduction=hax.mean).scalar()

    def put(x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
        b = Ax("batch", len(x))
        return hax.named(a(x), (b, time, feat)), hax.named(a(y), (b,))

    return eqx_runner(model, loss, put)


def build_graph(p: dict[str, np.ndarray]) -> Runner:
    """The same model on graph Inputs: the fold over Time is one Loop node (one lax.scan).
    The batch size is given, so that the model builds its zero state (a Const)."""
    from .._common import BATCH
    from ._frameworks import graph_runner

    x = ax.Input(ax.F32, Batch, Time, Feat, sizes={Batch: BATCH, Time: 28, Feat: 28}, name="x")
    y = ax.Input(ax.I32, Batch, sizes={Batch: BATCH}, name="y")
    return graph_runner(AxLSTM(p), lambda m: axjax_loss(m, x, y), [x, y], put_axjax)
