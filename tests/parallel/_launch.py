"""Launching the processes of tests/parallel: the two processes of the ``jax.distributed``
checks on 127.0.0.1 (:class:`TwoProcessRuns`: one launch for tests/parallel/test_parallel.py
and tests/parallel/test_resume_two_processes.py), and the one 8-device process of the
single-process checks (:class:`CheckProcess`); both are session fixtures of conftest.py.

Example:
    >>> codes, outs = launch_two(HERE / "_two_process.py", tmp_path, 900, "two_process", "resume")
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from tests.conftest import CHILD_XLA_FLAGS

#: the repository root: the processes run there
ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


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


def launch_two(
    script: Path, folder: Path, timeout: float, *args: str
) -> tuple[list[int], list[str]]:
    """``python SCRIPT <id> PORT FOLDER ARGS...`` for ids 0 and 1, each writing its output
    to ``FOLDER/process-<id>.txt``; their exit codes and outputs. A process that fails
    leaves the other waiting at a barrier until JAX's timeout, so the other is killed then
    (and both after ``timeout`` seconds)."""
    port = str(free_port())
    folder.mkdir(parents=True, exist_ok=True)
    logs = [folder / f"process-{i}.txt" for i in range(2)]
    files = [log.open("w") for log in logs]
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(i), port, str(folder), *args],
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
    return [p.returncode for p in procs], [log.read_text() for log in logs]


#: the parts of ``_two_process.py`` in the order one launch runs them, and their timeouts
TWO_PROCESS_PARTS = {"two_process": 600.0, "resume": 300.0, "token_windows": 120.0}


class TwoProcessRuns:
    """The parts of ``_two_process.py`` (one launch of two processes for all of them), run
    once for the whole pytest run, whichever xdist worker asks first: the others wait for
    it and read its outputs (a lock and the outputs in ``shared``, a folder all workers
    see). :meth:`folder` judges one part."""

    def __init__(self, shared: Path) -> None:
        self.shared = shared

    def outputs(self) -> tuple[Path, list[str]]:
        """The launch's folder and its two outputs (launched by the first caller)."""
        import fcntl

        folder = self.shared / "two-process"
        self.shared.mkdir(parents=True, exist_ok=True)
        with (self.shared / "two-process.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            done = folder / "outputs.json"
            if not done.is_file():
                parts = list(TWO_PROCESS_PARTS)
                timeout = sum(TWO_PROCESS_PARTS.values())
                _, outs = launch_two(HERE / "_two_process.py", folder, timeout, *parts)
                done.write_text(json.dumps(outs))
            return folder, json.loads(done.read_text())

    def folder(self, part: str) -> Path:
        """``part``'s folder once both processes passed it; else an ``AssertionError`` with
        their output. A part that did not run because an earlier one failed (the processes
        stop at a failure) runs again alone, so that its test reports its own result."""
        folder, outs = self.outputs()
        earlier = list(TWO_PROCESS_PARTS)[: list(TWO_PROCESS_PARTS).index(part)]
        if all(f"PASS {e} {i}" in out for e in earlier for i, out in enumerate(outs)):
            alone = None
        else:  # it may not have run: run it alone
            folder = self.shared / f"two-process-{part}-{uuid.uuid4().hex[:8]}"
            alone = launch_two(HERE / "_two_process.py", folder, TWO_PROCESS_PARTS[part], part)
            outs = alone[1]
        passed = all(f"PASS {part} {i}" in out for i, out in enumerate(outs))
        assert passed, "\n".join(outs)
        return folder / part


class CheckProcess:
    """``_server.py`` in a subprocess (started at the first request, and again after one
    that ended it); its output is read by a thread, so that a request can time out."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()

    def start(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, str(HERE / "_server.py")],
                env=cpu_env(),  # the checks ask for their 8 devices themselves
                cwd=ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            self.lines = queue.Queue()
            out, lines = self.proc.stdout, self.lines
            assert out is not None

            def read() -> None:
                for line in out:
                    lines.put(line)
                lines.put(None)  # the process ended

            threading.Thread(target=read, daemon=True).start()
        return self.proc

    def run(self, checks: Sequence[Sequence[str]], timeout: float = 900) -> str:
        """Run ``checks`` (each ``[name, *args]``) in the process, in order; their output
        (``PASS name ...`` or ``FAIL name`` and the traceback, for each), and why it stopped
        when it did not answer them all (it ended, or ``timeout`` seconds passed)."""
        proc = self.start()
        token = uuid.uuid4().hex
        assert proc.stdin is not None
        proc.stdin.write(json.dumps([*map(list, checks), ["END", token]]) + "\n")
        proc.stdin.flush()
        report: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                self.close(kill=True)
                report.append(f"(no answer after {timeout} s: the check process was ended)\n")
                break
            if line is None:
                report.append(f"(the check process ended with {proc.wait()})\n")
                break
            if line.strip() == f"END {token}":
                break
            report.append(line)
        return "".join(report)

    def close(self, kill: bool = False) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        if not kill:
            assert proc.stdin is not None
            proc.stdin.close()  # the end of its requests: it exits
            try:
                proc.wait(timeout=30)
                return
            except subprocess.TimeoutExpired:
                pass
        proc.kill()
        proc.wait()
