"""Escapes from the type checkers stay few and explained: every ``type: ignore`` in the
library (generated ``_gen_*.py`` files aside) names its error code and gives its reason on
its line, and there are at most ``LIMIT`` of them. JAX calls whose stubs are incomplete go
through ``axjax/core/_jax_typed.py``, which holds their one ignore each. Hand-written ``: Any``
annotations stay rare too: at most ``ANY_PER_1000_LINES`` per 1000 lines."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "axjax"
LIMIT = 40
#: ``# type: ignore[code, ...]  # why``
EXPLAINED = re.compile(r"#\s*type:\s*ignore\[[a-z-]+(?:,\s*[a-z-]+)*\]\s+#\s*\S")


def ignores(root: Path = ROOT) -> list[tuple[str, str]]:
    """``(where, line)`` for every ``type: ignore`` outside generated files."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name.startswith("_gen_"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if "type: ignore" in line:
                found.append((f"{path.relative_to(root.parent)}:{n}", line.strip()))
    return found


def unexplained(found: list[tuple[str, str]]) -> list[str]:
    return [where for where, line in found if not EXPLAINED.search(line)]


def test_every_ignore_names_its_code_and_reason() -> None:
    assert not unexplained(ignores()), unexplained(ignores())


def test_the_ignores_stay_few() -> None:
    assert len(ignores()) <= LIMIT, len(ignores())


def test_the_rules_catch_a_planted_ignore(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    planted = tmp_path / "pkg" / "mod.py"
    planted.write_text(
        "a: int = 'x'  # type: ignore[assignment]\n"
        "b: int = 'x'  # type: ignore\n"
        "c: int = 'x'  # type: ignore[assignment]  # a reason\n"
    )
    (tmp_path / "pkg" / "_gen_x.py").write_text("d: int = 'x'  # type: ignore\n")
    found = ignores(tmp_path / "pkg")
    assert [w for w, _ in found] == ["pkg/mod.py:1", "pkg/mod.py:2", "pkg/mod.py:3"]
    assert unexplained(found) == ["pkg/mod.py:1", "pkg/mod.py:2"]


#: ``: Any`` or ``-> Any`` written by hand (``Tensor[Any, ...]`` and ``dict[str, Any]`` are types
#: with an unknown part, not a whole escape, and do not match)
HAND_ANY = re.compile(r"(?::|->)\s*Any\b")
#: at most this many hand-written ``Any`` annotations per 1000 lines of the library
ANY_PER_1000_LINES = 10


def any_density(root: Path = ROOT) -> tuple[int, int]:
    """``(annotations, lines)``: hand-written ``: Any`` / ``-> Any`` outside generated files."""
    count = lines = 0
    for path in sorted(root.rglob("*.py")):
        if path.name.startswith("_gen_"):
            continue
        text = path.read_text().splitlines()
        lines += len(text)
        count += sum(len(HAND_ANY.findall(line)) for line in text)
    return count, lines


def test_any_annotations_stay_rare() -> None:
    count, lines = any_density()
    assert count * 1000 <= ANY_PER_1000_LINES * lines, f"{count} in {lines} lines"


def test_the_density_rule_counts_a_planted_any(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(
        "def f(x: Any, *a: Any) -> Any: ...\n"
        "y: Tensor[Any, Batch] = z\n"
        "w: dict[str, Any] = {}\n"
        "v: Any = 1\n"
    )
    (tmp_path / "pkg" / "_gen_x.py").write_text("u: Any = 1\n")
    assert any_density(tmp_path / "pkg") == (4, 4)
