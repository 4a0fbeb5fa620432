"""Every ```python block of README.md and docs/*.md runs (or is a fragment that says why).

Each page runs in a fresh process (tests/docs_blocks.py): exactly its visible blocks, in
order, in one namespace, ``raises`` blocks required to raise. A hidden set-up block is an
error, so every name a block uses is defined where a reader sees it. The pages run in
parallel processes, all started when the first page's test runs. The pages are found by
globbing, so a new page is covered. ``python -m tests.docs_blocks --count`` prints the
run/total count this test also prints.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import pytest

from tests import docs_blocks
from tests.docs_blocks import DocsMarkError, parse, run_blocks

PAGES = docs_blocks.pages()
#: Pages whose every python block a test of their own already runs in order, in one
#: namespace (and checks the printed output): not run twice.
OWN_TESTS = {
    "docs/graph.md": "tests/graph/test_graph_docs.py",
    "docs/custom-ops.md": "tests/core/test_custom_op_doc.py",
}


def own_test(page: Path) -> str | None:
    return OWN_TESTS.get(docs_blocks._rel(page))


def _status() -> str | None:
    """``git status --porcelain`` of the checkout (``None``: not a git checkout here)."""
    try:
        done = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=docs_blocks.ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


#: the checkout's status before the pages ran (they run in its root)
_BEFORE: dict[str, str | None] = {}


@pytest.fixture(scope="module")
def running() -> dict[Path, Future[subprocess.CompletedProcess[str]]]:
    """Every page that this module runs, started at once in parallel processes."""
    todo = [
        p
        for p in PAGES
        if parse(p).blocks and own_test(p) is None and not docs_blocks.missing_data(parse(p))
    ]
    _BEFORE["status"] = _status()
    return docs_blocks.run_pages_in_parallel(todo)


def test_the_pages_leave_the_checkout_clean(
    running: dict[Path, Future[subprocess.CompletedProcess[str]]],
) -> None:
    """Every page runs in the checkout's root, as a reader runs it; afterwards ``git
    status`` is what it was: a page writes only to temporary or git-ignored folders."""
    for future in running.values():
        future.result()
    before, after = _BEFORE.get("status"), _status()
    if before is None or after is None:
        pytest.skip("not a git checkout")
    new = sorted(set(after.splitlines()) - set(before.splitlines()))
    assert not new, f"the docs pages left files in the checkout: {new}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: docs_blocks._rel(p))
def test_the_blocks_of_the_page_run(
    page: Path, running: dict[Path, Future[subprocess.CompletedProcess[str]]]
) -> None:
    parsed = parse(page)
    if not parsed.blocks:
        return  # a page without python blocks (docs/ops.md) has nothing to run
    own = own_test(page)
    if own is not None:
        source = (docs_blocks.ROOT / own).read_text()
        assert page.name in source and "exec(compile(" in source
        assert all(b.kind in ("run", "fragment") for b in parsed.blocks), (
            f"{own} runs every block as code (and skips the marked fragments)"
        )
        pytest.skip(f"run block by block by {own}")
    why = docs_blocks.missing_data(parsed)
    if why:
        pytest.skip(why)
    done = running[page].result()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-8000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert (summary["run"], summary["total"]) == parsed.counts


def test_the_count_of_blocks_that_run(record_property: Callable[[str, object], None]) -> None:
    counts = docs_blocks.count()
    run = sum(r for r, _ in counts.values())
    total = sum(t for _, t in counts.values())
    fragments = [
        f"{b.where} ({b.reason})" for p in PAGES for b in parse(p).blocks if b.kind == "fragment"
    ]
    # printed at the end of the run (tests/conftest.py)
    listed = "; ".join(fragments)
    record_property("summary", f"docs blocks: {run} run / {total} total; fragments: {listed}")
    assert total >= 49 and run == total - len(fragments)
    assert all(b.reason for p in PAGES for b in parse(p).blocks if b.kind == "fragment")


# ----------------------------------------------------------------- the runner can fail


def write(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(text)
    return page


def test_a_broken_block_fails_the_page_and_names_its_line(tmp_path: Path) -> None:
    page = write(
        tmp_path,
        "# A page\n\n```python\nx = 1\n```\n\ntext\n\n```python\ny = x + undefined_name\n```\n",
    )
    done = docs_blocks.run_page_in_subprocess(page, timeout=120)
    assert done.returncode != 0
    assert "page.md:10: the block raised NameError: name 'undefined_name' is not defined" in (
        done.stderr
    )


def test_markers_are_checked(tmp_path: Path) -> None:
    # a later block sees an earlier one's names
    page = parse(write(tmp_path, "```python\nx = 41\n```\n```python\nassert x == 41\n```\n"))
    assert page.counts == (2, 2) and len(run_blocks(page)) == 2
    # a fragment is compiled, not run: a syntax error still fails
    fragment = "<!-- docs-test: fragment (a sketch) -->\n```python\nundefined()\n```\n"
    assert run_blocks(parse(write(tmp_path, fragment)))[0].endswith("fragment (a sketch)")
    bad_syntax = "<!-- docs-test: fragment (a sketch) -->\n```python\ndef f(:\n```\n"
    with pytest.raises(AssertionError, match="page.md:3: the block does not compile"):
        run_blocks(parse(write(tmp_path, bad_syntax)))
    # a block marked to raise must raise that class
    quiet = "<!-- docs-test: raises ValueError -->\n```python\nx = 1\n```\n"
    with pytest.raises(AssertionError, match="marked 'raises ValueError' but ran without"):
        run_blocks(parse(write(tmp_path, quiet)))
    other = "<!-- docs-test: raises ValueError -->\n```python\n{}['k']\n```\n"
    with pytest.raises(AssertionError, match="the block raised KeyError"):
        run_blocks(parse(write(tmp_path, other)))
    # a fragment needs its reason; an unknown or misplaced marker is an error
    for text, message in [
        ("<!-- docs-test: fragment -->\n```python\nx\n```\n", "unknown docs-test marker"),
        ("<!-- docs-test: fragmnet (typo) -->\n```python\nx\n```\n", "unknown docs-test marker"),
        ("<!-- docs-test: fragment (r) -->\n\ntext\n```python\nx\n```\n", "must stand on the"),
        ("<!-- docs-test: fragment (r) -->\n```sh\nls\n```\n", "not a ```python one"),
        ("<!-- docs-test: setup\nx = 1\n-->\n", "a hidden set-up block"),
        ("<!-- docs-test: setup x = 1 -->\n", "a hidden set-up block"),
    ]:
        with pytest.raises(DocsMarkError, match=message):
            parse(write(tmp_path, text))


def test_a_page_runs_only_its_visible_text(tmp_path: Path) -> None:
    """The issue's case: a page whose labels were defined in a hidden set-up comment. The
    comment is refused, and without it the block that uses the label fails by its name in a
    fresh process, as it does for a reader copying the visible code."""
    hidden = "<!-- docs-test: setup\nclass Height: ...\n-->\n"
    block = "```python\nh = Height\n```\n"
    with pytest.raises(DocsMarkError, match="page.md:1: a hidden set-up block"):
        parse(write(tmp_path, hidden + block))
    done = docs_blocks.run_page_in_subprocess(write(tmp_path, "# A page\n\n" + block), timeout=120)
    assert done.returncode != 0
    assert "page.md:4: the block raised NameError: name 'Height' is not defined" in done.stderr


def test_a_page_marked_cwd_checkout_runs_in_the_repository_root(tmp_path: Path) -> None:
    """``cwd=checkout``: the page reads the checkout's files by relative path (the fixtures of
    docs/pretrained.md). Every page runs there, as a reader runs it (and must leave it
    clean: test_the_pages_leave_the_checkout_clean)."""
    fixture = "tests/models/fixtures/gpt2/config.json"
    block = f"```python\nimport os\nassert os.path.isfile({fixture!r})\n```\n"
    marked = write(tmp_path, "<!-- docs-test: cwd=checkout -->\n# A page\n\n" + block)
    assert parse(marked).in_checkout
    assert docs_blocks.run_page_in_subprocess(marked, timeout=120).returncode == 0
    plain = docs_blocks.run_page_in_subprocess(write(tmp_path, "# A page\n\n" + block), 120)
    assert plain.returncode == 0, plain.stderr


def test_no_page_has_hidden_set_up() -> None:
    """Generated over every page: none holds a hidden block (the parser refuses them, and a
    raw search finds none the parser could miss)."""
    for page in PAGES:
        assert "docs-test: setup" not in page.read_text(), docs_blocks._rel(page)
        parse(page)


def test_printed_axes_are_checked_against_the_comments(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``print(t.axes)  # (A, B)`` comment must show what prints; the mutation (axis
    labels printed as classes again) makes the docs' comments fail."""
    import contextlib
    import io

    import axjax as ax
    from axjax.core import _axis

    class Seq(ax.Axis): ...

    class Head(ax.Axis): ...

    block = docs_blocks.Block(Path("docs/x.md"), 1, "print(t.axes)  # (Seq, Head)\n")

    def printed() -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            print((Seq, Head))
        return out.getvalue()

    docs_blocks.check_printed_axes(block, printed())
    monkeypatch.setattr(_axis._AxisLabel, "__repr__", type.__repr__)
    with pytest.raises(AssertionError, match=r"shows the axes \(Seq, Head\), the block printed"):
        docs_blocks.check_printed_axes(block, printed())


def test_a_page_that_writes_into_the_checkout_is_caught(tmp_path: Path) -> None:
    """The mutation of the clean check: a page writing a file where it runs (the checkout's
    root, as nn.md's ``save_safetensors(model, "model.safetensors")`` did) shows in ``git
    status``, which test_the_pages_leave_the_checkout_clean compares."""
    before = _status()
    if before is None:
        pytest.skip("not a git checkout")
    probe = docs_blocks.ROOT / "docs-clean-probe.txt"
    code = "open('docs-clean-probe.txt', 'w').close()"
    page = write(tmp_path, f"# A page\n\n```python\n{code}\n```\n")
    try:
        assert docs_blocks.run_page_in_subprocess(page, timeout=120).returncode == 0
        after = _status() or ""
        assert "?? docs-clean-probe.txt" in set(after.splitlines()) - set(before.splitlines())
    finally:
        probe.unlink(missing_ok=True)
