"""``python -m benchmarks.transformer``: the transformer training step, axjax against JAX.

One step of the byte-level language model of ``examples/transformer`` (forward, backward,
Adam), in f32 and in bf16 compute with f32 weights, against the same model written in JAX
the way an expert would: plain arrays, ``jax.nn.dot_product_attention`` (causal; JAX's
default kernel, its XLA attention: ``fused`` rows), ``jax.nn.gelu``, one ``jax.jit`` with
``donate_argnums``; again with the expert's attention written in einsums (``einsum`` rows),
which an expert who measures picks where the XLA attention is slower; and, on a GPU in bf16,
with ``implementation="cudnn"`` for the expert and for axjax (``cudnn`` rows: flash
attention, the faster expert there). The table says which baseline each row uses. Both
start from the same weights and batch. Timing is interleaved: each round times a window of
each version in rotated order and the ratio is taken within the round. FLOPs count the
matrix products (``2 m n k``), attention's two included, times 3 for forward and backward;
the peak is ``benchmarks.large.measured_peak``.

It also reports: the attention paths of axjax's step on this backend (einsum, JAX's XLA
attention, cuDNN flash attention on a GPU), the path ``implementation="auto"`` takes, and
the memory of the axjax step at two depths with and without ``ax.nn.remat`` (XLA's
compiled memory analysis, and the bytes the forward keeps for the backward).

Examples:
    .venv/bin/python -m benchmarks.transformer                 # CPU sizes, f32 and bf16
    .venv/bin/python -m benchmarks.transformer --preset quick  # seconds: the smoke run
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import axjax as ax

from ._common import summary

__all__ = [
    "GPT2_PRESETS",
    "PRESETS",
    "TransformerBench",
    "bench_transformer",
    "main",
    "plain_lm_loss",
    "transformer_row",
]

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "transformer"


def example() -> ModuleType:
    """``examples/transformer/train.py`` as a module (its model, corpus and ``Config``)."""
    name = "axjax_example_transformer"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLE / "train.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # before running it: its dataclasses look it up
        spec.loader.exec_module(module)
    return sys.modules[name]


def _presets() -> dict[str, Any]:
    config = example().Config
    return {
        "quick": config(context=16, embed=32, heads=2, layers=1, mlp=64, batch=4),
        "cpu": config(),  # the example's tiny preset
        "gpu": config(context=1024, embed=768, heads=12, layers=12, mlp=3072, batch=16),
    }


PRESETS = _presets()
DTYPES = {"f32": jnp.float32, "bf16": jnp.bfloat16}


# ------------------------------------------------------------------ the expert JAX version
def _layer_norm(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    xc = x - x.mean(-1, keepdims=True)  # centred once: one gradient path into the mean
    return xc * jax.lax.rsqrt(jnp.square(xc).mean(-1, keepdims=True) + 1e-5) * w + b


#: GELU recomputed in the backward: autodiff of ``jax.nn.gelu`` keeps its tanh
#: intermediates, activation-sized (axjax's ``Gelu`` backward keeps only its input)
_gelu = jax.checkpoint(jax.nn.gelu)


def jax_weights(lm: Any) -> dict[str, Any]:
    """The axjax model's weights as a dict of plain arrays (the expert's layout)."""

    def ln(n: Any) -> tuple[jax.Array, jax.Array]:
        return n.weight.array, n.bias.array

    blocks = [getattr(b, "module", b) for b in lm.blocks]  # remat wraps a block
    blocks = [
        {
            "ln1": ln(b.ln1),
            "ln2": ln(b.ln2),
            "qkv": jnp.stack(
                [b.attn.query_proj.array, b.attn.key_proj.array, b.attn.value_proj.array]
            ),
            "o": b.attn.output_proj.array,
            "up": (b.up.weight.array.T, b.up.bias.array),
            "down": (b.down.weight.array.T, b.down.bias.array),
        }
        for b in blocks
    ]
    return {
        "tok": lm.tokens.weight.array,
        "pos": lm.positions.array,
        "blocks": blocks,
        "ln_f": ln(lm.ln_f),
    }


#: the expert's attention: ``jax.nn.dot_product_attention`` with JAX's default kernel (its XLA
#: attention), with cuDNN flash attention (a GPU, BF16/F16), or written out in einsums
JAX_ATTENTION = ("fused", "cudnn", "einsum")


def jax_loss(
    w: dict[str, Any], ids: jax.Array, targets: jax.Array, dtype: Any, attention: str = "fused"
) -> jax.Array:
    """Mean next-byte cross-entropy of the expert's model, computed in ``dtype``; its
    attention is ``jax.nn.dot_product_attention`` (``"fused"``: JAX's default kernel;
    ``"cudnn"``: flash attention) or written out in einsums (``"einsum"``: what an expert
    measures to be faster than the XLA attention)."""
    with jax.numpy_rank_promotion("allow"):  # an expert's broadcasting (the tests forbid it)
        return _jax_loss(w, ids, targets, dtype, attention)


def _einsum_attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    """Causal attention on ``[b, t, h, d]`` in einsums, softmax in float32 (as the fused
    call's XLA implementation)."""
    scores = jnp.einsum("bthd,bshd->bhts", q, k).astype(jnp.float32) / math.sqrt(q.shape[-1])
    t = q.shape[1]
    scores = jnp.where(jnp.tril(jnp.ones((t, t), bool)), scores, jnp.finfo(jnp.float32).min)
    return jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(scores, axis=-1).astype(q.dtype), v)


