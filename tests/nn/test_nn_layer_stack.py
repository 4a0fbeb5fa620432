"""``ax.nn.LayerStack``: blocks stacked along a named axis, called as one scan.

The call must equal the blocks called in a Python loop (values and gradients, with every
remat policy), compile to one loop whatever the depth, keep its errors axjax's own, and
its stacked weights (a real ``Layer`` axis) must round-trip through safetensors and orbax.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from axjax.nn import _remat, _stack
from tests.nn.helpers import Batch, Hidden, In, close, rand

Layer = ax.nn.Layer


class Residual(eqx.Module):
    """``x + W2 gelu(W1 ln(x))`` on ``[Batch, Hidden]``: a block that keeps its input's type."""

    ln: ax.nn.LayerNorm[ax.F32, Hidden]
    up: ax.nn.Affine[ax.F32, Hidden, In]
    down: ax.nn.Affine[ax.F32, In, Hidden]
    scale: float = 1.0  # a plain field: static in the stack, not scanned

    def __init__(self, key: jax.Array, width: int = 6) -> None:
        k1, k2 = jax.random.split(key)
        self.ln = ax.nn.LayerNorm(Hidden, 4)
        self.up = ax.nn.Affine(Hidden, In, 4, width, key=k1)
        self.down = ax.nn.Affine(In, Hidden, width, 4, key=k2)

    def __call__(
        self, x: ax.Tensor[ax.F32, Batch, Hidden], *, key: jax.Array | None = None
    ) -> ax.Tensor[ax.F32, Batch, Hidden]:
        h = ax.gelu(self.up(self.ln(x)))
        if key is not None:  # dropout-like noise: shows which key each layer got
            h = h * ax.tensor(jax.random.uniform(key, h.shape), *h.axes)
        return x + self.down(h) * self.scale


def _stack_of(n: int, remat: Any = False) -> ax.nn.LayerStack[Residual, ax.nn.Layer]:
    return ax.nn.LayerStack.init(Residual, n, Layer, key=jax.random.key(0), remat=remat)


def _loop(stack: ax.nn.LayerStack[Any, Any], x: Any, key: jax.Array | None = None) -> Any:
    keys = [None] * len(stack) if key is None else list(jax.random.split(key, len(stack)))
    for block, k in zip(stack.unstack(), keys, strict=True):
        x = block(x, key=k)
    return x


X = rand((3, 4), Batch, Hidden, seed=1)


def test_init_stacks_every_parameter_along_layer_with_its_own_key() -> None:
    stack = _stack_of(5)
    assert len(stack) == 5
    for t in jax.tree.leaves(stack, is_leaf=lambda t: isinstance(t, ax.Tensor)):
        assert t.axes[0] is Layer and t.shape[0] == 5
    assert stack.layers.up.weight.axes == (Layer, In, Hidden)
    w = np.asarray(stack.layers.up.weight.array)
    assert not np.allclose(w[0], w[1])  # each block made with its own key
    first = stack[0]
    assert isinstance(first, Residual) and first.up.weight.axes == (In, Hidden)
    close(stack[-1].up.weight.array, w[4])
    back = ax.nn.LayerStack.from_layers(stack.unstack(), Layer)
    assert bool(eqx.tree_equal(back, stack))


def test_the_scan_equals_the_blocks_in_a_loop() -> None:
    stack = _stack_of(3)  # depth 1 too: tests/train/test_transformer_example.py
    close(stack(X).array, _loop(stack, X).array)
    key = jax.random.key(7)  # one key per layer, as split(key, n) gives them in a loop
    close(stack(X, key=key).array, _loop(stack, X, key).array)
    raw = jax.random.PRNGKey(7)  # a raw uint32 key, as well
    close(stack(X, key=raw).array, _loop(stack, X, raw).array)


