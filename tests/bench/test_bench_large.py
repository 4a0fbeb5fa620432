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


def test_attention_versions_agree() -> None:
    block = attention_block(PRESETS["quick"], "f32", jax.random.key(1))
    assert math.isclose(
        float(block.loss_jax(*block.args_jax)),
        float(block.loss_axjax(*block.args_axjax)),
        rel_tol=1e-5,
    )
    got, want = block.grad_axjax(*block.args_axjax), block.grad_jax(*block.args_jax)
    mine = (got.query_proj, got.key_proj, got.value_proj, got.output_proj)
    for a, j in zip(mine, want, strict=True):
        np.testing.assert_allclose(_np(a), _np(j), rtol=1e-4, atol=1e-7)


def test_report_has_every_figure(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "large.json"
    res = main(["--preset", "quick", "--rounds", "2", "--window", "0.001", "--json", str(out)])
    assert json.loads(out.read_text())["blocks"].keys() == {"mlp", "attention"}
    assert res["peak_tflops"] > 0 and res["dtype"] == "f32" and res["preset"] == "quick"
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
