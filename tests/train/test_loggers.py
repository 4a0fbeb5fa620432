"""``fit(loggers=...)`` (the ``ax.train.Logger`` protocol: a W&B logger on a fake run) and
the TensorBoard files of ``fit(logdir=...)``, read back with TensorBoard's own reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import numpy as np
import optax
import pytest

import axjax as ax
from tests.train.models import TinyMLP, classify


class FakeWandbRun:
    """What ``wandb.init()`` returns, as far as the logger uses it."""

    def __init__(self) -> None:
        self.logged: list[tuple[int, dict[str, Any]]] = []
        self.finished = 0

    def log(self, data: dict[str, Any], step: int) -> None:
        self.logged.append((step, dict(data)))

    def finish(self) -> None:
        self.finished += 1


class WandbLogger:
    """The W&B logger of docs/training.md, "Loggers"."""

    def __init__(self, run: Any) -> None:
        self.run = run

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()


def _fit(tmp: Path, **kw: Any) -> Any:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 6)).astype(np.float32)
    y = np.argmax(x @ rng.normal(size=(6, 3)), axis=1).astype(np.uint8)
    data = ax.train.Loader(ax.train.Dataset(x, y, name="synthetic"), 8)
    model = TinyMLP(jax.random.key(0), n_in=6, n_hidden=4, n_out=3)
    return ax.train.fit(
        model, optax.sgd(0.1), classify, data, epochs=2, log_every=2, eval_data=data,
        progress=False, **kw,
    )  # fmt: skip


def _jsonl(logdir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (logdir / "metrics.jsonl").read_text().splitlines()]


def test_a_logger_gets_every_row_and_is_closed(tmp_path: Path) -> None:
    run = FakeWandbRun()
    result = _fit(tmp_path, logdir=tmp_path, loggers=[WandbLogger(run)])
    rows = _jsonl(tmp_path)
    assert run.finished == 1 and len(run.logged) == len(rows) == len(result.history) == 6
    for (step, metrics), row in zip(run.logged, rows, strict=True):
        assert {"step": step, **metrics} == pytest.approx(row)
    with pytest.raises(TypeError, match=r"loggers\[0\] \(int\) has no log\(step, metrics\)"):
        _fit(tmp_path, loggers=[3])


def test_the_tensorboard_scalars_read_back_equal_the_jsonl_rows(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _fit(tmp_path, logdir=tmp_path)
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    rows = _jsonl(tmp_path)
    tags = sorted({k for r in rows for k in r} - {"step"})
    assert sorted(events.Tags()["scalars"]) == tags
    for tag in tags:
        want = [(r["step"], r[tag]) for r in rows if tag in r]
        got = [(e.step, e.value) for e in events.Scalars(tag)]
        assert [s for s, _ in got] == [s for s, _ in want], tag
        np.testing.assert_allclose([v for _, v in got], [v for _, v in want], rtol=1e-6)


def test_a_run_that_diverges_closes_its_loggers(tmp_path: Path) -> None:
    run = FakeWandbRun()

    def nan_loss(model: Any, x: Any, y: Any) -> Any:
        loss, metrics = classify(model, x, y)
        return loss * float("nan"), metrics

    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 6)).astype(np.float32)
    data = ax.train.Loader(ax.train.Dataset(x, np.zeros(16, np.uint8), name="s"), 8)
    model = TinyMLP(jax.random.key(0), n_in=6, n_hidden=4, n_out=3)
    with pytest.raises(ax.train.TrainingDiverged):
        ax.train.fit(
            model, optax.sgd(0.1), nan_loss, data, progress=False, loggers=[WandbLogger(run)]
        )
    assert run.finished == 1
