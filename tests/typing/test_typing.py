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
def _ran_every_case() -> dict[str, tuple[runner.Ran, ...] | BaseException]:
    """Every case program run statement by statement, once per session (a case that cannot
    even start keeps its error for its test), eagerly, op by op, compiled with little effort
    as the whole suite is (tests/conftest.py)."""
    ran: dict[str, tuple[runner.Ran, ...] | BaseException] = {}
    for case in runner.case_files():
        try:
            ran[case] = tuple(runner.execute(ROOT / case))
        except Exception as error:  # reported by the case's own test
            ran[case] = error
    return ran


def _ran(case: str) -> tuple[runner.Ran, ...]:
    result = _ran_every_case()[case]
    if isinstance(result, BaseException):
        raise result
    return result


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


# ----------------------------------------------------------------------------- no silent Any
API_CASE = "tests/typing/cases/c18_api.py"

#: Public callables whose every result type is ``Any`` (or a Tensor of unknown dtype and
#: rank) on purpose, each with the reason no type is knowable in its signature. Any other
#: public callable that returns only ``Any`` fails :func:`test_no_public_callable_returns_any`.
KNOWN_ANY = {
    "ax.GraphGrad.__call__": "the gradients of the Params it names, in the structure the call asks",
    "ax.GraphStep.value": "the compiled loss's value; GraphStep is not generic in its loss",
    "ax.train.GraphStep.value": "as ax.GraphStep.value (the same class)",
    "ax.Op.forward": "a user op's forward: jax arrays, by the op",
    "ax.Tensor.item": "a Python scalar whose type depends on the run-time dtype (a union "
    "would reject range(t.item()))",
    "ax.sharding": "a pytree of NamedShardings shaped like its argument",
    "ax.train.Parallel.state_sharding": "a pytree of NamedShardings shaped like its argument",
    "ax.vmap": "typed at the call by the mypy plugin (the axis inserted into each parameter); "
    "PEP 646 cannot insert it",
    "ax.nn.ChildSumTreeLSTMCell.__call__": "the tree cell is not generic in its axes",
    "ax.nn.ChildSumTreeLSTMCell.init_state": "the tree cell is not generic in its axes",
    "ax.nn.ChildSumTreeLSTMCell.output": "the tree cell is not generic in its axes",
    "ax.nn.LSTMCell.output": "Recurrent's protocol: the part of a state a layer emits",
    "ax.nn.Conv.__call__": "the N-d convolution's axes are a run-time tuple",
    "ax.nn.GlobalAvgPool.__call__": "removes a run-time tuple of axes",
    "ax.nn.GlobalMaxPool.__call__": "removes a run-time tuple of axes",
    "ax.nn.Lambda.__call__": "any function's result",
    "ax.nn.Sequential.__call__": "typed at the call by the mypy plugin (each layer in turn)",
    "ax.nn.Stacked.__call__": "typed at the call by the mypy plugin (each layer in turn)",
    "ax.nn.dot_product_attention": "axes by the heads and positions the call names",
    "ax.nn.FusedAttention.__call__": "the op under dot_product_attention: axes by the call",
    "ax.train.SoftmaxCrossEntropy.__call__": "the op class; its typed entry is "
    "ax.train.softmax_cross_entropy (exact, generated overloads)",
    "ax.train.LinearCrossEntropy.__call__": "the op class; its typed entry is "
    "ax.train.linear_cross_entropy (the labels' axes, in F32)",
    "ax.nn.init.Initializer.__call__": "the axes and dtype the call names",
    "ax.nn.tree_fold": "a pytree of Tensors' structure is not a type",
    "ax.nn.tree_scan": "a pytree of Tensors' structure is not a type",
    "ax.train.make_eval_step": "a jitted function over the loss's arguments",
    "ax.train.make_train_step": "a jitted function over the loss's arguments",
}


