"""The examples run: XOR converges; short runs on the real MNIST files beat a floor."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import data_dir

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / name / "train.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_xor_reaches_full_accuracy():
    _, accuracy, _ = _example("xor").train(progress=False)
    assert accuracy == 1.0


def test_xor_script_prints_its_result():
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "xor" / "train.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    assert "0 xor 1 -> 1" in out and "XOR accuracy 100%" in out


def test_mnist_mlp_short_run_beats_a_floor(tmp_path):
    folder = data_dir("mnist")
    out = _example("mnist").main(
        [
            "--epochs",
            "1",
            "--limit",
            "20000",
            "--data-dir",
            str(folder),
            "--logdir",
            str(tmp_path),
            "--no-progress",
        ]
    )
    assert out["steps"] == 157
    assert out["accuracy"] >= 0.91  # the 784-300-100-10 MLP after 157 steps on 20k images
    assert (tmp_path / "curves.png").is_file() and (tmp_path / "metrics.csv").is_file()


def test_mnist_cli_resume_continues_from_the_checkpoint(tmp_path):
    folder = str(data_dir("mnist"))
    mnist = _example("mnist")
    common = [
        "--limit",
        "1024",
        "--test-limit",
        "1000",
        "--batch-size",
        "256",
        "--data-dir",
        folder,
        "--checkpoint-dir",
        str(tmp_path / "ckpt"),
        "--no-progress",
    ]
    first = mnist.main([*common, "--epochs", "2", "--logdir", str(tmp_path / "a")])
    with pytest.warns(UserWarning, match=r"under another schedule .*\(epochs=2 then, 3 now\)"):
        resumed = mnist.main(
            [*common, "--epochs", "3", "--logdir", str(tmp_path / "a"), "--resume"]
        )
    assert (first["steps"], resumed["steps"]) == (8, 12)
    with pytest.raises(SystemExit, match="--resume needs --checkpoint-dir"):
        mnist.main(["--resume"])


def test_cnn_and_fashion_runs(tmp_path):
    mnist = _example("mnist")
    cnn = mnist.main(
        [
            "--model",
            "cnn",
            "--epochs",
            "1",
            "--limit",
            "2048",
            "--test-limit",
            "1000",
            "--data-dir",
            str(data_dir("mnist")),
            "--logdir",
            str(tmp_path / "cnn"),
            "--no-progress",
        ]
    )
    assert cnn["accuracy"] >= 0.6  # 16 steps from scratch; chance is 0.1
    fashion = mnist.main(
        [
            "--dataset",
            "fashion",
            "--epochs",
            "1",
            "--limit",
            "10000",
            "--test-limit",
            "2000",
            "--data-dir",
            str(data_dir("fashion-mnist")),
            "--logdir",
            str(tmp_path / "f"),
            "--no-progress",
        ]
    )
    assert fashion["accuracy"] >= 0.7


def test_lstm_folds_over_rows_and_learns(tmp_path):
    out = _example("lstm").main(
        [
            "--epochs",
            "1",
            "--limit",
            "8192",
            "--test-limit",
            "1000",
            "--data-dir",
            str(data_dir("mnist")),
            "--logdir",
            str(tmp_path),
            "--no-progress",
        ]
    )
    assert out["accuracy"] >= 0.4  # 64 steps; chance is 0.1
    rows = [line.split(",") for line in (tmp_path / "metrics.csv").read_text().splitlines()]
    eval_loss = float(rows[-1][rows[0].index("eval_loss")])
    assert eval_loss < math.log(10)  # below the loss of a uniform guess
