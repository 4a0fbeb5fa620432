"""The protocol every benchmark shares: data, runners, training steps, timing, statistics.

A *runner* is one model in one framework, ready to train: its state (parameters and
optimizer state), a ``step(state, x, y) -> (state, loss)`` that does not wait for the
device, ``put`` (host numpy batch -> the framework's input types, as a real data loop
does), and ``sync`` (wait for the device). Every runner of a model starts from the same
numpy weights and sees the same batches, so their losses agree (checked in the report).
"""

from __future__ import annotations

import functools
import os
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = [
    "BATCH",
    "LR",
    "Data",
    "Runner",
    "jit_train_step",
    "load_mnist",
    "peak_rss_mib",
    "reset_peak_rss",
    "rss_mib",
    "summary",
    "uniform",
]

BATCH = 128
LR = 1e-3
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Data:
    """Training images ``[N, 28, 28]`` in ``[0, 1]`` (float32), labels ``[N]`` (int32)."""

    images: np.ndarray
    labels: np.ndarray
    source: str

    def batches(self, seed: int, count: int) -> list[np.ndarray]:
        """``count`` index arrays of ``BATCH`` examples from a seeded shuffle (as an epoch)."""
        rng = np.random.default_rng(seed)
        out: list[np.ndarray] = []
        while len(out) < count:
            perm = rng.permutation(len(self.labels))
            n = len(perm) // BATCH
            out += [perm[i * BATCH : (i + 1) * BATCH] for i in range(n)]
        return out[:count]


def _read_idx(path: Path) -> np.ndarray:
    from axjax.train import read_idx

    return read_idx(path)


@functools.cache
def _mnist_arrays(images: Path, labels: Path) -> tuple[np.ndarray, np.ndarray]:
    """The decoded MNIST arrays, read once per process (about a second each time: the
    structure guards and the tests load them a dozen times), read-only since shared."""
    x = (_read_idx(images).astype(np.float32) / 255.0).reshape(-1, 28, 28)
    y = _read_idx(labels).astype(np.int32)
    x.setflags(write=False)
    y.setflags(write=False)
    return x, y


def load_mnist(data_dir: str | os.PathLike[str] | None = None) -> Data:
    """The real MNIST training set, or (only when the files are absent) seeded noise.

    ``data_dir`` defaults to ``$AXJAX_TEST_DATA/mnist`` or ``../shared/data/mnist`` beside
    the repository; the report says which was used.
    """
    if data_dir is None:
        env = os.environ.get("AXJAX_TEST_DATA")
        base = Path(env) if env else ROOT.parent / "shared" / "data"
        data_dir = base / "mnist"
    d = Path(data_dir)
    images, labels = d / "train-images-idx3-ubyte.gz", d / "train-labels-idx1-ubyte.gz"
    if images.exists() and labels.exists():
        x, y = _mnist_arrays(images.resolve(), labels.resolve())
        return Data(x, y, f"MNIST train ({d})")
    rng = np.random.default_rng(0)
    n = 4 * BATCH
    return Data(
        rng.random((n, 28, 28), dtype=np.float32),
        rng.integers(0, 10, n).astype(np.int32),
        f"synthetic noise ({d} not found)",
    )


