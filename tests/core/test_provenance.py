"""Axis provenance (``ax.config.provenance``): each axis remembers the op and line that
introduced or last moved it, and an ``AxisError`` says so; outside the pytree, so ``jit``
caches and ``scan`` carries are unaffected and the compiled program is the same."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from axjax.core import _provenance
from tests.axes import Batch, Hidden, Pixel, Time

HERE = "test_provenance.py"
AnyT = ax.Tensor[Any, *tuple[Any, ...]]


def line() -> int:
    """The caller's line number."""
    return sys._getframe(1).f_lineno


@pytest.fixture
def provenance() -> Iterator[None]:
    old = ax.config.provenance
    ax.config.provenance = True
    try:
        yield
    finally:
        ax.config.provenance = old


def error_of(fn: Callable[[], object]) -> str:
    with pytest.raises(ax.AxisError) as info:
        fn()
    return str(info.value)


def x23() -> AnyT:
    return ax.zeros((2, 3), Batch, Pixel)


# each maker builds a tensor whose axis Hidden comes from one kind of op, on one line, and
# returns (tensor, expected origin of Hidden without the line)
def _tensor() -> tuple[AnyT, str, int]:
    return ax.tensor(np.zeros((2, 4)), Batch, Hidden), "from ax.tensor", line()


def _zeros() -> tuple[AnyT, str, int]:
    return ax.zeros((2, 4), Batch, Hidden), "from ax.zeros", line()


def _normal() -> tuple[AnyT, str, int]:
    return ax.normal(jax.random.key(0), (2, 4), Batch, Hidden), "from ax.normal", line()


def _rename() -> tuple[AnyT, str, int]:
    return ax.rename(x23(), Pixel, Hidden), "introduced by Rename(Pixel -> Hidden)", line()


def _expand_dims() -> tuple[AnyT, str, int]:
    t = ax.sum(x23(), Pixel)
    return ax.expand_dims(t, Hidden, 1), "introduced by ExpandDims(Hidden, at=1)", line()


def _flatten() -> tuple[AnyT, str, int]:
    t = ax.zeros((2, 2, 2), Batch, Pixel, Time)
    return ax.flatten(t, (Pixel, Time), Hidden), "introduced by Flatten((Pixel, Time) -> " \
        "Hidden)", line() - 1


def _stack() -> tuple[AnyT, str, int]:
    v = ax.zeros((2,), Batch)
    return ax.stack([v, v, v], Hidden, 1), "introduced by Stack(Hidden, at=1)", line()


def _broadcast() -> tuple[AnyT, str, int]:
    like = ax.zeros((2, 4), Batch, Hidden)
    return ax.broadcast(ax.zeros((2,), Batch), like), "introduced by Broadcast(Batch, " \
        "Hidden)", line() - 1


def _layer() -> tuple[AnyT, str, int]:
    layer = ax.nn.Affine(Pixel, Hidden, 3, 4, key=jax.random.key(0)); at = line()  # noqa: E702
    return layer(x23()), "from Affine", at


def _transpose() -> tuple[AnyT, str, int]:
    t = ax.zeros((4, 2), Hidden, Batch)
    return ax.transpose(t, Batch, Hidden), "moved by Transpose(Batch, Hidden)", line()


MAKERS = [_tensor, _zeros, _normal, _rename, _expand_dims, _flatten, _stack, _broadcast,
          _layer, _transpose]


@pytest.mark.parametrize("make", MAKERS, ids=lambda f: f.__name__.strip("_"))
def test_an_axis_error_says_where_each_axis_came_from(provenance: None,
                                                      make: Callable[[], Any]) -> None:
    t, how, at = make()
    assert t.axes == (Batch, Hidden)
    text = error_of(lambda: t + x23())
    head, _, origins = text.partition("\nAxis provenance: ")
    assert head.startswith("Cannot apply Add to Tensor[F32, Batch=2, Hidden=")
    assert "and Tensor[F32, Batch=2, Pixel=3]: axes differ (" in head
    assert f"Hidden: {how} at {HERE}:{at}" in origins.split("; ")
    assert f"Pixel: from ax.zeros at {HERE}:" in origins


