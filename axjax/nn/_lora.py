"""LoRA: low-rank adapters on the linear maps of a model, along a named ``Rank`` axis.

``ax.nn.lora(model, where=..., rank=8, alpha=16, key=...)`` adapts each selected linear map
``W``: a :class:`Linear` / :class:`Affine` becomes a :class:`LoRA` layer, a raw projection
weight a layer declares (``MultiheadAttention.query_proj``, ``SwiGLU.gate``, ...) a
:class:`LoRAWeight`; both compute ``W x + (alpha / rank) · B (A x)`` with ``A: [*lead, Rank,
*In]`` and ``B: [*lead, *Out, Rank]`` (``*lead``: the stacking axes of a ``LayerStack``).
``B`` starts at zero, so a fresh wrap computes exactly what the base model does; training
only the adapters (``trainable=ax.nn.is_lora``) fine-tunes a few parameters;
:func:`merge_lora` folds them back, and :func:`save_lora` / :func:`load_lora` store the
adapters alone with their configuration (rank, alpha, where, targets).

Example:
    >>> tuned = ax.nn.lora(model, where="blocks.*.attn", rank=4, key=jax.random.key(1))
    >>> ax.train.fit(tuned, optax.adam(1e-3), loss_fn, data, trainable=ax.nn.is_lora)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import AnyTensor, Tensor
from ..core._internal import (
    Checks,
    check_not_donated,
    positive_float,
    positive_int,
    prng_key,
    public_call,
)
from ..ops import contract, transpose
from ._adapted import LoRAWeight, Rank, adapter_lead, optional_text
from ._linear import Affine, D, DenseCall, In, Linear, Out, dense_product, describe_dense
from ._registry import linear_maps, register_layer
from ._safetensors import (
    SafetensorsError,
    entry_names,
    load_safetensors,
    read_metadata,
    save_safetensors,
)
from ._select import Selection, by_path, leaves_with_paths, selector

__all__ = ["LoRA", "is_lora", "load_lora", "lora", "merge_lora", "save_lora"]

M = TypeVar("M")
#: the safetensors metadata key of the adapters' configuration (``save_lora``)
RECORD_KEY = "axjax.lora"


@register_layer(typed="signature")
class LoRA(DenseCall[D, In, Out]):
    """A :class:`Linear` or :class:`Affine` layer plus a low-rank update along ``Rank``.

    ``y = base(x) + (alpha / rank) · B (A x)``: ``lora_a`` is ``Tensor[D, Rank, In]``
    (uniform in ``±1/sqrt(in_size)``), ``lora_b`` is ``Tensor[D, Out, Rank]`` (zeros, so
    the fresh layer computes what ``base`` does). Its call is the base layer's call, in
    every checker: ``Tensor[D, *B, In] -> Tensor[D, *B, Out]``. A base in a ``LayerStack``
    (its weight ``[Layer, Out, In]``) gets adapters stacked the same way:
    ``[Layer, Rank, In]`` and ``[Layer, Out, Rank]``.

    Args:
        base: the layer to adapt (its weight is kept as it is).
        rank: the size of the ``Rank`` axis.
        alpha: the scale numerator: the update is multiplied by ``alpha / rank``.
        key: PRNG key for ``lora_a`` (keyword only).
        where: the selection it was made by (what :func:`save_lora` records; ``lora``
            passes its ``where=``).

    Example:
        >>> layer = ax.nn.LoRA(ax.nn.Linear(Embed, Hidden, 64, 64, key=k1), rank=4, key=k2)
        >>> layer(x)                 # Tensor[F32, Batch, Embed] -> Tensor[F32, Batch, Hidden]
        >>> layer.merge()            # a Linear with W + (alpha / rank) B A
    """

    base: Affine[D, In, Out] | Linear[D, In, Out]
    lora_a: Tensor[D, Rank, In]
    lora_b: Tensor[D, Out, Rank]
    alpha: float = eqx.field(static=True)
    in_axis: type[In] = eqx.field(static=True)
    out_axis: type[Out] = eqx.field(static=True)
    where: str | None = eqx.field(static=True)

    def __init__(
        self,
        base: DenseCall[D, In, Out],  # an Affine or a Linear (checked)
        *,
        rank: int = 8,
        alpha: float = 16.0,
        key: jax.Array,
        where: str | None = None,
    ) -> None:
        if not isinstance(base, Affine | Linear):
            raise TypeError(
                f"LoRA: base must be an ax.nn.Linear or ax.nn.Affine layer, got "
                f"{type(base).__name__}"
            )
        rank = positive_int("LoRA", "rank", rank)
        self.alpha = positive_float("LoRA", "alpha", alpha)
        weight = base.weight
        if Rank in (base.in_axis, base.out_axis):
            raise ValueError(
                "LoRA: the layer maps from or to the axis Rank, which the adapters use for "
                "their own rank; name the layer's axes differently"
            )
        # [*lead, rows, In]: rows is Out, or Out[Out] for a square layer; lead the stacking
        rows = weight.axes[-2]
        lead = adapter_lead(f"LoRA of a {type(base).__name__}", weight, (rows, base.in_axis))
        self.base, self.where = base, optional_text("LoRA", where)
        self.in_axis, self.out_axis = base.in_axis, base.out_axis
        sizes = weight.sizes
        n_in = sizes[base.in_axis]
        bound = 1.0 / float(np.sqrt(n_in))
        n_lead = tuple(sizes[a] for a in lead)
        a = jax.random.uniform(key, (*n_lead, rank, n_in), weight.array.dtype, -bound, bound)
        self.lora_a = Tensor(a, (*lead, Rank, base.in_axis))
        b = jnp.zeros((*n_lead, sizes[rows], rank), a.dtype)
        self.lora_b = Tensor(b, (*lead, rows, Rank))

    @property
    def rank(self) -> int:
        """The size of the ``Rank`` axis."""
        return self.lora_a.size(Rank)

    @property
    def scale(self) -> float:
        """``alpha / rank``: the factor of the low-rank update."""
        return self.alpha / self.rank

    def _apply(self, x: AnyTensor) -> AnyTensor:
        y: AnyTensor = self.base(x)
        n_out, n_in = self.base.weight.shape
        name = "LoRA of " + describe_dense(
            type(self.base).__name__, self.in_axis, self.out_axis, n_in, n_out
        )
        h = dense_product(name, x, self.lora_a, None, self.in_axis, Rank)
        delta = dense_product(name, h, self.lora_b, None, Rank, self.out_axis)
        out: AnyTensor = y + delta * self.scale
        return out

    def merge(self) -> Affine[D, In, Out] | Linear[D, In, Out]:
        """The base layer with the update folded in: ``W + (alpha / rank) · B A``.

        Example:
            >>> plain = tuned_layer.merge()   # a Linear / Affine, no adapters
        """
        delta = contract(self.lora_b, self.lora_a, over=Rank)
        delta = transpose(delta, *self.base.weight.axes)
        weight = self.base.weight + delta * self.scale
        merged: Affine[D, In, Out] | Linear[D, In, Out] = eqx.tree_at(
            lambda layer: layer.weight, self.base, weight
        )
        return merged


def _holds_maps(x: object) -> bool:
    """A node ``lora`` stops at: a dense layer, an adapter, or a layer declaring raw maps."""
    return isinstance(x, Affine | Linear | LoRA | LoRAWeight) or bool(linear_maps(x))


def _is_adapter(x: object) -> bool:
    return isinstance(x, LoRA | LoRAWeight)


#: selects the adapters' leaves (``lora_a``, ``lora_b``): ``trainable=ax.nn.is_lora``
#: trains the adapters alone
is_lora = by_path("**.lora_a", "**.lora_b")


#: one linear map ``lora`` can adapt: its dotted path, the index of the node holding it
#: among the flattened model's, the declared field (``None``: the node is a dense layer),
#: and what ``where=`` sees (the layer, or the raw weight Tensor)
_Target = tuple[str, int, str | None, Any]


def _targets(model: object) -> tuple[list[Any], Any, list[_Target]]:
    """The model flattened down to the nodes holding linear maps, and its adaptable maps:
    each ``Linear`` / ``Affine``, and each raw weight field a layer declares."""
    flat, treedef = jax.tree_util.tree_flatten_with_path(model, is_leaf=_holds_maps)
    found: list[_Target] = []
    for i, (p, x) in enumerate(flat):
        name = jax.tree_util.keystr(p, simple=True, separator=".")
        if isinstance(x, Affine | Linear):
            found.append((name, i, None, x))
            continue
        for field in linear_maps(x):
            w = getattr(x, field)
            if isinstance(w, Tensor):  # not adapted already
                found.append((f"{name}.{field}" if name else field, i, field, w))
    return [x for _, x in flat], treedef, found


def _field(name: str) -> Callable[[Any], Any]:
    """The ``eqx.tree_at`` getter of a layer's field ``name``."""
    return lambda m: getattr(m, name)


