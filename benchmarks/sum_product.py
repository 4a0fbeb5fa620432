"""n-ary ``ax.contract`` on sum-product marginals, against hand-written JAX.

``python -m benchmarks.sum_product [--repeat 50]`` times, interleaved, in one run:

- ``chain``: the marginal of the first variable of a chain of ``N`` variables (domain
  ``D``) with evidence on the last: ``ψ01 ⋈ ψ12 ⋈ … ⋈ e``, a natural contraction (every
  inner variable is in exactly two factors). The naive left-to-right chain multiplies the
  ``D × D`` matrices first (``O(N·D³)``); the right order is matrix-vector products
  (``O(N·D²)``): order matters here.
- ``tree``: the marginal of the root of a random tree of ``T`` variables with unary and
  pairwise factors (a variable in three or more factors: ``over=`` the others).
  ``optimize=True`` is opt_einsum's exhaustive ``optimal`` search, exponential in the number
  of operands (11 operands: about 100 s per search); ``ax.contract`` uses ``auto``, which
  here also finds a cheaper order (fewer flops by opt_einsum's count).

Each is computed by ``ax.contract(*factors)``, by ``jnp.einsum(..., optimize=True)`` and by
the naive left-to-right pairwise chain in hand-written JAX, all under ``jax.jit`` (and,
for the first two, eagerly: ``ax.contract`` memoises its path, ``jnp.einsum`` searches it
on every call). ``axjax(arrays) jit`` takes arrays and names them inside the jitted function:
the same compiled program as ``axjax jit`` (and as einsum's: the same ``dot_general``\ s),
without flattening Tensor arguments at each call. Reported: median and best milliseconds
and the ratio of medians to ``jnp.einsum``'s. The figures depend on the machine and its
load; run it on an idle one.
"""

from __future__ import annotations

import argparse
import statistics
import string
import time
from collections.abc import Callable
from typing import Any, final

import jax
import jax.numpy as jnp
import numpy as np

import axjax as ax

Array = jax.Array


def _axes(n: int) -> list[type[ax.Axis]]:
    """``n`` distinct axis labels ``X0 .. X{n-1}`` (made once per name)."""
    return [_label(f"X{i}") for i in range(n)]


_LABELS: dict[str, type[ax.Axis]] = {}


def _label(name: str) -> type[ax.Axis]:
    if name not in _LABELS:
        _LABELS[name] = final(type(name, (ax.Axis,), {}))
    return _LABELS[name]


def chain_problem(n: int, d: int, seed: int = 0) -> tuple[list[np.ndarray], list[str], str]:
    """Factors of the chain, their einsum subscripts and the output's."""
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(0.0, 2.0 / d, size=(d, d)).astype(np.float32) for _ in range(n - 1)]
    arrays.append(rng.uniform(0.0, 1.0, size=(d,)).astype(np.float32))
    subs = [string.ascii_letters[k] + string.ascii_letters[k + 1] for k in range(n - 1)]
    subs.append(string.ascii_letters[n - 1])
    return arrays, subs, "a"


def tree_problem(t: int, d: int, seed: int = 0) -> tuple[list[np.ndarray], list[str], str]:
    """A random tree over ``t`` variables, a unary factor each and a pairwise factor per
    edge, written root first, depth first (``φ0, ψ01, φ1, ψ13, φ3, …``: the order a naive
    left-to-right chain handles best, carrying only the open ancestors)."""
    rng = np.random.default_rng(seed)
    children: dict[int, list[int]] = {v: [] for v in range(t)}
    for v in range(1, t):
        children[int(rng.integers(0, v))].append(v)
    arrays, subs = [], []

    def visit(v: int) -> None:
        arrays.append(rng.uniform(0.5, 1.5, size=(d,)).astype(np.float32))
        subs.append(string.ascii_letters[v])
        for c in children[v]:
            arrays.append(rng.uniform(0.0, 2.0 / d, size=(d, d)).astype(np.float32))
            subs.append(string.ascii_letters[v] + string.ascii_letters[c])
            visit(c)

    visit(0)
    return arrays, subs, "a"


