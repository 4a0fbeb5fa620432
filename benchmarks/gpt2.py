"""``python -m benchmarks.gpt2``: GPT-2 124M at its real vocabulary, axjax against the JAX
expert and compiled PyTorch.

The model is the transformer example's (``examples/transformer``: pre-norm blocks, learned
positions, tied embeddings, tanh GELU) at GPT-2 small's sizes: context 1024, 12 layers, 12
heads, width 768, vocabulary 50,257 (``gpt2-124m``) or 50,304 (``gpt2-124m-padded``, as
llm.c and nanoGPT pad it). The recipe: bf16 compute, float32 master weights, AdamW
(lr 6e-4, betas 0.9/0.95, weight decay 0.1). Rows, all in this process, all from the
**same weights and batch**:

- ``jax``: the expert, hand-written: plain arrays, ``jax.nn.dot_product_attention``
  (cuDNN flash attention on a GPU), the full logits and ``logsumexp``, ``optax.adamw``,
  one ``jax.jit`` donating its state;
- ``axjax TrainStep``: the loop docs/training.md recommends, the example's ``lm_loss``
  (``ax.train.linear_cross_entropy``: the head and the loss blockwise) under
  ``ax.nn.Policy.mixed(BF16)``;
- ``axjax fit step``: the step ``ax.train.fit`` runs (``prepare`` + ``make_train_step``,
  ``guard="replay"``'s unguarded step);
- ``pytorch``: as a PyTorch expert writes it: ``torch.compile``,
  ``F.scaled_dot_product_attention`` (flash), bf16 autocast, fused AdamW, TF32 allowed.
  It runs where torch is importable (with CUDA on a GPU); elsewhere its line says why.

Each row's losses at steps 1 and 2 are printed and must agree (step 1 is near ln V for
every row; step 2 checks the update). Then interleaved rounds time a window of each row in
rotated order; each row prints as it completes. Figures: ms/step, tokens/s, MFU against
the measured bf16 peak (``benchmarks.large.measured_peak``; FLOPs as
``benchmarks.transformer.flops_per_step``), and the compiled temporary memory.

Examples:
    python -m benchmarks.gpt2                       # gpt2-124m on a GPU, quick on a CPU
    python -m benchmarks.gpt2 --preset quick        # seconds: every row at a tiny size
    python -m benchmarks.gpt2 --preset gpt2-124m-padded --rounds 5
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["PRESETS", "Row", "agree", "build_rows", "main"]


def _presets() -> dict[str, Any]:
    from .transformer import example

    config = example().Config
    small = {"context": 1024, "embed": 768, "heads": 12, "layers": 12, "mlp": 3072, "batch": 16}
    return {
        "quick": config(context=16, embed=32, heads=2, layers=1, mlp=64, batch=2, vocab=50257),
        "gpt2-124m": config(**small, vocab=50257),
        "gpt2-124m-padded": config(**small, vocab=50304),
    }


PRESETS = _presets()
LR, BETAS, WEIGHT_DECAY, EPS = 6e-4, (0.9, 0.95), 0.1, 1e-8


@dataclasses.dataclass
class Row:
    """One way of training: ``step()`` runs one step and returns a handle whose
    ``loss()`` reads that step's loss (a host sync) and whose ``wait()`` waits for it;
    ``temp_bytes``: the compiled step's temporary memory (``None``: not known)."""

    name: str
    step: Callable[[], Any]
    loss: Callable[[Any], float]
    wait: Callable[[Any], None]
    temp_bytes: int | None = None
    note: str = ""


