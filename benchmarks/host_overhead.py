"""Host time per training-step call: axjax's recommended loop against an expert's (MNIST MLP).

``python -m benchmarks.host_overhead`` trains the MLP 784-300-100-10 with Adam on one
fixed, device-resident batch of 8 examples, so that the compute is negligible and what is
measured is what the Python thread spends per call: dispatch, the flatten of the
arguments and the unflatten of the results. The rows:

- ``expert``: hand-written JAX, the parameters a list of ``(W, b)`` tuples, optax Adam,
  one ``jax.jit`` with ``donate_argnums`` (``benchmarks.models._mlp.build_expert``);
- ``jax``: the same as JAX users usually write it (``W`` stored ``[in, out]``);
- ``axjax TrainStep``: the loop docs/training.md recommends, ``ax.train.TrainStep``;
- ``axjax modules under jax.jit``: the user's own ``jax.jit`` over the partitioned axjax
  modules and their Adam state: the cost of Equinox modules as ``jax.jit`` arguments
  (every module and Tensor flattened and unflattened in Python on every call);
- ``fit's leaves step``: the step ``ax.train.fit`` runs, called as ``fit`` calls it.

Each round runs one window of ``calls`` calls per row (rotated order). A window's figure is
the thread CPU time (``time.thread_time``) per call before the final wait, which other
load on the machine barely moves; wall time per call is reported beside it. The ratio to
``expert`` is taken within each round; every figure is the median [min] over rounds. The
second table counts the pytree nodes and leaves of one call's arguments and times their
flatten and unflatten alone; the third times the Tensor pytree node.

The target: the recommended loop costs at most ``TARGET`` × the expert's host time.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import numpy as np
import optax

import axjax as ax

from ._common import Runner, summary
from ._harness import warm_up
from .models import _mlp

__all__ = ["ROWS", "TARGET", "bench_host", "main", "markdown", "pytree_costs", "tensor_node"]

#: the recommended loop's host µs per call may be at most this × the expert's
TARGET = 1.10

#: row label -> the MLP runner it times
ROWS: dict[str, Callable[[dict[str, np.ndarray]], Runner]] = {
    "expert": _mlp.build_expert,
    "jax": _mlp.build_jax,
    "axjax TrainStep": _mlp.build_axjax,
    "axjax modules under jax.jit": _mlp.build_axjax_jit,
    "fit's leaves step": _mlp.build_fit,
}
RECOMMENDED = "axjax TrainStep"


def _batch(batch: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.random((batch, 28, 28), dtype=np.float32)
    return x, rng.integers(0, 10, batch).astype(np.int32)


def _window(runner: Runner, state: Any, n: int, x: Any, y: Any) -> tuple[Any, float, float]:
    """``n`` calls, then the wait: ``(state, thread CPU µs per call, wall µs per call)``."""
    t0, c0 = time.perf_counter(), time.thread_time()
    loss = None
    for _ in range(n):
        state, loss = runner.step(state, x, y)
    c1 = time.thread_time()
    runner.sync((state, loss))
    return state, (c1 - c0) / n * 1e6, (time.perf_counter() - t0) / n * 1e6


def bench_host(
    batch: int = 8, calls: int = 300, rounds: int = 7, warmup: int = 50
) -> dict[str, Any]:
    """Time every row (see the module docstring); the results as a JSON-ready dict."""
    params = _mlp.init(0)
    runners = {k: build(params) for k, build in ROWS.items()}
    data = {k: r.put(*_batch(batch)) for k, r in runners.items()}
    states = {k: _window(r, r.state, warmup, *data[k])[0] for k, r in runners.items()}
    cpu: dict[str, list[float]] = {k: [] for k in runners}
    wall: dict[str, list[float]] = {k: [] for k in runners}
    names = list(runners)
    for r in range(rounds):
        for k in names[r % len(names) :] + names[: r % len(names)]:
            states[k], c, w = _window(runners[k], states[k], calls, *data[k])
            cpu[k].append(c)
            wall[k].append(w)
    rows = {}
    for k in names:
        ratios = [a / b for a, b in zip(cpu[k], cpu["expert"], strict=True)]
        rows[k] = {
            "cpu_us": summary(cpu[k]),
            "wall_us": summary(wall[k]),
            "cpu_ratio": summary(ratios),
            "traces": runners[k].traces() if runners[k].traces else None,
        }
    return {"batch": batch, "calls": calls, "rounds": rounds, "rows": rows}


def _time_us(fn: Callable[[], Any], n: int = 2000, repeat: int = 7) -> float:
    """The best over ``repeat`` runs of thread CPU µs per call of ``fn``."""
    best = float("inf")
    for _ in range(repeat):
        c0 = time.thread_time()
        for _ in range(n):
            fn()
        best = min(best, (time.thread_time() - c0) / n * 1e6)
    return float(f"{best:.3g}")


def _arguments(label: str, runner: Runner, state: Any, x: Any, y: Any) -> Any:
    """What one call of this row passes to its jitted function."""
    if label == RECOMMENDED:  # the step object's own list of arrays (read for this count)
        return (state._leaves, (x, y), state._key)
    if label == "fit's leaves step":
        return (state[0], (x, y), jax.random.key(0), state[1])
    return (*state, x, y)


def pytree_costs(batch: int = 8, n: int = 2000) -> dict[str, dict[str, float]]:
    """Per row: the pytree nodes and leaves of one call's arguments, and their flatten and
    unflatten alone (best thread CPU µs)."""
    params = _mlp.init(0)
    out = {}
    for label, build in ROWS.items():
        runner = build(params)
        x, y = runner.put(*_batch(batch))
        state, loss = runner.step(runner.state, x, y)
        runner.sync((state, loss))
        args = _arguments(label, runner, state, x, y)
        leaves, treedef = jax.tree.flatten(args)
        out[label] = {
            "nodes": treedef.num_nodes,
            "leaves": len(leaves),
            "flatten_us": _time_us(lambda a=args: jax.tree.flatten(a), n),
            "unflatten_us": _time_us(lambda t=treedef, v=leaves: jax.tree.unflatten(t, v), n),
        }
    return out


def tensor_node(n: int = 2000) -> dict[str, dict[str, float]]:
    """The Tensor pytree node alone: flatten and unflatten of the MLP's 18 parameter and
    Adam-state Tensors in a list (against the same 18 arrays), and of the parameters and
    Adam state as modules (best thread CPU µs)."""
    params, _ = eqx.partition(_mlp.axjax_model(_mlp.init(0)), eqx.is_array)
    tree = (params, optax.adam(1e-3).init(params))
    is_tensor = lambda t: isinstance(t, ax.Tensor)  # noqa: E731
    tensors = [t for t in jax.tree.leaves(tree, is_leaf=is_tensor) if is_tensor(t)]
    arrays = [t.array for t in tensors]
    out = {}
    for label, value in (
        (f"{len(tensors)} Tensors in a list", tensors),
        (f"the same {len(arrays)} arrays in a list", arrays),
        ("parameters + Adam state (modules)", tree),
    ):
        leaves, treedef = jax.tree.flatten(value)
        out[label] = {
            "nodes": treedef.num_nodes,
            "flatten_us": _time_us(lambda v=value: jax.tree.flatten(v), n),
            "unflatten_us": _time_us(lambda t=treedef, v=leaves: jax.tree.unflatten(t, v), n),
        }
    return out


def markdown(results: dict[str, Any], *, with_target: bool = True) -> str:
    """The tables of :func:`run`'s results (and the target's line)."""
    timing = results["timing"]
    lines = [
        f"### Host time per training-step call (MLP, Adam, batch {timing['batch']}, "
        f"{timing['calls']} calls per window, {timing['rounds']} rounds)",
        "",
        "| loop | thread CPU µs/call median [min] | ÷ expert | wall µs/call median [min] |",
        "|---|---|---|---|",
    ]
    for k, r in timing["rows"].items():
        lines.append(
            f"| {k} | {r['cpu_us']['median']:.1f} [{r['cpu_us']['min']:.1f}] "
            f"| {r['cpu_ratio']['median']:.2f} "
            f"| {r['wall_us']['median']:.1f} [{r['wall_us']['min']:.1f}] |"
        )
    lines.append("")
    if "pytree" in results:
        lines += [
            "| loop | nodes | leaves | flatten µs | unflatten µs |",
            "|---|---|---|---|---|",
        ]
        for k, r in results["pytree"].items():
            lines.append(
                f"| {k} | {r['nodes']} | {r['leaves']} | {r['flatten_us']} | {r['unflatten_us']} |"
            )
        lines.append("")
    if "tensor_node" in results:
        lines += ["| tree | nodes | flatten µs | unflatten µs |", "|---|---|---|---|"]
        for k, r in results["tensor_node"].items():
            lines.append(f"| {k} | {r['nodes']} | {r['flatten_us']} | {r['unflatten_us']} |")
        lines.append("")
    if with_target:
        lines.append(f"- {target(results)}")
    return "\n".join(lines)


def target(results: dict[str, Any]) -> str:
    """``met`` or ``MISSED``: the recommended loop's host time ÷ the expert's (median)."""
    v = results["timing"]["rows"][RECOMMENDED]["cpu_ratio"]["median"]
    ok = v <= TARGET
    return (
        f"host µs/call {RECOMMENDED} ÷ expert: {v:.3g} "
        f"({'met' if ok else 'MISSED'}, target <= {TARGET})"
    )


def run(batch: int = 8, calls: int = 300, rounds: int = 7, *, costs: bool = True) -> dict[str, Any]:
    """The timing, and with ``costs`` the pytree tables."""
    warm_up()
    out: dict[str, Any] = {"timing": bench_host(batch, calls, rounds)}
    if costs:
        out["pytree"] = pytree_costs(batch)
        out["tensor_node"] = tensor_node()
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.host_overhead", description=__doc__.split("\n")[0]
    )
    p.add_argument("--batch", type=int, default=8, help="examples per batch (default 8)")
    p.add_argument("--calls", type=int, default=300, help="calls per window (default 300)")
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    p.add_argument("--json", help="write the results to this file")
    return p


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = _parser().parse_args(argv)
    results = run(args.batch, args.calls, args.rounds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print(markdown(results))
    return results


if __name__ == "__main__":
    main()
