"""Sharded checkpoints through orbax-checkpoint, with axjax's manifest and its checks.

``save_checkpoint`` gathers every array to one host file; a model whose shards span several
processes cannot be gathered. :func:`save_sharded` writes a folder with orbax-checkpoint
(tensorstore): each process writes the shards it holds, the metadata is written once, and
the folder appears under its name only when complete (orbax writes a temporary folder and
renames it). The same JSON manifest as ``save_checkpoint``'s (axes, shapes, dtypes, step,
metadata) goes in beside the arrays, so :func:`load_sharded` fails with the same
``CheckpointMismatchError`` for a model of other axes or sizes, and restores each array
straight into the sharding of the template (``ax.abstract(model)`` on any mesh).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ..core import Tensor
from ..core._internal import Feature, PyTree, shape_dtype_struct
from ._checkpoint import (
    CheckpointError,
    CheckpointMismatchError,
    check_leaf,
    check_step,
    checked_metadata,
    flatten_tree,
    rebuild_leaf,
)

__all__ = ["load_sharded", "read_sharded_manifest", "save_sharded"]

FORMAT = "axjax-sharded-checkpoint"
VERSION = 1


_ORBAX = Feature(
    "orbax.checkpoint",
    "sharded checkpoints (ax.train.save_sharded, load_sharded, read_sharded_manifest)",
)


def _ocp() -> Any:
    """``orbax.checkpoint``, imported on first use (it takes seconds to import)."""
    return _ORBAX.require()


def _checkpointer() -> Any:
    ocp = _ocp()
    return ocp.Checkpointer(ocp.CompositeCheckpointHandler())


def save_sharded(
    directory: str | os.PathLike[str],
    tree: PyTree,
    *,
    step: int = 0,
    metadata: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``tree`` to the folder ``directory`` with orbax-checkpoint, shard by shard.

    Call it in every process (with ``jax.distributed``): each writes the shards it holds.
    Leaves as in :func:`axjax.train.save_checkpoint`. The folder must not exist yet, unless
    ``overwrite``: then the new checkpoint is written beside it (``.<name>.saving``) and
    put in its place only when complete, so a save that fails (bad metadata, a full disk,
    a killed process) leaves the old one as it was.

    Raises:
        CheckpointError: ``step`` is not an integer, ``metadata`` (or a value leaf) is
            not JSON, or the folder exists (without ``overwrite``); checked before anything
            is written or deleted.

    Example:
        >>> ax.train.save_sharded("run/step-100", {"model": model, "opt": opt_state},
        ...                       step=100)
    """
    path = Path(directory).absolute()
    step = check_step(step)
    meta = checked_metadata(path, metadata)
    if path.exists() and not overwrite:
        raise CheckpointError(
            f"cannot save a sharded checkpoint to {path}: it exists (choose a new folder "
            "per step, or pass overwrite=True)"
        )
    entries, arrays, treedef = flatten_tree(tree)
    stored = {
        e["file"].removesuffix(".npy"): _storable(a)
        for e, a in zip((e for e in entries if "file" in e), arrays, strict=True)
    }
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "step": step,
        "metadata": meta,
        "treedef": treedef,
        "leaves": entries,
    }
    try:  # what JsonSave will write, checked before anything is written or deleted
        json.dumps(manifest)
    except (TypeError, ValueError) as e:
        raise CheckpointError(
            f"cannot save a sharded checkpoint to {path}: its manifest is not JSON ({e}); "
            "nothing was written or deleted"
        ) from None
    # with overwrite, every process writes to the same side folder (whether or not the
    # old one exists, which processes may see at different moments); process 0 swaps
    target = path.with_name(f".{path.name}.saving") if overwrite else path
    main = jax.process_index() == 0
    if overwrite:
        if main and target.exists():  # left by a save that was killed
            shutil.rmtree(target)
        _barrier(f"axjax-sharded-{path.name}-cleared")
    ocp = _ocp()
    with _checkpointer() as ckptr:
        ckptr.save(
            target,
            args=ocp.args.Composite(
                arrays=ocp.args.StandardSave(stored), manifest=ocp.args.JsonSave(manifest)
            ),
        )
    if overwrite:
        if main:
            _swap(target, path)
        _barrier(f"axjax-sharded-{path.name}-swapped")
    return path


def _swap(new: Path, path: Path) -> None:
    """Put the complete folder ``new`` in the place of ``path`` (which may not exist): the
    old one is renamed aside first and deleted last, so one of the two is always whole."""
    old = path.with_name(f".{path.name}.old")
    if old.exists():  # left by a swap that was killed
        shutil.rmtree(old)
    if not path.exists():
        new.rename(path)
        return
    path.rename(old)
    new.rename(path)
    shutil.rmtree(old)


