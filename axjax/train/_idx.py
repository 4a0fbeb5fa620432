"""The IDX file format (MNIST, Fashion-MNIST): a reader that checks everything it reads.

An IDX file is two zero bytes, a type code, the number of dimensions, one big-endian
int32 per dimension, then the values in row-major, big-endian order. The files are usually
gzip-compressed; :func:`read_idx` reads both forms.
"""

from __future__ import annotations

import gzip
import math
import os
import zlib
from pathlib import Path

import numpy as np

from ..core._internal import positive_int

__all__ = ["DataError", "read_idx", "write_idx"]

# type code -> big-endian numpy dtype
_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_CODES = {dt.str[1:]: code for code, dt in _TYPES.items()}


class DataError(ValueError):
    """A data file is missing, truncated, corrupt, or not what it claims to be.

    The message names the file, what is wrong, and what to do about it.

    Example:
        >>> ax.train.read_idx("notes.txt")  # doctest: +SKIP
        DataError: notes.txt is not an IDX file: it starts with bytes 68 65 6c 6c ...
    """

    __module__ = "axjax.train"


def _raw_bytes(path: Path) -> bytes:
    with open(path, "rb") as f:
        head = f.read(2)
        f.seek(0)
        if head != b"\x1f\x8b":
            return f.read()
        try:
            return gzip.GzipFile(fileobj=f).read()
        except (EOFError, OSError, zlib.error) as e:
            raise DataError(
                f"{path} is a damaged gzip file ({e}); it is probably truncated: "
                "delete it and download it again"
            ) from None


def read_idx(path: str | os.PathLike[str], *, ndim: int | None = None) -> np.ndarray:
    """Read an IDX file (plain or gzip-compressed) into a numpy array.

    Args:
        path: the file, e.g. ``train-images-idx3-ubyte.gz``.
        ndim: if given, the number of dimensions the file must have (3 for images).

    Returns:
        The values with the file's shape and dtype (native byte order).

    Raises:
        DataError: the file is not IDX, is truncated or too long, or has the wrong rank.

    Example:
        >>> images = ax.train.read_idx("mnist/t10k-images-idx3-ubyte.gz")
        >>> images.shape, images.dtype
        ((10000, 28, 28), dtype('uint8'))
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} does not exist (or is not a file)")
    data = _raw_bytes(path)
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _TYPES:
        shown = " ".join(f"{b:02x}" for b in data[:4]) or "nothing (empty file)"
        raise DataError(
            f"{path} is not an IDX file: it starts with {shown}, but IDX files start with "
            "00 00, a type code (08 for uint8) and the number of dimensions"
        )
    dtype, rank = _TYPES[data[2]], data[3]
    ndim = None if ndim is None else positive_int("read_idx", "ndim", ndim)
    if ndim is not None and rank != ndim:
        raise DataError(f"{path} holds a {rank}-dimensional array; expected {ndim} dimensions")
    header = 4 + 4 * rank
    if len(data) < header:
        raise DataError(f"{path} is truncated inside its header ({len(data)} bytes)")
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(rank))
    expected = math.prod(shape) * dtype.itemsize
    got = len(data) - header
    if got != expected:
        what = "truncated" if got < expected else "too long"
        raise DataError(
            f"{path} is {what}: its header promises shape {shape} of {dtype.name} "
            f"({expected} bytes of values) but it holds {got}; delete it and download it again"
        )
    return np.frombuffer(data, dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def write_idx(path: str | os.PathLike[str], array: np.ndarray) -> None:
    """Write ``array`` as an IDX file (gzip-compressed when the name ends in ``.gz``).

    Example:
        >>> ax.train.write_idx("labels-idx1-ubyte.gz", np.arange(10, dtype=np.uint8))
    """
    array = np.asarray(array)
    key = array.dtype.str[1:]
    if key not in _CODES:
        raise TypeError(f"write_idx: IDX cannot store {array.dtype} (use uint8, int32, ...)")
    header = bytes([0, 0, _CODES[key], array.ndim]) + b"".join(
        int(n).to_bytes(4, "big") for n in array.shape
    )
    body = header + array.astype(_TYPES[_CODES[key]]).tobytes()
    path = Path(path)
    if path.suffix == ".gz":
        body = gzip.compress(body, mtime=0)
    path.write_bytes(body)
