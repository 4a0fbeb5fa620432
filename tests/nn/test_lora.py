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
from tests.nn.helpers import Embed, Time

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

    # another configuration: the first difference named, from the recorded configuration
    for wrapped, text in [
        (
            ax.nn.lora(Net(K), where="blocks.*.up", rank=3, key=K),
            r"another rank: the file's adapter at blocks\.0\.up has rank=2, the model's "
            r"rank=3 \(wrap the model with rank=2\)",
        ),
        (
            ax.nn.lora(Net(K), where="blocks.*.up", rank=2, alpha=8.0, key=K),
            r"another alpha: the file's adapter at blocks\.0\.up has alpha=16\.0, the "
            r"model's alpha=8\.0",
        ),
        (
            ax.nn.lora(Net(K), where="**.up", rank=2, key=K),  # the same targets
            r"another where: the file's adapter at blocks\.0\.up has "
            r"where=\"by_path\('blocks\.\*\.up'\)\", the model's where=\"by_path\('\*\*\.up'\)\"",
        ),
        (
            ax.nn.lora(Net(K), where="blocks.*", rank=2, key=K),
            r"other targets: the model adapts blocks\.0\.down, blocks\.1\.down, the file "
            r"does not \(wrap the model with the saved where=by_path\('blocks\.\*\.up'\)\)",
        ),
        (
            ax.nn.lora(Net(K), where="blocks.0.up", rank=2, key=K),
            r"other targets: the file adapts blocks\.1\.up, the model does not",
        ),
    ]:
        with pytest.raises(ax.nn.SafetensorsError, match="another configuration than the model"):
            ax.nn.load_lora(wrapped, path)
        with pytest.raises(ax.nn.SafetensorsError, match=text):
            ax.nn.load_lora(wrapped, path)


def test_a_file_without_the_record_is_checked_entry_by_entry(tmp_path):
    """A file of adapters without the configuration record (written by other tools): each
    entry is checked as load_safetensors does, and extra entries are named."""
    from safetensors.numpy import load_file, save_file

    tuned = ax.nn.lora(Net(K), where="blocks.*.up", rank=2, key=K)
    path, bare = tmp_path / "adapters.safetensors", tmp_path / "bare.safetensors"
    ax.nn.save_lora(tuned, path, metadata={"note": "kept"})
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        meta = f.metadata()
    assert meta["note"] == "kept" and json.loads(meta["axjax.lora"]) == {
        "format": 1,
        "adapters": {
            f"blocks.{i}.up": {"rank": 2, "alpha": 16.0, "where": "by_path('blocks.*.up')"}
            for i in (0, 1)
        },
    }
    save_file(load_file(path), bare, metadata={"axjax": meta["axjax"]})
    ax.nn.load_lora(ax.nn.lora(Net(K), where="**.up", rank=2, key=K), bare)  # where unknown
    other_rank = ax.nn.lora(Net(K), where="blocks.*.up", rank=3, key=K)
    with pytest.raises(ax.nn.SafetensorsError, match="blocks.0.up.lora_a"):
        ax.nn.load_lora(other_rank, bare)
    more = ax.nn.lora(Net(K), where="blocks.*", rank=2, key=K)
    with pytest.raises(ax.nn.SafetensorsError, match="has no entry 'blocks.0.down.lora_a'"):
        ax.nn.load_lora(more, bare)
    fewer = ax.nn.lora(Net(K), where="blocks.0.up", rank=2, key=K)  # the file has blocks.1's too
    with pytest.raises(
        ax.nn.SafetensorsError,
        match=r"holds adapters this model does not have: blocks\.1\.up\.lora_a, "
        r"blocks\.1\.up\.lora_b \(wrap the model with the where= of the saved one\)",
    ):
        ax.nn.load_lora(fewer, bare)
    with pytest.raises(ax.nn.SafetensorsError, match="'axjax.lora' is axjax's own"):
        ax.nn.save_lora(tuned, path, metadata={"axjax.lora": "{}"})
    with pytest.raises(FileNotFoundError, match="load_lora: no file"):
        ax.nn.load_lora(tuned, tmp_path / "missing.safetensors")


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
        match=r"lora: where=by_path\('nope'\) selects none of the model's linear maps "
        r"\(blocks.0.down \(Linear\), blocks.0.up \(Affine\)",
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
        (
            lambda: ax.nn.LoRAWeight(np.zeros((2, 3)), (In,), (Out,), key=K),
            TypeError,
            "LoRAWeight: weight must be a Tensor, got ndarray",
        ),
        (
            lambda: ax.nn.LoRAWeight(ax.zeros((3, 2), In, Out), (In,), (Out,), key=K),
            ValueError,
            r"the weight's axes \(In, Out\) do not end with the layer's own \(Out, In\) "
            r"\(output axes first, input axes last\)",
        ),
        (
            lambda: ax.nn.LoRAWeight(ax.zeros((2, 3), ax.nn.Rank, In), (In,), (ax.nn.Rank,), key=K),
            ValueError,
            "the weight has the axis Rank",
        ),
        (
            lambda: ax.nn.LoRAWeight(
                eqx.filter_vmap(lambda k: ax.normal(k, (2, 3), Out, In))(jax.random.split(K, 4)),
                (In,),
                (Out,),
                key=K,
            ),
            ValueError,
            "the weight is stacked without a name",
        ),
        (
            lambda: ax.nn.LoRAWeight(ax.zeros((2, 3), Out, In), (In,), (Out,), key=K, where=3),
            TypeError,
            r"LoRAWeight: where is the text of the selection .* got int 3",
        ),
        (
            lambda: ax.nn.LoRA(ax.nn.Linear(In, Out, 5, 3, key=K), key=K, where=["a"]),
            TypeError,
            r"LoRA: where is the text of the selection",
        ),
    ],
)
def test_bad_arguments_are_named(call, error, text):
    with pytest.raises(error, match=text):
        call()


