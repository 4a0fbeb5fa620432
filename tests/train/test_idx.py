"""The IDX reader: round trips, the real MNIST headers, and every malformed-file error."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

import axjax as ax
from axjax.train import DataError, read_idx, write_idx
from tests.conftest import data_dir


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_round_trip(tmp_path, dtype, suffix):
    arr = (np.arange(2 * 3 * 4) - 7).reshape(2, 3, 4).astype(dtype)
    path = tmp_path / f"x-idx3{suffix}"
    write_idx(path, arr)
    back = read_idx(path)
    assert back.dtype == np.dtype(dtype) and back.dtype.isnative
    np.testing.assert_array_equal(back, arr)


def test_real_mnist_headers_and_label_counts():
    folder = data_dir("mnist")
    images = read_idx(folder / "t10k-images-idx3-ubyte.gz", ndim=3)
    labels = read_idx(folder / "t10k-labels-idx1-ubyte.gz", ndim=1)
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
    # published test-set label counts, digits 0..9
    expected = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert np.bincount(labels, minlength=10).tolist() == expected


def test_not_idx(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello world")
    with pytest.raises(
        DataError,
        match=r"notes.txt is not an IDX file: it starts with "
        r"68 65 6c 6c",
    ):
        read_idx(path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    with pytest.raises(DataError, match="nothing \\(empty file\\)"):
        read_idx(path)


def test_truncated_values(tmp_path):
    path = tmp_path / "x-idx3-ubyte"
    write_idx(path, np.zeros((10, 28, 28), np.uint8))
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(
        DataError,
        match=r"is truncated: its header promises shape \(10, 28, 28\) "
        r"of uint8 \(7840 bytes of values\) but it holds 7740",
    ):
        read_idx(path)


def test_too_long(tmp_path):
    path = tmp_path / "x-idx1-ubyte"
    write_idx(path, np.zeros(5, np.uint8))
    path.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(DataError, match="is too long"):
        read_idx(path)


def test_truncated_header(tmp_path):
    path = tmp_path / "x"
    path.write_bytes(bytes([0, 0, 8, 3, 0, 0]))
    with pytest.raises(DataError, match="truncated inside its header"):
        read_idx(path)


def test_damaged_gzip(tmp_path):
    path = tmp_path / "x-idx3-ubyte.gz"
    write_idx(path, np.arange(4000, dtype=np.int32).reshape(10, 20, 20))
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(DataError, match="is a damaged gzip file .* probably truncated"):
        read_idx(path)


def test_gzip_of_non_idx(tmp_path):
    path = tmp_path / "x.gz"
    path.write_bytes(gzip.compress(b"PK\x03\x04 not idx"))
    with pytest.raises(DataError, match="not an IDX file: it starts with 50 4b 03 04"):
        read_idx(path)


def test_wrong_rank_and_missing(tmp_path):
    path = tmp_path / "labels"
    write_idx(path, np.zeros(3, np.uint8))
    with pytest.raises(DataError, match="holds a 1-dimensional array; expected 3 dimensions"):
        read_idx(path, ndim=3)
    with pytest.raises(DataError, match="does not exist"):
        read_idx(tmp_path / "nope")


def test_write_refuses_unsupported_dtype(tmp_path):
    with pytest.raises(TypeError, match="IDX cannot store complex64"):
        write_idx(tmp_path / "x", np.zeros(2, np.complex64))


def test_error_is_exported_and_a_value_error():
    assert ax.train.DataError is DataError and issubclass(DataError, ValueError)
