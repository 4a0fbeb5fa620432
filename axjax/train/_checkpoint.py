"""Checkpoints: any pytree of Tensors and arrays in one ``.npz`` file with a JSON manifest.

A checkpoint is a zip holding ``manifest.json`` and one ``leaf_<i>.npy`` per array leaf
(``np.load`` reads it as an ``.npz``). The manifest records the step, your metadata, the
tree structure, and for each leaf its path, kind, dtype, shape and, for a ``Tensor``, its
axis names. Nothing is pickled. PRNG keys are stored as key data plus their impl name.

Writing is atomic: a temporary file in the same folder, ``fsync``, ``os.replace``, then an
``fsync`` of the folder. A crash at any moment leaves either the old set of checkpoints or
the new one, never a half-written file under a checkpoint's name. Restoring checks every
leaf against a template (``like``), so a model with other axes or sizes fails clearly.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any, TypeGuard

import jax
import numpy as np
from jax.typing import ArrayLike

from ..core import Tensor
from ..core._internal import PyTree, axis_name, describe

__all__ = [
    "CheckpointError",
    "CheckpointMismatchError",
    "load_checkpoint",
    "read_manifest",
    "save_checkpoint",
]

FORMAT = "axjax-checkpoint"
VERSION = 1
_SCALARS = (bool, int, float, str, type(None))


class CheckpointError(RuntimeError):
    """A checkpoint is missing, truncated, corrupt, or does not fit the model given.

    Example:
        >>> ax.train.load_checkpoint("ckpt/ckpt-000000100.npz", like=state)  # doctest: +SKIP
        CheckpointError: ckpt/ckpt-000000100.npz is truncated or not a checkpoint ...
    """

    __module__ = "axjax.train"


class CheckpointMismatchError(CheckpointError):
    """The checkpoint is intact but was written from a model of another layout or axes."""

    __module__ = "axjax.train"


def _is_leaf(x: object) -> bool:
    """A Tensor is one entry; one without its array (the optimizer state of a frozen leaf,
    ``trainable=``) is an empty node, as ``None`` is."""
    return isinstance(x, Tensor) and x.array is not None


def _is_key(x: object) -> TypeGuard[jax.Array]:
    return isinstance(x, jax.Array) and jax.numpy.issubdtype(x.dtype, jax.dtypes.prng_key)


def _show(entry: dict[str, Any]) -> str:
    if entry["kind"] == "tensor":
        lead = len(entry["shape"]) - len(entry["axes"])  # a stacked Tensor's leading dims
        parts = [entry["dtype"]] + [f"{n} stacked" for n in entry["shape"][:lead]]
        parts += [f"{a}={n}" for a, n in zip(entry["axes"], entry["shape"][lead:], strict=True)]
        return "Tensor[" + ", ".join(parts) + "]"
    if entry["kind"] in ("array", "key"):
        return f"{entry['kind']} {entry['dtype']}{list(entry['shape'])}"
    return f"{entry['kind']} {entry.get('type', '')}".strip()


def _describe_leaf(x: object) -> dict[str, Any]:
    """The manifest entry of a leaf (without its path)."""
    if isinstance(x, Tensor):
        return {
            "kind": "tensor",
            "dtype": np.dtype(x.array.dtype).name,
            "axes": [axis_name(a) for a in x.axes],
            "shape": list(x.shape),
        }
    if _is_key(x):
        data = jax.random.key_data(x)
        return {
            "kind": "key",
            "dtype": np.dtype(data.dtype).name,
            "shape": list(x.shape),
            "impl": str(jax.random.key_impl(x)),
        }
    if isinstance(x, (jax.Array, np.ndarray, np.generic)):
        return {"kind": "array", "dtype": np.dtype(x.dtype).name, "shape": list(np.shape(x))}
    if isinstance(x, _SCALARS):
        return {"kind": "value", "type": type(x).__name__}
    return {"kind": "static", "type": type(x).__name__}


def _payload(x: object) -> object:
    if isinstance(x, Tensor):
        return x.array
    if _is_key(x):
        return jax.random.key_data(x)
    return x


_JSON_HELP = (
    "metadata must be JSON: a dict with str keys whose values are str, int, float, "
    "bool, None, lists or dicts of these"
)


def _json_problem(value: object, where: str, seen: tuple[int, ...] = ()) -> str | None:
    """Where and why ``value`` would not survive a JSON round trip, or ``None``."""
    if isinstance(value, (str, int, float, type(None))):  # bool is an int
        return None
    if id(value) in seen:
        return f"{where} contains itself"
    seen = (*seen, id(value))
    if isinstance(value, dict):
        mapping: dict[Any, Any] = value
        for k, v in mapping.items():
            if not isinstance(k, str):
                return (
                    f"{where} has the key {k!r} ({type(k).__name__}); JSON keys are "
                    f"strings, so use {str(k)!r}"
                )
            found = _json_problem(v, f"{where}[{k!r}]", seen)
            if found:
                return found
        return None
    if isinstance(value, (list, tuple)):
        items: list[Any] | tuple[Any, ...] = value
        for i, v in enumerate(items):
            found = _json_problem(v, f"{where}[{i}]", seen)
            if found:
                return found
        return None
    if isinstance(value, (np.ndarray, jax.Array)):
        return (
            f"{where} is an array ({value.dtype}{list(value.shape)}); "
            "store arrays in the tree, or pass .tolist()"
        )
    if isinstance(value, np.generic):
        return f"{where} is a numpy {type(value).__name__}; pass .item() (or int()/float())"
    return f"{where} is a {type(value).__module__}.{type(value).__qualname__}, not JSON"


def check_step(step: Any) -> int:
    """``step`` as an int (an int, a numpy or 0-d JAX integer); CheckpointError otherwise."""
    value: int | None = None
    if not isinstance(step, (bool, float, complex, str, bytes)):
        try:
            kind = np.dtype(getattr(step, "dtype", np.int64)).kind
            value = int(step) if kind in "iu" and np.ndim(step) == 0 else None
        except (TypeError, ValueError, OverflowError):
            value = None
    if value is None:
        raise CheckpointError(f"step must be an integer, got {step!r}")
    return value


def _check_destination(path: Path) -> None:
    """Raise CheckpointError if ``path`` cannot be written as a file; create nothing."""
    if path.is_dir():
        raise CheckpointError(
            f"cannot save a checkpoint to {path}: it is a folder; give a file "
            "name such as ckpt.npz inside it"
        )
    folder = path.parent
    while not folder.exists():
        if folder.is_symlink():  # a dangling link
            raise CheckpointError(
                f"cannot save a checkpoint to {path}: {folder} is a broken "
                "symbolic link; remove it or choose another folder"
            )
        folder = folder.parent
    if not folder.is_dir():
        raise CheckpointError(
            f"cannot save a checkpoint to {path}: {folder} is a file, not a "
            "folder; choose another folder or move that file away"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CheckpointError(
            f"cannot save a checkpoint to {path}: the folder {folder} is not "
            "writable; choose a writable folder or fix its permissions"
        )


def checked_metadata(path: Path, metadata: dict[str, Any] | None) -> dict[str, Any]:
    """``metadata`` (``{}`` for ``None``); CheckpointError if it would not survive JSON."""
    if metadata is None:
        metadata = {}
    problem = (
        _json_problem(metadata, "metadata")
        if isinstance(metadata, dict)
        else f"metadata is a {type(metadata).__name__}, not a dict"
    )
    if problem:
        raise CheckpointError(
            f"cannot save a checkpoint to {path}: {problem}. {_JSON_HELP}. Nothing was written."
        )
    return metadata


def flatten_tree(tree: PyTree) -> tuple[list[dict[str, Any]], list[Any], str]:
    """The manifest entries of ``tree``'s leaves, the arrays to store, and the tree's structure.

    Each array leaf's entry names its file (``leaf_<i>.npy``, in the order of the arrays); a
    Python scalar's entry holds its value.
    """
    flat, treedef = jax.tree_util.tree_flatten_with_path(tree, is_leaf=_is_leaf)
    entries: list[dict[str, Any]] = []
    arrays: list[Any] = []
    for keypath, leaf in flat:
        entry = {"path": jax.tree_util.keystr(keypath), **_describe_leaf(leaf)}
        if entry["kind"] in ("tensor", "array", "key"):
            entry["file"] = f"leaf_{len(arrays):05d}.npy"
            payload = _payload(leaf)
            if isinstance(payload, jax.Array) and payload.is_deleted():
                raise CheckpointError(
                    f"cannot save the checkpoint: entry {entry['path']} has been deleted (its "
                    "buffer was donated to a jitted step, or deleted); save the state the "
                    "step returned. Nothing was written."
                )
            arrays.append(payload)
        elif entry["kind"] == "value":
            entry["value"] = leaf
        entries.append(entry)
    return entries, arrays, str(treedef)


def _manifest_json(path: Path, manifest: dict[str, Any]) -> str:
    """``manifest`` as JSON text; CheckpointError if it cannot be written as JSON."""
    try:
        return json.dumps(manifest, indent=1)
    except (TypeError, ValueError) as e:  # pragma: no cover - _json_problem catches these
        raise CheckpointError(
            f"cannot save a checkpoint to {path}: {e}. {_JSON_HELP}. Nothing was written."
        ) from None


def _make_folder(path: Path) -> None:
    """Create the folder of ``path``; CheckpointError if it cannot be created."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CheckpointError(
            f"cannot save a checkpoint to {path}: its folder cannot be "
            f"created ({e.strerror or e}); choose another folder"
        ) from None


