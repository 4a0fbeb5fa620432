"""``python -m benchmarks.large``: compute-bound blocks, achieved FLOP/s, axjax against JAX.

The MNIST models (``python -m benchmarks``) measure what axis names cost per step when the
step is small. These blocks ask the other question: when the matrix products dominate, does
axjax reach the FLOP/s of hand-written JAX, and how close do both come to the device's peak?

- **MLP**: ``layers`` residual blocks ``h + gelu(h @ W1) @ W2`` (width ``d``, hidden
  ``4 d``), batch ``b``; axjax writes ``h @ w1`` on ``[Batch, Embed] @ [Embed, Hidden]``.
- **Attention**: ``ax.nn.MultiheadAttention`` (no biases) on ``[Batch, Time, Embed]``,
  against the same einsums by hand from the same weights, the softmax in float32 as
  ``jax.nn.dot_product_attention`` and axjax compute it (``jax.nn.softmax(scores.astype(
  f32)).astype(bf16)``), the probabilities in the compute dtype.
- **Attention, cuDNN** (a GPU, BF16/F16 only; elsewhere a note says why it did not run):
  the same block with ``implementation="cudnn"`` against the expert calling
  ``jax.nn.dot_product_attention(..., implementation="cudnn")`` (flash attention).

Each step is the gradient of ``mean(square(y))`` with respect to every weight, in one
``jax.jit``. FLOPs are the matrix products' (``2 m n k`` each) times 3 for forward and
backward; elementwise work is not counted. The peak is the best of a large square
``jnp.dot`` in the same dtype on the same device. Timing is interleaved as in the main
benchmark: each round times a window of each path in rotated order, and the axjax / JAX
ratio is taken within a round.

Examples:
    .venv/bin/python -m benchmarks.large                  # preset for the device found
    .venv/bin/python -m benchmarks.large --preset gpu --dtype bf16 --json large.json
    .venv/bin/python -m benchmarks.large --preset quick   # seconds: the smoke run
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, final

import jax
import jax.numpy as jnp

import axjax as ax

from ._common import summary

__all__ = ["PRESETS", "Sizes", "bench_large", "main"]


@final
class Batch(ax.Axis):
    """Examples."""


@final
class Time(ax.Axis):
    """Token positions."""


@final
class Embed(ax.Axis):
    """The model width."""


@final
class Hidden(ax.Axis):
    """The MLP's hidden width (4 x Embed)."""


@dataclass(frozen=True)
class Sizes:
    """Block sizes: MLP ``mlp_batch x width``, ``layers`` blocks; attention ``att_batch x
    seq x width`` with ``heads`` heads; the peak's square matmul ``peak_n``."""

    width: int
    mlp_batch: int
    layers: int
    att_batch: int
    seq: int
    heads: int
    peak_n: int


PRESETS: dict[str, Sizes] = {
    "quick": Sizes(width=32, mlp_batch=16, layers=2, att_batch=2, seq=8, heads=2, peak_n=64),
    "cpu": Sizes(width=512, mlp_batch=256, layers=2, att_batch=4, seq=256, heads=8, peak_n=2048),
    "gpu": Sizes(
        width=4096, mlp_batch=8192, layers=4, att_batch=16, seq=2048, heads=16, peak_n=8192
    ),
}
DTYPES = {"f32": (ax.F32, jnp.float32), "bf16": (ax.BF16, jnp.bfloat16)}


# ----------------------------------------------------------------------------- blocks
@dataclass
class Block:
    """One block in both versions: ``grad_*`` jitted gradient functions and their args."""

    name: str
    flops: float
    grad_jax: Callable[..., Any]
    args_jax: tuple[Any, ...]
    grad_axjax: Callable[..., Any]
    args_axjax: tuple[Any, ...]
    loss_jax: Callable[..., Any]
    loss_axjax: Callable[..., Any]


