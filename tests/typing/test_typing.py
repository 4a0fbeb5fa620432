"""Static typing, checked by the real checkers: every marked line of tests/typing/cases under
mypy, mypy with the axjax plugin and pyright; the package and the examples clean under the
project's strict configurations; the generated overloads current; and the plugin's messages
equal to the run-time ones, statement by statement.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import requires
from tests.typing import runner

ROOT = runner.ROOT


def _checkers() -> None:
    """mypy (the ``test`` extra) and pyright (``dev``), or skip (fail under CI)."""
    requires("mypy", program=True)
    requires("pyright", extra="dev", program=True)


@pytest.fixture(scope="module")
def runs() -> dict[str, runner.Run]:
    _checkers()
    return runner.run_all()


@pytest.fixture(scope="module")
def results(runs: dict[str, runner.Run]) -> dict[str, runner.Outcome]:
    return runner.outcomes(runs)


@pytest.mark.parametrize("checker", runner.CHECKERS)
def test_every_marked_line_as_expected(
    checker: str, runs: dict[str, runner.Run], results: dict[str, runner.Outcome]
) -> None:
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


@pytest.mark.parametrize(
    "comment",
    [
        "want_error: x",
        "wnat: Tensor[F32]",
        "ok[plugn]",
        "want",
        "runs",
        "raises[plugin]: TypeError",
        "todo",
    ],
)
def test_misspelt_directives_are_rejected(comment: str, tmp_path: Path) -> None:
    path = tmp_path / "case.py"
    path.write_text(f"x = 1  # {comment}\n")
    with pytest.raises(ValueError, match="case.py:1: "):
        runner.parse(path)


def test_directives_parse(tmp_path: Path) -> None:
    path = tmp_path / "case.py"
    path.write_text(
        "x = 1  # noqa: E741\n"
        "y = f(x)  # want-error[pyright]: not assignable; ok[mypy]; runs: why\n"
    )
    (m,) = runner.parse(path)
    assert [(d.kind, d.arg, sorted(d.checkers)) for d in m.directives] == [
        ("want-error", "not assignable", ["pyright"]),
        ("ok", "", ["mypy"]),
        ("runs", "why", []),
    ]


def test_plugin_options_are_read(tmp_path: Path) -> None:
    """``[tool.axjax-mypy]`` (pyproject.toml) and ``[axjax-mypy]`` (mypy.ini) are read;
    ``warn_untyped = true`` means every module, a list names module patterns."""
    requires("mypy")
    from axjax.mypy._options import read_options

    toml = tmp_path / "pyproject.toml"
    toml.write_text('[tool.axjax-mypy]\nwarn_untyped = true\nop_modules = ["pkg.ops"]\n')
    opts = read_options(str(toml))
    assert opts.warns("anything") and opts.op_modules == {"pkg.ops"}
    ini = tmp_path / "mypy.ini"
    ini.write_text("[mypy]\nstrict = True\n[axjax-mypy]\nwarn_untyped = pkg.model, pkg.train.*\n")
    opts = read_options(str(ini))
    assert opts.warns("pkg.train.loop") and not opts.warns("pkg.data") and not opts.op_modules
    assert not read_options(None).warn_untyped


def test_checkers_are_the_pinned_versions() -> None:
    """The expectations hold for the versions pinned in the ``test`` and ``dev`` extras (see
    P8 in the research report: inference changes between versions)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    pins = dict(p.split("==") for name in ("test", "dev") for p in extras[name] if "==" in p)
    _checkers()
    for tool in ("mypy", "pyright"):
        out = subprocess.run(
            [str(runner.BIN / tool), "--version"], capture_output=True, text=True
        ).stdout
        assert pins[tool] in out, f"{tool}: pinned {pins[tool]}, installed {out.strip()}"


def test_generated_overloads_are_current() -> None:
    requires("ruff", program=True)  # the generator formats what it writes
    p = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_overloads.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stdout + p.stderr


# ----------------------------------------------------------------------------- messages
def _statements(path: Path) -> list[ast.stmt]:
    return ast.parse(path.read_text()).body


@functools.cache
def _ran(case: str) -> tuple[runner.Ran, ...]:
    """The case program run statement by statement, once per session."""
    return tuple(runner.execute(ROOT / case))


def _runtime_errors(case: str) -> dict[int, str]:
    """{first line: message} of each statement that raised an ``AxisError`` (or another
    ``TypeError``, e.g. a class that is not an axis label)."""
    return {r.first: str(r.error) for r in _ran(case) if isinstance(r.error, TypeError)}


@pytest.mark.parametrize("case", runner.case_files())
def test_runtime_companion(case: str) -> None:
    """Every case program runs with real arrays: each wrong line raises ``ax.AxisError``
    (or what its ``raises:`` names, or runs when its mistake is in the types only), and
    every other statement runs."""
    verdicts = runner.runtime_verdicts(case, list(_ran(case)))
    failures = [f"{where}: {detail}" for where, status, detail in verdicts if status == "FAIL"]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("case", runner.case_files())
