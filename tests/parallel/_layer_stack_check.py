"""``ax.nn.LayerStack`` sharded over its ``Layer`` axis (FSDP over layers), on 8 simulated
CPU devices. Checks of ``_server.py`` (with ``_checks.py``'s, in one process: JAX fixes the
device count when it starts); ``python tests/parallel/_layer_stack_check.py [NAME...]`` runs
them alone. Each kind of mesh (Auto, Explicit) is a check of its own; they share the
one-device references (computed once, :func:`references`)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

jax.config.update("jax_num_cpu_devices", 8)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import axjax as ax  # noqa: E402
from axjax.models import gpt2  # noqa: E402
from tests.axes import Batch, Hidden, Pixel  # noqa: E402

Layer = ax.nn.Layer
KINDS = ("auto", "explicit")


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


def mesh(kind: str) -> jax.sharding.Mesh:
    t = AxisType.Explicit if kind == "explicit" else AxisType.Auto
    return jax.make_mesh((8,), ("data",), axis_types=(t,))


@eqx.filter_jit
def decode(m: gpt2.GPT2, ids: ax.Tensor[ax.I32, Batch, gpt2.Pos]) -> jax.Array:
    cache = m.init_cache({Batch: 2}, 16)
    _, cache = m(ax.slice(ids, gpt2.Pos, 0, 5), cache=cache)
    logits, cache = m(ax.slice(ids, gpt2.Pos, 5, 6), cache=cache)
    return logits.array


@functools.cache
def references() -> dict[str, Any]:
    """The stack, its input, its loss and gradients on one device; the stacked GPT-2, its
    ids and its cached decode on one device (once for both kinds of mesh)."""
    stack = ax.nn.LayerStack.init(Block, 8, Layer, key=jax.random.key(0), remat=True)
    x = ax.normal(jax.random.key(1), (4, 16), Batch, Hidden)
    config = gpt2.GPT2Config(vocab_size=16, n_positions=16, n_embd=8, n_layer=8, n_head=2)
    model = gpt2.GPT2(config, key=jax.random.key(2), unroll=False)
    ids = ax.tensor(jax.random.randint(jax.random.key(3), (2, 6), 0, 16), Batch, gpt2.Pos)
    value, grad = jax.jit(jax.value_and_grad(loss))(stack, x)
    return {
        "stack": stack,
        "x": x,
        "value": value,
        "grad": grad,
        "model": model,
        "ids": ids,
        "decoded": decode(model, ids),
    }


def layer_stack_sharded_over_layer(kind: str) -> None:
    """Each device holds one layer of every stacked parameter; the scanned forward and its
    gradients equal one device's."""
    ref = references()
    m = mesh(kind)
    sharded = ax.shard(ref["stack"], {Layer: "data"}, mesh=m)
    for w in jax.tree.leaves(sharded, is_leaf=lambda a: isinstance(a, ax.Tensor)):
        assert w.axes[0] is Layer
        assert w.array.sharding.spec[0] == "data", w.array.sharding
        assert {s.data.shape[0] for s in w.array.addressable_shards} == {1}  # a layer each
    xs = ax.shard(ref["x"], {}, mesh=m)
    with jax.set_mesh(m):
        value, grad = jax.jit(jax.value_and_grad(loss))(sharded, xs)
    np.testing.assert_allclose(value, ref["value"], rtol=1e-5)
    for a, b in zip(jax.tree.leaves(grad), jax.tree.leaves(ref["grad"]), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert grad.layers.up.weight.axes[0] is Layer


def stacked_cached_decode_sharded_over_layer(kind: str) -> None:
    """A stacked GPT-2 sharded over ``Layer`` (a layer per device) decodes with its cache as
    on one device: the cached call scans the stack's gathered parameters too."""
    ref = references()
    m = mesh(kind)
    sharded = ax.shard(ref["model"], {Layer: "data"}, mesh=m)
    with jax.set_mesh(m):
        got = decode(sharded, ax.shard(ref["ids"], {}, mesh=m))
    np.testing.assert_allclose(got, ref["decoded"], rtol=1e-5, atol=1e-6)


#: the checks by name, a kind of mesh each
CHECKS: dict[str, Callable[[], None]] = {
    f"{fn.__name__}_{kind}": functools.partial(fn, kind)
    for fn in (layer_stack_sharded_over_layer, stacked_cached_decode_sharded_over_layer)
    for kind in KINDS
}


if __name__ == "__main__":
    from tests.parallel._checks import main

    sys.exit(1 if main(sys.argv[1:], CHECKS) else 0)
