"""Convolution layers over named spatial and channel axes (the paper's §6.2).

``Conv2D((Height, Width), Chan, Feature, ...)`` reads ``Height, Width, Chan`` and writes
``Feature`` in place of ``Chan``; the input's axes may come in any order and every other
axis is a batch axis. The kernel is ``Tensor[F32, Feature, Chan, Height, Width]`` (the
``OIHW`` layout of PyTorch and Equinox), the bias ``Tensor[F32, Feature]``.

``Conv1D``, ``Conv2D`` and ``Conv3D`` are generic in their dtype and axes, as
``ax.nn.Affine`` is: ``Conv2D((Height, Width), Chan, Feature, ...)`` is a ``Conv2D[F32,
Height, Width, Chan, Feature]``. Its call keeps the input's axes in place, ``Feature``
where ``Chan`` was. Without the plugin the type checkers accept the channel-last layouts
``Tensor[D, *B, Height, Width, Chan]`` (or ``Width, Height``) and the channel-first ones
``Tensor[D, *B, Chan, Height, Width]`` (or ``Width, Height``); other layouts run, and the
mypy plugin accepts them (it runs the layer's own check), but pyright needs a
``transpose`` first (one ``TypeVarTuple`` per type cannot say "these axes anywhere"). The
N-d ``Conv`` is gradual. A bare ``Conv2D`` annotation means ``Conv2D[F32, Any, Any, Any,
Any]``.
"""

# the layouts' overloads overlap where two of them agree
# mypy: disable-error-code="overload-overlap"
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVarTuple, overload

import equinox as eqx
import jax
from typing_extensions import TypeVar

from ..core import F32, AnyTensor, Axis, AxisError, DType, Tensor
from ..core._internal import axes_names, axis_name, fail, positive_int
from ..ops import broadcast, conv
from ..ops._internal import Padding, normalize_padding, per_axis
from . import _init
from ._registry import register_layer
from ._util import AxisArg, as_axes, distinct, forbid, require, size_of

__all__ = ["Conv", "Conv1D", "Conv2D", "Conv3D"]

D = TypeVar("D", bound=DType, default=F32)
B = TypeVarTuple("B")
# the axes of a layer; a bare `Conv2D` annotation leaves them open (Any)
S1 = TypeVar("S1", bound=Axis, default=Any)
S2 = TypeVar("S2", bound=Axis, default=Any)
S3 = TypeVar("S3", bound=Axis, default=Any)
In = TypeVar("In", bound=Axis, default=Any)
Out = TypeVar("Out", bound=Axis, default=Any)


