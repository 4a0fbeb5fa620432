"""Run mypy (with and without the axjax plugin) and pyright, and judge every marked line;
then run every case program with real arrays (the run-time companion).

A case file in ``tests/typing/cases`` ends lines with an expectation comment (directives
separated by ``;``)::

    reveal_type(a @ b)  # want: Tensor[F32, A, C]      revealed type (implies no error)
    y = a + b           # want-error: same axes in a different order
    z = ax.sum(x, A)    # ok                           no error on this line
    v = ax.sum(x, D)    # miss: ...                    wrong, and this checker cannot tell
    u = f(x)            # limit: ...                   right, but this checker rejects it
    w = ...             # show                         record what each checker says
    s: T = t            # want-error; runs: ...        wrong for the types, yet it runs
    r = f(t)            # want-error; raises: TypeError   wrong, and fails with another error

``want-error: text`` needs an error on the line whose message contains ``text``: under mypy
with the plugin for an unqualified directive, under each checker it names otherwise
(``want-error[pyright]: not assignable``). ``miss`` (no error wanted) and ``limit`` (an error
wanted) mark the documented limits of a checker, counted apart so that they stay visible. A
directive may name its checkers: ``[mypy]`` (mypy alone), ``[plugin]`` (mypy with
``axjax.mypy``), ``[pyright]``, or several (``[mypy,pyright]``); checkers a line does not name
get no verdict there. An error on an unmarked line is a failure of that checker. A comment
that is not a list of directives is an error (a misspelt directive would silently mark
nothing), except ``noqa``, ``type: ignore`` and ``pyright: ignore`` comments.

**Run time.** Each case program also runs, top-level statement by statement, with real
arrays. A *wrong* line (``want-error`` or ``miss`` for any checker) must raise
``ax.AxisError`` when its statement runs, unless it says why not: ``runs: reason`` (the
mistake is in the types only, e.g. an annotation Python does not check) or ``raises: Name``
(it fails with that other exception). Every other statement must run without an exception;
lines inside a function or class body run only where the program calls them.

Run ``python -m tests.typing.runner`` for the full table.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CASES = HERE / "cases"
BIN = Path(sys.executable).parent
CHECKERS = ("mypy", "plugin", "pyright")
KINDS = r"(?:want-error|want|ok|miss|limit|show|runs|raises)"
#: directives about the run time, not about a checker
RUNTIME_KINDS = frozenset({"runs", "raises"})
#: trailing comments that are not directives
FOREIGN_COMMENT = re.compile(r"^(?:noqa\b|type:\s*ignore\b|pyright:\s*ignore\b)")
DIRECTIVE = re.compile(rf"^({KINDS})(?:\[([a-z,]+)\])?\s*(?::\s*(.*))?$")
SEPARATOR = re.compile(rf";\s*(?={KINDS}\b)")  # messages may contain ';' themselves


@dataclass
class Diag:
    file: str  # relative to the repository root
    line: int
    severity: str  # error, note, information, warning
    message: str
    code: str = ""


@dataclass
class Directive:
    kind: str
    arg: str
    checkers: frozenset[str]


@dataclass
class Marked:
    file: str
    line: int
    code: str
    directives: list[Directive]


@dataclass
class Run:
    """One checker's diagnostics and wall time."""

    diags: list[Diag]
    seconds: float
    output: str

    def errors(self, prefix: str) -> list[Diag]:
        return [d for d in self.diags if d.severity == "error" and d.file.startswith(prefix)]


@dataclass
class Outcome:
    """The verdict of one checker on every marked line, and its errors on unmarked lines."""

    checker: str
    rows: list[tuple[Marked, str, str]] = field(default_factory=list)  # (line, status, detail)
    unexpected: list[Diag] = field(default_factory=list)

    @property
    def judged(self) -> list[tuple[Marked, str, str]]:
        return [r for r in self.rows if r[1] != "INFO"]

    @property
    def failures(self) -> list[str]:
        out = [
            f"{m.file}:{m.line}: {m.code}\n    expected {_expect(m, self.checker)}; {d}"
            for m, s, d in self.rows
            if s == "FAIL"
        ]
        out += [f"{d.file}:{d.line}: unexpected error: {d.message}" for d in self.unexpected]
        return out


