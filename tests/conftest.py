"""Shared pytest set-up: strict JAX settings and the location of the real data sets."""

from __future__ import annotations

import os
from pathlib import Path

import jax
import pytest

jax.config.update("jax_numpy_rank_promotion", "raise")

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture
def key() -> jax.Array:
    return jax.random.key(0)


def data_dir(name: str) -> Path:
    """``../shared/data/<name>`` or skip the test, saying where the files are expected."""
    env = os.environ.get("AXJAX_TEST_DATA")
    base = Path(env) if env else SHARED_DATA
    path = base / name
    if not path.is_dir():
        pytest.skip(f"real {name} IDX files not found at {path} (set AXJAX_TEST_DATA)")
    return path
