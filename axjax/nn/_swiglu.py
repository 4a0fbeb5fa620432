"""The SwiGLU feed-forward block of Llama: ``down(silu(gate(x)) * up(x))``, no biases."""

from __future__ import annotations

from typing import Any, Generic, TypeVarTuple, cast

import equinox as eqx
import jax
from typing_extensions import TypeVar

from ..core import F32, AnyTensor, Axis, DType, Tensor
from ..core._internal import axis_name, check_axis_label, fail, positive_int
from ..ops import silu, transpose
from . import _init
from ._adapted import project
from ._registry import register_layer
from ._util import distinct, forbid, require

__all__ = ["SwiGLU"]

# SwiGLU's dtype, feature and hidden axes (the defaults are the constructor's)
D = TypeVar("D", bound=DType, default=F32)
E = TypeVar("E", bound=Axis, default=Any)
H = TypeVar("H", bound=Axis, default=Any)
S = TypeVarTuple("S")


@register_layer(
    linear_maps={
        "gate": (("embed_axis",), ("hidden_axis",)),
        "up": (("embed_axis",), ("hidden_axis",)),
        "down": (("hidden_axis",), ("embed_axis",)),
    }
)
class SwiGLU(eqx.Module, Generic[D, E, H]):
    """``down(silu(gate(x)) * up(x))`` over the feature axis ``embed_axis``: weights ``gate``
    and ``up`` ``[Hidden, Embed]``, ``down`` ``[Embed, Hidden]`` (the Hugging Face layouts
    of ``gate_proj``/``up_proj``/``down_proj``). The result has ``x``'s axes in its order.

    A ``SwiGLU[D, Embed, Hidden]`` takes a ``Tensor[D, ...]`` (its dtype, every checker) that
    holds ``Embed`` and not ``Hidden`` (the mypy plugin runs the layer's own checks).

    Example:
        >>> mlp = ax.nn.SwiGLU(Embed, 48, Hidden, 128, key=jax.random.key(0))
        >>> mlp(h)          # [Batch, Time, Embed] -> [Batch, Time, Embed]
    """

    gate: AnyTensor
    up: AnyTensor
    down: AnyTensor
    embed_axis: type[Axis] = eqx.field(static=True)
    hidden_axis: type[Axis] = eqx.field(static=True)

    def __init__(
        self,
        embed_axis: type[E],
        embed_size: int,
        hidden_axis: type[H],
        hidden_size: int,
        *,
        weight_init: _init.Initializer | None = None,
        dtype: type[D] = F32,  # type: ignore[assignment]  # D defaults to F32
        key: jax.Array,
    ) -> None:
        for a in (embed_axis, hidden_axis):
            check_axis_label(a, "SwiGLU")
        distinct("SwiGLU", (embed_axis, hidden_axis))
        e = positive_int("SwiGLU", "embed_size", embed_size)
        h = positive_int("SwiGLU", "hidden_size", hidden_size)
        self.embed_axis, self.hidden_axis = embed_axis, hidden_axis
        init = weight_init or _init.glorot_uniform()
        k1, k2, k3 = jax.random.split(key, 3)
        inner = {hidden_axis: h, embed_axis: e}
        self.gate, self.up = (
            init(k, inner, fan_in=embed_axis, fan_out=hidden_axis, dtype=dtype) for k in (k1, k2)
        )
        self.down = init(
            k3, {embed_axis: e, hidden_axis: h}, fan_in=hidden_axis, fan_out=embed_axis, dtype=dtype
        )

    def __call__(self, x: Tensor[D, *S], *, key: jax.Array | None = None) -> Tensor[D, *S]:
        """Apply the block; ``key`` is ignored (accepted for a uniform signature)."""
        name = f"SwiGLU({axis_name(self.embed_axis)})"
        t: AnyTensor = x
        require(name, (t,), t, self.embed_axis, self.gate.size(self.embed_axis))
        forbid(name, (t,), t, (self.hidden_axis,))
        if t.dtype is not self.gate.dtype:
            raise fail(
                name,
                (t,),
                f"the input is {t.dtype.__name__}, the layer's parameters "
                f"{self.gate.dtype.__name__} (convert the input with astype, or cast the layer)",
            )
        g: AnyTensor = project(t, self.gate, over=self.embed_axis)
        u: AnyTensor = project(t, self.up, over=self.embed_axis)
        y = transpose(project(silu(g) * u, self.down, over=self.hidden_axis), *t.axes)
        return cast("Tensor[D, *S]", y)  # the axes of x, in x's order
