"""Sequence layers from recurrent units: ``Recurrent``, ``Bidirectional`` and ``Stacked``.

Each runs its unit with one :func:`axjax.scan` over the named sequence axis and returns
the unit's output at every step, ``[Time, *Batch, Hidden]`` (the scanned axis first, as
``jax.lax.scan`` makes it). A Bool ``mask [*Batch, Time]`` marks the real steps of
right-padded sequences: padding steps carry the state unchanged, so the backward
direction of a ``Bidirectional`` layer starts at each sequence's own last step.
"""

# the layouts' overloads overlap where two of them agree
# mypy: disable-error-code="overload-overlap"
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, overload

import equinox as eqx
import jax
from typing_extensions import TypeVar, TypeVarTuple, Unpack

from ..core import AnyTensor, Axis, Bool, DType, Tensor
from ..core._internal import PyTree, argument, axis_name, check_axis_label, fail
from ..graph import scan
from ..ops import concat
from ._recurrent import AbstractCell
from ._registry import register_layer
from ._util import split

__all__ = ["Recurrent", "Bidirectional", "Stacked"]

# a sequence layer's type names its cell(s) and the scanned axis: Recurrent[LSTMCell[F32, In,
# Hidden], Time]; covariant, so that the call's self-typed overloads read the cell's D, In, H
Cell = TypeVar(
    "Cell",
    bound="AbstractCell[Any, Any, Any]",
    covariant=True,
    default="AbstractCell[Any, Any, Any]",
)
Cell2 = TypeVar(
    "Cell2",
    bound="AbstractCell[Any, Any, Any]",
    covariant=True,
    default="AbstractCell[Any, Any, Any]",
)
Over = TypeVar("Over", bound=Axis, covariant=True, default=Any)
D = TypeVar("D", bound=DType)
In = TypeVar("In", bound=Axis)
H = TypeVar("H", bound=Axis)
T = TypeVar("T", bound=Axis)
A1 = TypeVar("A1", bound=Axis)
B = TypeVarTuple("B")
Mask = Tensor[Bool, *tuple[Any, ...]]
Layers = TypeVarTuple("Layers", default=Unpack[tuple[Any, ...]])


def _init_state(cell: AbstractCell[Any, Any, Any], xs: AnyTensor, over: type[Axis]) -> PyTree:
    batch = {
        a: n
        for a, n in zip(xs.axes, xs.shape, strict=True)
        if a is not over and a is not cell.in_axis
    }
    unknown = [a for a, n in batch.items() if n is None]
    if unknown:
        raise fail(
            "Recurrent",
            (xs,),
            f"the size of {axis_name(unknown[0])} is not known, so "
            "the zero state cannot be built (pass init=, e.g. an ax.Input)",
        )
    return cell.init_state(batch)


@register_layer(sized=True)
class Recurrent(eqx.Module, Generic[Cell, Over]):
    """A recurrent unit run along axis ``over``; returns its output at every step.

    Args:
        cell: an :class:`RNNCell`, :class:`GRUCell`, :class:`LSTMCell` (anything with
            ``cell(state, x)``, ``cell.init_state(batch)``, ``cell.output(state)`` and
            ``cell.in_axis``).
        over: the sequence axis (``Time``).
        reverse: run from the last step to the first.

    Example:
        >>> rnn = ax.nn.Recurrent(ax.nn.LSTMCell(In, Hidden, 8, 32, key=key), over=Time)
        >>> hs = rnn(xs)             # [Batch, Time, In] -> [Time, Batch, Hidden]
        >>> hs = rnn(xs, mask=mask)  # mask: Tensor[Bool, Batch, Time], false on padding

    A ``Recurrent[LSTMCell[F32, In, Hidden], Time]``: the call maps ``[*B, Time, In]`` or
    ``[Time, *B, In]`` (and ``[*B, Time, T, In]``) to ``[Time, *B, Hidden]`` in the cell's
    dtype. The mypy plugin runs the layer itself (any layout, the mask's and ``init``'s axes);
    without it other layouts need a transpose.
    """

    cell: Cell
    over: type[Axis] = eqx.field(static=True)
    reverse: bool = eqx.field(static=True)

    def __init__(self, cell: Cell, over: type[Over], *, reverse: bool = False) -> None:
        self.cell = cell
        self.over = check_axis_label(over, "Recurrent")
        self.reverse = reverse

    @overload
    def __call__(
        self: Recurrent[AbstractCell[D, In, H], T],
        xs: Tensor[D, *B, T, In],
        *,
        init: PyTree = None,
        mask: Mask | None = None,
        key: jax.Array | None = None,
    ) -> Tensor[D, T, *B, H]: ...
    @overload
    def __call__(
        self: Recurrent[AbstractCell[D, In, H], T],
        xs: Tensor[D, T, *B, In],
        *,
        init: PyTree = None,
        mask: Mask | None = None,
        key: jax.Array | None = None,
    ) -> Tensor[D, T, *B, H]: ...
    @overload
    def __call__(
        self: Recurrent[AbstractCell[D, In, H], T],
        xs: Tensor[D, *B, T, A1, In],
        *,
        init: PyTree = None,
        mask: Mask | None = None,
        key: jax.Array | None = None,
    ) -> Tensor[D, T, *B, A1, H]: ...
    def __call__(
        self,
        xs: AnyTensor,
        *,
        init: PyTree = None,
        mask: AnyTensor | None = None,
        key: jax.Array | None = None,
    ) -> AnyTensor:
        """Run over ``xs``; ``init`` defaults to the zero state of ``xs``'s batch axes."""
        if self.over not in xs.axes:
            raise fail(
                f"Recurrent(over={axis_name(self.over)})",
                (xs,),
                f"{axis_name(self.over)} is not an axis of the input",
                subject=xs,
            )
        cell: Any = self.cell  # a cell subclass's call (AbstractCell declares none)
        state = _init_state(cell, xs, self.over) if init is None else init
        with argument("xs"):  # the cell's errors on a step of xs (the mask's say so)
            states = scan(cell, self.over, reverse=self.reverse)(state, xs, mask=mask)
        out: AnyTensor = cell.output(states)
        return out


