"""Command-line flags for a training script that runs over a device mesh.

A script adds the flags, turns them into a :class:`Parallel` (or ``None``) before anything
starts JAX's backend, and gathers the trained model back whole to save or sample it::

    PRESETS = {
        "data": ax.train.ParallelPreset(1, {Batch: "data"}),
        "data+tensor": ax.train.ParallelPreset(2, {Batch: "data", Hidden: "model"}),
    }
    parser = argparse.ArgumentParser()
    ax.train.add_parallel_args(parser, PRESETS)
    args = parser.parse_args()
    par = ax.train.parallel_from_args(args, PRESETS)  # --devices, jax.distributed, mesh
    result = ax.train.fit(model, optimizer, loss_fn, loader, parallel=par)
    model = ax.train.unsharded(result.model)  # whole, in every process

The flags: ``--devices N`` (simulated CPU devices; real accelerators are used as they
are), ``--parallel NAME`` (a preset: the size of mesh axis ``"model"``, the compute rules
and the parameter rules; the other devices form mesh axis ``"data"``), and, for several
processes, ``--coordinator host:port --num-processes P --process-id I``
(``jax.distributed.initialize``; on SLURM or Open MPI they are found without flags).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import jax
import numpy as np

from ..core import Axis
from ..core._internal import config_update, positive_int
from ._parallel import Parallel

__all__ = ["ParallelPreset", "add_parallel_args", "parallel_from_args", "unsharded"]

T = TypeVar("T")


@dataclass(frozen=True)
class ParallelPreset:
    """One ``--parallel`` choice: a (data, model) mesh and the rules that shard over it.

    Args:
        model: the size of mesh axis ``"model"`` (1: no tensor parallelism); the other
            devices form mesh axis ``"data"``.
        rules: the compute rules (:class:`Parallel`'s ``rules``).
        param_rules: the parameter rules (FSDP), default ``rules``.

    Example:
        >>> ax.train.ParallelPreset(2, {Batch: "data", Hidden: "model"})
    """

    model: int
    rules: Mapping[type[Axis], Any]
    param_rules: Mapping[type[Axis], Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", positive_int("ParallelPreset", "model", self.model))


def add_parallel_args(
    parser: argparse.ArgumentParser, presets: Mapping[str, ParallelPreset]
) -> None:
    """Add ``--devices``, ``--parallel`` (one of ``presets``; ``data`` by default when
    ``--devices`` is given), ``--coordinator``, ``--num-processes`` and ``--process-id``
    to ``parser``; read them back with :func:`parallel_from_args`.

    Example:
        >>> presets = {"data": ax.train.ParallelPreset(1, {Batch: "data"})}
        >>> ax.train.add_parallel_args(parser, presets)
    """
    if not presets:
        raise ValueError("add_parallel_args: presets is empty; give at least one, like 'data'")
    first = "data" if "data" in presets else next(iter(presets))
    parser.add_argument(
        "--devices", type=int, default=None, help="simulate N CPU devices (set before JAX starts)"
    )
    parser.add_argument(
        "--parallel",
        choices=tuple(presets),
        default=None,
        help=f"shard by axis name over a (data, model) mesh (default with --devices: {first})",
    )
    parser.add_argument(
        "--coordinator",
        default=None,
        help="host:port of process 0 (jax.distributed; SLURM is detected itself)",
    )
    parser.add_argument("--num-processes", type=int, default=None)
    parser.add_argument("--process-id", type=int, default=None)


def parallel_from_args(
    args: argparse.Namespace, presets: Mapping[str, ParallelPreset]
) -> Parallel | None:
    """The :class:`Parallel` the flags of :func:`add_parallel_args` ask for, or ``None``
    (no ``--devices`` nor ``--parallel``: one device). Call it before anything starts
    JAX's backend: it sets the number of simulated CPU devices and, with
    ``--coordinator`` or ``--num-processes``, joins the other processes
    (``jax.distributed.initialize``) before it builds the mesh over all their devices.

    JAX's preemption service is turned off first: it catches SIGTERM to let a job save at
    a sync point it asks for, which ``fit`` does not, so a stopped run would not stop.

    Raises:
        ValueError: ``--devices`` below 1 or given after JAX started with another count,
            or a preset's ``model`` size that does not divide the number of devices.

    Example:
        >>> par = ax.train.parallel_from_args(parser.parse_args(), PRESETS)
    """
    devices: int | None = args.devices
    if devices is not None:
        if devices < 1:
            raise ValueError(f"--devices: the number of devices is at least 1, got {devices}")
        _simulate_devices(devices)
    if args.coordinator or args.num_processes:  # several processes: JAX's own runtime
        config_update("jax_enable_preemption_service", False)
        jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)
    if args.parallel is None and devices is None:
        return None
    name = args.parallel or ("data" if "data" in presets else next(iter(presets)))
    preset = presets[name]
    n = jax.device_count()
    if preset.model < 1 or n % preset.model:
        raise ValueError(
            f"--parallel {name}: mesh axis 'model' has {preset.model} devices, which does "
            f"not divide the {n} devices there are (use --devices with a multiple of "
            f"{preset.model})"
        )
    mesh = jax.make_mesh((n // preset.model, preset.model), ("data", "model"))
    return Parallel(mesh, preset.rules, param_rules=preset.param_rules)


def _simulate_devices(n: int) -> None:
    """Ask for ``n`` CPU devices; JAX takes the count only before its backend starts."""
    try:
        config_update("jax_num_cpu_devices", n)
    except RuntimeError:  # started already: fine if it has those devices
        if jax.device_count() != n:
            raise ValueError(
                f"--devices {n}: JAX has started already, with {jax.device_count()} "
                "devices; call parallel_from_args before anything runs JAX"
            ) from None


def unsharded(tree: T) -> T:
    """``tree`` with every array whole on one device, in every process (to save, sample or
    compare a sharded run's model); in a run of several processes each gathers the shards
    of the others (``multihost_utils.process_allgather``).

    Example:
        >>> model = ax.train.unsharded(result.model)
        >>> ax.nn.save_safetensors(model, "model.safetensors")
    """
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        host: T = multihost_utils.process_allgather(tree, tiled=True)
    else:
        host = jax.device_get(tree)

    def on_device(a: object) -> object:
        return jax.numpy.asarray(a) if isinstance(a, np.ndarray) else a

    out: T = jax.tree.map(on_device, host)
    return out