def _jax_loss(
    w: dict[str, Any], ids: jax.Array, targets: jax.Array, dtype: Any, attention: str
) -> jax.Array:
    w = jax.tree.map(lambda a: a.astype(dtype), w)
    x = w["tok"][ids] + w["pos"][: ids.shape[1]]
    for b in w["blocks"]:
        h = _layer_norm(x, *b["ln1"])
        q, k, v = (jnp.einsum("bte,hde->bthd", h, wi) for wi in b["qkv"])
        o = (
            _einsum_attention(q, k, v)
            if attention == "einsum"
            else jax.nn.dot_product_attention(
                q, k, v, is_causal=True, implementation="cudnn" if attention == "cudnn" else None
            )
        )
        x = x + jnp.einsum("bthd,ehd->bte", o, b["o"])
        # the MLP on [b*t, e]: a 3-D ``h @ W``'s weight gradient is a dot and a transpose,
        # which XLA:CPU materialises as a copy of the gradient
        h = _layer_norm(x, *b["ln2"]).reshape(-1, x.shape[-1])
        x = x + (_gelu(h @ b["up"][0] + b["up"][1]) @ b["down"][0] + b["down"][1]).reshape(x.shape)
    logits = (_layer_norm(x, *w["ln_f"]) @ w["tok"].T).astype(jnp.float32)
    picked = jnp.take_along_axis(logits, targets[..., None], -1)[..., 0]
    return jnp.mean(jax.nn.logsumexp(logits, -1) - picked)


#: axjax's head and loss in :func:`build`
HEADS = ("fused", "plain")


def plain_lm_loss(model: Any, ids: Any, targets: Any) -> Any:
    """The example's loss with the full float32 logits (``softmax_cross_entropy``), as the
    expert computes it."""
    mod = example()
    logits = ax.astype(model(ids), ax.F32)
    per_token = ax.train.softmax_cross_entropy(logits, targets, mod.Vocab)
    return ax.mean(ax.mean(per_token, mod.Pos), mod.Batch)


# ------------------------------------------------------------------ the two steps
@dataclasses.dataclass
class TransformerBench:
    """Both versions' jitted steps ``(params, opt_state, ids, targets) -> (params,
    opt_state, loss)`` (donating params and state), their start states, the batch."""

    flops: float
    steps: dict[str, Callable[..., Any]]
    states: dict[str, tuple[Any, Any]]
    batch: tuple[Any, Any]
    static: Any