@register_layer(sized=True)
class Bidirectional(eqx.Module, Generic[Cell, Cell2, Over]):
    """A forward and a backward :class:`Recurrent` run; outputs joined along the hidden axis.

    Both cells must emit the same hidden axis; the result's hidden size is the sum.

    Example:
        >>> bi = ax.nn.Bidirectional(ax.nn.GRUCell(In, Hidden, 8, 16, key=k1),
        ...                          ax.nn.GRUCell(In, Hidden, 8, 16, key=k2), over=Time)
        >>> bi(xs, mask=mask)        # [Batch, Time, In] -> [Time, Batch, Hidden=32]

    A ``Bidirectional[GRUCell[F32, In, Hidden], GRUCell[F32, In, Hidden], Time]``, typed as
    :class:`Recurrent` (the two cells share the dtype and the axes).
    """

    forward: Recurrent[Cell, Over]
    backward: Recurrent[Cell2, Over]

    def __init__(self, forward_cell: Cell, backward_cell: Cell2, over: type[Over]) -> None:
        if forward_cell.hidden_axis is not backward_cell.hidden_axis:
            raise ValueError(
                "Bidirectional: both cells must have the same hidden axis, got "
                f"{axis_name(forward_cell.hidden_axis)} and "
                f"{axis_name(backward_cell.hidden_axis)}"
            )
        self.forward = Recurrent(forward_cell, over)
        self.backward = Recurrent(backward_cell, over, reverse=True)

    @overload
    def __call__(
        self: Bidirectional[AbstractCell[D, In, H], AbstractCell[D, In, H], T],
        xs: Tensor[D, *B, T, In],
        *,
        mask: Mask | None = None,
        key: jax.Array | None = None,
    ) -> Tensor[D, T, *B, H]: ...
    @overload
    def __call__(
        self: Bidirectional[AbstractCell[D, In, H], AbstractCell[D, In, H], T],
        xs: Tensor[D, T, *B, In],
        *,
        mask: Mask | None = None,
        key: jax.Array | None = None,
    ) -> Tensor[D, T, *B, H]: ...
    def __call__(
        self, xs: AnyTensor, *, mask: AnyTensor | None = None, key: jax.Array | None = None
    ) -> AnyTensor:
        """Run both directions over ``xs`` and concatenate their outputs."""
        fw = self.forward(xs, mask=mask)
        bw = self.backward(xs, mask=mask)
        return concat([fw, bw], self.forward.cell.hidden_axis)


@register_layer(typed="chain")
class Stacked(eqx.Module, Generic[*Layers]):
    """Sequence layers applied in turn, each to the outputs of the one before.

    The mask is passed to every layer. Layers after the first read the hidden axis of the
    previous one (a cell with ``in_axis = hidden_axis`` does this; see :class:`Prev`).

    Example:
        >>> lstm = ax.nn.Stacked([
        ...     ax.nn.Recurrent(ax.nn.LSTMCell(In, Hidden, 8, 32, key=k1), over=Time),
        ...     ax.nn.Recurrent(ax.nn.LSTMCell(Hidden, Hidden, 32, 32, key=k2), over=Time),
        ... ])
        >>> lstm(xs, mask=mask)      # [Batch, Time, In] -> [Time, Batch, Hidden]

    Under the mypy plugin a ``Stacked([...])`` of a list literal keeps its layers' types
    (``Stacked[Recurrent[...], Recurrent[...]]``) and its call threads the sequence through
    each of them, as :class:`Sequential` does; otherwise its call is gradual.
    """

    layers: tuple[Any, ...]

    def __init__(self, layers: Sequence[Callable[..., Any]]) -> None:
        if not layers:
            raise ValueError("Stacked: give at least one layer")
        self.layers = tuple(layers)

    def __call__(
        self, xs: AnyTensor, *, mask: AnyTensor | None = None, key: jax.Array | None = None
    ) -> AnyTensor:
        """Apply every layer in order."""
        for layer, _k in zip(self.layers, split(key, len(self.layers)), strict=True):
            xs = layer(xs, mask=mask)
        return xs
