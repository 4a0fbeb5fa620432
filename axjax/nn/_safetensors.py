"""Save and load a module's weights as a safetensors file, with axis names in the metadata.

The file is a standard ``safetensors`` file (``safetensors.numpy``): one entry per array
leaf of the module, named by its path (``blocks.0.attn.query_proj``), and the header's
metadata key ``"axjax"`` holding, for each entry, its axis names and sizes (JSON). Any
safetensors reader (PyTorch, the Hugging Face tools) reads the arrays; axjax checks the axes.

Loading is into a template module of the same structure (as ``eqx.tree_deserialise_leaves``
does): each entry must exist, with the template's dtype, and the axis names and sizes the
template has. A file without axjax metadata (written from plain arrays) loads when each
array's shape is the template's shape in the template's axis order. A stacked Tensor (from
``jax.vmap`` / ``eqx.filter_vmap`` over a layer's constructor: its array has leading
dimensions before its named axes) is stored whole, with the count of those dimensions.

Nothing is lost: everything is checked before the file is written (two paths that give one
entry name, metadata that is not strings, axis names that do not fit the arrays), and the
file is written to a temporary file that replaces the old one only when complete. Loading a
truncated or corrupt file raises :class:`SafetensorsError` naming the file and the problem.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from ..core import AnyTensor, Tensor
from ..core._internal import Feature, PyTree

__all__ = ["SafetensorsError", "load_safetensors", "save_safetensors"]

M = TypeVar("M")
_KEY = "axjax"
_SAVE = Feature("safetensors", "ax.nn.save_safetensors")
_LOAD = Feature("safetensors", "ax.nn.load_safetensors")


class SafetensorsError(ValueError):
    """A safetensors file does not fit the module it is loaded into, is truncated or
    corrupt, or the module cannot be written as one (nothing is written then)."""

    __module__ = "axjax.nn"


#: an array leaf of a module: a Tensor or a plain array
Leaf = AnyTensor | jax.Array | np.ndarray[Any, Any]


def _is_tensor(x: object) -> bool:
    """A Tensor is one entry; one without its array (``eqx.filter`` left it out) is an
    empty node, as ``None`` is."""
    return isinstance(x, Tensor) and x.array is not None


def _entries(module: PyTree, where: str) -> list[tuple[str, Leaf]]:
    """``(entry name, leaf)`` for each array leaf; ``SafetensorsError`` when two paths give
    the same name (``{"a.b": x, "a": {"b": y}}``: both are ``a.b``)."""
    leaves = jax.tree_util.tree_flatten_with_path(module, is_leaf=_is_tensor)[0]
    out: list[tuple[str, Leaf]] = []
    paths: dict[str, str] = {}
    for path, leaf in leaves:
        if isinstance(leaf, Tensor) or isinstance(leaf, jax.Array | np.ndarray):
            name = jax.tree_util.keystr(path, simple=True, separator=".")
            full = jax.tree_util.keystr(path)
            if name in paths:
                raise SafetensorsError(
                    f"{where}: the module's leaves {paths[name]} and {full} both get the "
                    f"entry name {name!r} (a key with a dot collides with a nested key); "
                    "rename one of them (nothing was written or read)"
                )
            paths[name] = full
            if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
                raise SafetensorsError(
                    f"{where}: the module's leaf {full} is a PRNG key array, which a "
                    "safetensors file cannot hold (numbers only); store "
                    "jax.random.key_data(key) and rebuild it with jax.random.wrap_key_data, "
                    "or keep keys out of the module (nothing was written or read)"
                )
            array = leaf.array if isinstance(leaf, Tensor) else leaf
            if isinstance(array, jax.Array) and array.is_deleted():
                raise SafetensorsError(
                    f"{where}: the module's leaf {full} has been deleted (its buffer was "
                    "donated to a jitted step, or deleted); save the model the step returned "
                    "(nothing was written)"
                )
            out.append((name, leaf))
    return out


def _describe(entry: dict[str, Any]) -> str:
    axes = entry.get("axes")
    if axes is None:
        return f"an array of shape {tuple(entry['shape'])}"
    lead = len(entry["shape"]) - len(axes)
    named = [f"{a}={n}" for a, n in zip(axes, entry["shape"][lead:], strict=True)]
    stack = [f"{n} stacked" for n in entry["shape"][:lead]]
    return "[" + ", ".join(stack + named) + "]"


def _info(leaf: Leaf) -> dict[str, Any]:
    if isinstance(leaf, Tensor):
        return {
            "axes": [a.__name__ for a in leaf.axes],
            "shape": list(np.shape(leaf.array)),
            "dtype": np.dtype(leaf.array.dtype).name,
        }
    return {"axes": None, "shape": list(leaf.shape), "dtype": np.dtype(leaf.dtype).name}


def _checked_metadata(metadata: object) -> dict[str, str]:
    """``metadata`` as a new dict; ``SafetensorsError`` unless it maps str to str (the
    header's metadata is strings only) and leaves out axjax's own key."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise SafetensorsError(
            f"save_safetensors: metadata must be a dict of str to str, got a "
            f"{type(metadata).__name__}. Nothing was written."
        )
    entries: dict[Any, Any] = metadata
    for k, v in entries.items():
        if not isinstance(k, str) or not isinstance(v, str):
            bad = (
                f"key {k!r} ({type(k).__name__})"
                if not isinstance(k, str)
                else f"metadata[{k!r}] is the {type(v).__name__} {v!r:.40}"
            )
            raise SafetensorsError(
                f"save_safetensors: metadata must be a dict of str to str (the safetensors "
                f"header holds strings only): {bad}; pass str(value) or json.dumps(value). "
                "Nothing was written."
            )
    if _KEY in entries:
        raise SafetensorsError(
            f"save_safetensors: the metadata key {_KEY!r} is axjax's own. Nothing was written."
        )
    return dict(entries)


