"""Decoding at real size (``python -m benchmarks.decode --real``): GPT-2 124M at its
vocabulary (50,257) and a Llama-shaped 1.1B model with grouped-query attention, random
weights, greedy, a prompt of 128 tokens and 256 new tokens at batch 1 and 32, bf16 on a GPU.

The Llama is Llama-3.2-1B's body (hidden 2048, 16 layers, 32 heads, 8 key-value heads,
intermediate 8192, RoPE theta 500,000) at Llama 2's vocabulary of 32,000 with its own head:
1,104,218,112 parameters. Every row decodes the same weights: the axjax model is written
with ``to_hf`` to a temporary folder and the other rows read that folder.

Rows: ``ax.nn.generate``; ``jax-expert`` (``benchmarks._decode_expert``: a prefill and one
``lax.scan`` of cached steps, hand-written on the state dict; attention in einsums, and on a
GPU also ``jax-expert (cudnn)``: ``jax.nn.dot_product_attention``'s cuDNN kernel); ``pytorch``
(``transformers``' ``from_pretrained`` and greedy ``generate`` with a ``StaticCache`` of
``prompt + steps`` positions, the forward under ``torch.compile(mode="reduce-overhead")`` on
a GPU as HF documents for static caches, eager on a CPU), where torch is importable (with
CUDA when JAX runs on a GPU); elsewhere a note says why it is missing. torch is never an
axjax dependency.

Figures per row: tokens/s of the whole call (prefill included), the time of one decode step
(``(t(steps) - t(1)) / (steps - 1)``: the prefill taken out) and the fraction of the
bandwidth limit: the bytes one step must read (every weight, and the KV cache at its
average length, ``prompt + steps / 2``) over the step time, against the memory bandwidth
measured in the same run (a jitted ``x + 1`` on a large array: 2 x its bytes / time).
Each model and batch also checks that every row gave the same greedy tokens.

    python -m benchmarks.decode --real                 # the GPU sizes (bf16)
    python -m benchmarks.decode --real --preset quick  # tiny models in float32, on a CPU

The ``quick`` preset scales the random weights up (``SEPARATE``) so that the logits are far
apart: float32's rounding cannot flip an argmax between rows, and equal tokens are exact.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import axjax as ax

from . import _decode_expert as expert

__all__ = ["PRESETS", "Preset", "Row", "bandwidth", "bench_real", "build_rows", "main"]

SEPARATE = 8.0  # the quick preset's weight scale (the init's 0.02 -> 0.16)


@final
class Batch(ax.Axis):
    """The rows of a decoded batch."""


@dataclass(frozen=True)
class Preset:
    """A benchmark size: the two models' configs, the workload and the dtype."""

    gpt2: Any
    llama: Any
    batches: tuple[int, ...] = (1, 32)
    prompt: int = 128
    steps: int = 256
    bf16: bool = True
    scale: float = 1.0
    copy_mib: int = 1024


def _presets() -> dict[str, Preset]:
    from axjax.models import gpt2, llama

    real_llama = llama.LlamaConfig(
        vocab_size=32000, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
        num_attention_heads=32, num_key_value_heads=8, rope_theta=500000.0,
        max_position_embeddings=2048,
    )  # fmt: skip
    tiny_gpt2 = gpt2.GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=4)
    tiny_llama = llama.LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    return {
        "gpu": Preset(gpt2.GPT2Config(), real_llama),
        "quick": Preset(tiny_gpt2, tiny_llama, (1, 3), 8, 8, False, SEPARATE, 64),
    }


PRESETS = _presets()


@dataclass
class Row:
    """One way of decoding: ``run(ids, steps)`` gives the greedy tokens ``[batch, steps]``."""

    name: str
    run: Callable[[np.ndarray, int], np.ndarray]
    figures: dict[str, Any] = field(default_factory=dict)


def _scaled(model: Any, scale: float) -> Any:
    """``model`` with every weight matrix times ``scale`` (the norms and biases kept)."""
    if scale == 1.0:
        return model

    def f(a: Any) -> Any:
        return a * scale if eqx.is_inexact_array(a) and a.ndim >= 2 else a

    return jax.tree_util.tree_map(f, model)


