"""The public API's type completeness, as ``pyright --verifytypes axjax --ignoreexternal``
measures it for users: every exported symbol (and every symbol its types reach) must have a
declared type, so that a user's checker infers the same types pyright and mypy do here.

The score must stay at or above :data:`THRESHOLD`. An undeclared attribute (a slot, an
attribute first set by tuple unpacking, a module variable without annotation) makes the
classes and functions that mention it "partially unknown" and drops the score; the failure
lists the symbols pyright reports, with the file and line to annotate.

pyright reads the installed packages (JAX, Equinox) through the ``python`` first on ``PATH``:
without this environment's ``python`` there, every class built on ``eqx.Module`` counts as
unknown. The test puts the running interpreter's folder first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import requires

ROOT = Path(__file__).resolve().parents[1]
THRESHOLD = 0.95


def _pyright() -> str:
    return requires("pyright", extra="dev", program=True)  # fails, never skips, under CI


def verify(package: str, root: Path) -> dict[str, Any]:
    """pyright's ``typeCompleteness`` report for ``package`` importable from ``root``."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [_pyright(), "--verifytypes", package, "--ignoreexternal", "--outputjson"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        report: dict[str, Any] = json.loads(done.stdout)["typeCompleteness"]
    except (json.JSONDecodeError, KeyError):
        raise AssertionError(f"pyright gave no report:\n{done.stdout}\n{done.stderr}") from None
    return report


def incomplete(report: dict[str, Any]) -> list[str]:
    """``name: file:line message`` for each exported symbol whose type is not known, and
    each symbol it reaches that has no declared type (the ones to annotate)."""
    lines = []
    for s in report["symbols"]:
        if s["isTypeKnown"]:
            continue
        for d in s["diagnostics"]:
            message = " ".join(d["message"].replace("\xa0", " ").split())
            declared = "missing type annotation" in message or "unknown" in message.lower()
            if s["isExported"] or declared:
                line = d.get("range", {}).get("start", {}).get("line", -1) + 1
                where = Path(d["file"]).name + f":{line}" if d.get("file") else ""
                lines.append(f"{s['name']}: {where} {message}")
    return lines


def check_complete(report: dict[str, Any], threshold: float = THRESHOLD) -> None:
    score = report["completenessScore"]
    counts = report["exportedSymbolCounts"]
    print(f"verifytypes: {score:.1%} complete ({counts})")
    if score < threshold:
        shown = "\n".join(incomplete(report)[:60])
        raise AssertionError(
            f"pyright --verifytypes: {score:.1%} of the exported symbols have a known type, "
            f"below {threshold:.0%}. Declare the types of these (class-level annotations for "
            f"slots and unpacked attributes, annotations on module variables):\n{shown}"
        )


def test_axjax_is_type_complete() -> None:
    report = verify("axjax", ROOT)
    # the checkout's package, not another installed copy
    assert Path(report["packageRootDirectory"]).resolve() == ROOT / "axjax"
    check_complete(report)


def test_axjax_models_is_type_complete() -> None:
    """``axjax.models`` is imported by name (``import axjax`` does not load it), so it is
    verified on its own."""
    report = verify("axjax.models", ROOT)
    assert report["exportedSymbolCounts"]["withKnownType"] > 20  # gpt2, llama and the harness
    check_complete(report)


def test_the_check_fails_on_undeclared_attributes(tmp_path: Path) -> None:
    """Mutation: a package whose slots and unpacked attributes are undeclared scores below
    the threshold, and the failure names the symbols to annotate."""
    pkg = tmp_path / "undeclared"
    pkg.mkdir()
    (pkg / "py.typed").write_text("")
    (pkg / "__init__.py").write_text(
        textwrap.dedent(
            '''
            """A package with undeclared attributes."""

            __all__ = ["Box", "make", "limit"]

            limit = int("3")


            class Box:
                """Two numbers."""

                __slots__ = ("lo", "hi")

                def __init__(self, lo: int, hi: int) -> None:
                    self.lo, self.hi = lo, hi


            def make() -> Box:
                """A box."""
                return Box(0, 1)
            '''
        )
    )
    report = verify("undeclared", tmp_path)
    with pytest.raises(AssertionError) as failure:
        check_complete(report)
    text = str(failure.value)
    assert "below 95%" in text
    for name in ("undeclared.Box.lo", "undeclared.Box.hi", "undeclared.limit"):
        assert name in text
