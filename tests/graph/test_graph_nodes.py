"""Graph nodes: Input, Param, Const, Apply; type checks at build time; no silent values."""

from __future__ import annotations

import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import axjax as ax
from tests.axes import Batch, Hidden, In, Time


def test_input_is_a_symbolic_tensor_with_open_sizes() -> None:
    x = ax.Input(ax.F32, Batch, In, sizes={In: 3}, name="x")
    assert isinstance(x, ax.Tensor) and isinstance(x, ax.Node)
    assert x.dtype is ax.F32 and x.axes == (Batch, In)
    assert x.shape == (None, 3) and x.sizes == {Batch: None, In: 3}
    assert x.size(In) == 3 and x.ndim == 2 and x.name == "x"
    assert repr(x) == "Input x: Tensor[F32, Batch=?, In=3]"
    assert ax.Input(ax.I32, Batch, sizes=(5,)).shape == (5,)


def test_input_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError, match=r"first argument is the dtype marker, got axis Batch"):
        ax.Input(Batch, In)  # type: ignore[arg-type]
    with pytest.raises(ax.AxisError, match="sizes names axis Hidden, which is not one of its"):
        ax.Input(ax.F32, Batch, In, sizes={Hidden: 2})
    with pytest.raises(TypeError, match="1 sizes for 2 axes"):
        ax.Input(ax.F32, Batch, In, sizes=(2,))
    with pytest.raises(ValueError, match=r"Input: sizes must be a non-negative int .*, got -1"):
        ax.Input(ax.F32, Batch, sizes=(-1,))
    with pytest.raises(ax.AxisError, match="axis Batch occurs twice"):
        ax.Input(ax.F32, Batch, Batch)
    with pytest.raises(TypeError, match="name must be a string"):
        ax.Input(ax.F32, Batch, name=3)  # type: ignore[arg-type]


def test_size_of_an_open_axis_is_a_clear_error() -> None:
    x = ax.Input(ax.F32, Batch, In)
    with pytest.raises(
        ax.AxisError,
        match=r"size of axis Batch of Tensor\[F32, Batch=\?, In=\?\]"
        r": it is not known until the graph is called",
    ):
        x.size(Batch)
    with pytest.raises(ax.AxisError, match="Hidden is not an axis of the node"):
        x.size(Hidden)


def test_nodes_have_no_value() -> None:
    x = ax.Input(ax.F32, Batch, name="x")
    msg = r"Input x is a symbolic graph node: \.array has no value until the graph is compiled"
    with pytest.raises(TypeError, match=msg):
        _ = x.array
    with pytest.raises(TypeError, match="bool"):
        bool(x)
    with pytest.raises(TypeError, match="float"):
        float(ax.sum(x, Batch))
    with pytest.raises(TypeError, match="np.asarray"):
        np.asarray(x)
    with pytest.raises(TypeError, match="The problematic value is of type .*Input"):
        jnp.sin(x)  # type: ignore[arg-type]
    w = ax.Param(ax.zeros((2,), Batch), name="w")
    with pytest.raises(
        TypeError,
        match=r"Param w is a symbolic graph node \(its value is "
        r"\.value\)",
    ):
        _ = w.array
    with pytest.raises(TypeError, match="symbolic graph node"):
        ax.tensor(x, Batch)


def test_nodes_are_immutable_and_hashed_by_identity() -> None:
    x = ax.Input(ax.F32, Batch)
    with pytest.raises(AttributeError, match="graph nodes are immutable"):
        x._name = "y"  # type: ignore[misc]
    y1, y2 = ax.exp(x), ax.exp(x)
    assert y1 is not y2 and len({y1, y2, x}) == 3


