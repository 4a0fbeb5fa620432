"""Sharding by axis name on 8 simulated CPU devices.

JAX fixes the device count when it starts, so the checks (``_checks.py``) run in a
subprocess and this module reports each of them as a test: the one 8-device process of the
pytest worker (tests/parallel/conftest.py), which also runs test_layer_stack_sharded.py's
checks and the restore of the two-process checkpoint. CI runs a representative matrix
(every rule set, model and mesh kind at least once; each model with Adam and with FSDP;
both examples for a few steps); ``AXJAX_FULL_PARALLEL=1`` runs all of it (models x
data/tensor/data+tensor/FSDP rules x Auto/Explicit meshes x SGD/Adam, and the MNIST
example's full epoch). The two-process fit shares its launch with
test_resume_two_processes.py (``_two_process.py``'s two parts, in sequence).

Cost, measured on the shared 2-core CPU (load about 4), ``tests/parallel`` as a whole:
104 s of wall time and 119 s of CPU (user + sys, children included), against 138 s and
151 s before the processes were shared (docs/parallel.md, "Tests and their cost").
Budget: 120 s of wall time and 130 s of CPU for ``tests/parallel`` at that load.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import data_dir
from tests.parallel._launch import ROOT, CheckProcess, TwoProcessRuns, cpu_env, free_port

HERE = Path(__file__).resolve().parent
CHECKS = [
    "rules_errors_name_the_axes",
    "shard_sharding_abstract",
    "sharded_init_never_whole",
    "shard_map_data_and_tensor_parallel",
    "mlp_sharded_equals_unsharded",
    "models_sharded_equal_unsharded",
    "loader_rows_by_index",
    "fit_parallel_equals_one_device",
    "nan_report_under_mesh",
    "adam_resume_bit_for_bit",
    "fit_bounds_the_queue_on_cpu_meshes",
    "checkpoint_restores_into_template_shardings",
    "sharded_checkpoint_restores_on_another_mesh",
    "mnist_example_data_tensor",
    "transformer_example_data_tensor",
]


#: the checks that train on the real MNIST files (``../shared/data/mnist``)
NEEDS_MNIST = {"mnist_example_data_tensor"}


@pytest.fixture(scope="module")
def report(check_process: CheckProcess) -> str:
    """The checks' output, from the worker's one 8-device process (tests/parallel/conftest.py)."""
    return check_process.run([[name] for name in CHECKS])


@pytest.mark.parametrize("name", CHECKS)
def test_check(report: str, name: str) -> None:
    if name in NEEDS_MNIST:
        data_dir("mnist")  # skips, saying where the files are expected, when they are absent
    passed = [line for line in report.splitlines() if line.startswith(f"PASS {name} ")]
    assert passed, f"{name} did not pass:\n{report}"


def test_two_processes_fit_equals_one_device(
    two_process_runs: TwoProcessRuns, check_process: CheckProcess
) -> None:
    """``jax.distributed`` on 127.0.0.1: two processes of 4 CPU devices, one global mesh
    whose device order interleaves them; each builds its own rows of every batch (the part
    ``two_process`` of the launch shared with test_resume_two_processes.py). Then a
    checkpoint saved by both (shards spanning the processes) restores in one process on
    another mesh (the worker's 8-device process, on 2 of its devices)."""
    folder = two_process_runs.folder("two_process")
    report = check_process.run([["two_process_restore", str(folder)]], timeout=600)
    assert "PASS two_process_restore " in report, report


EXAMPLE = ROOT / "examples" / "mnist" / "train.py"


def launch_example(tmp_path: Path, *flags: str) -> tuple[list[subprocess.Popen[str]], list[Path]]:
    """The MNIST example in two processes of 4 CPU devices (one global mesh of 8), both in
    one new process group (the first's id), output in ``tmp_path/example-<i>.txt``."""
    data = data_dir("mnist")  # skips, saying where the files are expected, without them
    port = str(free_port())
    logs = [tmp_path / f"example-{i}.txt" for i in range(2)]
    procs: list[subprocess.Popen[str]] = []
    for i, log in enumerate(logs):
        with log.open("w") as out:
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        str(EXAMPLE),
                        *("--devices", "4", "--parallel", "data", "--epochs", "1"),
                        *("--coordinator", f"127.0.0.1:{port}", "--num-processes", "2"),
                        *("--process-id", str(i), "--data-dir", str(data)),
                        *("--no-progress", "--logdir", str(tmp_path / f"logs-{i}"), *flags),
                    ],
                    env=cpu_env(),
                    cwd=ROOT,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    text=True,
                    process_group=0 if i == 0 else procs[0].pid,
                )
            )
    return procs, logs


def stop(procs: list[subprocess.Popen[str]]) -> None:
    """Kill what is left of the processes (a test that failed leaves none behind)."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_two_process_example_full_epoch(tmp_path: Path) -> None:
    """A full epoch of the MNIST example in two processes (16384 images, 128 steps of 128)
    ends. Without a host sync per step (``queue_bound``) the steps queued on the CPU
    devices hang in their collectives: this run made no progress in 150 s, the full
    469-step epoch none in 7 minutes."""
    procs, logs = launch_example(tmp_path, "--limit", "16384", "--test-limit", "1000")
    try:
        for p in procs:
            p.wait(timeout=300)
    except subprocess.TimeoutExpired:
        pass
    finally:
        stop(procs)
    outs = [log.read_text() for log in logs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(outs)
    assert "after 128 steps" in outs[0], outs[0]


def test_two_process_example_stops_on_sigterm(tmp_path: Path) -> None:
    """SIGTERM to the process group of a two-process run ends both processes at once (JAX's
    preemption service, which catches SIGTERM, is off in ``parallel_from_args``)."""
    procs, logs = launch_example(tmp_path)  # the whole of MNIST: still training when stopped
    try:
        deadline = time.monotonic() + 240
        # both joined (initialize returns once both have: with the preemption service on,
        # its SIGTERM handler is in place in both by then), data loaded: fit starts. The
        # signal comes now, with no pause: what it must end is the run, wherever it is
        while "mlp on MNIST" not in logs[0].read_text():
            assert time.monotonic() < deadline and procs[0].poll() is None, logs[0].read_text()
            time.sleep(0.1)
        assert [p.poll() for p in procs] == [None, None]
        os.killpg(procs[0].pid, signal.SIGTERM)
        codes = [p.wait(timeout=20) for p in procs]
    finally:
        stop(procs)
    assert codes == [-signal.SIGTERM, -signal.SIGTERM], [log.read_text() for log in logs]
