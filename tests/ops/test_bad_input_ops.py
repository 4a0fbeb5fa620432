"""Bad input to the core and the ops: a specific axjax error naming the problem and the fix,
never a raw error from inside JAX and never a silently wrong result."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from tests.axes import Batch, Pixel, Time

# ----------------------------------------------------------------------------- custom ops


class _WrongShape(ax.Op):
    """Declares its operand's type, but its forward doubles the array's length."""

    def infer(self, x):
        return x.type

    def forward(self, x):
        return jnp.concatenate([x.array, x.array])

    def backward(self, dy, y, x):
        return (dy.array,)


class _WrongDtype(ax.Op):
    """Declares its operand's type, but its forward returns integers."""

    def infer(self, x):
        return x.type

    def forward(self, x):
        return x.array.astype(jnp.int32)

    def backward(self, dy, y, x):
        return (dy.array,)


SHAPE = (
    r"_WrongShape.forward returned an array of shape \(6,\) and dtype float32, but "
    r"_WrongShape.infer declared Tensor\[F32, Batch=3\] \(shape \(3,\), dtype float32\): "
    r"forward must return the declared shape and dtype"
)
DTYPE = (
    r"_WrongDtype.forward returned an array of shape \(3,\) and dtype int32, but "
    r"_WrongDtype.infer declared Tensor\[F32, Batch=3\]"
)


def test_a_forward_that_breaks_its_type_rule_is_named_eagerly():
    t = ax.ones((3,), Batch)
    for _ in range(2):  # the second call uses the cached type rule: still checked
        with pytest.raises(TypeError, match=SHAPE):
            _WrongShape()(t)
    with pytest.raises(TypeError, match=DTYPE):
        _WrongDtype()(t)


def test_a_forward_that_breaks_its_type_rule_is_named_under_jit_and_grad():
    def f(a):
        return ax.sum(_WrongShape()(ax.tensor(a, Batch)), Batch).array

    with pytest.raises(TypeError, match=SHAPE):
        jax.jit(f)(jnp.ones(3))
    with pytest.raises(TypeError, match=SHAPE):
        jax.grad(f)(jnp.ones(3))
    with pytest.raises(TypeError, match=DTYPE):
        jax.grad(lambda a: ax.sum(_WrongDtype()(ax.tensor(a, Batch)), Batch).array)(jnp.ones(3))


class _ToF64(ax.Op):
    """Declares F64; without jax_enable_x64 JAX computes float32."""

    def infer(self, x):
        return ax.TensorType(ax.F64, x.axes, x.shape)

    def forward(self, x):
        return jnp.asarray(x.array, jnp.float32)

    def backward(self, dy, y, x):
        return (dy.array,)


def test_a_64_bit_type_without_x64_says_so():
    with pytest.raises(
        TypeError,
        match=(
            r"_ToF64 declares Tensor\[F64, Batch=3\], but JAX computed it in float32: float64 "
            r"needs 64-bit mode \(jax.config.update\('jax_enable_x64', True\)"
        ),
    ):
        _ToF64()(ax.ones((3,), Batch))


def test_correct_ops_still_dispatch():
    t = ax.ones((2, 3), Batch, Pixel)
    assert np.allclose((ax.exp(t) + t).array, np.e + 1)


# ----------------------------------------------------------------------------- same-named axes


def test_two_axis_classes_with_one_name_are_told_apart():
    class Dup(ax.Axis): ...

    a = ax.zeros((2,), Dup)

    class Dup(ax.Axis): ...  # noqa: F811 - a notebook cell run again

    b = ax.zeros((2,), Dup)
    with pytest.raises(
        ax.AxisError,
        match=(
            r"Cannot apply Add to Tensor\[F32, Dup=2\] and Tensor\[F32, Dup=2\]: axes differ .*; "
            r"two different axis classes are both named Dup \(was the class defined twice, as "
            r"when a notebook cell runs again\?"
        ),
    ):
        a + b
    # an ordinary mismatch says nothing about names
    with pytest.raises(ax.AxisError) as info:
        ax.zeros((2,), Batch) + ax.zeros((2,), Pixel)
    assert "both named" not in str(info.value)


# ----------------------------------------------------------------------------- slice, max, min


def test_slice_bounds_must_be_ints_with_one_message():
    t = ax.ones((4,), Batch)
    msg = (
        r"slice: start must be an int or None, got float 1.0 \(slice bounds are static "
        r"Python ints; convert with int\(\)"
    )
    with pytest.raises(TypeError, match=msg):
        ax.slice(t, Batch, 1.0, 3)
    assert ax.slice(t, Batch, 1, 3).shape == (2,)  # caches the int call's type rule
    with pytest.raises(TypeError, match=msg):
        ax.slice(t, Batch, 1.0, 3)
    with pytest.raises(TypeError, match=r"slice: stop must be an int or None, got float 2.5"):
        ax.slice(t, Batch, None, 2.5)
    with pytest.raises(TypeError, match=r"slice: step must be an int, got float 1.0"):
        ax.slice(t, Batch, 0, 3, 1.0)
    with pytest.raises(
        TypeError,
        match=r"slice: start must be an int or None, got a traced "
        r"value .*ax.index, ax.take or jax.lax.dynamic_slice_in_dim",
    ):
        jax.jit(lambda i: ax.slice(t, Batch, i, None).array)(1)
    assert ax.slice(t, Batch, np.int32(1)).shape == (3,)


@pytest.mark.parametrize("fn, what", [(ax.max, "max"), (ax.min, "min"), (ax.argmax, "argmax")])
def test_max_min_argmax_over_an_empty_axis(fn, what):
    t = ax.ones((2, 0), Batch, Time)
    name = {"max": "Max", "min": "Min", "argmax": "ArgMax"}[what]
    with pytest.raises(
        ax.AxisError,
        match=(
            rf"Cannot apply {name}\(Time\) to Tensor\[F32, Batch=2, Time=0\]: cannot take the "
            rf"{what} over Time of size 0 \(an empty axis has no {what}"
        ),
    ):
        fn(t, Time)
    # an empty axis that is kept is fine: the result is empty too
    assert fn(ax.ones((0, 3), Batch, Time), Time).shape == (0,)


# ----------------------------------------------------------------------------- one_hot


def test_one_hot_of_a_label_out_of_range():
    with pytest.raises(
        ValueError,
        match=(
            r"one_hot: label 3 \(at Batch=1\) is not a class: labels must lie in \[0, 3\) for "
            r"Pixel of size 3; 2 of 3 labels are out of range \(fix the labels, or pass n=4"
        ),
    ):
        ax.one_hot(ax.tensor(jnp.array([0, 3, -1]), Batch), Pixel, 3)
    with pytest.raises(
        ValueError,
        match=(
            r"one_hot: label -1 \(at Batch=0\) is not a class: labels must lie in \[0, 3\) for "
            r"Pixel of size 3 \(negative labels are not class indices"
        ),
    ):
        ax.one_hot(ax.tensor(jnp.array([-1, 2]), Batch), Pixel, 3)
    ok = ax.one_hot(ax.tensor(jnp.array([0, 2]), Batch), Pixel, 3)
    assert np.array_equal(ok.array, np.eye(3, dtype=np.float32)[[0, 2]])
    # under jit the values are unknown: an out-of-range label gives an all-zero row
    rows = jax.jit(lambda a: ax.one_hot(ax.tensor(a, Batch), Pixel, 3).array)(jnp.array([1, 5]))
    assert np.array_equal(rows, [[0, 1, 0], [0, 0, 0]])
