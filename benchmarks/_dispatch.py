"""Eager per-op dispatch: an axjax op on Tensors against the same op in ``jax.numpy``.

Outside ``jit`` every axjax call runs its type rule (cached per operand types), the op's
forward (the same ``jax.numpy`` call) and wraps the result; this measures what that adds.
Each op is timed in rounds of ``calls`` calls followed by one sync, the two versions
alternating; the ratio is taken within a round and summarised over rounds. Beside the
wall time, the CPU time of the calling thread (the dispatch itself: XLA computes on its
own threads) is reported, which other load on the machine hardly disturbs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, final

import jax
import jax.numpy as jnp
import numpy as np

import axjax as ax

from ._common import summary

__all__ = ["OPS", "bench_dispatch"]


@final
class B(ax.Axis):
    """Batch (128)."""


@final
class H(ax.Axis):
    """Features (300)."""


@final
class P(ax.Axis):
    """Pixels (784)."""


def _operands() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((128, 300), dtype=np.float32) for _ in range(2))
    x, w = (
        rng.standard_normal((128, 784), dtype=np.float32),
        rng.standard_normal((784, 300), dtype=np.float32),
    )
    bias = rng.standard_normal(300, dtype=np.float32)
    arrays = {
        k: jnp.asarray(v) for k, v in (("a", a), ("b", b), ("x", x), ("w", w), ("bias", bias))
    }
    tensors = {
        "a": ax.tensor(arrays["a"], B, H),
        "b": ax.tensor(arrays["b"], B, H),
        "x": ax.tensor(arrays["x"], B, P),
        "w": ax.tensor(arrays["w"], P, H),
        "bias": ax.tensor(arrays["bias"], H),
    }
    return {"j": arrays, "t": tensors}


Pair = tuple[Callable[[dict[str, Any]], Any], Callable[[dict[str, Any]], Any]]

#: op -> (jax.numpy version, axjax version), on 128x300 float32 (matmul: 128x784 @ 784x300)
OPS: dict[str, Pair] = {
    "add": (lambda j: j["a"] + j["b"], lambda t: t["a"] + t["b"]),
    "multiply by 0.5": (lambda j: j["a"] * 0.5, lambda t: t["a"] * 0.5),
    "exp": (lambda j: jnp.exp(j["a"]), lambda t: ax.exp(t["a"])),
    "relu": (lambda j: jax.nn.relu(j["a"]), lambda t: ax.relu(t["a"])),
    "sum over an axis": (lambda j: jnp.sum(j["a"], axis=1), lambda t: ax.sum(t["a"], H)),
    "mean over an axis": (lambda j: jnp.mean(j["a"], axis=1), lambda t: ax.mean(t["a"], H)),
    "log_softmax": (
        lambda j: jax.nn.log_softmax(j["a"], axis=1),
        lambda t: ax.log_softmax(t["a"], H),
    ),
    "transpose": (lambda j: jnp.transpose(j["a"]), lambda t: ax.transpose(t["a"], H, B)),
    "broadcast a bias": (
        lambda j: jnp.broadcast_to(j["bias"], (128, 300)),
        lambda t: ax.broadcast(t["bias"], t["a"]),
    ),
    "index along an axis": (lambda j: j["a"][:, 3], lambda t: ax.index(t["a"], H, 3)),
    "contract (x @ w)": (lambda j: j["x"] @ j["w"], lambda t: ax.contract(t["x"], t["w"])),
    "matmul (x @ w)": (lambda j: j["x"] @ j["w"], lambda t: t["x"] @ t["w"]),
}


def _time(fn: Callable[[], Any], calls: int) -> tuple[float, float]:
    """``(wall µs, CPU µs of this thread)`` per call: ``calls`` calls, then one sync."""
    t0, c0 = time.perf_counter(), time.thread_time()
    out = None
    for _ in range(calls):
        out = fn()
    c1 = time.thread_time()
    jax.block_until_ready(out.array if isinstance(out, ax.Tensor) else out)
    return (time.perf_counter() - t0) / calls * 1e6, (c1 - c0) / calls * 1e6


def bench_dispatch(
    rounds: int = 15, calls: int = 300, warmup: int = 100, ops: dict[str, Pair] | None = None
) -> dict[str, Any]:
    """Microseconds per call of each op in both versions, and their ratio per round."""
    data = _operands()
    out: dict[str, Any] = {}
    for name, (jfn, tfn) in (ops or OPS).items():
        j = lambda f=jfn: f(data["j"])  # noqa: E731
        t = lambda f=tfn: f(data["t"])  # noqa: E731
        np.testing.assert_allclose(np.asarray(t().array), np.asarray(j()), rtol=1e-5, atol=1e-4)
        _time(j, warmup)
        _time(t, warmup)
        js: list[tuple[float, float]] = []
        ts: list[tuple[float, float]] = []
        for r in range(rounds):
            if r % 2:
                ts.append(_time(t, calls))
                js.append(_time(j, calls))
            else:
                js.append(_time(j, calls))
                ts.append(_time(t, calls))
        out[name] = {
            "jnp_us": summary([w for w, _ in js]),
            "axjax_us": summary([w for w, _ in ts]),
            "ratio": summary([a[0] / b[0] for a, b in zip(ts, js, strict=True)]),
            "jnp_cpu_us": summary([c for _, c in js]),
            "axjax_cpu_us": summary([c for _, c in ts]),
            "cpu_ratio": summary([a[1] / b[1] for a, b in zip(ts, js, strict=True)]),
        }
    return out
