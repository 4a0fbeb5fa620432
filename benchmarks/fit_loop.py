"""``ax.train.fit`` against an expert's training loop, per epoch length (MNIST MLP).

``python -m benchmarks.fit_loop`` trains the MLP 784-300-100-10 (Adam 1e-3, batch 128) on
the same fixed, device-resident batches, ``B`` per epoch (40, 100 and 469 by default), as:

- ``expert``: an expert's loop: the step of ``benchmarks.models._mlp.build_expert``
  (axjax's weight storage, optax's one-hot loss, ``jax.nn.relu``, ``donate_argnums``) in
  a plain ``for`` loop that adds up the loss on the device and reads it once per epoch;
- ``fit``: ``ax.train.fit(..., progress=False)`` with its defaults (``guard="replay"``,
  a log point every 100 steps, donation);
- ``fit guard=off``: the same without the NaN/Inf guard.

Each run is timed for 6 epochs and for 1 epoch and the difference is divided by the 5
epochs' steps: what stays is the steady-state cost per step, per-epoch costs included,
with tracing and compiling cancelled. The runs are interleaved over rounds (rotated
order); the ratio to ``expert`` is taken within each round and reported as median
[min–max]. Process CPU time per step (all threads) is reported too: it measures the work
and moves less than wall time when other processes load the machine.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
import optax

import axjax as ax

from ._common import LR, Data, load_mnist
from ._harness import warm_up
from .models import _mlp
from .models._frameworks import onehot_xent

#: epochs of the long run; the short run has one, and the difference is what is timed
EPOCHS = 6


def expert_run(batches: Sequence[tuple[jax.Array, jax.Array]], epochs: int) -> None:
    """The expert's loop: a fresh donated ``jax.jit`` step, one host read per epoch."""
    p = _mlp.init(0)
    params = [(jnp.asarray(p[f"w{i}"]), jnp.asarray(p[f"b{i}"])) for i in range(3)]
    opt = optax.adam(LR)
    loss_fn = functools.partial(_mlp.expert_loss, onehot_xent)

    def step(
        params: Any, opt_state: Any, total: jax.Array, x: jax.Array, y: jax.Array
    ) -> tuple[Any, Any, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, total + loss

    jitted = jax.jit(step, donate_argnums=(0, 1, 2))
    opt_state = opt.init(params)
    for _ in range(epochs):
        total = jnp.zeros((), jnp.float32)
        for x, y in batches:
            params, opt_state, total = jitted(params, opt_state, total, x, y)
        float(total)  # the epoch's loss, as the expert prints it
    jax.block_until_ready(params)


def fit_run(
    batches: Sequence[Any], epochs: int, guard: Literal["replay", "step", "off"] = "replay"
) -> None:
    """``ax.train.fit`` on the same batches as Tensors, its defaults but the bar."""
    model = _mlp.axjax_model(_mlp.init(0))
    result = ax.train.fit(
        model,
        optax.adam(LR),
        _mlp.axjax_loss,
        list(batches),
        epochs=epochs,
        progress=False,
        guard=guard,
    )
    jax.block_until_ready(result.model)


def _timed(fn: Callable[[], None]) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def main(
    per_epoch: Sequence[int] = (40, 100, 469), rounds: int = 5
) -> dict[int, dict[str, dict[str, list[float]]]]:
    """Time every runner at every epoch length; print ms/step, its ratio to ``expert``
    (steps/s: above 1 is faster) and CPU ms/step."""
    data = load_mnist()
    warm_up()
    out: dict[int, dict[str, dict[str, list[float]]]] = {}
    print(
        f"MLP 784-300-100-10, batch 128, Adam; ({EPOCHS} epochs - 1 epoch) / steps, "
        f"{rounds} rounds; {data.source}"
    )
    for n in per_epoch:
        res = _time_length(data, n, rounds)
        print(f"\n{n} batches per epoch")
        print(f"{'loop':16s} {'ms/step':>20s} {'÷ expert (speed)':>20s} {'CPU ms/step':>20s}")
        for k, v in res.items():
            print(
                f"{k:16s} {_spread(v['ms'], '.3f'):>20s} {_spread(v['ratio'], '.2f'):>20s} "
                f"{_spread(v['cpu'], '.3f'):>20s}"
            )
        out[n] = res
    return out


def _time_length(data: Data, n: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    """The interleaved rounds at ``n`` batches per epoch."""
    idx = data.batches(seed=1, count=n)
    jax_batches = [
        (jnp.asarray(data.images[i].reshape(len(i), -1)), jnp.asarray(data.labels[i])) for i in idx
    ]
    ax_batches = [_mlp.put_axjax(data.images[i], data.labels[i]) for i in idx]
    runs: dict[str, Callable[[int], None]] = {
        "expert": functools.partial(expert_run, jax_batches),
        "fit": functools.partial(fit_run, ax_batches),
        "fit guard=off": functools.partial(fit_run, ax_batches, guard="off"),
    }
    names = list(runs)
    res: dict[str, dict[str, list[float]]] = {k: {"ms": [], "cpu": [], "ratio": []} for k in names}
    for k in names:  # one untimed pass each: imports, first compiles
        runs[k](1)
    for r in range(rounds):
        ms: dict[str, float] = {}
        for k in names[r % len(names) :] + names[: r % len(names)]:
            long = _timed(functools.partial(runs[k], EPOCHS))
            short = _timed(functools.partial(runs[k], 1))
            steps = (EPOCHS - 1) * n
            ms[k] = (long[0] - short[0]) / steps * 1e3
            res[k]["ms"].append(ms[k])
            res[k]["cpu"].append((long[1] - short[1]) / steps * 1e3)
        for k in names:
            res[k]["ratio"].append(ms["expert"] / ms[k])
    return res


def _spread(values: Sequence[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} [{min(values):{fmt}}–{max(values):{fmt}}]"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.fit_loop", description=__doc__.split("\n")[0]
    )
    p.add_argument(
        "--per-epoch",
        default="40,100,469",
        help="batches per epoch, comma-separated (default 40,100,469)",
    )
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    return p


if __name__ == "__main__":
    a = _parser().parse_args()
    main(tuple(int(v) for v in a.per_epoch.split(",")), a.rounds)
