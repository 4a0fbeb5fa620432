"""The processes tests/parallel's checks share (tests/parallel/_launch.py).

``check_process``: the one process of 8 simulated CPU devices of the single-process checks
(``_server.py``), started by the first test of a pytest worker that needs a check, ended
with the session. A test file asks it for its checks in one request (``CheckProcess.run``)
and reports each check by name from the ``PASS`` lines.

``two_process_runs``: the one launch of two ``jax.distributed`` processes that runs the
parts of ``_two_process.py`` in sequence, once for the whole run (shared by the xdist
workers); each part's test judges its own part (``TwoProcessRuns.folder``)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.parallel._launch import CheckProcess, TwoProcessRuns


@pytest.fixture(scope="session")
def check_process() -> Iterator[CheckProcess]:
    """The worker's one process for the 8-device checks (none started until a test asks)."""
    process = CheckProcess()
    yield process
    process.close()


@pytest.fixture(scope="session")
def two_process_runs(tmp_path_factory: pytest.TempPathFactory) -> TwoProcessRuns:
    """The two-process parts, launched by the first test that asks, in a folder that every
    xdist worker of this run sees (their base folders' parent), else this run's own."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return TwoProcessRuns(shared / "parallel-shared")
