"""Sequence layers from recurrent units: ``Recurrent``, ``Bidirectional`` and ``Stacked``.

Each runs its unit with one :func:`axjax.scan` over the named sequence axis and returns
the unit's output at every step, ``[Time, *Batch, Hidden]`` (the scanned axis first, as
``jax.lax.scan`` makes it). A Bool ``mask [*Batch, Time]`` marks the real steps of
right-padded sequences: padding steps carry the state unchanged, so the backward
direction of a ``Bidirectional`` layer starts at each sequence's own last step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax

from ..core import Axis, Tensor
from ..core.internal import axis_name, check_axis_label, fail
from ..graph import scan
from ..ops import concat
from ._util import split

__all__ = ["Recurrent", "Bidirectional", "Stacked"]

AnyTensor = Tensor[Any, *tuple[Any, ...]]


def _init_state(cell: Any, xs: AnyTensor, over: type[Axis]) -> Any:
    batch = {a: n for a, n in zip(xs.axes, xs.shape, strict=True)
             if a is not over and a is not cell.in_axis}
    unknown = [a for a, n in batch.items() if n is None]
    if unknown:
        raise fail("Recurrent", (xs,), f"the size of {axis_name(unknown[0])} is not known, so "
                   "the zero state cannot be built (pass init=, e.g. an ax.Input)")
    return cell.init_state(batch)


class Recurrent(eqx.Module):
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
    """

    cell: Any
    over: type[Axis] = eqx.field(static=True)
    reverse: bool = eqx.field(static=True)

    def __init__(self, cell: Any, over: type[Axis], *, reverse: bool = False) -> None:
        self.cell = cell
        self.over = check_axis_label(over, "Recurrent")
        self.reverse = reverse

    def __call__(self, xs: AnyTensor, *, init: Any = None, mask: AnyTensor | None = None,
                 key: jax.Array | None = None) -> AnyTensor:
        """Run over ``xs``; ``init`` defaults to the zero state of ``xs``'s batch axes."""
        if self.over not in xs.axes:
            raise fail(f"Recurrent(over={axis_name(self.over)})", (xs,),
                       f"{axis_name(self.over)} is not an axis of the input")
        state = _init_state(self.cell, xs, self.over) if init is None else init
        states = scan(self.cell, self.over, reverse=self.reverse)(state, xs, mask=mask)
        out: AnyTensor = self.cell.output(states)
        return out


class Bidirectional(eqx.Module):
    """A forward and a backward :class:`Recurrent` run; outputs joined along the hidden axis.

    Both cells must emit the same hidden axis; the result's hidden size is the sum.

    Example:
        >>> bi = ax.nn.Bidirectional(ax.nn.GRUCell(In, Hidden, 8, 16, key=k1),
        ...                          ax.nn.GRUCell(In, Hidden, 8, 16, key=k2), over=Time)
        >>> bi(xs, mask=mask)        # [Batch, Time, In] -> [Time, Batch, Hidden=32]
    """

    forward: Recurrent
    backward: Recurrent

    def __init__(self, forward_cell: Any, backward_cell: Any, over: type[Axis]) -> None:
        if forward_cell.hidden_axis is not backward_cell.hidden_axis:
            raise ValueError("Bidirectional: both cells must have the same hidden axis, got "
                             f"{axis_name(forward_cell.hidden_axis)} and "
                             f"{axis_name(backward_cell.hidden_axis)}")
        self.forward = Recurrent(forward_cell, over)
        self.backward = Recurrent(backward_cell, over, reverse=True)

    def __call__(self, xs: AnyTensor, *, mask: AnyTensor | None = None,
                 key: jax.Array | None = None) -> AnyTensor:
        """Run both directions over ``xs`` and concatenate their outputs."""
        fw = self.forward(xs, mask=mask)
        bw = self.backward(xs, mask=mask)
        return concat([fw, bw], self.forward.cell.hidden_axis)


class Stacked(eqx.Module):
    """Sequence layers applied in turn, each to the outputs of the one before.

    The mask is passed to every layer. Layers after the first read the hidden axis of the
    previous one (a cell with ``in_axis = hidden_axis`` does this; see :class:`Prev`).

    Example:
        >>> lstm = ax.nn.Stacked([
        ...     ax.nn.Recurrent(ax.nn.LSTMCell(In, Hidden, 8, 32, key=k1), over=Time),
        ...     ax.nn.Recurrent(ax.nn.LSTMCell(Hidden, Hidden, 32, 32, key=k2), over=Time),
        ... ])
        >>> lstm(xs, mask=mask)      # [Batch, Time, In] -> [Time, Batch, Hidden]
    """

    layers: tuple[Any, ...]

    def __init__(self, layers: Sequence[Any]) -> None:
        if not layers:
            raise ValueError("Stacked: give at least one layer")
        self.layers = tuple(layers)

    def __call__(self, xs: AnyTensor, *, mask: AnyTensor | None = None,
                 key: jax.Array | None = None) -> AnyTensor:
        """Apply every layer in order."""
        for layer, _k in zip(self.layers, split(key, len(self.layers)), strict=True):
            xs = layer(xs, mask=mask)
        return xs