def test_applying_ops_builds_apply_nodes_with_checked_types() -> None:
    x = ax.Input(ax.F32, Batch, In, sizes={In: 3})
    w = ax.Param(ax.ones((3, 4), In, Hidden), name="w")
    h = ax.sum(ax.tanh(x @ w), Batch)  # static op parameter: the axis
    assert isinstance(h, ax.Apply) and h.type == ax.TensorType(ax.F32, (Hidden,), (4,))
    assert h.op.describe() == "Sum(Batch)"
    c = ax.contract(x, w, over=In)  # keyword parameter over=
    assert c.axes == (Batch, Hidden) and c.op.describe() == "Contract(over=In)"
    s = ax.concat([ax.exp(x), x, x], In)  # three operands
    assert isinstance(s, ax.Apply) and len(s.args) == 3 and s.shape == (None, 9)
    assert s.site == f"test_graph_nodes.py:{sys._getframe().f_lineno - 2}"


def test_an_op_with_several_results_is_one_node_with_parts() -> None:
    x = ax.Input(ax.F32, Batch, Time, In, sizes={Time: 3, In: 2}, name="x")
    w = ax.Param(ax.normal(jax.random.key(0), (3, 2), Time, In), name="w")
    a, b, c = ax.unstack(x * ax.broadcast(w, x), Time)
    assert all(isinstance(p, ax.Part) for p in (a, b, c))
    source = a.source
    assert isinstance(source, ax.MultiApply) and b.source is source and c.source is source
    assert source.op.describe() == "Unstack(Time)" and [p.index for p in source.parts] == [0, 1, 2]
    assert a.type == ax.TensorType(ax.F32, (Batch, In), (None, 2))
    assert repr(a) == "Part[0] of Unstack(Time): Tensor[F32, Batch=?, In=2]"
    assert source.site == f"test_graph_nodes.py:{sys._getframe().f_lineno - 7}"
    with pytest.raises(TypeError, match="not of a Loop"):
        _ = a.loop
    loss = ax.sum(ax.sum(a * b + ax.tanh(c), In), Batch)
    listing = str(ax.Graph(loss))
    assert "Unstack(Time)" in listing and "Part[2]" in listing
    assert listing.count("Unstack(Time)") == 1  # computed once, read three times

    xs = np.random.default_rng(0).normal(size=(4, 3, 2)).astype(np.float32)

    def eager(wv: ax.Tensor[ax.F32, Time, In]) -> jax.Array:
        t = ax.tensor(xs, Batch, Time, In)
        ea, eb, ec = ax.unstack(t * ax.broadcast(wv, t), Time)
        return ax.sum(ax.sum(ea * eb + ax.tanh(ec), In), Batch).array

    grad_fn = ax.value_and_grad(loss, wrt=[w], inputs=[x])
    value, grads = grad_fn(xs)
    want, want_grad = jax.value_and_grad(eager)(w.value)
    np.testing.assert_allclose(value.array, want, rtol=1e-6)
    np.testing.assert_allclose(grads[0].array, want_grad.array, rtol=1e-5, atol=1e-6)
    # the op's own backward runs: one concatenate of the three cotangents, no zero padding
    # (three Index nodes would pad each cotangent to x's size)
    program = grad_fn._lp.program
    values = program.values(None)
    hlo = grad_fn._jit.lower(
        ax.config.autodiff, (values[0],), values, program.bind((xs,), {})
    ).as_text()
    assert "stablehlo.concatenate" in hlo and "stablehlo.pad" not in hlo


def test_wrong_axes_fail_on_the_line_that_builds_the_graph() -> None:
    x = ax.Input(ax.F32, Batch, In, sizes={In: 3})
    w = ax.Param(ax.ones((4, 3), Hidden, In))
    with pytest.raises(ax.AxisError) as info:
        x @ w  # noqa: B018
    line = sys._getframe().f_lineno - 1
    assert str(info.value) == (
        "Cannot apply MatMul to Tensor[F32, Batch=?, In=3] and Tensor[F32, Hidden=4, In=3]: "
        "inner axes In and Hidden differ (rename one, or use ax.contract)"
    )
    assert [(e.path.name, e.lineno + 1) for e in info.traceback][0] == ("test_graph_nodes.py", line)
    with pytest.raises(ax.AxisError, match="same axes in a different order"):
        ax.Input(ax.F32, Batch, In) + ax.Input(ax.F32, In, Batch)
    with pytest.raises(ax.AxisError, match="axis In has size 3 in one operand and 5"):
        x + ax.Input(ax.F32, Batch, In, sizes={In: 5})


