"""The layout's rules, read from the source: packages depend one way (train -> nn -> graph
-> ops -> parallel -> core), nothing below train imports optax, and no package reaches into
another's private modules (it imports the package, or its ``_internal`` module). Every import
counts, inside functions and under ``TYPE_CHECKING`` too.

``parallel`` (sharding by axis name, ``Parallel``, the launch flags, FSDP's gather) builds on
core alone, so it sits right above it: core's ops read the current rules from core's own
context, which ``parallel`` sets, and nn (``LayerStack``) and train (``fit``) use it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "axjax"
ORDER = ["core", "parallel", "ops", "graph", "nn", "train"]  # each may import those before it
#: the mypy plugin types every package, so it may import each of them
ANYWHERE = {"mypy"}


def imports(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """``(line, absolute module)`` for every import in ``path``, wherever it stands."""
    package = ".".join(path.relative_to(root.parent).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found.append((node.lineno, base))
            # `from . import _x` / `from ..core import _internal`: the names are modules too
            found += [
                (node.lineno, f"{base}.{a.name}") for a in node.names if a.name.startswith("_")
            ]
    return found


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "axjax" else None


def violations(root: Path = ROOT) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        own = rel.parts[1] if len(rel.parts) > 2 else None  # axjax/<pkg>/file.py
        for line, module in imports(path, root):
            where = f"{rel}:{line}: imports {module}"
            if module.split(".")[0] == "optax" and own not in ("train", "mypy"):
                out.append(f"{where} (only axjax.train may import optax)")
            target = package_of(module)
            if own is None or target is None or target == own:
                continue
            if own in ORDER and target in ORDER and ORDER.index(target) > ORDER.index(own):
                out.append(f"{where} ({own} builds below {target})")
            private = [p for p in module.split(".")[2:] if p.startswith("_") and p != "_internal"]
            if private and own not in ANYWHERE:
                out.append(
                    f"{where} (a private module of {target}: use axjax.{target} or "
                    f"axjax.{target}._internal)"
                )
    return out


def test_packages_depend_one_way_and_only_train_imports_optax() -> None:
    found = violations()
    assert not found, "layout rules broken:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("package", "source", "rule"),
    [
        ("core", "from ..graph import Node\n", "core builds below graph"),
        ("core", "def f():\n    from ..ops import _shape\n", "core builds below ops"),
        ("core", "from ..parallel import axis_rules\n", "core builds below parallel"),
        ("parallel", "from ..ops import add\n", "parallel builds below ops"),
        ("parallel", "def f():\n    from ..train import fit\n", "parallel builds below train"),
        ("nn", "from ..parallel._rules import active_rules\n", "a private module of parallel"),
        (
            "ops",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..nn import MLP\n",
            "ops builds below nn",
        ),
        ("graph", "import optax\n", "only axjax.train may import optax"),
        ("nn", "from ..core._axis import axis_name\n", "a private module of core"),
        ("nn", "from ..core import _axis\n", "a private module of core"),
    ],
)
def test_the_rules_catch_a_wrong_import(
    tmp_path: Path, package: str, source: str, rule: str
) -> None:
    fake = tmp_path / "axjax" / package
    fake.mkdir(parents=True)
    (fake / "_bad.py").write_text(source)
    found = violations(tmp_path / "axjax")
    assert any(rule in v for v in found), found
