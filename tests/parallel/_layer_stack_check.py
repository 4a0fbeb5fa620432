"""``ax.nn.LayerStack`` sharded over its ``Layer`` axis (FSDP over layers), on 8 simulated
CPU devices: run as ``python tests/parallel/_layer_stack_check.py`` in a subprocess (JAX fixes
the device count when it starts); prints ``PASS name`` per check."""

from __future__ import annotations

import sys
from pathlib import Path

import jax

jax.config.update("jax_num_cpu_devices", 8)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import axjax as ax  # noqa: E402
from tests.axes import Batch, Hidden, Pixel  # noqa: E402

Layer = ax.nn.Layer


class Block(eqx.Module):
    up: ax.nn.Affine[ax.F32, Hidden, Pixel]
    down: ax.nn.Affine[ax.F32, Pixel, Hidden]

    def __init__(self, key: jax.Array) -> None:
        k1, k2 = jax.random.split(key)
        self.up = ax.nn.Affine(Hidden, Pixel, 16, 32, key=k1)
        self.down = ax.nn.Affine(Pixel, Hidden, 32, 16, key=k2)

    def __call__(self, x: ax.Tensor[ax.F32, Batch, Hidden]) -> ax.Tensor[ax.F32, Batch, Hidden]:
        return x + self.down(ax.gelu(self.up(x)))


def loss(
    stack: ax.nn.LayerStack[Block, ax.nn.Layer], x: ax.Tensor[ax.F32, Batch, Hidden]
) -> jax.Array:
    return jnp.mean(stack(x).array ** 2)


def main() -> None:
    stack = ax.nn.LayerStack.init(Block, 8, Layer, key=jax.random.key(0), remat=True)
    x = ax.normal(jax.random.key(1), (4, 16), Batch, Hidden)
    want_value, want_grad = jax.jit(jax.value_and_grad(loss))(stack, x)
    for kind in ("auto", "explicit"):
        t = AxisType.Explicit if kind == "explicit" else AxisType.Auto
        mesh = jax.make_mesh((8,), ("data",), axis_types=(t,))
        sharded = ax.shard(stack, {Layer: "data"}, mesh=mesh)
        for w in jax.tree.leaves(sharded, is_leaf=lambda a: isinstance(a, ax.Tensor)):
            assert w.axes[0] is Layer
            assert w.array.sharding.spec[0] == "data", w.array.sharding
            assert {s.data.shape[0] for s in w.array.addressable_shards} == {1}  # a layer each
        xs = ax.shard(x, {}, mesh=mesh)
        with jax.set_mesh(mesh):
            value, grad = jax.jit(jax.value_and_grad(loss))(sharded, xs)
        np.testing.assert_allclose(value, want_value, rtol=1e-5)
        for a, b in zip(jax.tree.leaves(grad), jax.tree.leaves(want_grad), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
        g = grad.layers.up.weight
        assert g.axes[0] is Layer
        print(f"PASS layer_stack_sharded_over_layer_{kind}", flush=True)
    cached_decode()


def cached_decode() -> None:
    """A stacked GPT-2 sharded over ``Layer`` (a layer per device) decodes with its cache as
    on one device: the cached call scans the stack's gathered parameters too."""
    from axjax.models import gpt2

    config = gpt2.GPT2Config(vocab_size=16, n_positions=16, n_embd=8, n_layer=8, n_head=2)
    model = gpt2.GPT2(config, key=jax.random.key(2), unroll=False)
    ids = ax.tensor(jax.random.randint(jax.random.key(3), (2, 6), 0, 16), Batch, gpt2.Pos)

    @eqx.filter_jit
    def decode(m: gpt2.GPT2, ids: ax.Tensor[ax.I32, Batch, gpt2.Pos]) -> jax.Array:
        cache = m.init_cache({Batch: 2}, 16)
        _, cache = m(ax.slice(ids, gpt2.Pos, 0, 5), cache=cache)
        logits, cache = m(ax.slice(ids, gpt2.Pos, 5, 6), cache=cache)
        return logits.array

    want = decode(model, ids)
    for kind in ("auto", "explicit"):
        t = AxisType.Explicit if kind == "explicit" else AxisType.Auto
        mesh = jax.make_mesh((8,), ("data",), axis_types=(t,))
        sharded = ax.shard(model, {Layer: "data"}, mesh=mesh)
        with jax.set_mesh(mesh):
            got = decode(sharded, ax.shard(ids, {}, mesh=mesh))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        print(f"PASS stacked_cached_decode_sharded_over_layer_{kind}", flush=True)


if __name__ == "__main__":
    main()
