"""MNIST and Fashion-MNIST: where the files are looked for, downloaded to, and checked.

Search order for the four IDX files of a data set called ``name``:

1. ``data_dir`` (``--data-dir`` in the examples), or ``data_dir/<name>``;
2. ``$AXJAX_DATA`` or ``$AXJAX_DATA/<name>``;
3. the cache, ``$XDG_CACHE_HOME/axjax/<name>`` (default ``~/.cache/axjax/<name>``).

Nothing else is searched: no folder relative to the working directory or to a checkout
(the examples and tests pass the repository's data folder as ``data_dir``). Missing files
are downloaded (checksum-verified) into the first of those that was given,
each file from each mirror within a deadline (``timeout=`` or ``$AXJAX_DOWNLOAD_TIMEOUT``,
default 120 s; see :func:`axjax.train.download`).
Every file's size and sha256 is checked before it is read.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from ..core._internal import check_indices, checks_choices, index_int, non_negative_int
from ._download import DATA_ENV, download_timeout, fetch, sha256_of
from ._idx import DataError, read_idx

__all__ = [
    "Dataset",
    "DatasetSpec",
    "FASHION_MNIST",
    "MNIST",
    "cache_dir",
    "fashion_mnist",
    "find_dataset",
    "load_dataset",
    "mnist",
]

Split = Literal["train", "test"]


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """An IDX image data set: its files with (sha256, size), its mirrors and class names."""

    name: str
    title: str
    files: dict[str, tuple[str, int]]
    mirrors: tuple[str, ...]
    classes: tuple[str, ...]

    def __post_init__(self) -> None:
        for name, (_, size) in self.files.items():
            non_negative_int("DatasetSpec", f"files[{name!r}] size", size)

    def split_files(self, split: Split) -> tuple[str, str]:
        prefix = {"train": "train", "test": "t10k"}[split]
        return f"{prefix}-images-idx3-ubyte.gz", f"{prefix}-labels-idx1-ubyte.gz"


MNIST = DatasetSpec(
    name="mnist",
    title="MNIST",
    files={
        "train-images-idx3-ubyte.gz": (
            "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
            9912422,
        ),
        "train-labels-idx1-ubyte.gz": (
            "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
            28881,
        ),
        "t10k-images-idx3-ubyte.gz": (
            "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
            1648877,
        ),
        "t10k-labels-idx1-ubyte.gz": (
            "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
            4542,
        ),
    },
    mirrors=(
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "https://storage.googleapis.com/cvdf-datasets/mnist/",
        "http://yann.lecun.com/exdb/mnist/",
    ),
    classes=tuple(str(i) for i in range(10)),
)

FASHION_MNIST = DatasetSpec(
    name="fashion-mnist",
    title="Fashion-MNIST",
    files={
        "train-images-idx3-ubyte.gz": (
            "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
            26421880,
        ),
        "train-labels-idx1-ubyte.gz": (
            "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
            29515,
        ),
        "t10k-images-idx3-ubyte.gz": (
            "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
            4422102,
        ),
        "t10k-labels-idx1-ubyte.gz": (
            "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
            5148,
        ),
    },
    mirrors=(
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        "https://github.com/zalandoresearch/fashion-mnist/raw/master/data/fashion/",
    ),
    classes=(
        "T-shirt/top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Ankle boot",
    ),
)


@dataclasses.dataclass(frozen=True)
class Dataset:
    """Images ``uint8[N, H, W]`` and integer labels ``uint8[N]`` held in host memory.

    Feed it to :class:`axjax.train.Loader` to get batches of named Tensors.

    Example:
        >>> test = ax.train.mnist("test")
        >>> len(test), test.images.shape
        (10000, (10000, 28, 28))
    """

    images: np.ndarray
    labels: np.ndarray
    classes: tuple[str, ...] = ()
    name: str = ""

    def __post_init__(self) -> None:
        if len(self.images) != len(self.labels):
            raise DataError(
                f"{self.name or 'dataset'}: {len(self.images)} images but {len(self.labels)} "
                "labels (the image and label files do not belong together)"
            )
        check_dataset_labels(f"Dataset {self.name}" if self.name else "Dataset", self)

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, start: int, stop: int) -> Dataset:
        """Examples ``start:stop`` (a small slice for quick runs and tests)."""
        start, stop = index_int("subset", "start", start), index_int("subset", "stop", stop)
        return dataclasses.replace(
            self, images=self.images[start:stop], labels=self.labels[start:stop]
        )


def check_dataset_labels(where: str, dataset: Dataset) -> np.ndarray:
    """The data set's labels as int32, by the index rule (core's ``check_indices``): whole
    numbers (never truncated: ``0.7`` and NaN are errors), not negative, within int32 (never
    wrapped: ``2**32 + 1`` is an error) and, when the data set names its classes, below
    their number. Every way labels reach a batch (``Dataset``, ``Loader``) passes here."""
    n = len(dataset.classes)
    host = check_indices(
        where,
        dataset.labels,
        n or None,
        what="label",
        noun="a class",
        of=f"for its {n} classes" if n else "",
        at="example",
        fix_high="fix the labels, or list every class in Dataset(classes=...)",
        fix_low="negative labels are not class indices: drop or mask those examples",
    )
    assert host is not None  # host data is never traced
    return host


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/axjax`` (default ``~/.cache/axjax``)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "axjax"


def _candidates(spec: DatasetSpec, data_dir: str | os.PathLike[str] | None) -> list[Path]:
    roots: list[Path] = []
    if data_dir is not None:
        roots.append(Path(data_dir))
    if os.environ.get(DATA_ENV):
        roots.append(Path(os.environ[DATA_ENV]))
    roots.append(cache_dir())
    out: list[Path] = []
    for root in roots:
        out += [root, root / spec.name]
    return out


def _has(folder: Path, names: Sequence[str]) -> bool:
    return all((folder / n).is_file() for n in names)


@checks_choices
def find_dataset(
    spec: DatasetSpec,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    split: Split | None = None,
    download_missing: bool = True,
    mirrors: Sequence[str] | None = None,
    progress: bool = True,
    timeout: float | None = None,
) -> Path:
    """The folder holding ``spec``'s files (those of ``split``, or all four).

    Looks in ``data_dir``, ``$AXJAX_DATA``, then the cache (each as is and with
    ``/<name>``); downloads what is missing into the first of those when allowed, each
    file from each mirror within ``timeout`` seconds (see :func:`axjax.train.download`;
    ``None``: ``$AXJAX_DOWNLOAD_TIMEOUT`` or 120 s).

    Raises:
        DataError: not found and not downloadable; the message says where to put the files.
    """
    if timeout is not None:  # checked even when nothing needs downloading
        download_timeout(timeout)
    names = spec.split_files(split) if split else tuple(spec.files)
    candidates = _candidates(spec, data_dir)
    for folder in candidates:
        if _has(folder, names):
            return folder
    target = candidates[0] if data_dir is not None else candidates[-1]
    if data_dir is None and os.environ.get(DATA_ENV):
        target = Path(os.environ[DATA_ENV]) / spec.name
    if not download_missing:
        where = "\n  ".join(str(c) for c in candidates)
        unset = "" if os.environ.get(DATA_ENV) else f" ({DATA_ENV} is not set)"
        raise DataError(
            f"{spec.title} files {', '.join(names)} not found. Looked in:\n  {where}\n"
            "Download them (download_missing=True), copy them into one of those folders, "
            f"or set {DATA_ENV} to a folder that holds them{unset}."
        )
    for n in names:
        if not (target / n).is_file():
            sha, size = spec.files[n]
            fetch(
                n,
                mirrors or spec.mirrors,
                target / n,
                sha,
                size=size,
                progress=progress,
                timeout=timeout,
                looked_in=candidates,
            )
    return target


def _verify(path: Path, spec: DatasetSpec) -> None:
    sha, size = spec.files[path.name]
    have = path.stat().st_size
    if have == size and sha256_of(path) == sha:
        return
    digest = sha256_of(path)
    for other in (MNIST, FASHION_MNIST):
        if other is not spec and any(h == digest for h, _ in other.files.values()):
            raise DataError(
                f"{path} is the {other.title} file, not the {spec.title} one: point data_dir "
                f"at a folder holding the {spec.title} files."
            )
    if have != size:
        what = "truncated" if have < size else "longer than the original"
        raise DataError(
            f"{path} is {what}: {have} bytes, but the {spec.title} file has {size}. "
            "Delete it so that it is downloaded again."
        )
    raise DataError(
        f"{path} has sha256 {digest}, but the {spec.title} file has {sha}: it is "
        "corrupt or belongs to another data set. Delete it so that it is downloaded again."
    )


def load_dataset(
    spec: DatasetSpec,
    split: Split = "train",
    *,
    data_dir: str | os.PathLike[str] | None = None,
    download_missing: bool = True,
    verify: bool = True,
    mirrors: Sequence[str] | None = None,
    progress: bool = True,
    timeout: float | None = None,
) -> Dataset:
    """Load one split of an IDX image data set (finding, downloading and checking it).

    Args:
        spec: :data:`MNIST`, :data:`FASHION_MNIST`, or your own :class:`DatasetSpec`.
        split: ``"train"`` or ``"test"``.
        data_dir: a folder to look in first (and to download into).
        download_missing: fetch missing files from ``mirrors`` (default ``spec.mirrors``).
        verify: check each file's size and sha256 before reading it.
        progress: show a progress bar while downloading.
        timeout: the deadline in seconds for one file from one mirror: connecting, every
            read and the whole transfer; a mirror sending nothing for ``min(timeout, 15)``
            seconds is stalled. On a miss the next mirror is tried and the partial file
            deleted. ``None``: ``$AXJAX_DOWNLOAD_TIMEOUT`` if set, else 120 s.

    Raises:
        DataError: missing and not downloadable, wrong checksum, truncated or non-IDX file.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    folder = find_dataset(
        spec,
        data_dir,
        split=split,
        download_missing=download_missing,
        mirrors=mirrors,
        progress=progress,
        timeout=timeout,
    )
    image_file, label_file = (folder / n for n in spec.split_files(split))
    if verify:
        _verify(image_file, spec)
        _verify(label_file, spec)
    images = read_idx(image_file, ndim=3)
    labels = read_idx(label_file, ndim=1)
    if len(spec.classes) and labels.size and int(labels.max()) >= len(spec.classes):
        raise DataError(
            f"{label_file} has label {int(labels.max())}, but {spec.title} has "
            f"{len(spec.classes)} classes"
        )
    return Dataset(images, labels, spec.classes, f"{spec.title} {split}")


