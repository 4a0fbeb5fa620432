"""MNIST / Fashion-MNIST with the paper's 784-300-100-10 MLP, or a small CNN.

Run ``make mnist`` (or ``python examples/mnist/train.py``): the MLP, 10 epochs, MNIST.
Other runs::

    python examples/mnist/train.py --model cnn          # 4 epochs
    python examples/mnist/train.py --dataset fashion --epochs 5
    python examples/mnist/train.py --checkpoint-dir runs/ckpt --resume   # continue a run
    python examples/mnist/train.py --devices 8 --parallel data+tensor   # 8 simulated CPUs

Two processes on one machine (each with 4 simulated CPU devices; one global mesh of 8)::

    for i in 0 1; do python examples/mnist/train.py --devices 4 --parallel data \
        --coordinator 127.0.0.1:12355 --num-processes 2 --process-id $i & done; wait

``--devices N`` simulates N CPU devices (on a GPU or TPU machine the real ones are used) and
``--parallel`` shards the run by axis name over a (data, model) mesh (docs/parallel.md):
``data`` splits ``Batch``; ``tensor`` splits the hidden layer (``Hidden1``/``Hidden``) over
2 devices; ``data+tensor`` both; ``fsdp`` also splits the largest weights over ``data``.

Data: ``--data-dir``; else ``../shared/data/<name>`` beside the repository when it exists;
else ``$AXJAX_DATA``, the cache ``~/.cache/axjax``, then a checksum-verified download.
Prints the test accuracy and the time, and writes ``<logdir>/curves.png``.
"""

# JAX annotates its device and process functions with partly unknown parameter types
# (`backend: str | Unknown`), which pyright's strict mode reports at every use.
# pyright: reportUnknownMemberType=false

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, final

import equinox as eqx
import jax
import optax

import axjax as ax
from axjax.train import Batch, Class, Height, Pixel, Width

ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = ROOT.parent / "shared" / "data"
DATASETS = {"mnist": ax.train.MNIST, "fashion": ax.train.FASHION_MNIST}


@final
class Hidden1(ax.Axis): ...


@final
class Hidden2(ax.Axis): ...


@final
class Chan(ax.Axis):
    """Image channels (1: grey levels)."""


@final
class Feature1(ax.Axis): ...


@final
class Feature2(ax.Axis): ...


@final
class Flat(ax.Axis):
    """Height x Width x Feature2 flattened for the dense layers."""


@final
class Hidden(ax.Axis): ...


def mlp(key: jax.Array) -> ax.nn.MLP[ax.F32, Pixel, Class]:
    """The paper's 784-300-100-10 network with ReLU (LeCun et al. list 3.05 % error)."""
    return ax.nn.MLP(
        Pixel, Class, 784, 10, hidden={Hidden1: 300, Hidden2: 100}, activation=ax.relu, key=key
    )


class CNN(eqx.Module):
    """conv 3x3 (32) - max-pool 2 - conv 3x3 (64) - max-pool 2 - dense 256 - dropout - dense 10.

    Convolutions pad to keep the size ("SAME"): 28 -> 14 -> 7 after each pooling.

    Dropout needs a key in training: ``fit`` passes one to a ``loss_fn`` with a ``key``
    parameter, and evaluates in ``eqx.nn.inference_mode`` (dropout off).
    """

    conv1: ax.nn.Conv2D
    conv2: ax.nn.Conv2D
    pool: ax.nn.MaxPool2D
    fc1: ax.nn.Affine[ax.F32, Flat, Hidden]
    drop: ax.nn.Dropout
    fc2: ax.nn.Affine[ax.F32, Hidden, Class]

    def __init__(self, key: jax.Array) -> None:
        k1, k2, k3, k4 = jax.random.split(key, 4)
        self.conv1 = ax.nn.Conv2D((Height, Width), Chan, Feature1, 1, 32, 3, padding="SAME", key=k1)
        self.conv2 = ax.nn.Conv2D(
            (Height, Width), Feature1, Feature2, 32, 64, 3, padding="SAME", key=k2
        )
        self.pool = ax.nn.MaxPool2D((Height, Width), window=2, stride=2, padding="VALID")
        self.fc1 = ax.nn.Affine(Flat, Hidden, 7 * 7 * 64, 256, key=k3)
        self.drop = ax.nn.Dropout(0.3)
        self.fc2 = ax.nn.Affine(Hidden, Class, 256, 10, key=k4)

    def __call__(
        self, x: ax.Tensor[ax.F32, Batch, Height, Width], *, key: jax.Array | None = None
    ) -> ax.Tensor[ax.F32, Batch, Class]:
        x1: ax.Tensor[ax.F32, Batch, Height, Width, Chan] = ax.expand_dims(x, Chan, at=3)
        h1: ax.Tensor[ax.F32, Batch, Height, Width, Feature1] = self.pool(
            ax.relu(self.conv1(x1))
        )  # 28 -> 14
        h2: ax.Tensor[ax.F32, Batch, Height, Width, Feature2] = self.pool(
            ax.relu(self.conv2(h1))
        )  # 14 -> 7
        flat = ax.flatten(h2, (Height, Width, Feature2), Flat)  # [Batch, Flat=3136]
        return self.fc2(self.drop(ax.relu(self.fc1(flat)), key=key))


