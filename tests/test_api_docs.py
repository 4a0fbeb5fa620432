"""The documentation site builds: ``mkdocs build --strict`` (docs/*.md and the API reference
rendered from the docstrings by mkdocstrings), and every public name has its entry.

The public names are enumerated from the packages' ``__init__.py`` (their redundant-alias
re-exports, ``from ._x import A as A``), the pages from ``tools/gen_api_docs.py``.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
pytest.importorskip("mkdocstrings", reason="mkdocs and mkdocstrings are in the dev extra")

import gen_api_docs  # noqa: E402  (tools/ is no package)
import griffe_axjax  # noqa: E402


def exported(module: str) -> list[str]:
    init = ROOT / Path(*module.split(".")) / "__init__.py"
    path = init if init.exists() else ROOT / (module.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text())
    names = [  # submodules (`from . import nn as nn`) have pages of their own
        a.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module is not None
        for a in node.names
        if a.asname == a.name and not a.name.startswith("_")
    ]
    if not names:  # a module defining its names: its public functions and classes
        names = [
            n.name
            for n in tree.body
            if isinstance(n, ast.FunctionDef | ast.ClassDef) and not n.name.startswith("_")
        ]
    return names


def test_the_api_pages_are_generated_for_every_public_module() -> None:
    modules = gen_api_docs.all_public_modules()
    assert modules[:2] == ["axjax", "axjax.nn"] and "axjax.train" in modules
    assert {"axjax.models", "axjax.models.gpt2", "axjax.models.llama"} <= set(modules)
    assert gen_api_docs.check(modules) == []


def test_a_stale_api_page_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for page in (ROOT / "docs" / "api").glob("*.md"):
        (tmp_path / page.name).write_text(page.read_text())
    (tmp_path / "axjax-gone.md").write_text("::: axjax.gone\n")
    (tmp_path / "axjax-nn.md").write_text("edited\n")
    monkeypatch.setattr(gen_api_docs, "API", tmp_path)
    problems = gen_api_docs.check(gen_api_docs.all_public_modules() + ["axjax.extra"])
    assert problems == [
        "docs/api/axjax-nn.md is missing or stale",
        "docs/api/axjax-extra.md is missing or stale",
        "docs/api/axjax-gone.md documents no public module: delete it",
        "mkdocs.yml's nav lacks the line '- axjax.extra: api/axjax-extra.md'",
    ]


def test_the_site_builds_strictly_and_documents_every_public_name(tmp_path: Path) -> None:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    took = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr
    assert took < 240, f"mkdocs build took {took:.0f} s"
    missing = []
    for module in gen_api_docs.all_public_modules():
        html = (tmp_path / "site" / "api" / module.replace(".", "-") / "index.html").read_text()
        missing += [f"{module}.{n}" for n in exported(module) if f'id="{module}.{n}"' not in html]
    assert missing == []
    tensor = (tmp_path / "site" / "api" / "axjax" / "index.html").read_text()
    assert "language-pycon" in tensor or "highlight" in tensor  # examples render as code


def test_the_griffe_extension_exports_re_exported_names_and_splits_grouped_args() -> None:
    """The mutation: without the extension griffe documents almost none of axjax's names."""
    import griffe

    bare = griffe.load("axjax", search_paths=[str(ROOT)])
    fixed = griffe.load(
        "axjax",
        search_paths=[str(ROOT)],
        extensions=griffe.load_extensions(griffe_axjax.AxjaxSources),
    )
    names = exported("axjax")
    assert sum(bare[n].is_public for n in names) < len(names) // 4
    assert all(fixed[n].is_public for n in names)
    text = "Summary.\n\nArgs:\n    a, b: the two ends.\n    c: one.\n\nReturns:\n    x, y: kept.\n"
    assert griffe_axjax._split_grouped_args(text) == (
        "Summary.\n\nArgs:\n    a: the two ends.\n    b: the two ends.\n    c: one.\n\n"
        "Returns:\n    x, y: kept."
    )
