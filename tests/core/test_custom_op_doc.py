"""The worked example of docs/custom-ops.md runs as written (its code blocks, in order)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import axjax as ax

DOC = Path(__file__).resolve().parents[2] / "docs" / "custom-ops.md"


def code_blocks() -> list[str]:
    """The page's python blocks, in order, without those marked as fragments (a line of the
    library's source the page quotes: ``<!-- docs-test: fragment (reason) -->``)."""
    found = re.findall(
        r"(<!-- docs-test: fragment[^\n]*-->\s*)?```python\n(.*?)```", DOC.read_text(), flags=re.S
    )
    return [block for marker, block in found if not marker]


def test_the_custom_op_example_runs() -> None:
    blocks = code_blocks()
    assert len(blocks) >= 4
    namespace: dict[str, Any] = {"__name__": "custom_op_doc"}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102
    # the example's op is a real primitive: applied through ax.Op, with its own backward
    assert issubclass(namespace["Norm"], ax.Op)
    assert namespace["h"].shape == (2, 2, 2, 2)