def _is_method(name: str) -> bool:
    """``ax.nn.LSTMCell.init_state``: a method (its owner is a class)."""
    import inspect

    import axjax

    owner: object = axjax
    for part in name.split(".")[1:-1]:
        owner = getattr(owner, part)
    return inspect.isclass(owner)


def api_any(runs: dict[str, runner.Run]) -> dict[str, set[str]]:
    """``{callable: checkers}`` for each public callable of tests/typing/cases/c18_api.py
    whose every result type tells nothing (:func:`runner.tells_nothing`), as the plugin
    reveals it (methods and functions) and as pyright does (functions: pyright reveals a
    method through its unparametrised class, whose type variables read as ``Any``). The
    runner's plain mypy skips JAX and numpy, so their types are ``Any`` there: not judged."""
    names = {
        no: line[len("reveal_type(") : line.index(")")]
        for no, line in enumerate((ROOT / API_CASE).read_text().splitlines(), 1)
        if line.startswith("reveal_type(")
    }
    out: dict[str, set[str]] = {}
    for checker in ("plugin", "pyright"):
        for d in runs[checker].diags:
            name = names.get(d.line) if d.file == API_CASE else None
            revealed = runner._revealed([d]) if name else []
            if not name or not revealed:
                continue
            if checker == "pyright" and _is_method(name):
                continue
            results = [r for r in runner.result_types(revealed[-1]) if r != "Unknown"]
            if results and all(runner.tells_nothing(r) for r in results):
                out.setdefault(name, set()).add(checker)
    return out


def test_no_public_callable_returns_any(runs: dict[str, runner.Run]) -> None:
    """Issue 32, class 7: every public callable has a result type where one is knowable;
    those that cannot say are listed with their reason (and a listed one that now has a type
    must leave the list)."""
    found = api_any(runs)
    new = sorted(f"{n} ({', '.join(sorted(found[n]))})" for n in found.keys() - KNOWN_ANY.keys())
    stale = sorted(KNOWN_ANY.keys() - found.keys())
    assert not new, "public callables whose every result is Any: " + ", ".join(new)
    assert not stale, "typed now, remove from KNOWN_ANY: " + ", ".join(stale)


def test_the_api_case_reveals_every_public_callable() -> None:
    """c18_api.py is the generator's current list (test_generated_overloads_are_current
    checks the file), and it names callables: the result-type reader understands both
    checkers' spelling."""
    text = (ROOT / API_CASE).read_text()
    assert text.count("reveal_type(") > 250
    assert runner.result_types("Overload(def (x: A) -> B, def [T] (y: T) -> T)") == ["B", "T"]
    assert runner.result_types("(f: (...) -> Any) -> ((...) -> Any)") == ["((...) -> Any)"]
    assert runner.result_types("def (f: Any) -> def (*Any, **Any) -> Any") == [
        "def (*Any, **Any) -> Any"
    ]
    assert runner.result_types("def (self: X)") == ["None"]
    assert runner.tells_nothing("((...) -> Any)") and runner.tells_nothing("tuple[Any, Any]")
    assert not runner.tells_nothing("Tensor[F32, *tuple[Any, ...]]")


# ----------------------------------------------------------------------------- the class table
def test_the_docs_table_of_classes_is_measured(results: dict[str, runner.Outcome]) -> None:
    """docs/typing.md's table of which classes of mistakes each checker catches is this
    run's count (``python -m tests.typing.runner --classes`` prints it)."""
    table = runner.class_table(results)
    assert table.count("\n") >= 3, "no case file names its class (# typing-class: N title)"
    text = (ROOT / "docs" / "typing.md").read_text()
    assert table in text, "docs/typing.md's table of classes differs from the run:\n" + table


# ----------------------------------------------------------------------------- issue 32
LOSS_CASES = "tests/typing/cases/c16_losses.py"
#: the mistakes each pattern of tools/gen_overloads.py's LOSSES catches in every checker
LOSS_MISTAKES = {"class": 3, "class metric": 3, "same": 2, "labels": 2}


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
