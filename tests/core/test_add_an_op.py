"""Adding an elementwise op is three edits in three files, checked on a copy of the project:
its declaration in ``axjax/ops/_elementwise.py``, its case in ``tests/core/op_cases.py`` and
its row in ``docs/ops.md``; ``tools/gen_overloads.py`` then writes its static type and its
export lines (docs/custom-ops.md, "Adding a primitive to axjax itself")."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import requires

ROOT = Path(__file__).resolve().parents[2]
IGNORED = shutil.ignore_patterns("__pycache__", ".mypy_cache", ".hypothesis", "*.pyc")

DECLARATION = """Cube = unary_op(
    "cube", lambda x: x**3, lambda dy, y, x: 3 * x * x * dy, doc="``x**3``.", floating_only=False
)
"""
CASE = '    _unary("Cube", ax.cube, lambda x: x**3),\n'
ROW = "| `Cube` | `ax.cube(x)` | `Tensor[D, *X] -> Tensor[D, *X]` | `3x²·dy` |\n"


def _copy(tmp: Path) -> Path:
    copy = tmp / "axjax-copy"
    for part in ("axjax", "tools", "tests/core", "docs"):
        shutil.copytree(ROOT / part, copy / part, ignore=IGNORED)
    for part in ("pyproject.toml", "tests/__init__.py", "tests/conftest.py", "tests/axes.py"):
        if (ROOT / part).exists():
            shutil.copy(ROOT / part, copy / part)
    return copy


def _edit(path: Path, before: str, text: str) -> None:
    """Insert ``text`` before the first line starting with ``before``."""
    lines = path.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(before))
    path.write_text("".join([*lines[:at], text, *lines[at:]]))


def _run(copy: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    return subprocess.run(
        [sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True, timeout=600
    )


def test_a_unary_op_is_three_edits_and_the_generator(tmp_path: Path) -> None:
    requires("ruff", program=True)  # the generator formats what it writes
    requires("mypy")  # the copied table checks include the mypy plugin's
    copy = _copy(tmp_path)
    # the three edits
    _edit(copy / "axjax/ops/_elementwise.py", "# " + "=" * 76 + " binary", DECLARATION)
    _edit(copy / "tests/core/op_cases.py", "]", CASE)  # the end of the UNARY list
    _edit(copy / "docs/ops.md", "| `Exp` |", ROW)
    # then the generator: static type and export lines
    gen = _run(copy, "tools/gen_overloads.py")
    assert gen.returncode == 0, gen.stdout + gen.stderr
    stub = (copy / "axjax/ops/_gen_elementwise.py").read_text()
    assert "def cube(x: Tensor[D, *Ts]) -> Tensor[D, *Ts]:" in stub
    assert "from .ops import cube as cube" in (copy / "axjax/__init__.py").read_text()
    checks = [
        "tests/core/test_op_table.py",
        "-q",
        "-p",
        "no:cacheprovider",
        "-k",
        "Cube or not test_op[",  # the new op's own case, and every table check
    ]
    ok = _run(copy, "-m", "pytest", *checks)
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-2000:]
    assert "passed" in ok.stdout and "Cube" not in ok.stdout.split("passed")[-1]
    # mutation: without its docs row the table test fails and names the op
    doc = copy / "docs/ops.md"
    doc.write_text(doc.read_text().replace(ROW, ""))
    bad = _run(copy, "-m", "pytest", *checks[:-2], "-k", "documented")
    assert bad.returncode == 1 and "ops without a row: ['Cube']" in bad.stdout, bad.stdout[-3000:]
