"""``ax.nn.lora`` / ``LoRA``: forward and backward against a jax.numpy oracle, identity at
a fresh wrap, ``merge``, adapter-only files, training the adapters alone, and the errors."""

from __future__ import annotations

import json
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import axjax as ax

K = jax.random.key(0)


@final
class N(ax.Axis): ...


@final
class T(ax.Axis): ...


@final
class In(ax.Axis): ...


@final
class Hid(ax.Axis): ...


@final
class Out(ax.Axis): ...


class Net(eqx.Module):
    """Two blocks of two dense layers and a head, as a model's attribute paths look."""

    blocks: tuple[dict[str, Any], ...]
    head: ax.nn.Affine[ax.F32, Hid, Out]

    def __init__(self, key: jax.Array) -> None:
        ks = jax.random.split(key, 5)
        self.blocks = tuple(
            {
                "up": ax.nn.Affine(In, Hid, 5, 6, key=ks[2 * i]),
                "down": ax.nn.Linear(Hid, In, 6, 5, key=ks[2 * i + 1]),
            }
            for i in range(2)
        )
        self.head = ax.nn.Affine(In, Out, 5, 3, key=ks[4])

    def __call__(self, x: Any) -> Any:
        for b in self.blocks:
            x = x + b["down"](ax.tanh(b["up"](x)))
        return self.head(x)


def _random_b(layer: ax.nn.LoRA, seed: int = 1) -> ax.nn.LoRA:
    b = ax.normal(jax.random.key(seed), layer.lora_b.shape, *layer.lora_b.axes)
    return eqx.tree_at(lambda m: m.lora_b, layer, b)


def _oracle(w, bias, a, b, scale, x):
    """``x`` with the input axis last: ``x Wᵀ + bias + scale · x Aᵀ Bᵀ``."""
    y = x @ w.T
    if bias is not None:
        y = y + bias.reshape((1,) * (y.ndim - 1) + (-1,))
    return y + scale * (x @ a.T) @ b.T


@pytest.mark.parametrize("kind", ["Affine", "Linear", "square"])
@pytest.mark.parametrize("order", [(N, T, In), (In, N, T), (N, In, T)])
def test_forward_and_backward_match_the_oracle(kind, order):
    base = {
        "Affine": lambda: ax.nn.Affine(In, Out, 5, 3, key=K),
        "Linear": lambda: ax.nn.Linear(In, Out, 5, 3, key=K),
        "square": lambda: ax.nn.Linear(In, In, 5, 5, key=K),
    }[kind]()
    layer = _random_b(ax.nn.LoRA(base, rank=4, alpha=6.0, key=jax.random.key(2)))
    assert layer.rank == 4 and layer.scale == 1.5
    assert layer.lora_a.axes == (ax.nn.Rank, In)
    sizes = {N: 2, T: 3, In: 5}
    x = ax.normal(jax.random.key(3), tuple(sizes[a] for a in order), *order)
    y = layer(x)
    out = base.out_axis
    assert y.axes == (*[a for a in order if a is not In], out)
    perm = [order.index(a) for a in (N, T, In)]
    xs = jnp.transpose(x.array, perm)
    bias = layer.base.bias.array if kind == "Affine" else None
    want = _oracle(base.weight.array, bias, layer.lora_a.array, layer.lora_b.array, 1.5, xs)
    got = ax.transpose(y, N, T, out).array
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    # backward: the gradients of the adapters and of the input, against jax.grad
    def loss(a, b, xa):
        lay = eqx.tree_at(
            lambda m: (m.lora_a, m.lora_b),
            layer,
            (ax.Tensor(a, layer.lora_a.axes), ax.Tensor(b, layer.lora_b.axes)),
        )
        return ax.tanh(lay(ax.Tensor(xa, x.axes))).array.sum()

    def ref(a, b, xa):
        xs = jnp.transpose(xa, perm)
        return jnp.tanh(_oracle(base.weight.array, bias, a, b, 1.5, xs)).sum()

    args = (layer.lora_a.array, layer.lora_b.array, x.array)
    for g, r in zip(jax.grad(loss, (0, 1, 2))(*args), jax.grad(ref, (0, 1, 2))(*args), strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)


