"""tools/gpu_check.sh parses and documents itself; tools/gpu_figures.py turns what it wrote
into the rows of BENCHMARKS.md's GPU section, and names what is missing."""

from __future__ import annotations

import json
import re
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


def _plan(*args: str) -> str:
    done = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_the_default_plan_fits_its_budget_and_runs_the_models_tests() -> None:
    """The default stages, their caps within the budget's reach, tests/models among the
    tests, the transformer stage on the two experts without the memory table; and the
    opt-in gpt2-124m stage alone runs the GPT-2 benchmark at both vocabularies."""
    plan = _plan()
    stages = re.findall(r"^== (\S+) \(at most (\d+) s\)", plan, re.M)
    assert [s for s, _ in stages] == ["env", "install", "tests", "transformer", "large", "mnist"]
    assert "tests/train tests/models" in plan and "budget 500 s" in plan
    assert "--experts cudnn\\,einsum --no-memory" in plan and "gpt2" not in plan
    gpt2 = _plan("--stage", "gpt2-124m")
    stages = re.findall(r"^== (\S+) \(at most (\d+) s\)", gpt2, re.M)
    assert [s for s, _ in stages] == ["env", "install", "gpt2-124m", "gpt2-124m-padded"]
    assert "-m benchmarks.gpt2 --preset gpt2-124m-padded" in gpt2 and "budget 480 s" in gpt2
    smoke = _plan("--stage", "gpt2-124m", "--smoke")
    assert "--preset quick --rounds 1 --window 0.01 --torch off" in smoke
    bad = subprocess.run(["bash", str(SCRIPT), "--stage", "all"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown stage all" in bad.stderr


def test_the_gpt2_figures(tmp_path: Path) -> None:
    row = {"ms_per_step": 100.0, "tokens_per_s": 163840.0, "mfu": 0.5, "temp_bytes": 2**30}
    res = {"preset": "gpt2-124m", "config": {"vocab": 50257, "batch": 16, "context": 1024}}
    res |= {"peak_tflops": 728.0, "notes": ["no pytorch row: x"], "disagree": []}
    res["rows"] = {"jax (cudnn attention)": row, "axjax TrainStep": row | {"ms_per_step": 80.0}}
    (tmp_path / "gpt2.json").write_text(json.dumps(res))
    text = "\n".join(gpu_figures.figures(tmp_path))
    assert "GPT-2 124M (gpt2-124m: vocabulary 50257, batch 16 x 1024" in text
    assert "| jax (cudnn attention) | 100 | 163,840 | 50.0 % | 1,024 | 1.00 |" in text
    assert "| axjax TrainStep | 80 | 163,840 | 50.0 % | 1,024 | 1.25 |" in text
    assert "note: no pytorch row: x" in text
    assert "gpt2-padded.json: not written" in text
