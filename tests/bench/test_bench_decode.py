"""``python -m benchmarks.decode --gpt2`` runs (on a 2-layer GPT-2 here: the figures are
BENCHMARKS.md's, the test only that every row of the table is produced)."""

from __future__ import annotations

from axjax.models import gpt2
from benchmarks.decode import bench_gpt2, gpt2_markdown


def test_the_gpt2_decoding_table_has_every_form_and_batch() -> None:
    config = gpt2.GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=2, n_head=2)
    rows = bench_gpt2(config, batches=(2,), prompt=4, steps=2, rounds=1)
    assert [(r["form"], r["batch"], r["ragged"]) for r in rows] == [
        ("unrolled", 2, False), ("unrolled", 2, True), ("stacked", 2, False), ("stacked", 2, True),
    ]  # fmt: skip
    assert all(r["tok_s"] > 0 for r in rows)
    assert gpt2_markdown(rows).count("\n") == 5 and "2 (ragged)" in gpt2_markdown(rows)
