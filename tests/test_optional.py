"""Late-imported dependencies (``axjax.core._optional``): ``import axjax`` imports none of
them; every import of one follows its feature's ``require()``/``load()``; pyproject's
extras list them; and every declared feature, run without its module, fails with the
message naming the ``pip install`` command or degrades with one warning
(tests/_optional_scenarios.py, one fresh interpreter per dependency)."""

from __future__ import annotations

import ast
import importlib
import json
import os
import pkgutil
import re
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path
from typing import Any

import pytest

import axjax as ax
from axjax.core import _optional
from axjax.core._optional import DEPENDENCIES, FEATURES, Feature

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "axjax"
TOPS = {m.split(".")[0] for m in DEPENDENCIES}

for _info in pkgutil.walk_packages(ax.__path__, "axjax."):  # declare every feature
    if not _info.name.startswith("axjax.mypy"):
        importlib.import_module(_info.name)


def _python(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.setdefault("JAX_PLATFORMS", "cpu")
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_import_axjax_imports_none_of_the_late_modules() -> None:
    done = _python("-c", "import sys, axjax; print(sorted({m.split('.')[0] for m in sys.modules}))")
    assert done.returncode == 0, done.stderr
    loaded = set(ast.literal_eval(done.stdout.strip().splitlines()[-1]))
    assert not TOPS & loaded, f"import axjax imported {sorted(TOPS & loaded)}"


def _late_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, module)`` of each import of a late module that is neither under
    ``if TYPE_CHECKING:`` nor preceded, in its function, by a ``.require()``/``.load()``."""
    bad: list[tuple[int, str]] = []

    def names(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            return [node.module]
        return []

    def visit(node: ast.AST, guarded_from: int | None) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return  # seen by checkers only
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            calls = [
                c.lineno
                for c in ast.walk(node)
                if isinstance(c, ast.Call)
                and isinstance(c.func, ast.Attribute)
                and c.func.attr in ("require", "load")
            ]
            guarded_from = min(calls) if calls else None
        for module in names(node):
            line = getattr(node, "lineno", 0)
            if module.split(".")[0] in TOPS and (guarded_from is None or line < guarded_from):
                bad.append((line, module))
        for child in ast.iter_child_nodes(node):
            visit(child, guarded_from)

    visit(tree, None)
    return bad


def test_every_late_import_follows_its_feature() -> None:
    bad = [
        f"{path.relative_to(ROOT)}:{line}: import {module}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, module in _late_imports(ast.parse(path.read_text()))
    ]
    assert not bad, (
        "import these through a Feature (axjax/core/_optional.py): declare "
        "`_X = Feature(module, name)` and call `_X.require()` (or `.load()`) first:\n"
        + "\n".join(bad)
    )


def test_the_import_check_finds_a_bare_import() -> None:
    """Mutation: a module-level import, and one in a function before its require()."""
    bad = _late_imports(
        ast.parse(
            "import matplotlib\n"
            "def f():\n    from tqdm import tqdm\n    _BAR.require()\n"
            "def g():\n    _BAR.require()\n    from tqdm import tqdm\n"
        )
    )
    assert bad == [(1, "matplotlib"), (3, "tqdm")]


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_pyproject_lists_each_dependency_where_its_extra_says() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    required = _requirement_names(project["dependencies"])
    for dep in DEPENDENCIES.values():
        if dep.extra is None:
            assert dep.package in required, f"{dep.package} is not in [project] dependencies"
        else:
            assert dep.package not in required, f"{dep.package} is required, not an extra"
            assert dep.package in _requirement_names(extras[dep.extra])
            # the dev extra, which CI installs, pulls every extra so the suite runs them all
            assert any("axjax[" in r and dep.extra in r for r in extras["dev"]), dep.extra


def test_a_feature_must_name_a_known_dependency() -> None:
    with pytest.raises(ValueError, match="'pandas' is not in axjax's DEPENDENCIES"):
        Feature("pandas", "ax.train.to_dataframe")


def _scenarios(modules: list[str], tmp_path: Path, *extra: str) -> list[dict[str, Any]]:
    done = _python("tests/_optional_scenarios.py", ",".join(modules), str(tmp_path), *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("module", sorted(DEPENDENCIES))
def test_each_feature_without_its_module(module: str, tmp_path: Path) -> None:
    declared = sorted(f.name for f in FEATURES if f.module == module)
    assert declared, f"no feature uses {module}: drop it from DEPENDENCIES and pyproject"
    results = _scenarios([module], tmp_path)
    assert sorted(r["feature"] for r in results) == declared
    problems = [f"{r['feature']}: {r['problem']}" for r in results if r["problem"]]
    assert not problems, "\n".join(problems)


def test_the_scenarios_fail_with_the_mechanism_off(tmp_path: Path) -> None:
    """Mutation: with the bare ImportError and no warning, every feature is reported."""
    results = _scenarios(sorted(DEPENDENCIES), tmp_path, "--mutate")
    assert sorted(r["feature"] for r in results) == sorted(f.name for f in FEATURES)
    passed = [r["feature"] for r in results if not r["problem"]]
    assert not passed, f"these passed with the mechanism off: {passed}"


def test_curves_are_drawn_once_per_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import jax
    import numpy as np
    import optax

    from axjax.train import _fit_log
    from tests.train.models import TinyMLP, classify

    drawn: list[Path] = []
    monkeypatch.setattr(_fit_log, "plot_history", lambda rows, path: drawn.append(path))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 6)).astype(np.float32)
    y = np.argmax(x @ rng.normal(size=(6, 3)), axis=1).astype(np.uint8)
    data = ax.train.Loader(ax.train.Dataset(x, y, name="synthetic"), 16)
    model = TinyMLP(jax.random.key(0), n_in=6, n_hidden=4, n_out=3)
    ax.train.fit(model, optax.sgd(0.1), classify, data, epochs=3, logdir=tmp_path, progress=False)
    assert drawn == [tmp_path / "curves.png"]
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 3  # one per epoch


def test_warns_once_per_feature(monkeypatch: pytest.MonkeyPatch) -> None:
    feature = Feature("matplotlib", "a test's drawing", missing="warn")
    try:
        monkeypatch.setattr(_optional.importlib, "import_module", _missing)
        with pytest.warns(ax.OptionalDependencyWarning, match=r'pip install "axjax\[plot\]"'):
            assert feature.load() is None
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a second warning would raise
            assert feature.load() is None
    finally:
        FEATURES.remove(feature)


def _missing(name: str) -> Any:
    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
