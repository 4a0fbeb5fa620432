"""The Hugging Face converter harness: a declared table from each HF key to model leaves.

A checkpoint folder in Hugging Face format holds ``config.json`` and ``model.safetensors``.
A model family declares a :class:`Table` of :class:`Entry` rows: for each HF key, the model
leaf (or leaves) it fills and the *layout* of the HF array, each dimension of it a named
axis or a group of named axes flattened in order. The sizes come from the model's own
Tensors, so a row says only what the axes are::

    # HF's Conv1D stores [in, out]; c_attn's out is [q | k | v], each [Head, HeadDim]
    Entry("h.{i}.attn.c_attn.weight",
          ("blocks.{i}.attn.query_proj", "blocks.{i}.attn.key_proj", "blocks.{i}.attn.value_proj"),
          (Embed, (Part, Head, HeadDim)), split=Part)

Loading (:func:`load_weights`) checks the whole file before it builds anything: the key
set (another architecture names the first key that does not belong; a partial file lists
every missing key), then each entry's shape against its layout (the message names the HF
key and the expected axes, and says when the array is the expected one transposed). A model
never comes back with some weights left at their initial values. :func:`save_weights` is
the exact inverse (reshapes and transposes only: a round trip is bit-identical).
``{i}`` in a key or path stands for a layer index, expanded for ``i in range(layers)``.

The same table fills a model whose blocks are an :class:`~axjax.nn.LayerStack`: the stack
at ``blocks`` stands for ``blocks.0``, ``blocks.1``, ... (each layer's slice of its stacked
Tensors, the stacking axis first), so ``h.{i}.ln_1.weight`` is written to layer ``i`` of
``blocks.layers.ln_1.weight`` and read back from it; the checks and their messages are
the unstacked model's. A leaf's dtype (``ax.nn.cast(template, ax.BF16)``) is the dtype an
entry is loaded in, and the dtype :func:`save_weights` writes.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import AnyTensor, Axis, Floating, Tensor
from ..core._internal import Feature, PyTree, dtype_of_kind, shape_dtype_struct
from ..nn import LayerStack, SafetensorsError, cast
from ..nn._internal import leaves_with_paths

__all__ = [
    "ConversionError",
    "Entry",
    "Table",
    "load_weights",
    "read_config",
    "save_weights",
    "write_config",
]

M = TypeVar("M")
C = TypeVar("C", bound="DataclassInstance")  # a config: a dataclass

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
_LOAD = Feature("safetensors", "axjax.models.load_weights")
_SAVE = Feature("safetensors", "axjax.models.save_weights")

#: one dimension of an HF array: an axis, or several flattened in order
Dim = type[Axis] | tuple[type[Axis], ...]


class ConversionError(SafetensorsError):
    """A Hugging Face checkpoint does not fit the model: another architecture or size, a
    missing, wrongly sized or transposed entry, or a config.json that cannot be read."""

    __module__ = "axjax.models"


@dataclasses.dataclass(frozen=True)
class Entry:
    """One HF key: the model leaf (or leaves, with ``split``) it fills and its layout.

    Args:
        key: the HF key, ``{i}`` for a layer index (``"h.{i}.ln_1.weight"``).
        path: the model leaf's path (``"blocks.{i}.ln1.weight"``, the names
            ``ax.nn.save_safetensors`` gives), or one path per slice along ``split``.
        layout: the HF array's dimensions, each an axis or a tuple of axes flattened in
            order (row-major); every axis but ``split`` is one of the leaf's axes.
        split: an axis of ``layout`` that the model keeps as separate leaves, one per
            path (its size is the number of paths).

    Example:
        >>> Entry("wte.weight", "wte.weight", (Vocab, Embed))
        >>> Entry("h.{i}.mlp.c_fc.weight", "blocks.{i}.mlp.up.weight", (Embed, Mlp))
    """

    key: str
    path: str | tuple[str, ...]
    layout: tuple[Dim, ...]
    split: type[Axis] | None = None

    def __post_init__(self) -> None:
        flat = _flat(self.layout)
        if len(set(flat)) != len(flat):
            raise ValueError(f"Entry {self.key!r}: an axis occurs twice in its layout")
        if isinstance(self.path, tuple) != (self.split is not None):
            raise ValueError(f"Entry {self.key!r}: several paths go with split=, one without")
        if self.split is not None and self.split not in flat:
            raise ValueError(f"Entry {self.key!r}: split axis is not in its layout")

    @property
    def paths(self) -> tuple[str, ...]:
        """The model paths, one per slice along ``split`` (one without)."""
        return self.path if isinstance(self.path, tuple) else (self.path,)


@dataclasses.dataclass(frozen=True)
class Table:
    """A model family's checkpoint format: its ``model_type`` (config.json), its entries,
    HF keys that are accepted and not read (``ignore``: glob patterns, e.g. a stored
    attention mask buffer), keys the configuration makes unused that a file may hold only
    as a copy of an entry (``copies``: a tied ``lm_head.weight``), the ``architectures`` written to
    config.json, and an ``optional_prefix`` of the entries' keys that a file may leave out
    (``"transformer."``: a file of the base model, without the LM head's wrapper).

    Example:
        >>> TABLE = Table("gpt2", (Entry(...), ...), ignore=("lm_head.weight",))
    """

    model_type: str
    entries: tuple[Entry, ...]
    ignore: tuple[str, ...] = ()
    architectures: tuple[str, ...] = ()
    optional_prefix: str = ""
    #: keys the configuration makes unused, each ``(key, the entry it must copy, why)``: a
    #: file may store one only as that copy (a tied ``lm_head.weight``); one that differs
    #: contradicts the configuration, an error, never dropped
    copies: tuple[tuple[str, str, str], ...] = ()

    def expand(self, layers: int) -> list[Entry]:
        """The entries with ``{i}`` replaced by each layer index, in table order."""
        out: list[Entry] = []
        for e in self.entries:
            ids = range(layers) if "{i}" in e.key else range(1)
            for i in ids:
                path = tuple(p.replace("{i}", str(i)) for p in e.paths)
                key = e.key.replace("{i}", str(i))
                out.append(dataclasses.replace(e, key=key, path=path if e.split else path[0]))
        return out


def _flat(layout: tuple[Dim, ...]) -> tuple[type[Axis], ...]:
    return tuple(a for d in layout for a in (d if isinstance(d, tuple) else (d,)))


def _dim_text(d: Dim, sizes: Mapping[type[Axis], int]) -> str:
    if not isinstance(d, tuple):
        return f"{d.__name__}={sizes[d]}"
    inner = ", ".join(f"{a.__name__}={sizes[a]}" for a in d)
    return f"({inner})={math.prod(sizes[a] for a in d)}"


def _layout_text(layout: tuple[Dim, ...], sizes: Mapping[type[Axis], int]) -> str:
    return "[" + ", ".join(_dim_text(d, sizes) for d in layout) + "]"


@dataclasses.dataclass(frozen=True)
class _Slot:
    """Where a layer of a :class:`~axjax.nn.LayerStack` lives: the stacked leaf's path, its
    Tensor (the stacking axis first) and the layer's index along that axis."""

    path: str
    stacked: AnyTensor
    layer: int


def _name(path: tuple[Any, ...]) -> str:
    return jax.tree_util.keystr(path, simple=True, separator=".")


def _is_tensor(x: object) -> bool:
    return isinstance(x, Tensor)


def _is_node(x: object) -> bool:
    return isinstance(x, Tensor | LayerStack)


def _layer_views(t: AnyTensor) -> list[AnyTensor]:
    """The layers of a stacked Tensor, without the stacking axis (shapes only, for a
    template from ``eqx.filter_eval_shape``; else read to the host once)."""
    a, axes = t.array, t.axes[1:]
    if isinstance(a, jax.ShapeDtypeStruct):
        one = shape_dtype_struct(tuple(a.shape[1:]), a.dtype)
        return [Tensor(one, axes) for _ in range(a.shape[0])]
    host = np.asarray(a)
    return [Tensor(host[i], axes) for i in range(host.shape[0])]


def _leaves(model: PyTree) -> tuple[dict[str, AnyTensor], dict[str, _Slot]]:
    """The model's Tensors by path name (``blocks.0.attn.query_proj``), and the slots of
    stacked layers. A :class:`~axjax.nn.LayerStack` at ``blocks`` gives, for each of its
    stacked Tensors (``blocks.layers.ln_1.weight``, ``Layer`` first), one entry per layer
    named as a tuple of blocks names it (``blocks.0.ln_1.weight``): the layer's slice.
    ``ValueError`` for an array the table cannot fill (a plain array, or a Tensor stacked
    by ``vmap`` outside a LayerStack)."""
    out: dict[str, AnyTensor] = {}
    slots: dict[str, _Slot] = {}
    for p, leaf in jax.tree_util.tree_flatten_with_path(model, is_leaf=_is_node)[0]:
        name = _name(p)
        if isinstance(leaf, LayerStack):
            inner = jax.tree_util.tree_flatten_with_path(leaf.layers, is_leaf=_is_tensor)[0]
            for q, t in inner:
                if not isinstance(t, Tensor):
                    continue  # a static leaf (LayerStack refuses arrays that are not Tensors)
                pre, sub = f"{name}." if name else "", _name(q)
                for i, view in enumerate(_layer_views(t)):
                    out[f"{pre}{i}.{sub}"] = view
                    slots[f"{pre}{i}.{sub}"] = _Slot(f"{pre}layers.{sub}", t, i)
        elif isinstance(leaf, Tensor):
            if len(np.shape(leaf.array)) != len(leaf.axes):
                raise ValueError(
                    f"model leaf {name!r} is a stacked Tensor (dimensions before its named "
                    "axes, as eqx.filter_vmap makes); the table maps a tuple of blocks or an "
                    "ax.nn.LayerStack (its stacking axis named)"
                )
            out[name] = leaf
        elif isinstance(leaf, jax.Array | np.ndarray | jax.ShapeDtypeStruct):
            raise ValueError(
                f"model leaf {name!r} is a plain array, not a Tensor; the table fills Tensors"
            )
    return out, slots


def _resolve(
    entries: list[Entry], leaves: dict[str, AnyTensor]
) -> list[tuple[Entry, list[AnyTensor], dict[type[Axis], int]]]:
    """Each entry with its leaves and the sizes of its layout's axes; ``ValueError`` for a
    table that does not fit the model (a programming error, not a bad checkpoint)."""
    out = []
    covered: set[str] = set()
    for e in entries:
        missing = [p for p in e.paths if p not in leaves]
        if missing:
            raise ValueError(f"table entry {e.key!r}: the model has no leaf {missing[0]!r}")
        ts = [leaves[p] for p in e.paths]
        covered.update(e.paths)
        sizes: dict[type[Axis], int] = dict(ts[0].sizes)
        if e.split is not None:
            sizes[e.split] = len(ts)
        want = set(_flat(e.layout)) - {e.split}
        if want != set(ts[0].axes) or any(t.sizes != ts[0].sizes for t in ts):
            names = ", ".join(a.__name__ for a in ts[0].axes)
            raise ValueError(
                f"table entry {e.key!r}: its layout's axes are not the leaf's [{names}]"
            )
        out.append((e, ts, sizes))
    left = sorted(set(leaves) - covered)
    if left:
        raise ValueError(f"the table leaves model leaves unfilled: {', '.join(left)}")
    return out


# ----------------------------------------------------------------------------- config
def read_json_object(folder: str | os.PathLike[str], name: str, caller: str) -> dict[str, Any]:
    """The JSON object in ``folder/name`` (``config.json``, ``adapter_config.json``); a
    missing folder or file is a ``FileNotFoundError``, a file that is not a JSON object a
    ``ConversionError``, each naming ``caller`` and the path."""
    where = Path(folder) / name
    if not Path(folder).is_dir():
        what = "is a file, not a folder" if Path(folder).exists() else "does not exist"
        raise FileNotFoundError(f"{caller}: the folder {folder} {what}")
    if not where.is_file():
        raise FileNotFoundError(f"{caller}: no {name} in {folder}")
    try:
        raw = json.loads(where.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise ConversionError(f"{caller}: {where} is not JSON ({e})") from None
    if not isinstance(raw, dict):
        raise ConversionError(f"{caller}: {where} is not a JSON object")
    return raw


def read_config(folder: str | os.PathLike[str], config_type: type[C], table: Table) -> C:
    """The dataclass ``config_type`` read from ``folder/config.json``: each field from the
    key of its name (a missing key takes the field's default), unknown keys ignored.

    Raises:
        FileNotFoundError: ``folder`` does not exist, or has no config.json.
        ConversionError: the file is not JSON, its ``model_type`` is not the table's, or a
            field without a default is missing or has the wrong type.
    """
    where = Path(folder) / CONFIG
    raw = read_json_object(folder, CONFIG, table.model_type)
    kind = raw.get("model_type", table.model_type)
    if kind != table.model_type:
        raise ConversionError(
            f"{table.model_type}: {where} is a {kind!r} checkpoint (model_type), not "
            f"{table.model_type!r}: load it with that architecture's from_hf"
        )
    values: dict[str, Any] = {}
    for f in dataclasses.fields(config_type):
        if f.name not in raw:
            if f.default is dataclasses.MISSING:
                raise ConversionError(f"{table.model_type}: {where} has no {f.name!r}")
            continue
        v = raw[f.name]
        default = f.default
        ok_type = type(default) if default is not dataclasses.MISSING else None
        if ok_type is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if v is None and "None" in str(f.type):  # an optional field: null is its value
            values[f.name] = v
            continue
        if ok_type is not None and default is not None and not isinstance(v, ok_type):
            raise ConversionError(
                f"{table.model_type}: {where}'s {f.name!r} is {v!r}, expected a {ok_type.__name__}"
            )
        values[f.name] = v
    config: C = config_type(**values)
    return config


def write_config(
    folder: str | os.PathLike[str],
    config: object,
    table: Table,
    *,
    dtype: str | None = None,
    omit_none: bool = False,
) -> None:
    """Write ``config`` (a dataclass) to ``folder/config.json`` with the table's
    ``model_type`` and ``architectures``, as Hugging Face's loaders expect, and ``dtype``
    (the parameters' dtype by its numpy name, ``"bfloat16"``) as its ``"dtype"`` key.
    ``omit_none``: a field that is ``None`` and ``None`` by default is left out (read back
    as its default; a loader that reads a key as given, as transformers' Qwen2 reads
    ``head_dim``, then takes its own default)."""
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"write_config: config is a dataclass instance, got {type(config)}")
    out: dict[str, Any] = {"model_type": table.model_type}
    if table.architectures:
        out["architectures"] = list(table.architectures)
    fields = dataclasses.asdict(config)
    if omit_none:
        unset = {f.name for f in dataclasses.fields(config) if f.default is None}
        fields = {k: v for k, v in fields.items() if v is not None or k not in unset}
    out.update(fields)
    if dtype is not None:
        out["dtype"] = dtype
    Path(folder).mkdir(parents=True, exist_ok=True)
    _atomic_write(Path(folder) / CONFIG, (json.dumps(out, indent=2) + "\n").encode())


def _atomic_write(target: Path, data: bytes) -> None:
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, target)


