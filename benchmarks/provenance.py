"""``python -m benchmarks.provenance``: what axis provenance costs an eager op.

Axis provenance (``ax.config.provenance``, docs/errors.md) records, per axis, where it was
introduced, so that an ``AxisError`` can say where each axis came from. It is recorded at
dispatch and at trace time only, never in a compiled program (the tests check the HLO).
This times the eager ops of ``benchmarks._dispatch`` with provenance off and on, each on
operands built in that mode, alternating within each round, and reports the CPU time of
the calling thread per call (XLA computes on its own threads) and the ratio on ÷ off.

Example:
    .venv/bin/python -m benchmarks.provenance --rounds 15
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import axjax as ax

from ._common import summary
from ._dispatch import OPS, H, _operands, _time

__all__ = ["bench_provenance", "main"]

#: the ops of the dispatch table, and a rename (an op that introduces an axis)
EXTRA: dict[str, Callable[[dict[str, Any]], Any]] = {
    "rename": lambda t: ax.rename(t["a"], H, Renamed),
}


class Renamed(ax.Axis):
    """The renamed axis."""


def _operands_in(mode: bool) -> dict[str, Any]:
    before = ax.config.provenance
    ax.config.provenance = mode
    try:
        return _operands()["t"]
    finally:
        ax.config.provenance = before


def bench_provenance(rounds: int = 15, calls: int = 300, warmup: int = 100) -> dict[str, Any]:
    """CPU µs per call of each op with provenance off and on, and the ratio per round."""
    data = {False: _operands_in(False), True: _operands_in(True)}
    fns = {name: t for name, (_, t) in OPS.items()} | EXTRA
    before = ax.config.provenance
    out: dict[str, Any] = {}
    try:
        for name, fn in fns.items():
            runs: dict[bool, list[float]] = {False: [], True: []}
            for mode in (False, True):
                ax.config.provenance = mode
                _time(lambda f=fn, m=mode: f(data[m]), warmup)
            for r in range(rounds):
                for mode in (False, True) if r % 2 else (True, False):
                    ax.config.provenance = mode
                    runs[mode].append(_time(lambda f=fn, m=mode: f(data[m]), calls)[1])
            out[name] = {
                "off_cpu_us": summary(runs[False]),
                "on_cpu_us": summary(runs[True]),
                "ratio": summary([b / a for a, b in zip(runs[False], runs[True], strict=True)]),
            }
    finally:
        ax.config.provenance = before
    return out


def markdown(res: dict[str, Any]) -> str:
    """The results as a Markdown table."""
    lines = ["| op | off, CPU µs/call | on, CPU µs/call | on ÷ off |", "|---|---|---|---|"]
    for name, r in res.items():
        off, on, q = r["off_cpu_us"], r["on_cpu_us"], r["ratio"]
        lines.append(
            f"| {name} | {off['median']:.1f} | {on['median']:.1f} | "
            f"{q['median']:.2f} [{q['min']:.2f}–{q['max']:.2f}] |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.provenance", description=__doc__.split("\n")[0]
    )
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=300)
    args = p.parse_args(argv)
    res = bench_provenance(args.rounds, args.calls)
    print(markdown(res))
    return res


if __name__ == "__main__":
    main()
