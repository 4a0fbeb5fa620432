"""``python -m benchmarks.trace_depth``: how the first step's cost grows with model depth.

The first step of a jitted function is trace + lower + compile. axjax adds Python work to
the trace (a type rule and a ``jax.custom_vjp`` per op, each op's own backward), so its
share grows with the number of ops. This times, for the residual GELU MLP of
:mod:`benchmarks.large` at several depths (4 ops per block in the forward pass), the trace, the
lowering and the XLA compile of the gradient, hand-written JAX and axjax alternating, and
reports the medians and the axjax / JAX ratios. Each repeat builds a fresh ``jax.jit``;
library functions (``jnp``'s, axjax's backward rules) stay cached between repeats, as they
do in a process that has run anything before.

Example:
    .venv/bin/python -m benchmarks.trace_depth --depths 8,32,128
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import jax

from .large import PRESETS, mlp_block

__all__ = ["first_step_parts", "main"]


def first_step_parts(fn: Any, args: tuple[Any, ...]) -> dict[str, float]:
    """Seconds to trace, lower and compile ``fn`` (a fresh ``jax.jit``) on ``args``."""
    t0 = time.perf_counter()
    traced = fn.trace(*args)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    lowered.compile()
    t3 = time.perf_counter()
    return {"trace": t1 - t0, "lower": t2 - t1, "compile": t3 - t2, "total": t3 - t0}


def bench_depth(layers: int, repeats: int) -> dict[str, dict[str, float]]:
    """Median seconds per part for each path at ``layers`` blocks (one warm-up first)."""
    sizes = replace(PRESETS["quick"], width=64, mlp_batch=32, layers=layers)
    times: dict[str, list[dict[str, float]]] = {"jax": [], "axjax": []}
    for r in range(repeats + 1):
        block = mlp_block(sizes, "f32", jax.random.key(r))  # fresh jits every repeat
        paths = {
            "jax": (block.grad_jax, block.args_jax),
            "axjax": (block.grad_axjax, block.args_axjax),
        }
        order = list(paths) if r % 2 else list(paths)[::-1]
        for k in order:
            parts = first_step_parts(*paths[k])
            if r:  # the first repeat warms the library caches
                times[k].append(parts)
    return {k: {p: statistics.median(t[p] for t in ts) for p in ts[0]} for k, ts in times.items()}


def markdown(res: dict[int, dict[str, dict[str, float]]]) -> str:
    lines = [
        "| blocks | axjax ops (forward) | JAX trace / lower / compile s | axjax trace / "
        "lower / compile s | trace ÷ JAX | first step ÷ JAX |",
        "|---|---|---|---|---|---|",
    ]
    for layers, r in res.items():
        j, a = r["jax"], r["axjax"]
        lines.append(
            f"| {layers} | {4 * layers + 3} | {j['trace']:.3f} / {j['lower']:.3f} / "
            f"{j['compile']:.3f} | {a['trace']:.3f} / {a['lower']:.3f} / {a['compile']:.3f} | "
            f"{a['trace'] / j['trace']:.2f} | {a['total'] / j['total']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[int, dict[str, dict[str, float]]]:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.trace_depth",
        description=__doc__.split("\n")[0] if __doc__ else None,
    )
    p.add_argument("--depths", default="8,32,128", help="comma-separated block counts")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    res = {int(d): bench_depth(int(d), args.repeats) for d in args.depths.split(",")}
    print(markdown(res))
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
