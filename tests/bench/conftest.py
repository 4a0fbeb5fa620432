"""The benchmarks live in ``benchmarks/`` at the repository root, beside the package."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import jax
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="module", autouse=True)
def _idiomatic_jax() -> Iterator[None]:
    """The hand-written JAX models broadcast a bias implicitly (``x @ w + b``), as JAX users
    write them; the suite's strict rank promotion is lifted for these modules only."""
    with jax.numpy_rank_promotion("allow"):
        yield