def _listed(found: list[_Target], leaves: list[Any]) -> str:
    """The adaptable paths, for the error of a ``where=`` that selects none."""

    def kind(t: _Target) -> str:
        node = leaves[t[1]]
        return type(node).__name__ if t[2] is None else f"{type(node).__name__} weight"

    shown = ", ".join(f"{t[0]} ({kind(t)})" for t in found[:12])
    return shown + (f", ... ({len(found)} in all)" if len(found) > 12 else "")


@public_call(checks=Checks(blame={"LoRA": "model", "LoRAWeight": "model"}))  # what it builds
def lora(
    model: M,
    *,
    where: Selection,
    rank: int = 8,
    alpha: float = 16.0,
    key: jax.Array,
) -> M:
    """``model`` with each linear map that ``where`` selects adapted (a fresh key each),
    typed as ``model``: a :class:`Linear` / :class:`Affine` is wrapped in a :class:`LoRA`,
    a raw projection weight a layer declares (the attention layers' ``query_proj``,
    ``key_proj``, ``value_proj``, ``output_proj``; ``SwiGLU``'s ``gate``, ``up``,
    ``down``) becomes a :class:`LoRAWeight`. In a ``LayerStack`` the adapters are stacked
    over its axis as the weights are.

    Args:
        model: an Equinox module (or any pytree) holding dense layers or projections.
        where: which maps: a path pattern over the dotted path of the layer or weight
            (``"blocks.*.attn"``: every attention projection; ``"**.attn.[qv]*_proj"``:
            queries and values; a module's path selects what it holds),
            ``ax.nn.by_path`` / ``ax.nn.by_axes`` (the weight's axes) combined with ``&``,
            ``|``, ``~``, a tuple of these, or a predicate ``(path, layer or weight) -> bool``.
        rank, alpha: as for :class:`LoRA`.
        key: PRNG key, split over the selected maps (keyword only).

    Raises:
        ValueError: ``where`` selects nothing (the message lists the adaptable paths).
        TypeError: ``where`` is not a selector, pattern or predicate, or a predicate
            answers something other than a bool.

    Example:
        >>> tuned = ax.nn.lora(gpt2_model, where="blocks.*.attn", rank=4, key=jax.random.key(1))
        >>> tuned(ids) == gpt2_model(ids)   # B starts at zero: the same logits
    """
    select = selector(where, "lora: where")
    rank = positive_int("lora", "rank", rank)
    alpha = positive_float("lora", "alpha", alpha)
    key = prng_key("lora", "key", key)
    leaves, treedef, found = _targets(model)
    chosen = [t for t in found if select(t[0], t[3])]
    if not chosen:
        raise ValueError(
            f"lora: where={select} selects none of the model's linear maps "
            f"({_listed(found, leaves) if found else 'it has none'}); select them by their "
            "dotted path, e.g. where='blocks.*.attn' or where=ax.nn.by_path('**.query_proj')"
        )
    text = str(select)
    for (_, i, field, x), k in zip(chosen, jax.random.split(key, len(chosen)), strict=True):
        if field is None:
            leaves[i] = LoRA(x, rank=rank, alpha=alpha, key=k, where=text)
            continue
        ins, outs = linear_maps(leaves[i])[field]
        adapted = LoRAWeight(x, ins, outs, rank=rank, alpha=alpha, key=k, where=text)
        leaves[i] = eqx.tree_at(_field(field), leaves[i], adapted)
    out: M = jax.tree_util.tree_unflatten(treedef, leaves)
    return out


