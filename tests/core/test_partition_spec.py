"""``ax.partition_spec``: sharding rules by axis name, placed by each tensor's axis order."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

import axjax as ax
from tests.axes import Batch, Hidden, Pixel

RULES = {Batch: "data", Hidden: "model"}


def test_spec_follows_each_tensors_axis_order() -> None:
    assert ax.partition_spec(ax.zeros((4, 3), Batch, Hidden), RULES) == PartitionSpec(
        "data", "model")
    assert ax.partition_spec(ax.zeros((3, 4), Hidden, Batch), RULES) == PartitionSpec(
        "model", "data")


def test_unlisted_axes_are_replicated_and_absent_rules_ignored() -> None:
    assert ax.partition_spec(ax.zeros((2, 3), Pixel, Hidden), RULES) == PartitionSpec(
        None, "model")
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
    specs = jax.tree.map(lambda t: ax.partition_spec(t, RULES), params,
                         is_leaf=lambda v: isinstance(v, ax.Tensor))
    assert specs == {"w": PartitionSpec(None, "model"), "b": PartitionSpec("model")}
