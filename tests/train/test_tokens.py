"""Token files on disk (``ax.train.TokenFile``, ``write_tokens``), their windows
(``TokenWindows``) and a ``fit`` over them resumed from its checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import numpy as np
import optax
import pytest

import axjax as ax
from axjax.train import DataError, Pos
from axjax.train._run_state import RunState


def test_a_bin_file_has_llm_cs_header_and_reads_back(tmp_path: Path) -> None:
    docs = [np.arange(40), np.array([7, 8, 9])]
    f = ax.train.write_tokens(tmp_path / "a.bin", docs, separator=0)
    want = np.concatenate([[0], np.arange(40), [0, 7, 8, 9]])
    raw = (tmp_path / "a.bin").read_bytes()
    header = np.frombuffer(raw[:1024], "<i4")
    assert header[:3].tolist() == [20240520, 1, len(want)] and not header[3:].any()
    assert np.frombuffer(raw[1024:], "<u2").tolist() == want.tolist()  # llm.c's layout
    assert isinstance(f.ids, np.memmap) and f.ids.tolist() == want.tolist() and len(f) == 45
    big = ax.train.write_tokens(tmp_path / "b.bin", [[1, 70_000]])  # past uint16: version 2
    assert np.frombuffer((tmp_path / "b.bin").read_bytes()[:12], "<i4")[1] == 2
    assert big.ids.dtype == np.uint32 and big.ids.tolist() == [1, 70_000]
    npy = ax.train.write_tokens(tmp_path / "c.npy", [[3, 4, 5]])
    assert npy.ids.tolist() == [3, 4, 5]
    (tmp_path / "raw.bin").write_bytes(np.arange(10, dtype="<u2").tobytes())  # nanoGPT's
    assert ax.train.TokenFile(tmp_path / "raw.bin", dtype="uint16").ids.tolist() == list(range(10))


def _bad(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_bad_token_files_are_data_errors_that_say_what_is_wrong(tmp_path: Path) -> None:
    good = (tmp_path / "g.bin", list(range(100)))
    ax.train.write_tokens(good[0], [good[1]])
    raw = good[0].read_bytes()
    cases: list[tuple[Path, dict[str, Any], str]] = [
        (_bad(tmp_path, "cut.bin", raw[:-7]), {}, r"is truncated: the header says 100 tokens"),
        (_bad(tmp_path, "more.bin", raw + b"\0\0"), {}, r"has more bytes than its header says"),
        (_bad(tmp_path, "head.bin", raw[:100]), {}, r"it ends inside its 1024-byte header"),
        (
            _bad(tmp_path, "v.bin", raw[:4] + (7).to_bytes(4, "little") + raw[8:]),
            {},
            r"the header's version is 7; token files have version 1",
        ),
        (_bad(tmp_path, "x.bin", b"hello world!"), {}, r"has no token-file header .* dtype="),
        (_bad(tmp_path, "odd.bin", b"abc"), {"dtype": "uint16"}, r"3 bytes is not a whole"),
        (good[0], {"dtype": "uint32"}, r"its header says the ids are uint16"),
        (tmp_path / "none.bin", {}, r"no such token file"),
    ]
    np.save(tmp_path / "two.npy", np.zeros((2, 2), np.int32))
    cases.append((tmp_path / "two.npy", {}, r"one dimension of integer ids, got .* \(2, 2\)"))
    for path, kwargs, text in cases:
        with pytest.raises(DataError, match=text):
            ax.train.TokenFile(path, **kwargs)


def test_the_vocabulary_scan_names_the_first_id_past_it(tmp_path: Path) -> None:
    ids = np.arange(100) % 50
    ids[73] = 61
    f = ax.train.write_tokens(tmp_path / "t.bin", [ids])
    f.check_vocab(62, chunk=16)
    with pytest.raises(DataError, match=r"id 61 at index 73 is past the vocabulary of 50"):
        f.check_vocab(50, chunk=16)  # found in the fifth chunk
    with pytest.raises(ValueError, match=r"id 70000 does not fit uint16.*dtype='uint32'"):
        ax.train.write_tokens(tmp_path / "u.bin", [[70_000]], dtype="uint16")
    for dtype in ("int32", "float32", ax.U32):  # storage dtypes by NumPy name only
        with pytest.raises(ValueError, match=r"write_tokens: dtype must be"):
            ax.train.write_tokens(tmp_path / "u.bin", [[7]], dtype=dtype)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"TokenFile: dtype must be one of uint16, uint32, int32"):
        ax.train.TokenFile(tmp_path / "t.bin", dtype="float32")


def test_an_epoch_is_every_non_overlapping_window_once(tmp_path: Path) -> None:
    ids = (np.arange(203) * 7) % 1000
    f = ax.train.write_tokens(tmp_path / "t.bin", [ids])
    w = ax.train.TokenWindows(f, 4, 10, key=jax.random.key(0))
    assert len(w) == 5  # 20 windows of 10 (+1 target) in 203 ids
    seen: list[int] = []
    for x, y in w.epoch(0):
        assert x.axes == (ax.train.Batch, Pos) and x.shape == (4, 10)
        xs, ys = np.asarray(x.array), np.asarray(y.array)
        for row_x, row_y in zip(xs, ys, strict=True):
            start = int(np.flatnonzero(ids == row_x[0])[0])
            np.testing.assert_array_equal(row_x, ids[start : start + 10])
            np.testing.assert_array_equal(row_y, ids[start + 1 : start + 11])  # next ids
            seen.append(start)
    assert sorted(seen) == list(range(0, 200, 10))
    again = [np.asarray(x.array) for x, _ in w.epoch(0)]
    other = [np.asarray(x.array) for x, _ in w.epoch(1)]
    assert all(
        (a == b).all() for a, b in zip(again, [np.asarray(x.array) for x, _ in w], strict=True)
    )
    assert any((a != b).any() for a, b in zip(again, other, strict=True))  # reshuffled
    plain = ax.train.TokenWindows(f, 4, 10)  # no key: file order
    assert np.asarray(next(iter(plain))[0].array)[:, 0].tolist() == ids[[0, 10, 20, 30]].tolist()
    rnd = ax.train.TokenWindows(f, 3, 10, key=jax.random.key(1), random=True, steps=7)
    assert len(rnd) == 7
    firsts = [np.asarray(b[0].array) for b in rnd.epoch(2)]
    assert [np.asarray(b[0].array).tolist() for b in rnd.epoch(2, 3)] == [
        a.tolist() for a in firsts[3:]
    ]
    with pytest.raises(ValueError, match=r"random windows are drawn from a key"):
        ax.train.TokenWindows(f, 3, 10, random=True)
    with pytest.raises(ValueError, match=r"make 1 windows of 150 .* fewer than a batch of 2"):
        ax.train.TokenWindows(f, 2, 150)


class _Vocab(ax.Axis): ...


class _Embed(ax.Axis): ...


class _Bigram(eqx.Module):
    table: ax.nn.Embedding[ax.F32, _Vocab, _Embed]

    def __call__(self, ids: Any) -> Any:
        return ax.contract(self.table(ids), self.table.weight, over=_Embed)


def _loss(model: _Bigram, ids: Any, targets: Any) -> Any:
    per = ax.train.softmax_cross_entropy(model(ids), targets, _Vocab)
    return ax.mean(ax.mean(per, Pos), ax.train.Batch)


def _fit(data: Any, folder: Path, epochs: int, resume: bool, steps: int | None = None) -> Any:
    model = _Bigram(ax.nn.Embedding(_Vocab, _Embed, 32, 8, key=jax.random.key(0)))
    return ax.train.fit(
        model,
        optax.adam(0.05),
        _loss,
        data,
        epochs=epochs,
        max_steps=steps,
        progress=False,
        checkpoints=ax.train.Checkpoints(folder, keep=1, every=3),
        resume=resume,
    )


def _resumed_equals_through(tmp_path: Path, data: Any) -> bool:
    """Train 2 epochs of 4 steps through; then a run stopped at step 3 (inside the first
    epoch, its checkpoint there) and resumed to the end: whether it ends as the first."""
    through = _fit(data, tmp_path / "through", 2, False)
    _fit(data, tmp_path / "cut", 2, False, steps=3)
    resumed = _fit(data, tmp_path / "cut", 2, True)
    a, b = jax.tree.leaves(through.model), jax.tree.leaves(resumed.model)
    same = all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b, strict=True))
    return through.step == 8 and resumed.step == 8 and same


@pytest.fixture(scope="module")
def windows(tmp_path_factory: pytest.TempPathFactory) -> ax.train.TokenWindows:
    path = tmp_path_factory.mktemp("tokens") / "t.bin"
    ids = np.random.default_rng(0).integers(0, 32, 400)
    return ax.train.TokenWindows(ax.train.write_tokens(path, [ids]), 4, 8, key=jax.random.key(3))


def test_a_resumed_fit_sees_the_batches_of_an_uninterrupted_one(
    tmp_path: Path, windows: ax.train.TokenWindows
) -> None:
    """Epochs of the windows' first 4 batches (each epoch its own order), resumed at step
    3 from the checkpoint's position (epoch 0, batch 3)."""
    assert _resumed_equals_through(tmp_path, _FirstBatches(windows, 4))


