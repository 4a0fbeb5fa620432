"""One of two processes of a ``fit`` over a global mesh of 2 x 4 CPU devices, on JAX's own
runtime (``jax.distributed`` on 127.0.0.1, gloo collectives).

``python tests/parallel/_two_process.py PROCESS_ID PORT FOLDER``; prints ``PASS two_process
<id>`` when this process's losses and parameters equal a one-device run of the same
training (its first epoch saving sharded ``Checkpoints``, its second resumed from them,
bit for bit the same as the two epochs run through), after both processes saved the
model, sharded over all 8 devices, with ``save_sharded`` into ``FOLDER/sharded``; only
process 0 pruned old checkpoints (the folders each process deletes are recorded) and wrote
the logs. ``_two_process.py restore FOLDER`` then loads it in one process on another mesh
and compares it with the one-device run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

os.environ["AXJAX_CHECK_DEVICES"] = "4"
import jax  # noqa: E402

RESTORE = sys.argv[1] == "restore"
if RESTORE:  # one process, 2 devices: another mesh than the one that saved
    os.environ["AXJAX_CHECK_DEVICES"] = "2"
    jax.config.update("jax_num_cpu_devices", 2)
else:
    process_id, port = int(sys.argv[1]), sys.argv[2]
    jax.config.update("jax_num_cpu_devices", 4)
    jax.distributed.initialize(
        f"127.0.0.1:{port}", num_processes=2, process_id=process_id, initialization_timeout=120
    )

import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _checks as c  # noqa: E402

import axjax as ax  # noqa: E402


def record_deletions(under: Path) -> list[Path]:
    """The checkpoint folders under ``under`` that this process deletes from now on
    (``shutil.rmtree`` is wrapped to note them; ``Checkpoints`` prunes with it)."""
    import shutil

    deleted: list[Path] = []
    remove = shutil.rmtree

    def rmtree(path: Any, *args: Any, **kwargs: Any) -> None:
        p = Path(path).absolute()
        if p.parent == under.absolute():
            deleted.append(p)
        remove(path, *args, **kwargs)

    shutil.rmtree = rmtree  # type: ignore[assignment]
    return deleted


def main() -> None:
    assert jax.device_count() == 8 and jax.local_device_count() == 4
    ds, key = c.tiny_dataset(), jax.random.key(4)
    model = c.FitMlp(jax.random.key(5))
    common = dict(epochs=2, log_every=1, progress=False, key=jax.random.key(6))
    # the one-device run, in this process, on its first local device
    ref = ax.train.fit(
        model, optax.sgd(0.1), c.fit_loss, ax.train.Loader(ds, 16, key=key), **common
    )
    # one global mesh, devices interleaved across the processes: each builds its own rows
    par = ax.train.Parallel(
        c.interleaved_mesh("explicit"), {c.TBatch: "data"}, param_rules={c.Hidden: "model"}
    )
    # epoch 1, sharded checkpoints (orbax: each process writes its shards, process 0
    # prunes), then epoch 2 resumed from the newest one
    folder = Path(sys.argv[3])
    ckpts = ax.train.Checkpoints(folder / "ckpts", keep=1, every=3, sharded=True)
    loader = ax.train.Loader(ds, 16, key=key, parallel=par)
    deleted = record_deletions(folder / "ckpts")
    ax.train.fit(
        model,
        optax.sgd(0.1),
        c.fit_loss,
        loader,
        parallel=par,
        checkpoints=ckpts,
        **{**common, "epochs": 1},
    )
    assert ckpts.steps() == [4], ckpts.steps()
    # saved at steps 3 and 4: process 0 pruned step 3; process 1 deleted nothing
    assert [p.name for p in deleted] == (["ckpt-000000003"] if process_id == 0 else []), (
        process_id,
        deleted,
    )
    logs = folder / f"logs-{process_id}"  # a folder per process: only process 0 writes
    got = ax.train.fit(
        model,
        optax.sgd(0.1),
        c.fit_loss,
        loader,
        parallel=par,
        checkpoints=ckpts,
        resume=True,
        logdir=logs,
        **common,
    )
    assert (logs / "metrics.jsonl").is_file() == (process_id == 0), list(folder.iterdir())
    # the second epoch saved at steps 6 and 8: process 0 pruned 4 and 6, process 1 nothing
    assert [p.name for p in deleted][1:] == (
        ["ckpt-000000004", "ckpt-000000006"] if process_id == 0 else []
    ), (process_id, deleted)
    # the resumed history starts with the rows before the checkpoint (they travel in it)
    losses = c.train_losses(got.history)
    np.testing.assert_allclose(losses, c.train_losses(ref.history), rtol=2e-6)
    # resume is exact: the same two epochs run through without stopping, bit for bit
    through = ax.train.fit(model, optax.sgd(0.1), c.fit_loss, loader, parallel=par, **common)
    assert losses == c.train_losses(through.history)
    for a, b in zip(jax.tree.leaves(got.model), jax.tree.leaves(through.model), strict=True):
        np.testing.assert_array_equal(
            multihost_utils.process_allgather(a, tiled=True),
            multihost_utils.process_allgather(b, tiled=True),
        )
    for a, b in zip(jax.tree.leaves(got.model), jax.tree.leaves(ref.model), strict=True):
        whole = multihost_utils.process_allgather(a, tiled=True)
        np.testing.assert_allclose(np.asarray(whole), np.asarray(b), rtol=2e-6, atol=2e-6)
    # a sharded checkpoint whose shards span both processes (FSDP over all 8 devices)
    fsdp = ax.shard(got.model, {c.Hidden: ("data", "model")}, mesh=par.mesh, params=True)
    ax.train.save_sharded(folder / "sharded", {"model": fsdp}, step=got.step)
    if jax.process_index() == 0:
        ax.train.save_checkpoint(folder / "ref.npz", {"model": ref.model}, step=ref.step)
    print("PASS two_process", process_id, flush=True)


def restore() -> None:
    """Load the two processes' checkpoint in one process, on a 2 x 1 mesh."""
    folder = Path(sys.argv[2])
    template = {"model": c.FitMlp(jax.random.key(0))}
    ref, _ = ax.train.load_checkpoint(folder / "ref.npz", template)
    m = jax.make_mesh((2, 1), ("data", "model"))
    back, manifest = ax.train.load_sharded(
        folder / "sharded", {"model": ax.abstract(template["model"], {c.Hidden: "data"}, mesh=m)}
    )
    c.close(back, ref, 2e-6)  # the two trainings agree to float noise (see main)
    assert back["model"].l1.weight.array.sharding.spec == c.P("data", None)
    assert manifest["step"] == 8
    print("PASS restore", flush=True)


if __name__ == "__main__":
    if RESTORE:
        restore()
    else:
        main()
        jax.distributed.shutdown()
