"""Axis provenance of graph nodes: built with ``ax.config.provenance`` on, every node knows
where each of its axes came from, and the ``AxisError`` raised while building the graph
says so (the eager side is tests/core/test_provenance.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np
import pytest

import axjax as ax
from tests.axes import Batch, Hidden, Pixel, Time

HERE = "test_graph_provenance.py"
AnyT = ax.Tensor[Any, *tuple[Any, ...]]


def line() -> int:
    return sys._getframe(1).f_lineno


@pytest.fixture(autouse=True)
def provenance() -> Iterator[None]:
    old = ax.config.provenance
    ax.config.provenance = True
    try:
        yield
    finally:
        ax.config.provenance = old


def x() -> AnyT:
    return ax.Input(ax.F32, Batch, Pixel, sizes={Pixel: 3})


# each maker returns (a node with axes (Batch, Hidden), the origin of Hidden, its line)
def _input() -> tuple[AnyT, str, int]:
    return ax.Input(ax.F32, Batch, Hidden), "from ax.Input", line()


def _param() -> tuple[AnyT, str, int]:
    return ax.Param(ax.zeros((2, 4), Batch, Hidden)), "from ax.Param", line()


def _const() -> tuple[AnyT, str, int]:
    t = ax.tensor(np.zeros((2, 4), np.float32), Batch, Hidden); at = line()  # noqa: E702
    return ax.Const(t), "from ax.tensor", at  # an eager tensor keeps its record


def _rename() -> tuple[AnyT, str, int]:
    return ax.rename(x(), Pixel, Hidden), "introduced by Rename(Pixel -> Hidden)", line()


def _expand_dims() -> tuple[AnyT, str, int]:
    return ax.expand_dims(ax.sum(x(), Pixel), Hidden, 1), \
        "introduced by ExpandDims(Hidden, at=1)", line() - 1


def _flatten() -> tuple[AnyT, str, int]:
    t = ax.Input(ax.F32, Batch, Pixel, Time)
    return ax.flatten(t, (Pixel, Time), Hidden), \
        "introduced by Flatten((Pixel, Time) -> Hidden)", line() - 1


def _broadcast() -> tuple[AnyT, str, int]:
    like = ax.Input(ax.F32, Batch, Hidden); at = line()  # noqa: E702
    # a node broadcasts against a node: the new axis is the operand ``like``'s
    return ax.broadcast(ax.sum(x(), Pixel), like), "from ax.Input", at


def _layer() -> tuple[AnyT, str, int]:
    layer = ax.nn.Affine(Pixel, Hidden, 3, 4, key=jax.random.key(0)); at = line()  # noqa: E702
    return layer(x()), "from Affine", at


def _transpose() -> tuple[AnyT, str, int]:
    t = ax.Input(ax.F32, Hidden, Batch)
    return ax.transpose(t, Batch, Hidden), "moved by Transpose(Batch, Hidden)", line()


MAKERS = [_input, _param, _const, _rename, _expand_dims, _flatten, _broadcast, _layer,
          _transpose]


@pytest.mark.parametrize("make", MAKERS, ids=lambda f: f.__name__.strip("_"))
def test_a_graph_axis_error_says_where_each_axis_came_from(make: Callable[[], Any]) -> None:
    node, how, at = make()
    assert node.axes == (Batch, Hidden)
    with pytest.raises(ax.AxisError) as info:
        node + x()
    head, _, origins = str(info.value).partition("\nAxis provenance: ")
    assert head.startswith("Cannot apply Add to Tensor[F32, Batch=") and "axes differ" in head
    assert f"Hidden: {how} at {HERE}:{at}" in origins.split("; "), origins
    assert f"Pixel: from ax.Input at {HERE}:" in origins


def test_nodes_keep_their_record_through_ops_and_compile() -> None:
    h = ax.rename(x(), Pixel, Hidden); at = line()  # noqa: E702
    y = ax.sum(ax.tanh(h), Batch)
    with pytest.raises(ax.AxisError, match=(
            rf"Axis provenance: Hidden: introduced by Rename\(Pixel -> Hidden\) at "
            rf"{HERE}:{at}$")):
        ax.sum(y, Pixel)
    fn = ax.compile(y)
    out = fn(np.ones((2, 3), np.float32))
    assert out.axes == (Hidden,)