def flops_per_step(cfg: Any) -> float:
    """Matrix-product FLOPs of one step (forward x 3)."""
    tokens = cfg.batch * cfg.context
    per_token = (
        cfg.layers
        * (2 * 4 * cfg.embed**2 + 2 * 2 * cfg.embed * cfg.mlp + 2 * 2 * cfg.context * cfg.embed)
        + 2 * cfg.embed * cfg.vocab
    )
    return 3.0 * tokens * per_token


def build(
    cfg: Any,
    dtype: str,
    *,
    implementation: str = "auto",
    remat: bool = False,
    seed: int = 0,
    jax_attention: str = "fused",
    head: str = "fused",
) -> TransformerBench:
    """The axjax step (the example's model, its attention ``implementation``) and the
    expert's, same weights and batch; the expert's attention is ``jax_attention`` (one of
    :data:`JAX_ATTENTION`). ``head``: axjax's head and loss, the example's blockwise
    ``"fused"`` one (``ax.train.linear_cross_entropy``) or the ``"plain"`` logits and
    ``softmax_cross_entropy``, as the expert computes them (the structural comparisons)."""
    if head not in HEADS:
        raise ValueError(f"head must be one of {HEADS}, got {head!r}")
    if jax_attention not in JAX_ATTENTION:
        raise ValueError(f"jax_attention must be one of {JAX_ATTENTION}, got {jax_attention!r}")
    model_mod = data_mod = example()
    cfg = dataclasses.replace(cfg, attention=implementation)
    lm = model_mod.LM(cfg, key=jax.random.key(seed), remat=remat, unroll=True)  # as the expert
    rng = np.random.default_rng(seed)
    chunk = rng.integers(0, cfg.vocab, (cfg.batch, cfg.context + 1)).astype(np.int32)
    ids, targets = chunk[:, :-1], chunk[:, 1:]
    tids = ax.tensor(ids, data_mod.Batch, data_mod.Pos, dtype=ax.I32)
    ttargets = ax.tensor(targets, data_mod.Batch, data_mod.Pos, dtype=ax.I32)
    optimizer = optax.adam(1e-3)
    policy = ax.nn.Policy.mixed(ax.BF16) if dtype == "bf16" else None
    params, static = eqx.partition(lm, eqx.is_array)

    def ax_loss(p: Any, x: Any, y: Any) -> jax.Array:
        m = eqx.combine(p, static)
        m = policy.cast_to_compute(m) if policy is not None else m
        return (model_mod.lm_loss if head == "fused" else plain_lm_loss)(m, x, y).array

    def ax_step(p: Any, s: Any, x: Any, y: Any) -> tuple[Any, Any, jax.Array]:
        loss, g = jax.value_and_grad(ax_loss)(p, x, y)
        u, s = optimizer.update(g, s, p)
        return optax.apply_updates(p, u), s, loss

    def jax_step(p: Any, s: Any, x: Any, y: Any) -> tuple[Any, Any, jax.Array]:
        loss, g = jax.value_and_grad(jax_loss)(p, x, y, DTYPES[dtype], jax_attention)
        u, s = optimizer.update(g, s, p)
        return optax.apply_updates(p, u), s, loss

    wj = _copy(jax_weights(lm))  # its own buffers: each step donates its state
    return TransformerBench(
        flops_per_step(cfg),
        {
            "jax": jax.jit(jax_step, donate_argnums=(0, 1)),
            "axjax": jax.jit(ax_step, donate_argnums=(0, 1)),
        },
        {"jax": (wj, optimizer.init(wj)), "axjax": (params, optimizer.init(params))},
        (tids, ttargets),
        static,
    )


def _copy(tree: Any) -> Any:
    return jax.tree.map(lambda a: jnp.array(a, copy=True), tree)


def _args(bench: TransformerBench, k: str) -> tuple[Any, Any]:
    x, y = bench.batch
    return (x.array, y.array) if k == "jax" else (x, y)