def mnist(
    split: Split = "train",
    *,
    data_dir: str | os.PathLike[str] | None = None,
    download_missing: bool = True,
    timeout: float | None = None,
) -> Dataset:
    """MNIST digits: 60000 training or 10000 test images, ``uint8[N, 28, 28]``.

    Found and downloaded as by :func:`load_dataset`; ``timeout`` is the download deadline
    per file per mirror (``None``: ``$AXJAX_DOWNLOAD_TIMEOUT`` or 120 s).

    Example:
        >>> train = ax.train.mnist("train", data_dir="data/")
    """
    return load_dataset(
        MNIST, split, data_dir=data_dir, download_missing=download_missing, timeout=timeout
    )


def fashion_mnist(
    split: Split = "train",
    *,
    data_dir: str | os.PathLike[str] | None = None,
    download_missing: bool = True,
    timeout: float | None = None,
) -> Dataset:
    """Fashion-MNIST: 10 kinds of clothing, the same format and sizes as MNIST.

    Found and downloaded as by :func:`load_dataset`; ``timeout`` is the download deadline
    per file per mirror (``None``: ``$AXJAX_DOWNLOAD_TIMEOUT`` or 120 s).

    Example:
        >>> test = ax.train.fashion_mnist("test")
    """
    return load_dataset(
        FASHION_MNIST, split, data_dir=data_dir, download_missing=download_missing, timeout=timeout
    )
