"""Row-by-row sequential MNIST: an LSTM reads each image one row at a time.

Each 28x28 image is a sequence of 28 rows (axis ``Row``, the time axis) of 28 pixels
(axis ``Col``). ``ax.nn.fold`` runs the LSTM cell along ``Row`` (one ``jax.lax.scan``) and
the last hidden state is classified. Run ``python examples/lstm/train.py`` (about 97-98 %
test accuracy after 4 epochs).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, final

import equinox as eqx
import jax
import optax

import axjax as ax
from axjax.train import Batch, Class

ROOT = Path(__file__).resolve().parents[2]
SHARED_MNIST = ROOT.parent / "shared" / "data" / "mnist"


@final
class Row(ax.Axis):
    """Image rows, read one per time step."""


@final
class Col(ax.Axis):
    """The 28 pixels of a row: the input at each step."""


@final
class Hidden(ax.Axis):
    """LSTM state units."""


class RowLSTM(eqx.Module):
    """LSTM over ``Row`` (input ``Col``), then an affine map of the last ``h`` to ``Class``."""

    cell: ax.nn.LSTMCell
    head: ax.nn.Affine[ax.F32, Hidden, Class]

    def __init__(self, hidden: int, key: jax.Array) -> None:
        k1, k2 = jax.random.split(key)
        self.cell = ax.nn.LSTMCell(Col, Hidden, 28, hidden, key=k1)
        self.head = ax.nn.Affine(Hidden, Class, hidden, 10, key=k2)

    def __call__(self, x: ax.Tensor[ax.F32, Batch, Row, Col]) -> ax.Tensor[ax.F32, Batch, Class]:
        init = self.cell.init_state({Batch: x.size(Batch)})
        h, _ = ax.nn.fold(self.cell, over=Row)(init, x)  # h: [Batch, Hidden]
        return self.head(h)


def classify(model: Any, x: Any, y: Any) -> tuple[Any, dict[str, Any]]:
    logits: ax.Tensor[ax.F32, Batch, Class] = model(x)
    loss = ax.mean(ax.train.softmax_cross_entropy(logits, y, Class), Batch)
    return loss, {"accuracy": ax.train.accuracy(logits, y, Class)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description="Row-by-row sequential MNIST with an LSTM.")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--logdir", default=str(ROOT / "runs" / "mnist-lstm"))
    p.add_argument("--limit", type=int, default=None, help="use the first N training images")
    p.add_argument("--test-limit", type=int, default=None, help="use the first N test images")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    folder = args.data_dir or (SHARED_MNIST if SHARED_MNIST.is_dir() else None)
    train, test = ax.train.mnist("train", data_dir=folder), ax.train.mnist("test", data_dir=folder)
    if args.limit:
        train = train.subset(0, args.limit)
    if args.test_limit:
        test = test.subset(0, args.test_limit)
    init_key, data_key, run_key = jax.random.split(jax.random.key(args.seed), 3)
    train_loader = ax.train.Loader(train, args.batch_size, axes=(Batch, Row, Col), key=data_key)
    test_loader = ax.train.Loader(test, 1000, axes=(Batch, Row, Col))
    schedule = optax.cosine_decay_schedule(args.lr, args.epochs * len(train_loader))
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(schedule))
    start = time.perf_counter()
    result = ax.train.fit(
        RowLSTM(args.hidden, init_key),
        optimizer,
        classify,
        train_loader,
        epochs=args.epochs,
        key=run_key,
        eval_data=test_loader,
        log_every=100,
        logdir=args.logdir,
        progress=not args.no_progress,
    )
    seconds = time.perf_counter() - start
    accuracy = [r for r in result.history if "eval_accuracy" in r][-1]["eval_accuracy"]
    print(
        f"row-by-row LSTM: test accuracy {accuracy:.2%} after {result.step} steps, "
        f"{seconds:.1f} s; curves: {Path(args.logdir) / 'curves.png'}"
    )
    return {"accuracy": accuracy, "seconds": seconds, "model": result.model}


if __name__ == "__main__":
    main()