def _model(kind: str, preset: Preset) -> Any:
    from axjax.models import gpt2, llama

    key = jax.random.key(0)
    if kind == "gpt2":
        return _scaled(gpt2.GPT2(preset.gpt2, key=key), preset.scale)
    return _scaled(llama.Llama(preset.llama, key=key), preset.scale)


def _axjax_row(model: Any, kind: str, max_len: int) -> Row:
    from axjax.models import gpt2, llama

    pos = gpt2.Pos if kind == "gpt2" else llama.Pos

    def run(ids: np.ndarray, steps: int) -> np.ndarray:
        prompt = ax.tensor(ids, Batch, pos, dtype=ax.I32)
        out = ax.nn.generate(model, prompt, steps, temperature=0, max_len=max_len)
        return np.asarray(out.array)

    return Row("ax.nn.generate", run)


def _expert_row(
    folder: str,
    kind: str,
    preset: Preset,
    max_len: int,
    spec: Any = None,
    attention: str = "einsum",
) -> Row:
    from safetensors.numpy import load_file

    sd = load_file(f"{folder}/model.safetensors")
    dtype = jnp.bfloat16 if preset.bf16 else jnp.float32
    if kind == "gpt2":
        c = preset.gpt2
        attention = spec.attention if spec else attention
        params = expert.gpt2_params(sd, c.n_layer, dtype)
        spec = spec or expert.Spec(
            "gpt2",
            c.n_layer,
            c.n_head,
            c.n_head,
            c.n_embd // c.n_head,
            c.layer_norm_epsilon,
            attention=attention,
        )
    else:
        c = preset.llama
        attention = spec.attention if spec else attention
        params = expert.llama_params(sd, c.num_hidden_layers, dtype)
        spec = spec or expert.Spec(
            "llama", c.num_hidden_layers, c.num_attention_heads, c.kv_heads, c.head_size,
            c.rms_norm_eps, c.rope_theta, attention=attention,
        )  # fmt: skip

    def run(ids: np.ndarray, steps: int) -> np.ndarray:
        return np.asarray(expert.decode(params, spec, jnp.asarray(ids), steps, max_len))

    return Row("jax-expert" if attention == "einsum" else f"jax-expert ({attention})", run)


def torch_unavailable() -> str | None:
    """Why the PyTorch row cannot run here (``None``: it can)."""
    for name in ("torch", "transformers"):
        if importlib.util.find_spec(name) is None:
            return f"{name} is not installed (never an axjax dependency)"
    import torch

    if jax.default_backend() == "gpu" and not torch.cuda.is_available():
        return f"torch {torch.__version__} has no CUDA here"
    return None


def _static_cache(cls: Any, config: Any, batch: int, max_len: int, device: str, dtype: Any) -> Any:
    """A ``StaticCache`` of ``max_len`` positions: the same size for every call (a compiled
    forward is not traced again), built with the arguments this transformers version takes."""
    given = {"config": config, "max_cache_len": max_len, "max_batch_size": batch,
             "batch_size": batch, "device": device, "dtype": dtype}  # fmt: skip
    names = inspect.signature(cls.__init__).parameters
    return cls(**{k: v for k, v in given.items() if k in names})


def _torch_row(folder: str, preset: Preset, max_len: int, compile: bool) -> Row:
    import torch
    from transformers import AutoModelForCausalLM, StaticCache

    device = "cuda" if jax.default_backend() == "gpu" else "cpu"
    dtype = torch.bfloat16 if preset.bf16 else torch.float32
    model = AutoModelForCausalLM.from_pretrained(folder).to(device, dtype).eval()
    model.generation_config.disable_compile = True  # compiled here, as HF documents below
    if compile:  # HF's recipe for a static cache
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)

    @torch.inference_mode()
    def run(ids: np.ndarray, steps: int) -> np.ndarray:
        x = torch.as_tensor(ids, dtype=torch.long, device=device)
        cache = _static_cache(StaticCache, model.config, len(ids), max_len, device, dtype)
        with warnings.catch_warnings():  # past_key_values: `cache` from transformers 5.x
            warnings.simplefilter("ignore", FutureWarning)
            out = model.generate(
                x, attention_mask=torch.ones_like(x), max_new_tokens=steps,
                min_new_tokens=steps, do_sample=False, past_key_values=cache,
                eos_token_id=None, pad_token_id=0,
            )  # fmt: skip
        if device == "cuda":
            torch.cuda.synchronize()
        return out[:, ids.shape[1] :].cpu().numpy()

    return Row("pytorch" if compile else "pytorch (eager)", run)


