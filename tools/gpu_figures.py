"""The figures of BENCHMARKS.md's GPU section, from what ``tools/gpu_check.sh`` wrote.

Reads, in one folder, whichever of these exist: ``pytest.log`` (the suite's summary, its
failures and slowest tests), ``large.json`` (``python -m benchmarks.large``),
``transformer.json`` (``python -m benchmarks.transformer``), ``mnist.json`` (``python -m
benchmarks --models mlp``) and, from ``--stage gpt2-124m``, ``gpt2.json`` and
``gpt2-padded.json`` (``python -m benchmarks.gpt2``), and prints them as the Markdown rows
the GPU section uses. A missing or broken file is named, never fatal. Standard library
only (no JAX import).

    python tools/gpu_figures.py OUT_DIR
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

__all__ = ["figures", "main"]


def _load(path: Path) -> dict[str, Any] | str:
    """The JSON in ``path``, or why there is none."""
    if not path.exists():
        return f"{path.name}: not written (its stage failed, timed out or was skipped)"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return f"{path.name}: unreadable ({e})"
    return data if isinstance(data, dict) else f"{path.name}: not a JSON object"


def _mmm(d: dict[str, Any], digits: str = ".2f") -> str:
    """``median [min–max]``."""
    return f"{d['median']:{digits}} [{d['min']:{digits}}–{d['max']:{digits}}]"


def tests(log: Path) -> list[str]:
    """The suite's last summary line, its FAILED/ERROR lines and the slowest tests."""
    if not log.exists():
        return ["tests: pytest.log not written"]
    lines = log.read_text(errors="replace").splitlines()
    result = [s.strip("= ") for s in lines if re.search(r"\d+ (passed|failed|error)", s)]
    out = [f"tests: {result[-1] if result else 'no summary line (killed?)'}"]
    if any("KeyboardInterrupt" in s or "Interrupted:" in s for s in lines):
        out[0] += " (INTERRUPTED: its timeout stopped the run; the rest did not run)"
    out += [f"  {s}" for s in lines if s.startswith(("FAILED ", "ERROR "))]
    try:
        start = next(i for i, s in enumerate(lines) if "slowest" in s and "durations" in s)
    except StopIteration:
        return out
    slow = [s for s in lines[start + 1 : start + 16] if re.match(r"^\d+\.\d+s ", s)]
    return out + ["slowest tests:"] + [f"  {s}" for s in slow]


def large(res: dict[str, Any]) -> list[str]:
    """``benchmarks.large``: one row per block."""
    s = res.get("sizes", {})
    out = [
        f"large ({res.get('device')}, {res.get('dtype')}, preset {res.get('preset')}; measured "
        f"peak {res.get('peak_tflops', 0):.3g} TFLOP/s; MLP batch {s.get('mlp_batch')}, width "
        f"{s.get('width')}; attention batch {s.get('att_batch')}, {s.get('seq')} tokens, "
        f"{s.get('heads')} heads):",
        "| block | JAX ms | axjax ms | axjax ÷ JAX (speed) | JAX % of peak | axjax % of peak |",
        "|---|---|---|---|---|---|",
    ]
    for name, b in res.get("blocks", {}).items():
        j, a = b["jax"], b["axjax"]
        out.append(
            f"| {name} | {j['ms_per_step']['median']:.4g} | {a['ms_per_step']['median']:.4g} | "
            f"{_mmm(b['ratio'])} | {100 * j['fraction_of_peak']:.0f} % | "
            f"{100 * a['fraction_of_peak']:.0f} % |"
        )
    return out


