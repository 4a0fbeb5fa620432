"""One of two processes that resume a ``fit`` run at every point of its schedule, on JAX's
own runtime (``jax.distributed`` on 127.0.0.1, one CPU device per process).

``python tests/parallel/_two_process_resume.py PROCESS_ID PORT FOLDER``. The run (2 epochs
of 4 steps, a row each step, evaluated after each epoch, sharded checkpoints at steps 3, 4,
6 and 8) is trained through once; then, for each checkpoint, process 0 copies it alone into a folder
of its own and both processes resume from it: inside the first epoch (3), before the last
epoch (4), inside it (6) and after the end (8: nothing is left to train, the history is
all there is). Each process writes every history it got to ``FOLDER/history-<id>.json``
(tests/parallel/test_resume_two_processes.py compares them) and prints ``PASS``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

os.environ["AXJAX_CHECK_DEVICES"] = "1"
import jax  # noqa: E402

process_id, port, folder = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
jax.config.update("jax_num_cpu_devices", 1)
jax.distributed.initialize(
    f"127.0.0.1:{port}", num_processes=2, process_id=process_id, initialization_timeout=120
)

import optax  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _checks as c  # noqa: E402

import axjax as ax  # noqa: E402
from axjax.train import _fit_log  # noqa: E402

# The histories are the subject, not curves.png (tests/train/test_fit.py checks it): process 0
# drew it after each of the five runs, over a third of its CPU time (12.4 s against 7.8 s)
_fit_log.plot_history = lambda history, path: None

#: the checkpoints the run saves, and so the points it is resumed from
RESUME_AT = (3, 4, 6, 8)


def main() -> None:
    assert jax.device_count() == 2 and jax.local_device_count() == 1
    par = ax.train.Parallel(jax.make_mesh((2,), ("data",)), {c.TBatch: "data"})
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
    print("PASS resume", process_id, flush=True)


if __name__ == "__main__":
    main()
    jax.distributed.shutdown()
