"""Recurrent units (paper §6.3): a unit maps ``(state, input) -> state``.

``RNNCell`` (Elman), ``GRUCell`` and ``LSTMCell`` read an input ``[*B, In]`` and a state
``[*B, Hidden]`` (for the LSTM a pair ``(h, c)``) and return the next state. Run them along
a sequence with :func:`axjax.fold` / :func:`axjax.scan` or the :class:`Recurrent` layer.

The gates of a GRU or LSTM are an axis, :class:`Gate`, so all gates come from one product
(``W_ih: Tensor[F32, In, Gate, Hidden]``), as fast as the usual ``[In, 4H]`` matrix. A
weight cannot have the same axis twice, so the recurrent weight reads the previous state
through the axis :class:`Prev` (``W_hh: Tensor[F32, Prev, Gate, Hidden]``): the state is
relabelled ``Hidden -> Prev`` (free) before the product. An input whose axis is ``Hidden``
itself (the second layer of a stack) is read the same way.

Weights are stored input-major (the JAX/Flax habit, ``x @ W``), not output-major as in
PyTorch and Equinox (``W x``, ``[Gate, Hidden, In]``). Hand-written JAX pays for the
output-major layout inside ``lax.scan`` on XLA's CPU backend (a transposed copy of the
weight on every step); axjax's contraction avoids that copy in either layout
(``python -m benchmarks.lstm_layout``). A key draws the same initial values as the
output-major layout did, transposed; PyTorch's or
Equinox's ``weight_ih [gates * hidden, in]`` loads as
``weight_ih.reshape(gates, hidden, in).transpose(2, 0, 1)``. The gates are split with one
:func:`axjax.unstack`, whose backward is one concatenate (as ``jnp.split``'s).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Generic, TypeVarTuple, final, overload

import equinox as eqx
import jax
from typing_extensions import TypeVar

from ..core import F32, AnyTensor, Axis, AxisError, DType, Tensor
from ..core._internal import (
    PyTree,
    axes_names,
    axis_name,
    check_axis_label,
    fail,
    positive_int,
    positive_sizes,
)
from ..ops import broadcast, contract, rename, sigmoid, tanh, transpose, unstack
from ..ops import zeros as zeros_tensor
from . import _init
from ._registry import register_layer
from ._util import forbid, require, size_of

__all__ = ["Gate", "Prev", "AbstractCell", "RNNCell", "GRUCell", "LSTMCell"]

# a cell's dtype, input axis and hidden axis; a bare `LSTMCell` is `LSTMCell[F32, Any, Any]`
D = TypeVar("D", bound=DType, default=F32)
In = TypeVar("In", bound=Axis, default=Any)
H = TypeVar("H", bound=Axis, default=Any)
B = TypeVarTuple("B")  # the state's batch axes
BX = TypeVarTuple("BX")  # the input's batch axes (the same set, in any order)
BA = TypeVar("BA", bound=Axis)  # a batch axis of init_state's mapping (a dict's keys)


@final
class Gate(Axis):
    """The gate axis of a GRU (3: reset, update, new) or LSTM (4: input, forget, cell, output)."""


@final
class Prev(Axis):
    """The axis a recurrent weight reads the previous state (or a ``Hidden`` input) through."""


class AbstractCell(eqx.Module, Generic[D, In, H]):
    """Base of the cells: weights over ``[In|Prev, (Gate,) Hidden]``, the gate products,
    ``init_state`` and ``output``. Subclasses call :meth:`_setup` and define ``__call__``.

    A cell's type names its dtype, input axis and hidden axis (``LSTMCell[F32, In,
    Hidden]``); its call takes a state ``Tensor[D, *B, Hidden]`` and an input with the same
    batch axes and ``In`` (the mypy plugin runs the cell's own check; pyright wants ``In``
    last), and returns the next state, ``Hidden`` last."""

    weight_ih: AnyTensor
    weight_hh: AnyTensor
    bias: AnyTensor | None
    in_axis: type[Axis] = eqx.field(static=True)
    hidden_axis: type[Axis] = eqx.field(static=True)

    def _check_sizes(self, in_size: int, hidden_size: int) -> tuple[int, int]:
        """The cell's two sizes, each a positive int."""
        where = type(self).__name__
        return positive_int(where, "in_size", in_size), positive_int(
            where, "hidden_size", hidden_size
        )

    def _setup(
        self,
        in_axis: type[Axis],
        hidden_axis: type[Axis],
        in_size: int,
        hidden_size: int,
        gates: int,
        use_bias: bool,
        init: _init.Initializer | None,
        dtype: type[DType],
        key: jax.Array,
    ) -> None:
        self.in_axis = check_axis_label(in_axis, type(self).__name__)
        self.hidden_axis = check_axis_label(hidden_axis, type(self).__name__)
        for a in (in_axis, hidden_axis):
            if a in (Gate, Prev):
                raise ValueError(
                    f"{type(self).__name__}: {axis_name(a)} is reserved for the "
                    "cell's weights; label the input and hidden axes otherwise"
                )
        in_size, hidden_size = self._check_sizes(in_size, hidden_size)
        init = init or _init.uniform(math.sqrt(1.0 / hidden_size))
        read = Prev if in_axis is hidden_axis else in_axis
        out: dict[type[Axis], int] = {Gate: gates} if gates else {}
        out[hidden_axis] = hidden_size
        kih, khh, kb = jax.random.split(key, 3)
        fan_out = tuple(out)
        # drawn output-major (the same values as before the layout change), stored input-major
        wih = init(kih, {**out, read: in_size}, fan_in=read, fan_out=fan_out, dtype=dtype)
        whh = init(khh, {**out, Prev: hidden_size}, fan_in=Prev, fan_out=fan_out, dtype=dtype)
        self.weight_ih = transpose(wih, read, *fan_out)
        self.weight_hh = transpose(whh, Prev, *fan_out)
        self.bias = init(kb, out, fan_in=(), fan_out=fan_out, dtype=dtype) if use_bias else None

    @property
    def hidden_size(self) -> int:
        """The size of the hidden axis."""
        return self.weight_hh.size(self.hidden_axis)

    def _name(self) -> str:
        n = size_of(self.weight_hh, self.hidden_axis)  # None in the type checker's stand-in
        return (
            f"{type(self).__name__}({axis_name(self.in_axis)} -> "
            f"{axis_name(self.hidden_axis)}{'' if n is None else f'={n}'})"
        )

    def _gates(self, h: AnyTensor, x: AnyTensor, bias: bool = True) -> tuple[AnyTensor, AnyTensor]:
        """``(W_ih x (+ b), W_hh h)``, both in the state's axis order plus ``(Gate,) Hidden``."""
        name, hid = self._name(), self.hidden_axis
        require(name, (h, x), h, hid, size_of(self.weight_hh, hid), "state")
        n_in = size_of(self.weight_ih, Prev if self.in_axis is hid else self.in_axis)
        require(name, (h, x), x, self.in_axis, n_in, "input")
        batch_h = [a for a in h.axes if a is not hid]
        batch_x = [a for a in x.axes if a is not self.in_axis]
        if set(batch_h) != set(batch_x):
            raise fail(
                name,
                (h, x),
                f"the state's batch axes ({axes_names(batch_h)}) differ "
                f"from the input's ({axes_names(batch_x)}) (the state must have one "
                "entry per sequence: build it with cell.init_state)",
            )
        forbid(name, (h, x), x, (Gate, Prev))
        for what, t in (("state", h), ("input", x)):
            if t.dtype is not self.weight_hh.dtype:
                raise fail(
                    name,
                    (h, x),
                    f"the {what} is {t.dtype.__name__}, the cell's "
                    f"parameters {self.weight_hh.dtype.__name__} (convert it with "
                    "astype, or cast the cell)",
                    subject=t,
                )
        if self.in_axis is hid:
            x = rename(x, hid, Prev)
        xg = contract(x, self.weight_ih, over=Prev if self.in_axis is hid else self.in_axis)
        hg = contract(rename(h, hid, Prev), self.weight_hh, over=Prev)
        if xg.axes != hg.axes:
            xg = transpose(xg, *hg.axes)
        if bias and self.bias is not None:
            xg = xg + broadcast(self.bias, xg)
        return xg, hg

    def init_state(self, batch: Mapping[type[BA], int] | None = None) -> PyTree:
        """The zero state for the given batch axes: ``cell.init_state({Batch: 32})`` (each
        cell types its own state)."""
        return self._zeros(batch)

    def _zeros(self, batch: Mapping[type[BA], int] | None) -> Tensor[D, *tuple[Any, ...]]:
        """Zeros ``[*batch, Hidden]`` in the cell's dtype."""
        sizes = positive_sizes(f"{type(self).__name__}.init_state", "batch", batch or {})
        out: Tensor[D, *tuple[Any, ...]] = zeros_tensor(
            (*sizes.values(), self.hidden_size),
            *sizes,
            self.hidden_axis,
            dtype=self.weight_hh.dtype,
        )
        return out

    def output(self, state: PyTree) -> AnyTensor:
        """The part of the state a layer emits at each step (the state itself here)."""
        out: AnyTensor = state  # the state of an RNN/GRU cell is one Tensor
        return out