def save_safetensors(
    module: PyTree, path: str | os.PathLike[str], metadata: dict[str, str] | None = None
) -> None:
    """Write the arrays of ``module`` (Tensors and plain arrays) to a safetensors file.

    Args:
        module: an Equinox module (or any pytree) of Tensors; stacked Tensors (from
            ``eqx.filter_vmap`` over a constructor) are stored whole.
        path: the file to write (replaced only once the new file is complete).
        metadata: extra string metadata for the header (the key ``"axjax"`` is reserved).

    Raises:
        SafetensorsError: two leaves give the same entry name, ``metadata`` is not a dict
            of str to str, or the file cannot be written; an existing file at ``path`` is
            left as it was.

    Example:
        >>> ax.nn.save_safetensors(model, "model.safetensors")
        >>> model = ax.nn.load_safetensors(LM(cfg, key=jax.random.key(0)), "model.safetensors")
    """
    _SAVE.require()
    from safetensors.numpy import save_file

    extra = _checked_metadata(metadata)
    entries = _entries(module, "save_safetensors")
    arrays = {
        name: np.asarray(leaf.array if isinstance(leaf, Tensor) else leaf) for name, leaf in entries
    }
    extra[_KEY] = json.dumps({name: _info(leaf) for name, leaf in entries})
    target = Path(path)
    if target.is_dir():
        raise SafetensorsError(f"save_safetensors: {target} is a folder; give a file name")
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        save_file(arrays, os.fspath(tmp), metadata=extra)
        os.replace(tmp, target)
    except Exception as e:  # the backend's errors, a full disk, a missing folder
        tmp.unlink(missing_ok=True)
        raise SafetensorsError(
            f"save_safetensors: cannot write {target} ({e}); the previous file under that "
            "name, if any, is unchanged"
        ) from None


def load_safetensors(template: M, path: str | os.PathLike[str]) -> M:
    """``template`` with its arrays read from the safetensors file at ``path``.

    Raises:
        FileNotFoundError: there is no file at ``path``.
        SafetensorsError: the file is truncated or corrupt (the message names it and the
            problem), an entry is missing, or its axis names, sizes or dtype differ from the
            template's (the message names the entry and both sides).

    Example:
        >>> model = ax.nn.load_safetensors(LM(cfg, key=jax.random.key(0)), "model.safetensors")
    """
    _LOAD.require()
    from safetensors import safe_open

    where = os.fspath(path)
    if not os.path.exists(where):
        raise FileNotFoundError(f"load_safetensors: no file {where}")
    loaded = {}
    try:
        with safe_open(where, framework="numpy") as f:
            meta = _saved_axes(where, (f.metadata() or {}).get(_KEY))
            names = set(f.keys())
            for name, leaf in _entries(template, "load_safetensors"):
                if name not in names:
                    raise SafetensorsError(
                        f"load_safetensors: {where} has no entry {name!r} (the module's "
                        f"{_describe(_info(leaf))}); it has {', '.join(sorted(names)) or 'none'}"
                    )
                loaded[name] = _check(name, leaf, f.get_tensor(name), meta.get(name), where)
    except SafetensorsError:
        raise
    except Exception as e:  # the backend's own error on a damaged file
        raise SafetensorsError(
            f"load_safetensors: {where} is truncated or not a safetensors file ({e}); it "
            "cannot be loaded"
        ) from None
    out: M = jax.tree_util.tree_map_with_path(
        lambda p, x: _replace(loaded, p, x), template, is_leaf=_is_tensor
    )
    return out


