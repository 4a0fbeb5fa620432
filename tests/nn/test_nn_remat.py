"""``ax.nn.remat``: same values and gradients (custom_vjp ops inside, attention included),
less compiled temporary memory, policies and errors."""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import jax
import numpy as np
import pytest

import axjax as ax
from tests.nn.helpers import Batch, Embed, Hidden, Time, close


class Block(eqx.Module):
    """Pre-norm residual block: causal attention, then a tanh MLP over ``Hidden``."""

    norm: ax.nn.LayerNorm
    attn: ax.nn.MultiheadAttention
    up: ax.nn.Affine[ax.F32, Embed, Hidden]
    down: ax.nn.Affine[ax.F32, Hidden, Embed]

    def __init__(self, key: jax.Array, width: int = 16, hidden: int = 64) -> None:
        k1, k2, k3 = jax.random.split(key, 3)
        self.norm = ax.nn.LayerNorm(Embed, width)
        self.attn = ax.nn.MultiheadAttention(
            Embed, width, num_heads=2, query_pos=Time, causal=True, key=k1
        )
        self.up = ax.nn.Affine(Embed, Hidden, width, hidden, key=k2)
        self.down = ax.nn.Affine(Hidden, Embed, hidden, width, key=k3)

    def __call__(self, x: Any) -> Any:
        x = x + self.attn(self.norm(x))
        return x + self.down(ax.tanh(self.up(x)))


def _stack(depth: int, remat: bool, policy: Any = None) -> list[Any]:
    blocks = [Block(k) for k in jax.random.split(jax.random.key(0), depth)]
    return [ax.nn.remat(b, policy) for b in blocks] if remat else blocks


def _loss(blocks: list[Any], x: Any) -> jax.Array:
    for b in blocks:
        x = b(x)
    return ax.sum(ax.square(x), (Batch, Time, Embed)).array


def _x(batch: int = 2, time: int = 8) -> Any:
    data = np.random.default_rng(0).normal(size=(batch, time, 16)).astype(np.float32)
    return ax.tensor(data, Batch, Time, Embed, dtype=ax.F32)


def test_remat_gives_the_same_values_and_gradients() -> None:
    x = _x()
    step = eqx.filter_jit(eqx.filter_value_and_grad(_loss))
    v0, g0 = step(_stack(1, False), x)
    v1, g1 = step(_stack(1, True, "dots"), x)
    close(v1, v0, 1e-5)
    leaves0, leaves1 = jax.tree.leaves(g0), jax.tree.leaves(g1)
    assert len(leaves0) == len(leaves1)
    for a, b in zip(leaves1, leaves0, strict=True):
        close(a, b, 1e-5)


def _residual_bytes(blocks: list[Any], x: Any) -> int:
    """Bytes the forward keeps for the backward: the leaves of ``jax.vjp``'s closure."""
    params, static = eqx.partition(blocks, eqx.is_array)
    vjp = jax.eval_shape(
        lambda p: jax.vjp(lambda q: _loss(eqx.combine(q, static), x), p)[1], params
    )
    return sum(math.prod(a.shape) * a.dtype.itemsize for a in jax.tree.leaves(vjp))


def test_remat_keeps_only_the_block_inputs_for_the_backward() -> None:
    # XLA's CPU pipeline merges the recomputation back into the forward (its compiled
    # memory analysis is the same with and without remat: benchmarks/transformer.py), so
    # the saving is checked where JAX makes it: the residuals of the backward
    x = _x(8, 32)
    plain = [_residual_bytes(_stack(d, False), x) for d in (2, 4)]
    remat = [_residual_bytes(_stack(d, True), x) for d in (2, 4)]
    assert plain[1] > 1.9 * plain[0]  # activations grow with depth
    assert remat[1] < 0.1 * plain[1], (remat, plain)


def test_remat_policies_and_errors() -> None:
    block = Block(jax.random.key(0))
    assert ax.nn.remat(block).policy is None
    assert ax.nn.remat(block, "dots").policy is (
        jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    )
    own = jax.checkpoint_policies.everything_saveable
    assert ax.nn.remat(block, own).policy is own
    with pytest.raises(
        ValueError,
        match="remat: policy must be one of 'nothing', 'dots', 'dots_with_batch', "
        "'everything', got 'some'",
    ):
        ax.nn.remat(Block(jax.random.key(0)), "some")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="remat: expected a callable module, got int"):
        ax.nn.remat(3)
