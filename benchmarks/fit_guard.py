"""What the NaN/Inf guard of ``ax.train.fit`` costs, per ``guard`` mode (MNIST MLP).

``python -m benchmarks.fit_guard`` times, in interleaved rounds, the MLP training step:

- ``jax``: hand-written JAX + optax (the reference);
- ``fit guard="off"``, ``"replay"``, ``"step"``: ``ax.train.make_train_step`` built as
  ``fit`` builds it for that mode, with ``fit``'s work at its log points (every
  ``LOG_EVERY`` steps: one host sync to read the Monitor, and for ``"replay"`` also the
  all-finite reduction over the parameters and optimizer state in that same sync).

Within each round every runner trains one window of steps on a fixed device batch; the
ratio to ``jax`` is taken within the round, and reported as median [min–max] over rounds.
Each window's process CPU time per step (all threads, XLA's included) is reported too: it
measures the work done and moves less than wall time on a loaded machine. The first step
(trace + compile + run, synced) is timed with a fresh ``jit`` each time.

``--parts`` also times the old split of the per-step guard: ``fit``'s structure without a
guard, plus the gradient norm, plus the keep-if selections (:func:`_variant`).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

import axjax as ax
from axjax.train import Monitor
from axjax.train._internal import call_loss, copy_tree, finite_and_copy

from ._common import LR, Runner, load_mnist, timed
from ._harness import warm_up
from .models import _mlp

#: the steps between two of ``fit``'s log points (its default ``log_every``)
LOG_EVERY = 100
MODES = ("off", "replay", "step")


def _variant(kind: str) -> Runner:
    """One part of the per-step guard (``"no guard"``, ``"norm only"``,
    ``"keep-if, loss only"``, ``"guard as in fit"``), hand-assembled on ``fit``'s step."""
    params, static = eqx.partition(_mlp.axjax_model(_mlp.init(0)), eqx.is_array)
    opt = optax.adam(LR)

    def step(params: Any, opt_state: Any, mon: Monitor, batch: Any) -> Any:
        def loss_of(p: Any) -> Any:
            return call_loss(_mlp.axjax_loss, eqx.combine(p, static), batch, None, False)

        (loss, _), grads = jax.value_and_grad(loss_of, has_aux=True)(params)
        updates, new_opt = opt.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        if kind == "no guard":
            return new_params, new_opt, mon
        assert mon.bad_step is not None and mon.bad_grad_norm is not None
        gnorm = loss if kind == "keep-if, loss only" else optax.tree.norm(grads)
        ok = jnp.isfinite(loss) & jnp.isfinite(gnorm) & (mon.bad_step < 0)
        if kind != "norm only":
            keep = lambda a, b: jnp.where(ok, a, b)  # noqa: E731
            new_params = jax.tree.map(keep, new_params, params)
            new_opt = jax.tree.map(keep, new_opt, opt_state)
        sums = {"loss": mon.sums["loss"] + jnp.where(ok, loss, 0.0)}
        mon = Monitor(
            sums,
            mon.count + ok.astype(jnp.float32),
            mon.bad_step,
            mon.bad_loss,
            jnp.where(ok, mon.bad_grad_norm, gnorm.astype(jnp.float32)),
            mon.names,
        )
        return new_params, new_opt, mon

    jitted = jax.jit(step)

    def run(state: Any, x: Any, y: Any) -> tuple[Any, Any]:
        p, s, mon = jitted(*state, (x, y))
        return (p, s, mon), mon

    return Runner((params, opt.init(params), Monitor.zero(("loss",))), run, _mlp.put_axjax)


def fit_mode(guard: str, log_every: int = LOG_EVERY) -> Runner:
    """The step ``fit(..., guard=guard)`` runs, called as ``fit`` calls it (the step number
    a Python int), with ``fit``'s log-point work every ``log_every`` steps."""
    params, static = eqx.partition(_mlp.axjax_model(_mlp.init(0)), eqx.is_array)
    opt = optax.adam(LR)
    step = ax.train.make_train_step(_mlp.axjax_loss, opt, static, guard=guard == "step")
    key = jax.random.key(0)

    def run(state: Any, x: Any, y: Any) -> tuple[Any, Any]:
        p, s, mon, i, snap = state
        p, s, mon = step(p, s, mon, (x, y), key, i)
        i += 1
        if i % log_every == 0:  # fit's log point: one host sync
            flag = None
            if guard == "replay":  # the check and the snapshot's copy, one dispatch
                flag, snap = finite_and_copy((p, s))
            mon.read_with(flag)
            mon = mon.reset()
        return (p, s, mon, i, snap), mon

    mon = Monitor.zero(("loss",), guarded=guard == "step")
    opt_state = opt.init(params)
    snap = (params, opt_state) if guard == "replay" else None  # held as fit holds it
    state = copy_tree((params, opt_state))  # the step donates its own copies, as in fit
    return Runner((*state, mon, 0, snap), run, _mlp.put_axjax)


