"""The report: the machine and versions, the tables, and the targets met or missed."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from typing import Any

from ._structure import COST_KINDS

__all__ = ["TARGETS", "environment", "markdown", "targets"]

#: the targets of issue 7 (ratios against hand-written JAX; dispatch against jax.numpy)
TARGETS = {
    "steps_per_s": 0.97,
    "first_step": 1.25,
    "dispatch": 1.5,
    "memory": 1.1,
    "modules_jit": 0.65,
}
AXJAX = ("axjax", "graph", "fit")
#: axjax modules under the user's own ``jax.jit``: Equinox modules as arguments cost host
#: time per call, so their fixed-batch target is lower (docs/training.md)
MODULES_JIT = "axjax-jit"


def environment() -> dict[str, Any]:
    """CPU, cores, Python and the versions of every framework that is installed."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = {}
    for pkg in ("jax", "jaxlib", "equinox", "optax", "numpy", "haliax", "torch"):
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = None
    import jax

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "devices": [str(d) for d in jax.devices()],
        "versions": versions,
    }


def _s(x: dict[str, float] | None, fmt: str = "{:.0f}") -> str:
    if not x:
        return "–"
    return f"{fmt.format(x['median'])} [{fmt.format(x['min'])}–{fmt.format(x['max'])}]"


def markdown(results: dict[str, Any]) -> str:
    """The tables of ``results`` (as written by ``python -m benchmarks --json``)."""
    lines = []
    env = results.get("environment", {})
    if env:
        vers = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v)
        lines += [
            f"Machine: {env['cpu']}, {env['cores']} cores, {env['devices']}; "
            f"Python {env['python']}; {vers}.",
            "",
        ]
    lines += [f"Data: {results.get('data', '?')}. Config: {results.get('config', {})}.", ""]
    memory = results.get("memory", {})
    for name, model in results.get("models", {}).items():
        lines += [
            f"### {model['title']} (batch 128, {model.get('steps_per_window')} steps per window)",
            "",
            "| framework | fixed steps/s | ÷ JAX | ÷ best | loop steps/s | ÷ JAX | ÷ best "
            "| host µs/step | first step s | ÷ JAX | peak RSS MiB | ÷ JAX "
            "| build / train Δ MiB | traces | loss Δ |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for fw, r in model["frameworks"].items():
            if "skipped" in r:
                lines.append(f"| {fw} | skipped: {r['skipped']} |||||||||||||| ")
                continue
            mem = memory.get(name, {}).get(fw, {})
            lines.append(
                f"| {fw} | {_s(r['fixed_steps_per_s'])} | {_s(r.get('fixed_ratio'), '{:.2f}')} "
                f"| {_s(r.get('fixed_best_ratio'), '{:.2f}')} "
                f"| {_s(r['loop_steps_per_s'])} | {_s(r.get('loop_ratio'), '{:.2f}')} "
                f"| {_s(r.get('loop_best_ratio'), '{:.2f}')} "
                f"| {_s(r.get('host_us_per_step'))} | {_s(r['first_step_s'], '{:.2f}')} "
                f"| {r.get('first_step_ratio', '–')} "
                f"| {mem.get('peak_rss_mib', '–')} | {mem.get('peak_ratio', '–')} "
                f"| {mem.get('build_mib', '–')} / {mem.get('delta_mib', '–')} "
                f"| {r['traces']} | {r.get('loss_diff', 0):.1e} |"
            )
        lines.append("")
    structure = results.get("structure")
    if structure:
        fws = ("jax", "expert", "expert-int", "axjax", "graph", "fit")
        lines += [
            "### Op counts of one training step (StableHLO emitted / HLO compiled)",
            "",
            "| model | " + " | ".join(fws) + " |",
            "|---" * (len(fws) + 1) + "|",
        ]
        for name, by_fw in structure.items():
            cells = [
                f"{c['stablehlo']} / {c['compiled']}" if (c := by_fw.get(fw)) else "–" for fw in fws
            ]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "### What costs, per kind, in the compiled step (the guards' counts)",
            "",
            "| model | kind | " + " | ".join(fws) + " |",
            "|---" * (len(fws) + 2) + "|",
        ]
        for name, by_fw in structure.items():
            kinds = [
                k for k in COST_KINDS if any(c.get("kinds", {}).get(k) for c in by_fw.values())
            ]
            for kind in kinds:
                cells = [
                    str(c.get("kinds", {}).get(kind, 0)) if (c := by_fw.get(fw)) else "–"
                    for fw in fws
                ]
                lines.append(f"| {name} | {kind} | " + " | ".join(cells) + " |")
        lines.append("")
    dispatch = results.get("dispatch")
    if dispatch:
        lines += [
            "### Eager dispatch, µs per call (median [min–max] over rounds)",
            "",
            "| op | jax.numpy wall | axjax wall | ÷ jnp | jax.numpy CPU | axjax CPU | ÷ jnp |",
            "|---|---|---|---|---|---|---|",
        ]
        for op, r in dispatch.items():
            lines.append(
                f"| {op} | {_s(r['jnp_us'], '{:.1f}')} | {_s(r['axjax_us'], '{:.1f}')} "
                f"| {_s(r['ratio'], '{:.2f}')} | {_s(r.get('jnp_cpu_us'), '{:.1f}')} "
                f"| {_s(r.get('axjax_cpu_us'), '{:.1f}')} "
                f"| {_s(r.get('cpu_ratio'), '{:.2f}')} |"
            )
        lines.append("")
    host = results.get("host")
    if host:
        from .host_overhead import markdown as host_tables

        lines += [host_tables(host, with_target=False), ""]
    decode = results.get("decode")
    if decode:
        from .decode import markdown as decode_table

        lines += ["### Decoding (ax.nn.generate)", "", decode_table(decode), ""]
    lines += ["### Targets", ""] + [f"- {t}" for t in targets(results)]
    return "\n".join(lines)


