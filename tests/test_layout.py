"""The layout's rules, read from the source: packages depend one way (train -> nn -> graph
-> ops -> parallel -> core), nothing below train imports optax, and no package reaches into
another's private modules (it imports the package, or its ``_internal`` module). Every import
counts, inside functions and under ``TYPE_CHECKING`` too. Inside each package the modules
import one another one way at run time (an import for annotations only may point back).

``python tests/test_layout.py [package ...]`` prints each package's modules bottom to top,
with what each imports, and "no circle" (or the circles; it exits 1 then).

``parallel`` (sharding by axis name, ``Parallel``, the launch flags, FSDP's gather) builds on
core alone, so it sits right above it: core's ops read the current rules from core's own
context, which ``parallel`` sets, and nn (``LayerStack``) and train (``fit``) use it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "axjax"
#: each may import those before it
ORDER = ["core", "parallel", "ops", "graph", "nn", "train", "models"]
#: the mypy plugin types every package, so it may import each of them
ANYWHERE = {"mypy"}
#: packages whose modules import one another one way at run time (core: the tensor type,
#: Tensor, the op contract and lowering, Op and apply, in that order; graph: the nodes, the
#: recurrence, the drawing, Graph, compiling, gradients): every package
ONE_WAY_INSIDE = ("core", "parallel", "ops", "graph", "nn", "train", "models", "mypy")


def is_module(name: str, root: Path = ROOT) -> bool:
    """Whether ``name`` (``axjax.core._axis``) is a module or package under ``root``."""
    path = root.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


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
    found: list[tuple[int, str]] = []
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
            # `from . import _x` / `from ..core import _internal`: a name that is a module is
            # imported too; another (`from ._linear import _Dense`) is its module's
            found += [
                (node.lineno, f"{base}.{a.name}")
                for a in node.names
                if is_module(f"{base}.{a.name}", root)
            ]
    return found


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "axjax" else None


def violations(root: Path = ROOT) -> list[str]:
    out: list[str] = []
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


def module_imports(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of ``package`` (its ``__init__`` aside) -> the modules of ``package`` it
    imports at run time."""
    prefix = f"axjax.{package}."
    paths = [p for p in sorted((root / package).glob("*.py")) if p.stem != "__init__"]
    return {
        prefix + path.stem: {
            m for _, m in imports(path, root, run_time=True) if m.startswith(prefix)
        }
        for path in paths
    }


def circles(package: str, root: Path = ROOT) -> list[list[str]]:
    """The modules of ``package`` that import one another in a circle at run time (an import
    under ``TYPE_CHECKING``, for annotations, may point back), one sorted list per circle."""
    graph = module_imports(package, root)

    def reach(start: str) -> set[str]:
        seen, todo = set[str](), [start]
        while todo:
            for m in graph.get(todo.pop(), ()):
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        return seen

    reached = {m: reach(m) for m in graph}
    found = {tuple(sorted(m2 for m2 in reached[m] if m in reached[m2])) for m in graph}
    return sorted(list(c) for c in found if len(c) > 1)


def one_way_order(package: str, root: Path = ROOT) -> list[tuple[str, list[str]]]:
    """``package``'s modules bottom to top, each with the modules it imports at run time
    (all before it): by the length of the longest chain of imports below a module, then by
    name. ``ValueError`` when there is a circle."""
    graph = module_imports(package, root)
    found = circles(package, root)
    if found:
        raise ValueError(f"import circles in axjax.{package}: {found}")
    height: dict[str, int] = {}

    def height_of(m: str) -> int:
        if m not in height:
            height[m] = 1 + max((height_of(d) for d in graph[m] if d in graph), default=-1)
        return height[m]

    ordered = sorted(graph, key=lambda m: (height_of(m), m))
    return [(m, sorted(d for d in graph[m] if d in graph)) for m in ordered]


def report(package: str, root: Path = ROOT) -> str:
    """What ``python tests/test_layout.py <package>`` prints: the modules bottom to top,
    one a line with what it imports, then "no circle"; or the circles."""
    found = circles(package, root)
    if found:
        shown = ["  a circle: " + ", ".join(m.rsplit(".", 1)[1] for m in c) for c in found]
        return "\n".join([f"axjax.{package}: import circles at run time", *shown])
    rows = [
        (m.rsplit(".", 1)[1], ", ".join(d.rsplit(".", 1)[1] for d in deps))
        for m, deps in one_way_order(package, root)
    ]
    width = max((len(m) for m, _ in rows), default=0)
    lines = [
        f"  {m.ljust(width)}  {'imports ' + deps if deps else ''}".rstrip() for m, deps in rows
    ]
    return "\n".join([f"axjax.{package}, bottom to top:", *lines, "no circle"])


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


