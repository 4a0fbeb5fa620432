"""Layers typed by their dtype (issue 12): the run-time checks the static types mirror.

A layer's dtype is part of its type (``Affine[F32, In, Out]``); an input in another dtype is
an ``AxisError`` naming the layer, and ``ax.nn.cast`` makes the layer's dtype the input's.
"""

from __future__ import annotations

from typing import final

import jax
import pytest

import axjax as ax


@final
class N(ax.Axis): ...


@final
class In(ax.Axis): ...


@final
class Out(ax.Axis): ...


KEY = jax.random.key(0)


def test_affine_rejects_an_input_in_another_dtype() -> None:
    layer = ax.nn.Affine(In, Out, 3, 2, key=KEY)
    x = ax.ones((4, 3), N, In, dtype=ax.BF16)
    with pytest.raises(
        ax.AxisError,
        match=r"Cannot apply Affine\(In=3 -> Out=2\) to "
        r"x=Tensor\[BF16, N=4, In=3\]: the input is BF16, the layer's "
        r"parameters F32 \(convert the input with astype, or cast the layer\)",
    ):
        layer(x)
    half = ax.nn.cast(layer, ax.BF16)
    assert half(x).dtype is ax.BF16
    assert ax.nn.Linear(In, Out, 3, 2, dtype=ax.BF16, key=KEY)(x).axes == (N, Out)


def test_norms_and_cells_reject_an_input_in_another_dtype() -> None:
    x = ax.ones((4, 3), N, In, dtype=ax.BF16)
    with pytest.raises(
        ax.AxisError,
        match=r"LayerNorm\(In\) to x=Tensor\[BF16, N=4, In=3\]: "
        r"the input is BF16, the layer's parameters F32",
    ):
        ax.nn.LayerNorm(In, 3)(x)
    with pytest.raises(ax.AxisError, match=r"RMSNorm\(In\).*the input is BF16"):
        ax.nn.RMSNorm(In, 3)(x)
    cell = ax.nn.RNNCell(In, Out, 3, 2, key=KEY)
    with pytest.raises(
        ax.AxisError,
        match=r"RNNCell\(In -> Out=2\).*the input is BF16, the "
        r"cell's parameters F32",
    ):
        cell(cell.init_state({N: 4}), x)
    assert ax.nn.LayerNorm(In, 3, dtype=ax.BF16)(x).dtype is ax.BF16


def test_lstm_state_that_is_not_a_pair_is_an_axis_error() -> None:
    cell = ax.nn.LSTMCell(In, Out, 3, 2, key=KEY)
    h, _ = cell.init_state({N: 4})
    with pytest.raises(ax.AxisError, match=r"LSTMCell\(In -> Out=2\): the state is a pair"):
        cell(h, ax.ones((4, 3), N, In))  # type: ignore[arg-type]
