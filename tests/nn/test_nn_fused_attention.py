"""The fused attention op (``jax.nn.dot_product_attention``) against the einsum path: values
and gradients (its own backward, plain JAX autodiff, finite differences), masks, causality,
several batch axes in any order, heads, graphs, the dropout fallback and its errors."""

from __future__ import annotations

from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import axjax as ax
from axjax.nn._fused_attention import FusedAttention, default_attention_path
from tests.nn.helpers import Batch, Embed, Time, close

KeyPos, Head, HeadDim = ax.nn.KeyPos, ax.nn.Head, ax.nn.HeadDim
AnyT = ax.Tensor[Any, *tuple[Any, ...]]


@final
class Group(ax.Axis): ...


def _rand(shape: tuple[int, ...], *axes: type[ax.Axis], seed: int = 0) -> AnyT:
    data = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    return ax.tensor(data, *axes, dtype=ax.F32)


def _qkv() -> tuple[AnyT, AnyT, AnyT]:
    # two batch axes and the heads, each operand in its own axis order
    q = _rand((2, 5, 3, 4, 2), Batch, Time, Head, HeadDim, Group, seed=1)
    k = _rand((3, 2, 6, 2, 4), Head, Batch, KeyPos, Group, HeadDim, seed=2)
    v = _rand((2, 2, 6, 3, 4), Group, Batch, KeyPos, Head, HeadDim, seed=3)
    return q, k, v


def _mask() -> AnyT:
    m = np.random.default_rng(4).random((5, 3, 6)) > 0.4
    m[:, :, 0] = True  # every query sees at least one key
    return ax.tensor(m, Time, Head, KeyPos, dtype=ax.Bool)


def _attend(impl: str, mask: AnyT | None) -> Any:
    def f(qa: jax.Array, ka: jax.Array, va: jax.Array) -> jax.Array:
        q, k, v = _qkv()
        out = ax.nn.dot_product_attention(
            ax.tensor(qa, *q.axes),
            ax.tensor(ka, *k.axes),
            ax.tensor(va, *v.axes),
            over=HeadDim,
            key_pos=KeyPos,
            mask=mask,
            implementation=impl,
        )  # type: ignore[arg-type]
        return out.array

    return f


@pytest.mark.parametrize("masked", [False, True])
def test_fused_values_and_gradients_equal_the_einsum_path(masked: bool) -> None:
    q, k, v = _qkv()
    mask = _mask() if masked else None
    fused, einsum = _attend("fused", mask), _attend("einsum", mask)
    y = ax.nn.dot_product_attention(
        q, k, v, over=HeadDim, key_pos=KeyPos, mask=mask, implementation="fused"
    )
    assert y.axes == (Batch, Time, Head, Group, HeadDim)
    args = (q.array, k.array, v.array)
    w = jnp.asarray(np.random.default_rng(5).normal(size=y.shape), jnp.float32)

    def value_and_grads(f: Any) -> Any:
        return jax.jit(jax.value_and_grad(lambda *a: (f(*a) * w).sum(), argnums=(0, 1, 2)))(*args)

    close(y.array, einsum(*args), 1e-5)
    (vf, grads_f), (ve, grads_e) = value_and_grads(fused), value_and_grads(einsum)
    close(vf, ve, 1e-4)
    for gf, ge in zip(grads_f, grads_e, strict=True):
        close(gf, ge, 1e-5)
    if masked:  # the plain forward differentiated by JAX gives the same gradient
        with ax.jax_autodiff():
            _, grads_j = value_and_grads(fused)
        for gj, ge in zip(grads_j, grads_e, strict=True):
            close(gj, ge, 1e-5)


def test_the_op_backward_passes_finite_differences() -> None:
    q, k, v = _qkv()
    f = _attend("fused", _mask())
    check_grads(
        jax.jit(f), (q.array, k.array, v.array), order=1, modes=("rev",), atol=2e-2, rtol=2e-2
    )


def test_heads_go_to_the_heads_dimension_and_causal_needs_no_mask(key: jax.Array) -> None:
    calls: list[FusedAttention] = []
    real = FusedAttention.forward

    def spy(self: FusedAttention, *xs: AnyT) -> jax.Array:
        calls.append(self)
        return real(self, *xs)

    x = _rand((2, 7, 8), Batch, Time, Embed, seed=6)
    user_mask = ax.tensor(np.arange(7) != 3, KeyPos, dtype=ax.Bool)
    outs = {}
    for impl in ("einsum", "fused"):
        mha = ax.nn.MultiheadAttention(
            Embed, 8, num_heads=2, query_pos=Time, causal=True, implementation=impl, key=key
        )  # type: ignore[arg-type]
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(FusedAttention, "forward", spy)
            outs[impl] = eqx.filter_jit(
                eqx.filter_value_and_grad(
                    lambda m: ax.sum(m(x, mask=user_mask), (Batch, Time, Embed)).array
                )
            )(mha)
    assert len(calls) == 1 and calls[0].heads is Head and calls[0].causal
    close(outs["fused"][0], outs["einsum"][0], 1e-5)
    for gf, ge in zip(
        jax.tree.leaves(outs["fused"][1]), jax.tree.leaves(outs["einsum"][1]), strict=True
    ):
        close(gf, ge, 1e-5)


def test_dropout_keeps_the_einsum_path_and_auto_is_einsum_on_cpu(key: jax.Array) -> None:
    mha = ax.nn.MultiheadAttention(
        Embed, 8, num_heads=2, query_pos=Time, dropout_p=0.5, implementation="fused", key=key
    )
    x = _rand((2, 4, 8), Batch, Time, Embed)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(FusedAttention, "forward", lambda *a: pytest.fail("fused with dropout"))
        eqx.filter_jit(lambda m: m(x, key=jax.random.key(1), inference=False))(mha)
    assert default_attention_path() == ("einsum" if jax.default_backend() == "cpu" else "fused")


def test_fused_attention_in_a_graph() -> None:
    q, k, v = _qkv()
    nodes = [ax.Input(ax.F32, *t.axes) for t in (q, k, v)]
    out = ax.nn.dot_product_attention(*nodes, over=HeadDim, key_pos=KeyPos, implementation="fused")
    assert out.axes == (Batch, Time, Head, Group, HeadDim)
    run = ax.compile(out, inputs=nodes)
    close(run(q, k, v).array, _attend("einsum", None)(q.array, k.array, v.array), 1e-5)


def test_errors_name_the_problem() -> None:
    q, k, v = _qkv()
    v2 = ax.rename(v, Group, Embed)
    with pytest.raises(
        ax.AxisError,
        match=r"the value has axes \(Embed, Batch, KeyPos, Head, "
        r"HeadDim\), expected",
    ):
        ax.nn.dot_product_attention(q, k, v2, over=HeadDim, key_pos=KeyPos, implementation="fused")
    bad = ax.astype(_mask(), ax.I32)
    with pytest.raises(ax.AxisError, match="the mask must be Bool, got I32"):
        ax.nn.dot_product_attention(
            q, k, v, over=HeadDim, key_pos=KeyPos, mask=bad, implementation="fused"
        )
    with pytest.raises(ax.AxisError, match="dtypes BF16 and F32 differ"):
        ax.nn.dot_product_attention(
            ax.astype(q, ax.BF16), k, v, over=HeadDim, key_pos=KeyPos, implementation="fused"
        )