def uniform(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    """``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` float32 (the PyTorch/Equinox default)."""
    bound = 1.0 / np.sqrt(fan_in)
    return rng.uniform(-bound, bound, size=shape).astype(np.float32)


@dataclass
class Runner:
    """One model in one framework, ready to train (see the module docstring)."""

    state: Any
    step: Callable[[Any, Any, Any], tuple[Any, Any]]
    put: Callable[[np.ndarray, np.ndarray], tuple[Any, Any]]
    sync: Callable[[Any], Any] = jax.block_until_ready
    #: how many times the step was traced (``None`` where the framework does not trace)
    traces: Callable[[], int] | None = None
    #: the compiled step's text, for the structural checks (JAX-family runners only)
    lowered: Callable[[Any, Any], Any] | None = None
    #: the float value of a step's loss output (``float`` but for the ``fit`` runner)
    value: Callable[[Any], float] = float


def jit_train_step(
    loss_fn: Callable[[Any, Any, Any], Any],
    params: Any,
    put: Callable[[np.ndarray, np.ndarray], tuple[Any, Any]],
    optimizer: optax.GradientTransformation | None = None,
    split: bool = False,
    donate: bool = True,
) -> Runner:
    """The hand-written training step: loss, gradient and optax update in one ``jax.jit``.

    ``loss_fn(params, x, y)`` returns a scalar array. Used by raw JAX, and by axjax modules
    as ``axjax.train`` does it: the model is split once with ``eqx.partition`` into its
    arrays (Tensors are pytrees of one array), which the step takes, and the rest (flags,
    axis labels), which it closes over. ``donate``: the step updates the parameters and
    the optimizer state in place (``donate_argnums``), as an expert writes it; the runner
    starts from its own copies, so the caller's arrays stay usable.
    """
    opt = optimizer or optax.adam(LR)
    count = [0]
    if split:
        params, static = eqx.partition(params, eqx.is_array)
        module_loss = loss_fn
        loss_fn = lambda p, x, y: module_loss(eqx.combine(p, static), x, y)  # noqa: E731

    def step(params: Any, opt_state: Any, x: Any, y: Any) -> tuple[Any, Any, Any]:
        count[0] += 1
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    jitted = jax.jit(step, donate_argnums=(0, 1) if donate else ())
    shapes = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), (params, opt.init(params))
    )

    def run(state: Any, x: Any, y: Any) -> tuple[Any, Any]:
        p, s, loss = jitted(state[0], state[1], x, y)
        return (p, s), loss

    def lowered(x: Any, y: Any) -> Any:
        return jitted.lower(*shapes, x, y)

    state = (
        jax.tree.map(jnp.copy, (params, opt.init(params))) if donate else (params, opt.init(params))
    )
    return Runner(state, run, put, traces=lambda: count[0], lowered=lowered)


# ----------------------------------------------------------------------------- timing
def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``(fn(), seconds)``."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def window(
    runner: Runner, state: Any, n: int, batch: Callable[[int], tuple[Any, Any]]
) -> tuple[Any, float, float]:
    """Run ``n`` steps on ``batch(i)`` and wait for the device.

    Returns ``(state, steps per second, host µs per step)``: the last is the CPU time the
    Python thread spent per step before the final wait (dispatch, pytree flattening, the
    batch's conversion; PyTorch also computes on this thread). CPU time, unlike wall time,
    hardly moves when other processes load the machine.
    """
    t0, c0 = time.perf_counter(), time.thread_time()
    loss = None
    for i in range(n):
        x, y = batch(i)
        state, loss = runner.step(state, x, y)
    c1 = time.thread_time()
    runner.sync((state, loss))
    return state, n / (time.perf_counter() - t0), (c1 - c0) / n * 1e6


def summary(values: Sequence[float]) -> dict[str, float]:
    """``{"median", "min", "max"}`` of the values (rounded for the report)."""
    v = list(values)
    return {"median": _round(statistics.median(v)), "min": _round(min(v)), "max": _round(max(v))}


def _round(x: float) -> float:
    return float(f"{x:.4g}")


def rss_mib() -> float:
    """The current resident set size of this process, in MiB (Linux)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:  # pragma: no cover - not Linux
        return float("nan")


def reset_peak_rss() -> bool:
    """Start a new peak-RSS measurement (Linux 4.0+: ``5 > /proc/self/clear_refs``)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:  # pragma: no cover - not Linux, or not allowed
        return False


def peak_rss_mib() -> float:
    """The peak resident set size of this process so far, in MiB.

    Read from ``VmHWM`` in ``/proc/self/status``: ``ru_maxrss`` survives ``fork`` + ``exec``,
    so a child started by a large parent reports the parent's size as its own peak.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:  # pragma: no cover - not Linux
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # pragma: no cover