def merge_lora(model: M) -> M:
    """``model`` with every adapter folded back: a :class:`LoRA` replaced by its merged
    base layer (:meth:`LoRA.merge`), a :class:`LoRAWeight` by its merged Tensor; typed as
    ``model``.

    Example:
        >>> plain = ax.nn.merge_lora(tuned)   # the same function, plain layers
    """
    out: M = jax.tree_util.tree_map(
        lambda x: x.merge() if _is_adapter(x) else x, model, is_leaf=_is_adapter
    )
    return out


def lora_record(model: object) -> dict[str, dict[str, Any]]:
    """``{target path: {"rank", "alpha", "where"}}`` of the adapters of ``model``: what
    :func:`save_lora` records and :func:`load_lora` compares."""
    flat = jax.tree_util.tree_flatten_with_path(model, is_leaf=_is_adapter)[0]
    return {
        jax.tree_util.keystr(p, simple=True, separator="."): {
            "rank": x.rank,
            "alpha": x.alpha,
            "where": x.where,
        }
        for p, x in flat
        if _is_adapter(x)
    }


def _adapters(model: object, where: str) -> Any:
    """The adapters' leaves of ``model`` (``None`` elsewhere); a ``ValueError`` without."""
    spec = jax.tree_util.tree_map_with_path(
        lambda p, x: is_lora(jax.tree_util.keystr(p, simple=True, separator="."), x),
        model,
        is_leaf=lambda x: isinstance(x, Tensor),
    )
    adapters = eqx.filter(model, spec)
    if not any(True for _ in leaves_with_paths(adapters)):
        raise ValueError(
            f"{where}: the model has no LoRA adapters; wrap its layers with "
            "ax.nn.lora(model, where=..., key=...) first"
        )
    return adapters