def test_a_fresh_wrap_gives_the_base_logits_exactly():
    net = Net(K)
    x = ax.normal(jax.random.key(4), (4, 5), N, In)
    tuned = ax.nn.lora(net, where="blocks.*", rank=2, key=jax.random.key(5))
    assert all(isinstance(b[k], ax.nn.LoRA) for b in tuned.blocks for k in ("up", "down"))
    assert isinstance(tuned.head, ax.nn.Affine)
    np.testing.assert_array_equal(np.asarray(tuned(x).array), np.asarray(net(x).array))
    assert np.any(np.asarray(tuned.blocks[0]["up"].lora_a.array) != 0)  # only B is zero


def test_merge_folds_the_adapters_back():
    net = Net(K)
    tuned = ax.nn.lora(net, where=("head", "**.up"), rank=3, key=jax.random.key(5))
    tuned = jax.tree_util.tree_map(
        lambda m: _random_b(m) if isinstance(m, ax.nn.LoRA) else m,
        tuned,
        is_leaf=lambda m: isinstance(m, ax.nn.LoRA),
    )
    x = ax.normal(jax.random.key(4), (4, 5), N, In)
    merged = ax.nn.merge_lora(tuned)
    assert type(merged.head) is ax.nn.Affine and type(merged.blocks[1]["up"]) is ax.nn.Affine
    y, ym = np.asarray(tuned(x).array), np.asarray(merged(x).array)
    assert not np.allclose(y, np.asarray(net(x).array))  # the adapters do something
    assert np.max(np.abs(y - ym)) <= 1e-6 * max(1.0, np.max(np.abs(y)))
    single = tuned.head.merge()
    np.testing.assert_allclose(
        np.asarray(single.weight.array),
        np.asarray(net.head.weight.array)
        + tuned.head.scale
        * np.asarray(tuned.head.lora_b.array)
        @ np.asarray(tuned.head.lora_a.array),
        rtol=1e-6,
        atol=1e-6,
    )


def test_where_selects_by_pattern_axes_or_predicate():
    def wrapped(where):
        tuned = ax.nn.lora(Net(K), where=where, rank=2, key=K)
        flat = jax.tree_util.tree_flatten_with_path(
            tuned, is_leaf=lambda m: isinstance(m, ax.nn.LoRA)
        )[0]
        return sorted(
            jax.tree_util.keystr(p, simple=True, separator=".")
            for p, m in flat
            if isinstance(m, ax.nn.LoRA)
        )

    assert wrapped("blocks.0") == ["blocks.0.down", "blocks.0.up"]
    assert wrapped(ax.nn.by_axes(Out)) == ["head"]
    assert wrapped(ax.nn.by_axes(Hid) & ~ax.nn.by_path("blocks.1")) == [
        "blocks.0.down",
        "blocks.0.up",
    ]
    assert wrapped(lambda path, layer: isinstance(layer, ax.nn.Linear)) == [
        "blocks.0.down",
        "blocks.1.down",
    ]