def _batch(cfg: Any, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    chunk = rng.integers(0, cfg.vocab, (cfg.batch, cfg.context + 1)).astype(np.int32)
    return chunk[:, :-1], chunk[:, 1:]


def _optax() -> Any:
    import optax

    return optax.adamw(LR, b1=BETAS[0], b2=BETAS[1], eps=EPS, weight_decay=WEIGHT_DECAY)


def _temp(lowered: Callable[[], Any], memory: bool) -> int | None:
    """The compiled temporary memory of ``lowered()`` (``None``: not asked for, or a backend
    without memory analysis). It compiles the step once more: tests leave it out."""
    if not memory:
        return None
    try:
        return int(lowered().compile().memory_analysis().temp_size_in_bytes)
    except Exception:  # noqa: BLE001 - a backend without memory analysis
        return None


def jax_row(
    lm: Any, cfg: Any, batch: tuple[np.ndarray, np.ndarray], attention: str, memory: bool = True
) -> Row:
    """The expert: :func:`benchmarks.transformer.jax_loss` in bf16, ``optax.adamw``."""
    import jax
    import jax.numpy as jnp

    from .transformer import jax_loss, jax_weights

    opt = _optax()
    params = jax.tree.map(lambda a: jnp.array(a, copy=True), jax_weights(lm))

    def step(p: Any, s: Any, x: Any, y: Any) -> tuple[Any, Any, Any]:
        loss, g = jax.value_and_grad(jax_loss)(p, x, y, jnp.bfloat16, attention)
        u, s = opt.update(g, s, p)
        return jax.tree.map(lambda a, b: a + b, p, u), s, loss

    jitted = jax.jit(step, donate_argnums=(0, 1))
    x, y = (jnp.asarray(a) for a in batch)
    state = [params, opt.init(params)]
    temp = _temp(lambda: jitted.lower(*state, x, y), memory)

    def run() -> Any:
        state[0], state[1], loss = jitted(state[0], state[1], x, y)
        return loss

    return Row(f"jax ({attention} attention)", run, float, jax.block_until_ready, temp)


def _policy_and_batch(cfg: Any, batch: tuple[np.ndarray, np.ndarray]) -> tuple[Any, Any, Any]:
    import axjax as ax

    from .transformer import example

    mod = example()
    x = ax.tensor(batch[0], mod.Batch, mod.Pos, dtype=ax.I32)
    y = ax.tensor(batch[1], mod.Batch, mod.Pos, dtype=ax.I32)
    return ax.nn.Policy.mixed(ax.BF16), x, y


def train_step_row(
    lm: Any, cfg: Any, batch: tuple[np.ndarray, np.ndarray], memory: bool = True
) -> Row:
    """``ax.train.TrainStep(lm, adamw, lm_loss, precision=Policy.mixed(BF16))``."""
    import axjax as ax

    from .transformer import example

    policy, x, y = _policy_and_batch(cfg, batch)
    step = ax.train.TrainStep(lm, _optax(), example().lm_loss, precision=policy)
    temp = _temp(lambda: step.lower(x, y), memory)

    def loss(_: Any) -> float:
        return step.metrics()["loss"]  # the mean since the last read: this step's

    return Row(
        "axjax TrainStep", lambda: step(x, y), loss, lambda _: step.block_until_ready(), temp
    )


def fit_step_row(
    lm: Any, cfg: Any, batch: tuple[np.ndarray, np.ndarray], memory: bool = True
) -> Row:
    """The step ``fit`` runs: ``prepare`` (the policy) and ``make_train_step``, unguarded
    (``fit``'s default ``guard="replay"``), the step number a Python int."""
    import equinox as eqx
    import jax

    import axjax as ax
    from axjax.train._setup import prepare

    from .transformer import example

    policy, x, y = _policy_and_batch(cfg, batch)
    prep = prepare(lm, _optax(), example().lm_loss, precision=policy)
    params, static = eqx.partition(prep.model, eqx.is_array)
    step = ax.train.make_train_step(prep.loss_fn, prep.optimizer, static, guard=False)
    mon = ax.train.Monitor.zero(("loss",), guarded=False)
    key = jax.random.key(0)
    state: list[Any] = [params, prep.opt_state, mon, 0]
    temp = _temp(lambda: step.lower(params, prep.opt_state, mon, (x, y), key, 0), memory)

    def run() -> Any:
        p, s, m, i = state
        p, s, m = step(p, s, m, (x, y), key, i)
        state[:] = [p, s, m.reset(), i + 1]
        return m

    def loss(m: Any) -> float:
        return m.read()[0]["loss"]

    return Row("axjax fit step", run, loss, lambda m: jax.block_until_ready(m), temp)


def build_rows(
    preset: str, *, seed: int = 0, torch: str = "auto", unroll: bool = True, memory: bool = True
) -> tuple[Any, list[Row], list[str]]:
    """The config and every row from the same weights and batch, and a note per row left
    out. ``torch``: ``"auto"`` (where importable), ``"off"``, ``"eager"`` (no compile);
    ``memory``: compile each step once more for its temporary memory."""
    import jax

    from ._gpt2_torch import torch_row, torch_unavailable
    from .transformer import example

    cfg = PRESETS[preset]
    lm = example().LM(cfg, key=jax.random.key(seed), unroll=unroll)
    batch = _batch(cfg, seed)
    gpu = jax.default_backend() == "gpu"
    rows = [jax_row(lm, cfg, batch, "cudnn" if gpu else "fused", memory)]
    rows += [train_step_row(lm, cfg, batch, memory), fit_step_row(lm, cfg, batch, memory)]
    notes = []
    why = "--torch off" if torch == "off" else torch_unavailable()
    if why is None:
        rows.append(torch_row(lm, cfg, batch, compile=torch != "eager"))
    else:
        notes.append(f"no pytorch row: {why}")
    return cfg, rows, notes


def agree(rows: Sequence[Row], steps: int = 2) -> dict[str, list[float]]:
    """Each row's losses at steps 1..``steps`` (run now: the rows continue from there)."""
    return {r.name: [r.loss(r.step()) for _ in range(steps)] for r in rows}


def check_agreement(
    losses: dict[str, list[float]], rtol: float = 2e-3, drop_rtol: float = 0.1
) -> list[str]:
    """The rows that disagree with the first row: a loss more than ``rtol`` away, or a
    first update (the drop from step 1 to step 2) more than ``drop_rtol`` of the first
    row's drop away (at step 1 every row is near ln V, so the drop is what checks the
    update: a row that skipped it is off by its whole drop)."""
    ref = next(iter(losses.values()))
    bad = []
    for name, got in losses.items():
        drop, ref_drop = got[0] - got[-1], ref[0] - ref[-1]
        if not np.allclose(got, ref, rtol=rtol) or abs(drop - ref_drop) > drop_rtol * abs(ref_drop):
            bad.append(f"{name}: {got} against {ref}")
    return bad


def _window(row: Row, n: int) -> float:
    t0 = time.perf_counter()
    handle = None
    for _ in range(n):
        handle = row.step()
    row.wait(handle)
    return (time.perf_counter() - t0) / n


def time_rows(
    rows: Sequence[Row], rounds: int, window_s: float, report: Callable[[Row, list[float]], None]
) -> dict[str, list[float]]:
    """Interleaved windows, the order rotated each round; ``report`` is called for each row
    once its rounds are complete (so a timeout still leaves the rows already printed)."""
    n = {r.name: max(1, min(100, int(window_s / max(_window(r, 1), 1e-6)))) for r in rows}
    times: dict[str, list[float]] = {r.name: [] for r in rows}
    for i in range(rounds):
        for r in rows[i % len(rows) :] + rows[: i % len(rows)]:
            times[r.name].append(_window(r, n[r.name]))
    for r in rows:
        report(r, times[r.name])
    return times


def figures(cfg: Any, seconds: list[float], peak: float) -> dict[str, float]:
    """ms/step, tokens/s and MFU of the median window."""
    from .transformer import flops_per_step

    best = statistics.median(seconds)
    flops = flops_per_step(cfg)
    return {
        "ms_per_step": best * 1e3,
        "tokens_per_s": cfg.batch * cfg.context / best,
        "mfu": flops / best / peak,
        "min_ms": min(seconds) * 1e3,
        "max_ms": max(seconds) * 1e3,
    }


def _line(r: Row, f: dict[str, float], base: float) -> str:
    temp = "n/a" if r.temp_bytes is None else f"{r.temp_bytes / 2**20:,.0f}"
    return (
        f"| {r.name} | {f['ms_per_step']:.4g} [{f['min_ms']:.4g}–{f['max_ms']:.4g}] | "
        f"{f['tokens_per_s']:,.0f} | {100 * f['mfu']:.1f} % | {temp} | "
        f"{base / f['ms_per_step']:.2f} |"
    )


def bench(preset: str, rounds: int, window_s: float, torch: str = "auto") -> dict[str, Any]:
    """Build, check agreement, time, print each row as it completes; the results."""
    import jax

    from .large import measured_peak

    cfg, rows, notes = build_rows(preset, torch=torch)
    c = dataclasses.asdict(cfg)
    print(
        f"{preset} on {jax.devices()[0].device_kind}: batch {c['batch']} x {c['context']}, "
        f"{c['layers']} layers, width {c['embed']}, vocabulary {c['vocab']}; bf16 compute, "
        "f32 master weights, AdamW",
        flush=True,
    )
    losses = agree(rows)
    for name, got in losses.items():
        print(f"losses at steps 1, 2: {name}: {got[0]:.5f}, {got[1]:.5f}", flush=True)
    bad = check_agreement(losses)
    peak = measured_peak(8192 if jax.default_backend() == "gpu" else 512, "bf16")
    print(f"{'; '.join(notes)}\nmeasured bf16 peak {peak / 1e12:.4g} TFLOP/s\n", flush=True)
    print("| row | ms/step [min–max] | tokens/s | MFU | temp MiB | speed vs jax |")
    print("|---|---|---|---|---|---|", flush=True)
    out: dict[str, Any] = {"preset": preset, "config": c, "losses": losses, "rows": {}}
    out |= {"notes": notes, "disagree": bad, "peak_tflops": peak / 1e12}

    def report(r: Row, seconds: list[float]) -> None:
        f = figures(cfg, seconds, peak) | {"temp_bytes": r.temp_bytes}
        out["rows"][r.name] = f
        base = next(iter(out["rows"].values()))["ms_per_step"]
        print(_line(r, f, base), flush=True)

    time_rows(rows, rounds, window_s, report)
    if bad:
        raise SystemExit("the rows' losses disagree:\n" + "\n".join(bad))
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.gpt2", description=__doc__.split("\n")[0]
    )
    p.add_argument("--preset", choices=sorted(PRESETS), help="default: gpt2-124m on a GPU")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--window", type=float, default=1.0, help="seconds per timed window")
    p.add_argument("--torch", choices=("auto", "off", "eager"), default="auto")
    p.add_argument("--json", help="write the results to this file")
    args = p.parse_args(argv)
    # torch shares the GPU: JAX must not take 75 % of it up front (before JAX starts)
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax

    preset = args.preset or ("gpt2-124m" if jax.default_backend() == "gpu" else "quick")
    res = bench(preset, args.rounds, args.window, args.torch)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
