"""LoRA adapters in PEFT's layout: ``adapter_config.json`` + ``adapter_model.safetensors``.

PEFT (Hugging Face's ``peft``) stores an adapter of the module at HF path ``m`` as
``base_model.model.<m>.lora_A.weight`` ``[r, in]`` and ``.lora_B.weight`` ``[out, r]``, the
module's update ``(lora_alpha / r) · B A``, with ``r`` and ``lora_alpha`` from the config
(``rank_pattern`` / ``alpha_pattern`` give a module its own). The module paths and the
``in`` / ``out`` dimensions are a family's Hugging Face table's (:class:`~axjax.models.Table`):
an entry ``<m>.weight`` whose two dimensions are the adapted weight's in-axes and out-axes
(``fan_in_fan_out``: GPT-2's Conv1D stores ``[in, out]``).

An axjax adapter is found in the model by its leaves ``lora_a`` ``(*lead, Rank, *in)`` and
``lora_b`` ``(*lead, *out, Rank)`` and its static ``alpha``: an ``ax.nn.LoRA`` layer at
``L`` adapts the table's ``L.weight``, an adapted weight at ``P`` the table's ``P``; ``lead``
is a :class:`~axjax.nn.LayerStack`'s stacking axis. One HF module that the model keeps as
several weights (GPT-2's ``c_attn``: query, key and value) gets one adapter: the parts'
``A`` concatenated along the rank (PEFT's ``r`` is their sum) and a block-diagonal ``B``
(zero rows for a part without an adapter), which computes exactly the parts' updates;
reading splits ``B`` into the parts, ``A`` shared.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import AnyTensor, Axis, Tensor
from ..core._internal import Feature, check_not_donated
from ..nn import Affine, LayerStack, Linear, LoRA, Rank, by_path, lora
from ._gpt2 import GPT2
from ._gpt2 import TABLE as GPT2_TABLE
from ._hf import ConversionError, Entry, Table, read_json_object
from ._llama import Llama
from ._llama import table as llama_table

__all__ = ["load_peft", "read_peft", "save_peft", "write_peft"]

M = TypeVar("M")

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
#: what PEFT puts before a module's path in its key names (a causal LM's)
PREFIX = "base_model.model."
_LOAD = Feature("safetensors", "axjax.models.load_peft")
_SAVE = Feature("safetensors", "axjax.models.save_peft")
_DONATED = "pass the model a donating step returned (step.model), not the one it was given"
_KEY = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_(?P<part>[AB])\.weight$")

#: the fields of adapter_config.json as peft 0.21 writes them: axjax writes these values
#: (``r``, ``lora_alpha``, the patterns, ``target_modules``, ``fan_in_fan_out`` and
#: ``base_model_name_or_path`` are the adapter's)
_WRITTEN: dict[str, Any] = {
    "alora_invocation_tokens": None, "alpha_pattern": {}, "arrow_config": None,
    "auto_mapping": None, "base_model_name_or_path": None, "bias": "none",
    "corda_config": None, "ensure_weight_tying": False, "eva_config": None,
    "exclude_modules": None, "fan_in_fan_out": False, "inference_mode": True,
    "init_lora_weights": True, "kasa_config": None, "layer_replication": None,
    "layers_pattern": None, "layers_to_transform": None, "loftq_config": {},
    "lora_alpha": 8, "lora_bias": False, "lora_dropout": 0.0, "lora_ga_config": None,
    "megatron_config": None, "megatron_core": "megatron.core", "modules_to_save": None,
    "monteclora_config": None, "peft_type": "LORA", "qalora_group_size": 16, "r": 8,
    "rank_pattern": {}, "revision": None, "target_modules": [], "target_parameters": None,
    "task_type": "CAUSAL_LM", "trainable_token_indices": None, "use_bdlora": None,
    "use_dora": False, "use_qalora": False, "use_rslora": False, "velora_config": None,
}  # fmt: skip

#: fields whose other values change what the adapter computes in a way axjax's LoRA does
#: not: each must be absent or this value (the error names the field)
_REFUSED: dict[str, tuple[Any, str]] = {
    "peft_type": ("LORA", "only LoRA adapters are read"),
    "use_dora": (False, "DoRA's magnitude vector is not an axjax LoRA"),
    "use_rslora": (False, "rsLoRA scales by alpha / sqrt(r), axjax by alpha / r"),
    "bias": ("none", "trained biases are not adapters"),
    "lora_bias": (False, "a bias on lora_B is not an axjax LoRA"),
    "modules_to_save": (None, "fully trained modules are not adapters"),
    "trainable_token_indices": (None, "trained embedding rows are not adapters"),
    "target_parameters": (None, "adapters on parameters, not modules"),
    "layer_replication": (None, "replicated layers change the model"),
    "alora_invocation_tokens": (None, "activated LoRA switches on by tokens"),
    "use_qalora": (False, "QA-LoRA pools the input"),
    "use_bdlora": (None, "block-diagonal LoRA is another layout"),
}


@dataclasses.dataclass(frozen=True)
class _Adapter:
    """One layer's adapter: the table path of its base weight, ``a`` ``(Rank, *in)``,
    ``b`` ``(*out, Rank)`` (arrays and axes) and ``alpha``."""

    target: str
    a: np.ndarray
    a_axes: tuple[type[Axis], ...]
    b: np.ndarray
    b_axes: tuple[type[Axis], ...]
    alpha: float

    @property
    def rank(self) -> int:
        return int(self.a.shape[0])


def _is_adapter(x: object) -> bool:
    return (
        isinstance(x, eqx.Module)
        and isinstance(getattr(x, "lora_a", None), Tensor)
        and isinstance(getattr(x, "lora_b", None), Tensor)
    )


def _name(path: tuple[Any, ...]) -> str:
    return jax.tree_util.keystr(path, simple=True, separator=".")


@dataclasses.dataclass(frozen=True)
class _Found:
    """An adapter module in a model: its path (``blocks.layers.fc`` in a stack), the
    module, and in a :class:`LayerStack` the stack's path, the path inside a layer and the
    number of layers."""

    name: str
    module: Any
    stack: str | None = None
    inner: str = ""
    layers: int = 0

    def layer_name(self, i: int) -> str:
        """The unstacked path of layer ``i`` (``blocks.0.fc``)."""
        return f"{self.stack}.{i}.{self.inner}" if self.stack else f"{i}.{self.inner}"


def _walk(model: object) -> Iterator[_Found]:
    """The adapter modules of ``model`` (``ValueError`` for one in a stack without the
    stacking axis first)."""
    found = jax.tree_util.tree_flatten_with_path(
        model, is_leaf=lambda x: isinstance(x, LayerStack) or _is_adapter(x)
    )[0]
    for p, node in found:
        if not isinstance(node, LayerStack):
            if _is_adapter(node):
                yield _Found(_name(p), node)
            continue
        inner = jax.tree_util.tree_flatten_with_path(node.layers, is_leaf=_is_adapter)[0]
        for q, sub in inner:
            if not _is_adapter(sub):
                continue
            stack, rest = _name(p), _name(q)
            name = f"{stack}.layers.{rest}" if stack else f"layers.{rest}"
            if sub.lora_a.axes[0] is not node.axis:
                raise ValueError(
                    f"the adapter at {name} has no stacking axis {node.axis.__name__} "
                    f"first (lora_a: {_axes(sub.lora_a)}): it cannot run in the stack"
                )
            yield _Found(name, sub, stack, rest, sub.lora_a.shape[0])


def _axes(t: AnyTensor) -> str:
    return "[" + ", ".join(a.__name__ for a in t.axes) + "]"


def _target(name: str, module: object) -> str:
    """The table path of the weight an adapter at ``name`` adapts."""
    return f"{name}.weight" if isinstance(module, LoRA) else name


def _adapters(model: object) -> list[_Adapter]:
    """The adapters of ``model``, one per layer (a stacked adapter gives one per layer)."""
    out: list[_Adapter] = []
    for f in _walk(model):
        m = f.module
        a, b = np.asarray(m.lora_a.array), np.asarray(m.lora_b.array)
        ax_a, ax_b, alpha = m.lora_a.axes, m.lora_b.axes, float(m.alpha)
        if f.stack is None:
            out.append(_Adapter(_target(f.name, m), a, ax_a, b, ax_b, alpha))
            continue
        for i in range(f.layers):
            target = _target(f.layer_name(i), m)
            out.append(_Adapter(target, a[i], ax_a[1:], b[i], ax_b[1:], alpha))
    return out


# ----------------------------------------------------------------------------- layout
@dataclasses.dataclass(frozen=True)
class _Module:
    """One HF module's adapter layout: its entry (expanded), which of the entry's two
    dimensions is the input (0: ``[in, out]`` as a Conv1D), and the in- and out-axes in
    HF's order (the out-axes with the split axis, if any)."""

    entry: Entry
    in_dim: int
    in_axes: tuple[type[Axis], ...]
    out_axes: tuple[type[Axis], ...]

    @property
    def name(self) -> str:
        return self.entry.key.removesuffix(".weight")


