"""Run mypy (with and without the axjax plugin) and pyright, and judge every marked line.

A case file in ``tests/typing/cases`` ends lines with an expectation comment (directives
separated by ``;``)::

    reveal_type(a @ b)  # want: Tensor[F32, A, C]      revealed type (implies no error)
    y = a + b           # want-error: same axes in a different order
    z = ax.sum(x, A)    # ok                           no error on this line
    v = ax.sum(x, D)    # miss: ...                    wrong, and this checker cannot tell
    u = f(x)            # limit: ...                   right, but this checker rejects it
    w = ...             # show                         record what each checker says

``want-error: text`` needs an error on the line; under mypy with the plugin its message must
also contain ``text``. ``miss`` (no error wanted) and ``limit`` (an error wanted) mark the
documented limits of a checker, counted apart so that they stay visible. A directive may
name its checkers: ``[mypy]`` (mypy alone), ``[plugin]`` (mypy with ``axjax.mypy``),
``[pyright]``, or several (``[mypy,pyright]``); checkers a line does not name get no verdict
there. An error on an unmarked line is a
failure of that checker. Run ``python -m tests.typing.runner`` for the full table.
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
KINDS = r"(?:want-error|want|ok|miss|limit|show)"
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
        out = [f"{m.file}:{m.line}: {m.code}\n    expected {_expect(m, self.checker)}; {d}"
               for m, s, d in self.rows if s == "FAIL"]
        out += [f"{d.file}:{d.line}: unexpected error: {d.message}" for d in self.unexpected]
        return out


# ----------------------------------------------------------------------------- parsing
def parse(path: Path) -> list[Marked]:
    """The marked lines of one case file."""
    rel = str(path.relative_to(ROOT))
    out = []
    for no, raw in enumerate(path.read_text().splitlines(), 1):
        code, sep, comment = raw.partition("  # ")
        if not sep or raw.lstrip().startswith("#"):
            continue
        directives = []
        for part in SEPARATOR.split(comment):
            m = DIRECTIVE.match(part.strip())
            if not m:
                directives = []
                break
            kind, qual, arg = m.group(1), m.group(2), (m.group(3) or "").strip()
            names = frozenset(qual.split(",")) if qual else frozenset(CHECKERS)
            unknown = names - set(CHECKERS)
            if unknown:
                raise ValueError(f"{rel}:{no}: unknown checker {sorted(unknown)}")
            directives.append(Directive(kind, arg, names))
        if directives:
            out.append(Marked(rel, no, code.strip(), directives))
    return out


def _expect(m: Marked, checker: str) -> str:
    parts = [d.kind + (f": {d.arg}" if d.arg else "") for d in m.directives
             if checker in d.checkers]
    return "; ".join(parts) or "nothing"


# ----------------------------------------------------------------------------- running
def _mypy(args: list[str], config: str, cache: str) -> Run:
    cmd = [str(BIN / "mypy"), "--config-file", config, "--cache-dir", cache, "--no-pretty",
           "--no-error-summary", "--hide-error-context", "--show-error-codes",
           "--show-column-numbers", *args]
    env = {**os.environ, "MYPYPATH": str(CASES)}
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    seconds = time.perf_counter() - t0
    rx = re.compile(r"^(.*?):(\d+):(?:\d+:)? (error|note|warning): (.*?)(?:  \[([a-z0-9-]+)\])?$")
    diags = [Diag(str(Path(m.group(1))), int(m.group(2)), m.group(3), m.group(4), m.group(5) or "")
             for m in map(rx.match, p.stdout.splitlines()) if m]
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
        return Run([Diag("?", 0, "error", "pyright did not run: " + (p.stdout + p.stderr)[-2000:])],
                   seconds, p.stdout + p.stderr)
    diags = [Diag(str(Path(d["file"]).relative_to(ROOT)), d["range"]["start"]["line"] + 1,
                  d["severity"], d["message"], d.get("rule", ""))
             for d in data.get("generalDiagnostics", [])]
    return Run(diags, seconds, p.stdout[-3000:] + p.stderr)


def case_files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in CASES.glob("*.py") if p.name != "axes.py")


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
                details.append(f"revealed {revs[-1] if revs else '(nothing)'}"
                               + (f"; error: {text}" if errs else ""))
        elif d.kind == "want-error":
            if not errs:
                status = "FAIL"
                details.append("no error (missed)")
            elif d.arg and checker == "plugin" and not any(d.arg in e.message for e in errs):
                status = "FAIL"
                details.append(f"wrong message: {text}")
            else:
                details.append(f"error: {text}")
        elif d.kind in ("ok", "miss"):
            if errs:
                status = "FAIL"
                details.append(f"false positive: {text}" if d.kind == "ok"
                               else f"now caught (update the line): {text}")
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
            lines_marked = {m.line for m in lines}
            out.rows += [(m, *judge(m, checker, here)) for m in lines]
            out.unexpected += [d for d in here if d.severity == "error"
                               and d.line not in lines_marked]
        result[checker] = out
    return result


def summary(runs: dict[str, Run], results: dict[str, Outcome]) -> str:
    rows = ["| checker | lines as expected / judged | known misses | known false errors | "
            "shown only | errors on unmarked lines | wall s |", "|---|---|---|---|---|---|---|"]
    for c in CHECKERS:
        o = results[c]
        ok = sum(1 for _, s, _ in o.judged if s == "PASS")
        kinds = [{d.kind for d in m.directives if c in d.checkers} for m, _, _ in o.judged]
        misses = sum(1 for k in kinds if "miss" in k)
        limits = sum(1 for k in kinds if "limit" in k)
        info = len(o.rows) - len(o.judged)
        rows.append(f"| {c} | {ok} / {len(o.judged)} | {misses} | {limits} | {info} | "
                    f"{len(o.unexpected)} | {runs[c].seconds:.1f} |")
    return "\n".join(rows)


def main() -> int:
    runs = run_all()
    results = outcomes(runs)
    for c in CHECKERS:
        print(f"\n## {c}")
        for m, status, detail in results[c].rows:
            print(f"{status:5} {m.file}:{m.line}: {m.code[:60]:60} {detail[:150]}")
        for d in results[c].unexpected:
            print(f"UNEXPECTED {d.file}:{d.line}: {d.message}")
    print()
    print(summary(runs, results))
    return 0 if all(not r.failures for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