def mlp_block(s: Sizes, dtype: str, key: jax.Array) -> Block:
    """Residual GELU MLP blocks; both versions from the same weights and batch."""
    marker, np_dtype = DTYPES[dtype]
    d, h, b = s.width, 4 * s.width, s.mlp_batch
    keys = jax.random.split(key, 2 * s.layers + 1)
    ws = [
        (
            jax.random.normal(keys[2 * i], (d, h), np_dtype) / math.sqrt(d),
            jax.random.normal(keys[2 * i + 1], (h, d), np_dtype) / math.sqrt(h),
        )
        for i in range(s.layers)
    ]
    x = jax.random.normal(keys[-1], (b, d), np_dtype)

    def loss_jax(ws: Any, x: Any) -> Any:
        for w1, w2 in ws:
            x = x + jax.nn.gelu(x @ w1) @ w2
        return jnp.mean(jnp.square(x.astype(jnp.float32)))

    tws = [
        (ax.tensor(w1, Embed, Hidden, dtype=marker), ax.tensor(w2, Hidden, Embed, dtype=marker))
        for w1, w2 in ws
    ]
    tx = ax.tensor(x, Batch, Embed, dtype=marker)

    def loss_axjax(ws: Any, x: Any) -> Any:
        for w1, w2 in ws:
            x = x + ax.gelu(x @ w1) @ w2
        return ax.mean(ax.square(ax.astype(x, ax.F32)), (Batch, Embed)).array

    flops = 3 * s.layers * 2 * (2 * b * d * h)
    return Block(
        "mlp",
        flops,
        jax.jit(jax.grad(loss_jax)),
        (ws, x),
        jax.jit(jax.grad(loss_axjax)),
        (tws, tx),
        loss_jax,
        loss_axjax,
    )


def attention_block(s: Sizes, dtype: str, key: jax.Array, cudnn: bool = False) -> Block:
    """``ax.nn.MultiheadAttention`` against the same einsums by hand (softmax in float32),
    same weights; with ``cudnn``, both through cuDNN flash attention."""
    marker, np_dtype = DTYPES[dtype]
    b, t, e, heads = s.att_batch, s.seq, s.width, s.heads
    dh = e // heads
    k1, k2 = jax.random.split(key)
    mha = ax.nn.MultiheadAttention(
        Embed,
        e,
        num_heads=heads,
        query_pos=Time,
        dtype=marker,
        implementation="cudnn" if cudnn else "auto",
        key=k1,
    )
    x = jax.random.normal(k2, (b, t, e), np_dtype)
    tx = ax.tensor(x, Batch, Time, Embed, dtype=marker)
    # [Head, HeadDim, Embed] x 3 and [Embed, Head, HeadDim], as the module stores them
    ws = tuple(w.array for w in (mha.query_proj, mha.key_proj, mha.value_proj, mha.output_proj))
    scale = 1.0 / math.sqrt(dh)

    def loss_jax(ws: Any, x: Any) -> Any:
        wq, wk, wv, wo = ws
        q, k, v = (jnp.einsum("bte,hde->bthd", x, w) for w in (wq, wk, wv))
        if cudnn:
            o = jax.nn.dot_product_attention(q, k, v, scale=scale, implementation="cudnn")
        else:
            scores = jnp.einsum("bthd,bshd->bhts", q * scale, k)
            # the softmax in float32, as jax.nn.dot_product_attention's and axjax's
            probs = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(x.dtype)
            o = jnp.einsum("bhts,bshd->bthd", probs, v)
        y = jnp.einsum("bthd,ehd->bte", o, wo)
        return jnp.mean(jnp.square(y.astype(jnp.float32)))

    def loss_axjax(mha: Any, x: Any) -> Any:
        y = mha(x)
        return ax.mean(ax.square(ax.astype(y, ax.F32)), (Batch, Time, Embed)).array

    flops = 3 * (4 * 2 * b * t * e * e + 2 * 2 * b * t * t * e)
    return Block(
        "attention-cudnn" if cudnn else "attention",
        flops,
        jax.jit(jax.grad(loss_jax)),
        (ws, x),
        jax.jit(jax.grad(loss_axjax)),
        (mha, tx),
        loss_jax,
        loss_axjax,
    )


