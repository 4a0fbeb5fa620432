"""Affine and Linear maps between named axes, and the MLP built from them.

``Affine(In, Out)`` is the paper's layer: a weight over ``[Out, In]`` and a bias over
``[Out]``; it maps ``Tensor[D, *B, In]`` to ``Tensor[D, *B, Out]`` for any leading axes
``*B``. The product is one ``dot_general`` (``ax.contract`` over ``In``) and the bias one
broadcast and add: the primitives of hand-written ``x @ W.T + b``.
"""

# the call's overloads spell "In at any position": they overlap where two positions agree
# mypy: disable-error-code="overload-overlap"
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVarTuple, overload

import equinox as eqx
import jax
from typing_extensions import TypeVar

from ..core import F32, AnyTensor, Axis, DType, Tensor
from ..core._internal import (
    axis_name,
    check_axis_label,
    fail,
    output_role,
    positive_int,
    positive_sizes,
)
from ..ops import broadcast, contract, relu, rename
from . import _init
from ._registry import register_layer
from ._util import distinct, forbid, require

__all__ = ["Affine", "Linear", "MLP"]

# a layer's dtype and axes; a bare `Affine` annotation is `Affine[F32, Any, Any]`, and a
# constructor without `dtype=` gives F32
D = TypeVar("D", bound=DType, default=F32)
In = TypeVar("In", bound=Axis, default=Any)
Out = TypeVar("Out", bound=Axis, default=Any)
T0 = TypeVar("T0", bound=Axis)
T1 = TypeVar("T1", bound=Axis)
T2 = TypeVar("T2", bound=Axis)
B = TypeVarTuple("B")
Activation = Callable[[Any], Any]


def _dense(
    name: str,
    x: AnyTensor,
    weight: AnyTensor,
    bias: AnyTensor | None,
    in_axis: type[Axis],
    out_axis: type[Axis],
) -> AnyTensor:
    n_in = dict(zip(weight.axes, weight.shape, strict=True))[in_axis]
    rows = weight.axes[0]  # out_axis, or Out[out_axis] for a square layer
    require(name, (x,), x, in_axis, n_in)
    forbid(name, (x,), x, (rows,))
    if x.dtype is not weight.dtype:
        raise fail(
            name,
            (x,),
            f"the input is {x.dtype.__name__}, the layer's parameters "
            f"{weight.dtype.__name__} (convert the input with astype, or cast the layer)",
        )
    y = contract(x, weight, over=in_axis)
    if rows is not out_axis:
        y = rename(y, rows, out_axis)
    if bias is not None:
        y = y + broadcast(bias, y)
    return y


def _describe(
    kind: str, in_axis: type[Axis], out_axis: type[Axis], n_in: int | None, n_out: int | None
) -> str:
    def sized(a: type[Axis], n: int | None) -> str:
        return axis_name(a) if n is None else f"{axis_name(a)}={n}"

    return f"{kind}({sized(in_axis, n_in)} -> {sized(out_axis, n_out)})"


class _Dense(eqx.Module, Generic[D, In, Out]):
    """The call of the dense layers: ``Tensor[D, ..., In, ...] -> Tensor[D, ..., Out]``.

    ``In`` may sit anywhere; the other axes keep their order and ``Out`` comes last. The
    overloads spell that for ``In`` among the first two or the last three axes (every
    position up to rank 5; the mypy plugin is exact at any rank); larger ranks are gradual.
    The dtype is the layer's own: a ``BF16`` input to an ``F32`` layer is an error.
    """

    @overload
    def __call__(
        self, x: Tensor[D, *B, In], *, key: jax.Array | None = None
    ) -> Tensor[D, *B, Out]: ...
    @overload
    def __call__(
        self, x: Tensor[D, *B, In, T0], *, key: jax.Array | None = None
    ) -> Tensor[D, *B, T0, Out]: ...
    @overload
    def __call__(
        self, x: Tensor[D, *B, In, T0, T1], *, key: jax.Array | None = None
    ) -> Tensor[D, *B, T0, T1, Out]: ...
    @overload
    def __call__(
        self, x: Tensor[D, In, *B], *, key: jax.Array | None = None
    ) -> Tensor[D, *B, Out]: ...
    @overload
    def __call__(
        self, x: Tensor[D, T0, In, *B], *, key: jax.Array | None = None
    ) -> Tensor[D, T0, *B, Out]: ...
    @overload
    def __call__(
        self, x: Tensor[D, T0, T1, T2, Any, Any, Any, *B], *, key: jax.Array | None = None
    ) -> Tensor[D, *tuple[Any, ...]]: ...
    def __call__(self, x: AnyTensor, *, key: jax.Array | None = None) -> AnyTensor:
        """Apply the layer; ``key`` is ignored (accepted for a uniform signature)."""
        return self._apply(x)

    def _apply(self, x: AnyTensor) -> AnyTensor:
        raise NotImplementedError