# ----------------------------------------------------------------------------- weights
def load_weights(folder: str | os.PathLike[str], template: M, table: Table, *, layers: int) -> M:
    """``template`` with every Tensor read from ``folder/model.safetensors`` by ``table``.

    Every leaf of ``template`` must be filled by an entry (else ``ValueError``: the table
    is incomplete), so the template may come from ``eqx.filter_eval_shape`` (no
    initialiser runs). The file is checked whole before anything is built; floating arrays
    are cast to the leaf's dtype.

    Raises:
        FileNotFoundError: no model.safetensors in ``folder``.
        ConversionError: a key that is not the table's (another architecture or size: the
            first such key is named), missing keys (all listed), an entry of another shape
            (the HF key and its expected axes are named; a transposed entry is called
            that), or a truncated or corrupt file.

    Example:
        >>> model = load_weights(folder, GPT2(config, key=jax.random.key(0)), TABLE, layers=2)
    """
    _LOAD.require()
    from safetensors import safe_open

    where = Path(folder) / WEIGHTS
    if not where.is_file():
        raise FileNotFoundError(f"{table.model_type}: no {WEIGHTS} in {folder}")
    leaves, slots = _leaves(template)
    plan = _resolve(table.expand(layers), leaves)
    name = table.model_type
    try:
        with safe_open(os.fspath(where), framework="numpy") as f:
            keys = list(f.keys())
            pre = table.optional_prefix
            bare = bool(pre) and not any(k.startswith(pre) for k in keys)
            named = {
                e.key: e.key[len(pre) :] if bare and e.key.startswith(pre) else e.key
                for e, _, _ in plan
            }
            unused = tuple(k for k, _, _ in table.copies)
            _check_keys(name, where, keys, list(named.values()), table.ignore + unused)
            arrays = {k: f.get_tensor(named[k]) for k in named}
            _check_copies(name, where, table, keys, lambda k: f.get_tensor(named.get(k, k)))
    except ConversionError:
        raise
    except Exception as err:  # the backend's own error on a damaged file
        raise ConversionError(
            f"{name}: {where} is truncated or not a safetensors file ({err}); it cannot be loaded"
        ) from None
    filled: dict[str, np.ndarray] = {}  # by the model's path (a stacked leaf's: whole)
    for e, ts, sizes in plan:
        shown = dataclasses.replace(e, key=named[e.key])  # the key as the file spells it
        for path, value in zip(e.paths, _unpack(name, where, shown, ts, sizes, arrays[e.key])):
            slot = slots.get(path)
            if slot is None:
                filled[path] = value
                continue
            whole = filled.get(slot.path)
            if whole is None:  # every layer of it is filled: _resolve covers each
                whole = filled[slot.path] = np.empty(slot.stacked.shape, value.dtype)
            whole[slot.layer] = value
    out: M = jax.tree_util.tree_map_with_path(
        lambda p, x: _filled(filled.get(_name(p)), x),
        template,
        is_leaf=_is_tensor,
    )
    return out


