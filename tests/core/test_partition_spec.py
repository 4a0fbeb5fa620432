"""``ax.partition_spec``: sharding rules by axis name, placed by each tensor's axis order."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

import axjax as ax
from tests.axes import Batch, Hidden, Pixel

RULES = {Batch: "data", Hidden: "model"}


def test_spec_follows_each_tensors_axis_order() -> None:
    assert ax.partition_spec(ax.zeros((4, 3), Batch, Hidden), RULES) == PartitionSpec(
        "data", "model"
    )
    assert ax.partition_spec(ax.zeros((3, 4), Hidden, Batch), RULES) == PartitionSpec(
        "model", "data"
    )


def test_unlisted_axes_are_replicated_and_absent_rules_ignored() -> None:
    assert ax.partition_spec(ax.zeros((2, 3), Pixel, Hidden), RULES) == PartitionSpec(None, "model")
    assert ax.partition_spec(ax.zeros((2,), Pixel), RULES) == PartitionSpec(None)
    assert ax.partition_spec(ax.zeros((2,), Batch), {Batch: None}) == PartitionSpec(None)


def test_an_axis_split_over_several_mesh_axes() -> None:
    spec = ax.partition_spec(ax.zeros((8, 3), Batch, Pixel), {Batch: ("data", "fsdp")})
    assert spec == PartitionSpec(("data", "fsdp"), None)


def test_works_on_types_and_graph_like_objects() -> None:
    t = ax.TensorType(ax.F32, (Pixel, Batch), (3, None))
    assert ax.partition_spec(t, RULES) == PartitionSpec(None, "data")


def test_device_put_with_a_named_sharding_on_a_one_device_mesh() -> None:
    mesh = jax.make_mesh((1, 1), ("data", "model"))
    x = ax.tensor(np.arange(12.0, dtype=np.float32).reshape(4, 3), Batch, Hidden)
    sharding = NamedSharding(mesh, ax.partition_spec(x, RULES))
    y = jax.device_put(x, sharding)
    assert isinstance(y, ax.Tensor) and y.axes == (Batch, Hidden)
    assert y.array.sharding == sharding
    np.testing.assert_array_equal(y.array, x.array)

    @jax.jit
    def f(t: Any) -> Any:
        return ax.sum(t * 2.0, Hidden)

    out = f(y)
    assert out.axes == (Batch,)
    np.testing.assert_allclose(out.array, 2 * x.array.sum(1))


def test_a_whole_model_with_one_mapping() -> None:
    params = {"w": ax.zeros((3, 2), Pixel, Hidden), "b": ax.zeros((2,), Hidden)}
    specs = jax.tree.map(
        lambda t: ax.partition_spec(t, RULES), params, is_leaf=lambda v: isinstance(v, ax.Tensor)
    )
    assert specs == {"w": PartitionSpec(None, "model"), "b": PartitionSpec("model")}


# ------------------------------------------------------- rules, placement, ops (one device)
# The same code paths as on 8 devices (tests/parallel), on a 1x1 mesh: Explicit sharding
# types and shard_map's varying axes exist whatever the mesh's size.
def test_one_mesh_axis_for_two_axes_is_an_axis_error_naming_both() -> None:
    x = ax.zeros((2, 3), Batch, Hidden)
    with pytest.raises(
        ax.AxisError, match="mesh axis 'data' would shard both Batch and Hidden of Tensor"
    ):
        ax.partition_spec(x, {Batch: "data", Hidden: "data"})
    with pytest.raises(TypeError, match="is not an axis label"):
        ax.partition_spec(x, {"Batch": "data"})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="a mesh axis is a string"):
        ax.partition_spec(x, {Batch: 3})  # type: ignore[dict-item]


def test_axis_rules_check_the_mesh_and_need_a_context() -> None:
    mesh = jax.make_mesh((1, 1), ("data", "model"))
    with pytest.raises(
        ax.AxisError,
        match="Hidden maps to mesh axis 'modl', but the mesh "
        r"has axes \('data', 'model'\)",
    ):
        ax.axis_rules(mesh, {Hidden: "modl"}).__enter__()
    with pytest.raises(RuntimeError, match="no axis rules"):
        ax.shard(ax.zeros((2,), Batch))
    # a collective outside shard_map with no rules: the documented AxisError and its fix
    with pytest.raises(ax.AxisError, match="outside shard_map every array is already whole"):
        ax.psum(ax.zeros((2,), Batch), Hidden)
    with ax.axis_rules(mesh, {Batch: "data"}):
        with pytest.raises(ax.AxisError, match="Hidden has no mesh axis in the rules"):
            ax.psum(ax.zeros((2,), Batch), Hidden)
        with pytest.raises(ax.AxisError, match="the tensor still has axis Batch"):
            ax.pmean(ax.zeros((2,), Batch), Batch)
        with pytest.raises(ax.AxisError, match="the tensor has no axis Hidden"):
            ax.all_gather(ax.zeros((2,), Batch), Hidden, rules={Hidden: "model"})


def _mlp_loss(w1: Any, w2: Any, x: Any) -> Any:
    return ax.sum(ax.sum(ax.tanh(ax.contract(ax.tanh(ax.contract(x, w1)), w2)), Pixel), Batch).array


def _operands() -> tuple[Any, Any, Any]:
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    return (
        ax.tensor(jax.random.normal(k1, (3, 5)), Pixel, Hidden),
        ax.tensor(jax.random.normal(k2, (5, 3)), Hidden, Pixel),
        ax.tensor(jax.random.normal(k3, (4, 3)), Batch, Pixel),
    )


def test_ops_and_gradients_on_an_explicit_mesh_keep_the_primal_shardings() -> None:
    w1, w2, x = _operands()
    want, want_g = jax.value_and_grad(_mlp_loss, argnums=(0, 1))(w1, w2, x)
    mesh = jax.make_mesh((1, 1), ("data", "model"))  # Explicit axes: the JAX default
    with ax.axis_rules(mesh, {Batch: "data", Hidden: "model"}):
        w1s, w2s, xs = ax.shard((w1, w2, x))
        assert w1s.array.sharding.spec == PartitionSpec(None, "model")
        got, g = jax.jit(jax.value_and_grad(_mlp_loss, argnums=(0, 1)))(w1s, w2s, xs)
        h = jax.jit(ax.contract)(xs, w1s)
    assert h.array.sharding.spec == PartitionSpec("data", "model")
    assert g[0].array.sharding.spec == PartitionSpec(None, "model")
    np.testing.assert_allclose(got, want, rtol=1e-6)
    for a, b in zip(g, want_g, strict=True):
        np.testing.assert_allclose(a.array, b.array, rtol=1e-5, atol=1e-6)


def test_gradients_inside_shard_map_with_check_vma() -> None:
    w1, w2, x = _operands()
    want = jax.grad(_mlp_loss)(w1, w2, x)
    mesh = jax.make_mesh((1, 1), ("data", "model"))
    rules = {Batch: "data"}

    def step(w1: Any, w2: Any, x: Any) -> Any:
        # w1 is replicated and x varies over "data": the ops' custom_vjp backwards must
        # give w1 a cotangent of w1's (invariant) type; JAX sums it over "data"
        return jax.grad(lambda *a: ax.psum(ax.tensor(_mlp_loss(*a)), Batch).array)(w1, w2, x)

    with ax.axis_rules(mesh, rules):
        f = jax.shard_map(
            step,
            in_specs=(PartitionSpec(), PartitionSpec(), ax.partition_spec(x, rules)),
            out_specs=PartitionSpec(),
        )
        got = jax.jit(f)(*ax.shard((w1, w2, x)))
    np.testing.assert_allclose(got.array, want.array, rtol=1e-5, atol=1e-6)


def test_sharded_init_and_abstract_on_one_device() -> None:
    mesh = jax.make_mesh((1, 1), ("data", "model"))
    with ax.axis_rules(mesh, {Batch: "data"}, param_rules={Hidden: "model"}):
        layer = ax.sharded_init(ax.nn.Affine, Pixel, Hidden, 3, 4, key=jax.random.key(0))
        shapes = ax.abstract(layer, params=True)
    want = ax.nn.Affine(Pixel, Hidden, 3, 4, key=jax.random.key(0))
    np.testing.assert_array_equal(layer.weight.array, want.weight.array)
    assert layer.weight.array.sharding.spec == PartitionSpec("model", None)
    assert shapes.weight.array.sharding.spec == PartitionSpec("model", None)
    assert isinstance(shapes.weight.array, jax.ShapeDtypeStruct)
