"""``python -m benchmarks.layer_stack`` runs and reports both forms at every depth asked
(a smoke run at the quick preset; the figures are in BENCHMARKS.md)."""

from __future__ import annotations

import pytest


def test_layer_stack_reports_both_forms(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.layer_stack import main

    args = ["--depths", "1", "--preset", "quick", "--rounds", "1", "--windows", "1"]
    rows = main([*args, "--window", "0.01"])
    assert [r["layers"] for r in rows] == [1]
    for r in rows:
        assert r["losses"]["unrolled"] == pytest.approx(r["losses"]["scanned"], rel=1e-5)
        for form in ("unrolled", "scanned"):
            assert all(r["seconds"][form][k]["median"] > 0 for k in ("compile", "first", "step"))
    out = capsys.readouterr().out
    assert "| 1 |" in out and "best ÷" in out
