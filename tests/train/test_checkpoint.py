"""Checkpoints: round trips, axis checks, keep-N, damaged files, and a writer killed by SIGKILL."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import axjax as ax
from axjax.train import (
    CheckpointError,
    CheckpointMismatchError,
    Checkpoints,
    load_checkpoint,
    save_checkpoint,
)
from tests.train.models import Hidden, TinyMLP

ROOT = Path(__file__).resolve().parents[2]


def _state(seed: int = 0, n_hidden: int = 8):
    model = TinyMLP(jax.random.key(seed), n_in=6, n_hidden=n_hidden, n_out=3)
    opt = optax.adam(1e-3)
    opt_state = opt.init(model)
    return {
        "model": model,
        "opt_state": opt_state,
        "key": jax.random.key(seed + 1),
        "raw": np.arange(3, dtype=np.int64),
        "count": 7,
        "name": "run",
    }


def _equal(a, b) -> bool:
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(la) == len(lb) and all(
        np.array_equal(
            np.asarray(jax.random.key_data(x) if _is_key(x) else x),
            np.asarray(jax.random.key_data(y) if _is_key(y) else y),
        )
        if hasattr(x, "shape")
        else x == y
        for x, y in zip(la, lb, strict=True)
    )


def _is_key(x) -> bool:
    return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def test_round_trip_restores_tensors_keys_optimizer_state_and_values(tmp_path):
    saved = _state(0)
    path = save_checkpoint(tmp_path / "c.npz", saved, step=12, metadata={"epoch": 3})
    tree, manifest = load_checkpoint(path, like=_state(1))
    assert _equal(tree, saved)
    assert tree["model"].w1.axes == saved["model"].w1.axes
    assert tree["model"].activation is ax.relu  # static fields come from the template
    assert _is_key(tree["key"]) and tree["count"] == 7 and tree["name"] == "run"
    assert manifest["step"] == 12 and manifest["metadata"] == {"epoch": 3}
    entry = next(e for e in manifest["leaves"] if e["path"] == "['model'].w1")
    assert entry["axes"] == ["Pixel", "Hidden"] and entry["shape"] == [6, 8]
    # an ordinary .npz of the leaves: numpy reads it without axjax
    with np.load(path) as npz:
        np.testing.assert_array_equal(npz[entry["file"][:-4]], np.asarray(saved["model"].w1))


def test_no_pickle_in_the_file(tmp_path):
    path = save_checkpoint(tmp_path / "c.npz", _state(0))
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        assert "manifest.json" in names
        assert all(n == "manifest.json" or n.endswith(".npy") for n in names)


def test_restoring_into_other_axes_fails_clearly(tmp_path):
    path = save_checkpoint(tmp_path / "c.npz", {"w": ax.zeros((2, 3), ax.train.Pixel, Hidden)})
    with pytest.raises(
        CheckpointMismatchError,
        match=r"c.npz does not fit at \['w'\]: the "
        r"checkpoint has Tensor\[float32, Pixel=2, Hidden=3\], the template has "
        r"Tensor\[F32, Pixel=2, Class=3\] \(axes differ; restore into a model built "
        r"with the same axes and sizes\)",
    ):
        load_checkpoint(path, {"w": ax.zeros((2, 3), ax.train.Pixel, ax.train.Class)})
    with pytest.raises(CheckpointMismatchError, match="shape differ"):
        load_checkpoint(path, {"w": ax.zeros((2, 4), ax.train.Pixel, Hidden)})


def test_restoring_into_another_structure_fails_clearly(tmp_path):
    path = save_checkpoint(tmp_path / "c.npz", _state(0, n_hidden=8))
    with pytest.raises(
        CheckpointMismatchError,
        match=r"does not fit at \['model'\].w1: .*"
        r"Hidden=8\], the template has Tensor\[F32, Pixel=6, Hidden=5\]",
    ):
        load_checkpoint(path, _state(0, n_hidden=5))
    with pytest.raises(
        CheckpointMismatchError,
        match=r"it stores 17 leaves, the template has 1; the template's \['w'\] not in the "
        r"checkpoint and the checkpoint's \['count'\], \['key'\], \['model'\].w1 not in "
        r"the template \(a different model or optimizer",
    ):
        load_checkpoint(path, {"w": jnp.zeros(3)})


def test_truncated_checkpoint_errors_and_the_previous_one_loads(tmp_path):
    ckpts = Checkpoints(tmp_path, keep=5)
    ckpts.save(1, _state(1))
    ckpts.save(2, _state(2))
    newest = ckpts.path(2)
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    with pytest.raises(
        CheckpointError,
        match=r"ckpt-000000002.npz is truncated or not a "
        r"checkpoint .*Load an earlier checkpoint",
    ):
        ckpts.restore(_state(0), step=2)
    with pytest.warns(UserWarning, match="skipping a damaged checkpoint: .*ckpt-000000002.npz"):
        restored = ckpts.restore(_state(0))
    assert restored.step == 1 and _equal(restored.tree, _state(1))


def test_flipped_byte_is_detected(tmp_path):
    path = save_checkpoint(tmp_path / "c.npz", {"w": jnp.arange(1000.0)})
    raw = bytearray(path.read_bytes())
    raw[2000] ^= 0xFF  # inside the array's bytes
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=r"c.npz is corrupt: cannot read \['w'\] \(Bad CRC"):
        load_checkpoint(path, {"w": jnp.zeros(1000)})


def test_other_bad_files(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "none.npz", {})
    np.savez(tmp_path / "plain.npz", a=np.zeros(2))
    with pytest.raises(CheckpointError, match="truncated or not a checkpoint"):
        load_checkpoint(tmp_path / "plain.npz", {})
    with pytest.raises(CheckpointError, match=r"no checkpoint in .* to restore"):
        Checkpoints(tmp_path / "empty").restore({})
    with pytest.raises(
        ValueError, match=r"Checkpoints: keep must be a positive int \(1, 2, ...\), got 0"
    ):
        Checkpoints(tmp_path, keep=0)


def test_keep_last_n(tmp_path):
    ckpts = Checkpoints(tmp_path, keep=2)
    for step in (10, 20, 30, 40):
        ckpts.save(step, {"w": jnp.full(3, float(step))})
    assert ckpts.steps() == [30, 40] and ckpts.latest() == 40
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ckpt-000000030.npz",
        "ckpt-000000040.npz",
    ]
    assert float(ckpts.restore({"w": jnp.zeros(3)}).tree["w"][0]) == 40.0


_WRITER = """
import sys, jax.numpy as jnp
from axjax.train import Checkpoints
ckpts = Checkpoints(sys.argv[1], keep=100)
ckpts.save(1, {"w": jnp.full((4,), 1.0)})
print("ready", flush=True)
big = jnp.ones((8_000_000,))          # 32 MB: each write takes a while
step = 2
while True:
    ckpts.save(step, {"w": big * step})
    step += 1
