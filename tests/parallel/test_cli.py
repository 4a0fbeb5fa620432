"""The command-line helpers of ``ax.train`` that the examples share: ``add_parallel_args``,
``parallel_from_args`` and ``unsharded`` (in this one-device process; the 8-device and
two-process paths run through the examples in ``_checks.py`` and ``test_parallel.py``)."""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import axjax as ax
from tests.axes import Batch, Hidden, Pixel
from tests.parallel._examples import load_example

ROOT = Path(__file__).resolve().parents[2]
PRESETS = {
    "data": ax.train.ParallelPreset(1, {Batch: "data"}),
    "tensor": ax.train.ParallelPreset(2, {Hidden: "model"}),
    "fsdp": ax.train.ParallelPreset(1, {Batch: "data"}, {Hidden: "data"}),
}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    ax.train.add_parallel_args(parser, PRESETS)
    return parser.parse_args(argv)


def test_flags() -> None:
    args = parse(["--devices", "8", "--parallel", "fsdp", "--coordinator", "h:1"])
    assert (args.devices, args.parallel, args.coordinator) == (8, "fsdp", "h:1")
    assert (args.num_processes, args.process_id) == (None, None)
    with pytest.raises(SystemExit):  # argparse: not one of the presets
        parse(["--parallel", "pipeline"])


def test_no_flags_is_one_device() -> None:
    assert ax.train.parallel_from_args(parse([]), PRESETS) is None


def test_preset_gives_the_mesh_and_rules() -> None:
    n = jax.device_count()
    par = ax.train.parallel_from_args(parse(["--parallel", "fsdp"]), PRESETS)
    assert par is not None
    assert dict(par.mesh.shape) == {"data": n, "model": 1}
    assert par.axis_rules.rules == {Batch: ("data",)}
    assert par.axis_rules.param_rules == {Hidden: ("data",)}
    default = ax.train.parallel_from_args(parse(["--devices", str(n)]), PRESETS)
    assert default is not None and default.axis_rules.rules == {Batch: ("data",)}


def test_errors_name_the_flag() -> None:
    n = jax.device_count()
    if jax.device_count() % 2 == 1:
        with pytest.raises(ValueError, match=r"--parallel tensor: mesh axis 'model' has 2"):
            ax.train.parallel_from_args(parse(["--parallel", "tensor"]), PRESETS)
    with pytest.raises(ValueError, match="--devices: the number of devices is at least 1"):
        ax.train.parallel_from_args(parse(["--devices", "0"]), PRESETS)
    with pytest.raises(ValueError, match=f"--devices {n + 1}: JAX has started already, with {n}"):
        ax.train.parallel_from_args(parse(["--devices", str(n + 1)]), PRESETS)
    with pytest.raises(ValueError, match="presets is empty"):
        ax.train.add_parallel_args(argparse.ArgumentParser(), {})


def test_unsharded_gives_whole_arrays_of_the_same_tree() -> None:
    mesh = jax.make_mesh((jax.device_count(), 1), ("data", "model"))
    model = ax.nn.Affine(Pixel, Hidden, 4, 2 * jax.device_count(), key=jax.random.key(0))
    placed = ax.shard(model, {Hidden: "data"}, mesh=mesh)
    assert placed.weight.array.sharding.spec == P("data", None)
    whole = ax.train.unsharded(placed)
    assert type(whole) is type(model)
    assert jax.tree.structure(whole) == jax.tree.structure(model)
    for a, b in zip(jax.tree.leaves(whole), jax.tree.leaves(model), strict=True):
        assert isinstance(a, jax.Array) and len(a.sharding.device_set) == 1
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("name", ["mnist", "transformer"])
def test_examples_use_the_helpers(name: str) -> None:
    """Both examples take their parallel flags from the helpers (nothing of their own)."""
    module = load_example(name)
    source = inspect.getsource(module)
    assert "add_parallel_args(" in source and "parallel_from_args(" in source
    assert "jax.distributed.initialize" not in source and "jax_num_cpu_devices" not in source
    assert all(isinstance(p, ax.train.ParallelPreset) for p in module.PARALLEL.values())
    args = module.parse(["--devices", "8", "--parallel", "data+tensor"])
    assert (args.devices, args.parallel) == (8, "data+tensor")