class _FirstBatches:
    """The first ``n`` batches of each of ``data``'s epochs (a short epoch for the test)."""

    def __init__(self, data: ax.train.TokenWindows, n: int) -> None:
        self.data, self.n = data, n

    def __len__(self) -> int:
        return self.n

    def epoch(self, epoch: int, start: int = 0) -> Any:
        return (b for _, b in zip(range(start, self.n), self.data.epoch(epoch, start)))


def test_without_the_saved_position_the_resumed_run_differs(
    tmp_path: Path, windows: ax.train.TokenWindows, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mutation the test above must catch: the checkpoint's data position dropped (the
    run resumes at its epoch's first batch)."""
    monkeypatch.setattr(RunState, "position", lambda self: (self.epoch, 0))
    assert not _resumed_equals_through(tmp_path, _FirstBatches(windows, 4))


def test_the_writer_encodes_texts_and_files_with_a_tokenizer(tmp_path: Path) -> None:
    from axjax.models import gpt2

    tok = gpt2.tokenizer(Path(__file__).resolve().parents[1] / "models" / "fixtures" / "gpt2")
    texts = ["Hello world, hello tokens.", "def f(x):\n    return x + 1\n"]
    (tmp_path / "b.py").write_text(texts[1])
    eos = tok.eos_ids[0]
    f = ax.train.write_tokens(
        tmp_path / "t.bin", [texts[0], tmp_path / "b.py"], tokenizer=tok, separator=eos
    )
    want: list[int] = []
    for text in texts:
        ids, n = tok.encode(text, batch=ax.train.Batch)
        want += [eos, *np.asarray(ids.array)[0, : int(n.array[0])].tolist()]
    assert f.ids.tolist() == want and f.ids.dtype == np.uint16
    with pytest.raises(TypeError, match=r"documents\[0\] must be a text \(str\) or a file"):
        ax.train.write_tokens(tmp_path / "u.bin", [[1, 2]], tokenizer=tok)
