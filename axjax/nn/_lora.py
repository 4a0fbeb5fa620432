"""LoRA: low-rank adapters on the dense layers of a model, along a named ``Rank`` axis.

``ax.nn.lora(model, where=..., rank=8, alpha=16, key=...)`` replaces each selected
:class:`Linear` / :class:`Affine` ``W`` by a :class:`LoRA` computing
``W x + (alpha / rank) · B (A x)`` with ``A: Tensor[D, Rank, In]`` and
``B: Tensor[D, Out, Rank]``. ``B`` starts at zero, so a fresh wrap computes exactly what the
base model does; training only the adapters (``trainable=ax.nn.is_lora``) fine-tunes a
few parameters; :func:`merge_lora` folds them back into plain layers, and
:func:`save_lora` / :func:`load_lora` store the adapters alone.

Example:
    >>> tuned = ax.nn.lora(model, where="blocks.*.attn", rank=4, key=jax.random.key(1))
    >>> ax.train.fit(tuned, optax.adam(1e-3), loss_fn, data, trainable=ax.nn.is_lora)
"""

from __future__ import annotations

import os
from typing import Any, TypeVar, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import AnyTensor, Axis, Tensor
from ..core._internal import (
    Checks,
    axis_name,
    check_not_donated,
    positive_float,
    positive_int,
    prng_key,
    public_call,
)
from ..ops import contract
from ._linear import Affine, D, DenseCall, In, Linear, Out, dense_product, describe_dense
from ._registry import register_layer
from ._safetensors import SafetensorsError, entry_names, load_safetensors, save_safetensors
from ._select import Selection, by_path, leaves_with_paths, selector

__all__ = ["LoRA", "Rank", "is_lora", "load_lora", "lora", "merge_lora", "save_lora"]

M = TypeVar("M")


@final
class Rank(Axis):
    """The rank axis of LoRA adapters (``A: [Rank, In]``, ``B: [Out, Rank]``)."""

    __module__ = "axjax.nn"


