"""What the NaN/Inf guard of ``ax.train.fit``'s step costs, part by part (MLP).

``python -m benchmarks.fit_guard`` times, interleaved, the MLP step in these forms:

- ``jax``: hand-written JAX + optax (the reference);
- ``no guard``: the ``fit`` step's structure (Monitor in and out) without the guard;
- ``norm only``: plus the global gradient norm and the finiteness test, nothing kept back;
- ``keep-if, loss only``: the old parameters and optimizer state selected back when the
  loss is not finite (``jnp.where`` over both trees), no gradient norm;
- ``guard as in fit``: norm and both selections, as ``ax.train.make_train_step`` does.
"""

from __future__ import annotations

import statistics
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from axjax.train._step import Monitor, call_loss

from ._common import LR, Runner, load_mnist, window
from .models import _mlp


def _variant(kind: str) -> Runner:
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
        gnorm = loss if kind == "keep-if, loss only" else optax.tree.norm(grads)
        ok = jnp.isfinite(loss) & jnp.isfinite(gnorm) & (mon.bad_step < 0)
        if kind != "norm only":
            keep = lambda a, b: jnp.where(ok, a, b)  # noqa: E731
            new_params = jax.tree.map(keep, new_params, params)
            new_opt = jax.tree.map(keep, new_opt, opt_state)
        sums = {"loss": mon.sums["loss"] + jnp.where(ok, loss, 0.0)}
        mon = Monitor(sums, mon.count + ok.astype(jnp.float32), mon.bad_step, mon.bad_loss,
                      jnp.where(ok, mon.bad_grad_norm, gnorm.astype(jnp.float32)), mon.names)
        return new_params, new_opt, mon

    jitted = jax.jit(step)

    def run(state: Any, x: Any, y: Any) -> tuple[Any, Any]:
        p, s, mon = jitted(*state, (x, y))
        return (p, s, mon), mon

    return Runner((params, opt.init(params), Monitor.zero(("loss",))), run, _mlp.put_axjax)


def main(rounds: int = 9, steps: int = 150) -> dict[str, float]:
    data = load_mnist()
    idx = data.batches(seed=1, count=1)[0]
    rs = {"jax": _mlp.build_jax(_mlp.init(0))}
    for kind in ("no guard", "norm only", "keep-if, loss only", "guard as in fit"):
        rs[kind] = _variant(kind)
    fixed = {k: r.put(data.images[idx], data.labels[idx]) for k, r in rs.items()}
    states = {k: r.state for k, r in rs.items()}
    for k, r in rs.items():
        states[k] = window(r, states[k], 30, lambda i, k=k: fixed[k])[0]
    sps: dict[str, list[float]] = {k: [] for k in rs}
    for _ in range(rounds):
        for k, r in rs.items():
            states[k], v, _ = window(r, states[k], steps, lambda i, k=k: fixed[k])
            sps[k].append(v)
    ref = statistics.median(sps["jax"])
    out = {}
    for k, v in sps.items():
        out[k] = statistics.median(v)
        print(f"{k:20s} {out[k]:6.0f} steps/s  {out[k] / ref:.2f} x jax")
    return out


if __name__ == "__main__":
    main()