def _barrier(name: str) -> None:
    """Wait for every process (nothing to wait for in one process)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def _global(sharding: object) -> bool:
    """Whether an array with ``sharding`` is one global array orbax can write shard by
    shard (in one process every array is)."""
    return jax.process_count() == 1 or isinstance(sharding, jax.sharding.NamedSharding)


def _storable(a: object) -> object:
    """``a``, or a host copy of a process-local array (a PRNG key on one device) in a run
    of several processes: orbax writes those once, from process 0."""
    if isinstance(a, jax.Array) and not _global(a.sharding):
        return np.asarray(a)
    return a


def _target(entry: dict[str, Any], leaf: Any) -> np.ndarray | jax.ShapeDtypeStruct:
    """What orbax restores an array entry into: the template leaf's shape, dtype and
    sharding (one local device when it has none; a host array for a process-local leaf in
    a run of several processes)."""
    if entry["kind"] == "key":
        data = jax.random.key_data(leaf)
        sharding = getattr(data, "sharding", None)
        shape, dtype = data.shape, data.dtype
    else:
        a = leaf.array if entry["kind"] == "tensor" else leaf
        sharding, shape, dtype = getattr(a, "sharding", None), a.shape, a.dtype
    if not _global(sharding):
        return np.zeros(shape, dtype)
    if not isinstance(sharding, jax.sharding.Sharding):
        sharding = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    return shape_dtype_struct(shape, dtype, sharding=sharding)


def read_sharded_manifest(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of a folder written by :func:`save_sharded`."""
    path = Path(directory).absolute()
    if not (path / "manifest").is_dir():
        raise CheckpointError(
            f"{path} is not a sharded axjax checkpoint (no manifest; a "
            "save that did not finish leaves no folder under its name)"
        )
    ocp = _ocp()
    try:
        with _checkpointer() as ckptr:
            got = ckptr.restore(path, args=ocp.args.Composite(manifest=ocp.args.JsonRestore()))
    except (OSError, ValueError, KeyError) as e:
        raise CheckpointError(
            f"{path} is damaged: orbax could not read its manifest ({e}); "
            "load an earlier checkpoint"
        ) from None
    manifest: dict[str, Any] = got["manifest"]
    if manifest.get("format") != FORMAT:
        raise CheckpointError(f"{path} is an orbax checkpoint but not an axjax one")
    return manifest


def load_sharded(directory: str | os.PathLike[str], like: PyTree) -> tuple[PyTree, dict[str, Any]]:
    """Read a folder written by :func:`save_sharded` into the structure of ``like``.

    Every stored leaf must fit the template's (kind, axes, shape, dtype), as for
    :func:`axjax.train.load_checkpoint`; each array comes back with the template leaf's
    sharding, so a checkpoint saved on one mesh (or by several processes) restores on
    another: pass ``ax.abstract(model, rules, mesh=mesh)``.

    Raises:
        CheckpointError: not a sharded checkpoint; ``CheckpointMismatchError`` for a
            template of another layout, axes or sizes.

    Example:
        >>> with ax.axis_rules(mesh, rules):
        ...     state, manifest = ax.train.load_sharded("run/step-100", ax.abstract(state))
    """
    path = Path(directory).absolute()
    manifest = read_sharded_manifest(path)
    flat, treedef = jax.tree_util.tree_flatten_with_path(
        like, is_leaf=lambda x: isinstance(x, Tensor) and x.array is not None
    )
    stored = manifest["leaves"]
    if len(stored) != len(flat):
        raise CheckpointMismatchError(
            f"{path} does not fit: it stores {len(stored)} leaves, the template has "
            f"{len(flat)} (a different model or optimizer?)"
        )
    targets: dict[str, Any] = {}
    for (keypath, leaf), entry in zip(flat, stored, strict=True):
        check_leaf(path, jax.tree_util.keystr(keypath), leaf, entry)
        if "file" in entry:
            targets[entry["file"].removesuffix(".npy")] = _target(entry, leaf)
    ocp = _ocp()
    try:
        with _checkpointer() as ckptr:
            got = ckptr.restore(
                path, args=ocp.args.Composite(arrays=ocp.args.StandardRestore(targets))
            )["arrays"]
    except (OSError, ValueError, KeyError) as e:
        raise CheckpointError(
            f"{path} is damaged: orbax could not read its arrays ({e}); load an earlier checkpoint"
        ) from None
    leaves = [
        rebuild_leaf(entry, leaf, got.get(entry.get("file", "").removesuffix(".npy")))
        for (_, leaf), entry in zip(flat, stored, strict=True)
    ]
    return jax.tree_util.tree_unflatten(treedef, leaves), manifest