def losses(bench: TransformerBench, n: int = 3) -> dict[str, list[float]]:
    """The first ``n`` losses of each version from the start state (they must agree)."""
    out = {}
    for k, step in bench.steps.items():
        p, s = _copy(bench.states[k])
        got = []
        for _ in range(n):
            p, s, loss = step(p, s, *_args(bench, k))
            got.append(float(loss))
        out[k] = got
    return out


def time_steps(
    bench: TransformerBench,
    rounds: int,
    window_s: float,
    args: Callable[[TransformerBench, str], tuple[Any, Any]] = _args,
) -> dict[str, Any]:
    """Interleaved windows of the ``"jax"`` and ``"axjax"`` steps; seconds per step and
    the ratios (``jax`` time / ``axjax`` time, within each round)."""
    state = {k: _copy(v) for k, v in bench.states.items()}
    first = {}
    for k, step in bench.steps.items():
        t0 = time.perf_counter()
        p, s, loss = step(*state[k], *args(bench, k))
        jax.block_until_ready(loss)
        first[k], state[k] = time.perf_counter() - t0, (p, s)

    def window(k: str, n: int) -> float:
        p, s = state[k]
        loss = None
        t0 = time.perf_counter()
        for _ in range(n):
            p, s, loss = bench.steps[k](p, s, *args(bench, k))
        jax.block_until_ready(loss)
        state[k] = (p, s)
        return (time.perf_counter() - t0) / n

    n = max(1, min(200, int(window_s / max(window("jax", 1), 1e-6))))
    times: dict[str, list[float]] = {k: [] for k in bench.steps}
    ratios = []
    for r in range(rounds):
        for k in ["jax", "axjax"] if r % 2 == 0 else ["axjax", "jax"]:
            times[k].append(window(k, n))
        ratios.append(times["jax"][-1] / times["axjax"][-1])  # >1: axjax faster
    return {"times": times, "ratios": ratios, "first": first, "steps_per_window": n}


def transformer_row(
    cfg: Any,
    dtype: str,
    rounds: int,
    window_s: float,
    peak: float,
    jax_attention: str = "fused",
    implementation: str = "auto",
) -> dict[str, Any]:
    """The transformer step as a row of ``benchmarks.large`` (its result format): axjax
    with its attention ``implementation`` against the expert with ``jax_attention``."""
    bench = build(cfg, dtype, jax_attention=jax_attention, implementation=implementation)
    agree = losses(bench)
    t = time_steps(bench, rounds, window_s)
    out: dict[str, Any] = {
        "flops_per_step": bench.flops,
        "steps_per_window": t["steps_per_window"],
        "ratio": summary(t["ratios"]),
        "loss_jax": agree["jax"][0],
        "loss_axjax": agree["axjax"][0],
        "losses": agree,
        "implementation": implementation,
    }
    for k, ts in t["times"].items():
        best = statistics.median(ts)
        out[k] = {
            "ms_per_step": summary([x * 1e3 for x in ts]),
            "tflops": summary([bench.flops / x / 1e12 for x in ts]),
            "fraction_of_peak": bench.flops / best / peak,
            "first_call_s": t["first"][k],
        }
    return out


def cudnn_unavailable(dtype: str) -> str | None:
    """Why the cuDNN rows cannot run here (``None``: they can): a GPU and BF16 compute."""
    marker = ax.BF16 if dtype == "bf16" else ax.F32
    refused = ax.nn.cudnn_refusal(marker, 64)
    return None if refused is None else refused[1]


def auto_path(cfg: Any, dtype: str) -> str:
    """The path ``implementation="auto"`` takes for the model's attention on this backend."""
    return ax.nn.default_attention_path(
        ax.BF16 if dtype == "bf16" else ax.F32,
        cfg.embed // cfg.heads,
        causal=True,
        n_query=cfg.context,
        n_key=cfg.context,
    )