@register_layer(typed="signature")
class LoRA(DenseCall[D, In, Out]):
    """A :class:`Linear` or :class:`Affine` layer plus a low-rank update along ``Rank``.

    ``y = base(x) + (alpha / rank) · B (A x)``: ``lora_a`` is ``Tensor[D, Rank, In]``
    (uniform in ``±1/sqrt(in_size)``), ``lora_b`` is ``Tensor[D, Out, Rank]`` (zeros, so
    the fresh layer computes what ``base`` does). Its call is the base layer's call, in
    every checker: ``Tensor[D, *B, In] -> Tensor[D, *B, Out]``.

    Args:
        base: the layer to adapt (its weight is kept as it is).
        rank: the size of the ``Rank`` axis.
        alpha: the scale numerator: the update is multiplied by ``alpha / rank``.
        key: PRNG key for ``lora_a`` (keyword only).

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

    def __init__(
        self,
        base: DenseCall[D, In, Out],  # an Affine or a Linear (checked)
        *,
        rank: int = 8,
        alpha: float = 16.0,
        key: jax.Array,
    ) -> None:
        if not isinstance(base, Affine | Linear):
            raise TypeError(
                f"LoRA: base must be an ax.nn.Linear or ax.nn.Affine layer, got "
                f"{type(base).__name__}"
            )
        rank = positive_int("LoRA", "rank", rank)
        self.alpha = positive_float("LoRA", "alpha", alpha)
        weight = base.weight
        if weight.array.ndim != len(weight.axes):
            raise ValueError(
                f"LoRA: the {type(base).__name__}'s weight is stacked (an array of "
                f"{weight.array.ndim} dimensions for the axes {_names(weight.axes)}, from "
                "jax.vmap over its constructor or a LayerStack); wrap the layers before "
                "stacking them"
            )
        if Rank in (base.in_axis, base.out_axis):
            raise ValueError(
                "LoRA: the layer maps from or to the axis Rank, which the adapters use for "
                "their own rank; name the layer's axes differently"
            )
        self.base = base
        self.in_axis, self.out_axis = base.in_axis, base.out_axis
        rows, n_in = weight.axes[0], weight.size(base.in_axis)
        bound = 1.0 / float(np.sqrt(n_in))
        a = jax.random.uniform(key, (rank, n_in), weight.array.dtype, -bound, bound)
        self.lora_a = Tensor(a, (Rank, base.in_axis))
        self.lora_b = Tensor(jnp.zeros((weight.size(rows), rank), a.dtype), (rows, Rank))

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
        weight = self.base.weight + delta * self.scale
        merged: Affine[D, In, Out] | Linear[D, In, Out] = eqx.tree_at(
            lambda layer: layer.weight, self.base, weight
        )
        return merged


def _names(axes: tuple[type[Axis], ...]) -> str:
    return "(" + ", ".join(axis_name(a) for a in axes) + ")"


def _is_dense(x: object) -> bool:
    return isinstance(x, Affine | Linear | LoRA)


#: selects the adapters' leaves (``lora_a``, ``lora_b``): ``trainable=ax.nn.is_lora``
#: trains the adapters alone
is_lora = by_path("**.lora_a", "**.lora_b")


@public_call(checks=Checks(blame={"LoRA": "model"}))  # a LoRA it builds: blamed on model
def lora(
    model: M,
    *,
    where: Selection,
    rank: int = 8,
    alpha: float = 16.0,
    key: jax.Array,
) -> M:
    """``model`` with each :class:`Linear` / :class:`Affine` that ``where`` selects wrapped
    in a :class:`LoRA` (a fresh key for each), typed as ``model``.

    Args:
        model: an Equinox module (or any pytree) holding dense layers.
        where: which layers: a path pattern (``"blocks.*.attn"``, ``"**.query"``: the
            dotted attribute path of the layer, or of a module that holds it),
            ``ax.nn.by_path`` / ``ax.nn.by_axes`` (the layer's weight axes) combined with
            ``&``, ``|``, ``~``, a tuple of these, or a predicate ``(path, layer) -> bool``.
        rank, alpha: as for :class:`LoRA`.
        key: PRNG key, split over the selected layers (keyword only).

    Raises:
        ValueError: ``where`` selects no layer (the message lists the dense layers).
        TypeError: ``where`` is not a selector, pattern or predicate, or a predicate
            answers something other than a bool.

    Example:
        >>> tuned = ax.nn.lora(model, where="blocks.*.attn", rank=4, key=jax.random.key(1))
        >>> tuned(x) == model(x)     # B starts at zero: the same logits
    """
    select = selector(where, "lora: where")
    rank = positive_int("lora", "rank", rank)
    alpha = positive_float("lora", "alpha", alpha)
    key = prng_key("lora", "key", key)
    flat, treedef = jax.tree_util.tree_flatten_with_path(model, is_leaf=_is_dense)
    names = [jax.tree_util.keystr(p, simple=True, separator=".") for p, _ in flat]
    dense = [i for i, (_, x) in enumerate(flat) if isinstance(x, Affine | Linear)]
    chosen = [i for i in dense if select(names[i], flat[i][1])]
    if not chosen:
        listed = ", ".join(f"{names[i]} ({type(flat[i][1]).__name__})" for i in dense[:8])
        more = f", ... ({len(dense)} in all)" if len(dense) > 8 else ""
        raise ValueError(
            f"lora: where={select} selects none of the model's Linear or Affine layers "
            f"({listed + more if dense else 'it has none'}); select layers by their dotted "
            "path, e.g. where='blocks.*.attn' or where=ax.nn.by_path('**.query')"
        )
    leaves = [x for _, x in flat]
    keys = jax.random.split(key, len(chosen))
    for i, k in zip(chosen, keys, strict=True):
        leaves[i] = LoRA(leaves[i], rank=rank, alpha=alpha, key=k)
    out: M = jax.tree_util.tree_unflatten(treedef, leaves)
    return out


def merge_lora(model: M) -> M:
    """``model`` with every :class:`LoRA` replaced by its merged base layer
    (:meth:`LoRA.merge`), typed as ``model``.

    Example:
        >>> plain = ax.nn.merge_lora(tuned)   # the same function, plain layers
    """
    out: M = jax.tree_util.tree_map(
        lambda x: x.merge() if isinstance(x, LoRA) else x,
        model,
        is_leaf=lambda x: isinstance(x, LoRA),
    )
    return out


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
    axes in the metadata) to a safetensors file, as :func:`save_safetensors` does.

    Raises:
        ValueError: the model has no adapters.
        SafetensorsError: as :func:`save_safetensors`.

    Example:
        >>> ax.nn.save_lora(tuned, "adapters.safetensors")
    """
    save_safetensors(_adapters(model, "save_lora"), path, metadata)


def load_lora(model: M, path: str | os.PathLike[str]) -> M:
    """``model`` (wrapped by :func:`lora` as the saved one was) with its adapters read from
    a file that :func:`save_lora` wrote; the other leaves are kept.

    Raises:
        ValueError: the model has no adapters.
        SafetensorsError: an adapter is missing from the file, or has other axes, sizes or
            dtype (the message names the entry), or the file holds adapters the model lacks
            (it was wrapped with another ``where``).

    Example:
        >>> tuned = ax.nn.load_lora(ax.nn.lora(base, where="blocks.*.attn", rank=4,
        ...                                    key=jax.random.key(0)), "adapters.safetensors")
    """
    check_not_donated(
        "load_lora", "model", model,
        "pass the model a donating step returned (step.model), not the one it was given",
    )  # fmt: skip
    adapters = _adapters(model, "load_lora")
    loaded = load_safetensors(adapters, path)
    extra = sorted(entry_names(path) - {name for name, _ in leaves_with_paths(adapters)})
    if extra:
        raise SafetensorsError(
            f"load_lora: {os.fspath(path)} holds adapters this model does not have: "
            f"{', '.join(extra)} (wrap the model with the where= of the saved one)"
        )
    out: M = eqx.combine(loaded, model)
    return out
