"""``tools/onnx_check.py`` (``make onnx-check``) runs in its own environment with jax2onnx and
onnxruntime; the main suite checks only its command line, so it never depends on them."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "onnx_check.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_help_names_the_options() -> None:
    p = _run("--help")
    assert p.returncode == 0, p.stderr
    for option in ("--atol", "--gpt2-fixture", "--keep"):
        assert option in p.stdout
    assert "jax2onnx" in p.stdout and "onnxruntime" in p.stdout


def test_without_jax2onnx_it_says_how_to_get_it() -> None:
    if importlib.util.find_spec("jax2onnx") is not None:
        pytest.skip("jax2onnx is installed here: the check would run instead")
    p = _run()
    assert p.returncode == 1
    assert "onnx_check: jax2onnx is not installed" in p.stderr
    assert "run `make onnx-check`, which creates .venv-onnx" in p.stderr