def test_a_wrong_input_names_the_lora_layer():
    layer = ax.nn.LoRA(ax.nn.Linear(In, Out, 5, 3, key=K), rank=2, key=K)
    with pytest.raises(ax.AxisError, match="In is not an axis of the input"):
        layer(ax.zeros((2, 4), N, Hid))


# ------------------------------------------------- raw projection weights (declared maps)
#: an input of each layer that declares raw linear maps (the layers of BUILDERS)
MAP_INPUTS: dict[str, Any] = {
    "MultiheadAttention": lambda: ax.normal(jax.random.key(8), (2, 3, 8), N, Time, Embed),
    "GroupedQueryAttention": lambda: ax.normal(jax.random.key(8), (2, 3, 8), N, Time, Embed),
    "SwiGLU": lambda: ax.normal(jax.random.key(8), (2, 3, 4), N, Time, Embed),
}
#: registered layers whose raw weights are linear maps lora does not adapt, and why
NOT_ADAPTED = {
    # [In, Gate, Hidden]: input axes first, and the tree cell reads one gate by index
    "RNNCell": "recurrent weights",
    "GRUCell": "recurrent weights",
    "LSTMCell": "recurrent weights",
    "ChildSumTreeLSTMCell": "recurrent weights",
}


def _raw_contractions(cls: type) -> set[str]:
    """The fields of ``cls`` (and its axjax bases) passed as ``self.<field>`` to
    ``contract``/``dense_product``/``project`` in its methods: its raw linear maps."""
    import ast
    import inspect
    import textwrap

    found: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("axjax."):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            fname = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
            if fname not in ("contract", "dense_product", "project", "_project"):
                continue
            for arg in ast.walk(node):
                if (
                    isinstance(arg, ast.Attribute)
                    and isinstance(arg.value, ast.Name)
                    and arg.value.id == "self"
                    and arg.attr in getattr(cls, "__dataclass_fields__", {})
                ):
                    found.add(arg.attr)
    return found


def test_every_raw_projection_a_layer_computes_with_is_declared():
    from axjax.nn._registry import declared_layers

    for spec in declared_layers():
        used = _raw_contractions(spec.layer)
        if spec.name in NOT_ADAPTED or spec.name in ("LoRA",):
            continue
        tensors = {
            f
            for f in used
            if "Tensor" in str(spec.layer.__dataclass_fields__[f].type)  # raw weights only
        }
        assert tensors <= set(spec.maps), (
            f"{spec.name} computes with {sorted(tensors - set(spec.maps))} as linear maps "
            "without declaring them: add them to register_layer(linear_maps=...) and call "
            "project() at each use"
        )
        if spec.maps:
            assert spec.name in MAP_INPUTS, f"give {spec.name} an input in MAP_INPUTS"