@register_layer()
class Affine(_Dense[D, In, Out]):
    """``y = W x + b`` from axis ``In`` to axis ``Out``: the paper's Affine layer.

    An ``Affine[D, In, Out]``: ``weight`` is ``Tensor[D, Out, In]``, ``bias`` is
    ``Tensor[D, Out]``. The call maps ``Tensor[D, *B, In] -> Tensor[D, *B, Out]``: ``In``
    may sit anywhere in the input, the other axes keep their order and ``Out`` comes last;
    the input's dtype is the layer's.

    Args:
        in_axis, out_axis: the axis read and the axis produced (different labels).
        in_size, out_size: their sizes.
        weight_init: initialiser of the weight (Glorot uniform by default).
        bias_init: initialiser of the bias (zeros by default).
        dtype: dtype of the parameters (``F32`` by default; the type's ``D``).
        key: PRNG key for the initialisers (keyword only).

    Example:
        >>> layer = ax.nn.Affine(Pixel, Hidden, 784, 300, key=jax.random.key(0))
        >>> layer                    # Affine[F32, Pixel, Hidden]
        >>> layer(images)            # Tensor[F32, Batch, Pixel] -> Tensor[F32, Batch, Hidden]
    """

    weight: Tensor[D, Out, In]
    bias: Tensor[D, Out]
    in_axis: type[In] = eqx.field(static=True)
    out_axis: type[Out] = eqx.field(static=True)

    # BEGIN GENERATED by tools/gen_overloads.py: the constructor's types (do not edit)
    @overload
    def __init__(
        self,
        in_axis: type[In],
        out_axis: type[Out],
        in_size: int,
        out_size: int,
        *,
        weight_init: _init.Initializer | None = ...,
        bias_init: _init.Initializer | None = ...,
        dtype: type[D],
        key: jax.Array,
    ) -> None: ...
    @overload
    def __init__(
        self,
        in_axis: type[In],
        out_axis: type[Out],
        in_size: int,
        out_size: int,
        *,
        weight_init: _init.Initializer | None = ...,
        bias_init: _init.Initializer | None = ...,
        key: jax.Array,
    ) -> None: ...
    # END GENERATED
    def __init__(
        self,
        in_axis: type[In],
        out_axis: type[Out],
        in_size: int,
        out_size: int,
        *,
        weight_init: _init.Initializer | None = None,
        bias_init: _init.Initializer | None = None,
        dtype: type[DType] = F32,
        key: jax.Array,
    ) -> None:
        check_axis_label(in_axis, "Affine")
        check_axis_label(out_axis, "Affine")
        self.in_axis, self.out_axis = in_axis, out_axis
        rows = _rows(in_axis, out_axis)
        in_size, out_size = _sizes("Affine", in_size, out_size)
        wkey, bkey = jax.random.split(key)
        w_init = weight_init or _init.glorot_uniform()
        self.weight = w_init(
            wkey,
            {rows: out_size, in_axis: in_size},
            fan_in=in_axis,
            fan_out=rows,
            dtype=dtype,
        )
        self.bias = (bias_init or _init.zeros())(
            bkey, {out_axis: out_size}, fan_in=(), fan_out=out_axis, dtype=dtype
        )

    def _apply(self, x: AnyTensor) -> AnyTensor:
        out: AnyTensor = _dense(
            self._name(), x, self.weight, self.bias, self.in_axis, self.out_axis
        )
        return out

    def _name(self) -> str:
        n_out, n_in = self.weight.shape
        return _describe("Affine", self.in_axis, self.out_axis, n_in, n_out)


#: for the layers that extend the dense call (``LoRA``): the call's base, the product, the name
DenseCall = _Dense
dense_product = _dense
describe_dense = _describe


def _rows(in_axis: type[Axis], out_axis: type[Axis]) -> type[Axis]:
    """The weight's output axis: ``out_axis``, or its output role ``ax.Out[out_axis]`` when
    the layer maps an axis to itself (a weight never has an axis twice)."""
    return output_role(out_axis) if out_axis is in_axis else out_axis


def _sizes(where: str, in_size: int, out_size: int) -> tuple[int, int]:
    """A dense layer's two sizes, each a positive int."""
    return positive_int(where, "in_size", in_size), positive_int(where, "out_size", out_size)