def classify(
    model: Any, x: Any, y: Any, *, key: jax.Array | None = None
) -> tuple[Any, dict[str, Any]]:
    """Mean softmax cross-entropy over the batch; accuracy as a metric. ``fit`` passes a
    fresh ``key`` each step (used by the CNN's dropout) and ``key=None`` to evaluate."""
    logits: ax.Tensor[ax.F32, Batch, Class] = model(x, key=key)
    loss = ax.mean(ax.train.softmax_cross_entropy(logits, y, Class), Batch)
    return loss, {"accuracy": ax.train.accuracy(logits, y, Class)}


def data_dir(arg: str | None, dataset: str) -> Path | None:
    """``--data-dir``, else the shared data folder beside the repository if present."""
    if arg:
        return Path(arg)
    shared = SHARED_DATA / DATASETS[dataset].name
    return shared if shared.is_dir() else None


#: ``--parallel``: the size of mesh axis "model", the compute rules and the parameter rules.
PARALLEL: dict[str, ax.train.ParallelPreset] = {
    "data": ax.train.ParallelPreset(1, {Batch: "data"}),
    "tensor": ax.train.ParallelPreset(2, {Hidden1: "model", Hidden: "model"}),
    "data+tensor": ax.train.ParallelPreset(2, {Batch: "data", Hidden1: "model", Hidden: "model"}),
    "fsdp": ax.train.ParallelPreset(1, {Batch: "data"}, {Pixel: "data", Flat: "data"}),
}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Train an MLP or CNN on MNIST or Fashion-MNIST.")
    p.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    p.add_argument("--dataset", choices=tuple(DATASETS), default="mnist")
    p.add_argument("--epochs", type=int, default=None, help="default: 10 (mlp), 4 (cnn)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (cosine decay)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--logdir", default=None, help="default: runs/<dataset>-<model>")
    p.add_argument("--checkpoint-dir", default=None, help="save a checkpoint every epoch")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint-dir")
    p.add_argument("--limit", type=int, default=None, help="use the first N training images")
    p.add_argument("--test-limit", type=int, default=None, help="use the first N test images")
    p.add_argument("--no-progress", action="store_true")
    ax.train.add_parallel_args(p, PARALLEL)  # --devices, --parallel, jax.distributed
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    args.epochs = args.epochs or (10 if args.model == "mlp" else 4)
    par = ax.train.parallel_from_args(args, PARALLEL)  # before anything starts JAX's backend
    main_process = jax.process_index() == 0
    if args.resume and not args.checkpoint_dir:
        raise SystemExit("--resume needs --checkpoint-dir (where the run's checkpoints are)")
    spec, folder = DATASETS[args.dataset], data_dir(args.data_dir, args.dataset)
    train = ax.train.load_dataset(spec, "train", data_dir=folder)
    test = ax.train.load_dataset(spec, "test", data_dir=folder)
    if args.limit:
        train = train.subset(0, args.limit)
    if args.test_limit:
        test = test.subset(0, args.test_limit)
    axes = (Batch, Pixel) if args.model == "mlp" else (Batch, Height, Width)
    key = jax.random.key(args.seed)
    init_key, data_key, run_key = jax.random.split(key, 3)
    norm = (0.1307, 0.3081) if args.dataset == "mnist" else (0.2860, 0.3530)  # mean, std
    train_loader = ax.train.Loader(
        train, args.batch_size, axes=axes, key=data_key, normalize=norm, parallel=par
    )
    test_loader = ax.train.Loader(test, 1000, axes=axes, normalize=norm, parallel=par)
    model = mlp(init_key) if args.model == "mlp" else CNN(init_key)
    schedule = optax.cosine_decay_schedule(args.lr, args.epochs * len(train_loader))
    logdir = Path(args.logdir or ROOT / "runs" / f"{args.dataset}-{args.model}")
    # several processes: orbax folders, each process writing its own shards
    ckpts = (
        ax.train.Checkpoints(args.checkpoint_dir, keep=2, sharded=jax.process_count() > 1)
        if args.checkpoint_dir
        else None
    )

    def say(text: str) -> None:  # only process 0 prints
        if main_process:
            print(text)

    say(
        f"{args.model} on {spec.title}: {len(train)} training / {len(test)} test images, "
        f"{args.epochs} epochs of {len(train_loader)} steps, on {jax.default_backend()}"
        + (f" ({par!r})" if par is not None else "")
    )
    start = time.perf_counter()
    result = ax.train.fit(
        model,
        optax.adam(schedule),
        classify,
        train_loader,
        epochs=args.epochs,
        key=run_key,
        eval_data=test_loader,
        log_every=100,
        logdir=logdir,
        checkpoints=ckpts,
        resume=args.resume,
        progress=not args.no_progress,
        parallel=par,
    )
    seconds = time.perf_counter() - start
    final = [r for r in result.history if "eval_accuracy" in r][-1]
    say(
        f"test accuracy {final['eval_accuracy']:.2%} (error {1 - final['eval_accuracy']:.2%}) "
        f"after {result.step} steps; {seconds:.1f} s in this run; "
        f"curves: {logdir / 'curves.png'}"
    )
    return {
        "accuracy": final["eval_accuracy"],
        "seconds": seconds,
        "steps": result.step,
        "logdir": logdir,
        "model": result.model,
    }


if __name__ == "__main__":
    main()
