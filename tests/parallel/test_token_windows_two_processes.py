"""Token windows read across two processes (``_two_process.py``'s part ``token_windows``, in
the launch shared with the other two-process tests: tests/parallel/conftest.py): each
process reads only the windows of the rows its devices hold, and the global batches equal
the one-process ones (checked in the processes)."""

from __future__ import annotations

import json

from tests.parallel._launch import TwoProcessRuns


def test_each_process_reads_only_its_rows_of_the_token_file(
    two_process_runs: TwoProcessRuns,
) -> None:
    folder = two_process_runs.folder("token_windows")
    first, second = (json.loads((folder / f"read-{i}.json").read_text()) for i in range(2))
    assert first["all"] == second["all"] and len(first["all"]) == 3
    for batch, starts in enumerate(first["all"]):
        mine, theirs = first["owned"][batch], second["owned"][batch]
        assert len(mine) == len(theirs) == 4 and sorted(mine + theirs) == starts
        # what each process read from the file: its own 4 windows, never the other's
        assert first["read"][batch] == mine and second["read"][batch] == theirs
