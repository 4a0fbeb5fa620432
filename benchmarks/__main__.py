"""``python -m benchmarks``: every model in every installed framework, then the report.

Examples:
    .venv/bin/python -m benchmarks --json bench.json        # the full run
    .venv/bin/python -m benchmarks --quick                  # a smoke run (seconds per model)
    .venv/bin/python -m benchmarks --models mlp --frameworks jax,axjax --rounds 15
    .venv/bin/python -m benchmarks --report bench.json      # print the tables again
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["main", "run"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a few steps of each: a smoke run")
    p.add_argument(
        "--models",
        default="mlp,cnn,lstm,attention",
        help="comma-separated: mlp, cnn, lstm, attention",
    )
    p.add_argument(
        "--frameworks",
        default="jax,expert,expert-int,axjax,axjax-jit,graph,fit,equinox,haliax,torch",
        help="comma-separated; haliax and torch are skipped when not installed",
    )
    p.add_argument("--rounds", type=int, help="interleaved timing rounds (default 7)")
    p.add_argument("--compile-rounds", type=int, help="first-step repeats (default 5)")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory children")
    p.add_argument("--no-dispatch", action="store_true", help="skip eager dispatch")
    p.add_argument("--no-structure", action="store_true", help="skip the op counts")
    p.add_argument("--no-host", action="store_true", help="skip the host time per call (batch 8)")
    p.add_argument(
        "--no-decode", action="store_true", help="skip the decoding speed (KV cache vs recompute)"
    )
    p.add_argument(
        "--no-timing",
        action="store_true",
        help="skip the training-step timing (e.g. to redo memory or dispatch)",
    )
    p.add_argument("--data", help="folder with the MNIST IDX files")
    p.add_argument("--json", help="write the results to this file")
    p.add_argument("--report", help="print the tables of a results file and exit")
    p.add_argument(
        "--memory-child", nargs=2, metavar=("MODEL", "FRAMEWORK"), help=argparse.SUPPRESS
    )
    p.add_argument("--steps", type=int, default=20, help=argparse.SUPPRESS)
    return p


def _split(text: str, known: Sequence[str], what: str) -> list[str]:
    items = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in items if s not in known]
    if bad:
        raise SystemExit(f"unknown {what} {', '.join(bad)} (choose from {', '.join(known)})")
    return items


def run(args: argparse.Namespace, log: Any = None) -> dict[str, Any]:
    """Run the benchmarks that ``args`` select; return the results dict."""
    from . import _harness
    from ._common import load_mnist
    from ._dispatch import bench_dispatch
    from ._memory import bench_memory
    from ._report import environment
    from ._structure import structure_table
    from .models import FRAMEWORKS, MODELS, available

    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    models = _split(args.models, list(MODELS), "model")
    wanted = _split(args.frameworks, FRAMEWORKS, "framework")
    frameworks = [fw for fw in wanted if available(fw)]
    missing = [fw for fw in wanted if fw not in frameworks]
    cfg = _harness.Config.quick() if args.quick else _harness.Config()
    if args.rounds:
        cfg.rounds = args.rounds
    if args.compile_rounds:
        cfg.compile_rounds = args.compile_rounds
    data = load_mnist(args.data)
    results: dict[str, Any] = {
        "environment": environment(),
        "data": data.source,
        "config": vars(cfg),
        "not_installed": missing,
        "models": {},
    }
    log(
        f"data: {data.source}; frameworks: {', '.join(frameworks)}"
        + (f" (not installed: {', '.join(missing)})" if missing else "")
    )
    t0 = time.perf_counter()
    _harness.warm_up()
    for name in models if not args.no_timing else ():
        log(f"{name}:")
        results["models"][name] = _harness.bench_model(MODELS[name], frameworks, data, cfg, log)
    if not args.no_structure:
        log("op counts of the compiled steps:")
        results["structure"] = structure_table(models)
    if not args.no_host:
        from .host_overhead import run as bench_host

        log("host time per training-step call (MLP, batch 8):")
        results["host"] = (
            bench_host(calls=5, rounds=2, costs=False)
            if args.quick
            else bench_host(calls=100, rounds=5)
        )
    if not args.no_decode:
        from .decode import bench_decode

        log("decoding, tokens/s (ax.nn.generate with a KV cache against recomputing):")
        results["decode"] = bench_decode(steps=4, rounds=1) if args.quick else bench_decode()
    if not args.no_dispatch:
        log("eager dispatch:")
        results["dispatch"] = (
            bench_dispatch(rounds=2, calls=20, warmup=5) if args.quick else bench_dispatch()
        )
    if not args.no_memory:
        log("peak memory (one process per model and framework):")
        results["memory"] = bench_memory(models, frameworks, steps=3 if args.quick else 20, log=log)
    results["wall_s"] = round(time.perf_counter() - t0, 1)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.memory_child:
        from ._memory import child

        print(json.dumps(child(*args.memory_child, args.steps)), flush=True)
        return 0
    from ._report import markdown

    if args.report:
        with open(args.report) as f:
            print(markdown(json.load(f)))
        return 0
    results = run(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