# ----------------------------------------------------------------------------- timing
def _window(fn: Callable[..., Any], args: tuple[Any, ...], n: int) -> float:
    """Seconds per call over ``n`` calls, then one sync."""
    t0 = time.perf_counter()
    out = None
    for _ in range(n):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / n


def measured_peak(n: int, dtype: str, repeats: int = 5) -> float:
    """The best FLOP/s of an ``n x n`` by ``n x n`` ``jnp.dot`` in ``dtype`` (the device's
    measured peak for this benchmark)."""
    _, np_dtype = DTYPES[dtype]
    k1, k2 = jax.random.split(jax.random.key(1))
    a, b = (jax.random.normal(k, (n, n), np_dtype) for k in (k1, k2))
    dot = jax.jit(jnp.dot)
    jax.block_until_ready(dot(a, b))
    calls = max(1, int(0.2 / max(_window(dot, (a, b), 1), 1e-6)))
    return 2 * n**3 / min(_window(dot, (a, b), calls) for _ in range(repeats))


def bench_block(block: Block, rounds: int, window_s: float, peak: float) -> dict[str, Any]:
    """Interleaved rounds of both versions; times, TFLOP/s, ratios, fractions of peak."""
    paths = {"jax": (block.grad_jax, block.args_jax), "axjax": (block.grad_axjax, block.args_axjax)}
    first = {}
    for k, (fn, args) in paths.items():  # compile, and the first call
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        first[k] = time.perf_counter() - t0
    one = _window(block.grad_jax, block.args_jax, 1)
    n = max(1, min(200, int(window_s / max(one, 1e-6))))
    times: dict[str, list[float]] = {k: [] for k in paths}
    ratios: list[float] = []
    for r in range(rounds):
        order = list(paths) if r % 2 == 0 else list(paths)[::-1]
        for k in order:
            fn, args = paths[k]
            times[k].append(_window(fn, args, n))
        ratios.append(times["jax"][-1] / times["axjax"][-1])  # >1: axjax faster
    loss_j = float(block.loss_jax(*block.args_jax))
    loss_a = float(block.loss_axjax(*block.args_axjax))
    out: dict[str, Any] = {
        "flops_per_step": block.flops,
        "steps_per_window": n,
        "ratio": summary(ratios),
        "loss_jax": loss_j,
        "loss_axjax": loss_a,
    }
    for k, ts in times.items():
        best = statistics.median(ts)
        out[k] = {
            "ms_per_step": summary([t * 1e3 for t in ts]),
            "tflops": summary([block.flops / t / 1e12 for t in ts]),
            "fraction_of_peak": block.flops / best / peak,
            "first_call_s": first[k],
        }
    return out


