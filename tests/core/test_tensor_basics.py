"""Axes, dtype markers, constructors and the Tensor's properties; eager op dispatch."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from axjax.core._internal import to_numpy_dtype
from tests.axes import Batch, Pixel, Time
from tests.core.test_interop import DTYPES, x64_for


def test_properties() -> None:
    t = ax.tensor(np.zeros((2, 3), np.float32), Batch, Pixel)
    assert t.axes == (Batch, Pixel) and t.dtype is ax.F32 and t.shape == (2, 3)
    assert t.sizes == {Batch: 2, Pixel: 3} and t.size(Pixel) == 3 and t.ndim == 2
    assert t.type == ax.TensorType(ax.F32, (Batch, Pixel), (2, 3))
    assert isinstance(t.array, jax.Array)
    assert np.asarray(t).shape == (2, 3)


@pytest.mark.parametrize(
    ("marker", "numpy"),
    [
        (ax.F32, np.float32),
        (ax.F16, np.float16),
        (ax.BF16, jnp.bfloat16),
        (ax.I8, np.int8),
        (ax.I32, np.int32),
        (ax.U8, np.uint8),
        (ax.U32, np.uint32),
        (ax.Bool, np.bool_),
    ],
)
def test_dtype_markers(marker: type[ax.DType], numpy: type) -> None:
    t = ax.zeros((2,), Batch, dtype=marker)
    assert t.dtype is marker and t.array.dtype == np.dtype(numpy)
    assert ax.tensor(np.zeros(2, numpy), Batch).dtype is marker


def test_64_bit_markers_under_x64() -> None:
    with jax.enable_x64(True):
        assert ax.tensor([1.0, 2.0], Batch, dtype=ax.F64).dtype is ax.F64
        assert ax.arange(Time, 3, dtype=ax.I64).dtype is ax.I64
    with (
        pytest.raises(TypeError, match="^tensor: asked for F64 but JAX made F32"),
        pytest.warns(UserWarning, match="float64"),
    ):
        ax.tensor([1.0], Batch, dtype=ax.F64)


def test_constructors(key: jax.Array) -> None:
    assert ax.ones((2, 3), Batch, Pixel).array.sum() == 6
    assert ax.full((2,), Batch, value=0.5).array.tolist() == [0.5, 0.5]
    assert ax.zeros(4, Time).sizes == {Time: 4}
    assert ax.arange(Time, 4).array.tolist() == [0, 1, 2, 3]
    n = ax.normal(key, (500, 4), Batch, Pixel, stddev=2.0, mean=1.0)
    assert n.axes == (Batch, Pixel) and abs(float(n.array.mean()) - 1.0) < 0.2
    assert 1.8 < float(n.array.std()) < 2.2
    u = ax.uniform(key, (100,), Batch, minval=-1.0, maxval=1.0)
    assert -1.0 <= float(u.array.min()) and float(u.array.max()) < 1.0
    r = ax.randint(key, (100,), Batch, minval=2, maxval=5)
    assert r.dtype is ax.I32 and set(np.unique(r.array)) <= {2, 3, 4}
    s = ax.tensor(3.0)
    assert s.axes == () and float(s) == 3.0 and s.item() == 3.0
    assert ax.tensor(ax.ones((2,), Batch), Time).axes == (Time,)  # relabel a tensor's data


def test_aliases_are_tensor_types() -> None:
    assert ax.Scalar == ax.Tensor[ax.F32]
    assert ax.Vector[Batch] == ax.Tensor[ax.F32, Batch]
    assert ax.Matrix[Batch, Pixel] == ax.Tensor[ax.F32, Batch, Pixel]


def test_axis_labels_print_by_name() -> None:
    t = ax.zeros((2,), Batch)
    assert repr(t.type) == "Tensor[F32, Batch=2]"
    assert ax.TensorType(ax.F32, (Batch,), (None,)).sizes == {Batch: None}
    assert repr(ax.TensorType(ax.F32, (Batch,), (None,))) == "Tensor[F32, Batch=?]"


def test_repr_of_tensors_whose_leaf_is_not_an_array() -> None:
    """eqx.partition leaves None, eval_shape a ShapeDtypeStruct, tree.map anything."""
    model = ax.nn.Affine(Pixel, Batch, 3, 2, key=jax.random.key(0))
    params, static = eqx.partition(model, eqx.is_array)
    assert repr(static.weight) == "Tensor[Batch, Pixel](None)"
    assert "weight=Tensor[Batch, Pixel](None)" in repr(static)
    assert "weight=Tensor[F32, Batch=2, Pixel=3]([[" in repr(params)
    shaped = jax.eval_shape(lambda: ax.zeros((2,), Batch))
    assert repr(shaped) == "Tensor[F32, Batch=2](ShapeDtypeStruct)"
    assert "<small>ShapeDtypeStruct</small>" in shaped._repr_html_()
    assert repr(jax.tree.map(lambda _: "leaf", ax.zeros((2,), Batch))) == "Tensor[Batch]('leaf')"
    assert static.weight._repr_html_() == "<code>Tensor[Batch, Pixel](None)</code>"


def test_eager_ops_need_no_tracing_and_match_numpy() -> None:
    x = ax.tensor(np.array([[1.0, -2.0, 3.0]], np.float32), Batch, Pixel)
    assert (ax.relu(x) * 2 + 1).array.tolist() == [[3.0, 1.0, 7.0]]
    assert (1 - x).array.tolist() == [[0.0, 3.0, -2.0]]
    assert (x**2).array.tolist() == [[1.0, 4.0, 9.0]]
    assert ax.sum(x, Pixel).array.tolist() == [2.0]
    assert (x > 0).dtype is ax.Bool and (x > 0).array.tolist() == [[True, False, True]]
    assert (ax.tensor(3.0) * x).axes == (Batch, Pixel)


def test_integer_arithmetic_keeps_the_dtype() -> None:
    i = ax.tensor(np.array([1, 2], np.int8), Batch)
    assert (i + 1).dtype is ax.I8 and ax.sum(i, Batch).dtype is ax.I8
    assert (i * i).array.tolist() == [1, 4] and (-i).array.tolist() == [-1, -2]
    assert ax.argmax(ax.tensor([[0.1, 0.9, 0.3]], Batch, Pixel), Pixel).array.tolist() == [1]


def test_ops_describe_themselves() -> None:
    from axjax.ops._reduce import Sum
    from axjax.ops._select import Index

    assert repr(Sum(Batch)) == "Sum(Batch)" and Sum((Batch, Pixel)).params() == {
        "over": (Batch, Pixel)
    }
    assert Index(Time, 3).describe() == "Index(Time, 3)" and Index(Time).describe() == (
        "Index(Time, i)"
    )
    assert ax.Op.name == "" and Sum.name == "Sum"


class _Cube(ax.Op):
    """``x**3`` with a deliberately wrong backward (``2 * dy``): the gradient says whose
    derivative JAX used."""

    def infer(self, x: ax.AnyTensor) -> ax.TensorType:
        return x.type

    def forward(self, x: ax.AnyTensor) -> jax.Array:
        return x.array**3

    def backward(self, dy: ax.AnyTensor, y: ax.AnyTensor, x: ax.AnyTensor) -> tuple[jax.Array]:
        return (2 * dy.array,)


class _CubeByJax(_Cube):
    jax_vjp = True


def test_an_op_with_jax_vjp_is_differentiated_by_jax() -> None:
    """``Op.jax_vjp``: JAX differentiates the forward (``3 x**2``, forward mode too), not the
    op's backward; the same op without it uses its backward (the control: ``2``)."""
    x = jnp.array([1.0, 2.0])

    def grad(op: ax.Op) -> jax.Array:
        return jax.grad(lambda a: ax.sum(op(ax.tensor(a, Batch)), Batch).array)(x)

    np.testing.assert_allclose(grad(_CubeByJax()), jax.grad(lambda a: jnp.sum(a**3))(x))
    np.testing.assert_allclose(grad(_Cube()), [2.0, 2.0])
    _, tangent = jax.jvp(lambda a: _CubeByJax()(ax.tensor(a, Batch)).array, (x,), (x,))
    np.testing.assert_allclose(tangent, 3 * x**3)
    with pytest.raises(ax.TransformError, match="ax.jax_autodiff"):
        jax.jvp(lambda a: _Cube()(ax.tensor(a, Batch)).array, (x,), (x,))