# ----------------------------------------------------------------------------- parsing
def parse(path: Path) -> list[Marked]:
    """The marked lines of one case file."""
    rel = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    out = []
    for no, raw in enumerate(path.read_text().splitlines(), 1):
        code, sep, comment = raw.partition("  # ")
        if not sep or raw.lstrip().startswith("#"):
            continue
        if FOREIGN_COMMENT.match(comment.strip()):
            continue
        directives = []
        for part in SEPARATOR.split(comment):
            m = DIRECTIVE.match(part.strip())
            if not m:
                raise ValueError(
                    f"{rel}:{no}: {part.strip()!r} is not a directive (one of "
                    "want, want-error, ok, miss, limit, show, runs, raises, "
                    "each optionally [mypy,plugin,pyright])"
                )
            kind, qual, arg = m.group(1), m.group(2), (m.group(3) or "").strip()
            if kind in RUNTIME_KINDS:
                if qual:
                    raise ValueError(
                        f"{rel}:{no}: {kind} is about the run time; it names no checker"
                    )
                if not arg:
                    raise ValueError(f"{rel}:{no}: {kind} needs a reason or an exception")
            names = frozenset(qual.split(",")) if qual else frozenset(CHECKERS)
            unknown = names - set(CHECKERS)
            if unknown:
                raise ValueError(f"{rel}:{no}: unknown checker {sorted(unknown)}")
            if kind == "want" and not arg:
                raise ValueError(f"{rel}:{no}: want needs a type (want: Tensor[F32, A])")
            directives.append(Directive(kind, arg, frozenset() if kind in RUNTIME_KINDS else names))
        if directives:
            out.append(Marked(rel, no, code.strip(), directives))
    return out


def _expect(m: Marked, checker: str) -> str:
    parts = [
        d.kind + (f": {d.arg}" if d.arg else "") for d in m.directives if checker in d.checkers
    ]
    return "; ".join(parts) or "nothing"


