"""Decoding speed: tokens per second of ``ax.nn.generate`` (a KV cache, one jitted decode
loop in ``lax.scan``) against recomputing the whole prefix every step, at batch 1 and 16.

The model is the transformer example's ``LM`` (its ``tiny`` preset: 2 layers, embed 128,
4 heads, context 64), untrained: speed does not depend on the weights. Recomputing is
what a model without a cache does: each new token runs the model over the window so far
(one compiled call over the full context, the padding masked out by causality), in a
Python loop. Both generate ``steps`` tokens after a prompt of ``prompt`` tokens, greedily.

    python -m benchmarks.decode            # the table of BENCHMARKS.md
    python -m benchmarks.decode --gpt2     # GPT-2 124M: both forms of the blocks, a ragged batch
    python -m benchmarks.decode --real     # GPT-2 124M and a 1.1B Llama against a JAX expert
                                           # and PyTorch (benchmarks.decode_real)

``--gpt2`` decodes with ``axjax.models.gpt2.GPT2`` at GPT-2 small's size (12 layers, width
768, vocabulary 50257, random weights) against a cache of its 1024 positions: the blocks
unrolled (a cache per block) and stacked (one cache stacked over ``Layer``, written in place
by the scan), at batch 1 and 8, and a ragged batch of 8 prompts (``lengths=``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import axjax as ax

__all__ = ["bench_decode", "bench_gpt2", "gpt2_markdown", "markdown", "main"]


def _example() -> Any:
    from .transformer import example

    return example()


def _time(fn: Callable[[], Any], rounds: int) -> float:
    """Median seconds of ``fn`` (after one warm-up call, which compiles)."""
    jax.block_until_ready(fn())
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_decode(
    batches: Sequence[int] = (1, 16), prompt: int = 8, steps: int = 48, rounds: int = 3
) -> list[dict[str, Any]]:
    """One row per batch size: tokens/s cached, recomputing, and their ratio."""
    ex = _example()
    cfg = ex.PRESETS["tiny"]
    model = ex.LM(cfg, key=jax.random.key(0))
    decoder = ex.Decoding(model)
    ctx = cfg.context
    if prompt + steps > ctx:
        raise ValueError(f"decode: prompt + steps ({prompt + steps}) exceed the context {ctx}")
    rows = []
    for b in batches:
        ids = np.random.default_rng(0).integers(0, 256, (b, prompt)).astype(np.int32)
        prompt_t = ax.tensor(ids, ex.Batch, ex.Pos)

        def cached(p: Any = prompt_t) -> Any:
            return ax.nn.generate(decoder, p, steps, temperature=0, max_len=ctx).array

        @eqx.filter_jit
        def next_token(m: Any, window: jax.Array, t: jax.Array) -> jax.Array:
            logits = m(ax.tensor(window, ex.Batch, ex.Pos))
            last = ax.transpose(logits, ex.Batch, ex.Pos, ex.Vocab).array
            return jnp.argmax(jax.lax.dynamic_index_in_dim(last, t - 1, 1, False), -1)

        def recompute(ids: np.ndarray = ids, b: int = b) -> Any:
            window = jnp.zeros((b, ctx), jnp.int32).at[:, :prompt].set(ids)
            for t in range(prompt, prompt + steps):
                tok = next_token(model, window, jnp.int32(t))
                window = window.at[:, t].set(tok.astype(jnp.int32))
            return window

        s_cached, s_recompute = _time(cached, rounds), _time(recompute, rounds)
        rows.append(
            {
                "batch": b,
                "steps": steps,
                "prompt": prompt,
                "cached_tok_s": round(b * steps / s_cached, 1),
                "recompute_tok_s": round(b * steps / s_recompute, 1),
                "speedup": round(s_recompute / s_cached, 2),
            }
        )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| batch | tokens/s, ax.nn.generate (KV cache) | tokens/s, recomputing the prefix "
        "| speed-up |",
        "|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['batch']} | {r['cached_tok_s']:,.0f} | {r['recompute_tok_s']:,.0f} "
            f"| {r['speedup']:.1f}× |"
        )
    return "\n".join(lines)


@final
class Batch(ax.Axis):
    """The rows of a GPT-2 batch."""


def bench_gpt2(
    config: Any = None,
    batches: Sequence[int] = (1, 8),
    prompt: int = 16,
    steps: int = 32,
    rounds: int = 3,
) -> list[dict[str, Any]]:
    """Tokens per second of greedy ``ax.nn.generate`` on a GPT-2 (``config``: GPT-2 small by
    default) at a cache of its ``n_positions``, both forms of the blocks; the last row of
    each form is a ragged batch (prompts of ``prompt // 2 .. prompt`` tokens)."""
    from axjax.models import gpt2

    config = config or gpt2.GPT2Config()
    rng = np.random.default_rng(0)
    rows = []
    for unroll in (True, False):
        model = gpt2.GPT2(config, key=jax.random.key(0), unroll=unroll)
        for b, ragged in [*((b, False) for b in batches), (max(batches), True)]:
            ids = rng.integers(0, config.vocab_size, (b, prompt)).astype(np.int32)
            prompt_t = ax.tensor(ids, Batch, gpt2.Pos, dtype=ax.I32)
            lengths = np.linspace(prompt // 2, prompt, b).astype(np.int32) if ragged else None

            def run(p: Any = prompt_t, n: Any = lengths, m: Any = model) -> Any:
                out = ax.nn.generate(
                    m, p, steps, temperature=0, lengths=n, max_len=config.n_positions
                )
                return out.array

            seconds = _time(run, rounds)
            rows.append(
                {"form": "unrolled" if unroll else "stacked", "batch": b, "ragged": ragged,
                 "tok_s": b * steps / seconds, "ms_per_step": 1e3 * seconds / steps}
            )  # fmt: skip
    return rows


def gpt2_markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| blocks | batch | tokens/s | ms per step |", "|---|---:|---:|---:|"]
    for r in rows:
        batch = f"{r['batch']} (ragged)" if r["ragged"] else str(r["batch"])
        lines.append(f"| {r['form']} | {batch} | {r['tok_s']:,.1f} | {r['ms_per_step']:,.1f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.decode", description=__doc__)
    p.add_argument("--steps", type=int, default=48)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--gpt2", action="store_true", help="GPT-2 124M, both forms of the blocks")
    p.add_argument("--real", action="store_true", help="GPT-2 124M and a 1.1B Llama: 3 rows")
    p.add_argument("--preset", choices=("gpu", "quick"), help="--real: default gpu on a GPU")
    p.add_argument("--torch", choices=("auto", "compile", "eager", "off"), default="auto")
    p.add_argument("--json", help="--real: write the results to this file")
    p.add_argument("--models", default="gpt2,llama", help="--real: gpt2, llama or both")
    args = p.parse_args(argv)
    if args.real:
        # torch shares the GPU: JAX must not take 75 % of it up front (before JAX starts)
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        from .decode_real import main as real

        preset = args.preset or ("gpu" if jax.default_backend() == "gpu" else "quick")
        models = tuple(args.models.split(","))
        return real(
            preset, rounds=args.rounds, torch=args.torch, json_path=args.json, models=models
        )
    if args.gpt2:
        print(gpt2_markdown(bench_gpt2(steps=args.steps, rounds=args.rounds)))
        return 0
    print(markdown(bench_decode(steps=args.steps, rounds=args.rounds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