@register_layer()
class RNNCell(AbstractCell[D, In, H]):
    """Elman unit: ``h' = tanh(W_ih x + W_hh h + b)``.

    ``weight_ih: [In, Hidden]``, ``weight_hh: [Prev, Hidden]``, ``bias: [Hidden]``.

    Example:
        >>> cell = ax.nn.RNNCell(In, Hidden, 8, 16, key=jax.random.key(0))
        >>> h = cell(cell.init_state({Batch: 4}), x)   # x [Batch, In] -> h [Batch, Hidden]
    """

    # BEGIN GENERATED by tools/gen_overloads.py: the constructor's types (do not edit)
    @overload
    def __init__(
        self,
        in_axis: type[In],
        hidden_axis: type[H],
        in_size: int,
        hidden_size: int,
        *,
        use_bias: bool = ...,
        weight_init: _init.Initializer | None = ...,
        dtype: type[D],
        key: jax.Array,
    ) -> None: ...
    @overload
    def __init__(
        self,
        in_axis: type[In],
        hidden_axis: type[H],
        in_size: int,
        hidden_size: int,
        *,
        use_bias: bool = ...,
        weight_init: _init.Initializer | None = ...,
        key: jax.Array,
    ) -> None: ...
    # END GENERATED
    def __init__(
        self,
        in_axis: type[In],
        hidden_axis: type[H],
        in_size: int,
        hidden_size: int,
        *,
        use_bias: bool = True,
        weight_init: _init.Initializer | None = None,
        dtype: type[DType] = F32,
        key: jax.Array,
    ) -> None:
        self._setup(
            in_axis, hidden_axis, in_size, hidden_size, 0, use_bias, weight_init, dtype, key
        )

    def __call__(
        self, state: Tensor[D, *B, H], x: Tensor[D, *BX, In], *, key: jax.Array | None = None
    ) -> Tensor[D, *B, H]:
        """One step: the next state from ``state [*B, Hidden]`` and ``x [*B, In]``."""
        xg, hg = self._gates(state, x)
        out: Tensor[D, *B, H] = tanh(xg + hg)
        return out

    @overload
    def init_state(self, batch: None = None) -> Tensor[D, H]: ...
    @overload
    def init_state(
        self, batch: Mapping[type[BA], int] | None = None
    ) -> Tensor[D, *tuple[Any, ...]]: ...
    def init_state(
        self, batch: Mapping[type[BA], int] | None = None
    ) -> Tensor[D, *tuple[Any, ...]]:
        """The zero state ``[*batch, Hidden]``: ``cell.init_state({Batch: 32})`` is a
        ``Tensor[D, Batch, Hidden]`` (exact under the mypy plugin for a dict literal; the
        batch axes gradual in the other checkers), ``cell.init_state()`` a ``Tensor[D, Hidden]``."""
        return self._zeros(batch)


