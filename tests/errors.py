"""The check of exact error texts, shared by tests/core/test_core_errors.py and
tests/ops/test_op_errors.py: what is wrong, and how to fix it, word for word."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import axjax as ax
from tests.axes import Batch, Pixel

#: the operand most cases start from, as the messages show it
X = "Tensor[F32, Batch=2, Pixel=3]"


def x23() -> ax.Tensor[ax.F32, Batch, Pixel]:
    return ax.zeros((2, 3), Batch, Pixel)


def raises(kind: type[Exception], message: str, fn: Callable[[], Any]) -> None:
    """``fn()`` raises ``kind`` with exactly ``message`` (JAX may append its traceback note)."""
    with pytest.raises(kind) as info:
        fn()
    got = str(info.value).split("\n--------------------\nFor simplicity, JAX")[0]
    assert got == message
