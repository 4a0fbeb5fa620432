"""``python -m benchmarks.layer_stack``: the transformer's blocks unrolled vs scanned.

The example's language model (``examples/transformer/train.py``) calls its blocks as one
``ax.nn.LayerStack`` scan, or, with ``unroll=True``, in a Python loop. A loop puts every
block into the program, so tracing, lowering and compiling grow with depth; the scan
compiles one block. This times, for each depth, the training step (loss, gradients, an
Adam update) of both forms from the same weights and batch, in interleaved rounds (a fresh
``jax.jit`` each round, the order alternating):

- compile: lower + XLA compile of the step (after tracing), seconds;
- first step: trace + lower + compile + the first run, seconds (what a user waits for);
- step: seconds per step of the compiled steps, in short windows alternating between the
  two forms (``--windows`` each);

and the ratios scanned ÷ unrolled of each (median, min–max over rounds; for the step,
unrolled time ÷ scanned time, so above 1 means the scan is faster, per pair of windows, and
"best": the fastest window of each form, the one least disturbed by other processes). Both
forms' first losses must agree.

Example:
    .venv/bin/python -m benchmarks.layer_stack                     # depths 2, 8, 24; small preset
    .venv/bin/python -m benchmarks.layer_stack --depths 2,8 --rounds 3 --json stack.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import numpy as np
import optax

import axjax as ax

from ._common import summary
from .transformer import PRESETS as TRANSFORMER_PRESETS
from .transformer import example

__all__ = ["bench_depth", "main", "markdown"]

MODES = ("unrolled", "scanned")
#: the transformer benchmark's sizes, and ``small``: the CPU preset at a quarter width
#: (a 24-layer step in well under a second on one CPU core)
PRESETS = {
    **TRANSFORMER_PRESETS,
    "small": dataclasses.replace(
        TRANSFORMER_PRESETS["cpu"], context=32, embed=64, heads=4, mlp=256, batch=8
    ),
}


def _step_fn(static: Any, lm_loss: Any, optimizer: Any) -> Any:
    def step(p: Any, s: Any, x: Any, y: Any) -> tuple[Any, Any, jax.Array]:
        loss, g = jax.value_and_grad(lambda q: lm_loss(eqx.combine(q, static), x, y).array)(p)
        u, s = optimizer.update(g, s, p)
        return optax.apply_updates(p, u), s, loss

    return step


def bench_depth(cfg: Any, rounds: int, windows: int, window_s: float) -> dict[str, Any]:
    """Compile, first-step and step seconds of both forms at ``cfg.layers`` blocks."""
    mod = example()
    rng = np.random.default_rng(0)
    chunk = rng.integers(0, cfg.vocab, (cfg.batch, cfg.context + 1)).astype(np.int32)
    x = ax.tensor(chunk[:, :-1], mod.Batch, mod.Pos, dtype=ax.I32)
    y = ax.tensor(chunk[:, 1:], mod.Batch, mod.Pos, dtype=ax.I32)
    optimizer = optax.adam(1e-3)
    built = {}
    for mode in MODES:
        lm = mod.LM(cfg, key=jax.random.key(0), unroll=mode == "unrolled")
        params, static = eqx.partition(lm, eqx.is_array)
        built[mode] = (static, params, optimizer.init(params))
    times: dict[str, dict[str, list[float]]] = {
        m: {"compile": [], "first": [], "step": []} for m in MODES
    }
    losses: dict[str, float] = {}
    state: dict[str, Any] = {}
    for r in range(rounds):
        for mode in MODES if r % 2 == 0 else MODES[::-1]:
            static, params, opt_state = built[mode]
            # a new function each round: JAX caches traces and executables by function
            jitted = jax.jit(_step_fn(static, mod.lm_loss, optimizer))
            t0 = time.perf_counter()
            traced = jitted.trace(params, opt_state, x, y)
            t1 = time.perf_counter()
            compiled = traced.lower().compile()
            t2 = time.perf_counter()
            p, s, loss = compiled(params, opt_state, x, y)
            jax.block_until_ready(loss)
            t3 = time.perf_counter()
            losses.setdefault(mode, float(loss))
            times[mode]["compile"].append(t2 - t1)
            times[mode]["first"].append(t3 - t0)
            state[mode] = [compiled, p, s]

    def window(mode: str, n: int) -> float:
        compiled, p, s = state[mode]
        t0 = time.perf_counter()
        for _ in range(n):
            p, s, loss = compiled(p, s, x, y)
        jax.block_until_ready(loss)
        state[mode][1:] = [p, s]
        return (time.perf_counter() - t0) / n

    # steps: short windows of the compiled steps, alternating, so both see the same load
    n_steps = max(2, min(100, int(window_s / max(window("unrolled", 1), 1e-6))))
    for r in range(windows):
        for mode in MODES if r % 2 == 0 else MODES[::-1]:
            times[mode]["step"].append(window(mode, n_steps))
    u, sc = times["unrolled"], times["scanned"]
    ratios = {
        "compile": [b / a for a, b in zip(u["compile"], sc["compile"], strict=True)],
        "first": [b / a for a, b in zip(u["first"], sc["first"], strict=True)],
        "step": [a / b for a, b in zip(u["step"], sc["step"], strict=True)],  # >1: scan faster
    }
    best = min(u["step"]) / min(sc["step"])  # the least disturbed window of each
    return {
        "layers": cfg.layers,
        "losses": losses,
        "steps_per_window": n_steps,
        "seconds": {m: {k: summary(v) for k, v in times[m].items()} for m in MODES},
        "ratios": {k: summary(v) for k, v in ratios.items()},
        "step_ratio_of_best": best,
    }


def _mm(s: dict[str, float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(s['median'])} ({fmt.format(s['min'])}–{fmt.format(s['max'])})"


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| layers | compile s, unrolled / scanned | compile ÷ | first step s, unrolled / "
        "scanned | first step ÷ | ms per step, unrolled / scanned | step speed, scanned "
        "÷ unrolled | best ÷ |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        u, s, q = r["seconds"]["unrolled"], r["seconds"]["scanned"], r["ratios"]
        lines.append(
            f"| {r['layers']} | {u['compile']['median']:.2f} / {s['compile']['median']:.2f} | "
            f"{_mm(q['compile'])} | {u['first']['median']:.2f} / {s['first']['median']:.2f} | "
            f"{_mm(q['first'])} | {u['step']['median'] * 1e3:.1f} / "
            f"{s['step']['median'] * 1e3:.1f} | {_mm(q['step'])} | "
            f"{r['step_ratio_of_best']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.layer_stack",
        description=__doc__.split("\n")[0] if __doc__ else None,
    )
    p.add_argument("--depths", default="2,8,24", help="comma-separated block counts")
    p.add_argument("--preset", choices=sorted(PRESETS), default="small", help="sizes")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    p.add_argument("--windows", type=int, default=20, help="step-time windows per form")
    p.add_argument("--window", type=float, default=0.3, help="seconds of steps per window")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    rows = []
    for d in args.depths.split(","):
        cfg = dataclasses.replace(PRESETS[args.preset], layers=int(d))
        rows.append(bench_depth(cfg, args.rounds, args.windows, args.window))
        r = rows[-1]
        both = r["losses"]
        if not np.isclose(both["unrolled"], both["scanned"], rtol=1e-5):
            raise SystemExit(f"layer_stack: the two forms' losses differ at {d} layers: {both}")
        print(markdown(rows[-1:]).splitlines()[-1], flush=True)
    print(f"\n{jax.devices()[0].platform}, preset {args.preset}, {args.rounds} rounds\n")
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
