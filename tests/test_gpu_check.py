"""tools/gpu_check.sh parses and documents itself; tools/gpu_figures.py turns what it wrote
into the rows of BENCHMARKS.md's GPU section, and names what is missing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import gpu_figures  # noqa: E402  (tools/ is no package)

SCRIPT = ROOT / "tools" / "gpu_check.sh"


def _mmm(m: float) -> dict[str, float]:
    return {"median": m, "min": m * 0.9, "max": m * 1.1}


def _block(jax_ms: float, axjax_ms: float) -> dict[str, Any]:
    return {
        "ratio": _mmm(jax_ms / axjax_ms),
        "jax": {"ms_per_step": _mmm(jax_ms), "fraction_of_peak": 0.5},
        "axjax": {"ms_per_step": _mmm(axjax_ms), "fraction_of_peak": 0.25},
    }


LOG = """\
....F.
=============================== slowest 15 durations ===============================
12.50s call     tests/train/test_fit.py::test_resume_continues_exactly
0.01s setup    tests/nn/test_nn_tree.py::test_tree
FAILED tests/nn/test_nn_tree.py::test_tree_lstm_equals_the_recursive_reference
=================== 1 failed, 5 passed in 170.00s (0:02:50) ===================
"""


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_the_script_parses_and_prints_its_usage() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    done = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "--smoke" in done.stdout and "set -uo" not in done.stdout
    bad = subprocess.run(["bash", str(SCRIPT), "--fast"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown argument --fast" in bad.stderr


def test_the_figures_of_each_stage(tmp_path: Path) -> None:
    (tmp_path / "pytest.log").write_text(LOG)
    large = {"device": "H100", "dtype": "bf16", "preset": "gpu", "peak_tflops": 740.0}
    large["blocks"] = {"attention": _block(27.25, 33.23)}
    (tmp_path / "large.json").write_text(json.dumps(large))
    tf = {"device": "H100", "preset": "gpu", "config": {}, "peak_tflops": {"bf16": 736.0}}
    tf |= {"rows": {"bf16": _block(64.46, 63.9)}, "rows_cudnn": {"bf16": _block(30.0, 31.0)}}
    tf["attention"] = {"einsum_ms": 54.61, "fused_ms": 64.19, "default": "fused"}
    (tmp_path / "transformer.json").write_text(json.dumps(tf))
    text = "\n".join(gpu_figures.figures(tmp_path))
    assert text.startswith("tests: 1 failed, 5 passed in 170.00s (0:02:50)\n")
    assert "  FAILED tests/nn/test_nn_tree.py::test_tree_lstm_equals" in text
    assert "  12.50s call     tests/train/test_fit.py::test_resume_continues_exactly" in text
    assert "| attention | 27.25 | 33.23 | 0.82 [0.74–0.90] | 50 % | 25 % |" in text
    assert "| bf16 | fused | 64.46 | 63.9 | 1.01 [0.91–1.11] | 25 % | 736 |" in text
    assert "| bf16 | cudnn | 30 | 31 |" in text  # every rows_<expert attention> key
    assert "einsum 54.61 ms, fused 64.19 ms; default on this device: fused" in text
    assert "mnist.json: not written (its stage failed, timed out or was skipped)" in text


def test_an_interrupted_or_broken_run_is_named(tmp_path: Path) -> None:
    (tmp_path / "pytest.log").write_text("...\n!!!! KeyboardInterrupt !!!!\n3 passed in 41.0s\n")
    (tmp_path / "large.json").write_text('{"blocks": {"mlp": {}}}')
    (tmp_path / "mnist.json").write_text("{not json")
    text = "\n".join(gpu_figures.figures(tmp_path))
    assert "tests: 3 passed in 41.0s (INTERRUPTED: its timeout stopped the run" in text
    assert "large.json: unexpected layout (KeyError: 'jax')" in text
    assert "mnist.json: unreadable (" in text
    assert gpu_figures.main([str(tmp_path / "absent")]) == 2