def load_model(
    folder: str | os.PathLike[str],
    build: Callable[[jax.Array], M],
    table: Table,
    *,
    layers: int,
    dtype: type[Floating] | None,
    where: str,
) -> M:
    """The model ``build(key)`` makes (its initialisers never run: only its structure is
    traced), with every parameter read from ``folder`` by ``table`` (:func:`load_weights`),
    straight into ``dtype`` when one is given (else as ``build`` makes it). ``where`` names
    the caller in errors: a ``dtype`` that is not floating is a ``TypeError``."""
    cast_to = None if dtype is None else dtype_of_kind(where, "dtype", dtype, "floating")

    def make(key: jax.Array) -> M:
        model = build(key)
        return model if cast_to is None else cast(model, cast_to)

    template: M = eqx.filter_eval_shape(make, jax.random.key(0))
    return load_weights(folder, template, table, layers=layers)


def _filled(value: np.ndarray | None, leaf: object) -> object:
    if value is None or not isinstance(leaf, Tensor):
        return leaf
    return Tensor(jnp.asarray(value), leaf.axes)


def _check_keys(
    name: str, where: Path, got: list[str], want: list[str], ignore: tuple[str, ...]
) -> None:
    wanted = set(want)
    extra = [
        k for k in sorted(got) if k not in wanted and not any(fnmatch.fnmatch(k, g) for g in ignore)
    ]
    have = set(got)
    missing = [k for k in want if k not in have]
    if extra:
        more = f"; {len(missing)} of the model's keys are missing" if missing else ""
        raise ConversionError(
            f"{name}: {where} is not a {name} checkpoint of this configuration: the first "
            f"mismatching key is {extra[0]!r}, which this model does not have{more} "
            "(another architecture, or a config.json of another size)"
        )
    if missing:
        raise ConversionError(
            f"{name}: {where} is a partial checkpoint, {len(missing)} of {len(want)} entries "
            f"are missing: {', '.join(missing)} (nothing was loaded)"
        )


