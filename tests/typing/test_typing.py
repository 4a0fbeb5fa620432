"""Static typing, checked by the real checkers: every marked line of tests/typing/cases under
mypy, mypy with the axjax plugin and pyright; the package and the examples clean under the
project's strict configurations; the generated overloads current; and the plugin's messages
equal to the run-time ones, statement by statement.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest

from tests.typing import runner

ROOT = runner.ROOT


@pytest.fixture(scope="module")
def runs() -> dict[str, runner.Run]:
    return runner.run_all()


@pytest.fixture(scope="module")
def results(runs: dict[str, runner.Run]) -> dict[str, runner.Outcome]:
    return runner.outcomes(runs)


@pytest.mark.parametrize("checker", runner.CHECKERS)
def test_every_marked_line_as_expected(checker: str, runs: dict[str, runner.Run],
                                       results: dict[str, runner.Outcome]) -> None:
    outcome = results[checker]
    assert outcome.judged, "no marked lines were judged"
    print(runner.summary(runs, results))
    assert not outcome.failures, "\n".join(outcome.failures)


@pytest.mark.parametrize("checker", ["plugin", "pyright"])
def test_package_is_clean(checker: str, runs: dict[str, runner.Run]) -> None:
    """``axjax`` itself passes mypy --strict with its plugin, and pyright in strict mode."""
    errors = runs[checker].errors("axjax/")
    assert not errors, "\n".join(f"{d.file}:{d.line}: {d.message} [{d.code}]" for d in errors)


@pytest.mark.parametrize("checker", ["plugin", "pyright"])
def test_examples_are_clean(checker: str, runs: dict[str, runner.Run]) -> None:
    if "examples" not in runner.project_paths():
        pytest.skip("examples/ has no Python files yet")
    errors = runs[checker].errors("examples/")
    assert not errors, "\n".join(f"{d.file}:{d.line}: {d.message} [{d.code}]" for d in errors)


def test_checkers_are_the_pinned_versions() -> None:
    """The expectations hold for the versions pinned in the ``dev`` extra (see P8 in the
    research report: inference changes between versions)."""
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["dev"]
    pins = dict(p.split("==") for p in dev if "==" in p)
    for tool in ("mypy", "pyright"):
        out = subprocess.run([str(runner.BIN / tool), "--version"], capture_output=True,
                             text=True).stdout
        assert pins[tool] in out, f"{tool}: pinned {pins[tool]}, installed {out.strip()}"


def test_generated_overloads_are_current() -> None:
    p = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_overloads.py"), "--check"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


# ----------------------------------------------------------------------------- messages
def _statements(path: Path) -> list[ast.stmt]:
    return ast.parse(path.read_text()).body


def _runtime_errors(path: Path) -> dict[int, str]:
    """Run a case file statement by statement: {first line: message} of each ``AxisError``
    (or other ``TypeError``, e.g. a class that is not an axis label)."""
    sys.path.insert(0, str(runner.CASES))
    try:
        scope: dict[str, object] = {"__name__": "case"}
        out = {}
        for stmt in _statements(path):
            code = compile(ast.Module([stmt], []), str(path), "exec")
            try:
                with warnings.catch_warnings():  # e.g. a dtype=int a case passes on purpose
                    warnings.simplefilter("ignore")
                    exec(code, scope)
            except TypeError as e:  # AxisError is a TypeError
                out[stmt.lineno] = str(e)
            except Exception:  # noqa: BLE001 - a statement that needs an earlier failed one
                pass
        return out
    finally:
        sys.path.remove(str(runner.CASES))


@pytest.mark.parametrize("case", runner.case_files())
def test_plugin_messages_are_the_runtime_messages(case: str, runs: dict[str, runner.Run],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Run each case file statement by statement: a statement that raises at run time is
    rejected by the plugin too, in the same words (sizes dropped) when both name the same op
    (an error inside a user function is reported at its call instead); and the plugin
    rejects no statement that runs. Static and run-time checks agree."""
    path = ROOT / case
    runtime = _runtime_errors(path)
    capsys.readouterr()  # reveal_type prints at run time
    diags = [d for d in runs["plugin"].diags if d.file == case and d.severity == "error"]
    problems = []
    for stmt in _statements(path):
        if isinstance(stmt, ast.FunctionDef | ast.ClassDef):
            continue  # only their definitions run
        lines = range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1)
        said = [d for d in diags if d.line in lines]
        ours = [d.message for d in said if d.code == "axjax-axes"]
        where = f"{case}:{stmt.lineno}"
        if stmt.lineno in runtime:
            want = re.sub(r"=(\d+|\?)(?=[,\]])", "", runtime[stmt.lineno])
            if not said:
                problems.append(f"{where}: run time says {want!r}, the plugin nothing")
            elif want not in ours and any(m.split(" to ")[0] == want.split(" to ")[0]
                                          for m in ours):  # the same op, other words
                problems.append(f"{where}: run time says {want!r}, the plugin {ours}")
        elif ours:
            problems.append(f"{where}: the plugin says {ours}, but the statement runs")
    assert not problems, "\n".join(problems)
