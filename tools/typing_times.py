"""Time the static checkers on a small project: cold (no cache) and warm (cache kept).

The project is a copy of ``examples/mnist/train.py`` (247 lines: a model, a loss, a training
loop) in a temporary folder, with the configurations docs/typing.md shows: mypy strict with
the axjax plugin, mypy strict without it, pyright strict. Each checker runs twice in a row,
the first time with no cache (mypy's ``.mypy_cache``; pyright keeps none between runs, so its
two runs are alike). Prints a markdown table (docs/typing.md, "How long a check takes").

Usage::

    .venv/bin/python tools/typing_times.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

PLUGIN = """[tool.mypy]
strict = true
plugins = ["axjax.mypy"]

[[tool.mypy.overrides]]
module = ["optax", "optax.*", "tqdm", "tqdm.*"]
ignore_missing_imports = true
"""
PYRIGHT = """{{
  "typeCheckingMode": "strict",
  "pythonVersion": "3.11",
  "venvPath": "{venv_path}",
  "venv": "{venv}",
  "extraPaths": ["{root}"],
  "reportMissingTypeStubs": false
}}
"""


def _run(cmd: list[str], cwd: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's axjax and plugin
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    return time.perf_counter() - t0


def measure() -> dict[str, tuple[float, float]]:
    """``{checker: (cold s, warm s)}``."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        shutil.copy(ROOT / "examples" / "mnist" / "train.py", project / "train.py")
        (project / "pyproject.toml").write_text(PLUGIN)
        (project / "plain.toml").write_text(PLUGIN.replace('plugins = ["axjax.mypy"]\n', ""))
        venv = Path(sys.prefix)
        (project / "pyrightconfig.json").write_text(
            PYRIGHT.format(venv_path=venv.parent, venv=venv.name, root=ROOT)
        )
        mypy = [str(BIN / "mypy"), "train.py"]
        jobs = {
            "mypy + axjax.mypy": [*mypy, "--config-file", "pyproject.toml", "--cache-dir", "c1"],
            "mypy": [*mypy, "--config-file", "plain.toml", "--cache-dir", "c2"],
            "pyright": [str(BIN / "pyright"), "train.py"],
        }
        for name, cmd in jobs.items():
            out[name] = (_run(cmd, project), _run(cmd, project))
    return out


def main() -> int:
    times = measure()
    print("| checker | cold (no cache) | warm (cache kept) |")
    print("|---|---|---|")
    for name, (cold, warm) in times.items():
        print(f"| {name} | {cold:.1f} s | {warm:.1f} s |")
    print(f"\n(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
