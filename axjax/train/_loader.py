"""Batches of named Tensors: the data set lives on the device, shuffled per epoch by a key.

The images and labels are copied to the device once. Each epoch's order is a permutation
drawn from ``fold_in(key, epoch)``, so an epoch's batches depend only on the key and the
epoch number: a run resumed at (epoch, batch) sees exactly the batches it would have seen.
Each batch is gathered and converted by one small jitted function (no host round trip).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, cast

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Float32, Int32, Shaped

from ..core import F32, I32, Axis, Tensor, TensorType
from ..core._internal import (
    axes_names,
    check_axis_label,
    check_unique_axes,
    non_negative_int,
    positive_int,
)
from ..parallel import Parallel
from ._axes import Batch, Pixel
from ._datasets import Dataset, check_dataset_labels

__all__ = ["BatchSource", "Loader", "as_source"]

# The raw arrays a Loader gathers from, and the batches it makes (jaxtyping: dimension names
# are the axes of the Tensors they become).
Images = Float32[jax.Array, "Batch *Example"]
Labels = Int32[jax.Array, "Batch"]
Stored = Shaped[jax.Array, "Example *Sample"]
PerExample = Int32[jax.Array, "Example"]

Pair = tuple[Tensor[Any, *tuple[Any, ...]], Tensor[Any, *tuple[Any, ...]]]


class BatchSource(Protocol):
    """What the training loop iterates: ``len()`` batches per epoch, in a fixed order."""

    def __len__(self) -> int: ...

    def epoch(self, epoch: int, start: int = 0) -> Iterator[Any]: ...


@functools.partial(jax.jit, static_argnames=("size", "shape", "scale", "mean", "std"))
def _gather(
    images: Stored,
    labels: PerExample,
    order: PerExample,
    start: jax.Array,
    *,
    size: int,
    shape: tuple[int, ...],
    scale: float,
    mean: float,
    std: float,
) -> tuple[Images, Labels]:
    idx = jax.lax.dynamic_slice_in_dim(order, start, size)
    x = jnp.take(images, idx, axis=0).astype(jnp.float32)
    x = (x * scale - mean) / std
    return x.reshape((size, *shape)), jnp.take(labels, idx, axis=0)


class Loader:
    """Mini-batches ``(images, labels)`` of a :class:`Dataset` as named Tensors.

    Args:
        dataset: images ``[N, ...]`` and labels ``[N]`` (e.g. :func:`axjax.train.mnist`).
        batch_size: examples per batch; the last batch of an epoch is smaller unless
            ``drop_last``.
        axes: labels for the image batch, batch axis first. ``(Batch, Pixel)`` flattens
            each image; ``(Batch, Height, Width)`` keeps its shape (one label per dimension).
        key: PRNG key for shuffling (a new permutation each epoch); ``None``: file order.
        drop_last: skip the last partial batch.
        normalize: ``(mean, std)`` applied after integer images are scaled to ``[0, 1]``.
        parallel: an :class:`axjax.train.Parallel`: each batch is a global array sharded by
            its compute rules, and each process builds only the rows its devices hold (by
            index into the epoch's one permutation, so any device order is right). The data
            set stays in host memory; every batch must divide evenly over the mesh axes of
            the batch axis (use ``drop_last`` for a smaller last batch).

    Yields ``(Tensor[F32, Batch, ...], Tensor[I32, Batch])``.

    Example:
        >>> loader = ax.train.Loader(ax.train.mnist("train"), 128, key=jax.random.key(0))
        >>> x, y = next(iter(loader))
        >>> x, y
        (Tensor[F32, Batch=128, Pixel=784](...), Tensor[I32, Batch=128](...))
    """

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int,
        *,
        axes: Sequence[type[Axis]] = (Batch, Pixel),
        key: jax.Array | None = None,
        drop_last: bool = False,
        normalize: tuple[float, float] | None = None,
        parallel: Parallel | None = None,
    ) -> None:
        batch_size = positive_int("Loader", "batch_size", batch_size)
        self.axes: tuple[type[Axis], ...] = tuple(check_axis_label(a, "Loader") for a in axes)
        check_unique_axes(self.axes, "Loader")
        n = len(dataset)
        if n == 0:
            raise ValueError(f"Loader: {dataset.name or 'the dataset'} is empty")
        self.batch_size: int = min(int(batch_size), n) if not drop_last else int(batch_size)
        if drop_last and self.batch_size > n:
            raise ValueError(
                f"Loader: batch_size {batch_size} is larger than the dataset "
                f"({n} examples) and drop_last=True leaves no batch"
            )
        self.shape: tuple[int, ...] = self._shape(tuple(dataset.images.shape[1:]))
        self.dataset = dataset
        self.key = key
        self.drop_last = drop_last
        integer = np.issubdtype(dataset.images.dtype, np.integer)
        self._scale = 1.0 / 255.0 if integer else 1.0
        self._mean, self._std = _normalization(normalize)
        labels = check_dataset_labels("Loader", dataset)  # int32, never wrapped or truncated
        self.parallel = parallel
        self._orders: dict[int, jax.Array] = {}
        if parallel is not None:  # rows are built on the host, per device, by index
            self._host = (np.asarray(dataset.images), labels)
            for size in {self.batch_size, n % self.batch_size if not drop_last else 0} - {0}:
                self._shardings(size)  # an uneven batch is an AxisError naming the axis
            return
        self._images = jnp.asarray(dataset.images)
        self._labels = jnp.asarray(labels)

    def _shape(self, inner: tuple[int, ...]) -> tuple[int, ...]:
        rest = len(self.axes) - 1
        if rest == len(inner):
            return inner
        if rest == 1:
            return (math.prod(inner),)
        raise ValueError(
            f"Loader: axes ({axes_names(self.axes)}) name {rest} example dimensions, but the "
            f"examples have shape {inner}: give one label per dimension after the batch "
            "axis, or a single label to flatten them"
        )

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def order(self, epoch: int) -> jax.Array:
        """The example order of ``epoch`` (a permutation from ``fold_in(key, epoch)``)."""
        epoch = non_negative_int("Loader.order", "epoch", epoch)
        if epoch not in self._orders:
            n = len(self.dataset)
            if self.key is None:
                self._orders[epoch] = jnp.arange(n, dtype=jnp.int32)
            else:
                k = jax.random.fold_in(self.key, epoch)
                self._orders[epoch] = jax.random.permutation(k, n).astype(jnp.int32)
            for old in [e for e in self._orders if e != epoch][:-1]:
                del self._orders[old]  # keep this epoch's order and one other
        return self._orders[epoch]

    def epoch(self, epoch: int = 0, start: int = 0) -> Iterator[Pair]:
        """The batches of ``epoch``, beginning with batch number ``start``."""
        start = non_negative_int("Loader.epoch", "start", start)
        order = self.order(epoch)
        n, b = len(self.dataset), self.batch_size
        if self.parallel is not None:
            host_order = np.asarray(order)
            for i in range(start, len(self)):
                yield self._global_batch(host_order[i * b : i * b + min(b, n - i * b)])
            return
        for i in range(start, len(self)):
            size = min(b, n - i * b)
            x, y = _gather(
                self._images,
                self._labels,
                order,
                jnp.int32(i * b),
                size=size,
                shape=self.shape,
                scale=self._scale,
                mean=self._mean,
                std=self._std,
            )
            yield Tensor(x, self.axes), Tensor(y, (self.axes[0],))

    def __iter__(self) -> Iterator[Pair]:
        return self.epoch(0)

    def _shardings(self, size: int) -> tuple[Any, Any]:
        assert self.parallel is not None
        x = TensorType(F32, self.axes, (size, *self.shape))
        y = TensorType(I32, self.axes[:1], (size,))
        return self.parallel.batch_sharding(x), self.parallel.batch_sharding(y)

    def _global_batch(self, rows: np.ndarray[Any, Any]) -> Pair:
        """One batch as global arrays: each addressable device's block is built from the
        rows its index selects (``jax.make_array_from_callback``)."""
        images, labels = self._host
        size = len(rows)
        x_sharding, y_sharding = self._shardings(size)

        def x_block(index: tuple[slice, ...] | None) -> np.ndarray[Any, Any]:
            index = index or (slice(None),)
            x = images[rows[index[0]]].astype(np.float32).reshape(-1, *self.shape)
            x = (x * np.float32(self._scale) - np.float32(self._mean)) / np.float32(self._std)
            block: np.ndarray[Any, Any] = x[(slice(None), *index[1:])]
            return block

        def y_block(index: tuple[slice, ...] | None) -> np.ndarray[Any, Any]:
            block: np.ndarray[Any, Any] = labels[rows[(index or (slice(None),))[0]]]
            return block

        x = jax.make_array_from_callback((size, *self.shape), x_sharding, x_block)
        y = jax.make_array_from_callback((size,), y_sharding, y_block)
        return Tensor(x, self.axes), Tensor(y, (self.axes[0],))


def _normalization(normalize: Any) -> tuple[float, float]:
    """``(mean, std)`` checked: finite numbers and a positive std (else a ``ValueError``:
    dividing by a std of 0 gives ``-inf``/``nan`` images, a negative one flips them)."""
    if normalize is None:
        return 0.0, 1.0
    try:
        mean, std = normalize
        if isinstance(mean, bool | np.bool_) or isinstance(std, bool | np.bool_):
            raise TypeError("a bool is not a mean or a std")
        mean, std = float(mean), float(std)
    except (TypeError, ValueError):
        raise ValueError(
            f"Loader: normalize must be a pair (mean, std) of numbers, got {normalize!r}"
        ) from None
    if not (math.isfinite(mean) and math.isfinite(std)) or std <= 0:
        problem = (
            "mean and std must be finite numbers"
            if not (math.isfinite(mean) and math.isfinite(std))
            else f"std must be positive (a std of {std:g} "
            + (
                "divides by zero: the images would be -inf, +inf or nan)"
                if std == 0
                else "flips the images' sign)"
            )
        )
        raise ValueError(
            f"Loader: normalize=({mean:g}, {std:g}): {problem}; pass the mean "
            "and standard deviation of the pixel values scaled to [0, 1], e.g. "
            "normalize=(0.1307, 0.3081) for MNIST"
        )
    return mean, std


class _Batches:
    """A fixed list of batches, the same every epoch (e.g. XOR's one full batch)."""

    def __init__(self, batches: Sequence[Any], where: str = "fit: data") -> None:
        self.batches = list(batches)
        if not self.batches:
            raise ValueError(f"{where}: the list of batches is empty")

    def __len__(self) -> int:
        return len(self.batches)

    def epoch(self, epoch: int, start: int = 0) -> Iterator[Any]:
        return iter(self.batches[start:])


def as_source(data: object, where: str = "fit: data") -> BatchSource:
    """A :class:`Loader` (anything with ``epoch`` and ``len``) as is; a list of batches
    wrapped so that each epoch yields the same batches. ``where`` names the argument in the
    messages (``"fit: eval_data"``)."""
    if hasattr(data, "epoch") and hasattr(data, "__len__"):
        return cast(BatchSource, data)  # it has epoch() and len()
    if isinstance(data, Sequence):
        return _Batches(data, where)
    raise TypeError(
        f"{where}: the data must be an axjax.train.Loader (or have epoch() and len()) or a "
        f"list of batches, got {type(data).__name__}"
    )
