"""``ax.nn.LayerStack`` with a parameter rule ``{Layer: "data"}`` on 8 simulated CPU devices:
each device holds one layer of every stacked parameter, and the scanned forward and its
gradients equal one device's, on an Auto and an Explicit mesh (``_layer_stack_check.py`` in
a subprocess: JAX fixes the device count when it starts). About 6 s on the shared CPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.parallel._launch import cpu_env

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def report() -> str:
    done = subprocess.run(
        [sys.executable, str(HERE / "_layer_stack_check.py")],
        env=cpu_env(),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=HERE.parents[1],
    )
    return done.stdout + done.stderr


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_the_stack_shards_over_layer_and_equals_one_device(report: str, kind: str) -> None:
    assert f"PASS layer_stack_sharded_over_layer_{kind}" in report, report


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_a_stacked_model_sharded_over_layer_decodes_with_its_cache(report: str, kind: str) -> None:
    assert f"PASS stacked_cached_decode_sharded_over_layer_{kind}" in report, report