@register_layer(typed="signature")
class Conv(eqx.Module):
    """N-d convolution over the named ``spatial`` axes, from ``in_axis`` to ``out_axis``.

    Args:
        spatial: the axes the kernel slides over (one for Conv1D, two for Conv2D, ...).
        in_axis, out_axis: the input and output channel axes (different labels).
        in_size, out_size: the numbers of input and output channels.
        kernel_size: an int, or one int per spatial axis.
        stride, dilation: an int, or one per spatial axis.
        padding: ``"VALID"`` (default), ``"SAME"``, an int, or ``(lo, hi)`` per axis.
        groups: split the channels into groups (``groups = in_size`` is depthwise).
        use_bias: add a bias over ``out_axis``.
        weight_init, bias_init: initialisers (Glorot uniform over ``fan_in = (In, *spatial)``
            and ``fan_out = (Out, *spatial)``; zeros).
        dtype, key: parameter dtype; PRNG key (keyword only).

    Example:
        >>> conv = ax.nn.Conv((Height, Width), Chan, Feature, 1, 32, 3, padding="SAME",
        ...                   key=jax.random.key(0))
        >>> conv(images)   # [Batch, Height, Width, Chan] -> [Batch, Height, Width, Feature]
    """

    weight: AnyTensor
    bias: AnyTensor | None
    spatial: tuple[type[Axis], ...] = eqx.field(static=True)
    in_axis: type[Axis] = eqx.field(static=True)
    out_axis: type[Axis] = eqx.field(static=True)
    stride: tuple[int, ...] = eqx.field(static=True)
    padding: str | tuple[tuple[int, int], ...] = eqx.field(static=True)
    dilation: tuple[int, ...] = eqx.field(static=True)
    groups: int = eqx.field(static=True)

    def __init__(
        self,
        spatial: AxisArg,
        in_axis: type[Axis],
        out_axis: type[Axis],
        in_size: int,
        out_size: int,
        kernel_size: int | Sequence[int],
        *,
        stride: int | Sequence[int] = 1,
        padding: Padding = "VALID",
        dilation: int | Sequence[int] = 1,
        groups: int = 1,
        use_bias: bool = True,
        weight_init: _init.Initializer | None = None,
        bias_init: _init.Initializer | None = None,
        dtype: type[DType] = F32,
        key: jax.Array,
    ) -> None:
        self.spatial = as_axes(spatial, type(self).__name__)
        in_axis, out_axis = as_axes((in_axis, out_axis), type(self).__name__)
        where = type(self).__name__
        distinct(where, (*self.spatial, in_axis, out_axis))
        in_size, out_size = (
            positive_int(where, "in_size", in_size),
            positive_int(where, "out_size", out_size),
        )
        groups = positive_int(where, "groups", groups)
        if in_size % groups or out_size % groups:
            raise ValueError(
                f"{type(self).__name__}: {in_size} input and {out_size} output "
                f"channels must both divide into {groups} groups"
            )
        self.in_axis, self.out_axis = in_axis, out_axis
        n = len(self.spatial)
        kernel = per_axis(kernel_size, n, "kernel_size", where)
        self.stride = per_axis(stride, n, "stride", where)
        self.dilation = per_axis(dilation, n, "dilation", where)
        pads = normalize_padding(padding, n, where)  # checked (non-negative ints) here
        self.padding = padding if isinstance(padding, str) else pads
        self.groups = groups
        wkey, bkey = jax.random.split(key)
        sizes = {
            out_axis: out_size,
            in_axis: in_size // groups,
            **dict(zip(self.spatial, kernel, strict=True)),
        }
        self.weight = (weight_init or _init.glorot_uniform())(
            wkey,
            sizes,
            fan_in=(in_axis, *self.spatial),
            fan_out=(out_axis, *self.spatial),
            dtype=dtype,
        )
        self.bias = (
            (bias_init or _init.zeros())(
                bkey, {out_axis: out_size}, fan_in=(), fan_out=out_axis, dtype=dtype
            )
            if use_bias
            else None
        )

    def _name(self) -> str:
        return (
            f"{type(self).__name__}(({axes_names(self.spatial)}), "
            f"{axis_name(self.in_axis)} -> {axis_name(self.out_axis)})"
        )

    def __call__(self, x: AnyTensor, *, key: jax.Array | None = None) -> AnyTensor:
        """Convolve ``x``; ``key`` is ignored."""
        name = self._name()
        n_in = size_of(self.weight, self.in_axis)  # None in the type checker's stand-in
        require(name, (x,), x, self.in_axis, None if n_in is None else n_in * self.groups)
        for a in self.spatial:
            require(name, (x,), x, a, None)
        forbid(name, (x,), x, (self.out_axis,))
        try:
            y = conv(
                x, self.weight, self.spatial, self.stride, self.padding, self.dilation, self.groups
            )
        except AxisError as e:  # re-word size errors with the layer's name
            why = str(e).split(": ", 1)[-1]
            raise fail(name, (x,), why) from None
        if self.bias is not None:
            y = y + broadcast(self.bias, y)
        return y