def bench_large(
    sizes: Sizes,
    dtype: str,
    rounds: int = 7,
    window_s: float = 0.5,
    blocks: Sequence[str] = ("mlp", "attention", "attention-cudnn"),
) -> dict[str, Any]:
    """Run the blocks; return a results dict (see :func:`markdown`). A block that cannot
    run here (``attention-cudnn`` without a GPU or in F32) is listed under ``"skipped"``
    with the reason."""
    peak = measured_peak(sizes.peak_n, dtype)
    makers: dict[str, Callable[..., Block]] = {
        "mlp": mlp_block,
        "attention": attention_block,
        "attention-cudnn": lambda s, d, k: attention_block(s, d, k, cudnn=True),
    }
    results: dict[str, Any] = {
        "device": str(jax.devices()[0].device_kind),
        "backend": jax.default_backend(),
        "dtype": dtype,
        "sizes": asdict(sizes),
        "peak_tflops": peak / 1e12,
        "blocks": {},
        "skipped": {},
    }
    for i, name in enumerate(blocks):
        if name == "attention-cudnn":
            refused = ax.nn.cudnn_refusal(DTYPES[dtype][0], sizes.width // sizes.heads)
            if refused is not None:
                results["skipped"][name] = refused[1]
                continue
        if name == "transformer":  # the whole LM training step: benchmarks/transformer.py
            from .transformer import PRESETS as LM_PRESETS
            from .transformer import transformer_row

            preset = next((k for k, v in PRESETS.items() if v == sizes), "quick")
            results["blocks"][name] = transformer_row(
                LM_PRESETS[preset], dtype, rounds, window_s, peak
            )
            continue
        block = makers[name](sizes, dtype, jax.random.key(10 + i))
        results["blocks"][name] = bench_block(block, rounds, window_s, peak)
    return results


def markdown(res: dict[str, Any]) -> str:
    """The results as a Markdown table."""
    s = res["sizes"]
    lines = [
        f"Device: {res['device']} ({res['backend']}), {res['dtype']}; measured peak "
        f"{res['peak_tflops']:.3g} TFLOP/s ({s['peak_n']}² jnp.dot). MLP: batch "
        f"{s['mlp_batch']}, width {s['width']}, hidden {4 * s['width']}, {s['layers']} "
        f"blocks; attention: batch {s['att_batch']}, {s['seq']} tokens, width {s['width']}, "
        f"{s['heads']} heads.",
        "",
        "| block | GFLOP/step | JAX ms | axjax ms | JAX TFLOP/s | axjax TFLOP/s | axjax ÷ JAX "
        "(speed) | JAX % of peak | axjax % of peak | first call s (JAX / axjax) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def spread(d: dict[str, float], fmt: str) -> str:
        return f"{d['median']:{fmt}} [{d['min']:{fmt}}–{d['max']:{fmt}}]"

    for name, b in res["blocks"].items():
        j, a = b["jax"], b["axjax"]
        lines.append(
            f"| {name} | {b['flops_per_step'] / 1e9:.4g} | {j['ms_per_step']['median']:.4g} | "
            f"{a['ms_per_step']['median']:.4g} | {j['tflops']['median']:.3g} | "
            f"{a['tflops']['median']:.3g} | {spread(b['ratio'], '.2f')} | "
            f"{100 * j['fraction_of_peak']:.0f} % | {100 * a['fraction_of_peak']:.0f} % | "
            f"{j['first_call_s']:.2f} / {a['first_call_s']:.2f} |"
        )
    skipped = res.get("skipped", {})
    lines += ["", *(f"Not run: {k} ({why})." for k, why in skipped.items())] if skipped else []
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.large", description=__doc__.split("\n")[0] if __doc__ else None
    )
    p.add_argument(
        "--preset", choices=sorted(PRESETS), help="sizes (default: gpu on a GPU, cpu otherwise)"
    )
    p.add_argument(
        "--dtype", choices=sorted(DTYPES), help="default: bf16 on a GPU or TPU, f32 on a CPU"
    )
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--window", type=float, default=0.5, help="seconds per timed window")
    p.add_argument(
        "--blocks",
        default="mlp,attention,attention-cudnn",
        help="comma-separated: mlp, attention, attention-cudnn (a GPU), transformer",
    )
    p.add_argument("--json", help="write the results to this file")
    args = p.parse_args(argv)
    accelerator = jax.default_backend() != "cpu"
    preset = args.preset or ("gpu" if accelerator else "cpu")
    dtype = args.dtype or ("bf16" if accelerator else "f32")
    blocks = [b.strip() for b in args.blocks.split(",") if b.strip()]
    res = bench_large(PRESETS[preset], dtype, args.rounds, args.window, blocks)
    res["preset"] = preset
    print(markdown(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
