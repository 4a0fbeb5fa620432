"""Timing one model in every framework, interleaved, in one process.

The protocol (the project's baseline measurements, made side by side):

1. *First step*: build each framework's runner from the same numpy weights and time its
   first training step, synced (trace + compile + run; PyTorch has no compile). Repeated
   ``compile_rounds`` times with a fresh ``jit`` each time, the frameworks in rotated order.
2. *Agreement*: the losses of the first three steps on the same batches, against raw JAX.
3. *Warm-up*, then the number of steps per window is set so that a raw-JAX window lasts
   about ``window_s`` seconds; every framework runs the same number of steps.
4. *Rounds*: each round runs one window per framework (rotated order) on a fixed,
   device-resident batch ("fixed"), then one window per framework where every step
   gathers its batch from host numpy and converts it ("loop", a real data loop). The
   ratio to raw JAX is taken within a round (neighbours in time), then summarised as
   median, min and max over the rounds.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import jax
import numpy as np

from ._common import Data, Runner, summary, timed, window
from .models import EXPERTS, builder

__all__ = ["Config", "bench_model", "warm_up"]


@dataclass
class Config:
    """How long to measure: the defaults are the full run, :meth:`quick` the smoke run."""

    rounds: int = 7
    compile_rounds: int = 5
    warmup: int = 30
    window_s: float = 0.4
    min_steps: int = 10
    max_steps: int = 400

    @classmethod
    def quick(cls) -> Config:
        return cls(rounds=2, compile_rounds=1, warmup=2, window_s=0.0, min_steps=3, max_steps=3)


def _rotate(xs: Sequence[str], k: int) -> list[str]:
    k %= max(len(xs), 1)
    return list(xs[k:]) + list(xs[:k])


def _first_step(
    build: Callable[[dict[str, np.ndarray]], Runner],
    params: dict[str, Any],
    x: np.ndarray,
    y: np.ndarray,
) -> tuple[Runner, Any, float, float, Any]:
    """Build a runner, then run its first step synced: ``(runner, state, build_s, first_s,
    loss)``."""
    runner, build_s = timed(lambda: build(params))

    def first() -> tuple[Any, Any]:
        xb, yb = runner.put(x, y)
        out = runner.step(runner.state, xb, yb)
        runner.sync(out)
        return out

    (state, loss), first_s = timed(first)
    return runner, state, build_s, first_s, loss


def warm_up() -> None:
    """Pay the process's one-time costs (XLA client, first LLVM compile, optax and axjax
    imports) before any first step is timed, so that no framework pays them for the others."""
    import jax.numpy as jnp
    import optax

    import axjax as ax

    opt = optax.adam(1e-3)
    w = jnp.ones((8, 4))

    @jax.jit
    def step(w: Any, s: Any, x: Any) -> Any:
        g = jax.grad(lambda w: jnp.sum(jax.nn.relu(x @ w)))(w)
        u, s = opt.update(g, s, w)
        return optax.apply_updates(w, u), s

    jax.block_until_ready(step(w, opt.init(w), jnp.ones((2, 8))))

    class A(ax.Axis): ...

    class B(ax.Axis): ...

    t = ax.tensor(w, A, B)
    jax.block_until_ready(jax.jit(lambda t: ax.sum(ax.relu(t), B))(t).array)


def bench_model(
    model: ModuleType,
    frameworks: Sequence[str],
    data: Data,
    cfg: Config,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the protocol for one model; a dict per framework (see the module docstring)."""
    params = model.init(0)
    batches = data.batches(seed=1, count=64)
    fixed_idx = batches[0]
    host = lambda i: (data.images[i], data.labels[i])  # noqa: E731
    out: dict[str, Any] = {"title": model.TITLE, "frameworks": {}}
    res: dict[str, dict[str, Any]] = {}
    runners: dict[str, tuple[Runner, Any]] = {}

    # 1-2. first step (cold in round 0), agreement of the first losses
    for fw in frameworks:
        build = builder(model, fw)
        if build is None:
            res[fw] = {"skipped": f"no {fw} version of {model.NAME}"}
            continue
        try:
            runner, state, build_s, first_s, loss = _first_step(build, params, *host(batches[0]))
            losses = [runner.value(loss)]
            for i in (1, 2):
                state, loss = runner.step(state, *runner.put(*host(batches[i])))
                losses.append(runner.value(loss))
        except Exception as e:  # report it and go on with the others
            res[fw] = {"skipped": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
            log(f"  {model.NAME}/{fw}: skipped ({res[fw]['skipped']})")
            log("".join(traceback.format_exception(e)[-3:]))
            continue
        runners[fw] = (runner, state)
        res[fw] = {"build_s": build_s, "first_step_s": [first_s], "losses": losses}
        log(
            f"  {model.NAME}/{fw}: first step {first_s:.2f} s, losses "
            f"{', '.join(f'{v:.5f}' for v in losses)}"
        )
    live = [fw for fw in frameworks if fw in runners]
    ref = res.get("jax", {}).get("losses")
    for fw in live:
        if ref is not None:
            res[fw]["loss_diff"] = float(np.max(np.abs(np.subtract(res[fw]["losses"], ref))))

    for r in range(1, cfg.compile_rounds):
        for fw in _rotate(live, r):
            build = builder(model, fw)
            assert build is not None
            res[fw]["first_step_s"].append(_first_step(build, params, *host(batches[0]))[3])

    # 3. warm-up and calibration on the fixed batch
    fixed = {fw: runners[fw][0].put(*host(fixed_idx)) for fw in live}
    states = {fw: runners[fw][1] for fw in live}
    for fw in live:
        states[fw] = window(runners[fw][0], states[fw], cfg.warmup, lambda i, f=fw: fixed[f])[0]
    calib = "jax" if "jax" in live else (live[0] if live else None)
    n = cfg.min_steps
    if calib is not None and cfg.window_s > 0:
        states[calib], rate, _ = window(
            runners[calib][0], states[calib], cfg.min_steps, lambda i: fixed[calib]
        )
        n = int(min(cfg.max_steps, max(cfg.min_steps, rate * cfg.window_s)))
    out["steps_per_window"] = n

    # 4. interleaved rounds: fixed batch, then the real data loop
    sps: dict[str, dict[str, list[float]]] = {
        fw: {"fixed": [], "loop": [], "host": []} for fw in live
    }
    for r in range(cfg.rounds):
        order = _rotate(live, r)
        for fw in order:
            states[fw], v, host_us = window(runners[fw][0], states[fw], n, lambda i, f=fw: fixed[f])
            sps[fw]["fixed"].append(v)
            sps[fw]["host"].append(host_us)
        for fw in order:
            runner = runners[fw][0]
            states[fw], v, _ = window(
                runner,
                states[fw],
                n,
                lambda i, rr=runner, k=r: rr.put(*host(batches[(k * n + i) % 64])),
            )
            sps[fw]["loop"].append(v)
        log(
            f"  {model.NAME} round {r + 1}/{cfg.rounds}: "
            + ", ".join(
                f"{fw} {sps[fw]['fixed'][-1]:.0f}/{sps[fw]['loop'][-1]:.0f}" for fw in order
            )
        )

    experts = [e for e in EXPERTS if e in live]
    out["experts"] = experts
    for fw in live:
        runner = runners[fw][0]
        entry = res[fw]
        entry["first_step_s"] = summary(entry["first_step_s"]) | {
            "cold": round(entry["first_step_s"][0], 3)
        }
        for kind in ("fixed", "loop"):
            entry[f"{kind}_steps_per_s"] = summary(sps[fw][kind])
            if "jax" in live:
                ratios = [a / b for a, b in zip(sps[fw][kind], sps["jax"][kind], strict=True)]
                entry[f"{kind}_ratio"] = summary(ratios)
            if experts:  # against the fastest expert baseline of the same round
                best = [max(v) for v in zip(*(sps[e][kind] for e in experts), strict=True)]
                entry[f"{kind}_best_ratio"] = summary(
                    [a / b for a, b in zip(sps[fw][kind], best, strict=True)]
                )
        entry["host_us_per_step"] = summary(sps[fw]["host"])
        entry["traces"] = runner.traces() if runner.traces else None
    if "jax" in live:
        jax_first = res["jax"]["first_step_s"]["median"]
        for fw in live:
            res[fw]["first_step_ratio"] = round(res[fw]["first_step_s"]["median"] / jax_first, 3)
    out["frameworks"] = res
    jax.clear_caches()
    return out