def _module(
    entry: Entry, in_axes: tuple[type[Axis], ...], out_axes: tuple[type[Axis], ...]
) -> _Module:
    """The layout of ``entry`` for an adapter of these in- and out-axes; ``ValueError``
    when the entry is not a linear map from the one to the other."""
    dims = [d if isinstance(d, tuple) else (d,) for d in entry.layout]
    outs = {a for a in out_axes} | ({entry.split} if entry.split is not None else set())
    for k in range(len(dims)):
        if len(dims) == 2 and set(dims[k]) == set(in_axes) and set(dims[1 - k]) == outs:
            return _Module(entry, k, dims[k], dims[1 - k])
    raise ValueError(
        f"the table's {entry.key!r} is not a linear map from "
        f"[{', '.join(a.__name__ for a in in_axes)}] to "
        f"[{', '.join(a.__name__ for a in out_axes)}]: no PEFT adapter of it"
    )


def _index(table: Table, layers: int) -> dict[str, tuple[Entry, int]]:
    """Each table path (one layer's) -> its entry and its part along the entry's split."""
    return {p: (e, j) for e in table.expand(layers) for j, p in enumerate(e.paths)}


def _linear_modules(table: Table, layers: int) -> list[str]:
    """The HF module paths of the table's two-dimensional ``.weight`` entries."""
    return [
        e.key.removesuffix(".weight")
        for e in table.expand(layers)
        if e.key.endswith(".weight") and len(e.layout) == 2
    ]


