"""docs/graph.md runs: its Python blocks in order, each printed output as shown."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "graph.md"


def _blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)


def test_graph_docs_run_and_show_true_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = _blocks(DOC.read_text())
    assert sum(lang == "python" for lang, _ in blocks) >= 8
    namespace: dict[str, object] = {"__name__": "graph_docs"}
    printed = ""
    for lang, code in blocks:
        if lang == "python":
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, str(DOC), "exec"), namespace)  # noqa: S102
            printed = out.getvalue()
        elif lang == "text":
            assert printed.strip() == code.strip()
    out = Path(str(namespace["drawings"]))  # the page's temporary folder
    for name in ("xor.svg", "xor.png", "xor.dot", "xor.txt"):
        assert (out / name).stat().st_size > 100
    assert not list(tmp_path.iterdir())  # nothing in the working directory