def test_autodiff_switch_restores_itself() -> None:
    assert ax.config.autodiff == "axjax"
    with pytest.raises(RuntimeError), ax.jax_autodiff():
        assert ax.config.autodiff == "jax"
        raise RuntimeError
    assert ax.config.autodiff == "axjax"


# ----------------------------------------------------------------- formatting (issue 33)


@pytest.mark.parametrize("marker", DTYPES, ids=lambda d: d.__name__)
def test_a_scalar_tensor_formats_as_its_number(marker: type[ax.DType]) -> None:
    """Generated over every dtype marker: ``format(t, spec)`` of a 0-axis Tensor is the
    format of its Python number; an empty spec is ``str(t)``."""
    with x64_for(marker):
        t = ax.tensor(np.asarray(1, dtype=to_numpy_dtype(marker)))
        value = t.item()
        assert f"{t}" == str(t) == repr(t)
        spec = "" if isinstance(value, bool) else ".3f"
        assert f"{t:{spec}}" == (str(t) if not spec else format(value, spec))
        assert f"{t:>6}" == format(value, ">6")


def test_the_quoted_loss_format_and_the_error_at_higher_rank() -> None:
    loss = ax.sum(ax.tensor(np.array([0.25, 0.5], np.float32), Batch), Batch)
    assert f"loss {loss:.4f}" == "loss 0.7500"
    assert f"{ax.tensor(np.int32(7)):03d}" == "007"
    x = ax.tensor(np.ones((2, 3), np.float32), Batch, Pixel)
    assert f"{x}" == str(x)  # no spec: the repr, at any rank
    with pytest.raises(TypeError) as e:
        f"{x:.4f}"
    assert str(e.value) == (
        "Cannot convert Tensor[F32, Batch=2, Pixel=3] to a number formatted with '.4f': it "
        "has 6 elements, not one (reduce it first, e.g. ax.sum(t, (Batch, Pixel)), ax.mean "
        "or ax.max, or pick one entry with ax.index)"
    )