def build_rows(
    kind: str, preset: Preset, folder: str, *, torch: str = "auto", spec: Any = None
) -> tuple[list[Row], list[str], Any]:
    """The rows of one model (``"gpt2"``, ``"llama"``) from the same weights, written to
    ``folder``; the notes say which rows are missing and why; and the axjax model.
    ``torch``: ``"auto"`` (compiled on a GPU, eager on a CPU), ``"compile"``, ``"eager"``,
    ``"off"``. ``spec``: the expert's sizes, to plant a bug in a test."""
    from axjax.models import gpt2, llama

    model = _model(kind, preset)
    (gpt2.to_hf if kind == "gpt2" else llama.to_hf)(model, folder)
    max_len = preset.prompt + preset.steps
    if preset.bf16:
        model = ax.nn.cast(model, ax.BF16)
    rows = [_axjax_row(model, kind, max_len), _expert_row(folder, kind, preset, max_len, spec)]
    on_gpu = jax.default_backend() == "gpu"
    if on_gpu and spec is None:  # the expert's other attention: cuDNN's fused kernel
        rows.append(_expert_row(folder, kind, preset, max_len, attention="cudnn"))
    notes = []
    why = "--torch off" if torch == "off" else torch_unavailable()
    if why is None:
        compile = torch == "compile" or (torch == "auto" and on_gpu)
        rows.append(_torch_row(folder, preset, max_len, compile))
    else:
        notes.append(f"{kind}: no pytorch row: {why}")
    return rows, notes, model


def bandwidth(mib: int, rounds: int = 5) -> float:
    """Bytes/s of a jitted ``x + 1`` over ``mib`` MiB of float32 (it reads and writes each
    byte once): the memory bandwidth this run can reach."""
    x = jnp.zeros((mib * 2**18,), jnp.float32)
    f = jax.jit(lambda a: a + 1)
    jax.block_until_ready(f(x))
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        jax.block_until_ready(f(x))
        times.append(time.perf_counter() - t0)
    return 2 * x.nbytes / min(times)