def test_only_the_axes_the_message_names(provenance: None) -> None:
    a = ax.zeros((2, 3), Batch, Pixel)
    text = error_of(lambda: ax.matmul(ax.expand_dims(a, Time, 0), ax.zeros((3, 2), Pixel, Batch)))
    assert text.endswith(f"batch axes [Time] and [] differ (transpose one operand first)\n"
                         f"Axis provenance: Time: introduced by ExpandDims(Time, at=0) at "
                         f"{HERE}:{line() - 3}"), text


def test_each_operand_its_own_origin(provenance: None) -> None:
    a = ax.zeros((2, 3), Batch, Pixel); at = line()  # noqa: E702
    b = ax.transpose(a, Pixel, Batch); moved = line()  # noqa: E702
    text = error_of(lambda: a + b)
    assert text.endswith(
        f"same axes in a different order (transpose one operand first)\n"
        f"Axis provenance: Batch (first operand): from ax.zeros at {HERE}:{at}; "
        f"Batch (second operand): moved by Transpose(Pixel, Batch) at {HERE}:{moved}; "
        f"Pixel (first operand): from ax.zeros at {HERE}:{at}; "
        f"Pixel (second operand): moved by Transpose(Pixel, Batch) at {HERE}:{moved}"), text


def test_ops_that_keep_an_axis_keep_its_origin(provenance: None) -> None:
    h = ax.rename(x23(), Pixel, Hidden); at = line()  # noqa: E702
    y = ax.sum(ax.tanh(h * 2.0 + h), Batch)
    assert _provenance.origin(y, Hidden) == _provenance.Origin(
        "introduced by Rename(Pixel -> Hidden)", f"{HERE}:{at}")


def test_inside_jit_the_traced_axes_have_their_origin(provenance: None) -> None:
    def f(x: AnyT) -> AnyT:
        return ax.rename(x, Pixel, Hidden) + x

    at = line() - 2
    text = error_of(lambda: jax.jit(f)(x23()))
    assert f"Hidden: introduced by Rename(Pixel -> Hidden) at {HERE}:{at}" in text


def test_off_by_default_and_nothing_recorded() -> None:
    assert ax.config.provenance is False
    t = ax.rename(x23(), Pixel, Hidden)
    assert _provenance.origins(t) is None
    assert "provenance" not in error_of(lambda: t + x23())


def _step(x: AnyT, layer: Any) -> jax.Array:
    h = ax.transpose(ax.tanh(layer(x)), Hidden, Batch)
    return ax.sum(ax.sum(ax.rename(h, Hidden, Time), Time), Batch).array


def test_compiled_program_is_the_same_with_it_on() -> None:
    layer = ax.nn.Affine(Pixel, Hidden, 3, 4, key=jax.random.key(0))

    def lowered() -> str:  # a new function each time: traced afresh
        return jax.jit(jax.grad(lambda x, m: _step(x, m), argnums=1)).lower(
            x23(), layer).as_text()

    off = lowered()
    old = ax.config.provenance
    ax.config.provenance = True
    try:
        on = lowered()
    finally:
        ax.config.provenance = old
    assert on == off and "stablehlo.dot_general" in on


def test_jit_does_not_retrace_for_other_origins(provenance: None) -> None:
    traces = []

    @jax.jit
    def f(x: AnyT) -> AnyT:
        traces.append(1)
        return ax.tanh(x)

    f(ax.zeros((2, 3), Batch, Pixel))
    f(ax.transpose(ax.zeros((3, 2), Pixel, Batch), Batch, Pixel))  # other origins
    ax.config.provenance = False
    f(ax.ones((2, 3), Batch, Pixel))
    assert len(traces) == 1


def test_scan_carries_built_on_different_lines_match(provenance: None) -> None:
    def body(c: AnyT, x: jax.Array) -> tuple[AnyT, None]:
        moved = ax.transpose(ax.transpose(c, Pixel, Batch), Batch, Pixel)
        return ax.rename(ax.rename(moved, Pixel, Hidden), Hidden, Pixel) + x, None

    init = ax.zeros((2, 3), Batch, Pixel)
    out, _ = jax.lax.scan(body, init, jnp.arange(4.0))
    assert out.axes == (Batch, Pixel) and float(out.array[0, 0]) == 6.0
    assert jax.tree.structure(init) == jax.tree.structure(body(init, jnp.ones(()))[0])