@register_layer()
class Conv1D(Conv, Generic[D, S1, In, Out]):
    """:class:`Conv` over one spatial axis (``Time``, say): a ``Conv1D[F32, Time, Chan,
    Feature]`` maps ``[*B, Time, Chan]`` to ``[*B, Time, Feature]`` and ``[*B, Chan, Time]``
    to ``[*B, Feature, Time]``.

    Example:
        >>> ax.nn.Conv1D(Time, Chan, Feature, 8, 16, 5, key=key)(signal)
    """

    # BEGIN GENERATED by tools/gen_overloads.py: the constructor's types (do not edit)
    @overload
    def __init__(
        self,
        spatial: type[S1],
        in_axis: type[In],
        out_axis: type[Out],
        in_size: int,
        out_size: int,
        kernel_size: int,
        *,
        dtype: type[D],
        **kwargs: Any,
    ) -> None: ...
    @overload
    def __init__(
        self,
        spatial: type[S1],
        in_axis: type[In],
        out_axis: type[Out],
        in_size: int,
        out_size: int,
        kernel_size: int,
        **kwargs: Any,
    ) -> None: ...
    # END GENERATED
    def __init__(
        self,
        spatial: type[S1],
        in_axis: type[In],
        out_axis: type[Out],
        in_size: int,
        out_size: int,
        kernel_size: int,
        *,
        dtype: type[DType] = F32,
        **kwargs: Any,
    ) -> None:
        if isinstance(spatial, tuple):
            raise TypeError("Conv1D: give one spatial axis (use Conv for several)")
        super().__init__(
            spatial, in_axis, out_axis, in_size, out_size, kernel_size, dtype=dtype, **kwargs
        )

    @overload
    def __call__(
        self, x: Tensor[D, *B, S1, In], *, key: jax.Array | None = None
    ) -> Tensor[D, *B, S1, Out]: ...
    @overload
    def __call__(
        self, x: Tensor[D, *B, In, S1], *, key: jax.Array | None = None
    ) -> Tensor[D, *B, Out, S1]: ...
    def __call__(self, x: AnyTensor, *, key: jax.Array | None = None) -> AnyTensor:
        """Convolve ``x``; ``key`` is ignored."""
        return super().__call__(x, key=key)


@register_layer()
class Conv2D(Conv, Generic[D, S1, S2, In, Out]):
    """:class:`Conv` over two spatial axes, ``(Height, Width)`` say (the paper's Conv2D).

    A ``Conv2D[F32, Height, Width, Chan, Feature]`` maps ``[*B, Height, Width, Chan]`` to
    ``[*B, Height, Width, Feature]`` and ``[*B, Chan, Height, Width]`` to ``[*B, Feature,
    Height, Width]``: the overloads take the three axes last in any order (``Out`` where
    ``In`` was); other layouts run too (the mypy plugin accepts them, plain mypy and pyright
    need a transpose).

    Example:
        >>> ax.nn.Conv2D((Height, Width), Chan, Feature, 1, 32, 3, key=key)(images)
    """

    # BEGIN GENERATED by tools/gen_overloads.py: the constructor's types (do not edit)
    @overload
    def __init__(
        self,
        spatial: tuple[type[S1], type[S2]],
        in_axis: type[In],
        out_axis: type[Out],
        in_size: int,
        out_size: int,
        kernel_size: int | tuple[int, int],
        *,
        dtype: type[D],
        **kwargs: Any,
    ) -> None: ...
    @overload
    def __init__(
        self,
        spatial: tuple[type[S1], type[S2]],
        in_axis: type[In],
        out_axis: type[Out],
        in_size: int,
        out_size: int,
        kernel_size: int | tuple[int, int],
        **kwargs: Any,
    ) -> None: ...
    # END GENERATED
    def __init__(
        self,
        spatial: tuple[type[S1], type[S2]],
        in_axis: type[In],
        out_axis: type[Out],
        in_size: int,
        out_size: int,
        kernel_size: int | tuple[int, int],
        *,
        dtype: type[DType] = F32,
        **kwargs: Any,
    ) -> None:
        if type(spatial) is not tuple or len(spatial) != 2:
            raise TypeError(
                f"Conv2D: spatial must be two axes such as (Height, Width), got {spatial!r}"
            )
        super().__init__(
            spatial, in_axis, out_axis, in_size, out_size, kernel_size, dtype=dtype, **kwargs
        )

    @overload
    def __call__(
        self, x: Tensor[D, *B, S1, S2, In], *, key: jax.Array | None = None
    ) -> Tensor[D, *B, S1, S2, Out]: ...
    @overload
    def __call__(
        self, x: Tensor[D, *B, In, S1, S2], *, key: jax.Array | None = None
    ) -> Tensor[D, *B, Out, S1, S2]: ...
    @overload
    def __call__(
        self, x: Tensor[D, *B, S2, S1, In], *, key: jax.Array | None = None
    ) -> Tensor[D, *B, S2, S1, Out]: ...
    @overload
    def __call__(
        self, x: Tensor[D, *B, In, S2, S1], *, key: jax.Array | None = None
    ) -> Tensor[D, *B, Out, S2, S1]: ...
    @overload
    def __call__(
        self, x: Tensor[D, *B, S1, In, S2], *, key: jax.Array | None = None
    ) -> Tensor[D, *B, S1, Out, S2]: ...
    @overload
    def __call__(
        self, x: Tensor[D, *B, S2, In, S1], *, key: jax.Array | None = None
    ) -> Tensor[D, *B, S2, Out, S1]: ...
    def __call__(self, x: AnyTensor, *, key: jax.Array | None = None) -> AnyTensor:
        """Convolve ``x``; ``key`` is ignored."""
        return super().__call__(x, key=key)