# ----------------------------------------------------------------------------- running
def _mypy(args: list[str], config: str, cache: str) -> Run:
    cmd = [
        str(BIN / "mypy"),
        "--config-file",
        config,
        "--cache-dir",
        cache,
        "--no-pretty",
        "--no-error-summary",
        "--hide-error-context",
        "--show-error-codes",
        "--show-column-numbers",
        *args,
    ]
    # the plugin imports the op modules a configuration lists (`op_modules`): here userops.py
    path = os.pathsep.join(p for p in (str(CASES), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "MYPYPATH": str(CASES), "PYTHONPATH": path}
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    seconds = time.perf_counter() - t0
    rx = re.compile(r"^(.*?):(\d+):(?:\d+:)? (error|note|warning): (.*?)(?:  \[([a-z0-9-]+)\])?$")
    diags = [
        Diag(str(Path(m.group(1))), int(m.group(2)), m.group(3), m.group(4), m.group(5) or "")
        for m in map(rx.match, p.stdout.splitlines())
        if m
    ]
    if p.returncode not in (0, 1):  # 2: mypy could not run (a configuration problem, a crash)
        diags.append(Diag("?", 0, "error", "mypy did not run: " + (p.stdout + p.stderr)[-2000:]))
    return Run(diags, seconds, p.stdout + p.stderr)


def _pyright(args: list[str]) -> Run:
    cmd = [str(BIN / "pyright"), "--outputjson", *args]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - t0
    try:
        data = json.loads(p.stdout)
    except json.JSONDecodeError:
        return Run(
            [Diag("?", 0, "error", "pyright did not run: " + (p.stdout + p.stderr)[-2000:])],
            seconds,
            p.stdout + p.stderr,
        )
    diags = [
        Diag(
            str(Path(d["file"]).relative_to(ROOT)),
            d["range"]["start"]["line"] + 1,
            d["severity"],
            d["message"],
            d.get("rule", ""),
        )
        for d in data.get("generalDiagnostics", [])
    ]
    return Run(diags, seconds, p.stdout[-3000:] + p.stderr)


def case_files() -> list[str]:
    """The case programs, ``cNN_*.py`` (``axes.py``, ``userops.py``: modules they import)."""
    return sorted(str(p.relative_to(ROOT)) for p in CASES.glob("c[0-9][0-9]_*.py"))


def project_paths() -> list[str]:
    """The package and the examples (when there are any)."""
    return ["axjax"] + (["examples"] if list((ROOT / "examples").rglob("*.py")) else [])


def run_all() -> dict[str, Run]:
    """The three checkers, side by side (they run concurrently).

    ``plugin`` is the project's own configuration (``[tool.mypy]`` in pyproject.toml) over
    the package, the examples and the cases; ``mypy`` the same without the plugin, over the
    cases only; ``pyright`` the project's ``[tool.pyright]`` over all three.
    """
    cases, project = case_files(), project_paths()
    jobs = {
        "plugin": lambda: _mypy([*project, *cases], "pyproject.toml", ".mypy_cache"),
        "mypy": lambda: _mypy(cases, str(HERE / "mypy-plain.ini"), ".mypy_cache/plain"),
        "pyright": lambda: _pyright([*project, *cases]),
    }
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        return {name: f.result() for name, f in futures.items()}


# ----------------------------------------------------------------------------- run time
@dataclass
class Ran:
    """One top-level statement of a case program, run: its lines and what it raised."""

    first: int
    last: int
    body: bool  # a def or class: its body runs only where the program calls it
    error: BaseException | None


def execute(path: Path) -> list[Ran]:
    """Run a case program top-level statement by statement, with real arrays.

    A statement that raises does not stop the program: the next one runs in the same scope
    (so a case never uses the result of a wrong line). ``reveal_type`` prints to stderr.
    """
    import ast
    import contextlib
    import io
    import warnings

    sys.path.insert(0, str(CASES))
    try:
        scope: dict[str, object] = {"__name__": "case"}
        out = []
        for stmt in ast.parse(path.read_text()).body:
            code = compile(ast.Module([stmt], []), str(path), "exec")
            error: BaseException | None = None
            try:
                with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
                    warnings.simplefilter("ignore")  # e.g. a dtype=int a case passes on purpose
                    exec(code, scope)
            except Exception as e:  # noqa: BLE001 - judged by runtime_verdicts
                error = e
            out.append(
                Ran(
                    stmt.lineno,
                    stmt.end_lineno or stmt.lineno,
                    isinstance(stmt, ast.FunctionDef | ast.ClassDef),
                    error,
                )
            )
        return out
    finally:
        sys.path.remove(str(CASES))


def is_wrong(m: Marked) -> bool:
    """A line with a mistake: some checker must (``want-error``) or cannot (``miss``) see it."""
    return any(d.kind in ("want-error", "miss") for d in m.directives)


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def runtime_verdicts(case: str, ran: list[Ran]) -> list[tuple[str, str, str]]:
    """``(where, status, detail)`` for every statement of a case program run by
    :func:`execute`: ``PASS``, ``FAIL``, or ``INFO`` for a wrong line inside a body (it runs
    only where called)."""
    from axjax import AxisError

    marks = {m.line: m for m in parse(ROOT / case)}
    out = []
    for r in ran:
        inside = [m for line, m in marks.items() if r.first <= line <= r.last]
        wrong = [m for m in inside if is_wrong(m)]
        runs = [d.arg for m in inside for d in m.directives if d.kind == "runs"]
        raises = [d.arg for m in inside for d in m.directives if d.kind == "raises"]
        where = f"{case}:{r.first}"
        got = "runs" if r.error is None else _error_text(r.error)
        if r.body:
            if r.error is not None:
                out.append((where, "FAIL", f"the definition fails: {got}"))
            out += [
                (f"{case}:{m.line}", "INFO", "inside a body: runs where it is called")
                for m in wrong
            ]
            continue
        if wrong and runs:
            ok = r.error is None
            out.append(
                (where, "PASS" if ok else "FAIL", f"wrong for the types only ({runs[0]}): {got}")
            )
        elif wrong and raises:
            ok = r.error is not None and type(r.error).__name__ in raises
            out.append((where, "PASS" if ok else "FAIL", f"expected {raises[0]}: {got}"))
        elif wrong:
            ok = isinstance(r.error, AxisError)
            out.append((where, "PASS" if ok else "FAIL", f"expected AxisError: {got}"))
        else:
            out.append((where, "PASS" if r.error is None else "FAIL", got))
    return out


# ----------------------------------------------------------------------------- judging
_PREFIX = re.compile(r"\b(?:[A-Za-z_][A-Za-z0-9_]*\.)+(?=[A-Za-z_])")


def normalize(t: str) -> str:
    """A revealed type without module prefixes or pyright's ``@scope`` suffixes."""
    t = _PREFIX.sub("", t)
    t = re.sub(r"@[A-Za-z_][A-Za-z0-9_]*", "", t)
    t = re.sub(r"\bUnpack\[([^\[\]]*(?:\[[^\[\]]*\])?)\]", r"*\1", t)
    return t.strip()


def _revealed(diags: Iterable[Diag]) -> list[str]:
    out = []
    for d in diags:
        m = re.match(r'^Revealed type is "(.*)"$', d.message)
        if m is None and d.severity == "information":
            m = re.match(r'^Type of ".*" is "(.*)"$', d.message, re.S)
        if m:
            out.append(normalize(m.group(1)))
    return out


# ----------------------------------------------------------------------------- result types
def _top_level(text: str, sep: str) -> list[str]:
    """``text`` split at each ``sep`` outside brackets and parentheses."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def result_types(revealed: str) -> list[str]:
    """The result type of each signature in a revealed callable type: mypy's ``def [T] (x:
    T) -> T`` and ``Overload(def ..., def ...)``, pyright's ``(x: T) -> T`` and
    ``Overload[(...) -> ..., ...]``. Empty when ``revealed`` is not a callable's type."""
    text = revealed.strip()
    for head, tail in (("Overload(", ")"), ("Overload[", "]")):
        if text.startswith(head) and text.endswith(tail):
            return [r for item in _top_level(text[len(head) : -1], ",") for r in result_types(item)]
    parts = _top_level(text, "->")
    if len(parts) >= 2:
        return [" -> ".join(parts[1:]).strip()]
    return ["None"] if text.startswith("def ") else []  # mypy leaves out "-> None"


