"""Adapted projection weights: a raw weight Tensor of a layer (``query_proj``, ``gate``, ...)
with a low-rank update along ``Rank``, and :func:`project`, the one function every use of
such a weight as a linear map computes through.

A layer that holds raw projection weights declares them (``register_layer(linear_maps=...)``,
each field with the names of its input and output axes), and each use site calls
``project(x, self.query_proj, over=self.embed_axis)``: ``contract`` for a plain Tensor and,
for a :class:`LoRAWeight`, ``contract(x, W) + (alpha / rank) · contract(contract(x, A), B)``
(factorized: ``W + BA`` is never built in the forward, so the frozen base costs no weight
gradient).
"""

from __future__ import annotations

from typing import Any, Generic, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from typing_extensions import TypeVar

from ..core import F32, AnyTensor, Axis, DType, Tensor
from ..core._internal import axis_name, check_axis_label, positive_float, positive_int
from ..ops import contract, transpose
from ._export import exportable

__all__ = ["LoRAWeight", "Rank", "adapter_lead", "optional_text", "project"]

#: the weight's dtype
D = TypeVar("D", bound=DType, default=F32)


@final
class Rank(Axis):
    """The rank axis of LoRA adapters (``A: [Rank, In]``, ``B: [Out, Rank]``)."""

    __module__ = "axjax.nn"


def _names(axes: tuple[type[Axis], ...]) -> str:
    return "(" + ", ".join(axis_name(a) for a in axes) + ")"


def optional_text(where: str, value: object) -> str | None:
    """An adapter's ``where=`` record: a string or ``None``; a ``TypeError`` otherwise."""
    if value is None or isinstance(value, str):
        return value
    raise TypeError(
        f"{where}: where is the text of the selection the adapter was made by (a str, or "
        f"None), got {type(value).__name__} {value!r:.40}"
    )


def adapter_lead(
    where: str, weight: AnyTensor, own: tuple[type[Axis], ...]
) -> tuple[type[Axis], ...]:
    """The stacking axes of ``weight`` (``(Layer,)`` in a ``LayerStack``, ``()`` otherwise):
    its axes before the layer's ``own`` ones, which must end its axes in that order."""
    if weight.array.ndim != len(weight.axes):
        raise ValueError(
            f"{where}: the weight is stacked without a name (an array of "
            f"{weight.array.ndim} dimensions for the axes {_names(weight.axes)}, from "
            "jax.vmap over its constructor); stack the layers with ax.nn.LayerStack (the "
            "stacking axis named) or wrap them before stacking"
        )
    n = len(own)
    if tuple(weight.axes[len(weight.axes) - n :]) != own:
        raise ValueError(
            f"{where}: the weight's axes {_names(weight.axes)} do not end with the layer's "
            f"own {_names(own)} (output axes first, input axes last)"
        )
    lead = tuple(weight.axes[: len(weight.axes) - n])
    if Rank in weight.axes:
        raise ValueError(
            f"{where}: the weight has the axis Rank, which the adapters use for their own "
            "rank; name the layer's axes differently"
        )
    return lead


