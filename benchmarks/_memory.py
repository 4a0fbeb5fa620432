"""Peak memory of a training run, each model and framework in a process of its own.

Resident memory only grows within a process, so interleaving cannot separate frameworks:
each (model, framework) pair runs in a fresh child process that imports the same modules,
makes two batches, notes its resident set, builds the model (``build``: its construction,
including any eager initialisers), then starts a new peak, runs ``steps`` training steps
(trace, compile, run) and reports that peak. ``delta`` is the peak over the resident set
after the build: what training the model costs. The absolute peak is reported beside it.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._common import BATCH, ROOT, peak_rss_mib, reset_peak_rss, rss_mib
from ._harness import warm_up
from .models import MODELS, builder

__all__ = ["bench_memory", "child"]


def child(model_name: str, framework: str, steps: int) -> dict[str, Any]:
    """Run in the child process: the measurement itself."""
    model = MODELS[model_name]
    build = builder(model, framework)
    if build is None:
        raise SystemExit(f"no {framework} version of {model_name}")
    # two batches of seeded noise: memory does not depend on the values, and reading the
    # training set would itself set the peak (the peak of a process never comes down)
    rng = np.random.default_rng(0)
    host = [
        (rng.random((BATCH, 28, 28), dtype=np.float32), rng.integers(0, 10, BATCH).astype(np.int32))
        for _ in range(2)
    ]
    params = model.init(0)
    warm_up()  # the XLA client and the first compile are paid here, outside both figures
    gc.collect()
    before = rss_mib()
    runner = build(params)  # type: ignore[operator]
    gc.collect()
    built = rss_mib()
    reset = reset_peak_rss()
    state, loss = runner.state, None
    for k in range(steps):
        state, loss = runner.step(state, *runner.put(*host[k % 2]))
    runner.sync((state, loss))
    peak = peak_rss_mib()
    return {
        "rss_before_mib": round(before, 1),
        "build_mib": round(built - before, 1),
        "peak_rss_mib": round(peak, 1),
        "delta_mib": round(peak - (built if reset else before), 1),
    }


def bench_memory(
    models: Sequence[str], frameworks: Sequence[str], steps: int = 20, log: Any = print
) -> dict[str, dict[str, Any]]:
    """``{model: {framework: {rss_before_mib, build_mib, peak_rss_mib, delta_mib,
    peak_ratio, delta_ratio} or {skipped}}}`` (ratios against raw JAX)."""
    out: dict[str, dict[str, Any]] = {}
    for m in models:
        out[m] = {}
        for fw in frameworks:
            if builder(MODELS[m], fw) is None:
                continue
            cmd = [
                sys.executable,
                "-m",
                "benchmarks",
                "--memory-child",
                m,
                fw,
                "--steps",
                str(steps),
            ]
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
            lines = proc.stdout.strip().splitlines()
            if proc.returncode or not lines:
                why = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                out[m][fw] = {"skipped": why[:300]}
            else:
                out[m][fw] = json.loads(lines[-1])
            log(f"  memory {m}/{fw}: {out[m][fw]}")
        ref = out[m].get("jax", {})
        for entry in out[m].values():
            for key in ("peak_rss_mib", "delta_mib"):
                if ref.get(key) and key in entry:
                    entry[key.replace("_mib", "").replace("_rss", "") + "_ratio"] = round(
                        entry[key] / ref[key], 3
                    )
    return out