def transformer(res: dict[str, Any]) -> list[str]:
    """``benchmarks.transformer``: the step per dtype and expert attention, the paths."""
    c = res.get("config", {})
    out = [
        f"transformer ({res.get('device')}, preset {res.get('preset')}: batch {c.get('batch')}, "
        f"context {c.get('context')}, width {c.get('embed')}, {c.get('layers')} layers):",
        "| dtype | expert attention | JAX ms | axjax ms | axjax ÷ JAX (speed) | "
        "axjax % of peak | peak TFLOP/s |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = [k for k in res if k == "rows" or k.startswith("rows_")]  # rows_<expert attention>
    for key in rows:
        path = "fused" if key == "rows" else key.removeprefix("rows_")
        for dtype, r in res[key].items():
            out.append(
                f"| {dtype} | {path} | {r['jax']['ms_per_step']['median']:.4g} | "
                f"{r['axjax']['ms_per_step']['median']:.4g} | {_mmm(r['ratio'])} | "
                f"{100 * r['axjax']['fraction_of_peak']:.0f} % | "
                f"{res['peak_tflops'][dtype]:.3g} |"
            )
    at = res.get("attention")
    if at:
        out.append(
            f"axjax attention paths: einsum {at['einsum_ms']:.4g} ms, fused "
            f"{at['fused_ms']:.4g} ms; default on this device: {at['default']}"
        )
    return out


def mnist(res: dict[str, Any]) -> list[str]:
    """``benchmarks`` (MNIST models): steps/s per framework, ÷ the best expert."""
    out = [f"MNIST ({res.get('data')}; rounds {res.get('config', {}).get('rounds')}):"]
    for model in res.get("models", {}).values():
        out += [
            f"{model['title']}:",
            "| framework | fixed steps/s | ÷ best expert | loop steps/s | host µs/step | "
            "first step s |",
            "|---|---|---|---|---|---|",
        ]
        for fw, e in model["frameworks"].items():
            best = _mmm(e["fixed_best_ratio"]) if "fixed_best_ratio" in e else "–"
            out.append(
                f"| {fw} | {_mmm(e['fixed_steps_per_s'], '.0f')} | {best} | "
                f"{_mmm(e['loop_steps_per_s'], '.0f')} | {e['host_us_per_step']['median']:.0f} | "
                f"{e['first_step_s']['median']:.2f} |"
            )
    return out


def gpt2(res: dict[str, Any]) -> list[str]:
    """``benchmarks.gpt2``'s rows: ms/step, tokens/s, MFU, temporary memory, speed vs jax."""
    c = res["config"]
    out = [
        f"GPT-2 124M ({res['preset']}: vocabulary {c['vocab']}, batch {c['batch']} x "
        f"{c['context']}; bf16 peak {res['peak_tflops']:.4g} TFLOP/s)",
        "| row | ms/step | tokens/s | MFU | temp MiB | speed vs jax |",
        "|---|---|---|---|---|---|",
    ]
    rows = res["rows"]
    base = next(iter(rows.values()))["ms_per_step"]
    for name, r in rows.items():
        temp = "n/a" if r.get("temp_bytes") is None else f"{r['temp_bytes'] / 2**20:,.0f}"
        out.append(
            f"| {name} | {r['ms_per_step']:.4g} | {r['tokens_per_s']:,.0f} | "
            f"{100 * r['mfu']:.1f} % | {temp} | {base / r['ms_per_step']:.2f} |"
        )
    out += [f"note: {n}" for n in res.get("notes", [])]
    out += [f"losses disagree: {d}" for d in res.get("disagree", [])]
    return out


#: the JSON files of the stages, in order, and how each is rendered (the gpt2 pair: the
#: opt-in --stage gpt2-124m; a default run says they were not written)
RENDERERS = (
    ("large", large),
    ("transformer", transformer),
    ("mnist", mnist),
    ("gpt2", gpt2),
    ("gpt2-padded", gpt2),
)


def figures(folder: Path) -> list[str]:
    """Every figure found in ``folder``, as lines."""
    out = tests(folder / "pytest.log")
    for name, render in RENDERERS:
        res = _load(folder / f"{name}.json")
        out.append("")
        if isinstance(res, str):
            out.append(res)
            continue
        try:
            out += render(res)
        except (KeyError, TypeError, ValueError) as e:
            out.append(f"{name}.json: unexpected layout ({type(e).__name__}: {e})")
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    print("\n".join(figures(Path(args[0]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