def read_metadata(path: str | os.PathLike[str], key: str, where: str) -> str | None:
    """The string metadata ``key`` of the safetensors file at ``path`` (``None`` without);
    ``FileNotFoundError`` without a file, ``SafetensorsError`` for a damaged one."""
    _LOAD.require()
    from safetensors import safe_open

    name = os.fspath(path)
    if not os.path.exists(name):
        raise FileNotFoundError(f"{where}: no file {name}")
    try:
        with safe_open(name, framework="numpy") as f:
            return (f.metadata() or {}).get(key)
    except Exception as e:  # the backend's own error on a damaged file
        raise SafetensorsError(
            f"{where}: {name} is truncated or not a safetensors file ({e}); it cannot be loaded"
        ) from None


def entry_names(path: str | os.PathLike[str]) -> set[str]:
    """The names of the entries of a safetensors file that :func:`load_safetensors` read."""
    _LOAD.require()
    from safetensors import safe_open

    with safe_open(os.fspath(path), framework="numpy") as f:
        return set(f.keys())


def _saved_axes(where: str, text: str | None) -> dict[str, dict[str, Any]]:
    """The axjax metadata of the file (``{}`` without it); ``SafetensorsError`` when it is
    not what :func:`save_safetensors` writes."""
    if text is None:
        return {}
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as e:
        raise SafetensorsError(
            f"load_safetensors: {where} has corrupt axjax metadata ({e}); it cannot be loaded"
        ) from None
    ok = isinstance(meta, dict) and all(
        isinstance(v, dict)
        and isinstance(v.get("shape"), list)
        and all(isinstance(n, int) for n in v["shape"])
        and isinstance(v.get("dtype"), str)
        and (
            v.get("axes") is None
            or (
                isinstance(v["axes"], list)
                and all(isinstance(a, str) for a in v["axes"])
                and len(v["axes"]) <= len(v["shape"])
            )
        )
        for v in meta.values()
    )
    if not ok:
        raise SafetensorsError(
            f"load_safetensors: {where} has corrupt axjax metadata (each entry needs "
            "'axes', 'shape' and 'dtype'); it cannot be loaded"
        )
    found: dict[str, dict[str, Any]] = meta
    return found


def _check(
    name: str, leaf: Leaf, array: np.ndarray, saved: dict[str, Any] | None, where: str
) -> AnyTensor | jax.Array:
    want = _info(leaf)
    got: dict[str, Any] = (
        saved
        if saved is not None
        else {"axes": want["axes"], "shape": list(array.shape), "dtype": array.dtype.name}
    )
    if got["axes"] != want["axes"] or list(array.shape) != want["shape"]:
        got = {**got, "shape": list(array.shape)}
        if saved is None:  # a plain file: its array has a shape, not axes
            got = {**got, "axes": None}
        if got["axes"] is not None and len(got["axes"]) > len(got["shape"]):
            got = {**got, "axes": None}  # a plain file's array of another rank
        if (
            got["axes"] is not None
            and want["axes"] is not None
            and (sorted(got["axes"]) == sorted(want["axes"]) and got["axes"] != want["axes"])
        ):
            hint = " (same axes in another order: transpose the saved array)"
        else:
            hint = _layout_hint(list(array.shape), want["shape"])
        raise SafetensorsError(
            f"load_safetensors: entry {name!r} of {where} is {_describe(got)}, but the module "
            f"has {_describe(want)}{hint}"
        )
    if array.dtype.name != want["dtype"]:
        raise SafetensorsError(
            f"load_safetensors: entry {name!r} of {where} is {array.dtype.name}, the module's "
            f"is {want['dtype']} (cast the module first, e.g. ax.nn.cast(model, ax.BF16))"
        )
    value = jnp.asarray(array)
    if isinstance(leaf, Tensor):  # the template's axes, on the array (stacked ones too)
        rebuilt: AnyTensor = jax.tree_util.tree_unflatten(jax.tree.structure(leaf), [value])
        return rebuilt
    return value


def _layout_hint(got: list[int], want: list[int]) -> str:
    """A hint when the saved array has the module's sizes in another order: a file written in
    another framework's layout (PyTorch stores ``W x``, ``[out, in]``; a layer that reads
    ``x @ W`` stores ``[in, out]``)."""
    if len(got) < 2 or got == want or sorted(got) != sorted(want):
        return ""
    if got == want[::-1]:
        return (
            " (the module's shape transposed: a file in PyTorch's layout, which stores a "
            "weight as [out, in] for W x, where this layer keeps the axes shown; transpose "
            "the array when converting the file, e.g. {name: w.T} with safetensors.numpy)"
        )
    return (
        " (the module's sizes in another order: a file in another framework's layout, "
        "such as PyTorch's [out, in]; permute the array to the module's axis order when "
        "converting the file)"
    )


def _replace(loaded: dict[str, Any], path: tuple[object, ...], leaf: object) -> object:
    name = jax.tree_util.keystr(path, simple=True, separator=".")
    return loaded.get(name, leaf)