def _write_atomically(
    path: Path, text: str, entries: list[dict[str, Any]], host: list[Any]
) -> None:
    """Write the zip (``host`` arrays, then ``text`` as the manifest) to ``path`` atomically.

    The zip goes to a temporary file in the same folder, is ``fsync``-ed, then renamed over
    ``path``; on any error the temporary file is deleted and ``path`` left as it was.
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
                for entry, arr in zip((e for e in entries if "file" in e), host, strict=True):
                    with zf.open(entry["file"], "w", force_zip64=True) as member:
                        np.lib.format.write_array(member, np.asarray(arr), allow_pickle=False)
                zf.writestr("manifest.json", text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        where = e.filename if isinstance(e.filename, str) else tmp
        raise CheckpointError(
            f"cannot save a checkpoint to {path}: writing {where} failed "
            f"({e.strerror or e}); free some space or choose another folder. The previous "
            "file under that name, if any, is unchanged."
        ) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def save_checkpoint(
    path: str | os.PathLike[str],
    tree: PyTree,
    *,
    step: int = 0,
    metadata: dict[str, Any] | None = None,
) -> Path:
    """Write ``tree`` (models, optimizer states, keys, ...) to ``path`` atomically.

    Array and Tensor leaves are stored with their dtype, shape and axes; Python scalars go
    into the manifest; other leaves (functions, static config) come back from ``like``.
    ``metadata`` must be JSON: a dict with str keys of str, int, float, bool, None, and
    lists (tuples come back as lists) or dicts of these.

    Everything is checked before anything is written: on any error an existing checkpoint
    at ``path`` is left as it was, and no temporary file stays behind.

    Raises:
        CheckpointError: ``metadata`` is not JSON (the message names the key), ``step`` is
            not an integer, or ``path`` cannot be written (its folder is a file or not
            writable, it is a folder, the disk is full, ...).

    Example:
        >>> ax.train.save_checkpoint("run/ckpt.npz", {"model": model, "opt": opt_state},
        ...                          step=1000, metadata={"epoch": 2})
    """
    path = Path(path)
    step = check_step(step)
    metadata = checked_metadata(path, metadata)
    entries, arrays, treedef = flatten_tree(tree)
    text = _manifest_json(
        path,
        {
            "format": FORMAT,
            "version": VERSION,
            "step": step,
            "metadata": metadata,
            "treedef": treedef,
            "leaves": entries,
        },
    )
    _check_destination(path)
    host = jax.device_get(arrays)
    _make_folder(path)
    _write_atomically(path, text, entries, host)
    _fsync_dir(path.parent)
    return path


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _open(path: Path) -> tuple[zipfile.ZipFile, dict[str, Any]]:
    if path.is_dir():
        raise CheckpointError(
            f"{path} is a folder, not a checkpoint file (for a folder of "
            "checkpoints use Checkpoints(folder).restore)"
        )
    if not path.is_file():
        raise CheckpointError(f"{path} does not exist")
    try:
        zf = zipfile.ZipFile(path)
    except Exception as e:  # BadZipFile, EOFError, NotImplementedError, OSError, ...
        raise _damaged(path, e) from None
    try:
        manifest = json.loads(zf.read("manifest.json"))
    except Exception as e:  # a bad CRC, a missing member, a method zipfile cannot read
        zf.close()
        raise _damaged(path, e) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        zf.close()
        raise CheckpointError(f"{path} is a zip file but not an axjax checkpoint")
    version = manifest.get("version", 0)
    if isinstance(version, int) and version > VERSION:
        zf.close()
        raise CheckpointError(
            f"{path} was written by a newer axjax (format version "
            f"{manifest['version']}); upgrade axjax to read it"
        )
    problem = manifest_problem(manifest)
    if problem:
        zf.close()
        raise CheckpointError(
            f"{path} has a corrupt manifest: {problem}; it cannot be loaded. Load an earlier "
            "checkpoint (Checkpoints.restore skips damaged ones)."
        )
    return zf, manifest


def _damaged(path: Path, e: BaseException) -> CheckpointError:
    return CheckpointError(
        f"{path} is truncated or not a checkpoint ({e}); it cannot be "
        "loaded. Load an earlier checkpoint (Checkpoints.restore skips damaged ones)."
    )


_KINDS = ("tensor", "array", "key", "value", "static")


def manifest_problem(manifest: dict[str, Any]) -> str | None:
    """What is wrong with a parsed manifest's fields, or ``None`` (read before any leaf)."""
    if not isinstance(manifest.get("step"), int) or isinstance(manifest.get("step"), bool):
        return f"its step is {manifest.get('step')!r}, not an integer"
    if not isinstance(manifest.get("metadata"), dict):
        return "its metadata is not a dict"
    leaves = manifest.get("leaves")
    if not isinstance(leaves, list):
        return "it has no list of leaves"
    for i, e in enumerate(leaves):
        if not isinstance(e, dict) or not isinstance(e.get("path"), str):
            return f"leaf {i} has no path"
        if e.get("kind") not in _KINDS:
            return f"{e['path']} has the unknown kind {e.get('kind')!r}"
        if e["kind"] == "value" and "value" not in e:
            return f"{e['path']} has no value"
        if e["kind"] == "key" and not isinstance(e.get("impl"), str):
            return f"{e['path']} has no key implementation"
        if e["kind"] not in ("tensor", "array", "key"):
            continue
        shape, axes = e.get("shape"), e.get("axes", [])
        if not (isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape)):
            return f"{e['path']} has the shape {shape!r}"
        if not isinstance(e.get("dtype"), str) or not isinstance(e.get("file"), str):
            return f"{e['path']} has no dtype or file"
        if e["kind"] == "tensor" and not (
            isinstance(axes, list)
            and all(isinstance(a, str) for a in axes)
            and len(axes) <= len(shape)
        ):
            return f"{e['path']} has the axes {axes!r} for the shape {shape}"
    return None


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON manifest of a checkpoint: ``step``, ``metadata``, ``leaves``, ``treedef``."""
    zf, manifest = _open(Path(path))
    zf.close()
    return manifest


def _read_array(zf: zipfile.ZipFile, path: Path, entry: dict[str, Any]) -> np.ndarray:
    try:
        with zf.open(entry["file"]) as member:
            arr = np.lib.format.read_array(io.BytesIO(member.read()), allow_pickle=False)
        want = np.dtype(entry["dtype"]) if entry["dtype"] != "bfloat16" else jax.numpy.bfloat16
        if arr.dtype != want:
            arr = arr.view(want)
    except Exception as e:  # a bad CRC, a missing member, a damaged .npy header, ...
        raise CheckpointError(
            f"{path} is corrupt: cannot read {entry['path']} ({e}); load an earlier checkpoint"
        ) from None
    if list(arr.shape) != list(entry["shape"]) and entry["kind"] != "key":
        raise CheckpointError(
            f"{path} is corrupt: {entry['path']} has shape {arr.shape}, the "
            f"manifest says {tuple(entry['shape'])}"
        )
    return arr


def _placed(arr: ArrayLike, like: object) -> jax.Array:
    """``arr`` on the device(s) of the template leaf ``like``: with its ``NamedSharding``
    when it has one (a sharded array, or ``ax.abstract``'s ``ShapeDtypeStruct``)."""
    sharding = getattr(like, "sharding", None)
    if isinstance(arr, jax.Array) and (sharding is None or arr.sharding == sharding):
        return arr
    if isinstance(sharding, jax.sharding.NamedSharding):
        placed: jax.Array = jax.device_put(arr, sharding)
        return placed
    return jax.numpy.asarray(arr)


def load_checkpoint(path: str | os.PathLike[str], like: PyTree) -> tuple[PyTree, dict[str, Any]]:
    """Read a checkpoint into the structure of ``like`` (a template with the same layout).

    Every stored leaf must match the template's leaf at the same path: kind, dtype,
    shape and, for Tensors, axis names. Returns ``(tree, manifest)``; ``manifest["step"]``
    and ``manifest["metadata"]`` hold what :func:`save_checkpoint` was given. A template
    leaf with a ``NamedSharding`` (a sharded model, or ``ax.abstract(model)``) gets its
    value back with that sharding, on that mesh.

    Raises:
        CheckpointError: missing, truncated or corrupt file, or a leaf that does not fit.

    Example:
        >>> state, manifest = ax.train.load_checkpoint("run/ckpt.npz", like=fresh_state)
    """
    path = Path(path)
    zf, manifest = _open(path)
    with zf:
        flat, treedef = jax.tree_util.tree_flatten_with_path(like, is_leaf=_is_leaf)
        stored = manifest["leaves"]
        if len(stored) != len(flat):
            raise CheckpointMismatchError(
                f"{path} does not fit: it stores {len(stored)} leaves, the template has "
                f"{len(flat)}{_path_difference(stored, flat)} (a different model or optimizer?)"
            )
        leaves: list[Any] = []
        for (keypath, leaf), entry in zip(flat, stored, strict=True):
            check_leaf(path, jax.tree_util.keystr(keypath), leaf, entry)
            arr = _read_array(zf, path, entry) if "file" in entry else None
            leaves.append(rebuild_leaf(entry, leaf, arr))
    return jax.tree_util.tree_unflatten(treedef, leaves), manifest


def _path_difference(stored: list[dict[str, Any]], flat: list[tuple[Any, Any]]) -> str:
    """``; the template's ['x'] is not in the checkpoint``: the leaves only one side has."""
    saved = [e["path"] for e in stored]
    mine = [jax.tree_util.keystr(k) for k, _ in flat]
    only_mine = [p for p in mine if p not in set(saved)][:3]
    only_saved = [p for p in saved if p not in set(mine)][:3]
    parts = [f"the template's {', '.join(only_mine)} not in the checkpoint"] if only_mine else []
    parts += [f"the checkpoint's {', '.join(only_saved)} not in the template"] if only_saved else []
    return "; " + " and ".join(parts) if parts else ""


def check_leaf(path: Path, where: str, leaf: object, entry: dict[str, Any]) -> None:
    """Raise ``CheckpointMismatchError`` unless the stored ``entry`` fits the template's
    ``leaf`` at ``where``: same path and kind; same axes, shape and dtype for arrays."""
    mine = {"path": where, **_describe_leaf(leaf)}
    if entry["path"] != where or entry["kind"] != mine["kind"]:
        raise CheckpointMismatchError(
            f"{path} does not fit: it stores {entry['path']} as {_show(entry)}, the "
            f"template has {where} as {_show(mine)} (a different model or optimizer?)"
        )
    if entry["kind"] in ("tensor", "array", "key"):
        fields = ("axes", "shape", "dtype") if entry["kind"] == "tensor" else ("shape", "dtype")
        bad = [f for f in fields if entry.get(f) != mine.get(f)]
        if bad:
            plain = isinstance(leaf, Tensor) and np.ndim(leaf.array) == len(leaf.axes)
            got = describe(leaf) if isinstance(leaf, Tensor) and plain else _show(mine)
            raise CheckpointMismatchError(
                f"{path} does not fit at {where}: the checkpoint has {_show(entry)}, the "
                f"template has {got} ({' and '.join(bad)} differ; restore into a model "
                "built with the same axes and sizes)"
            )


def rebuild_leaf(entry: dict[str, Any], leaf: Any, arr: Any) -> object:
    """The restored leaf from its manifest ``entry``, the template ``leaf`` and the stored
    array ``arr`` (host or device; ``None`` for a leaf without one)."""
    if entry["kind"] == "tensor":  # the template's axes on the array (stacked ones too)
        return jax.tree_util.tree_unflatten(jax.tree.structure(leaf), [_placed(arr, leaf.array)])
    if entry["kind"] == "key":
        return jax.random.wrap_key_data(jax.numpy.asarray(arr), impl=entry["impl"])
    if entry["kind"] == "array":
        return _placed(arr, leaf) if isinstance(leaf, jax.Array | jax.ShapeDtypeStruct) else arr
    if entry["kind"] == "value":
        return entry["value"]
    return leaf