def test_plugin_messages_are_the_runtime_messages(case: str, runs: dict[str, runner.Run]) -> None:
    """Run each case file statement by statement: a statement that raises at run time is
    rejected by the plugin too, in the same words (sizes dropped) when both name the same op
    (an error inside a user function is reported at its call instead); and the plugin
    rejects no statement that runs. Static and run-time checks agree."""
    path = ROOT / case
    runtime = _runtime_errors(case)
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
            elif want not in ours and any(
                m.split(" to ")[0] == want.split(" to ")[0] for m in ours
            ):  # the same op, other words
                problems.append(f"{where}: run time says {want!r}, the plugin {ours}")
        elif ours:
            problems.append(f"{where}: the plugin says {ours}, but the statement runs")
    assert not problems, "\n".join(problems)


def test_plugin_notes_where_each_operand_was_typed(runs: dict[str, runner.Run]) -> None:
    """The static counterpart of axis provenance (docs/errors.md): after an axis error, a
    note per Tensor variable operand with its type and the line that typed it."""
    case = "tests/typing/cases/c13_origins.py"
    notes = {
        (d.line, d.message) for d in runs["plugin"].diags if d.file == case and d.severity == "note"
    }
    assert (18, '"wh" is "Tensor[F32, W, H]", typed at line 15') in notes
    assert (18, '"hw" is "Tensor[F32, H, W]", typed at line 16') in notes
    assert (19, '"hw" is "Tensor[F32, H, W]", typed at line 16') in notes
    assert not [n for n in notes if n[0] not in (18, 19)]  # only after an error


# ----------------------------------------------------------------------------- issue 32
LOSS_CASES = "tests/typing/cases/c16_losses.py"
#: the mistakes each pattern of tools/gen_overloads.py's LOSSES catches in every checker
LOSS_MISTAKES = {"class": 3, "class metric": 3, "same": 2}


def test_every_loss_and_metric_is_typed_and_cased() -> None:
    """Every loss and metric (the loss registry's functions and the public functions of the
    loss and metric modules) has a pattern in the generator, an exact static type, and in
    c16_losses.py a correct call and as many mistakes as its pattern has, each flagged by
    every checker."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gen_overloads
    finally:
        sys.path.remove(str(ROOT / "tools"))
    from axjax.mypy._plugin import LOSSES

    found = gen_overloads.loss_functions()
    assert {"softmax_cross_entropy", "binary_cross_entropy", "accuracy"} <= found.keys()
    marked = runner.parse(ROOT / LOSS_CASES)
    for name, module in found.items():
        pattern = gen_overloads.LOSSES.get(name)
        assert pattern is not None, f"{name} ({module}): no pattern in LOSSES"
        assert f"axjax.train._gen_losses.{name}" in LOSSES, f"{name}: not run by the plugin"
        calls = [m for m in marked if f"ax.train.{name}(" in m.code]
        revealed = [m for m in calls if any(d.kind == "want" for d in m.directives)]
        wrong = [
            m
            for m in calls
            if {c for d in m.directives if d.kind == "want-error" for c in d.checkers}
            == set(runner.CHECKERS)
        ]
        assert revealed, f"{name}: no correct call with its type in {LOSS_CASES}"
        assert len(wrong) >= LOSS_MISTAKES[pattern], (
            f"{name}: {len(wrong)} mistakes flagged by every checker in {LOSS_CASES}, "
            f"{LOSS_MISTAKES[pattern]} wanted"
        )


def test_a_plain_user_op_gets_a_note(runs: dict[str, runner.Run]) -> None:
    """A call of a plain ``ax.Op`` whose module is not in ``op_modules`` gets the plugin's
    note (once per class), naming the setting; ops on typed bases get none."""
    case = "tests/typing/cases/c16_user_ops.py"
    notes = [
        d
        for d in runs["plugin"].diags
        if d.file == case and d.severity == "note" and "ax.Op" in d.message
    ]
    assert [n.message.split(" ")[0] for n in notes] == ["Plain"], notes
    assert (
        'list its module "c16_user_ops" in op_modules under [tool.axjax-mypy]' in notes[0].message
    )


def test_every_collective_is_checked_by_the_plugin() -> None:
    """The plugin runs the collectives' rule on axes for each collective there is."""
    from axjax.mypy._plugin import COLLECTIVES
    from axjax.parallel import _collective

    assert COLLECTIVES == {f"{_collective.__name__}.{n}" for n in _collective.__all__}


def test_docs_annotate_no_bare_tensor() -> None:
    """A bare ``ax.Tensor`` annotation is ``Tensor[Any, *tuple[Any, ...]]`` spelt so that
    strict mypy rejects it (missing type arguments): the docs write ``ax.AnyTensor``."""
    bare = re.compile(r"(?::|->)\s*(?:ax\.)?Tensor\b(?!\[)")
    found = [
        f"{page.name}:{no}: {line.strip()}"
        for page in sorted((ROOT / "docs").glob("*.md"))
        for no, line in enumerate(page.read_text().splitlines(), 1)
        if bare.search(line)
    ]
    assert not found, "\n".join(found)