def naive(subs: list[str], out: str) -> Callable[..., Array]:
    """Left to right, one pairwise einsum at a time, keeping what is still needed."""

    def run(*arrays: Array) -> Array:
        cur, cur_sub = arrays[0], subs[0]
        for k in range(1, len(arrays)):
            later = set(out).union(*subs[k + 1 :])
            keep = "".join(c for c in dict.fromkeys(cur_sub + subs[k]) if c in later)
            cur = jnp.einsum(f"{cur_sub},{subs[k]}->{keep}", cur, arrays[k])
            cur_sub = keep
        return jnp.einsum(f"{cur_sub}->{out}", cur)

    return run


def variants(
    arrays: list[np.ndarray], subs: list[str], out: str
) -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """Each implementation with its arguments (Tensors for axjax, arrays for the others)."""
    letters = sorted(set("".join(subs)))
    labels = dict(zip(letters, _axes(len(letters)), strict=True))
    jarrays = tuple(jnp.asarray(a) for a in arrays)
    tensors = tuple(
        ax.tensor(a, *(labels[c] for c in s)) for a, s in zip(jarrays, subs, strict=True)
    )
    counts = {c: sum(c in s for s in subs) for c in letters}
    over = tuple(labels[c] for c in letters if c not in out)
    needs_over = any(n > 2 for n in counts.values())
    eq = ",".join(subs) + "->" + out

    def axjax_fn(*ts: Any) -> Array:
        return ax.contract(*ts, over=over if needs_over else None).array

    def axjax_arrays(*xs: Array) -> Array:  # the same, Tensors built inside the jit
        return axjax_fn(*(ax.tensor(x, *t.axes) for x, t in zip(xs, tensors, strict=True)))

    def einsum_fn(*xs: Array) -> Array:
        return jnp.einsum(eq, *xs, optimize=True)

    return {
        "axjax jit": (jax.jit(axjax_fn), tensors),
        "axjax(arrays) jit": (jax.jit(axjax_arrays), jarrays),
        "einsum jit": (jax.jit(einsum_fn), jarrays),
        "naive jit": (jax.jit(naive(subs, out)), jarrays),
        "axjax eager": (axjax_fn, tensors),
        "einsum eager": (einsum_fn, jarrays),
    }


def bench(
    problem: str, arrays: list[np.ndarray], subs: list[str], out: str, repeat: int
) -> dict[str, tuple[float, float]]:
    """Median and best milliseconds per call of each variant, interleaved; checks that
    they agree."""
    runs = variants(arrays, subs, out)
    ref = np.asarray(runs["einsum jit"][0](*runs["einsum jit"][1]))
    for name, (fn, args) in runs.items():
        got = np.asarray(fn(*args))
        np.testing.assert_allclose(got, ref, rtol=2e-3, err_msg=f"{problem}/{name}")
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, (fn, args) in runs.items():
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times[name].append(time.perf_counter() - t0)
    return {name: (statistics.median(ts) * 1e3, min(ts) * 1e3) for name, ts in times.items()}


def main(argv: list[str] | None = None) -> dict[str, dict[str, tuple[float, float]]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--chain", type=int, default=8, help="variables in the chain")
    parser.add_argument(
        "--tree",
        type=int,
        default=5,
        help="variables in the tree (einsum's optimize=True searches every "
        "order: 6 variables, 11 factors, take it minutes per call)",
    )
    parser.add_argument("--domain", type=int, default=256, help="values per variable")
    args = parser.parse_args(argv)
    problems = {
        f"chain N={args.chain} D={args.domain}": chain_problem(args.chain, args.domain),
        f"tree T={args.tree} D={args.domain // 4}": tree_problem(args.tree, args.domain // 4),
    }
    results = {}
    for name, (arrays, subs, out) in problems.items():
        ms = bench(name, arrays, subs, out, args.repeat)
        results[name] = ms
        print(
            f"\n{name}  (ms per call, median and best of {args.repeat}; ratio of medians "
            "to einsum's in the same mode)"
        )
        for variant, (med, best) in ms.items():
            ratio = med / ms[f"einsum {variant.split()[1]}"][0]
            print(f"  {variant:18} {med:9.3f} {best:9.3f}   {ratio:6.2f}x")
    return results


if __name__ == "__main__":
    main()
