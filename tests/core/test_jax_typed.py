"""core's typed doors to JAX calls with incomplete annotations do what the JAX calls do."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from axjax.core._internal import (
    block_until_ready,
    finfo_max,
    finfo_min,
    pspec,
    reshard,
    shape_dtype_struct,
    with_sharding_constraint,
)


def test_pspec_is_partition_spec() -> None:
    assert pspec("data", None, ("a", "b")) == PartitionSpec("data", None, ("a", "b"))
    assert pspec() == PartitionSpec()


def test_finfo_limits() -> None:
    for dt in (jnp.float16, jnp.bfloat16, jnp.float32):
        assert finfo_max(dt) == float(jnp.finfo(dt).max)
        assert finfo_min(dt) == float(jnp.finfo(dt).min)
    assert finfo_max(np.dtype("float16")) == 65504.0


def test_shape_dtype_struct() -> None:
    mesh = jax.make_mesh((1,), ("data",))
    s = NamedSharding(mesh, pspec("data"))
    out = shape_dtype_struct((2, 3), np.float32, sharding=s)
    assert out == jax.ShapeDtypeStruct((2, 3), np.float32, sharding=s)
    assert shape_dtype_struct((4,), jnp.bfloat16).dtype == jnp.bfloat16


def test_placement_calls_keep_values() -> None:
    mesh = jax.make_mesh((1,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    x = jnp.arange(6.0).reshape(2, 3)
    s = NamedSharding(mesh, pspec("data", None))
    y = jax.jit(lambda a: with_sharding_constraint(a, s))(x)
    assert np.array_equal(y, x) and y.sharding.is_equivalent_to(s, 2)
    explicit = jax.make_mesh((1,), ("data",), axis_types=(jax.sharding.AxisType.Explicit,))
    with jax.set_mesh(explicit):
        z = reshard(jax.device_put(x, NamedSharding(explicit, pspec())), pspec("data", None))
    assert np.array_equal(z, x) and z.sharding.spec == pspec("data", None)


def test_block_until_ready_returns_the_tree() -> None:
    tree = {"a": jnp.ones(2), "b": [jnp.zeros(1), 3]}
    assert block_until_ready(tree) is tree