def _median(fn: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _step_bytes(model: Any, kind: str, preset: Preset, batch: int) -> int:
    """Bytes one decode step reads: every weight, and the keys and values cached at their
    average length (``prompt + steps / 2``)."""
    leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    weights = sum(a.nbytes for a in leaves)
    c = preset.gpt2 if kind == "gpt2" else preset.llama
    if kind == "gpt2":
        layers, width = c.n_layer, c.n_embd
    else:
        layers, width = c.num_hidden_layers, c.kv_heads * c.head_size
    avg = preset.prompt + preset.steps / 2
    return int(weights + 2 * layers * batch * avg * width * (2 if preset.bf16 else 4))


def _figures(
    row: Row, ids: np.ndarray, preset: Preset, rounds: int
) -> tuple[dict[str, Any], np.ndarray]:
    steps = preset.steps
    tokens = row.run(ids, steps)  # compiles
    row.run(ids, 1)
    full = _median(lambda: row.run(ids, steps), rounds)
    one = _median(lambda: row.run(ids, 1), rounds)
    step = 1e3 * (full - one) / (steps - 1) if full > one else None  # None: under the noise
    return {"tok_s": ids.shape[0] * steps / full, "step_ms": step}, tokens


def bench_model(
    kind: str, preset: Preset, *, rounds: int = 3, torch: str = "auto", peak: float,
    spec: Any = None, report: Callable[[dict[str, Any]], None] = lambda r: None,
) -> tuple[list[dict[str, Any]], list[str]]:  # fmt: skip
    """One model's results: a dict per row and batch (tokens/s, ms per step, fraction of the
    bandwidth limit, whether its tokens equal ``ax.nn.generate``'s), and the notes."""
    with tempfile.TemporaryDirectory() as folder:
        rows, notes, model = build_rows(kind, preset, folder, torch=torch, spec=spec)
        leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
        notes.append(f"{kind}: {sum(a.size for a in leaves):,} parameters")
        vocab = preset.gpt2.vocab_size if kind == "gpt2" else preset.llama.vocab_size
        results = []
        for b in preset.batches:
            ids = np.random.default_rng(b).integers(0, vocab, (b, preset.prompt)).astype(np.int32)
            moved = _step_bytes(model, kind, preset, b)
            reference = None
            for row in rows:
                try:
                    f, tokens = _figures(row, ids, preset, rounds)
                except Exception as e:  # a row this device cannot run: the others still do
                    notes.append(f"{kind} batch {b}: {row.name} failed: {type(e).__name__}: {e}")
                    report({"note": notes[-1]})
                    continue
                reference = tokens if reference is None else reference
                r = {"model": kind, "row": row.name, "batch": b, **f,
                     "bandwidth_fraction": f["step_ms"] and moved / (f["step_ms"] / 1e3) / peak,
                     "step_bytes": moved, "same_tokens": bool(np.array_equal(tokens, reference)),
                     "first_difference": _first_difference(tokens, reference),
                     "tokens": tokens.tolist()}  # fmt: skip
                results.append(r)
                report(r)
    return results, notes


def _first_difference(tokens: np.ndarray, reference: np.ndarray) -> int:
    """The first step at which some row's token differs (the number of steps if none):
    in bf16 the rows' roundings differ, and a near tie may go either way."""
    differ = np.flatnonzero((tokens != reference).any(0))
    return int(differ[0]) if differ.size else int(tokens.shape[1])


def line(r: dict[str, Any]) -> str:
    """A result (or a failed row's note) as one printed line."""
    if "note" in r:
        return str(r["note"])[:500]
    same = "same tokens"
    if not r["same_tokens"]:
        same = f"tokens differ from ax.nn.generate's from step {r['first_difference']}"
    step, frac = "     n/a", "  n/a"  # one step's time under the timing noise
    if r["step_ms"] is not None:
        step, frac = f"{r['step_ms']:>8.3f}", f"{100 * r['bandwidth_fraction']:5.1f}"
    return (
        f"{r['model']:<6} batch {r['batch']:>3}  {r['row']:<16} {r['tok_s']:>12,.1f} tok/s  "
        f"{step} ms/step  {frac} % of the bandwidth limit  ({same})"
    )


def bench_real(
    preset: str = "gpu",
    *,
    rounds: int = 3,
    torch: str = "auto",
    models: Sequence[str] = ("gpt2", "llama"),
) -> dict[str, Any]:
    """Every model's rows, printed as each completes; the whole as a dict (``--json``)."""
    p = PRESETS[preset]
    peak = bandwidth(p.copy_mib)
    print(
        f"device: {jax.devices()[0].device_kind}; measured bandwidth {peak / 1e9:,.1f} GB/s",
        flush=True,
    )
    results: list[dict[str, Any]] = []
    notes: list[str] = []
    for kind in models:
        rs, ns = bench_model(
            kind,
            p,
            rounds=rounds,
            torch=torch,
            peak=peak,
            report=lambda r: print(line(r), flush=True),
        )
        results += rs
        notes += ns
        for n in ns:
            print(n, flush=True)
    return {"preset": preset, "device": jax.devices()[0].device_kind, "bandwidth_gb_s": peak / 1e9,
            "results": results, "notes": notes}  # fmt: skip


def main(
    preset: str = "gpu",
    *,
    rounds: int = 3,
    torch: str = "auto",
    json_path: str | None = None,
    models: Sequence[str] = ("gpt2", "llama"),
) -> int:
    """``python -m benchmarks.decode --real`` (its options parsed by ``benchmarks.decode``):
    1 where the rows' tokens differ in float32 (the quick preset; in bf16 the first step
    that differs is printed). ``json_path``: the results written there."""
    unknown = sorted(set(models) - {"gpt2", "llama"})
    if unknown:
        raise SystemExit(f"benchmarks.decode --real: --models are gpt2 and llama, got {unknown}")
    res = bench_real(preset, rounds=rounds, torch=torch, models=models)
    if json_path:
        for r in res["results"]:
            r.pop("tokens")
        with open(json_path, "w") as f:
            json.dump(res, f, indent=1)
    same = all(r["same_tokens"] for r in res["results"])
    return 0 if same or PRESETS[preset].bf16 else 1