@exportable  # a model holding one is an argument of a serialized function
class LoRAWeight(eqx.Module, Generic[D]):
    """A raw projection weight with a low-rank update: what :func:`lora` puts in place of a
    layer's ``query_proj``, ``gate``, ... (the fields a layer declares as linear maps).

    ``weight`` is the base Tensor, unchanged (``[*lead, *out_axes, *in_axes]``),
    ``lora_a`` is ``[*lead, Rank, *in_axes]`` (uniform in ``±1/sqrt(in size)``), ``lora_b``
    ``[*lead, *out_axes, Rank]`` (zeros: a fresh one computes what ``weight`` does); the
    update is ``(alpha / rank) · B A``. ``*lead`` is the stacking axes (``Layer`` in a
    ``LayerStack``). The layer reads ``size``, ``dtype``, ``axes`` and ``shape`` of the
    base weight through it, and computes through :func:`project`.

    Args:
        weight: the base weight Tensor.
        in_axes, out_axes: the layer's input and output axes of this map.
        rank, alpha: the size of ``Rank``; the update's scale is ``alpha / rank``.
        key: PRNG key for ``lora_a`` (keyword only).
        where: the selection it was made by (what :func:`save_lora` records).

    Example:
        >>> w = ax.nn.LoRAWeight(attn.query_proj, (Embed,), (Head, HeadDim), rank=4, key=k)
        >>> w.merge()                # Tensor: W + (alpha / rank) B A
    """

    weight: Tensor[D, *tuple[Any, ...]]
    lora_a: Tensor[D, *tuple[Any, ...]]
    lora_b: Tensor[D, *tuple[Any, ...]]
    alpha: float = eqx.field(static=True)
    in_axes: tuple[type[Axis], ...] = eqx.field(static=True)
    out_axes: tuple[type[Axis], ...] = eqx.field(static=True)
    where: str | None = eqx.field(static=True)

    def __init__(
        self,
        weight: Tensor[D, *tuple[Any, ...]],
        in_axes: tuple[type[Axis], ...],
        out_axes: tuple[type[Axis], ...],
        *,
        rank: int = 8,
        alpha: float = 16.0,
        key: jax.Array,
        where: str | None = None,
    ) -> None:
        if not isinstance(weight, Tensor):
            raise TypeError(f"LoRAWeight: weight must be a Tensor, got {type(weight).__name__}")
        ins = tuple(check_axis_label(a, "LoRAWeight") for a in in_axes)
        outs = tuple(check_axis_label(a, "LoRAWeight") for a in out_axes)
        rank = positive_int("LoRAWeight", "rank", rank)
        self.alpha = positive_float("LoRAWeight", "alpha", alpha)
        lead = adapter_lead("LoRAWeight", weight, outs + ins)
        sizes = weight.sizes
        n_in = int(np.prod([sizes[a] for a in ins]))
        bound = 1.0 / float(np.sqrt(n_in))
        dt = weight.array.dtype
        a_shape = (*(sizes[a] for a in lead), rank, *(sizes[a] for a in ins))
        self.lora_a = Tensor(
            jax.random.uniform(key, a_shape, dt, -bound, bound), (*lead, Rank, *ins)
        )
        b_shape = (*(sizes[a] for a in lead + outs), rank)
        self.lora_b = Tensor(jnp.zeros(b_shape, dt), (*lead, *outs, Rank))
        self.weight, self.in_axes, self.out_axes = weight, ins, outs
        self.where = optional_text("LoRAWeight", where)

    @property
    def rank(self) -> int:
        """The size of the ``Rank`` axis."""
        return self.lora_a.size(Rank)

    @property
    def scale(self) -> float:
        """``alpha / rank``: the factor of the low-rank update."""
        return self.alpha / self.rank

    @property
    def axes(self) -> tuple[type[Axis], ...]:
        """The base weight's axes."""
        return self.weight.axes

    @property
    def shape(self) -> tuple[int, ...]:
        """The base weight's shape."""
        return self.weight.shape

    @property
    def dtype(self) -> type[D]:
        """The base weight's dtype."""
        return self.weight.dtype

    @property
    def sizes(self) -> dict[type[Axis], int]:
        """The base weight's sizes by axis."""
        return self.weight.sizes

    def size(self, axis: type[Axis]) -> int:
        """The size of ``axis`` in the base weight."""
        return self.weight.size(axis)

    def merge(self) -> Tensor[D, *tuple[Any, ...]]:
        """The base weight with the update folded in: ``W + (alpha / rank) · B A``.

        Example:
            >>> plain = adapted.merge()   # a Tensor of the weight's axes
        """
        delta = transpose(contract(self.lora_b, self.lora_a, over=Rank), *self.weight.axes)
        merged: Tensor[D, *tuple[Any, ...]] = self.weight + delta * self.scale
        return merged


def project(
    x: AnyTensor,
    weight: AnyTensor | LoRAWeight[Any],
    *,
    over: type[Axis] | tuple[type[Axis], ...],
) -> AnyTensor:
    """``x`` through a layer's projection ``weight`` over its input axes ``over``:
    ``contract(x, weight, over=over)`` for a Tensor; for a :class:`LoRAWeight` that plus
    ``(alpha / rank) · contract(contract(x, A, over=over), B, over=Rank)`` (the update
    factorized, never ``W + BA``).

    Example:
        >>> q = project(x, self.query_proj, over=self.embed_axis)
    """
    if not isinstance(weight, LoRAWeight):
        return contract(x, weight, over=over)
    y = contract(x, weight.weight, over=over)
    h = contract(x, weight.lora_a, over=over)
    delta = contract(h, weight.lora_b, over=Rank)
    if delta.axes != y.axes:
        delta = transpose(delta, *y.axes)
    out: AnyTensor = y + delta * weight.scale
    return out
