"""``Checkpoints``: a folder of numbered checkpoints, the last ``keep`` of them kept."""

from __future__ import annotations

import os
import re
import shutil
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import jax

from ..core._internal import Feature, PyTree, non_negative_int, optional_positive_int, positive_int
from ._checkpoint import (
    CheckpointError,
    CheckpointMismatchError,
    check_step,
    load_checkpoint,
    save_checkpoint,
)
from ._sharded import load_sharded, save_sharded

__all__ = ["Checkpoints", "Restored"]

_NAME = re.compile(r"^ckpt-(\d+)\.npz$")
_SHARDED = Feature("orbax.checkpoint", "ax.train.Checkpoints(sharded=True)")
_FOLDER = re.compile(r"^ckpt-(\d+)$")  # sharded=True: one orbax folder per step
_TMP = re.compile(r"^\.ckpt-\d+\.npz\.tmp-(\d+)$")


class Restored(NamedTuple):
    """What :meth:`Checkpoints.restore` returns."""

    tree: PyTree
    step: int
    metadata: dict[str, Any]
    path: Path


class Checkpoints:
    """Numbered checkpoints in ``directory``, named by the step zero-padded to nine digits
    (``ckpt-000000469.npz``); the newest ``keep`` stay.

    Args:
        directory: the folder (created when needed).
        keep: how many checkpoints to keep; older ones are deleted after each save.
        every: save every this many steps inside :func:`axjax.train.fit` (``None``: at the
            end of each epoch only).
        sharded: write each checkpoint as a folder (``ckpt-000000469``) with
            :func:`axjax.train.save_sharded` (orbax-checkpoint: every process writes its own
            shards; process 0 prunes) and restore with :func:`axjax.train.load_sharded`
            (each array in the sharding of ``like``'s leaf). For models whose shards span
            several processes.

    Example:
        >>> ckpts = ax.train.Checkpoints("runs/mnist/ckpt", keep=3)
        >>> ckpts.save(100, {"model": model, "opt": opt_state})
        >>> restored = ckpts.restore(like={"model": model, "opt": opt_state})
        >>> restored.step
        100
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        keep: int = 3,
        every: int | None = None,
        *,
        sharded: bool = False,
    ) -> None:
        keep = positive_int("Checkpoints", "keep", keep)
        every = optional_positive_int("Checkpoints", "every", every)
        if sharded:  # before the run: not at its first save
            _SHARDED.require()
        self.directory: Path = Path(directory)
        self.keep = keep
        self.every = every
        self.sharded = sharded

    def __repr__(self) -> str:
        extra = ", sharded=True" if self.sharded else ""
        return f"Checkpoints({str(self.directory)!r}, keep={self.keep}, every={self.every}{extra})"

    def path(self, step: int) -> Path:
        """The file (folder, if ``sharded``) name of the checkpoint of ``step``."""
        name = f"ckpt-{non_negative_int('Checkpoints.path', 'step', step):09d}"
        return self.directory / (name if self.sharded else f"{name}.npz")

    def steps(self) -> list[int]:
        """The steps that have a checkpoint, oldest first."""
        if not self.directory.is_dir():
            return []
        pattern = _FOLDER if self.sharded else _NAME
        found = (
            pattern.match(p.name) for p in self.directory.iterdir() if p.is_dir() == self.sharded
        )
        return sorted(int(m.group(1)) for m in found if m)

    def latest(self) -> int | None:
        """The newest step with a checkpoint file, or ``None``."""
        steps = self.steps()
        return steps[-1] if steps else None

    def save(self, step: int, tree: PyTree, metadata: dict[str, Any] | None = None) -> Path:
        """Write ``tree`` as the checkpoint of ``step`` (atomically), then prune old ones.

        Raises:
            CheckpointError: ``step`` is not a non-negative integer, ``metadata`` is not
                JSON, or the folder cannot be written; nothing is written or deleted then.
        """
        step = check_step(step)
        if step < 0:
            raise CheckpointError(
                f"Checkpoints.save: step must be a non-negative integer, got {step!r}"
            )
        if self.sharded:
            return self._save_sharded(step, tree, metadata)
        path = save_checkpoint(self.path(step), tree, step=step, metadata=metadata)
        for old in self.steps()[: -self.keep]:
            try:
                self.path(old).unlink(missing_ok=True)
            except OSError as e:
                warnings.warn(
                    f"could not delete the old checkpoint {self.path(old)} "
                    f"({e.strerror or e}); delete it by hand",
                    stacklevel=2,
                )
        self._remove_stale_temporaries()
        return path

    def _save_sharded(self, step: int, tree: PyTree, metadata: dict[str, Any] | None) -> Path:
        """Every process writes its shards; an older save of the same step (an epoch's
        end, say) is replaced only once the new one is complete and checked (``overwrite``);
        process 0 prunes; the others wait for it."""
        path, main = self.path(step), jax.process_index() == 0
        save_sharded(path, tree, step=step, metadata=metadata, overwrite=True)
        if main:
            for old in self.steps()[: -self.keep]:
                shutil.rmtree(self.path(old), ignore_errors=True)
        _barrier(f"axjax-checkpoint-{step}-pruned")
        return path

    def _load(self, step: int, like: PyTree) -> tuple[PyTree, dict[str, Any]]:
        if self.sharded:
            return load_sharded(self.path(step), like)
        return load_checkpoint(self.path(step), like)

    def restore(self, like: PyTree, step: int | None = None) -> Restored:
        """Load a checkpoint into the structure of ``like``.

        With ``step`` that checkpoint is loaded (a damaged one raises
        :class:`CheckpointError`). Without it the newest loadable one is: a damaged newer
        file is skipped with a warning naming it and why.

        Raises:
            CheckpointError: nothing to restore, or the checkpoint does not fit ``like``.
        """
        if step is not None:
            tree, manifest = self._load(step, like)
            return Restored(tree, manifest["step"], manifest["metadata"], self.path(step))
        steps = self.steps()
        if not steps:
            if self.directory.exists() and not self.directory.is_dir():
                raise CheckpointError(
                    f"cannot restore from {self.directory}: it is a file, "
                    "not a folder of checkpoints"
                )
            raise CheckpointError(f"no checkpoint in {self.directory} to restore")
        for s in reversed(steps):
            try:
                tree, manifest = self._load(s, like)
            except CheckpointMismatchError:
                raise
            except CheckpointError as e:
                warnings.warn(f"skipping a damaged checkpoint: {e}", stacklevel=2)
                continue
            return Restored(tree, manifest["step"], manifest["metadata"], self.path(s))
        raise CheckpointError(
            f"every checkpoint in {self.directory} is damaged (steps {', '.join(map(str, steps))})"
        )

    def _remove_stale_temporaries(self) -> None:
        """Delete temporary files left by writers that were killed mid-write."""
        for p in self.directory.iterdir():
            m = _TMP.match(p.name)
            if m and not _alive(int(m.group(1))):
                try:
                    p.unlink(missing_ok=True)
                except OSError:  # pragma: no cover - tried again at the next save
                    pass


def _barrier(name: str) -> None:
    """Wait for every process (nothing to wait for in one process)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's process
        return True
    return True
