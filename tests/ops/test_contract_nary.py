"""n-ary natural contraction ``ax.contract(a, b, c, ..., over=...)``.

Random networks of 3-6 tensors with random axis orders: values against ``jnp.einsum``,
gradients (the op's own backward, a reverse walk of the contraction tree) against
``jax.grad`` of ``jnp.einsum`` and against finite differences in float64; the rules
(an axis in three operands needs ``over=``); the graph path; the binary form untouched.
"""

from __future__ import annotations

import string
from typing import Any, final

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import axjax as ax
from axjax.ops import _contract


@final
class P0(ax.Axis): ...


@final
class P1(ax.Axis): ...


@final
class P2(ax.Axis): ...


@final
class P3(ax.Axis): ...


@final
class P4(ax.Axis): ...


@final
class P5(ax.Axis): ...


@final
class P6(ax.Axis): ...


@final
class F0(ax.Axis): ...


@final
class F1(ax.Axis): ...


@final
class N(ax.Axis): ...


CHAIN = (P0, P1, P2, P3, P4, P5, P6)
FREE = (F0, F1)
Axes = tuple[type[ax.Axis], ...]


def _network(rng: np.random.Generator, batched: bool) -> tuple[list[Axes], Axes | None]:
    """A random network of 3-6 operands: a chain (each consecutive pair shares an axis),
    plus a random extra bond, free axes, and with ``batched`` an axis ``N`` in every
    operand kept (``over=`` the bonds) or, at random, summed too."""
    n = int(rng.integers(3, 7))
    ops: list[list[type[ax.Axis]]] = [[] for _ in range(n)]
    for k in range(n - 1):  # the chain's bonds
        ops[k].append(CHAIN[k])
        ops[k + 1].append(CHAIN[k])
    i, j = sorted(rng.choice(n, size=2, replace=False))
    if j - i > 1:  # a loop closing part of the chain
        ops[i].append(CHAIN[n - 1])
        ops[j].append(CHAIN[n - 1])
    for f in FREE[: int(rng.integers(0, 3))]:
        ops[int(rng.integers(0, n))].append(f)
    over: Axes | None = None
    if batched:
        for o in ops:
            o.append(N)
        bonds = tuple(a for a in CHAIN if sum(a in o for o in ops) == 2)
        over = bonds + ((N,) if rng.random() < 0.5 else ())
    return [tuple(rng.permutation(np.array(o, dtype=object))) for o in ops], over


def _einsum(axes: list[Axes], out: Axes) -> str:
    letters: dict[type[ax.Axis], str] = {}
    for xa in axes:
        for a in xa:
            letters.setdefault(a, string.ascii_letters[len(letters)])
    return (
        ",".join("".join(letters[a] for a in xa) for xa in axes)
        + "->"
        + "".join(letters[a] for a in out)
    )


def _case(seed: int, batched: bool) -> tuple[list[Axes], Axes | None, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    axes, over = _network(rng, batched)
    sizes = {a: int(rng.integers(1, 5)) for a in (*CHAIN, *FREE, N)}
    values = [rng.normal(size=tuple(sizes[a] for a in xa)) for xa in axes]
    return axes, over, values


def _expected_axes(axes: list[Axes], over: Axes | None) -> Axes:
    seen: list[type[ax.Axis]] = []
    for xa in axes:
        seen += [a for a in xa if a not in seen]
    if over is None:
        return tuple(a for a in seen if sum(a in xa for xa in axes) == 1)
    return tuple(a for a in seen if a not in over)


#: (seed, batched): 24 random networks of 3 to 6 operands (about 20 s on 2 cores)
NETWORKS = [(s, b) for s in range(12) for b in (False, True)]


@pytest.mark.parametrize(("seed", "batched"), NETWORKS)
def test_random_networks_match_einsum(seed: int, batched: bool) -> None:
    axes, over, values = _case(seed, batched)
    out_axes = _expected_axes(axes, over)
    eq = _einsum(axes, out_axes)
    cot = np.random.default_rng(seed + 100).normal(
        size=tuple(values[0].shape[0:0])
        + tuple(
            next(v.shape[xa.index(a)] for v, xa in zip(values, axes) if a in xa) for a in out_axes
        )
    )

    def ours(*arrays: jax.Array) -> jax.Array:
        y = ax.contract(*(ax.tensor(v, *xa) for v, xa in zip(arrays, axes)), over=over)
        assert y.axes == out_axes
        return jnp.sum(jnp.sin(y.array) * cot)

    def oracle(*arrays: jax.Array) -> jax.Array:
        return jnp.sum(jnp.sin(jnp.einsum(eq, *arrays)) * cot)

    with jax.enable_x64(True):
        arrays = [jnp.asarray(v) for v in values]
        y = ax.contract(*(ax.tensor(v, *xa) for v, xa in zip(arrays, axes)), over=over)
        np.testing.assert_allclose(y.array, jnp.einsum(eq, *arrays), rtol=1e-10, atol=1e-12)
        argnums = tuple(range(len(arrays)))
        got = jax.jit(jax.grad(ours, argnums))(*arrays)
        want = jax.jit(jax.grad(oracle, argnums))(*arrays)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11)
        if len(arrays) < 5:  # finite differences through the op's own backward
            check_grads(jax.jit(ours), tuple(arrays), order=1, modes=["rev"], eps=1e-6, rtol=1e-6)


def _t(shape: tuple[int, ...], *axes: type[ax.Axis]) -> ax.Tensor[Any, *tuple[Any, ...]]:
    return ax.tensor(jnp.ones(shape, jnp.float32), *axes)


