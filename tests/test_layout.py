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
#: each may import those before it
ORDER = ["core", "parallel", "ops", "graph", "nn", "train", "models"]
#: the mypy plugin types every package, so it may import each of them
ANYWHERE = {"mypy"}
#: packages whose modules import one another one way at run time (core: the tensor type,
#: Tensor, the op contract and lowering, Op and apply, in that order)
ONE_WAY_INSIDE = ("core", "parallel")


def imports(path: Path, root: Path = ROOT, run_time: bool = False) -> list[tuple[int, str]]:
    """``(line, absolute module)`` for every import in ``path``, wherever it stands
    (``run_time``: but those under ``if TYPE_CHECKING:``, made for annotations only)."""
    package = ".".join(path.relative_to(root.parent).with_suffix("").parts[:-1])
    tree = ast.parse(path.read_text())
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    found = []
    for node in ast.walk(tree):
        if run_time and id(node) in typing_only:
            continue
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


def circles(package: str, root: Path = ROOT) -> list[list[str]]:
    """The modules of ``package`` that import one another in a circle at run time (an import
    under ``TYPE_CHECKING``, for annotations, may point back), one sorted list per circle."""
    prefix = f"axjax.{package}."
    graph = {
        prefix + path.stem: {
            m for _, m in imports(path, root, run_time=True) if m.startswith(prefix)
        }
        for path in sorted((root / package).glob("_*.py"))
    }

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for m in graph.get(todo.pop(), ()):
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        return seen

    reached = {m: reach(m) for m in graph}
    found = {tuple(sorted(m2 for m2 in reached[m] if m in reached[m2])) for m in graph}
    return sorted(list(c) for c in found if len(c) > 1)


def test_packages_depend_one_way_and_only_train_imports_optax() -> None:
    found = violations()
    assert not found, "layout rules broken:\n" + "\n".join(found)


@pytest.mark.parametrize("package", ONE_WAY_INSIDE)
def test_modules_inside_a_package_import_one_way_at_run_time(package: str) -> None:
    found = circles(package)
    assert not found, f"import circles in axjax.{package}:\n" + "\n".join(map(str, found))


def test_a_circle_is_caught_and_an_annotation_import_is_not(tmp_path: Path) -> None:
    fake = tmp_path / "axjax" / "core"
    fake.mkdir(parents=True)
    (fake / "_a.py").write_text("from ._b import f\n")
    (fake / "_b.py").write_text("def f():\n    from ._a import g\n")  # late: still a circle
    (fake / "_c.py").write_text("from ._d import h\n")
    (fake / "_d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._c import X\n"
    )
    assert circles("core", tmp_path / "axjax") == [["axjax.core._a", "axjax.core._b"]]


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