def _kept_and_grads(stack: Any) -> tuple[int, list[Any]]:
    params, static = eqx.partition(stack, eqx.is_array)

    def loss(p: Any) -> jax.Array:
        return jnp.sum(eqx.combine(p, static)(X).array ** 2)

    kept = jax.eval_shape(lambda p: jax.vjp(loss, p)[1], params)
    grads = jax.jit(jax.grad(loss))(params)
    return sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(kept)), jax.tree.leaves(grads)


#: every remat setting: off, on, and each named policy of ``ax.nn.remat``
REMATS: list[Any] = [False, True, *_remat._POLICIES]


@pytest.fixture(scope="module")
def no_remat() -> tuple[int, list[Any]]:
    return _kept_and_grads(_stack_of(3))


@pytest.mark.parametrize("remat", REMATS, ids=str)
def test_remat_policies_keep_the_gradients(remat: Any, no_remat: tuple[int, list[Any]]) -> None:
    kept, grads = _kept_and_grads(_stack_of(3, remat))
    kept0, grads0 = no_remat
    for a, b in zip(grads0, grads, strict=True):
        close(b, a, 1e-5)
    if remat in (True, "nothing"):
        assert kept < kept0  # only each layer's input is kept for the backward


def test_remat_is_what_reduces_the_kept_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation: with ``jax.checkpoint`` taken out of the stack, remat keeps as much as no
    remat, so the check above would fail."""

    def kept(stack: Any) -> int:
        p, s = eqx.partition(stack, eqx.is_array)
        out = jax.eval_shape(
            lambda q: jax.vjp(lambda r: jnp.sum(eqx.combine(r, s)(X).array), q)[1], p
        )
        return sum(a.size for a in jax.tree.leaves(out))

    assert kept(_stack_of(3, True)) < kept(_stack_of(3))
    monkeypatch.setattr(_stack.jax, "checkpoint", lambda f, **_: f)
    assert kept(_stack_of(3, True)) == kept(_stack_of(3))


def _scans(jaxpr: Any) -> int:
    return sum(e.primitive.name == "scan" for e in jaxpr.eqns)


def test_one_loop_whatever_the_depth() -> None:
    def program(n: int) -> Any:
        return jax.make_jaxpr(lambda s, x: s(x).array)(_stack_of(n), X).jaxpr

    short, deep = program(2), program(24)
    assert _scans(short) == _scans(deep) == 1
    assert len(short.eqns) == len(deep.eqns)  # the block is traced once, not 24 times


def test_extra_arguments_go_to_every_layer() -> None:
    class Gated(eqx.Module):
        w: ax.Tensor[ax.F32, Hidden]

        def __call__(
            self, x: ax.Tensor[ax.F32, Batch, Hidden], gate: ax.Tensor[ax.F32, Batch, Hidden]
        ) -> ax.Tensor[ax.F32, Batch, Hidden]:
            return x * gate + ax.broadcast(self.w, x)

    stack = ax.nn.LayerStack.init(
        lambda k: Gated(ax.tensor(jax.random.normal(k, (4,)), Hidden)), 3, key=jax.random.key(2)
    )
    gate = rand((3, 4), Batch, Hidden, seed=5)
    want = X
    for block in stack.unstack():
        want = block(want, gate)
    close(stack(X, gate).array, want.array)


def test_the_block_must_return_its_input_type() -> None:
    class Widen(eqx.Module):
        lin: ax.nn.Affine[ax.F32, Hidden, In]

        def __call__(self, x: Any) -> Any:
            return self.lin(x)

    stack = ax.nn.LayerStack.init(
        lambda k: Widen(ax.nn.Affine(Hidden, In, 4, 4, key=k)), 2, key=jax.random.key(0)
    )
    with pytest.raises(
        ax.AxisError,
        match=r"LayerStack\(over=Layer\): the block returned \(Tensor\[F32, Batch=3, In=4\]\) "
        r"for the input \(x=Tensor\[F32, Batch=3, Hidden=4\]\); a stacked block must return "
        r"what it is given",
    ):
        stack(X)


def test_errors_name_the_layer_stack_and_the_fix() -> None:
    with pytest.raises(ValueError, match=r"LayerStack.init: n must be a positive int"):
        ax.nn.LayerStack.init(Residual, 0, key=jax.random.key(0))
    with pytest.raises(
        ValueError, match=r"LayerStack: remat must be one of 'nothing', .*, got 'dot'"
    ):
        ax.nn.LayerStack(_stack_of(2).layers, Layer, remat="dot")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"from_layers: give at least one layer"):
        ax.nn.LayerStack.from_layers([], Layer)
    blocks = [Residual(jax.random.key(0)), Residual(jax.random.key(1), width=7)]
    with pytest.raises(ValueError, match=r"layer 1 differs from layer 0 .* copies of one block"):
        ax.nn.LayerStack.from_layers(blocks, Layer)
    with pytest.raises(
        ax.AxisError,
        match=r"LayerStack: the parameter ln.weight is Tensor\[F32, Hidden=4\], without the "
        r"stacking axis Layer first \(build the stack with LayerStack.init",
    ):
        ax.nn.LayerStack(blocks[0], Layer)
    bare = eqx.tree_at(lambda b: b.ln.weight, _stack_of(2).layers, jnp.ones((2, 4)))
    with pytest.raises(TypeError, match=r"field ln.weight is a bare array"):
        ax.nn.LayerStack(bare, Layer)
    with pytest.raises(TypeError, match=r"the input must be a Tensor or a pytree of Tensors"):
        _stack_of(2)(X.array)  # type: ignore[arg-type]
    with pytest.raises(IndexError, match=r"layer 2 is out of range for 2 layers"):
        _stack_of(2)[2]


def test_a_graph_of_the_stack_compiles_to_the_eager_result() -> None:
    stack = _stack_of(3)
    x = ax.Input(ax.F32, Batch, Hidden, sizes={Hidden: 4}, name="x")
    y = ax.as_params(stack)(x)
    assert y.axes == (Batch, Hidden)
    close(ax.compile(y, inputs=[x])(X).array, stack(X).array)
    with pytest.raises(TypeError, match=r"key= is for a call on Tensors, not on graph nodes"):
        ax.as_params(stack)(x, key=jax.random.key(0))
    with pytest.raises(TypeError, match=r"remat=True is for a call on Tensors; on graph nodes"):
        ax.as_params(_stack_of(3, True))(x)


def test_a_precision_policy_casts_the_stack() -> None:
    policy = ax.nn.Policy.mixed(ax.BF16)
    stack = policy.cast_to_compute(_stack_of(2))
    assert stack.layers.up.weight.dtype is ax.BF16
    out = stack(ax.astype(X, ax.BF16))
    assert out.dtype is ax.BF16 and out.axes == (Batch, Hidden)


def test_stacked_weights_round_trip_through_safetensors(tmp_path: Path) -> None:
    stack = _stack_of(3)
    ax.nn.save_safetensors(stack, tmp_path / "s.safetensors")
    loaded = ax.nn.load_safetensors(_stack_of(3, True), tmp_path / "s.safetensors")
    assert loaded.layers.up.weight.axes == (Layer, In, Hidden)
    assert bool(eqx.tree_equal(loaded.layers, stack.layers))
    with pytest.raises(ax.nn.SafetensorsError, match=r"Layer"):
        ax.nn.load_safetensors(_stack_of(4), tmp_path / "s.safetensors")


def test_stacked_weights_round_trip_through_orbax(tmp_path: Path) -> None:
    stack = _stack_of(3)
    ax.train.save_sharded(tmp_path / "ckpt", {"model": stack}, step=3)
    loaded, _ = ax.train.load_sharded(tmp_path / "ckpt", {"model": _stack_of(3)})
    got = loaded["model"]
    assert got.layers.down.weight.axes == (Layer, Hidden, In)
    assert bool(eqx.tree_equal(got.layers, stack.layers))