@register_layer()
class GRUCell(AbstractCell[D, In, H]):
    """Gated recurrent unit (Cho et al. 2014), with Equinox's/PyTorch's equations.

    ``weight_ih: [In, Gate=3, Hidden]``, ``weight_hh: [Prev, Gate=3, Hidden]``, ``bias:
    [Gate=3, Hidden]``, ``bias_n: [Hidden]`` (the new-gate bias inside the reset product);
    gates in the order reset, update, new.

    Example:
        >>> cell = ax.nn.GRUCell(In, Hidden, 8, 16, key=jax.random.key(0))
        >>> h = cell(cell.init_state({Batch: 4}), x)
    """

    bias_n: AnyTensor | None

    # BEGIN GENERATED by tools/gen_overloads.py: the constructor's types (do not edit)
    @overload
    def __init__(
        self,
        in_axis: type[In],
        hidden_axis: type[H],
        in_size: int,
        hidden_size: int,
        *,
        use_bias: bool = ...,
        weight_init: _init.Initializer | None = ...,
        dtype: type[D],
        key: jax.Array,
    ) -> None: ...
    @overload
    def __init__(
        self,
        in_axis: type[In],
        hidden_axis: type[H],
        in_size: int,
        hidden_size: int,
        *,
        use_bias: bool = ...,
        weight_init: _init.Initializer | None = ...,
        key: jax.Array,
    ) -> None: ...
    # END GENERATED
    def __init__(
        self,
        in_axis: type[In],
        hidden_axis: type[H],
        in_size: int,
        hidden_size: int,
        *,
        use_bias: bool = True,
        weight_init: _init.Initializer | None = None,
        dtype: type[DType] = F32,
        key: jax.Array,
    ) -> None:
        key, kn = jax.random.split(key)
        self._setup(
            in_axis, hidden_axis, in_size, hidden_size, 3, use_bias, weight_init, dtype, key
        )
        init = weight_init or _init.uniform(math.sqrt(1.0 / hidden_size))
        self.bias_n = (
            init(kn, {hidden_axis: hidden_size}, fan_in=(), fan_out=hidden_axis, dtype=dtype)
            if use_bias
            else None
        )

    def __call__(
        self, state: Tensor[D, *B, H], x: Tensor[D, *BX, In], *, key: jax.Array | None = None
    ) -> Tensor[D, *B, H]:
        """One step: the next state from ``state [*B, Hidden]`` and ``x [*B, In]``."""
        xg, hg = self._gates(state, x)
        xr, xu, xn = unstack(xg, Gate)
        hr, hu, hn = unstack(hg, Gate)
        reset, update = sigmoid(xr + hr), sigmoid(xu + hu)
        if self.bias_n is not None:
            hn = hn + broadcast(self.bias_n, hn)
        new = tanh(xn + reset * hn)
        out: Tensor[D, *B, H] = new + update * (state - new)
        return out

    @overload
    def init_state(self, batch: None = None) -> Tensor[D, H]: ...
    @overload
    def init_state(
        self, batch: Mapping[type[BA], int] | None = None
    ) -> Tensor[D, *tuple[Any, ...]]: ...
    def init_state(
        self, batch: Mapping[type[BA], int] | None = None
    ) -> Tensor[D, *tuple[Any, ...]]:
        """The zero state ``[*batch, Hidden]``: ``cell.init_state({Batch: 32})`` is a
        ``Tensor[D, Batch, Hidden]`` (exact under the mypy plugin for a dict literal; the
        batch axes gradual in the other checkers), ``cell.init_state()`` a ``Tensor[D, Hidden]``."""
        return self._zeros(batch)


