"""Every process of a run resumed from a checkpoint gets the same history, at every resume
point: inside an epoch, before the last one, inside the last one and after the end (issue
33: process 1 of a finished run resumed got an empty history and failed on
``[r for r in result.history if "eval_accuracy" in r][-1]``, because the earlier rows came
from ``metrics.jsonl``, which only process 0 writes; a checkpoint now carries them)."""

from __future__ import annotations

import json
from typing import Any

from tests.parallel._launch import TwoProcessRuns


def run_two_resumed(runs: TwoProcessRuns) -> list[dict[str, list[dict[str, Any]]]]:
    """The histories each process of ``_two_process.py``'s part ``resume`` wrote (the
    launch shared with test_parallel.py's two-process test: tests/parallel/conftest.py)."""
    folder = runs.folder("resume")
    return [json.loads((folder / f"history-{i}.json").read_text()) for i in range(2)]


def without_time(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "time"} for r in rows]


def test_every_process_gets_the_same_history_at_every_resume_point(
    two_process_runs: TwoProcessRuns,
) -> None:
    first, second = run_two_resumed(two_process_runs)
    through = first["through"]
    assert [r["step"] for r in through] == [1, 2, 3, 4, 4, 5, 6, 7, 8, 8]  # evals at 4 and 8
    assert without_time(second["through"]) == without_time(through)
    assert set(first) == set(second) == {"through", "3", "4", "6", "8"}
    for at in ("3", "4", "6", "8"):
        step = int(at)
        for got in (first[at], second[at]):
            # the rows up to the checkpoint are the saved ones, clock included, in both
            # processes; the rows after it are computed again (each process's own clock)
            assert [r for r in got if r["step"] <= step] == [
                r for r in first["through"] if r["step"] <= step
            ], (at, got)
            assert without_time(got) == without_time(through), (at, got)
        assert without_time(first[at]) == without_time(second[at])
    # resumed after the end: nothing trained again, the history is the saved one
    assert first["8"] == second["8"] == through