def _builders() -> dict[str, Callable[[], Runner]]:
    out: dict[str, Callable[[], Runner]] = {"jax": lambda: _mlp.build_jax(_mlp.init(0))}
    out |= {f'fit guard="{m}"': (lambda m=m: fit_mode(m)) for m in MODES}  # type: ignore[misc]
    return out


def _window(runner: Runner, state: Any, n: int, batch: Any) -> tuple[Any, float, float]:
    """``n`` steps on ``batch``, synced: ``(state, steps/s, process CPU ms per step)``. The
    CPU time counts XLA's threads too, so it measures the work and moves less than wall
    time when other processes load the machine."""
    t0, c0 = time.perf_counter(), time.process_time()
    loss = None
    for _ in range(n):
        state, loss = runner.step(state, *batch)
    runner.sync((state, loss))
    return state, n / (time.perf_counter() - t0), (time.process_time() - c0) / n * 1e3


def _first_step(runner: Runner, images: Any, labels: Any) -> float:
    """Seconds for the first step, synced: trace + compile + run."""
    x, y = runner.put(images, labels)
    return timed(lambda: runner.sync(runner.step(runner.state, x, y)))[1]


def _spread(values: Sequence[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} [{min(values):{fmt}}–{max(values):{fmt}}]"


def main(
    rounds: int = 15, steps: int = 200, first: int = 3, parts: bool = False
) -> dict[str, dict[str, list[float]]]:
    """Time every runner; print steps/s, CPU time per step and the first step, each with
    its ratio to ``jax``."""
    data = load_mnist()
    idx = data.batches(seed=1, count=1)[0]
    builders = _builders()
    if parts:
        kinds = ("no guard", "norm only", "keep-if, loss only", "guard as in fit")
        builders |= {f"part: {k}": (lambda k=k: _variant(k)) for k in kinds}  # type: ignore[misc]
    warm_up()  # the process's one-time costs, paid by none of the runners
    res: dict[str, dict[str, list[float]]] = {
        k: {"sps": [], "ratio": [], "cpu": [], "cpu_ratio": [], "first": []} for k in builders
    }
    names = list(builders)
    for r in range(first):  # first step: a fresh jit each time, rotated order
        for k in names[r % len(names) :] + names[: r % len(names)]:
            res[k]["first"].append(_first_step(builders[k](), data.images[idx], data.labels[idx]))
    runners = {k: b() for k, b in builders.items()}
    fixed = {k: r.put(data.images[idx], data.labels[idx]) for k, r in runners.items()}
    # warm-up past a log point, so that its all-finite reduction is compiled beforehand
    states = {k: _window(r, r.state, LOG_EVERY + 10, fixed[k])[0] for k, r in runners.items()}
    for r in range(rounds):
        sps, cpu = {}, {}
        for k in names[r % len(names) :] + names[: r % len(names)]:
            states[k], sps[k], cpu[k] = _window(runners[k], states[k], steps, fixed[k])
        for k in names:
            res[k]["sps"].append(sps[k])
            res[k]["ratio"].append(sps[k] / sps["jax"])
            res[k]["cpu"].append(cpu[k])
            res[k]["cpu_ratio"].append(cpu[k] / cpu["jax"])
    print(
        f"MLP 784-300-100-10, batch 128, Adam; {rounds} rounds of {steps} steps, "
        f"log point every {LOG_EVERY} steps; {data.source}"
    )
    print(
        f"{'step':24s} {'steps/s':>14s} {'÷ jax':>17s} {'CPU ms/step':>17s} "
        f"{'÷ jax':>17s} {'first step s':>17s} {'÷ jax':>5s}"
    )
    jax_first = statistics.median(res["jax"]["first"])
    for k, v in res.items():
        f_ratio = statistics.median(v["first"]) / jax_first
        print(
            f"{k:24s} {_spread(v['sps'], '.0f'):>14s} {_spread(v['ratio'], '.2f'):>17s} "
            f"{_spread(v['cpu'], '.2f'):>17s} {_spread(v['cpu_ratio'], '.2f'):>17s} "
            f"{_spread(v['first'], '.2f'):>17s} {f_ratio:5.2f}"
        )
    return res


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.fit_guard", description=__doc__.split("\n")[0]
    )
    p.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    p.add_argument("--steps", type=int, default=200, help="steps per window (default 200)")
    p.add_argument("--first", type=int, default=3, help="first-step repeats (default 3)")
    p.add_argument("--parts", action="store_true", help="also time the per-step guard's parts")
    return p


if __name__ == "__main__":
    a = _parser().parse_args()
    main(a.rounds, a.steps, a.first, a.parts)
