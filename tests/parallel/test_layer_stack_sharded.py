"""``ax.nn.LayerStack`` with a parameter rule ``{Layer: "data"}`` on 8 simulated CPU devices:
each device holds one layer of every stacked parameter, and the scanned forward and its
gradients equal one device's, on an Auto and an Explicit mesh (``_layer_stack_check.py``,
in the worker's one 8-device process with ``_checks.py``'s checks: tests/parallel/conftest.py).
About 5 s of that process's CPU."""

from __future__ import annotations

import pytest

from tests.parallel._launch import CheckProcess

KINDS = ("auto", "explicit")
CHECKS = ("layer_stack_sharded_over_layer", "stacked_cached_decode_sharded_over_layer")


@pytest.fixture(scope="module")
def report(check_process: CheckProcess) -> str:
    """The four checks' output, from the worker's one 8-device process (conftest.py)."""
    return check_process.run([[f"{check}_{kind}"] for check in CHECKS for kind in KINDS])


@pytest.mark.parametrize("kind", KINDS)
def test_the_stack_shards_over_layer_and_equals_one_device(report: str, kind: str) -> None:
    assert f"PASS layer_stack_sharded_over_layer_{kind} " in report, report


@pytest.mark.parametrize("kind", KINDS)
def test_a_stacked_model_sharded_over_layer_decodes_with_its_cache(report: str, kind: str) -> None:
    assert f"PASS stacked_cached_decode_sharded_over_layer_{kind} " in report, report