def save_lora(
    model: object, path: str | os.PathLike[str], metadata: dict[str, str] | None = None
) -> None:
    """Write the adapters of ``model`` alone (every ``lora_a`` and ``lora_b``, with their
    axes in the metadata) to a safetensors file, as :func:`save_safetensors` does, with
    their configuration: each target's path, rank, alpha and ``where`` (the metadata key
    ``"axjax.lora"``), which :func:`load_lora` compares.

    Raises:
        ValueError: the model has no adapters.
        SafetensorsError: as :func:`save_safetensors`, or ``metadata`` holds the key
            ``"axjax.lora"``.

    Example:
        >>> ax.nn.save_lora(tuned, "adapters.safetensors")
    """
    adapters = _adapters(model, "save_lora")
    record = {RECORD_KEY: json.dumps({"format": 1, "adapters": lora_record(model)})}
    if isinstance(metadata, dict) and RECORD_KEY in metadata:
        raise SafetensorsError(
            f"save_lora: the metadata key {RECORD_KEY!r} is axjax's own (the adapters' "
            "configuration). Nothing was written."
        )
    # metadata of another type goes on as it is: save_safetensors names the mistake
    extra: Any = record if metadata is None else {**metadata, **record}
    if not isinstance(metadata, dict | None):
        extra = metadata
    save_safetensors(adapters, path, extra)


def _saved_record(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]] | None:
    """The adapters' configuration :func:`save_lora` wrote (``None`` in a file without)."""
    text = read_metadata(path, RECORD_KEY, "load_lora")
    if text is None:
        return None
    try:
        record = json.loads(text)["adapters"]
        assert isinstance(record, dict)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise SafetensorsError(
            f"load_lora: {os.fspath(path)} has corrupt {RECORD_KEY} metadata; it cannot be loaded"
        ) from None
    return record


def _first_difference(
    saved: dict[str, dict[str, Any]], have: dict[str, dict[str, Any]]
) -> str | None:
    """What differs between the file's adapters and the model's: the targets, then the
    rank, alpha and ``where`` (a predicate's by its name); ``None`` when nothing does."""
    missing, extra = sorted(set(have) - set(saved)), sorted(set(saved) - set(have))
    if missing or extra:
        parts = [f"the file adapts {', '.join(extra)}, the model does not"] if extra else []
        parts += [f"the model adapts {', '.join(missing)}, the file does not"] if missing else []
        wheres = sorted({str(r["where"]) for r in saved.values()})
        return (
            "other targets: " + "; ".join(parts) + f" (wrap the model with the saved "
            f"where={' | '.join(wheres)})"
        )
    for what in ("rank", "alpha", "where"):
        for target in sorted(saved):
            a, b = saved[target][what], have[target][what]
            if (float(a) != float(b)) if what == "alpha" else (a != b):
                return (
                    f"another {what}: the file's adapter at {target} has {what}={a!r}, the "
                    f"model's {what}={b!r} (wrap the model with {what}={a!r})"
                )
    return None


def load_lora(model: M, path: str | os.PathLike[str]) -> M:
    """``model`` (adapted by :func:`lora` as the saved one was) with its adapters read from
    a file that :func:`save_lora` wrote; the other leaves are kept.

    Raises:
        ValueError: the model has no adapters.
        SafetensorsError: the file's adapters have another configuration than the model's:
            other targets, another rank, alpha or ``where`` (the message names the first
            difference); for a file without the record, an adapter missing from the file,
            or with other axes, sizes or dtype (the message names the entry), or adapters
            the model lacks.

    Example:
        >>> tuned = ax.nn.load_lora(ax.nn.lora(base, where="blocks.*.attn", rank=4,
        ...                                    key=jax.random.key(0)), "adapters.safetensors")
    """
    check_not_donated(
        "load_lora", "model", model,
        "pass the model a donating step returned (step.model), not the one it was given",
    )  # fmt: skip
    adapters = _adapters(model, "load_lora")
    saved = _saved_record(path)
    if saved is not None:
        diff = _first_difference(saved, lora_record(model))
        if diff is not None:
            raise SafetensorsError(
                f"load_lora: {os.fspath(path)} holds adapters of another configuration "
                f"than the model's: {diff}"
            )
    loaded = load_safetensors(adapters, path)
    extra = sorted(entry_names(path) - {name for name, _ in leaves_with_paths(adapters)})
    if extra:
        raise SafetensorsError(
            f"load_lora: {os.fspath(path)} holds adapters this model does not have: "
            f"{', '.join(extra)} (wrap the model with the where= of the saved one)"
        )
    out: M = eqx.combine(loaded, model)
    return out