def test_an_imported_private_name_is_its_module_and_a_late_circle_is_caught(
    tmp_path: Path,
) -> None:
    fake = tmp_path / "axjax" / "nn"
    fake.mkdir(parents=True)
    (fake / "_a.py").write_text("from ._b import _helper\nfrom . import _b\n")
    (fake / "_b.py").write_text("def _helper():\n    pass\n")
    (fake / "_c.py").write_text("def f():\n    from ._d import _Late\n")  # late: a circle
    (fake / "_d.py").write_text("from ._c import _Early\n")
    root = tmp_path / "axjax"
    # the name _helper is followed to its module _b (it was taken for a module: a KeyError)
    assert imports(fake / "_a.py", root) == [
        (1, "axjax.nn._b"),
        (2, "axjax.nn"),
        (2, "axjax.nn._b"),
    ]
    assert module_imports("nn", root)["axjax.nn._a"] == {"axjax.nn._b"}
    assert circles("nn", root) == [["axjax.nn._c", "axjax.nn._d"]]


def test_a_module_named_in_an_import_is_followed_and_a_private_name_is_not(
    tmp_path: Path,
) -> None:
    for package in ("core", "nn", "train"):
        (tmp_path / "axjax" / package).mkdir(parents=True)
        (tmp_path / "axjax" / package / "__init__.py").write_text("")
    (tmp_path / "axjax" / "core" / "_internal.py").write_text("def _shared():\n    pass\n")
    (tmp_path / "axjax" / "nn" / "_bad.py").write_text(
        "from .. import train\nfrom ..core._internal import _shared\n"
    )
    found = violations(tmp_path / "axjax")
    assert any("imports axjax.train (nn builds below train)" in v for v in found), found
    assert not any("a private module" in v for v in found), found  # _shared is a name


def test_the_report_gives_the_modules_bottom_to_top_or_the_circles(tmp_path: Path) -> None:
    fake = tmp_path / "axjax" / "graph"
    fake.mkdir(parents=True)
    (fake / "_low.py").write_text("import jax\n")
    (fake / "_mid.py").write_text("from ._low import f\n")
    (fake / "top.py").write_text("def g():\n    from . import _mid, _low\n")
    (fake / "_side.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .top import g\n"
    )
    assert report("graph", tmp_path / "axjax") == "\n".join(
        [
            "axjax.graph, bottom to top:",
            "  _low",
            "  _side",
            "  _mid   imports _low",
            "  top    imports _low, _mid",
            "no circle",
        ]
    )
    (fake / "_low.py").write_text("def f():\n    from .top import g\n")
    assert report("graph", tmp_path / "axjax") == "\n".join(
        ["axjax.graph: import circles at run time", "  a circle: _low, _mid, top"]
    )
    with pytest.raises(ValueError, match="import circles in axjax.graph"):
        one_way_order("graph", tmp_path / "axjax")


def test_graph_builds_nodes_then_drawing_then_graph_then_compiling() -> None:
    order = [m.rsplit(".", 1)[1] for m, _ in one_way_order("graph")]
    layers = ["_nodes", "_loop", "_render", "_graph", "_compile", "_graph_grad"]
    assert sorted(layers, key=order.index) == layers, order
    assert report("graph").endswith("no circle")


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
    # `from ..core import _axis` names a module only if there is one (else it is a name)
    (tmp_path / "axjax" / "core").mkdir(exist_ok=True)
    (tmp_path / "axjax" / "core" / "_axis.py").write_text("")
    found = violations(tmp_path / "axjax")
    assert any(rule in v for v in found), found


if __name__ == "__main__":  # python tests/test_layout.py [package ...]: the one-way orders
    reports = [report(p) for p in sys.argv[1:] or ONE_WAY_INSIDE]
    print("\n\n".join(reports))
    sys.exit(any(not r.endswith("no circle") for r in reports))
