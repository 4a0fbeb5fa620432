"""Save and load a module's weights as a safetensors file, with axis names in the metadata.

The file is a standard ``safetensors`` file (``safetensors.numpy``): one entry per array
leaf of the module, named by its path (``blocks.0.attn.query_proj``), and the header's
metadata key ``"axjax"`` holding, for each entry, its axis names and sizes (JSON). Any
safetensors reader (PyTorch, the Hugging Face tools) reads the arrays; axjax checks the axes.

Loading is into a template module of the same structure (as ``eqx.tree_deserialise_leaves``
does): each entry must exist, with the template's dtype, and the axis names and sizes the
template has. A file without axjax metadata (written from plain arrays) loads when each
array's shape is the template's shape in the template's axis order.
"""

from __future__ import annotations

import json
import os
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from ..core import Tensor
from ..core._internal import Feature

__all__ = ["SafetensorsError", "load_safetensors", "save_safetensors"]

M = TypeVar("M")
_KEY = "axjax"
_SAVE = Feature("safetensors", "ax.nn.save_safetensors")
_LOAD = Feature("safetensors", "ax.nn.load_safetensors")


class SafetensorsError(ValueError):
    """A safetensors file does not fit the module it is loaded into."""

    __module__ = "axjax.nn"


def _entries(module: Any) -> list[tuple[str, Any]]:
    leaves = jax.tree_util.tree_flatten_with_path(module, is_leaf=lambda x: isinstance(x, Tensor))[
        0
    ]
    out = []
    for path, leaf in leaves:
        if isinstance(leaf, Tensor) or isinstance(leaf, jax.Array | np.ndarray):
            out.append((jax.tree_util.keystr(path, simple=True, separator="."), leaf))
    return out


def _describe(entry: dict[str, Any]) -> str:
    axes = entry.get("axes")
    if axes is None:
        return f"an array of shape {tuple(entry['shape'])}"
    return "[" + ", ".join(f"{a}={n}" for a, n in zip(axes, entry["shape"], strict=True)) + "]"


def _info(leaf: Any) -> dict[str, Any]:
    if isinstance(leaf, Tensor):
        return {
            "axes": [a.__name__ for a in leaf.axes],
            "shape": list(leaf.shape),
            "dtype": np.dtype(leaf.array.dtype).name,
        }
    return {"axes": None, "shape": list(leaf.shape), "dtype": np.dtype(leaf.dtype).name}


def save_safetensors(
    module: Any, path: str | os.PathLike[str], metadata: dict[str, str] | None = None
) -> None:
    """Write the arrays of ``module`` (Tensors and plain arrays) to a safetensors file.

    Args:
        module: an Equinox module (or any pytree) of Tensors.
        path: the file to write.
        metadata: extra string metadata for the header (the key ``"axjax"`` is reserved).

    Example:
        >>> ax.nn.save_safetensors(model, "model.safetensors")
        >>> model = ax.nn.load_safetensors(LM(cfg, key=jax.random.key(0)), "model.safetensors")
    """
    _SAVE.require()
    from safetensors.numpy import save_file

    entries = _entries(module)
    arrays = {
        name: np.asarray(leaf.array if isinstance(leaf, Tensor) else leaf) for name, leaf in entries
    }
    extra = dict(metadata or {})
    if _KEY in extra:
        raise ValueError(f"save_safetensors: the metadata key {_KEY!r} is axjax's own")
    extra[_KEY] = json.dumps({name: _info(leaf) for name, leaf in entries})
    save_file(arrays, os.fspath(path), metadata=extra)


def load_safetensors(template: M, path: str | os.PathLike[str]) -> M:
    """``template`` with its arrays read from the safetensors file at ``path``.

    Raises:
        SafetensorsError: an entry is missing, or its axis names, sizes or dtype differ
            from the template's (the message names the entry and both sides).

    Example:
        >>> model = ax.nn.load_safetensors(LM(cfg, key=jax.random.key(0)), "model.safetensors")
    """
    _LOAD.require()
    from safetensors import safe_open

    where = os.fspath(path)
    with safe_open(where, framework="numpy") as f:
        meta = json.loads((f.metadata() or {}).get(_KEY, "{}"))
        names = set(f.keys())
        loaded = {}
        for name, leaf in _entries(template):
            if name not in names:
                raise SafetensorsError(
                    f"load_safetensors: {where} has no entry {name!r} (the module's "
                    f"{_describe(_info(leaf))}); it has {', '.join(sorted(names)) or 'none'}"
                )
            loaded[name] = _check(name, leaf, f.get_tensor(name), meta.get(name), where)
    out: M = jax.tree_util.tree_map_with_path(
        lambda p, x: _replace(loaded, p, x), template, is_leaf=lambda x: isinstance(x, Tensor)
    )
    return out


def _check(
    name: str, leaf: Any, array: np.ndarray, saved: dict[str, Any] | None, where: str
) -> Any:
    want = _info(leaf)
    got = (
        saved
        if saved is not None
        else {"axes": want["axes"], "shape": list(array.shape), "dtype": array.dtype.name}
    )
    if got["axes"] != want["axes"] or list(array.shape) != want["shape"]:
        got = {**got, "shape": list(array.shape)}
        if (
            got["axes"] is not None
            and want["axes"] is not None
            and (sorted(got["axes"]) == sorted(want["axes"]) and got["axes"] != want["axes"])
        ):
            hint = " (same axes in another order: transpose the saved array)"
        else:
            hint = ""
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
    return Tensor(value, leaf.axes) if isinstance(leaf, Tensor) else value


def _replace(loaded: dict[str, Any], path: Any, leaf: Any) -> Any:
    name = jax.tree_util.keystr(path, simple=True, separator=".")
    return loaded.get(name, leaf)