@pytest.mark.parametrize(
    ("layer", "field"),
    [
        (spec.name, f)
        for spec in __import__("axjax.nn._registry", fromlist=["x"]).declared_layers()
        for f in spec.maps
    ],
)
def test_every_declared_map_is_adapted_and_changes_the_output(layer, field):
    from tests.nn.test_nn_export import BUILDERS

    base = BUILDERS[layer]()
    x = MAP_INPUTS[layer]()
    tuned = ax.nn.lora(base, where=field, rank=2, alpha=4.0, key=jax.random.key(2))
    adapted = getattr(tuned, field)
    assert isinstance(adapted, ax.nn.LoRAWeight)
    w = adapted.weight
    assert w.array is getattr(base, field).array  # the base weight, unchanged
    assert adapted.lora_a.axes == (ax.nn.Rank, *adapted.in_axes)
    assert adapted.lora_b.axes == (*adapted.out_axes, ax.nn.Rank)
    assert w.axes == (*adapted.out_axes, *adapted.in_axes)  # stored out-axes first
    np.testing.assert_array_equal(np.asarray(tuned(x).array), np.asarray(base(x).array))
    b = ax.normal(jax.random.key(3), adapted.lora_b.shape, *adapted.lora_b.axes)
    tuned = eqx.tree_at(lambda m: getattr(m, field).lora_b, tuned, b)
    y = np.asarray(tuned(x).array)
    assert not np.allclose(y, np.asarray(base(x).array), atol=1e-4)
    # the factorized forward equals the base layer with the merged weight, W + (4/2) B A
    merged = ax.nn.merge_lora(tuned)
    a2, b2 = np.asarray(adapted.lora_a.array), np.asarray(b.array)
    n_out, n_in = b2.size // 2, a2.size // 2
    want = np.asarray(w.array) + 2.0 * (b2.reshape(n_out, 2) @ a2.reshape(2, n_in)).reshape(w.shape)
    np.testing.assert_allclose(np.asarray(getattr(merged, field).array), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(merged(x).array), y, rtol=1e-4, atol=1e-5)


def test_the_adapted_weight_reads_as_its_base_weight():
    mha = ax.nn.MultiheadAttention(Embed, 8, num_heads=2, query_pos=Time, key=K)
    tuned = ax.nn.lora(mha, where="key_proj", rank=3, key=K)
    w, base = tuned.key_proj, mha.key_proj
    assert (w.axes, w.shape, w.dtype, w.sizes) == (base.axes, base.shape, base.dtype, base.sizes)
    assert w.size(Embed) == 8 and w.rank == 3 and w.scale == 16.0 / 3
    cache = tuned.init_cache({N: 2}, 4)  # reads key_proj's sizes and dtype
    assert cache.keys.shape == mha.init_cache({N: 2}, 4).keys.shape
    assert ax.nn.is_lora("key_proj.lora_a", None) and ax.nn.is_lora("key_proj.lora_b", None)


def test_stacked_adapters_take_the_stacking_axis_first():
    """A LayerStack of an Affine and a SwiGLU: adapters [Layer, Rank, In] and
    [Layer, Out, Rank], one scan, the unrolled layers' values."""

    class Block(eqx.Module):
        fc: Any
        mlp: Any

        def __init__(self, key):
            k1, k2 = jax.random.split(key)
            self.fc = ax.nn.Affine(Embed, Embed, 4, 4, key=k1)
            self.mlp = ax.nn.SwiGLU(Embed, 4, Hid, 6, key=k2)

        def __call__(self, x):
            return self.mlp(self.fc(x)) + x

    stack = ax.nn.LayerStack.init(Block, 3, key=K)
    tuned = ax.nn.lora(stack, where="**", rank=2, key=K)
    fc, gate = tuned.layers.fc, tuned.layers.mlp.gate
    assert fc.lora_a.axes == (ax.nn.Layer, ax.nn.Rank, Embed)
    assert fc.lora_b.axes == (ax.nn.Layer, fc.base.weight.axes[1], ax.nn.Rank)
    assert gate.lora_a.axes == (ax.nn.Layer, ax.nn.Rank, Embed)
    assert gate.lora_b.axes == (ax.nn.Layer, Hid, ax.nn.Rank)
    assert not np.allclose(fc.lora_a.array[0], fc.lora_a.array[1])  # each layer its own A
    tuned = jax.tree_util.tree_map_with_path(
        lambda p, t: (
            ax.normal(jax.random.key(len(str(p))), t.shape, *t.axes)
            if str(p).endswith("lora_b')")
            else t
        ),
        tuned,
        is_leaf=lambda t: isinstance(t, ax.Tensor),
    )
    x = ax.normal(jax.random.key(4), (2, 4), N, Embed)
    y = x
    for block in tuned.unstack():
        y = block(y)
    np.testing.assert_allclose(np.asarray(tuned(x).array), np.asarray(y.array), rtol=1e-5)
    merged = ax.nn.merge_lora(tuned)
    np.testing.assert_allclose(
        np.asarray(merged(x).array), np.asarray(y.array), rtol=1e-4, atol=1e-5
    )


def test_a_predicate_where_is_recorded_by_its_name():
    def only_up(path: str, layer: object) -> bool:
        return path.endswith(".up")

    tuned = ax.nn.lora(Net(K), where=only_up, rank=2, key=K)
    record = ax.nn._internal.lora_record(tuned)
    assert record == {
        f"blocks.{i}.up": {"rank": 2, "alpha": 16.0, "where": "only_up"} for i in (0, 1)
    }
    both = ax.nn.lora(Net(K), where=("**.up", ax.nn.by_axes(Out)), rank=2, key=K)
    assert {r["where"] for r in ax.nn._internal.lora_record(both).values()} == {
        "by_path('**.up') | by_axes(Out)"
    }