def _targets(adapted: set[str], modules: list[str]) -> list[str]:
    """``target_modules`` for PEFT: for each adapted module its shortest path suffix that
    selects only adapted modules (PEFT matches a name or a ``.``-suffix)."""
    out: set[str] = set()
    for m in sorted(adapted):
        segs = m.split(".")
        for k in range(1, len(segs) + 1):
            suffix = ".".join(segs[-k:])
            if all(t in adapted for t in modules if _matches(t, suffix)):
                out.add(suffix)
                break
    return sorted(out)


def _matches(module: str, target: str) -> bool:
    return module == target or module.endswith("." + target)


def _json_number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


# ----------------------------------------------------------------------------- write
def _hf_a(mod: _Module, ad: _Adapter) -> np.ndarray:
    """``A`` as PEFT stores it: ``[r, in]``, the in-axes flattened in HF's order."""
    perm = [ad.a_axes.index(Rank)] + [ad.a_axes.index(a) for a in mod.in_axes]
    return ad.a.transpose(perm).reshape(ad.rank, -1)


def _hf_b(mod: _Module, ad: _Adapter) -> np.ndarray:
    """``B`` with the out-axes (but the split axis) in HF's order, then the rank."""
    out = [a for a in mod.out_axes if a is not mod.entry.split]
    return ad.b.transpose([ad.b_axes.index(a) for a in out] + [ad.b_axes.index(Rank)])


def _module_arrays(
    mod: _Module, parts: dict[int, _Adapter]
) -> tuple[np.ndarray, np.ndarray, int, float]:
    """PEFT's ``A [r, in]``, ``B [out, r]``, ``r`` and ``lora_alpha`` of one module. For an
    entry split into parts: ``A`` the parts' concatenated, ``B`` block-diagonal (zero for a
    part without an adapter), ``lora_alpha`` the first part's scale times ``r`` (a part
    of another scale has its ratio folded into its block of ``B``)."""
    if mod.entry.split is None:
        ad = parts[0]
        return _hf_a(mod, ad), _hf_b(mod, ad).reshape(-1, ad.rank), ad.rank, ad.alpha
    order = sorted(parts)
    total = sum(parts[j].rank for j in order)
    first = parts[order[0]]
    scale = first.alpha / first.rank
    at = mod.out_axes.index(mod.entry.split)
    b_out = _hf_b(mod, first).shape[:-1]
    sizes = (*b_out[:at], len(mod.entry.paths), *b_out[at:])
    full = np.zeros((*sizes, total), first.b.dtype)
    col = 0
    for j in order:
        ad = parts[j]
        ratio = (ad.alpha / ad.rank) / scale
        block = _hf_b(mod, ad)
        where: list[Any] = [slice(None)] * len(sizes)
        where[at] = j
        full[(*where, slice(col, col + ad.rank))] = block if ratio == 1 else block * ratio
        col += ad.rank
    a = np.concatenate([_hf_a(mod, parts[j]) for j in order])
    return a, full.reshape(-1, total), total, scale * total


