"""A transformer-style block over the 28 rows of an MNIST image, per framework.

Rows are tokens (28 features) embedded to 64; one pre-norm block: ``h + MHA(LN(h))`` with
4 heads of 16 and no projection biases, then ``h + W2 relu(W1 LN(h) + b1) + b2`` (64-128-64);
mean over the tokens; a dense layer to the 10 classes. Softmax cross-entropy, Adam 1e-3.
Projections are stored as Equinox and PyTorch lay them out (``[heads * 16, 64]``).
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
    graph_runner,
    int_xent,
    onehot_xent,
    put_jax,
    torch_runner,
    train_step_runner,
)

NAME = "attention"
TITLE = "Attention block, 28 tokens, 4x16 heads"
E, HEADS, HID = 64, 4, 128
D = E // HEADS


@final
class Time(ax.Axis):
    """Token positions (the 28 image rows)."""


@final
class Feat(ax.Axis):
    """The pixels of a row (28)."""


@final
class Embed(ax.Axis):
    """The model width (64)."""


@final
class Hidden(ax.Axis):
    """The feed-forward width (128)."""


def init(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = {"we": uniform(rng, (E, 28), 28), "be": uniform(rng, (E,), 28)}
    for k in ("wq", "wk", "wv", "wo"):
        p[k] = uniform(rng, (E, E), E)
    p |= {
        "w1": uniform(rng, (HID, E), E),
        "b1": uniform(rng, (HID,), E),
        "w2": uniform(rng, (E, HID), HID),
        "b2": uniform(rng, (E,), HID),
        "wc": uniform(rng, (10, E), E),
        "bc": uniform(rng, (10,), E),
    }
    return p


# ----------------------------------------------------------------------------- raw JAX
def _ln(x: Any) -> Any:
    mu = x.mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-5)


def raw_loss(p: Any, x: Any, y: Any) -> Any:
    h = x @ p["we"] + p["be"]  # [B, T, E]
    a = _ln(h) * p["g1"] + p["n1"]
    q, k, v = (jnp.einsum("bte,ehd->bthd", a, p[w]) for w in ("wq", "wk", "wv"))
    s = jnp.einsum("bthd,bshd->bhts", q / np.sqrt(D).astype(np.float32), k)
    o = jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(s, axis=-1), v)
    h = h + jnp.einsum("bthd,hde->bte", o, p["wo"])
    m = _ln(h) * p["g2"] + p["n2"]
    h = h + jax.nn.relu(m @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    logits = h.mean(1) @ p["wc"] + p["bc"]
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def build_jax(p: dict[str, np.ndarray]) -> Runner:
    a = jnp.asarray
    params = {k: a(v.T) for k, v in p.items() if k in ("we", "w1", "w2", "wc")}
    params |= {k: a(v) for k, v in p.items() if k.startswith("b")}
    params |= {k: a(p[k].T.reshape(E, HEADS, D)) for k in ("wq", "wk", "wv")}
    params["wo"] = a(p["wo"].T.reshape(HEADS, D, E))
    params |= {
        "g1": a(np.ones(E, np.float32)),
        "n1": a(np.zeros(E, np.float32)),
        "g2": a(np.ones(E, np.float32)),
        "n2": a(np.zeros(E, np.float32)),
    }
    return jit_train_step(raw_loss, params, put_jax)


# ----------------------------------------------------------------------------- expert JAX
def _expert_ln(x: Any, g: Any, b: Any) -> Any:
    """LayerNorm with a centred variance (``mean(xc * xc)``): ``x.var()``'s autodiff
    backward costs more."""
    xc = x - x.mean(-1, keepdims=True)
    return xc * jax.lax.rsqrt((xc * xc).mean(-1, keepdims=True) + 1e-5) * g + b


def expert_loss(xent: Any, p: Any, x: Any, y: Any) -> Any:
    """Every weight stored as axjax's modules store it (``[out, in]``; projections
    ``[Head, HeadDim, Embed]``, output ``[Embed, Head, HeadDim]``), ``jax.nn`` primitives,
    ``jnp.einsum`` for the heads, the given optax loss."""
    h = x @ p["we"].T + p["be"]  # [B, T, E]
    a = _expert_ln(h, p["g1"], p["n1"])
    q, k, v = (jnp.einsum("bte,hde->bthd", a, p[w]) for w in ("wq", "wk", "wv"))
    s = jnp.einsum("bthd,bshd->bhts", q / np.sqrt(D).astype(np.float32), k)
    o = jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(s, axis=-1), v)
    h = h + jnp.einsum("bthd,ehd->bte", o, p["wo"])
    m = _expert_ln(h, p["g2"], p["n2"])
    h = h + jax.nn.relu(m @ p["w1"].T + p["b1"]) @ p["w2"].T + p["b2"]
    return xent(h.mean(1) @ p["wc"].T + p["bc"], y)


def _expert(p: dict[str, np.ndarray], xent: Any) -> Runner:
    a = jnp.asarray
    params = {k: a(v) for k, v in p.items() if k in ("we", "w1", "w2", "wc")}
    params |= {k: a(v) for k, v in p.items() if k.startswith("b")}
    params |= {k: a(p[k].reshape(HEADS, D, E)) for k in ("wq", "wk", "wv")}
    params["wo"] = a(p["wo"].reshape(E, HEADS, D))
    params |= {
        "g1": a(np.ones(E, np.float32)),
        "n1": a(np.zeros(E, np.float32)),
        "g2": a(np.ones(E, np.float32)),
        "n2": a(np.zeros(E, np.float32)),
    }
    return jit_train_step(functools.partial(expert_loss, xent), params, put_jax)


def build_expert(p: dict[str, np.ndarray]) -> Runner:
    return _expert(p, onehot_xent)


def build_expert_int(p: dict[str, np.ndarray]) -> Runner:
    return _expert(p, int_xent)


# ----------------------------------------------------------------------------- axjax
def _affine(
    p: dict[str, np.ndarray], w: str, b: str, i: type[ax.Axis], o: type[ax.Axis], key: Any
) -> Any:
    layer = ax.nn.Affine(i, o, p[w].shape[1], p[w].shape[0], key=key)
    return eqx.tree_at(
        lambda m: (m.weight, m.bias), layer, (ax.tensor(p[w], o, i), ax.tensor(p[b], o))
    )


class AxBlock(eqx.Module):
    embed: ax.nn.Affine[Feat, Embed]
    norm1: ax.nn.LayerNorm
    attn: ax.nn.MultiheadAttention
    norm2: ax.nn.LayerNorm
    up: ax.nn.Affine[Embed, Hidden]
    down: ax.nn.Affine[Hidden, Embed]
    head: ax.nn.Affine[Embed, Class]

    def __init__(self, p: dict[str, np.ndarray]) -> None:
        ks = jax.random.split(jax.random.key(0), 5)
        self.embed = _affine(p, "we", "be", Feat, Embed, ks[0])
        self.norm1, self.norm2 = ax.nn.LayerNorm(Embed, E), ax.nn.LayerNorm(Embed, E)
        attn = ax.nn.MultiheadAttention(Embed, E, num_heads=HEADS, query_pos=Time, key=ks[1])
        hd = (ax.nn.Head, ax.nn.HeadDim)
        projs = tuple(ax.tensor(p[k].reshape(HEADS, D, E), *hd, Embed) for k in ("wq", "wk", "wv"))
        out = ax.tensor(p["wo"].reshape(E, HEADS, D), Embed, *hd)
        self.attn = eqx.tree_at(
            lambda m: (m.query_proj, m.key_proj, m.value_proj, m.output_proj), attn, (*projs, out)
        )
        self.up = _affine(p, "w1", "b1", Embed, Hidden, ks[2])
        self.down = _affine(p, "w2", "b2", Hidden, Embed, ks[3])
        self.head = _affine(p, "wc", "bc", Embed, Class, ks[4])

    def __call__(self, x: Any) -> Any:
        h = self.embed(x)  # [Batch, Time, Embed]
        h = h + self.attn(self.norm1(h))
        h = h + self.down(ax.relu(self.up(self.norm2(h))))
        return self.head(ax.mean(h, Time))


def axjax_loss(model: Any, x: Any, y: Any) -> Any:
    return ax.mean(ax.train.softmax_cross_entropy(model(x), y, Class), Batch)


def put_axjax(x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
    return ax.tensor(x, Batch, Time, Feat), ax.tensor(y, Batch)


def build_axjax(p: dict[str, np.ndarray]) -> Runner:
    return train_step_runner(AxBlock(p), axjax_loss, put_axjax)


def build_axjax_jit(p: dict[str, np.ndarray]) -> Runner:
    """axjax modules under the user's own ``jax.jit`` (the cost of Equinox modules as
    arguments: their Python flatten and unflatten on every call)."""
    return jit_train_step(
        lambda m, x, y: axjax_loss(m, x, y).array, AxBlock(p), put_axjax, split=True
    )


def build_fit(p: dict[str, np.ndarray]) -> Runner:
    return fit_runner(AxBlock(p), axjax_loss, put_axjax)


def build_graph(p: dict[str, np.ndarray]) -> Runner:
    x = ax.Input(ax.F32, Batch, Time, Feat, sizes={Time: 28, Feat: 28}, name="x")
    y = ax.Input(ax.I32, Batch, name="y")
    return graph_runner(AxBlock(p), lambda m: axjax_loss(m, x, y), [x, y], put_axjax)


# ----------------------------------------------------------------------------- Equinox
class EqxBlock(eqx.Module):
    embed: eqx.nn.Linear
    norm1: eqx.nn.LayerNorm
    attn: eqx.nn.MultiheadAttention
    norm2: eqx.nn.LayerNorm
    up: eqx.nn.Linear
    down: eqx.nn.Linear
    head: eqx.nn.Linear

    def __init__(self, p: dict[str, np.ndarray]) -> None:
        ks = jax.random.split(jax.random.key(0), 5)
        a = jnp.asarray

        def lin(w: str, b: str, key: Any) -> eqx.nn.Linear:
            n_out, n_in = p[w].shape
            return eqx.tree_at(
                lambda m: (m.weight, m.bias),
                eqx.nn.Linear(n_in, n_out, key=key),
                (a(p[w]), a(p[b])),
            )

        self.embed, self.up = lin("we", "be", ks[0]), lin("w1", "b1", ks[2])
        self.down, self.head = lin("w2", "b2", ks[3]), lin("wc", "bc", ks[4])
        self.norm1, self.norm2 = eqx.nn.LayerNorm(E), eqx.nn.LayerNorm(E)
        attn = eqx.nn.MultiheadAttention(HEADS, E, key=ks[1])
        self.attn = eqx.tree_at(
            lambda m: (
                m.query_proj.weight,
                m.key_proj.weight,
                m.value_proj.weight,
                m.output_proj.weight,
            ),
            attn,
            (a(p["wq"]), a(p["wk"]), a(p["wv"]), a(p["wo"])),
        )

    def __call__(self, x: Any) -> Any:
        h = jax.vmap(self.embed)(x)  # [T, E]
        a = jax.vmap(self.norm1)(h)
        h = h + self.attn(a, a, a)
        m = jax.vmap(self.norm2)(h)
        h = h + jax.vmap(self.down)(jax.nn.relu(jax.vmap(self.up)(m)))
        return self.head(h.mean(0))


def eqx_loss(model: Any, x: Any, y: Any) -> Any:
    return optax.softmax_cross_entropy_with_integer_labels(jax.vmap(model)(x), y).mean()


def build_equinox(p: dict[str, np.ndarray]) -> Runner:
    return eqx_runner(EqxBlock(p), eqx_loss, put_jax)


# ----------------------------------------------------------------------------- PyTorch
def build_torch(p: dict[str, np.ndarray]) -> Runner:
    import torch

    nn = torch.nn

    class TorchBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed, self.up = nn.Linear(28, E), nn.Linear(E, HID)
            self.down, self.head = nn.Linear(HID, E), nn.Linear(E, 10)
            self.norm1, self.norm2 = nn.LayerNorm(E), nn.LayerNorm(E)
            self.attn = nn.MultiheadAttention(E, HEADS, bias=False, batch_first=True)

        def forward(self, x: Any) -> Any:
            h = self.embed(x)
            a = self.norm1(h)
            h = h + self.attn(a, a, a, need_weights=False)[0]
            h = h + self.down(torch.relu(self.up(self.norm2(h))))
            return self.head(h.mean(1))

    model = TorchBlock()
    t = torch.from_numpy
    with torch.no_grad():
        for name, w, b in (
            ("embed", "we", "be"),
            ("up", "w1", "b1"),
            ("down", "w2", "b2"),
            ("head", "wc", "bc"),
        ):
            getattr(model, name).weight.copy_(t(p[w]))
            getattr(model, name).bias.copy_(t(p[b]))
        model.attn.in_proj_weight.copy_(t(np.concatenate([p["wq"], p["wk"], p["wv"]])))
        model.attn.out_proj.weight.copy_(t(p["wo"]))
    return torch_runner(model, lambda x, y: (x, y), LR)


# ----------------------------------------------------------------------------- Haliax
def build_haliax(p: dict[str, np.ndarray]) -> Runner:
    import haliax as hax
    import haliax.nn as hnn

    Ax = hax.Axis
    pos, kpos, feat, embed = Ax("pos", 28), Ax("kpos", 28), Ax("feat", 28), Ax("embed", E)
    heads, hsize, mlp, out = Ax("heads", HEADS), Ax("head_size", D), Ax("mlp", HID), Ax("out", 10)
    a = jnp.asarray
    ks = jax.random.split(jax.random.key(0), 4)

    def lin(w: str, b: str, i: Any, o: Any, key: Any) -> Any:
        layer = hnn.Linear.init(i, o, key=key)
        return eqx.tree_at(
            lambda m: (m.weight, m.bias),
            layer,
            (hax.named(a(p[w]), (o, i)), hax.named(a(p[b]), (o,))),
        )

    class HaxBlock(eqx.Module):
        embed: Any
        up: Any
        down: Any
        head: Any
        norm1: Any
        norm2: Any
        wq: Any
        wk: Any
        wv: Any
        wo: Any

        def __call__(self, x: Any) -> Any:
            h = self.embed(x)  # (batch, pos, embed)
            z = self.norm1(h)
            q = hax.dot(z, self.wq, axis=embed) / np.sqrt(D).astype(np.float32)
            k = hax.dot(z, self.wk, axis=embed).rename({pos: kpos})
            v = hax.dot(z, self.wv, axis=embed).rename({pos: kpos})
            w = hnn.softmax(hax.dot(q, k, axis=hsize), axis=kpos)
            o = hax.dot(w, v, axis=kpos)
            h = h + hax.dot(o, self.wo, axis=(heads, hsize))
            h = h + self.down(hnn.relu(self.up(self.norm2(h))))
            return self.head(hax.mean(h, axis=pos))

    proj = {
        k: hax.named(a(p[k].reshape(HEADS, D, E)), (heads, hsize, embed))
        for k in ("wq", "wk", "wv")
    }
    model = HaxBlock(
        lin("we", "be", feat, embed, ks[0]),
        lin("w1", "b1", embed, mlp, ks[1]),
        lin("w2", "b2", mlp, embed, ks[2]),
        lin("wc", "bc", embed, out, ks[3]),
        hnn.LayerNorm.init(embed),
        hnn.LayerNorm.init(embed),
        proj["wq"],
        proj["wk"],
        proj["wv"],
        hax.named(a(p["wo"].reshape(E, HEADS, D)), (embed, heads, hsize)),
    )

    def loss(model: Any, x: Any, y: Any) -> Any:
        target = hnn.one_hot(y, out, dtype=jnp.float32)
        return hnn.cross_entropy_loss(model(x), out, target, reduction=hax.mean).scalar()

    def put(x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
        b = Ax("batch", len(x))
        return hax.named(a(x), (b, pos, feat)), hax.named(a(y), (b,))

    return eqx_runner(model, loss, put)
