"""Launching the two processes of a ``jax.distributed`` test on 127.0.0.1 (shared by
tests/parallel/test_parallel.py and tests/parallel/test_resume_two_processes.py).

Example:
    >>> outs = run_two(HERE / "_two_process.py", tmp_path, "PASS two_process", timeout=600)
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import CHILD_XLA_FLAGS

#: the repository root: the processes run there
ROOT = Path(__file__).resolve().parents[2]


def cpu_env() -> dict[str, str]:
    """The environment of a child process on the CPU; ``XLA_FLAGS`` only the suite's cheap
    code generator (each script asks for its devices itself: tests/conftest.py)."""
    return {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": CHILD_XLA_FLAGS}


def free_port() -> int:
    """A port of 127.0.0.1 that is free now (for the coordinator)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def run_two(script: Path, folder: Path, passed: str, timeout: float) -> list[str]:
    """``python SCRIPT <id> PORT FOLDER`` for ids 0 and 1, each writing its output to
    ``FOLDER/process-<id>.txt``; both must exit with 0 and print ``<passed> <id>``. Returns
    the two outputs. A process that fails leaves the other waiting at a barrier until JAX's
    timeout, so the other is killed then (and both after ``timeout`` seconds)."""
    port = str(free_port())
    logs = [folder / f"process-{i}.txt" for i in range(2)]
    files = [log.open("w") for log in logs]
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(i), port, str(folder)],
            env=cpu_env(),
            cwd=ROOT,
            stdout=f,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i, f in enumerate(files)
    ]
    deadline = time.monotonic() + timeout
    while any(p.poll() is None for p in procs):
        if time.monotonic() > deadline or any(p.returncode for p in procs):
            for p in procs:
                if p.poll() is None:
                    p.kill()
            break
        time.sleep(0.2)
    for p, f in zip(procs, files, strict=True):
        p.wait()
        f.close()
    outs = [log.read_text() for log in logs]
    for i, (p, out) in enumerate(zip(procs, outs, strict=True)):
        assert p.returncode == 0 and f"{passed} {i}" in out, "\n".join(outs)
    return outs