def _config(
    ranks: dict[str, int],
    alphas: dict[str, float],
    targets: list[str],
    fan_in_fan_out: bool,
    base: str | None,
) -> dict[str, Any]:
    """adapter_config.json: the most common rank and alpha as ``r`` and ``lora_alpha``,
    the other modules' in ``rank_pattern`` / ``alpha_pattern`` by their full path."""
    (r, alpha), _ = Counter((ranks[m], alphas[m]) for m in ranks).most_common(1)[0]
    out = dict(_WRITTEN)
    out.update(
        base_model_name_or_path=base,
        fan_in_fan_out=fan_in_fan_out,
        r=r,
        lora_alpha=_json_number(alpha),
        rank_pattern={m: v for m, v in sorted(ranks.items()) if v != r},
        alpha_pattern={m: _json_number(v) for m, v in sorted(alphas.items()) if v != alpha},
        target_modules=targets,
    )
    return out


def write_peft(
    folder: str | os.PathLike[str],
    model: object,
    table: Table,
    *,
    layers: int,
    base_model_name_or_path: str | None = None,
) -> None:
    """Write the adapters of ``model`` to ``folder`` in PEFT's layout (``adapter_config.json``,
    ``adapter_model.safetensors``), with the HF module paths of ``table`` (the family's
    table, ``layers`` deep). :func:`save_peft` calls it with the model's own table.

    Raises:
        ValueError: the model has no adapters, or one that adapts no linear entry of the table.

    Example:
        >>> write_peft("out/adapter", tuned, gpt2.TABLE, layers=2)
    """
    _SAVE.require()
    from safetensors.numpy import save_file

    found = _adapters(model)
    if not found:
        raise ValueError(
            "save_peft: the model has no LoRA adapters; add them with "
            "ax.nn.lora(model, where=..., key=...) first"
        )
    index = _index(table, layers)
    groups: dict[str, dict[int, _Adapter]] = {}
    entries: dict[str, Entry] = {}
    for ad in found:
        if ad.target not in index:
            raise ValueError(
                f"save_peft: the adapter of {ad.target} adapts no entry of the "
                f"{table.model_type} table, so PEFT has no name for it"
            )
        e, j = index[ad.target]
        groups.setdefault(e.key, {})[j] = ad
        entries[e.key] = e
    arrays: dict[str, np.ndarray] = {}
    ranks: dict[str, int] = {}
    alphas: dict[str, float] = {}
    conv1d = False
    for key, parts in groups.items():
        first = next(iter(parts.values()))
        rank_at = first.a_axes.index(Rank)
        in_axes = first.a_axes[rank_at + 1 :]
        out_axes = tuple(a for a in first.b_axes if a is not Rank)
        try:
            mod = _module(entries[key], in_axes, out_axes)
        except ValueError as err:
            raise ValueError(f"save_peft: {err}") from None
        a, b, ranks[mod.name], alphas[mod.name] = _module_arrays(mod, parts)
        arrays[f"{PREFIX}{mod.name}.lora_A.weight"] = np.ascontiguousarray(a)
        arrays[f"{PREFIX}{mod.name}.lora_B.weight"] = np.ascontiguousarray(b)
        conv1d = conv1d or mod.in_dim == 0
    targets = _targets(set(ranks), _linear_modules(table, layers))
    config = _config(ranks, alphas, targets, conv1d, base_model_name_or_path)
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    tmp = target / f".{ADAPTER_WEIGHTS}.tmp-{os.getpid()}"
    try:
        save_file(dict(sorted(arrays.items())), os.fspath(tmp), metadata={"format": "pt"})
        os.replace(tmp, target / ADAPTER_WEIGHTS)
    except Exception as err:  # a full disk, a read-only folder
        tmp.unlink(missing_ok=True)
        raise ConversionError(
            f"save_peft: cannot write {target / ADAPTER_WEIGHTS} ({err})"
        ) from None
    final = target / ADAPTER_CONFIG
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(config, indent=2) + "\n")
    os.replace(tmp, final)


