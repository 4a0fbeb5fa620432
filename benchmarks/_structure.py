"""What a training step compiles to: op counts, host transfers, retraces (no timing).

Axis names must cost nothing once traced, so the axjax step should lower to no more ops
than the hand-written one. These helpers count the ops of a lowered step twice: in the
StableHLO that JAX emits (what axjax's ops produce) and in the HLO that XLA compiles
(what runs). The test suite turns them into guards (``tests/bench``); the report prints
them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ._common import load_mnist

__all__ = ["ALLOWANCE", "HOST_MARKERS", "allowed", "compiled_ops", "host_transfers",
           "step_structure", "stablehlo_ops", "structure_table"]

#: how many ops the axjax step may have beyond the hand-written one: 2 % plus 4. An op's
#: own backward may take a different form (``select`` against ``multiply`` by a mask) and
#: a constant more or less is harmless; anything beyond this is a real extra cost.
ALLOWANCE = (0.02, 4)

#: text that marks a transfer between host and device inside compiled code
HOST_MARKERS = ("callback", "infeed", "outfeed", "send(", "recv(", "send-done", "recv-done",
                "host_compute", "MoveToHost", "MoveToDevice")

_STABLEHLO = re.compile(r"=\s*\"?((?:stablehlo|chlo|mhlo)\.[a-z_]+|func\.call|call)\b")
_HLO = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][a-z\-]*)\(")


def stablehlo_ops(text: str) -> Counter[str]:
    """Op name -> count in StableHLO text (``lowered.as_text()``)."""
    return Counter(m.group(1) for m in _STABLEHLO.finditer(text))


def compiled_ops(text: str) -> Counter[str]:
    """Instruction name -> count in compiled HLO text (every computation, fusions too)."""
    out: Counter[str] = Counter()
    for line in text.splitlines():
        m = _HLO.match(line)
        if m:
            out[m.group(1)] += 1
    return out


def host_transfers(text: str) -> list[str]:
    """The lines of compiled HLO text that move data between host and device."""
    return [ln.strip()[:160] for ln in text.splitlines()
            if any(mark in ln for mark in HOST_MARKERS)]


def allowed(reference: int) -> int:
    """The most ops an axjax step may have where the hand-written one has ``reference``."""
    rel, absolute = ALLOWANCE
    return int(reference * (1 + rel)) + absolute


def step_structure(model: ModuleType, frameworks: tuple[str, ...] = ("jax", "axjax", "graph")
                   ) -> dict[str, dict[str, Any]]:
    """Lower and compile each framework's step of ``model`` on one batch; count its ops.

    Returns ``{framework: {"stablehlo": n, "compiled": n, "host": [lines], "texts": ...}}``.
    """
    data = load_mnist()
    idx = data.batches(seed=1, count=1)[0]
    params = model.init(0)
    out: dict[str, dict[str, Any]] = {}
    for fw in frameworks:
        runner = getattr(model, f"build_{fw}")(params)
        assert runner.lowered is not None, f"{fw} has no lowering"
        x, y = runner.put(np.asarray(data.images[idx]), np.asarray(data.labels[idx]))
        lowered = runner.lowered(x, y)
        hlo = lowered.compile().as_text()
        shlo = lowered.as_text()
        out[fw] = {"stablehlo": sum(stablehlo_ops(shlo).values()),
                   "compiled": sum(compiled_ops(hlo).values()),
                   "host": host_transfers(hlo), "texts": (shlo, hlo)}
    return out


def structure_table(models: Sequence[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{model: {framework: {"stablehlo": n, "compiled": n, "host": k}}}`` for the report
    (JAX, axjax modules and, where the model has one, the axjax graph; the ``fit`` step
    adds its guard by design and is left out)."""
    from .models import MODELS

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in models:
        model = MODELS[name]
        fws = tuple(fw for fw in ("jax", "axjax", "graph") if _has(model, fw))
        counts = step_structure(model, fws)
        out[name] = {fw: {"stablehlo": c["stablehlo"], "compiled": c["compiled"],
                          "host": len(c["host"])} for fw, c in counts.items()}
    return out


def _has(model: ModuleType, fw: str) -> bool:
    return getattr(model, f"build_{fw}", None) is not None
