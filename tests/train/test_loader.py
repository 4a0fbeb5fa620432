"""The Loader: named batches, shuffling by key, the last partial batch, resuming mid-epoch."""

from __future__ import annotations

from typing import final

import jax
import numpy as np
import pytest

import axjax as ax
from axjax.train import Batch, Dataset, Height, Loader, Pixel, Width
from tests.conftest import data_dir


@final
class Time(ax.Axis): ...


def _dataset(n: int = 10) -> Dataset:
    images = np.arange(n * 2 * 3, dtype=np.uint8).reshape(n, 2, 3)
    return Dataset(images, (np.arange(n) % 10).astype(np.uint8), name="toy")


def _ids(loader: Loader, epoch: int = 0, start: int = 0) -> list[int]:
    return [int(i) for _, y in loader.epoch(epoch, start) for i in np.asarray(y.array)]


def test_flat_batches_are_named_tensors():
    x, y = next(iter(Loader(_dataset(), 4)))
    assert x.axes == (Batch, Pixel) and x.dtype is ax.F32 and x.shape == (4, 6)
    assert y.axes == (Batch,) and y.dtype is ax.I32
    np.testing.assert_allclose(np.asarray(x.array[1]), np.arange(6, 12) / 255, rtol=1e-6)


def test_image_and_sequence_layouts():
    x, _ = next(iter(Loader(_dataset(), 4, axes=(Batch, Height, Width))))
    assert x.sizes == {Batch: 4, Height: 2, Width: 3}
    x, _ = next(iter(Loader(_dataset(), 4, axes=(Batch, Time, Pixel))))
    assert x.axes == (Batch, Time, Pixel)


def test_last_partial_batch_and_drop_last():
    loader = Loader(_dataset(10), 4)
    sizes = [x.size(Batch) for x, _ in loader.epoch(0)]
    assert len(loader) == 3 and sizes == [4, 4, 2]
    assert _ids(loader) == list(range(10))
    dropped = Loader(_dataset(10), 4, drop_last=True)
    assert len(dropped) == 2 and [x.size(Batch) for x, _ in dropped.epoch(0)] == [4, 4]


def test_shuffling_is_a_permutation_fixed_by_key_and_epoch():
    a = Loader(_dataset(10), 3, key=jax.random.key(7))
    b = Loader(_dataset(10), 3, key=jax.random.key(7))
    c = Loader(_dataset(10), 3, key=jax.random.key(8))
    assert sorted(_ids(a)) == list(range(10))
    assert _ids(a, 0) == _ids(b, 0) and _ids(a, 1) == _ids(b, 1)
    assert _ids(a, 0) != _ids(a, 1) and _ids(a, 0) != _ids(c, 0)
    # labels travel with their images
    for x, y in a.epoch(2):
        first_pixel = np.asarray(x.array[:, 0]) * 255
        np.testing.assert_allclose(first_pixel / 6 % 10, np.asarray(y.array), atol=1e-3)


def test_resuming_mid_epoch_gives_the_remaining_batches():
    loader = Loader(_dataset(10), 3, key=jax.random.key(1))
    assert _ids(loader, 4, start=2) == _ids(loader, 4)[6:]


def test_normalize():
    x, _ = next(iter(Loader(_dataset(), 2, normalize=(0.5, 0.25))))
    np.testing.assert_allclose(
        np.asarray(x.array[0, :2]), (np.arange(2) / 255 - 0.5) / 0.25, rtol=1e-5
    )


def test_errors():
    with pytest.raises(
        ValueError, match=r"Loader: batch_size must be a positive int \(1, 2, ...\), got 0"
    ):
        Loader(_dataset(), 0)
    with pytest.raises(
        ValueError,
        match=r"axes \(Batch, Height, Width, Pixel\) name 3 example "
        r"dimensions, but the examples have shape \(2, 3\)",
    ):
        Loader(_dataset(), 2, axes=(Batch, Height, Width, Pixel))
    with pytest.raises(ValueError, match="batch_size 20 is larger than the dataset"):
        Loader(_dataset(10), 20, drop_last=True)
    with pytest.raises(TypeError, match="is not an axis label"):
        Loader(_dataset(), 2, axes=(Batch, "pixel"))  # type: ignore[arg-type]
    with pytest.raises(ax.AxisError, match="axis Batch occurs twice"):
        Loader(_dataset(), 2, axes=(Batch, Batch))
    with pytest.raises(ValueError, match="is empty"):
        Loader(_dataset().subset(0, 0), 2)


def test_real_mnist_batches():
    test = ax.train.mnist("test", data_dir=data_dir("mnist"), download_missing=False)
    loader = Loader(test, 1000)
    x, y = next(iter(loader))
    assert x.sizes == {Batch: 1000, Pixel: 784}
    assert 0.0 <= float(x.array.min()) and float(x.array.max()) <= 1.0
    np.testing.assert_array_equal(np.asarray(y.array), test.labels[:1000])
    assert len(loader) == 10
