"""``benchmarks.gpt2``: every row of the GPT-2 124M benchmark at its quick size, from the
same weights, with the losses at steps 1 and 2 agreeing (the PyTorch row where torch is
installed), and the printing of each row as its rounds complete."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from benchmarks import gpt2


@pytest.fixture(scope="module")
def quick() -> tuple[Any, list[gpt2.Row], list[str]]:
    return gpt2.build_rows("quick", torch="eager", memory=False)


def test_the_presets_are_gpt2_small_at_its_vocabularies() -> None:
    for name, vocab in (("gpt2-124m", 50257), ("gpt2-124m-padded", 50304)):
        c = gpt2.PRESETS[name]
        assert (c.context, c.layers, c.heads, c.embed, c.mlp, c.vocab) == (
            1024,
            12,
            12,
            768,
            3072,
            vocab,
        )


def test_every_row_starts_from_the_same_weights_and_agrees(quick: Any) -> None:
    """Step 1 is near ln V for every row, and the rows agree at steps 1 and 2 (the update)."""
    _, rows, notes = quick
    names = [r.name for r in rows]
    assert names[:3] == ["jax (fused attention)", "axjax TrainStep", "axjax fit step"], names
    if importlib.util.find_spec("torch") is not None:
        assert "pytorch (eager)" in names
    else:
        assert notes == [
            "no pytorch row: torch is not installed (pip install torch; never an axjax dependency)"
        ]
    losses = gpt2.agree(rows)
    assert abs(losses[names[0]][0] - 10.8249) < 0.1  # ln 50257
    assert not gpt2.check_agreement(losses), losses
    # the check can fail: a row one update behind disagrees at step 2
    behind = dict(losses) | {names[1]: [losses[names[1]][0], losses[names[1]][0]]}
    assert gpt2.check_agreement(behind)


def test_each_row_is_reported_as_its_rounds_complete(quick: Any) -> None:
    _, rows, _ = quick
    seen: list[str] = []
    times = gpt2.time_rows(rows[:2], 2, 0.0, lambda r, s: seen.append(r.name))
    assert seen == [r.name for r in rows[:2]] and all(len(t) == 2 for t in times.values())
