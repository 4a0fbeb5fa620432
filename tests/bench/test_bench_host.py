"""``python -m benchmarks.host_overhead`` in a smoke run: every row is timed and reported,
and the pytree counts show what each loop flattens per call (no time is judged)."""

from __future__ import annotations

import json
import math

from benchmarks.host_overhead import RECOMMENDED, ROWS, markdown, pytree_costs, run, target


def test_every_row_is_timed_and_reported() -> None:
    results = run(batch=8, calls=2, rounds=2, costs=False)
    rows = results["timing"]["rows"]
    assert set(rows) == set(ROWS)
    for label, r in rows.items():
        for key in ("cpu_us", "wall_us", "cpu_ratio"):
            assert all(math.isfinite(r[key][k]) and r[key][k] > 0 for k in ("median", "min"))
        assert r["traces"] == 1, f"{label} traced {r['traces']} times"
    assert rows["expert"]["cpu_ratio"]["median"] == 1.0
    text = markdown(results)
    assert "| axjax TrainStep |" in text and "| axjax modules under jax.jit |" in text
    assert text.splitlines()[-1] == f"- {target(results)}"
    assert target(results).startswith(f"host µs/call {RECOMMENDED} ÷ expert: ")
    assert json.loads(json.dumps(results)) == results


def test_the_recommended_loop_flattens_no_module() -> None:
    costs = pytree_costs(batch=8, n=5)
    inner = {k: r["nodes"] - r["leaves"] for k, r in costs.items()}
    # the argument tuple, the list of arrays, the batch tuple and its two Tensors; and None
    # in the key's place for TrainStep (a loss without a key is not passed one)
    assert inner["fit's leaves step"] == 5 and inner[RECOMMENDED] == 6
    assert inner["axjax modules under jax.jit"] > 3 * inner[RECOMMENDED]
    assert inner["expert"] == 16  # list of tuples, Adam's state, the argument tuple