def _check_copies(
    name: str,
    where: Path,
    table: Table,
    keys: list[str],
    read: Callable[[str], np.ndarray],
) -> None:
    """Each key of ``table.copies`` the file holds must equal the entry it copies: else
    the file contradicts the configuration (a ``ConversionError`` naming both)."""
    for key, of, why in table.copies:
        if key in keys and not np.array_equal(read(key), read(of)):
            raise ConversionError(
                f"{name}: {where} holds {key!r}, which the configuration leaves unused "
                f"({why}), and it is not a copy of {of!r}: the file and config.json "
                "contradict each other (fix config.json, or remove the key); nothing was loaded"
            )


def _unpack(
    name: str,
    where: Path,
    e: Entry,
    ts: list[AnyTensor],
    sizes: dict[type[Axis], int],
    array: np.ndarray,
) -> list[np.ndarray]:
    """The arrays of one entry's leaves (in each leaf's axis order and dtype), from its HF
    array; ``ConversionError`` on a shape that is not the layout's."""
    want = tuple(
        math.prod(sizes[a] for a in (d if isinstance(d, tuple) else (d,))) for d in e.layout
    )
    got = tuple(array.shape)
    if got != want:
        layout = _layout_text(e.layout, sizes)
        if len(got) == len(want) >= 2 and got == want[::-1]:
            why = "the expected array transposed (convert the HF weight, do not transpose it)"
        elif sorted(got) == sorted(want):
            why = "the expected sizes in another order"
        else:
            why = "another size (a checkpoint of another configuration?)"
        raise ConversionError(
            f"{name}: entry {e.key!r} of {where} has shape {list(got)}, expected {layout}: {why}"
        )
    # jnp's issubdtype: numpy's own does not count bfloat16 (ml_dtypes) as floating
    if not jnp.issubdtype(array.dtype, jnp.floating) and jnp.issubdtype(
        ts[0].array.dtype, jnp.floating
    ):
        raise ConversionError(
            f"{name}: entry {e.key!r} of {where} is {array.dtype.name}, expected floating-point"
        )
    flat = _flat(e.layout)
    full = array.reshape([sizes[a] for a in flat])
    out: list[np.ndarray] = []
    for i, t in enumerate(ts):
        part, axes = full, list(flat)
        if e.split is not None:
            k = axes.index(e.split)
            part = np.take(part, i, axis=k)
            del axes[k]
        part = np.transpose(part, [axes.index(a) for a in t.axes])
        out.append(part.astype(np.dtype(jnp.dtype(t.array.dtype)), copy=False))
    return out


