"""Saving checkpoints with bad input: non-JSON metadata, bad steps and unwritable paths raise
CheckpointError before anything is written, and an existing checkpoint stays intact."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from axjax.train import CheckpointError, Checkpoints, load_checkpoint, save_checkpoint

TREE = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "n": 3}


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def existing(tmp_path: Path) -> tuple[Path, bytes]:
    """A good checkpoint at tmp_path/ckpt.npz, and its bytes."""
    path = save_checkpoint(tmp_path / "ckpt.npz", TREE, step=1, metadata={"epoch": 1})
    return path, path.read_bytes()


def _intact(path: Path, data: bytes) -> None:
    assert path.read_bytes() == data
    assert _files(path.parent) == [path.name]  # no temporary file either
    tree, manifest = load_checkpoint(path, like=TREE)
    assert manifest["step"] == 1 and manifest["metadata"] == {"epoch": 1}
    np.testing.assert_array_equal(tree["w"], TREE["w"])


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        ({"f": object()}, r"metadata\['f'\] is a builtins.object, not JSON"),
        (
            {"w": np.zeros((2, 3))},
            r"metadata\['w'\] is an array \(float64\[2, 3\]\); store arrays "
            r"in the tree, or pass .tolist\(\)",
        ),
        ({"loss": jnp.float32(0.5)}, r"metadata\['loss'\] is an array \(float32\[\]\)"),
        (
            {"lr": np.float32(0.1)},
            r"metadata\['lr'\] is a numpy float32; pass .item\(\) "
            r"\(or int\(\)/float\(\)\)",
        ),
        (
            {"runs": [1, {"when": {1, 2}}]},
            r"metadata\['runs'\]\[1\]\['when'\] is a builtins.set, "
            "not JSON",
        ),
        (
            {"by_epoch": {1: 0.5}},
            r"metadata\['by_epoch'\] has the key 1 \(int\); JSON keys are "
            "strings, so use '1'",
        ),
        ([("epoch", 1)], r"metadata is a list, not a dict"),
    ],
)
def test_non_json_metadata_is_refused_and_nothing_is_written(existing, metadata, problem):
    path, data = existing
    where = re.escape(str(path))
    with pytest.raises(
        CheckpointError,
        match=rf"^cannot save a checkpoint to {where}"
        rf": {problem}.*\. metadata must be JSON: a dict with str keys whose "
        r"values are str, int, float, bool, None, lists or dicts of these\. "
        r"Nothing was written\.$",
    ):
        save_checkpoint(path, TREE, step=2, metadata=metadata)
    _intact(path, data)


def test_self_containing_metadata_is_refused(existing):
    path, data = existing
    loop: dict[str, object] = {}
    loop["me"] = loop
    with pytest.raises(CheckpointError, match=r"metadata\['me'\] contains itself"):
        save_checkpoint(path, TREE, metadata=loop)
    _intact(path, data)


def test_json_metadata_still_round_trips(tmp_path):
    meta = {
        "epoch": 2,
        "loss": np.float64(0.25),
        "best": float("inf"),
        "tags": ("a", "b"),
        "nested": {"ok": True, "none": None},
    }
    path = save_checkpoint(tmp_path / "c.npz", TREE, step=np.int64(5), metadata=meta)
    _, manifest = load_checkpoint(path, like=TREE)
    assert manifest["step"] == 5
    assert manifest["metadata"] == {**meta, "tags": ["a", "b"]}


@pytest.mark.parametrize("step", [1.5, "3", None, np.ones(2, np.int32), True])
def test_a_step_that_is_not_an_integer_is_refused(existing, step):
    path, data = existing
    with pytest.raises(CheckpointError, match=r"^step must be an integer, got "):
        save_checkpoint(path, TREE, step=step)
    _intact(path, data)


def test_a_parent_that_is_a_file_is_refused(tmp_path):
    blocker = tmp_path / "runs"
    blocker.write_text("a file where the folder should be")
    for target in (blocker / "ckpt.npz", blocker / "deeper" / "ckpt.npz"):
        with pytest.raises(
            CheckpointError,
            match=rf"^cannot save a checkpoint to "
            rf"{re.escape(str(target))}: {re.escape(str(blocker))} is a file, not "
            "a folder; choose another folder or move that file away$",
        ):
            save_checkpoint(target, TREE)
    assert blocker.read_text() == "a file where the folder should be"
    assert _files(tmp_path) == ["runs"]


def test_a_path_that_is_a_folder_is_refused(tmp_path):
    (tmp_path / "ckpt.npz").mkdir()
    with pytest.raises(
        CheckpointError,
        match=r"ckpt.npz: it is a folder; give a file name "
        r"such as ckpt.npz inside it$",
    ):
        save_checkpoint(tmp_path / "ckpt.npz", TREE)
    assert _files(tmp_path) == ["ckpt.npz"] and _files(tmp_path / "ckpt.npz") == []
    with pytest.raises(CheckpointError, match=r"ckpt.npz is a folder, not a checkpoint file"):
        load_checkpoint(tmp_path / "ckpt.npz", like=TREE)


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="root ignores permission bits, so a read-only "
    "folder is still writable; test_a_failing_write_* covers the error path",
)
def test_a_read_only_folder_is_refused(existing):
    path, data = existing
    path.parent.chmod(0o555)
    try:
        with pytest.raises(
            CheckpointError,
            match=r"the folder .* is not writable; choose a "
            "writable folder or fix its permissions",
        ):
            save_checkpoint(path, TREE, step=2)
    finally:
        path.parent.chmod(0o755)
    _intact(path, data)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EACCES, errno.EROFS])
def test_a_failing_write_keeps_the_old_checkpoint(existing, monkeypatch, code):
    """The disk fills up (or permission is denied) in the middle of the write."""
    path, data = existing

    def failing_fsync(fd: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(
        CheckpointError,
        match=rf"^cannot save a checkpoint to "
        rf"{re.escape(str(path))}: writing .*\.ckpt\.npz\.tmp-\d+ failed "
        rf"\({re.escape(os.strerror(code))}\); free some space or choose another "
        r"folder\. The previous file under that name, if any, is unchanged\.$",
    ):
        save_checkpoint(path, {"w": np.ones((2, 3), np.float32), "n": 4}, step=2)
    monkeypatch.undo()
    _intact(path, data)


def test_checkpoints_manager_reports_the_same_errors(tmp_path):
    (tmp_path / "ckpt").write_text("not a folder")
    ckpts = Checkpoints(tmp_path / "ckpt", keep=2)
    with pytest.raises(CheckpointError, match=r"ckpt is a file, not a folder"):
        ckpts.save(1, TREE)
    with pytest.raises(
        CheckpointError,
        match=r"cannot restore from .*ckpt: it is a file, not a "
        "folder of checkpoints",
    ):
        ckpts.restore(like=TREE)
    good = Checkpoints(tmp_path / "good", keep=2)
    good.save(1, TREE, {"epoch": 1})
    before = (tmp_path / "good" / "ckpt-000000001.npz").read_bytes()
    with pytest.raises(CheckpointError, match=r"metadata\['epoch'\] is a numpy int64"):
        good.save(2, TREE, {"epoch": np.int64(2)})
    with pytest.raises(CheckpointError, match=r"step must be a non-negative integer, got -1"):
        good.save(-1, TREE)
    assert _files(tmp_path / "good") == ["ckpt-000000001.npz"]
    assert (tmp_path / "good" / "ckpt-000000001.npz").read_bytes() == before
    assert good.restore(like=TREE).metadata == {"epoch": 1}