@register_layer()
class Linear(_Dense[D, In, Out]):
    """``y = W x`` from axis ``In`` to axis ``Out``: :class:`Affine` without the bias.

    Example:
        >>> proj = ax.nn.Linear(Embed, Hidden, 64, 128, key=jax.random.key(0))
        >>> proj(tokens)             # Tensor[F32, Batch, Time, Embed] -> [Batch, Time, Hidden]
    """

    weight: Tensor[D, Out, In]
    in_axis: type[In] = eqx.field(static=True)
    out_axis: type[Out] = eqx.field(static=True)

    # BEGIN GENERATED by tools/gen_overloads.py: the constructor's types (do not edit)
    @overload
    def __init__(
        self,
        in_axis: type[In],
        out_axis: type[Out],
        in_size: int,
        out_size: int,
        *,
        weight_init: _init.Initializer | None = ...,
        dtype: type[D],
        key: jax.Array,
    ) -> None: ...
    @overload
    def __init__(
        self,
        in_axis: type[In],
        out_axis: type[Out],
        in_size: int,
        out_size: int,
        *,
        weight_init: _init.Initializer | None = ...,
        key: jax.Array,
    ) -> None: ...
    # END GENERATED
    def __init__(
        self,
        in_axis: type[In],
        out_axis: type[Out],
        in_size: int,
        out_size: int,
        *,
        weight_init: _init.Initializer | None = None,
        dtype: type[DType] = F32,
        key: jax.Array,
    ) -> None:
        check_axis_label(in_axis, "Linear")
        check_axis_label(out_axis, "Linear")
        self.in_axis, self.out_axis = in_axis, out_axis
        rows = _rows(in_axis, out_axis)
        in_size, out_size = _sizes("Linear", in_size, out_size)
        w_init = weight_init or _init.glorot_uniform()
        self.weight = w_init(
            key,
            {rows: out_size, in_axis: in_size},
            fan_in=in_axis,
            fan_out=rows,
            dtype=dtype,
        )

    def _apply(self, x: AnyTensor) -> AnyTensor:
        n_out, n_in = self.weight.shape
        name = _describe("Linear", self.in_axis, self.out_axis, n_in, n_out)
        out: AnyTensor = _dense(name, x, self.weight, None, self.in_axis, self.out_axis)
        return out


@register_layer()
class MLP(_Dense[D, In, Out]):
    """A stack of :class:`Affine` layers with an activation between them.

    Every layer needs its own output axis (a weight never has an axis twice), so the hidden
    layers are given as ``{axis: size}`` in order. The paper's 784-300-100-10 network:

    Example:
        >>> mlp = ax.nn.MLP(Pixel, Class, 784, 10, hidden={Hidden1: 300, Hidden2: 100},
        ...                 activation=ax.relu, key=jax.random.key(0))
        >>> mlp                      # MLP[F32, Pixel, Class]
        >>> mlp(images)              # Tensor[F32, Batch, Pixel] -> Tensor[F32, Batch, Class]

    Args:
        in_axis, out_axis, in_size, out_size: as for :class:`Affine`.
        hidden: the hidden axes and their sizes, first layer first (may be empty).
        activation: applied after every hidden layer (``ax.relu`` by default).
        final_activation: applied to the output (identity by default).
        weight_init, bias_init, dtype, key: as for :class:`Affine`.
    """

    layers: tuple[Affine[D, Any, Any], ...]
    activation: Activation = eqx.field(static=True)
    final_activation: Activation | None = eqx.field(static=True)

    def __init__(
        self,
        in_axis: type[In],
        out_axis: type[Out],
        in_size: int,
        out_size: int,
        *,
        hidden: Mapping[type[Axis], int] | None = None,
        activation: Activation = relu,
        final_activation: Activation | None = None,
        weight_init: _init.Initializer | None = None,
        bias_init: _init.Initializer | None = None,
        dtype: type[D] = F32,  # type: ignore[assignment]  # D defaults to F32
        key: jax.Array,
    ) -> None:
        in_size, out_size = _sizes("MLP", in_size, out_size)
        hidden = positive_sizes("MLP", "hidden", hidden or {})
        axes: list[Any] = [in_axis, *hidden, out_axis]
        sizes = [in_size, *hidden.values(), out_size]
        # the output may be the input (a square last layer writes ax.Out[In])
        distinct("MLP", axes[:-1] if axes[0] is axes[-1] else axes)
        keys = list(jax.random.split(key, len(axes) - 1))
        self.layers = tuple(
            Affine(a, b, n, m, weight_init=weight_init, bias_init=bias_init, dtype=dtype, key=k)
            for a, b, n, m, k in zip(axes, axes[1:], sizes, sizes[1:], keys, strict=False)
        )
        self.activation = activation
        self.final_activation = final_activation

    def _apply(self, x: AnyTensor) -> AnyTensor:
        for layer in self.layers[:-1]:
            x = self.activation(layer(x))
        y = self.layers[-1](x)
        return self.final_activation(y) if self.final_activation is not None else y