"""


def test_sigkill_during_a_write_leaves_loadable_checkpoints(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent(_WRITER))
    folder = tmp_path / "ckpt"
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    proc = subprocess.Popen(
        [sys.executable, str(script), str(folder)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 60
        partial = None
        while partial is None and time.monotonic() < deadline:
            for p in folder.iterdir():  # a temporary file that is not yet complete
                if ".tmp-" in p.name and 0 < p.stat().st_size < 32_000_000:
                    partial = p
                    break
        assert partial is not None, "the writer never got into a write"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    ckpts = Checkpoints(folder, keep=100)
    steps = ckpts.steps()
    assert steps and steps[0] == 1
    for step in steps:  # every file under a checkpoint name is complete
        tree, _ = load_checkpoint(
            ckpts.path(step), {"w": jnp.zeros((8_000_000,) if step > 1 else (4,))}
        )
        assert float(tree["w"][0]) == float(step)
    restored = ckpts.restore({"w": jnp.zeros((8_000_000,) if steps[-1] > 1 else (4,))})
    assert restored.step == steps[-1]
    # the killed writer's temporary file is cleaned up by the next save
    ckpts.save(steps[-1] + 1, {"w": jnp.zeros(2)})
    assert not [p for p in folder.iterdir() if ".tmp-" in p.name]


def test_the_docs_name_checkpoints_as_they_are_written(tmp_path):
    """Issue 33: the docs said ``ckpt-<step>``; the names are the step zero-padded to nine
    digits. Every docs page and the README quote only names that ``Checkpoints`` writes."""
    root = Path(__file__).resolve().parents[2]
    ckpts = ax.train.Checkpoints(tmp_path)
    assert ckpts.path(469).name == "ckpt-000000469.npz"
    assert ax.train.Checkpoints(tmp_path, sharded=True).path(469).name == "ckpt-000000469"
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text()
        assert "ckpt-<" not in text, page.name
        for name in re.findall(r"ckpt-(\d+)", text):
            assert len(name) == 9, (page.name, name)