def targets(results: dict[str, Any]) -> list[str]:
    """One line per target and axjax path: ``met`` or ``MISSED`` with the median figure."""
    out = []
    memory = results.get("memory", {})
    for name, model in results.get("models", {}).items():
        best = model["frameworks"].get(MODULES_JIT, {}).get("fixed_best_ratio")
        if best:
            out.append(
                _line(
                    f"{name}/{MODULES_JIT} fixed steps/s ÷ best expert",
                    best["median"],
                    ">=",
                    TARGETS["modules_jit"],
                )
            )
        for fw in AXJAX:
            r = model["frameworks"].get(fw)
            if not r or "skipped" in r:
                continue
            for kind in ("fixed", "loop"):  # against the best expert baseline if measured
                best = r.get(f"{kind}_best_ratio")
                v = (best or r.get(f"{kind}_ratio", {})).get("median")
                if v is not None:
                    what = "best expert" if best else "JAX"
                    out.append(
                        _line(
                            f"{name}/{fw} {kind} steps/s ÷ {what}", v, ">=", TARGETS["steps_per_s"]
                        )
                    )
            v = r.get("first_step_ratio")
            if v is not None:
                out.append(_line(f"{name}/{fw} first step ÷ JAX", v, "<=", TARGETS["first_step"]))
            v = memory.get(name, {}).get(fw, {}).get("delta_ratio")
            if v is not None:  # training's own peak: construction (eager initialisers) apart
                out.append(
                    _line(f"{name}/{fw} training peak memory Δ ÷ JAX", v, "<=", TARGETS["memory"])
                )
    for op, r in results.get("dispatch", {}).items():
        out.append(_line(f"dispatch {op} ÷ jnp", r["ratio"]["median"], "<=", TARGETS["dispatch"]))
    if results.get("host"):
        from .host_overhead import target

        out.append(target(results["host"]))
    return out


def _line(what: str, value: float, cmp: str, target: float) -> str:
    ok = value >= target if cmp == ">=" else value <= target
    return f"{what}: {value:.3g} ({'met' if ok else 'MISSED'}, target {cmp} {target})"
