"""Every primitive, checked by the op-test helper (forward vs a jnp oracle, its own backward vs
jax.grad of the oracle and finite differences, plain JAX autodiff), and proof that the table
of cases, the primitives in ``axjax.core`` and the rows of ``docs/ops.md`` are the same set."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import axjax as ax
import axjax.core
from tests.core.helpers import OpCase, check_op
from tests.core.op_cases import CASES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "ops.md"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_op(case: OpCase) -> None:
    # the first case of each op gets three draws, variants (with an id) two
    check_op(case, max_examples=2 if case.id else 3)


def primitives() -> set[str]:
    """Names of the concrete ``Op`` subclasses defined in ``axjax.core``'s modules.

    A class with subclasses of its own (``UnaryOp``, ``Reduction``, ...) is a base, not a
    primitive.
    """
    for info in pkgutil.iter_modules(axjax.core.__path__):
        importlib.import_module(f"axjax.core.{info.name}")
    found: set[str] = set()
    todo = [ax.Op]
    while todo:
        cls = todo.pop()
        subs = cls.__subclasses__()
        todo.extend(subs)
        if cls is not ax.Op and not subs and cls.__module__.startswith("axjax.core."):
            found.add(cls.__name__)
    return found


def documented() -> dict[str, str]:
    """``{op: row}`` for each row of the table in docs/ops.md (first cell: `` `Op` ``)."""
    rows = {}
    for line in DOCS.read_text().splitlines():
        m = re.match(r"^\|\s*`(\w+)`\s*\|", line)
        if m:
            rows[m.group(1)] = line
    return rows


def test_every_primitive_has_a_test_case() -> None:
    tested = {c.op for c in CASES}
    missing = primitives() - tested
    assert not missing, f"primitives without a case in tests/core/op_cases.py: {sorted(missing)}"
    assert tested <= primitives(), f"cases for unknown ops: {sorted(tested - primitives())}"


def test_every_primitive_is_documented_and_every_row_is_tested() -> None:
    rows = documented()
    assert set(rows) == primitives(), (
        f"docs/ops.md rows without an op: {sorted(set(rows) - primitives())}; "
        f"ops without a row: {sorted(primitives() - set(rows))}")
    assert set(rows) <= {c.op for c in CASES}
    for op, row in rows.items():
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 4 and all(cells), f"docs/ops.md row for {op} needs 4 filled cells"


def test_the_coverage_check_sees_a_new_op() -> None:
    class Identity(ax.Op):
        def infer(self, x: object) -> ax.TensorType:
            raise NotImplementedError

    Identity.__module__ = "axjax.core._fake"
    try:
        assert "Identity" in primitives()
    finally:
        Identity.__module__ = __name__