# ----------------------------------------------------------------------------- read
def _read_config(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """adapter_config.json, checked for what axjax's LoRA cannot compute."""
    where = Path(folder) / ADAPTER_CONFIG
    raw = read_json_object(folder, ADAPTER_CONFIG, "load_peft")
    for field, (want, why) in _REFUSED.items():
        got = raw.get(field, want)
        if got != want and not (want is None and got in ([], {})):
            raise ConversionError(
                f"load_peft: {where} has {field}={got!r}, which axjax's LoRA cannot "
                f"represent ({why}); it reads {field}={want!r}"
            )
    for field in ("r", "lora_alpha"):
        v = raw.get(field)
        if isinstance(v, bool) or not isinstance(v, int | float) or v <= 0:
            raise ConversionError(
                f"load_peft: {where}'s {field} is {v!r}, expected a positive number"
            )
    return raw


def _pattern(patterns: object, module: str) -> Any:
    """The value of the first key of ``patterns`` that matches ``module`` as PEFT matches
    ``rank_pattern`` and ``alpha_pattern`` (a regex of a path suffix), else ``None``."""
    if not isinstance(patterns, dict):
        return None
    for key, value in patterns.items():
        if re.match(rf"(.*\.)?({key})$", module):
            return value
    return None


def _selected(spec: object, module: str) -> bool:
    """PEFT's match of ``target_modules`` / ``exclude_modules``: a regex (a string) that
    matches the whole path, or names of which one is the path or a ``.``-suffix."""
    if spec is None:
        return False
    if spec == "all-linear":
        return module.rsplit(".", 1)[-1] != "lm_head"
    if isinstance(spec, str):
        return re.fullmatch(spec, module) is not None
    if isinstance(spec, list | tuple):
        return any(_matches(module, str(t)) for t in spec)
    return False


def _check_targets(config: dict[str, Any], where: Path, file: set[str], known: list[str]) -> None:
    """Every module of the file is one ``target_modules`` selects, every name in a list of
    ``target_modules`` is a linear module of the table, and (without ``layers_to_transform``
    or ``exclude_modules``) every module it selects has an adapter in the file."""
    spec = config.get("target_modules")
    names = [] if spec is None or isinstance(spec, str) else list(spec)
    for t in names:
        if not any(_matches(m, str(t)) for m in known):
            shown = sorted({m.rsplit(".", 1)[-1] for m in known})
            raise ConversionError(
                f"load_peft: {where}'s target_modules names {t!r}, which is no linear module "
                f"of this model (its modules end in: {', '.join(shown)})"
            )
    for m in sorted(file):
        if not _selected(spec, m):
            raise ConversionError(
                f"load_peft: the adapter of {m!r} is not one that {where}'s "
                f"target_modules={spec!r} selects"
            )
    if config.get("layers_to_transform") is None and config.get("exclude_modules") is None:
        missing = [m for m in known if _selected(spec, m) and m not in file]
        if missing:
            raise ConversionError(
                f"load_peft: target_modules={spec!r} selects {', '.join(missing)}, which "
                f"{where.with_name(ADAPTER_WEIGHTS)} has no adapter for (nothing was loaded)"
            )


def _read_arrays(folder: str | os.PathLike[str]) -> dict[str, dict[str, np.ndarray]]:
    """The file's arrays by module path, each ``{"A": ..., "B": ...}``."""
    _LOAD.require()
    from safetensors import safe_open

    where = Path(folder) / ADAPTER_WEIGHTS
    if not where.is_file():
        raise FileNotFoundError(f"load_peft: no {ADAPTER_WEIGHTS} in {folder}")
    out: dict[str, dict[str, np.ndarray]] = {}
    try:
        with safe_open(os.fspath(where), framework="numpy") as f:
            for key in sorted(f.keys()):
                match = _KEY.match(key)
                if match is None:
                    raise ConversionError(
                        f"load_peft: {where} holds {key!r}, which is not a LoRA adapter's "
                        f"key ({PREFIX}<module>.lora_A.weight / .lora_B.weight)"
                    )
                out.setdefault(match["module"], {})[match["part"]] = f.get_tensor(key)
    except ConversionError:
        raise
    except Exception as err:  # the backend's own error on a damaged file
        raise ConversionError(f"load_peft: {where} is not a safetensors file ({err})") from None
    for module, pair in out.items():
        if len(pair) != 2:
            lacking = "lora_B" if "A" in pair else "lora_A"
            raise ConversionError(f"load_peft: {where} has no {lacking} for {module!r}")
    return out


@dataclasses.dataclass(frozen=True)
class _Read:
    """One module of the file: its table entry, arrays, rank and alpha."""

    entry: Entry
    a: np.ndarray
    b: np.ndarray
    alpha: float

    @property
    def rank(self) -> int:
        return int(self.a.shape[0])


def _modules(
    config: dict[str, Any],
    arrays: dict[str, dict[str, np.ndarray]],
    table: Table,
    layers: int,
    where: Path,
) -> dict[str, _Read]:
    """The file's modules by their table path's key (``transformer.h.0.mlp.c_fc.weight``)."""
    by_key = {e.key: e for e in table.expand(layers)}
    known = _linear_modules(table, layers)
    pre = table.optional_prefix
    out: dict[str, _Read] = {}
    named: set[str] = set()
    for module, pair in arrays.items():
        key = next((k for k in (f"{module}.weight", f"{pre}{module}.weight") if k in by_key), None)
        if key is None or key.removesuffix(".weight") not in known:
            raise ConversionError(
                f"load_peft: {where.with_name(ADAPTER_WEIGHTS)} adapts {module!r}, which is "
                f"no linear module of this {table.model_type} model"
            )
        named.add(key.removesuffix(".weight"))
        a, b = pair["A"], pair["B"]
        r = _pattern(config.get("rank_pattern"), module) or config["r"]
        if not _fits(a, b, r):
            pattern = _pattern(config.get("rank_pattern"), module) is not None
            raise ConversionError(
                f"load_peft: {module!r}'s lora_A is {list(a.shape)} and lora_B "
                f"{list(b.shape)}, expected [r, in] and [out, r] with r={r} (the config's "
                f"{'rank_pattern' if pattern else 'r'}){_transposed(a, b, r)}"
            )
        alpha = _pattern(config.get("alpha_pattern"), module) or config["lora_alpha"]
        out[key] = _Read(by_key[key], a, b, float(alpha))
    _check_targets(config, where, named, known)
    return out


def _fits(a: np.ndarray, b: np.ndarray, r: int) -> bool:
    return a.ndim == 2 and b.ndim == 2 and a.shape[0] == b.shape[1] == r


def _transposed(a: np.ndarray, b: np.ndarray, r: int) -> str:
    """``": lora_B is transposed"`` (or lora_A, or both) where that would fit, else ``""``."""
    if a.ndim != 2 or b.ndim != 2:
        return ""
    for what, x, y in (("lora_B is", a, b.T), ("lora_A is", a.T, b), ("both are", a.T, b.T)):
        if _fits(x, y, r):
            return f": {what} transposed"
    return ""


def _from_hf(
    mod: _Module, part: int, read: _Read, adapter: Any, lead: int
) -> tuple[np.ndarray, np.ndarray]:
    """One layer's ``lora_a`` and ``lora_b`` in the axes of ``adapter`` (past its ``lead``
    stacking axes) from PEFT's arrays; ``ConversionError`` on another shape."""
    a_axes, b_axes = adapter.lora_a.axes[lead:], adapter.lora_b.axes[lead:]
    sizes = {**adapter.lora_a.sizes, **adapter.lora_b.sizes}
    split = mod.entry.split
    if split is not None:
        sizes[split] = len(mod.entry.paths)
    ins, outs = [sizes[a] for a in mod.in_axes], [sizes[a] for a in mod.out_axes]
    r = read.rank
    for what, got, want in (
        ("lora_A", read.a, (r, int(np.prod(ins)))),
        ("lora_B", read.b, (int(np.prod(outs)), r)),
    ):
        if tuple(got.shape) != want:
            why = "transposed" if tuple(got.shape) == want[::-1] else "another size"
            raise ConversionError(
                f"load_peft: {mod.name}'s {what} is {list(got.shape)}, expected "
                f"{list(want)} ({what}: {'[r, in]' if what == 'lora_A' else '[out, r]'}): {why}"
            )
    a = read.a.reshape(r, *ins).transpose([0] + [1 + mod.in_axes.index(x) for x in a_axes[1:]])
    b = read.b.reshape(*outs, r)
    out_axes = list(mod.out_axes)
    if split is not None:
        b = np.take(b, part, axis=out_axes.index(split))
        out_axes.remove(split)
    b = b.transpose([out_axes.index(x) for x in b_axes[:-1]] + [len(out_axes)])
    return a, b


def _placer(model: object) -> Callable[[str], str]:
    """Where ``lora(where=...)`` adapts a table path (``blocks.0.fc.weight``): the path of
    its Linear / Affine layer, else of the weight; in a stack ``blocks.layers.fc``."""
    stacks = [
        _name(p)
        for p, x in jax.tree_util.tree_flatten_with_path(
            model, is_leaf=lambda x: isinstance(x, LayerStack)
        )[0]
        if isinstance(x, LayerStack)
    ]
    dense = {
        _name(p)
        for p, x in jax.tree_util.tree_flatten_with_path(
            model, is_leaf=lambda x: isinstance(x, Affine | Linear)
        )[0]
        if isinstance(x, Affine | Linear)
    }

    def place(path: str) -> str:
        for s in stacks:
            pre = f"{s}." if s else ""
            head, _, tail = path[len(pre) :].partition(".")
            if path.startswith(pre) and head.isdigit():
                path = f"{pre}layers.{tail}"
                break
        short = path.removesuffix(".weight")
        return short if short in dense else path

    return place


def _strip(model: M) -> M:
    """``model`` with each adapter replaced by what it adapts (a LoRA's base layer, an
    adapted weight's base Tensor): not merged, dropped."""

    def base(x: Any) -> Any:
        if not _is_adapter(x):
            return x
        return x.base if isinstance(x, LoRA) else x.weight

    out: M = jax.tree_util.tree_map(base, model, is_leaf=_is_adapter)
    return out


def _signature(model: object) -> dict[str, str]:
    """Each adapter's path and what it is: its axes, sizes and alpha."""
    return {
        f.name: f"lora_a {_sized(f.module.lora_a)}, lora_b {_sized(f.module.lora_b)}, "
        f"alpha={float(f.module.alpha):g}"
        for f in _walk(model)
    }


def _sized(t: AnyTensor) -> str:
    return "[" + ", ".join(f"{a.__name__}={n}" for a, n in zip(t.axes, t.shape)) + "]"


def _create(base: M, reads: dict[str, _Read]) -> M:
    """``base`` with an adapter (of the file's rank and alpha) at every path the file
    adapts, through ``ax.nn.lora`` (one call per rank and alpha)."""
    spec: dict[str, tuple[int, float]] = {}
    place = _placer(base)
    for rd in reads.values():
        for p in rd.entry.paths:
            at = place(p)
            if spec.setdefault(at, (rd.rank, rd.alpha)) != (rd.rank, rd.alpha):
                raise ConversionError(
                    f"load_peft: the layers of the stacked {at} have adapters of different "
                    "ranks or alphas in the file; a stack keeps one per projection (load it "
                    "into the unrolled model, unroll=True)"
                )
    groups: dict[tuple[int, float], list[str]] = {}
    for at, ra in spec.items():
        groups.setdefault(ra, []).append(at)
    keys = jax.random.split(jax.random.key(0), len(groups))  # A is overwritten
    tuned = base
    for k, ((rank, alpha), paths) in zip(keys, groups.items()):
        try:
            tuned = lora(tuned, where=by_path(*paths), rank=rank, alpha=alpha, key=k)
        except ValueError as err:
            raise ConversionError(
                f"load_peft: axjax cannot place an adapter on {', '.join(paths)} ({err})"
            ) from None
    return tuned


def _fill(tuned: M, reads: dict[str, _Read]) -> M:
    """``tuned`` with each adapter's ``lora_a`` / ``lora_b`` from the file (zero in a
    stacked layer the file does not adapt)."""
    parts = {p: (rd, j) for rd in reads.values() for j, p in enumerate(rd.entry.paths)}
    new: dict[str, AnyTensor] = {}
    try:
        found = list(_walk(tuned))
    except ValueError as err:
        raise ConversionError(f"load_peft: {err}") from None
    for f in found:
        m, lead = f.module, (0 if f.stack is None else 1)
        names = [f.name] if f.stack is None else [f.layer_name(i) for i in range(f.layers)]
        a_list, b_list = [], []
        for name in names:
            rd, j = parts.get(_target(name, m), (None, 0))
            if rd is None:
                a_list.append(np.zeros(m.lora_a.shape[lead:], np.float32))
                b_list.append(np.zeros(m.lora_b.shape[lead:], np.float32))
                continue
            ins = m.lora_a.axes[lead + 1 :]
            try:
                mod = _module(
                    rd.entry, ins, tuple(a for a in m.lora_b.axes[lead:] if a is not Rank)
                )
            except ValueError as err:
                raise ConversionError(f"load_peft: {err}") from None
            a, b = _from_hf(mod, j, rd, m, lead)
            a_list.append(a)
            b_list.append(b)
        for leaf, arrays in (("lora_a", a_list), ("lora_b", b_list)):
            t: AnyTensor = getattr(m, leaf)
            value = arrays[0] if f.stack is None else np.stack(arrays)
            new[f"{f.name}.{leaf}"] = Tensor(jnp.asarray(value, t.array.dtype), t.axes)
    out: M = jax.tree_util.tree_map_with_path(
        lambda p, x: new.get(_name(p), x), tuned, is_leaf=lambda x: isinstance(x, Tensor)
    )
    return out


def read_peft(folder: str | os.PathLike[str], model: M, table: Table, *, layers: int) -> M:
    """``model`` with the adapters of a PEFT folder (``adapter_config.json``,
    ``adapter_model.safetensors``) read by ``table`` (the family's, ``layers`` deep):
    :func:`load_peft` with a table of one's own.

    Example:
        >>> tuned = read_peft("adapter", model, gpt2.TABLE, layers=2)
    """
    _LOAD.require()
    check_not_donated("read_peft", "model", model, _DONATED)
    config = _read_config(folder)
    reads = _modules(config, _read_arrays(folder), table, layers, Path(folder) / ADAPTER_CONFIG)
    base = _strip(model)
    tuned = _fill(_create(base, reads), reads)
    had = _signature(model)
    if had:
        got = _signature(tuned)
        for name in sorted(set(had) | set(got)):
            if had.get(name) != got.get(name):
                raise ConversionError(
                    f"load_peft: the model's adapters are not those of {os.fspath(folder)}: "
                    f"at {name} the model has {had.get(name, 'none')}, the folder gives "
                    f"{got.get(name, 'none')} (pass the model without adapters)"
                )
    return tuned


def _family(model: object, where: str) -> tuple[Table, int]:
    """The checkpoint table of ``model``'s family and its number of layers."""
    if isinstance(model, GPT2):
        return GPT2_TABLE, model.config.n_layer
    if isinstance(model, Llama):
        return llama_table(model.config), model.config.num_hidden_layers
    raise TypeError(
        f"{where}: model is an axjax.models GPT2 or Llama, got {type(model).__name__} "
        "(write_peft / read_peft take another family's table)"
    )


def save_peft(
    model: object, folder: str | os.PathLike[str], *, base_model_name_or_path: str | None = None
) -> None:
    """Write the LoRA adapters of a GPT-2 or Llama ``model`` to ``folder`` as PEFT does
    (``adapter_config.json``, ``adapter_model.safetensors``):
    ``peft.PeftModel.from_pretrained(hf_model, folder)`` loads them onto the transformers
    model. ``base_model_name_or_path`` is written to the config (PEFT's hub name of the base).

    Raises:
        TypeError: ``model`` is not a GPT2 or a Llama.
        ValueError: it has no adapters.

    Example:
        >>> tuned = ax.nn.lora(model, where="blocks.*.fc", rank=4, key=jax.random.key(1))
        >>> ax.models.save_peft(tuned, "out/adapter", base_model_name_or_path="gpt2")
    """
    table, layers = _family(model, "save_peft")
    write_peft(folder, model, table, layers=layers, base_model_name_or_path=base_model_name_or_path)


def load_peft(model: M, folder: str | os.PathLike[str]) -> M:
    """``model`` (a GPT-2 or Llama, without adapters or with those the folder holds) with
    the LoRA adapters of a PEFT folder: each adapted module gets an ``ax.nn.lora`` adapter
    of the config's rank and alpha (``rank_pattern`` / ``alpha_pattern`` honoured), filled
    from ``adapter_model.safetensors``. GPT-2's fused ``c_attn`` adapter gives query, key
    and value each an adapter, ``lora_a`` shared and ``lora_b`` its rows.

    Raises:
        FileNotFoundError: a file is missing.
        ConversionError: a field axjax's LoRA does not compute (``use_dora``, ``use_rslora``,
            ``bias``, ``modules_to_save``, ...: the field is named), a target or key this
            model does not have, an array of another shape (named, transposed called that),
            or a model whose adapters are not the folder's.

    Example:
        >>> tuned = ax.models.load_peft(gpt2.from_hf("gpt2"), "out/adapter")
    """
    table, layers = _family(model, "load_peft")
    check_not_donated("load_peft", "model", model, _DONATED)
    return read_peft(folder, model, table, layers=layers)
