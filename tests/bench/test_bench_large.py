"""The large-block benchmark (``python -m benchmarks.large``) in its quick preset: both
versions compute the same loss and gradients from the same weights, and the report has
every figure. No time is compared."""

from __future__ import annotations

import json
import math
from typing import Any

import jax
import numpy as np
import pytest

from benchmarks.large import PRESETS, attention_block, bench_large, main, markdown, mlp_block


def _np(x: Any) -> np.ndarray:
    return np.asarray(getattr(x, "array", x), np.float32)


@pytest.mark.parametrize("dtype, tol", [("f32", 1e-5), ("bf16", 5e-2)])
def test_mlp_versions_agree(dtype: str, tol: float) -> None:
    block = mlp_block(PRESETS["quick"], dtype, jax.random.key(0))
    assert math.isclose(
        float(block.loss_jax(*block.args_jax)),
        float(block.loss_axjax(*block.args_axjax)),
        rel_tol=tol,
    )
    got, want = block.grad_axjax(*block.args_axjax), block.grad_jax(*block.args_jax)
    for (a1, a2), (j1, j2) in zip(got, want, strict=True):
        for a, j in ((a1, j1), (a2, j2)):
            np.testing.assert_allclose(_np(a), _np(j), rtol=tol, atol=tol * 1e-2)


@pytest.mark.parametrize("dtype, tol", [("f32", 1e-5), ("bf16", 2e-2)])
def test_attention_versions_agree(dtype: str, tol: float) -> None:
    """Both compute the softmax in float32 (the expert states it: ``jax.nn.softmax(scores.
    astype(f32)).astype(bf16)``), so in bf16 too they agree to bf16 rounding."""
    block = attention_block(PRESETS["quick"], dtype, jax.random.key(1))
    assert math.isclose(
        float(block.loss_jax(*block.args_jax)),
        float(block.loss_axjax(*block.args_axjax)),
        rel_tol=tol,
    )
    got, want = block.grad_axjax(*block.args_axjax), block.grad_jax(*block.args_jax)
    mine = (got.query_proj, got.key_proj, got.value_proj, got.output_proj)
    for a, j in zip(mine, want, strict=True):
        scale = float(np.abs(_np(j)).max())
        np.testing.assert_allclose(_np(a), _np(j), rtol=tol * 10, atol=tol * scale)


def test_the_cudnn_block_runs_flash_attention_in_both_versions() -> None:
    """``attention-cudnn`` (lowered for CUDA as traced on an H100: ``pretend_cuda``): one
    cuDNN flash-attention forward and one backward in the expert's step and in axjax's."""
    from benchmarks._structure import custom_calls, pretend_cuda

    try:
        with pretend_cuda("9.0"):
            block = attention_block(PRESETS["quick"], "bf16", jax.random.key(1), cudnn=True)
            texts = [
                fn.trace(*args).lower(lowering_platforms=("cuda",)).as_text()
                for fn, args in (
                    (block.grad_jax, block.args_jax),
                    (block.grad_axjax, block.args_axjax),
                )
            ]
    except LookupError as e:
        pytest.skip(f"cannot pretend to lower for CUDA with this JAX: {e}")
    for text in texts:
        calls = custom_calls(text)
        assert calls["__cudnn$fmhaSoftmax"] == calls["__cudnn$fmhaSoftmaxBackward"] == 1, calls


def test_report_has_every_figure(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "large.json"
    res = main(["--preset", "quick", "--rounds", "2", "--window", "0.001", "--json", str(out)])
    ran = set(json.loads(out.read_text())["blocks"])
    assert ran | set(res["skipped"]) == {"mlp", "attention", "attention-cudnn"}
    assert {"mlp", "attention"} <= ran and not ran & set(res["skipped"])
    if jax.default_backend() != "gpu":  # the cuDNN block says why it did not run
        assert res["skipped"] == {
            "attention-cudnn": "cuDNN runs on an NVIDIA GPU; the default backend is "
            + jax.default_backend()
        }
        assert "Not run: attention-cudnn (cuDNN runs on an NVIDIA GPU" in markdown(res)
    assert res["peak_tflops"] > 0 and res["preset"] == "quick"
    for b in res["blocks"].values():
        assert b["flops_per_step"] > 0 and set(b["ratio"]) == {"median", "min", "max"}
        for path in ("jax", "axjax"):
            assert b[path]["tflops"]["median"] > 0 and b[path]["fraction_of_peak"] > 0
    text = capsys.readouterr().out
    assert "| mlp |" in text and "| attention |" in text and text.strip() == markdown(res)


def test_flop_counts() -> None:
    s = PRESETS["quick"]
    assert mlp_block(s, "f32", jax.random.key(0)).flops == 3 * 2 * 2 * (2 * 16 * 32 * 128)
    b, t, e = s.att_batch, s.seq, s.width
    assert attention_block(s, "f32", jax.random.key(0)).flops == 3 * (
        8 * b * t * e * e + 4 * b * t * t * e
    )
    assert bench_large(s, "f32", rounds=1, window_s=0.0, blocks=("mlp",))["blocks"].keys() == {
        "mlp"
    }


def test_trace_depth_reports_every_part(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.trace_depth import main as trace_main

    res = trace_main(["--depths", "1,2", "--repeats", "1"])
    assert set(res) == {1, 2}
    for r in res.values():
        for path in ("jax", "axjax"):
            assert set(r[path]) == {"trace", "lower", "compile", "total"}
            assert all(v > 0 for v in r[path].values())
    assert "| 2 | 11 |" in capsys.readouterr().out
