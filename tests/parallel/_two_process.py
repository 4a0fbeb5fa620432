"""One of two processes of 4 CPU devices each, on JAX's own runtime (``jax.distributed`` on
127.0.0.1, gloo collectives), that run the two-process checks of tests/parallel in one
launch: ``python tests/parallel/_two_process.py PROCESS_ID PORT FOLDER PART...`` runs the
parts named, in order, each in ``FOLDER/<part>``, and prints ``PASS <part> <id>`` for each
that passed. A part that fails prints ``FAIL <part> <id>`` and its traceback, and the
process exits at once (the other, waiting in a collective, is ended by its launcher:
tests/parallel/_launch.py), so the parts after it do not run; the launcher runs them again
without it (tests/parallel/conftest.py), so that each part's test reports its own failure.
Both parts in one launch save a pair of processes (JAX's start-up, the imports and
``jax.distributed``'s set-up: about 8 s of CPU).

``two_process``: a ``fit`` over a global mesh of 2 x 4 devices; passes when this process's
losses and parameters equal a one-device run of the same training (its first epoch saving
sharded ``Checkpoints``, its second resumed from them, bit for bit the same as the two
epochs run through), after both processes saved the model, sharded over all 8 devices,
with ``save_sharded`` into ``FOLDER/two_process/sharded``; only process 0 pruned old
checkpoints (the folders each process deletes are recorded) and wrote the logs.
``_checks.two_process_restore(FOLDER/two_process)`` then loads it in one process on
another mesh and compares it with the one-device run (in the 8-device process of the
checks).

``token_windows``: each process reads only its rows of a token file's windows
(:func:`token_windows`).

``resume``: every process of a run resumed from a checkpoint gets the same history, at
every point of its schedule (issue 33; on a mesh of one device of each process). The run
(2 epochs of 4 steps, a row each step, evaluated after each epoch, sharded checkpoints at
steps 3, 4, 6 and 8) is trained through once; then, for each checkpoint, process 0 copies
it alone into a folder of its own and both processes resume from it: inside the first epoch
(3), before the last epoch (4), inside it (6) and after the end (8: nothing is left to
train, the history is all there is). Each process writes every history it got to
``FOLDER/resume/history-<id>.json`` (tests/parallel/test_resume_two_processes.py compares
them).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["AXJAX_CHECK_DEVICES"] = "4"
import jax  # noqa: E402

process_id, port, folder = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
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
from axjax.train import _fit_log  # noqa: E402

#: the checkpoints the resumed run saves, and so the points it is resumed from
RESUME_AT = (3, 4, 6, 8)


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


def two_process(folder: Path) -> None:
    """The ``fit`` over both processes' 8 devices (the module's docstring)."""
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


def resume(folder: Path) -> None:
    """The run resumed at every checkpoint (the module's docstring); curves.png is not
    drawn (the histories are the subject: tests/train/test_fit.py checks the plot; drawing
    it after each of the five runs was over a third of process 0's CPU time)."""
    plot = _fit_log.plot_history
    _fit_log.plot_history = lambda history, path: None
    try:
        resumed_histories(folder)
    finally:
        _fit_log.plot_history = plot


def resumed_histories(folder: Path) -> None:
    # a mesh of one device of each process: each process builds the rows of its device
    one_each = [
        min((d for d in jax.devices() if d.process_index == p), key=lambda d: d.id)
        for p in range(2)
    ]
    par = ax.train.Parallel(jax.make_mesh((2,), ("data",), devices=one_each), {c.TBatch: "data"})
    assert [d.process_index for d in par.mesh.devices.flat] == [0, 1], par.mesh
    ds, key = c.tiny_dataset(), jax.random.key(4)
    loader = ax.train.Loader(ds, 16, key=key, parallel=par)  # 64 examples: 4 steps an epoch
    test = ax.train.Loader(ds, 32, parallel=par)

    def run(checkpoints: ax.train.Checkpoints, logdir: Path, resume: bool) -> list[dict]:
        result = ax.train.fit(
            c.FitMlp(jax.random.key(5)),
            optax.sgd(0.1),
            c.fit_loss,
            loader,
            epochs=2,
            log_every=1,
            eval_data=test,
            progress=False,
            key=jax.random.key(6),
            parallel=par,
            checkpoints=checkpoints,
            resume=resume,
            logdir=logdir,
        )
        # what the MNIST example does with the result (it failed in process 1 before)
        final = [r for r in result.history if "eval_loss" in r][-1]
        assert final["step"] == 8, final
        return result.history

    every = ax.train.Checkpoints(folder / "all", keep=10, every=3, sharded=True)
    histories: dict[str, list[dict]] = {"through": run(every, folder / "logs", resume=False)}
    assert every.steps() == list(RESUME_AT), every.steps()
    for step in RESUME_AT:
        only = ax.train.Checkpoints(folder / f"from-{step}", sharded=True)
        if process_id == 0:
            shutil.copytree(every.path(step), only.path(step))
        multihost_utils.sync_global_devices(f"copied checkpoint {step}")
        histories[str(step)] = run(only, folder / f"logs-{step}", resume=True)
    (folder / f"history-{process_id}.json").write_text(json.dumps(histories))


def token_windows(folder: Path) -> None:
    """``ax.train.TokenWindows`` over the interleaved global mesh (``Batch`` over "data":
    process 0 holds rows 0-1 and 4-5 of 8): each process reads from the token file only the
    windows of its own rows, and the global batches equal the one-process ones. Each
    process writes what it read to ``FOLDER/token_windows/read-<id>.json``
    (tests/parallel/test_token_windows_two_processes.py judges them)."""
    ids = np.random.default_rng(0).integers(0, 1000, 5000)
    tokens = ax.train.write_tokens(folder / f"tokens-{process_id}.bin", [ids])
    par = ax.train.Parallel(c.interleaved_mesh("explicit"), {c.TBatch: "data"})
    key = jax.random.key(2)
    plain = ax.train.TokenWindows(tokens, 8, 16, key=key, random=True, steps=3)
    sharded = ax.train.TokenWindows(tokens, 8, 16, key=key, random=True, steps=3, parallel=par)
    read: list[int] = []
    rows = sharded.rows

    def recorded(starts: Any) -> Any:
        read.extend(int(v) for v in np.asarray(starts))
        return rows(starts)

    sharded.rows = recorded  # type: ignore[method-assign]
    owned, every, reads = [], [], []
    for i, (px, py) in enumerate(plain.epoch(1)):
        read.clear()
        x, y = next(sharded.epoch(1, i))
        reads.append(sorted(read))
        for got, want in ((x, px), (y, py)):
            whole = multihost_utils.process_allgather(got.array, tiled=True)
            np.testing.assert_array_equal(np.asarray(whole), np.asarray(want.array))
        held = x.array.sharding.addressable_devices_indices_map(x.shape).values()
        local = sorted({r for index in held for r in range(8)[index[0]]})
        starts = plain._starts(1, i)
        owned.append(sorted(int(starts[r]) for r in local))
        every.append(sorted(int(v) for v in starts))
    result = {"read": reads, "owned": owned, "all": every}
    (folder / f"read-{process_id}.json").write_text(json.dumps(result))


#: the parts by name
PARTS: dict[str, Callable[[Path], None]] = {
    "two_process": two_process,
    "resume": resume,
    "token_windows": token_windows,
}


if __name__ == "__main__":
    for part in sys.argv[4:]:
        try:
            (folder / part).mkdir(parents=True, exist_ok=True)
            PARTS[part](folder / part)
        except Exception:
            print("FAIL", part, process_id, flush=True)
            traceback.print_exc(file=sys.stdout)
            sys.stdout.flush()
            os._exit(1)  # at once: the other process may wait in a collective for this one
        print("PASS", part, process_id, flush=True)
    jax.distributed.shutdown()
