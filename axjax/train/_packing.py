"""Packed sequences: documents of many lengths packed into fixed windows, with segment ids.

Each document of ``L`` ids gives ``L - 1`` (input, next-id target) pairs; a document longer
than a window is cut into pieces of ``seq_len`` pairs (each a segment of its own). Pieces
fill the windows in order, a new window starting when the next piece does not fit; the
rest of a window is padding: segment 0, ids and targets 0. Positions restart at 0 at every
segment. The attention of a packed batch takes ``ax.nn.segment_mask(segments, ...)`` and
its loss the weights ``segments > 0`` (docs/training.md, "Packed sequences").
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..core import I32, Axis, Tensor
from ..core._internal import (
    check_axis_label,
    check_int,
    check_unique_axes,
    non_negative_int,
    positive_int,
)
from ._axes import Batch, Pos
from ._tokens import TokenFile, seeded_rng

__all__ = ["PackedBatch", "PackedDocuments", "pack_documents"]


class PackedBatch(NamedTuple):
    """One batch of packed windows, each ``Tensor[I32, Batch, Pos]``: the ``inputs`` (ids),
    their next-id ``targets``, the document (``segments``, 0 for padding) and the position in the
    document (``positions``) of each entry. ``fit`` calls ``loss_fn(model, *batch)``."""

    inputs: Tensor[I32, Any, Any]
    targets: Tensor[I32, Any, Any]
    segments: Tensor[I32, Any, Any]
    positions: Tensor[I32, Any, Any]


def split_documents(ids: np.ndarray[Any, Any], separator: int) -> list[np.ndarray[Any, Any]]:
    """``ids`` cut before each ``separator`` (each document starts with it, as written by
    ``write_tokens(separator=...)``); ids before the first separator are a document too."""
    cuts = np.flatnonzero(np.asarray(ids) == separator)
    return [d for d in np.split(np.asarray(ids), cuts) if len(d)]


def _pieces(documents: Sequence[Any], seq_len: int) -> Iterator[np.ndarray[Any, Any]]:
    """Each document in pieces of at most ``seq_len + 1`` ids (overlapping by one: no
    target is lost); documents of one id have no pair and are skipped."""
    for doc in documents:
        d = np.asarray(doc)
        if d.ndim != 1 or (d.size and d.dtype.kind not in "iu"):
            raise TypeError(
                f"pack_documents: a document is one dimension of integer ids, got shape "
                f"{d.shape} and dtype {d.dtype}"
            )
        for s in range(0, len(d) - 1, seq_len):
            yield d[s : s + seq_len + 1]


def _pack(documents: Sequence[Any], seq_len: int) -> np.ndarray[Any, Any]:
    """``[4, windows, seq_len]`` int32: ids, targets, segments, positions."""
    windows: list[np.ndarray[Any, Any]] = []
    fill, segment = seq_len, 0
    for piece in _pieces(documents, seq_len):
        n = len(piece) - 1
        if fill + n > seq_len:
            windows.append(np.zeros((4, seq_len), np.int32))
            fill, segment = 0, 0
        segment += 1
        w = windows[-1]
        w[0, fill : fill + n], w[1, fill : fill + n] = piece[:-1], piece[1:]
        w[2, fill : fill + n], w[3, fill : fill + n] = segment, np.arange(n)
        fill += n
    if not windows:
        raise ValueError("pack_documents: no document has two ids or more (nothing to predict)")
    return np.stack(windows, axis=1)


class PackedDocuments:
    """Documents packed into windows (:func:`pack_documents`): a :class:`BatchSource` of
    :class:`PackedBatch`, each epoch the windows in an order drawn from ``key`` and the
    epoch (stored order without a key), the last partial batch dropped.

    ``arrays`` is ``[4, windows, seq_len]``: ids, targets, segments, positions."""

    def __init__(
        self,
        arrays: np.ndarray[Any, Any],
        batch_size: int,
        *,
        key: jax.Array | None = None,
        axes: tuple[type[Axis], ...] = (Batch, Pos),
    ) -> None:
        self.arrays, self.batch_size, self.key, self.axes = arrays, batch_size, key, axes
        if arrays.shape[1] < batch_size:
            raise ValueError(
                f"pack_documents: the documents fill {arrays.shape[1]} windows, fewer than a "
                f"batch of {batch_size}"
            )

    def __len__(self) -> int:
        return int(self.arrays.shape[1]) // self.batch_size

    @property
    def fill(self) -> float:
        """The fraction of positions that hold a document (not padding)."""
        return float((self.arrays[2] > 0).mean())

    def epoch(self, epoch: int = 0, start: int = 0) -> Iterator[PackedBatch]:
        """The batches of ``epoch``, from batch number ``start``."""
        epoch = non_negative_int("PackedDocuments.epoch", "epoch", epoch)
        start = non_negative_int("PackedDocuments.epoch", "start", start)
        n, b = self.arrays.shape[1], self.batch_size
        order = np.arange(n) if self.key is None else seeded_rng(self.key, epoch).permutation(n)
        for i in range(start, len(self)):
            rows = self.arrays[:, order[i * b : (i + 1) * b]]
            ids, targets, segments, positions = (
                Tensor[I32, Any, Any](jnp.asarray(a), self.axes) for a in rows
            )
            yield PackedBatch(ids, targets, segments, positions)

    def __iter__(self) -> Iterator[PackedBatch]:
        return self.epoch(0)


def pack_documents(
    documents: Sequence[Any] | TokenFile,
    seq_len: int,
    batch_size: int,
    *,
    separator: int | None = None,
    key: jax.Array | None = None,
    axes: Sequence[type[Axis]] = (Batch, Pos),
) -> PackedDocuments:
    """Pack documents into windows of ``seq_len`` (input, target) pairs with segment ids.

    Args:
        documents: sequences of ids, one per document; or a :class:`TokenFile` (or one array
            of ids) cut into documents before each ``separator``.
        key: the windows' order, drawn per epoch (``None``: packing order).

    Example:
        >>> data = ax.train.pack_documents([[5, 6, 7], [8, 9]], 4, 1)
        >>> batch = next(data.epoch(0))
        >>> batch.segments.array, batch.positions.array    # and batch.inputs, batch.targets
        (Array([[1, 1, 2, 0]]), Array([[0, 1, 0, 0]]))
    """
    seq_len = positive_int("pack_documents", "seq_len", seq_len)
    batch_size = positive_int("pack_documents", "batch_size", batch_size)
    if separator is not None:
        separator = check_int("pack_documents", "separator", separator, 0, None, "an id (int >= 0)")
    labels = tuple(check_axis_label(a, "pack_documents") for a in axes)
    check_unique_axes(labels, "pack_documents")
    if isinstance(documents, TokenFile) or (
        isinstance(documents, np.ndarray) and documents.ndim == 1
    ):
        if separator is None:
            raise ValueError(
                "pack_documents: one stream of ids is cut into documents at a separator id; "
                "pass separator= (the id write_tokens put before each document)"
            )
        ids = documents.ids if isinstance(documents, TokenFile) else documents
        documents = split_documents(ids, separator)
    return PackedDocuments(_pack(documents, seq_len), batch_size, key=key, axes=labels)