def test_save_lora_writes_only_the_adapters_with_their_axes(tmp_path):
    from safetensors import safe_open

    tuned = ax.nn.lora(Net(K), where="blocks.*.up", rank=2, key=K)
    tuned = jax.tree_util.tree_map(
        lambda m: _random_b(m) if isinstance(m, ax.nn.LoRA) else m,
        tuned,
        is_leaf=lambda m: isinstance(m, ax.nn.LoRA),
    )
    path = tmp_path / "adapters.safetensors"
    ax.nn.save_lora(tuned, path)
    with safe_open(str(path), framework="numpy") as f:
        keys = sorted(f.keys())
        meta = json.loads(f.metadata()["axjax"])
    assert keys == [f"blocks.{i}.up.lora_{ab}" for i in (0, 1) for ab in "ab"]
    assert meta["blocks.0.up.lora_a"]["axes"] == ["Rank", "In"]
    assert meta["blocks.0.up.lora_b"]["axes"] == ["Hid", "Rank"]

    fresh = ax.nn.lora(Net(K), where="blocks.*.up", rank=2, key=jax.random.key(7))
    loaded = ax.nn.load_lora(fresh, path)
    for a, b in zip(jax.tree.leaves(loaded), jax.tree.leaves(tuned), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    other_rank = ax.nn.lora(Net(K), where="blocks.*.up", rank=3, key=K)
    with pytest.raises(ax.nn.SafetensorsError, match="blocks.0.up.lora_a"):
        ax.nn.load_lora(other_rank, path)
    more = ax.nn.lora(Net(K), where="blocks.*", rank=2, key=K)
    with pytest.raises(ax.nn.SafetensorsError, match="has no entry 'blocks.0.down.lora_a'"):
        ax.nn.load_lora(more, path)
    fewer = ax.nn.lora(Net(K), where="blocks.0.up", rank=2, key=K)  # the file has blocks.1's too
    with pytest.raises(
        ax.nn.SafetensorsError,
        match=r"holds adapters this model does not have: blocks\.1\.up\.lora_a, "
        r"blocks\.1\.up\.lora_b \(wrap the model with the where= of the saved one\)",
    ):
        ax.nn.load_lora(fewer, path)


def test_training_only_the_adapters_leaves_the_base_bit_identical():
    net = Net(K)
    tuned = ax.nn.lora(net, where="blocks.*", rank=2, key=K)
    rng = np.random.default_rng(0)
    x = ax.tensor(rng.normal(size=(16, 5)).astype(np.float32), N, In)
    y = ax.tensor(rng.normal(size=(16, 3)).astype(np.float32), N, Out)

    def loss_fn(model, x, y):
        return ax.mean(ax.sum((model(x) - y) ** 2, Out), N)

    result = ax.train.fit(
        tuned,
        optax.adam(1e-2),
        loss_fn,
        [(x, y)],
        epochs=30,
        progress=False,
        trainable=ax.nn.is_lora,
    )
    trained = result.model
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]
    for b0, b1 in zip(tuned.blocks, trained.blocks, strict=True):
        for k in ("up", "down"):
            for f in ("weight",):
                np.testing.assert_array_equal(
                    np.asarray(getattr(b0[k].base, f).array),
                    np.asarray(getattr(b1[k].base, f).array),
                )
            assert not np.array_equal(
                np.asarray(b0[k].lora_b.array), np.asarray(b1[k].lora_b.array)
            )
    np.testing.assert_array_equal(
        np.asarray(trained.head.weight.array), np.asarray(net.head.weight.array)
    )
    # adam: a count, mu and nu for each of the 8 adapter Tensors
    assert len(jax.tree.leaves(result.opt_state)) == 1 + 2 * 8


# ---------------------------------------------------------------- bad input
def test_where_selecting_nothing_is_an_error():
    with pytest.raises(
        ValueError,
        match=r"lora: where=by_path\('nope'\) selects none of the model's Linear or Affine "
        r"layers \(blocks.0.down \(Linear\), blocks.0.up \(Affine\)",
    ):
        ax.nn.lora(Net(K), where="nope", key=K)
    with pytest.raises(ValueError, match="it has none"):
        ax.nn.lora({"w": ax.zeros((2,), In)}, where="*", key=K)


@pytest.mark.parametrize(
    ("call", "error", "text"),
    [
        (lambda: ax.nn.lora(Net(K), where=3, key=K), TypeError, "lora: where must be"),
        (
            lambda: ax.nn.lora(Net(K), where=lambda p, m: 1, key=K),
            TypeError,
            "the predicate returned int 1",
        ),
        (lambda: ax.nn.lora(Net(K), where="*", rank=0, key=K), ValueError, "rank"),
        (lambda: ax.nn.lora(Net(K), where="*", alpha=-1.0, key=K), ValueError, "alpha"),
        (
            lambda: ax.nn.LoRA(ax.nn.LayerNorm(In, 5), key=K),
            TypeError,
            "base must be an ax.nn.Linear or ax.nn.Affine layer, got LayerNorm",
        ),
        (
            lambda: ax.nn.LoRA(ax.nn.Linear(ax.nn.Rank, In, 2, 5, key=K), key=K),
            ValueError,
            "maps from or to the axis Rank",
        ),
        (
            lambda: ax.nn.LoRA(
                eqx.filter_vmap(lambda k: ax.nn.Linear(In, Out, 5, 3, key=k))(
                    jax.random.split(K, 2)
                ),
                key=K,
            ),
            ValueError,
            "weight is stacked",
        ),
        (lambda: ax.nn.save_lora(Net(K), "x.safetensors"), ValueError, "no LoRA adapters"),
    ],
)
def test_bad_arguments_are_named(call, error, text):
    with pytest.raises(error, match=text):
        call()


def test_a_wrong_input_names_the_lora_layer():
    layer = ax.nn.LoRA(ax.nn.Linear(In, Out, 5, 3, key=K), rank=2, key=K)
    with pytest.raises(ax.AxisError, match="In is not an axis of the input"):
        layer(ax.zeros((2, 4), N, Hid))