#: a result that tells nothing: ``Any`` (pyright: ``Unknown``), a Tensor of unknown dtype
#: and rank, and a callable or a tuple of nothing else
NOTHING = frozenset({"Any", "Unknown", "Tensor[Any, *tuple[Any, ...]]", "Tensor[Any, Unknown]"})


def tells_nothing(result: str) -> bool:
    """Whether a result type is ``Any`` in effect (see :data:`NOTHING`)."""
    r = normalize(result).strip()
    if r.startswith("(") and r.endswith(")") and len(_top_level(r[1:-1], ",")) == 1:
        r = r[1:-1].strip()  # pyright's parenthesised callable result
    if r in NOTHING:
        return True
    if r.startswith("tuple[") and r.endswith("]"):
        items = [i for i in _top_level(r[6:-1], ",") if i != "..."]
        return bool(items) and all(tells_nothing(i) for i in items)
    if r.startswith("Callable[") and r.endswith("]"):
        return tells_nothing(_top_level(r[9:-1], ",")[-1])
    inner = result_types(r)
    return bool(inner) and all(tells_nothing(i) for i in inner)


def judge(m: Marked, checker: str, diags: list[Diag]) -> tuple[str, str]:
    """``PASS``/``FAIL``/``INFO`` and a detail, for one marked line and one checker."""
    here = [d for d in diags if d.line == m.line]
    errs = [d for d in here if d.severity == "error"]
    revs = _revealed(here)
    text = " | ".join(e.message.splitlines()[0] for e in errs)
    dirs = [d for d in m.directives if checker in d.checkers]
    if all(d.kind == "show" for d in dirs):
        shown = ([f"reveals {revs[-1]}"] if revs else []) + ([f"error: {text}"] if errs else [])
        return "INFO", "; ".join(shown) or "no error"
    allows_error = any(d.kind in ("want-error", "limit") for d in dirs)
    status, details = "PASS", []
    for d in dirs:
        if d.kind == "want":
            if revs and revs[-1] == d.arg and (allows_error or not errs):
                details.append(f"reveals {revs[-1]}")
            else:
                status = "FAIL"
                details.append(
                    f"revealed {revs[-1] if revs else '(nothing)'}"
                    + (f"; error: {text}" if errs else "")
                )
        elif d.kind == "want-error":
            if not errs:
                status = "FAIL"
                details.append("no error (missed)")
            elif (
                d.arg
                and (checker == "plugin" or d.checkers != frozenset(CHECKERS))
                and not any(d.arg in e.message for e in errs)
            ):
                status = "FAIL"
                details.append(f"wrong message: {text}")
            else:
                details.append(f"error: {text}")
        elif d.kind in ("ok", "miss"):
            if errs:
                status = "FAIL"
                details.append(
                    f"false positive: {text}"
                    if d.kind == "ok"
                    else f"now caught (update the line): {text}"
                )
            else:
                details.append("no error" if d.kind == "ok" else "known miss")
        elif d.kind == "limit":
            if errs:
                details.append(f"known false error: {text}")
            else:
                status = "FAIL"
                details.append("no longer rejected (update the line)")
    return status, "; ".join(details)