#: the leaf names of LoRA adapters (``ax.nn.lora``)
_ADAPTERS = (".lora_a", ".lora_b")


def save_weights(
    folder: str | os.PathLike[str], model: PyTree, table: Table, *, layers: int
) -> None:
    """Write ``model``'s Tensors to ``folder/model.safetensors`` by ``table`` (the inverse of
    :func:`load_weights`: reshapes and transposes only). The file is replaced only once the
    new one is complete.

    A model with unmerged LoRA adapters is a ``ValueError`` (checkpoints hold plain
    weights: merge them with ``ax.nn.merge_lora``, or save them with ``ax.nn.save_lora``).

    Example:
        >>> save_weights(folder, model, TABLE, layers=2)
    """
    _SAVE.require()
    adapted = sorted(
        {n.rsplit(".", 1)[0] for n, _ in leaves_with_paths(model) if n.endswith(_ADAPTERS)}
    )
    if adapted:
        raise ValueError(
            f"{table.model_type}.to_hf: the model has unmerged LoRA adapters (at "
            f"{', '.join(adapted[:4])}{', ...' if len(adapted) > 4 else ''}); a checkpoint "
            "holds plain weights: write to_hf(ax.nn.merge_lora(model), folder) for the "
            "adapted model, or ax.nn.save_lora(model, path) for the adapters alone"
        )
    from safetensors.numpy import save_file

    plan = _resolve(table.expand(layers), _leaves(model)[0])
    arrays: dict[str, np.ndarray] = {}
    for e, ts, sizes in plan:
        flat = _flat(e.layout)
        own = [a for a in flat if a != e.split]
        parts = [np.transpose(np.asarray(t.array), [t.axes.index(a) for a in own]) for t in ts]
        full = parts[0] if e.split is None else np.stack(parts, axis=flat.index(e.split))
        shape = [
            math.prod(sizes[a] for a in (d if isinstance(d, tuple) else (d,))) for d in e.layout
        ]
        arrays[e.key] = np.ascontiguousarray(full.reshape(shape))
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    final = target / WEIGHTS
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    try:
        save_file(arrays, os.fspath(tmp), metadata={"format": "pt"})
        os.replace(tmp, final)
    except Exception as err:  # a full disk, a read-only folder
        tmp.unlink(missing_ok=True)
        raise ConversionError(
            f"{table.model_type}: cannot write {final} ({err}); the previous file, if any, "
            "is unchanged"
        ) from None
