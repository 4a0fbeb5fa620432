"""Saving a sharded checkpoint again for the same step loses nothing: everything that can be
checked is checked before anything is deleted, and the new folder is written beside the
old one and swapped in only when complete (``save_sharded(..., overwrite=True)``, which
``Checkpoints(sharded=True)`` uses)."""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest

import axjax as ax
from axjax.train import _manager, _sharded
from tests.axes import Hidden, Pixel


def tree(seed: int) -> dict[str, Any]:
    return {"w": ax.tensor(jax.random.normal(jax.random.key(seed), (4, 3)), Pixel, Hidden)}


def disk_full(*args: Any, **kwargs: Any) -> Any:
    """A writer that fails half-way: it leaves a partial folder, then raises."""

    class Failing:
        def __enter__(self) -> Failing:
            return self

        def __exit__(self, *exc: Any) -> None:
            return None

        def save(self, target: Path, args: Any) -> None:
            Path(target).mkdir(parents=True)
            (Path(target) / "part").write_text("half")
            raise OSError(28, "No space left on device")

    return Failing()


#: ways a re-save of step 5 fails: (what is done, the error and the text it must say)
FAILURES: dict[str, tuple[Callable[[ax.train.Checkpoints, pytest.MonkeyPatch], Any], type, str]] = {
    "metadata that is not JSON": (
        lambda c, mp: c.save(5, tree(1), {"epoch": object()}),
        ax.train.CheckpointError,
        "metadata",
    ),
    "a step that is not an integer": (
        lambda c, mp: c.save("5", tree(1)),  # type: ignore[arg-type]
        ax.train.CheckpointError,
        "step",
    ),
    "the disk filling up half-way": (
        lambda c, mp: (mp.setattr(_sharded, "_checkpointer", disk_full), c.save(5, tree(1))),
        OSError,
        "No space left",
    ),
}


def old_survives(folder: Path, case: str, mp: pytest.MonkeyPatch) -> list[str]:
    """Save step 5, fail to save it again as ``case`` says; what was lost (empty: nothing)."""
    ckpts = ax.train.Checkpoints(folder, keep=2, sharded=True)
    ckpts.save(5, tree(0), {"epoch": 0})
    action, error, text = FAILURES[case]
    problems = []
    try:
        action(ckpts, mp)
        problems.append(f"{case}: no error")
    except error as e:  # type: ignore[misc]
        if text not in str(e):
            problems.append(f"{case}: {text!r} not in {e}")
    mp.undo()
    if ckpts.steps() != [5]:
        return [*problems, f"{case}: steps {ckpts.steps()}"]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a damaged folder is skipped with a warning
            back = ckpts.restore(tree(9))
    except ax.train.CheckpointError as e:
        return [*problems, f"{case}: lost ({e})"]
    if back.metadata != {"epoch": 0}:
        problems.append(f"{case}: metadata {back.metadata}")
    if not np.array_equal(np.asarray(back.tree["w"].array), np.asarray(tree(0)["w"].array)):
        problems.append(f"{case}: other values")
    return problems


@pytest.mark.parametrize("case", list(FAILURES))
def test_failed_resave_keeps_the_old_checkpoint(
    tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert old_survives(tmp_path, case, monkeypatch) == []
    # and the next good save replaces it, leaving no side folder behind
    ckpts = ax.train.Checkpoints(tmp_path, keep=2, sharded=True)
    ckpts.save(5, tree(2), {"epoch": 2})
    back = ckpts.restore(tree(9))
    assert back.metadata == {"epoch": 2}
    np.testing.assert_array_equal(np.asarray(back.tree["w"].array), np.asarray(tree(2)["w"].array))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-000000005"]


def test_save_sharded_refuses_an_existing_folder_without_overwrite(tmp_path: Path) -> None:
    ax.train.save_sharded(tmp_path / "s", tree(0), step=1)
    with pytest.raises(ax.train.CheckpointError, match="it exists .*overwrite=True"):
        ax.train.save_sharded(tmp_path / "s", tree(1), step=1)


def test_the_check_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the old re-save (delete the folder, then save) the failures lose the old
    checkpoint, and the test above reports it."""

    def delete_first(self: Any, step: int, tree: Any, metadata: Any) -> Path:
        path = self.path(step)
        if path.exists():
            shutil.rmtree(path)
        return _sharded.save_sharded(path, tree, step=step, metadata=metadata)

    lost = []
    for i, case in enumerate(FAILURES):
        with monkeypatch.context() as mp:
            mp.setattr(_manager.Checkpoints, "_save_sharded", delete_first)
            lost += old_survives(tmp_path / str(i), case, mp)
    # (a bad step was always refused by Checkpoints.save before anything was deleted)
    lost_cases = {p.split(":")[0] for p in lost if "steps []" in p or "lost" in p}
    assert lost_cases == {"metadata that is not JSON", "the disk filling up half-way"}, lost