def outcomes(runs: dict[str, Run]) -> dict[str, Outcome]:
    """Every checker's verdict on every marked line of every case file."""
    marked = {f: parse(ROOT / f) for f in case_files()}
    result = {}
    for checker in CHECKERS:
        out = Outcome(checker)
        diags = runs[checker].diags
        out.unexpected += [d for d in diags if d.file == "?"]  # the checker did not run
        for f, lines in marked.items():
            here = [d for d in diags if d.file == f]
            lines = [m for m in lines if any(checker in d.checkers for d in m.directives)]
            lines_marked = {m.line for m in lines}
            out.rows += [(m, *judge(m, checker, here)) for m in lines]
            out.unexpected += [
                d for d in here if d.severity == "error" and d.line not in lines_marked
            ]
        result[checker] = out
    return result


def summary(runs: dict[str, Run], results: dict[str, Outcome]) -> str:
    rows = [
        "| checker | lines as expected / judged | wrong lines caught | known misses | "
        "known false errors | shown only | errors on unmarked lines | wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in CHECKERS:
        o = results[c]
        ok = sum(1 for _, s, _ in o.judged if s == "PASS")
        kinds = [({d.kind for d in m.directives if c in d.checkers}, s) for m, s, _ in o.judged]
        misses = sum(1 for k, _ in kinds if "miss" in k)
        limits = sum(1 for k, _ in kinds if "limit" in k)
        caught = sum(1 for k, s in kinds if "want-error" in k and s == "PASS")
        wrong = sum(1 for k, _ in kinds if k & {"want-error", "miss"})
        info = len(o.rows) - len(o.judged)
        rows.append(
            f"| {c} | {ok} / {len(o.judged)} | {caught} / {wrong} | {misses} | {limits} | "
            f"{info} | {len(o.unexpected)} | {runs[c].seconds:.1f} |"
        )
    return "\n".join(rows)


#: ``# typing-class: 4 stacked layers and policy casts`` on a line of its own assigns a case
#: file to a class of mistakes (issue 32's classes); docs/typing.md's table is per class
CLASS_TAG = re.compile(r"^# typing-class: (\d+) (.+)$", re.M)


def case_classes() -> dict[tuple[int, str], list[str]]:
    """``{(number, title): case files}`` from the files' ``# typing-class:`` lines."""
    out: dict[tuple[int, str], list[str]] = {}
    for f in case_files():
        for m in CLASS_TAG.finditer((ROOT / f).read_text()):
            out.setdefault((int(m.group(1)), m.group(2).strip()), []).append(f)
    return dict(sorted(out.items()))


def class_table(results: dict[str, Outcome]) -> str:
    """Per class of mistakes and checker: wrong lines caught / wrong lines, and false errors
    (``limit`` lines, errors on unmarked lines); how many of the class only the plugin
    catches (pyright has no plugins: what it misses and the plugin catches needs it)."""
    rows = [
        "| class | mypy + `axjax.mypy` | mypy | pyright | caught only with the plugin |",
        "|---|---|---|---|---|",
    ]
    for (number, title), files in case_classes().items():
        cells, caught = [], {}
        for c in ("plugin", "mypy", "pyright"):
            o = results[c]
            judged = [(m, st) for m, st, _ in o.judged if m.file in files]
            kinds = [({d.kind for d in m.directives if c in d.checkers}, st) for m, st in judged]
            wrong = sum(1 for k, _ in kinds if k & {"want-error", "miss"})
            caught[c] = sum(1 for k, st in kinds if "want-error" in k and st == "PASS")
            false = sum(1 for k, _ in kinds if "limit" in k)
            false += sum(1 for d in o.unexpected if d.file in files)
            cells.append(f"{caught[c]} / {wrong}" + (f", {false} false" if false else ""))
        only = caught["plugin"] - caught["pyright"]
        rows.append(f"| {number}. {title} | " + " | ".join(cells) + f" | {only or 'none'} |")
    return "\n".join(rows)


def runtime_summary(verdicts: dict[str, list[tuple[str, str, str]]]) -> str:
    """The run-time companion's table: wrong lines raising AxisError, statements running."""
    rows = [r for rs in verdicts.values() for r in rs]
    wrong = [r for r in rows if r[2].startswith("expected AxisError")]
    other = [
        r for r in rows if r[2].startswith(("expected ", "wrong for the types")) and r not in wrong
    ]
    correct = [r for r in rows if r[1] != "INFO" and r not in wrong and r not in other]
    bodies = [r for r in rows if r[1] == "INFO"]
    return (
        "| run time | wrong lines raising AxisError | wrong lines marked runs/raises | "
        "correct statements running | wrong lines in bodies (not run) |\n"
        "|---|---|---|---|---|\n"
        f"| | {sum(r[1] == 'PASS' for r in wrong)} / {len(wrong)} | "
        f"{sum(r[1] == 'PASS' for r in other)} / {len(other)} | "
        f"{sum(r[1] == 'PASS' for r in correct)} / {len(correct)} | {len(bodies)} |"
    )


def main() -> int:
    runs = run_all()
    results = outcomes(runs)
    if "--classes" in sys.argv:  # docs/typing.md's table of classes
        print(class_table(results))
        return 0
    for c in CHECKERS:
        print(f"\n## {c}")
        for m, status, detail in results[c].rows:
            print(f"{status:5} {m.file}:{m.line}: {m.code[:60]:60} {detail[:150]}")
        for d in results[c].unexpected:
            print(f"UNEXPECTED {d.file}:{d.line}: {d.message}")
    print("\n## run time")
    verdicts = {c: runtime_verdicts(c, execute(ROOT / c)) for c in case_files()}
    for rows in verdicts.values():
        for where, status, detail in rows:
            if status != "PASS" or "AxisError" in detail:
                print(f"{status:5} {where}: {detail[:150]}")
    print()
    print(summary(runs, results))
    print()
    print(class_table(results))
    print()
    print(runtime_summary(verdicts))
    failed = any(s == "FAIL" for rows in verdicts.values() for _, s, _ in rows)
    return 0 if all(not r.failures for r in results.values()) and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
