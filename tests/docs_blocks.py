"""Extract and run the ```python blocks of README.md and docs/*.md (tests/test_docs_blocks.py).

The blocks of one page run in order in one namespace (a later block uses what an earlier one
defined), in a fresh process whose working directory is a temporary folder. A block is run
unless an HTML comment on the line just before its fence says otherwise; the comment is
invisible in the rendered page::

    <!-- docs-test: fragment (why it cannot run: a sketch with names the page leaves open) -->
    <!-- docs-test: raises AxisError -->   (runs, and must raise that class or a subclass;
                                            the statements after the one that raises do not run)

A fragment is only compiled (syntax checked), and it must give its reason. There is no hidden
set-up: a page's code runs exactly as a reader sees it, so the labels, keys and data a block
uses are defined by a visible block before it (each page opens with one). A hidden
``<!-- docs-test: setup ... -->`` block is an error, and so is a block that needs a name no
earlier visible block defines (the ``NameError`` of a fresh process).

Page-level comments, anywhere in the page::

    <!-- docs-test: data=mnist -->   (needs ../shared/data/mnist, or $AXJAX_TEST_DATA; the page
                                      is skipped, saying where, when the files are absent)
    <!-- docs-test: cwd=checkout -->  (the page tells the reader to run it in the checkout's
                                      root: it reads files of the repository, such as
                                      tests/models/fixtures. Every page runs there, and writes
                                      only to temporary or git-ignored folders)

An unknown ``docs-test`` comment is an error, so a misspelt marker never silences a block.

Run one page by hand: ``python -m tests.docs_blocks docs/nn.md`` (prints what ran);
``python -m tests.docs_blocks --count`` prints the run/total count of every page.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
import traceback
import types
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"

_FENCE = re.compile(r"^```(\w*)\s*$")
_MARK = re.compile(r"^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
_SETUP = re.compile(r"^\s*<!--\s*docs-test:\s*setup\b")
_FRAGMENT = re.compile(r"^fragment\s*\((.+)\)$")
_RAISES = re.compile(r"^raises\s+([A-Za-z_][\w.]*)$")
_DATA = re.compile(r"^data=([\w-]+)$")
_CWD = re.compile(r"^cwd=checkout$")


class DocsMarkError(ValueError):
    """A ``docs-test`` comment that is not one of the known forms."""


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the first line of code (after the fence)
    code: str
    kind: str = "run"  # "run" | "fragment" | "raises"
    reason: str = ""  # the fragment's reason, or the exception class a "raises" block expects

    @property
    def where(self) -> str:
        return f"{_rel(self.page)}:{self.line}"


@dataclass
class Page:
    path: Path
    blocks: list[Block] = field(default_factory=list)
    data: list[str] = field(default_factory=list)
    in_checkout: bool = False  # `cwd=checkout`: runs in the repository's root

    @property
    def counts(self) -> tuple[int, int]:
        """(blocks that run, all python blocks)."""
        return sum(b.kind != "fragment" for b in self.blocks), len(self.blocks)


def pages() -> list[Path]:
    """README.md and every docs/*.md: each page a user reads (a new page is covered)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def parse(path: Path) -> Page:
    """The page's python blocks with their markers; raises DocsMarkError on a bad marker."""
    lines = path.read_text().splitlines()
    page = Page(path)
    pending: str | None = None  # a block marker on the line before a fence
    i = 0
    while i < len(lines):
        if _SETUP.match(lines[i]):
            raise DocsMarkError(
                f"{_rel(path)}:{i + 1}: a hidden set-up block: a reader copying the page's "
                "code does not see it, so the blocks after it fail for them. Make it a "
                "visible ```python block (a page's set-up block, near its top)"
            )
        mark = _MARK.match(lines[i])
        if mark:
            text = mark.group(1)
            if m := _DATA.match(text):
                page.data.append(m.group(1))
            elif _CWD.match(text):
                page.in_checkout = True
            elif _FRAGMENT.match(text) or _RAISES.match(text):
                pending = text
            else:
                raise DocsMarkError(
                    f"{_rel(path)}:{i + 1}: unknown docs-test marker {text!r} (write "
                    "'fragment (reason)', 'raises ErrorClass', 'data=NAME' or 'cwd=checkout')"
                )
            i += 1
            continue
        fence = _FENCE.match(lines[i])
        if fence:
            end = i + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            if fence.group(1) == "python":
                block = Block(path, i + 2, "\n".join(lines[i + 1 : end]) + "\n")
                if pending is not None:
                    if m := _FRAGMENT.match(pending):
                        block.kind, block.reason = "fragment", m.group(1).strip()
                    elif m := _RAISES.match(pending):
                        block.kind, block.reason = "raises", m.group(1)
                page.blocks.append(block)
            elif pending is not None:
                raise DocsMarkError(
                    f"{_rel(path)}:{i}: the marker {pending!r} stands before a "
                    f"```{fence.group(1)} block, not a ```python one"
                )
            pending = None
            i = end + 1
            continue
        if pending is not None and lines[i].strip():
            raise DocsMarkError(
                f"{_rel(path)}:{i}: the marker {pending!r} must stand on the line just "
                "before a ```python fence"
            )
        i += 1
    return page


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _compiled(block: Block) -> object:
    # padded so that tracebacks and syntax errors give the line in the page
    return compile("\n" * (block.line - 1) + block.code, str(block.page), "exec")


def run_blocks(page: Page) -> list[str]:
    """Run (or compile) every block of ``page`` in order, in one namespace, in this process.

    The namespace is a fresh module installed as ``__main__`` while the blocks run, as a
    reader's script would be: classes defined in a block belong to ``__main__`` (which
    pickle, ``jax.export``'s axis labels and multiprocessing look up).

    Returns one line per block; raises AssertionError naming the block that failed.
    """
    script = types.ModuleType("__main__")
    namespace = script.__dict__
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = script
    try:
        return _run_in(page, namespace)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


#: ``print(<...>.axes)  # (A, B)``: a comment showing the axes a block prints
_PRINTED_AXES = re.compile(r"^\s*print\(.*\.axes\)\s*#\s*(\([^)]*\))", re.MULTILINE)


def check_printed_axes(block: Block, printed: str) -> None:
    """Each ``print(t.axes)  # (A, B)`` comment of ``block`` shows what the block printed
    (an axis tuple prints as its names): the comments and the output agree."""
    lines = printed.splitlines()
    for shown in _PRINTED_AXES.findall(block.code):
        if shown not in lines:
            raise AssertionError(
                f"{block.where}: a comment shows the axes {shown}, the block printed "
                f"{[line for line in lines if line.startswith('(')]}"
            )


def _chosen(block: Block) -> bool:
    """Whether a fragment runs here after all: its reason names the word in
    ``$AXJAX_DOCS_RUN_FRAGMENTS`` (``make onnx-check`` runs docs/tensors.md's ONNX block,
    and the blocks after it, where jax2onnx is installed)."""
    word = os.environ.get("AXJAX_DOCS_RUN_FRAGMENTS", "")
    return bool(word) and word in block.reason


def _run_in(page: Page, namespace: dict[str, object]) -> list[str]:
    done: list[str] = []
    for block in page.blocks:
        start = time.perf_counter()
        try:
            code = _compiled(block)
        except SyntaxError as e:
            raise AssertionError(f"{block.where}: the block does not compile: {e}") from None
        if block.kind == "fragment" and not _chosen(block):
            done.append(f"{block.where} fragment ({block.reason})")
            continue
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                exec(code, namespace)  # noqa: S102
        except BaseException as e:
            wanted = block.reason.split(".")[-1]
            if block.kind == "raises" and any(c.__name__ == wanted for c in type(e).__mro__):
                lines = [
                    f.lineno
                    for f in traceback.extract_tb(e.__traceback__)
                    if f.filename == str(block.page)
                ]
                at = f" at line {lines[-1]}" if lines else ""
                done.append(f"{block.where} raised {type(e).__name__}{at} as marked")
                continue
            tb = "".join(traceback.format_exception(e))
            raise AssertionError(
                f"{block.where}: the block raised {type(e).__name__}: {e}\n{tb}"
            ) from None
        finally:
            sys.stdout.write(printed.getvalue())
        if block.kind == "raises":
            raise AssertionError(
                f"{block.where}: the block is marked 'raises {block.reason}' but ran without "
                "an error"
            )
        check_printed_axes(block, printed.getvalue())
        done.append(f"{block.where} ran ({time.perf_counter() - start:.2f} s)")
    return done


def data_root() -> Path:
    env = os.environ.get("AXJAX_TEST_DATA")
    return Path(env) if env else SHARED_DATA


def missing_data(page: Page) -> str:
    """Why the page cannot run here (its data set is absent), or ``""``."""
    for name in page.data:
        if not (data_root() / name).is_dir():
            return (
                f"{_rel(page.path)} needs the {name} IDX files at {data_root() / name} "
                "(set AXJAX_TEST_DATA)"
            )
    return ""


def run_page_in_subprocess(path: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run one page's blocks in a fresh interpreter, in the checkout's root (as a reader
    does), with the page's data set up (``$AXJAX_DATA``). A page that needs several devices asks for
    them itself, as a reader would (docs/parallel.md). XLA compiles with little effort
    (``JAX_DISABLE_MOST_OPTIMIZATIONS``): the pages run small programs, mostly op by op, so
    compiling is their cost (docs/nn.md: 71 s of CPU, 41 s with it); no page reads compiled
    code or times anything."""
    page = parse(path)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["MPLBACKEND"] = "Agg"
    env.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
    if page.data:
        env["AXJAX_DATA"] = str(data_root())
    # every page in the checkout's root, where a reader runs it: a page that writes there
    # outside a temporary or git-ignored folder leaves the checkout unclean, which
    # tests/test_docs_blocks.py checks
    return subprocess.run(
        [sys.executable, "-m", "tests.docs_blocks", str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_pages_in_parallel(
    paths: list[Path], workers: int | None = None, timeout: float = 300
) -> dict[Path, Future[subprocess.CompletedProcess[str]]]:
    """Start every page of ``paths`` in its own fresh process, ``workers`` at a time (default:
    the CPU count, at least 2); ``{page: future}`` of :func:`run_page_in_subprocess`."""
    pool = ThreadPoolExecutor(max_workers=workers or max(2, os.cpu_count() or 1))
    futures = {p: pool.submit(run_page_in_subprocess, p, timeout) for p in paths}
    pool.shutdown(wait=False)
    return futures


def count() -> dict[str, tuple[int, int]]:
    """``{page: (run, total)}`` over every page."""
    return {_rel(p): parse(p).counts for p in pages()}


def main(argv: list[str]) -> int:
    if argv == ["--count"]:
        counts = count()
        for name, (run, total) in counts.items():
            print(f"{name}: {run}/{total}")
        run = sum(r for r, _ in counts.values())
        total = sum(t for _, t in counts.values())
        print(f"docs blocks: {run} run / {total} total ({total - run} marked fragments)")
        return 0
    for arg in argv:
        page = parse(Path(arg).resolve())
        for line in run_blocks(page):
            print(line)
        run, total = page.counts
        print(json.dumps({"page": _rel(page.path), "run": run, "total": total}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