@register_layer()
class LSTMCell(AbstractCell[D, In, H]):
    """Long short-term memory unit; the state is the pair ``(h, c)``.

    ``weight_ih: [In, Gate=4, Hidden]`` with gates in the order input, forget, cell,
    output (Equinox's and PyTorch's), ``weight_hh: [Prev, Gate=4, Hidden]``,
    ``bias: [Gate=4, Hidden]``.

    Example:
        >>> cell = ax.nn.LSTMCell(In, Hidden, 8, 16, key=jax.random.key(0))
        >>> h, c = cell(cell.init_state({Batch: 4}), x)
    """

    # BEGIN GENERATED by tools/gen_overloads.py: the constructor's types (do not edit)
    @overload
    def __init__(
        self,
        in_axis: type[In],
        hidden_axis: type[H],
        in_size: int,
        hidden_size: int,
        *,
        use_bias: bool = ...,
        weight_init: _init.Initializer | None = ...,
        dtype: type[D],
        key: jax.Array,
    ) -> None: ...
    @overload
    def __init__(
        self,
        in_axis: type[In],
        hidden_axis: type[H],
        in_size: int,
        hidden_size: int,
        *,
        use_bias: bool = ...,
        weight_init: _init.Initializer | None = ...,
        key: jax.Array,
    ) -> None: ...
    # END GENERATED
    def __init__(
        self,
        in_axis: type[In],
        hidden_axis: type[H],
        in_size: int,
        hidden_size: int,
        *,
        use_bias: bool = True,
        weight_init: _init.Initializer | None = None,
        dtype: type[DType] = F32,
        key: jax.Array,
    ) -> None:
        self._setup(
            in_axis, hidden_axis, in_size, hidden_size, 4, use_bias, weight_init, dtype, key
        )

    def __call__(
        self,
        state: tuple[Tensor[D, *B, H], Tensor[D, *B, H]],
        x: Tensor[D, *BX, In],
        *,
        key: jax.Array | None = None,
    ) -> tuple[Tensor[D, *B, H], Tensor[D, *B, H]]:
        """One step: ``(h, c)`` and ``x [*B, In]`` -> the next ``(h, c)``."""
        if type(state) is not tuple or len(state) != 2:
            raise AxisError(
                f"{self._name()}: the state is a pair (h, c); build it with cell.init_state"
            )
        h, c = state
        xg, hg = self._gates(h, x)
        zi, zf, zg, zo = unstack(xg + hg, Gate)  # one op: its backward is one concatenate
        i, f, g, o = sigmoid(zi), sigmoid(zf), tanh(zg), sigmoid(zo)
        c_next: Tensor[D, *B, H] = f * c + i * g
        h_next: Tensor[D, *B, H] = o * tanh(c_next)
        return h_next, c_next

    @overload
    def init_state(self, batch: None = None) -> tuple[Tensor[D, H], Tensor[D, H]]: ...
    @overload
    def init_state(
        self, batch: Mapping[type[BA], int] | None = None
    ) -> tuple[Tensor[D, *tuple[Any, ...]], Tensor[D, *tuple[Any, ...]]]: ...
    def init_state(
        self, batch: Mapping[type[BA], int] | None = None
    ) -> tuple[Tensor[D, *tuple[Any, ...]], Tensor[D, *tuple[Any, ...]]]:
        """``(h, c)`` of zeros ``[*batch, Hidden]``: ``cell.init_state({Batch: 32})`` (typed
        as the one-tensor cells' state, twice)."""
        h = self._zeros(batch)
        return h, h

    def output(self, state: tuple[AnyTensor, AnyTensor]) -> AnyTensor:
        """``h`` of the pair ``(h, c)``."""
        return state[0]