def attention_paths(cfg: Any, dtype: str, rounds: int, window_s: float) -> dict[str, Any]:
    """ms per axjax step with each attention path: einsum, JAX's XLA attention and, on a GPU
    in BF16, cuDNN flash attention; each timed interleaved with the einsum path (the
    speed-ups: einsum time / that path's time, within a round)."""
    einsum = build(cfg, dtype, implementation="einsum")
    note = cudnn_unavailable(dtype)
    out: dict[str, Any] = {"einsum_ms": [], "default": auto_path(cfg, dtype)}
    for path in ("xla", "cudnn"):
        if path == "cudnn" and note is not None:
            out["cudnn_ms"], out["cudnn_speedup"], out["cudnn_note"] = None, None, note
            continue
        other = build(cfg, dtype, implementation=path)
        # the einsum path in the "jax" slot, the other in the "axjax" slot
        both = TransformerBench(
            einsum.flops,
            {"jax": einsum.steps["axjax"], "axjax": other.steps["axjax"]},
            {"jax": einsum.states["axjax"], "axjax": other.states["axjax"]},
            einsum.batch,
            einsum.static,
        )
        t = time_steps(both, rounds, window_s, lambda b, k: b.batch)
        out["einsum_ms"] += t["times"]["jax"]
        out[f"{path}_ms"] = statistics.median(t["times"]["axjax"]) * 1e3
        out[f"{path}_speedup"] = summary(t["ratios"])  # >1: faster than einsum
    out["einsum_ms"] = statistics.median(out["einsum_ms"]) * 1e3
    return out


def _kept_bytes(b: TransformerBench) -> int:
    """Bytes the axjax forward keeps for its backward (the leaves of ``jax.vjp``'s closure)."""
    model_mod = example()
    x, y = b.batch

    def loss(q: Any) -> jax.Array:
        return model_mod.lm_loss(eqx.combine(q, b.static), x, y).array

    vjp = jax.eval_shape(lambda q: jax.vjp(loss, q)[1], b.states["axjax"][0])
    return sum(math.prod(a.shape) * a.dtype.itemsize for a in jax.tree.leaves(vjp))


def memory(cfg: Any, depths: Sequence[int] = (2, 4)) -> list[dict[str, Any]]:
    """Compiled temporary memory of the axjax f32 step, and the bytes its forward keeps for
    the backward, at each depth with and without remat."""
    rows = []
    for depth in depths:
        c = dataclasses.replace(cfg, layers=depth)
        row: dict[str, Any] = {"layers": depth}
        for remat in (False, True):
            b = build(c, "f32", remat=remat)
            p, s = b.states["axjax"]
            x, y = b.batch
            compiled = b.steps["axjax"].lower(p, s, x, y).compile()
            temp = compiled.memory_analysis().temp_size_in_bytes
            kept = _kept_bytes(b)
            key = "remat" if remat else "plain"
            row[key] = {"temp_mib": temp / 2**20, "residual_mib": kept / 2**20}
        rows.append(row)
    return rows


#: the sizes of the head-memory figure: GPT-2's vocabulary on a model small enough for a CPU
HEAD_MEMORY = {"context": 256, "embed": 128, "heads": 4, "layers": 2, "mlp": 512, "batch": 4}


def head_memory(vocab: int = 50257, dtype: str = "bf16") -> dict[str, float]:
    """Compiled temporary memory (MiB) of the whole step at :data:`HEAD_MEMORY` and
    ``vocab``: the expert (full logits), axjax with the plain head and with the blockwise
    ``linear_cross_entropy``; and one float32 ``[Batch, Pos, Vocab]`` buffer's size."""
    cfg = dataclasses.replace(PRESETS["cpu"], vocab=vocab, **HEAD_MEMORY)
    out = {"logits_buffer": cfg.batch * cfg.context * vocab * 4 / 2**20}
    for head in HEADS:
        b = build(cfg, dtype, head=head)
        for k in ("jax", "axjax") if head == "fused" else ("axjax",):
            x, y = _args(b, k)
            compiled = b.steps[k].lower(*b.states[k], x, y).compile()
            name = "expert" if k == "jax" else f"axjax {head}"
            out[name] = compiled.memory_analysis().temp_size_in_bytes / 2**20
    return out