def test_eager_tensors_and_numbers_become_consts() -> None:
    x = ax.Input(ax.F32, Batch, sizes=(2,))
    t = ax.ones((2,), Batch)
    y = (x + t) * 2.0
    assert isinstance(y, ax.Apply)
    add = y.args[0]
    assert isinstance(add, ax.Apply) and isinstance(add.args[1], ax.Const)
    assert add.args[1].value is t
    two = y.args[1]
    assert isinstance(two, ax.Const) and two.axes == () and float(two.value) == 2.0
    g = ax.Graph(y)
    assert len(g.consts) == 2 and len(g.inputs) == 1
    with pytest.raises(TypeError, match="Const holds a Tensor value"):
        ax.Const(np.ones(2))  # type: ignore[arg-type]


def test_param_is_a_pytree_with_a_stable_identity() -> None:
    w = ax.Param(ax.ones((2, 3), In, Hidden), name="w")
    assert w.value.shape == (2, 3) and w.shape == (2, 3) and w.dtype is ax.F32
    leaves, treedef = jax.tree_util.tree_flatten(w)
    assert len(leaves) == 1 and leaves[0].shape == (2, 3)
    g = jax.grad(lambda p: jnp.sum(p.value.array**2))(w)
    assert isinstance(g, ax.Param) and g == w and hash(g) == hash(w)
    np.testing.assert_allclose(g.value.array, 2 * np.ones((2, 3)))
    opt = optax.sgd(0.5)
    updates, _ = opt.update(g, opt.init(w), w)
    w2 = optax.apply_updates(w, updates)
    assert w2 == w and w2 is not w
    np.testing.assert_allclose(w2.value.array, np.zeros((2, 3)))
    w3 = w.replace(ax.full((2, 3), In, Hidden, value=7.0))
    assert w3 == w and float(w3.value.array[0, 0]) == 7.0
    with pytest.raises(ax.AxisError, match="same axes in a different order"):
        w.replace(ax.ones((3, 2), Hidden, In))
    with pytest.raises(TypeError, match="Param holds a Tensor value"):
        ax.Param(w)  # type: ignore[arg-type]
    assert ax.Param(w.value) != w


class _Model(eqx.Module):
    w: ax.Param[ax.F32, In, Hidden]
    scale: float = eqx.field(static=True)


def test_equinox_module_holding_params_works_with_filter_grad() -> None:
    model = _Model(ax.Param(ax.ones((2, 3), In, Hidden), name="w"), 2.0)
    x = ax.Input(ax.F32, Batch, In, sizes={In: 2})
    out = ax.compile(ax.sum(ax.sum(x @ model.w, Hidden), Batch), inputs=[x])
    xs = jnp.ones((4, 2))

    def loss(m: _Model) -> jax.Array:
        return m.scale * out(xs, params=m).array

    g = eqx.filter_grad(loss)(model)
    assert isinstance(g.w, ax.Param)
    np.testing.assert_allclose(g.w.value.array, np.full((2, 3), 8.0))


def test_as_params_and_as_values_round_trip() -> None:
    layer = ax.nn.Affine(In, Hidden, 2, 3, key=jax.random.key(0))
    model = ax.as_params(layer, prefix="fc.")
    assert isinstance(model.weight, ax.Param) and model.weight.name == "fc.weight"
    assert isinstance(model.bias, ax.Param) and model.bias.name == "fc.bias"
    back = ax.as_values(model)
    np.testing.assert_array_equal(back.weight.array, layer.weight.array)
    new = {model.bias: ax.full((3,), Hidden, value=1.5)}
    assert float(ax.as_values(model, new).bias.array[0]) == 1.5
    assert ax.as_params(model).weight is model.weight