@register_layer()
class Conv3D(Conv, Generic[D, S1, S2, S3, In, Out]):
    """:class:`Conv` over three spatial axes, ``(Depth, Height, Width)`` say: a
    ``Conv3D[F32, Depth, Height, Width, Chan, Feature]`` maps ``[*B, Depth, Height, Width,
    Chan]`` and ``[*B, Chan, Depth, Height, Width]``."""

    # BEGIN GENERATED by tools/gen_overloads.py: the constructor's types (do not edit)
    @overload
    def __init__(
        self,
        spatial: tuple[type[S1], type[S2], type[S3]],
        in_axis: type[In],
        out_axis: type[Out],
        in_size: int,
        out_size: int,
        kernel_size: int | tuple[int, int, int],
        *,
        dtype: type[D],
        **kwargs: Any,
    ) -> None: ...
    @overload
    def __init__(
        self,
        spatial: tuple[type[S1], type[S2], type[S3]],
        in_axis: type[In],
        out_axis: type[Out],
        in_size: int,
        out_size: int,
        kernel_size: int | tuple[int, int, int],
        **kwargs: Any,
    ) -> None: ...
    # END GENERATED
    def __init__(
        self,
        spatial: tuple[type[S1], type[S2], type[S3]],
        in_axis: type[In],
        out_axis: type[Out],
        in_size: int,
        out_size: int,
        kernel_size: int | tuple[int, int, int],
        *,
        dtype: type[DType] = F32,
        **kwargs: Any,
    ) -> None:
        if type(spatial) is not tuple or len(spatial) != 3:
            raise TypeError(f"Conv3D: spatial must be three axes, got {spatial!r}")
        super().__init__(
            spatial, in_axis, out_axis, in_size, out_size, kernel_size, dtype=dtype, **kwargs
        )

    @overload
    def __call__(
        self, x: Tensor[D, *B, S1, S2, S3, In], *, key: jax.Array | None = None
    ) -> Tensor[D, *B, S1, S2, S3, Out]: ...
    @overload
    def __call__(
        self, x: Tensor[D, *B, In, S1, S2, S3], *, key: jax.Array | None = None
    ) -> Tensor[D, *B, Out, S1, S2, S3]: ...
    def __call__(self, x: AnyTensor, *, key: jax.Array | None = None) -> AnyTensor:
        """Convolve ``x``; ``key`` is ignored."""
        return super().__call__(x, key=key)