def test_order_is_chosen_for_cost() -> None:
    """A chain whose cheap order is right to left: the first pair is (b, c), not (a, b)."""
    a, b, c = _t((100, 100), P0, P1), _t((100, 100), P1, P2), _t((100, 1), P2, P3)
    steps = _contract._tree(
        tuple(x.axes for x in (a, b, c)), tuple(x.shape for x in (a, b, c)), (P0, P3)
    )
    assert [(s[0], s[1]) for s in steps] == [(1, 2), (0, 3)]
    assert ax.contract(a, b, c).axes == (P0, P3)


def test_one_program_eagerly_and_inside_jit() -> None:
    a, b, c = _t((2, 3), P0, P1), _t((3, 4), P1, P2), _t((4, 5), P2, P3)
    text = jax.jit(lambda a, b, c: ax.contract(a, b, c)).lower(a, b, c).as_text()
    assert text.count("stablehlo.dot_general") == 2
    assert "custom_call" not in text


def test_an_axis_in_three_operands_needs_over() -> None:
    a, b, c = _t((2, 3), N, P0), _t((2, 4), N, P1), _t((2,), N)
    with pytest.raises(
        ax.AxisError,
        match=(
            r"^Cannot apply Contract to Tensor\[F32, N=2, P0=3\] and Tensor\[F32, N=2, P1=4\] "
            r"and Tensor\[F32, N=2\]: axis N is in 3 operands \(first, second and third\), so "
            r"which two sum it is ambiguous \(sum it with over=N, or keep it batched by naming "
            r"the summed axes in over=\)$"
        ),
    ):
        ax.contract(a, b, c)
    summed = ax.contract(a, b, c, over=N)
    assert summed.axes == (P0, P1) and float(summed.array[0, 0]) == 2.0
    kept = ax.contract(a, _t((2, 3, 4), N, P0, P1), _t((2, 4), N, P1), over=(P0, P1))
    assert kept.axes == (N,) and float(kept.array[0]) == 12.0


def test_over_names_an_axis_two_operands_share() -> None:
    a, b, c = _t((2, 3), P0, P1), _t((3, 4), P1, P2), _t((4, 5), P2, P3)
    with pytest.raises(
        ax.AxisError,
        match=r"P3 is an axis of only the third operand \("
        "contract sums axes the operands share\\)$",
    ):
        ax.contract(a, b, c, over=P3)
    with pytest.raises(ax.AxisError, match="N is an axis of no operand"):
        ax.contract(a, b, c, over=(P1, N))
    with pytest.raises(ax.AxisError, match="dtypes F32 and I32 differ"):
        ax.contract(a, b, ax.zeros((4,), P2, dtype=ax.I32))
    with pytest.raises(ax.AxisError, match="axis P2 has size 4 in one operand and 6"):
        ax.contract(a, b, _t((6,), P2))
    with pytest.raises(TypeError, match=r"^Contract needs two operands or more, got 1"):
        ax.contract(a)
    with pytest.raises(
        ax.AxisError,
        match=(
            r"^Cannot apply Contract: P1 is an axis label among the operands; `over` is "
            r"keyword-only \(ax.contract\(a, b, over=P1\)\)$"
        ),
    ):
        ax.contract(a, b, P1)  # type: ignore[arg-type]  # over is keyword-only


def test_binary_contract_is_unchanged() -> None:
    a, b = _t((2, 3), P0, P1), _t((3, 4), P1, P2)
    text = jax.jit(lambda a, b: ax.contract(a, b)).lower(a, b).as_text()
    assert text.count("stablehlo.dot_general") == 1 and "transpose" not in text
    assert ax.contract(a, b, over=P1).axes == (P0, P2)


def test_graph_nodes_contract_and_compile() -> None:
    x = ax.Input(ax.F32, N, P0, sizes={P0: 3})
    w = ax.Param(ax.ones((3, 4), P0, P1), name="w")
    v = ax.Param(ax.ones((4, 2), P1, P2), name="v")
    y = ax.contract(x, w, v)
    assert isinstance(y, ax.Apply) and y.axes == (N, P2) and len(y.args) == 3
    xs = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = ax.compile(y, inputs=[x])(xs)
    np.testing.assert_allclose(out.array, xs @ np.ones((3, 4)) @ np.ones((4, 2)), rtol=1e-6)
    loss = ax.sum(ax.sum(y, P2), N)
    _, grads = ax.value_and_grad(loss, wrt=[w], inputs=[x])(xs)
    want = jax.grad(lambda w_: jnp.sum(jnp.asarray(xs) @ w_ @ jnp.ones((4, 2))))(jnp.ones((3, 4)))
    np.testing.assert_allclose(grads[0].array, want, rtol=1e-6)


def test_sum_product_example_matches_enumeration() -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[2] / "examples" / "sum_product" / "marginals.py"
    spec = importlib.util.spec_from_file_location("sum_product_marginals", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert example.main([]) < 1e-5
    phi, psi = example.random_factors(jax.random.key(0))
    ends = example.chain_ends(psi)
    want = np.einsum(
        "ab,bc,cd->ad",
        *(
            np.asarray(psi[e].array)
            for e in (
                (example.Rain, example.Wet),
                (example.Wet, example.Sprinkler),
                (example.Sprinkler, example.Season),
            )
        ),
    )
    assert ends.axes == (example.Rain, example.Season)
    np.testing.assert_allclose(ends.array, want, rtol=1e-5)
