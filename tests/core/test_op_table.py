"""Every primitive, checked by the op-test helper: forward vs a jnp oracle, own backward vs
jax.grad of the oracle and finite differences, and the plain-JAX-autodiff path."""

from __future__ import annotations

import pytest

from tests.core.helpers import OpCase, check_op
from tests.core.op_cases import CASES


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_op(case: OpCase) -> None:
    check_op(case)