def bench_transformer(
    preset: str,
    dtypes: Sequence[str],
    rounds: int,
    window_s: float,
    *,
    experts: Sequence[str] = JAX_ATTENTION,
    memory_rows: bool = True,
    echo: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Every figure: step rows per dtype against each expert in ``experts``, attention
    paths, memory (``memory_rows``). ``echo`` receives each row's line as it completes."""
    from .large import measured_peak

    cfg = PRESETS[preset]
    peak_n = {"quick": 64, "cpu": 1024, "gpu": 8192}[preset]
    res: dict[str, Any] = {
        "device": str(jax.devices()[0].device_kind),
        "backend": jax.default_backend(),
        "preset": preset,
        "config": dataclasses.asdict(cfg),
        "rows": {},
        "rows_einsum": {},
        "rows_cudnn": {},
        "peak_tflops": {},
        "notes": [],
    }
    say = echo or (lambda line: None)
    say(_header(res))
    for dtype in dtypes:
        peak = measured_peak(peak_n, dtype)
        res["peak_tflops"][dtype] = peak / 1e12
        for expert in experts:
            key = "rows" if expert == "fused" else f"rows_{expert}"
            note = cudnn_unavailable(dtype) if expert == "cudnn" else None
            if note is not None:
                res["notes"].append(f"no cudnn row in {dtype}: {note}")
                continue
            # the cudnn expert is flash attention: axjax takes the same path
            implementation = "cudnn" if expert == "cudnn" else "auto"
            res[key][dtype] = transformer_row(
                cfg, dtype, rounds, window_s, peak, expert, implementation
            )
            say(_row_line(res, dtype, expert, res[key][dtype]))
    # the paths in the dtype cuDNN runs, if it is asked for
    res["attention"] = attention_paths(
        cfg, "bf16" if "bf16" in dtypes else dtypes[0], rounds, window_s
    )
    res["attention"]["dtype"] = "bf16" if "bf16" in dtypes else dtypes[0]
    res["memory"] = memory(cfg) if memory_rows else []
    return res


def _header(res: dict[str, Any]) -> str:
    c = res["config"]
    return "\n".join(
        [
            f"Device: {res['device']} ({res['backend']}); preset {res['preset']}: batch "
            f"{c['batch']}, context {c['context']}, width {c['embed']}, {c['heads']} heads, "
            f"{c['layers']} layers, MLP {c['mlp']}; step = forward + backward + Adam.",
            "",
            "| dtype | JAX attention | axjax attention | GFLOP/step | JAX ms | axjax ms | "
            "axjax ÷ JAX (speed) | JAX % of peak | axjax % of peak | peak TFLOP/s |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
    )


def _row_line(res: dict[str, Any], dtype: str, path: str, r: dict[str, Any]) -> str:
    j, a, q = r["jax"], r["axjax"], r["ratio"]
    return (
        f"| {dtype} | {path} | {r.get('implementation', 'auto')} | "
        f"{r['flops_per_step'] / 1e9:.3g} | "
        f"{j['ms_per_step']['median']:.4g} | "
        f"{a['ms_per_step']['median']:.4g} | {q['median']:.2f} [{q['min']:.2f}–"
        f"{q['max']:.2f}] | {100 * j['fraction_of_peak']:.0f} % | "
        f"{100 * a['fraction_of_peak']:.0f} % | {res['peak_tflops'][dtype]:.3g} |"
    )


def markdown(res: dict[str, Any], rows: bool = True) -> str:
    """The results as Markdown tables (``rows=False``: without the step rows' table, which
    ``main`` printed as each row completed)."""
    lines = [_header(res)] if rows else []
    found = [(d, "fused", r) for d, r in res["rows"].items()]
    found += [(d, "einsum", r) for d, r in res.get("rows_einsum", {}).items()]
    found += [(d, "cudnn", r) for d, r in res.get("rows_cudnn", {}).items()]
    if rows:
        lines += [_row_line(res, dtype, path, r) for dtype, path, r in found]
    lines += ["", *(f"Note: {n}." for n in res["notes"])] if res.get("notes") else []
    at = res["attention"]
    cudnn = (
        f"cudnn {at['cudnn_ms']:.4g} ms (speed-up {at['cudnn_speedup']['median']:.2f})"
        if at.get("cudnn_ms") is not None
        else f"cudnn not run ({at.get('cudnn_note', 'GPU only')})"
    )
    lines += [
        "",
        f"Attention paths (axjax step, {at.get('dtype', '')}): einsum {at['einsum_ms']:.4g} ms, "
        f"xla {at['xla_ms']:.4g} ms (speed-up over einsum {at['xla_speedup']['median']:.2f}), "
        f"{cudnn}; implementation='auto' takes: {at['default']}.",
        "",
    ]
    if res["memory"]:
        lines += [
            "| layers | temp MiB | temp MiB, remat | kept for backward MiB | kept, remat |",
            "|---|---|---|---|---|",
        ]
    for m in res["memory"]:
        lines.append(
            f"| {m['layers']} | {m['plain']['temp_mib']:.2f} | "
            f"{m['remat']['temp_mib']:.2f} | {m['plain']['residual_mib']:.2f} | "
            f"{m['remat']['residual_mib']:.2f} |"
        )
    return "\n".join(lines)


#: the GPT-2 124M presets at GPT-2's real vocabulary: ``benchmarks.gpt2`` runs them
GPT2_PRESETS = ("gpt2-124m", "gpt2-124m-padded")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.transformer",
        description=__doc__.split("\n")[0] if __doc__ else None,
    )
    p.add_argument(
        "--preset",
        choices=sorted(PRESETS) + list(GPT2_PRESETS),
        help="sizes (default: gpu on a GPU, cpu otherwise); gpt2-124m and gpt2-124m-padded "
        "run python -m benchmarks.gpt2 (the JAX expert, TrainStep, fit's step, PyTorch)",
    )
    p.add_argument("--dtypes", default="f32,bf16")
    p.add_argument(
        "--experts",
        default=",".join(JAX_ATTENTION),
        help=f"the expert rows, among {','.join(JAX_ATTENTION)} (cudnn: a GPU in bf16)",
    )
    p.add_argument("--no-memory", action="store_true", help="leave out the memory table")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--window", type=float, default=1.0, help="seconds per timed window")
    p.add_argument("--json", help="write the results to this file")
    p.add_argument(
        "--head-memory",
        action="store_true",
        help="only the step's temporary memory at GPT-2's vocabulary: expert, plain, fused head",
    )
    args, rest = p.parse_known_args(argv)
    if args.head_memory:
        mem = head_memory()
        buffer = mem.pop("logits_buffer")
        print(f"one float32 [Batch, Pos, Vocab] buffer: {buffer:.0f} MiB ({HEAD_MEMORY})")
        for name, mib in mem.items():
            print(f"| {name} | {mib:.0f} MiB | {mib / buffer:.2f} buffers |")
        return mem
    if args.preset in GPT2_PRESETS:
        from . import gpt2

        extra = ["--json", args.json] if args.json else []
        return gpt2.main(["--preset", args.preset, "--rounds", str(args.rounds)] + extra + rest)
    if rest:
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    preset = args.preset or ("cpu" if jax.default_backend() == "cpu" else "gpu")
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    experts = [e.strip() for e in args.experts.split(",") if e.strip()]
    if unknown := set(experts) - set(JAX_ATTENTION):
        p.error(f"--experts: unknown {sorted(unknown)} (choose from {', '.join(JAX_ATTENTION)})")
    res = bench_transformer(
        preset,
        dtypes,
        args.rounds,
        args.window,
        experts=experts,
        memory_rows=not args.no_memory,
        echo=lambda line: print(line, flush=True),  # each row as it completes
    )
    print(markdown(res, rows=False), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
