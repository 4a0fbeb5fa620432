"""The transformer benchmark (``python -m benchmarks.transformer``): its attention-paths
figures, the cuDNN rows (a GPU only: elsewhere a note says why), the expert's cuDNN
attention. No time is compared."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import pytest

from benchmarks.transformer import PRESETS, attention_paths, build, markdown


def _summary(x: float) -> dict[str, float]:
    return {"median": x, "min": x, "max": x}


def _row(ms: float, implementation: str) -> dict[str, Any]:
    side = {"ms_per_step": _summary(ms), "fraction_of_peak": 0.5}
    return {
        "flops_per_step": 1e9,
        "ratio": _summary(1.0),
        "jax": side,
        "axjax": side,
        "implementation": implementation,
    }


def test_the_attention_paths_are_einsum_xla_and_cudnn_on_a_gpu() -> None:
    at = attention_paths(PRESETS["quick"], "bf16", rounds=1, window_s=0.0)
    assert (
        at["einsum_ms"] > 0
        and at["xla_ms"] > 0
        and set(at["xla_speedup"])
        == {
            "median",
            "min",
            "max",
        }
    )
    if jax.default_backend() == "gpu":
        assert at["cudnn_ms"] > 0 and at["default"] == "cudnn"
    else:
        assert at["cudnn_ms"] is None and at["default"] == "einsum"
        assert at["cudnn_note"] == "cuDNN runs on an NVIDIA GPU; the default backend is cpu"
    res = {
        "device": "d",
        "backend": "cpu",
        "preset": "quick",
        "config": dataclasses.asdict(PRESETS["quick"]),
        "rows": {"bf16": _row(2.0, "auto")},
        "rows_einsum": {"bf16": _row(1.0, "auto")},
        "rows_cudnn": {"bf16": _row(0.5, "cudnn")},
        "peak_tflops": {"bf16": 1.0},
        "notes": ["no cudnn row in f32: the dtype is F32"],
        "attention": {**at, "dtype": "bf16"},
        "memory": [],
    }
    text = markdown(res)
    assert "| bf16 | cudnn | cudnn | 1 | 0.5 | 0.5 |" in text
    assert "Note: no cudnn row in f32: the dtype is F32." in text
    assert f"implementation='auto' takes: {at['default']}." in text
    assert ("cudnn not run (cuDNN runs on an NVIDIA GPU" in text) is (at["cudnn_ms"] is None)


def test_the_cudnn_expert_runs_flash_attention() -> None:
    """The expert's ``cudnn`` rows are flash attention: its step, lowered for CUDA as traced
    on an H100, has one cuDNN forward and one backward per layer."""
    from benchmarks._structure import custom_calls, pretend_cuda

    cfg = dataclasses.replace(PRESETS["quick"], context=24, layers=2)
    try:
        with pretend_cuda("9.0"):
            b = build(cfg, "bf16", jax_attention="cudnn", implementation="einsum")
            x, y = b.batch
            text = (
                b.steps["jax"]
                .trace(*b.states["jax"], x.array, y.array)
                .lower(lowering_platforms=("cuda",))
                .as_text()
            )
    except LookupError as e:
        pytest.skip(f"cannot pretend to lower for CUDA with this JAX: {e}")
    calls = custom_calls(text)
    assert calls["__cudnn$fmhaSoftmax"] == calls["__cudnn$fmhaSoftmaxBackward"] == 2, calls
    with pytest.raises(ValueError, match="jax_attention must be one of"):
        build(cfg, "bf16", jax_attention="flash")


def test_each_row_is_printed_as_it_completes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench_transformer`` hands each row's line to ``echo`` once it is timed (so a stage
    stopped by its timeout still leaves figures), the header first; the experts asked for
    alone, and no memory table when it is left out."""
    import benchmarks.transformer as bench

    paths = {"einsum_ms": 1.0, "xla_ms": 1.0, "xla_speedup": _summary(1.0), "default": "einsum"}
    monkeypatch.setattr(bench, "attention_paths", lambda *a, **k: dict(paths))
    lines: list[str] = []
    res = bench.bench_transformer(
        "quick", ["f32"], 1, 0.0, experts=["einsum"], memory_rows=False, echo=lines.append
    )
    assert len(lines) == 2 and lines[0].startswith("Device: ") and "| JAX attention |" in lines[0]
    assert lines[1].startswith("| f32 | einsum | auto |"), lines[1]
    assert res["rows"] == {} and set(res["rows_einsum"]) == {"f32"} and res["memory"] == []
    assert lines[1] in markdown(res) and lines[1] not in markdown(res, rows=False)
