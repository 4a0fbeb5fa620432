"""Token files on disk: a flat file of token ids read through a memory map, its writer, and
the windows a language model trains on.

The ``.bin`` format is llm.c's (and so readable by llm.c and the nanoGPT-style scripts that
write it): a header of 256 little-endian int32, ``header[0]`` the magic ``20240520``,
``header[1]`` the version (1: the ids are uint16; 2: uint32), ``header[2]`` the number of
tokens; then the ids, little-endian. A file without the header is read as raw ids when its
dtype is given (nanoGPT's ``train.bin`` is raw uint16), and a ``.npy`` of one integer
dimension is read as it is. Nothing is read whole: a window reads the pages it covers.

:class:`TokenWindows` is a :class:`BatchSource` of ``(ids, targets)`` windows: epoch ``e``'s
batches depend only on the key, ``e`` and the batch number, so a ``fit`` resumed from its
checkpoint (which saves the epoch and the batch) sees the batches of an uninterrupted run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, cast, final

import jax
import jax.numpy as jnp
import numpy as np

from ..core import I32, Axis, Tensor, TensorType
from ..core._internal import (
    check_axis_label,
    check_int,
    check_unique_axes,
    non_negative_int,
    optional_positive_int,
    positive_int,
)
from ..parallel import Parallel
from ._axes import Batch, Pos
from ._idx import DataError

__all__ = ["HEADER_INTS", "MAGIC", "TokenFile", "TokenWindows", "seeded_rng", "write_tokens"]

#: the first int32 of a token file (llm.c's magic number)
MAGIC = 20240520
#: int32 values in the header (1024 bytes)
HEADER_INTS = 256
_HEADER_BYTES = HEADER_INTS * 4
#: header version -> the dtype of the ids
_VERSIONS: dict[int, np.dtype[Any]] = {1: np.dtype("<u2"), 2: np.dtype("<u4")}
_RAW = ("uint16", "uint32", "int32")

TokenWindow = tuple[Tensor[I32, Any, Any], Tensor[I32, Any, Any]]


def _raw_dtype(where: str, dtype: object) -> np.dtype[Any]:
    """``dtype`` as one of the token dtypes (``uint16``, ``uint32``, ``int32``)."""
    dt: np.dtype[Any] | None
    try:
        dt = np.dtype(cast(Any, dtype))  # any object: checked below
    except TypeError:
        dt = None
    if dt is None or dt.name not in _RAW:
        raise ValueError(f"{where}: dtype must be one of {', '.join(_RAW)}, got {dtype!r}")
    little: np.dtype[Any] = dt.newbyteorder("<")
    return little


def _open_bin(path: Path, dtype: object) -> np.ndarray[Any, Any]:
    """The ids of a ``.bin`` file: after llm.c's header, or raw with ``dtype`` given."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(_HEADER_BYTES)
    if len(head) >= 4 and int.from_bytes(head[:4], "little") == MAGIC:
        if len(head) < _HEADER_BYTES:
            raise DataError(
                f"{path} is truncated: it ends inside its {_HEADER_BYTES}-byte header "
                f"({size} bytes); write it again"
            )
        header = np.frombuffer(head, "<i4")
        version, n = int(header[1]), int(header[2])
        if version not in _VERSIONS:
            raise DataError(
                f"{path}: the header's version is {version}; token files have version 1 "
                "(uint16 ids) or 2 (uint32 ids)"
            )
        dt = _VERSIONS[version]
        if dtype is not None and _raw_dtype("TokenFile", dtype) != dt:
            raise DataError(
                f"{path}: its header says the ids are {dt.name} (version {version}), but "
                f"dtype={dtype!r} was given; drop dtype= (the header says it)"
            )
        want = _HEADER_BYTES + n * dt.itemsize
        if n <= 0 or size != want:
            held = max(size - _HEADER_BYTES, 0) // dt.itemsize
            what = "is truncated" if size < want else "has more bytes than its header says"
            raise DataError(
                f"{path} {what}: the header says {n:,} tokens ({want:,} bytes with the "
                f"header), the file has {size:,} bytes ({held:,} tokens); the header does "
                "not match the data: write the file again"
            )
        return np.memmap(path, dt, "r", offset=_HEADER_BYTES, shape=(n,))
    if dtype is None:
        raise DataError(
            f"{path} has no token-file header (its first int32 is not the magic {MAGIC}; it "
            f"starts with bytes {head[:8].hex(' ')}): pass dtype= (e.g. 'uint16') to read "
            "a raw file of ids, or write the file with ax.train.write_tokens"
        )
    dt = _raw_dtype("TokenFile", dtype)
    if size == 0 or size % dt.itemsize:
        raise DataError(
            f"{path}: {size:,} bytes is not a whole, positive number of {dt.name} ids "
            f"({dt.itemsize} bytes each): the file is truncated, empty, or not {dt.name}"
        )
    return np.memmap(path, dt, "r", shape=(size // dt.itemsize,))


def _open_npy(path: Path) -> np.ndarray[Any, Any]:
    try:
        ids: np.ndarray[Any, Any] = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise DataError(f"{path} is not a readable .npy file ({e}); write it again") from None
    if ids.ndim != 1 or ids.dtype.kind not in "iu" or ids.size == 0:
        raise DataError(
            f"{path}: a token file holds one dimension of integer ids, got an array of "
            f"shape {ids.shape} and dtype {ids.dtype}"
        )
    return ids


class TokenFile:
    """A flat file of token ids on disk, read through a memory map (never whole).

    ``.bin``: llm.c's format (a 1024-byte header, then uint16 or uint32 ids; docs/training.md,
    "Token files"), or raw ids with ``dtype`` given (``"uint16"``, ``"uint32"``, ``"int32"``;
    nanoGPT's ``train.bin``); ``.npy``: one integer dimension.

    Raises:
        DataError: a missing file, a truncated one, a header that does not match the data, a
            file without a header and no ``dtype``, a ``.npy`` that is not ids.

    Example:
        >>> tokens = ax.train.TokenFile("train.bin")
        >>> len(tokens), tokens.ids[:3]
        (1000000, memmap([50256,  464, 1893], dtype=uint16))
    """

    def __init__(self, path: str | os.PathLike[str], *, dtype: str | None = None) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise DataError(f"{self.path}: no such token file")
        self.ids: np.ndarray[Any, Any] = (
            _open_npy(self.path) if self.path.suffix == ".npy" else _open_bin(self.path, dtype)
        )

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def __repr__(self) -> str:
        return f"TokenFile({str(self.path)!r}, {len(self):,} {self.ids.dtype.name} ids)"

    def check_vocab(self, vocab_size: int, *, chunk: int = 1 << 22) -> None:
        """Scan the file ``chunk`` ids at a time: every id in ``[0, vocab_size)``.

        Raises:
            DataError: names the first id past the vocabulary (or negative) and its index.

        Example:
            >>> ax.train.TokenFile("train.bin").check_vocab(50257)
        """
        vocab_size = positive_int("TokenFile.check_vocab", "vocab_size", vocab_size)
        chunk = positive_int("TokenFile.check_vocab", "chunk", chunk)
        for start in range(0, len(self), chunk):
            part = np.asarray(self.ids[start : start + chunk])
            bad = (part >= vocab_size) | (part < 0)
            if bad.any():
                i = int(np.argmax(bad))
                raise DataError(
                    f"{self.path}: id {int(part[i])} at index {start + i:,} is past the "
                    f"vocabulary of {vocab_size} (ids 0 to {vocab_size - 1}); the file was "
                    "written with another tokenizer, or is corrupt"
                )


class _Encoder(Protocol):
    """What the writer needs of an ``axjax.models.Tokenizer``."""

    @property
    def vocab_size(self) -> int: ...

    def encode(self, texts: str, *, batch: Any) -> tuple[Any, Any]: ...


@final
class _Doc(Axis):
    """The one row of a text encoded by the writer."""


def _documents(
    documents: Iterable[Any], tokenizer: _Encoder | None
) -> Iterator[np.ndarray[Any, Any]]:
    """Each document's ids (int64): encoded texts or files, or the ids given."""
    for i, doc in enumerate(documents):
        if tokenizer is not None:
            if isinstance(doc, os.PathLike):
                doc = Path(doc).read_text(encoding="utf-8")
            if not isinstance(doc, str):
                raise TypeError(
                    f"write_tokens: with a tokenizer, documents[{i}] must be a text (str) or "
                    f"a file (a pathlib.Path), got {type(doc).__name__}"
                )
            ids, lengths = tokenizer.encode(doc, batch=_Doc)
            yield np.asarray(ids.array[0, : int(lengths.array[0])], np.int64)
            continue
        ids = np.asarray(doc)
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
            raise TypeError(
                f"write_tokens: documents[{i}] must be one dimension of integer ids, got an "
                f"array of shape {ids.shape} and dtype {ids.dtype} (texts need tokenizer=)"
            )
        yield ids.astype(np.int64)


def write_tokens(
    path: str | os.PathLike[str],
    documents: Iterable[Any],
    *,
    tokenizer: _Encoder | None = None,
    separator: int | None = None,
    dtype: str | None = None,
) -> TokenFile:
    """Write documents as one token file (``.bin``: llm.c's header; ``.npy``: an array).

    Args:
        documents: sequences of ids, one per document; or, with ``tokenizer``, texts
            (``str``) or text files (``pathlib.Path``) that it encodes.
        tokenizer: an ``axjax.models.Tokenizer`` (``axjax.models.load_tokenizer``).
        separator: an id written before each document (GPT-2's ``<|endoftext|>``, as llm.c
            and nanoGPT write their corpora): :func:`pack_documents` splits on it.
        dtype: ``"uint16"`` or ``"uint32"`` (default: uint16 when every id fits).

    Raises:
        ValueError: a negative id, or one that ``dtype`` cannot hold.

    Example:
        >>> ax.train.write_tokens("train.bin", [[1, 2, 3], [4, 5]], separator=0)
        TokenFile('train.bin', 7 uint16 ids)
    """
    if separator is not None:
        separator = check_int("write_tokens", "separator", separator, 0, None, "an id (int >= 0)")
    docs = list(_documents(documents, tokenizer))
    if separator is not None:
        docs = [np.concatenate([[separator], d]).astype(np.int64) for d in docs]
    ids = np.concatenate(docs) if docs else np.zeros(0, np.int64)
    if ids.size == 0:
        raise ValueError("write_tokens: no ids to write (no documents, or all empty)")
    low, high = int(ids.min()), int(ids.max())
    if dtype is None:
        vocab = tokenizer.vocab_size if tokenizer is not None else high + 1
        dtype = "uint16" if max(vocab, high + 1) <= 1 << 16 else "uint32"
    dt = _raw_dtype("write_tokens", dtype)
    if dt.name not in ("uint16", "uint32"):
        raise ValueError(f"write_tokens: dtype must be 'uint16' or 'uint32', got {dtype!r}")
    if low < 0 or high > np.iinfo(dt).max:
        bad = low if low < 0 else high
        raise ValueError(
            f"write_tokens: id {bad} does not fit {dt.name} (0 to {np.iinfo(dt).max})"
            + ("; pass dtype='uint32'" if bad > 0 and dt.name == "uint16" else "")
        )
    path = Path(path)
    if path.suffix == ".npy":
        np.save(path, ids.astype(dt))
        return TokenFile(path)
    header = np.zeros(HEADER_INTS, "<i4")
    header[:3] = MAGIC, 1 if dt.name == "uint16" else 2, ids.size
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(ids.astype(dt).tobytes())
    return TokenFile(path)


def seeded_rng(key: jax.Array, *more: int) -> np.random.Generator:
    """A NumPy generator seeded by ``key``'s data and ``more`` (host-side: no device work,
    and no int32 limit on the positions it draws)."""
    words = np.asarray(jax.random.key_data(key)).ravel().tolist()
    return np.random.default_rng([*words, *more])


class TokenWindows:
    """Windows of ``seq_len`` ids ``[Batch, Pos]`` and their next-token targets, read from a
    token file (:class:`TokenFile`, a path, or a 1-D array of ids).

    A :class:`BatchSource` for ``fit``. By default an epoch is every non-overlapping window
    once (window ``w`` starts at id ``w * seq_len``), in an order drawn from
    ``fold_in``-style seeding of ``key`` and the epoch (file order without a key); the last
    partial batch is dropped. ``random=True`` draws each window's start anywhere, from
    ``key``, the epoch and the batch number (``steps`` batches an epoch, default as many
    as the non-overlapping windows make). Either way epoch ``e``'s batch ``i`` is fixed by
    ``(key, e, i)``: ``fit`` resumed from a checkpoint sees the batches of an uninterrupted run.

    Args:
        parallel: an :class:`axjax.train.Parallel`: each batch is a global array sharded by
            its compute rules, and each process reads only the windows of its own rows.

    Example:
        >>> data = ax.train.TokenWindows("train.bin", 8, 1024, key=jax.random.key(0))
        >>> ids, targets = next(data.epoch(0))      # Tensor[I32, Batch=8, Pos=1024] each
    """

    def __init__(
        self,
        tokens: TokenFile | str | os.PathLike[str] | np.ndarray[Any, Any],
        batch_size: int,
        seq_len: int,
        *,
        key: jax.Array | None = None,
        random: bool = False,
        steps: int | None = None,
        axes: Sequence[type[Axis]] = (Batch, Pos),
        parallel: Parallel | None = None,
    ) -> None:
        self.tokens = tokens if isinstance(tokens, TokenFile) else None
        if isinstance(tokens, str | os.PathLike):
            self.tokens = TokenFile(tokens)
        self.ids: np.ndarray[Any, Any] = (
            self.tokens.ids if self.tokens is not None else np.asarray(tokens)
        )
        self.batch_size = positive_int("TokenWindows", "batch_size", batch_size)
        self.seq_len = positive_int("TokenWindows", "seq_len", seq_len)
        self.steps = optional_positive_int("TokenWindows", "steps", steps)
        self.axes: tuple[type[Axis], ...] = tuple(check_axis_label(a, "TokenWindows") for a in axes)
        check_unique_axes(self.axes, "TokenWindows")
        if len(self.axes) != 2:
            raise ValueError("TokenWindows: axes are two labels, the batch's and the positions'")
        if random and key is None:
            raise ValueError("TokenWindows: random windows are drawn from a key; pass key=")
        self.key, self.random, self.parallel = key, random, parallel
        self.windows = (len(self.ids) - 1) // self.seq_len  # the non-overlapping ones
        if self.windows < (1 if random else self.batch_size):
            raise ValueError(
                f"TokenWindows: {len(self.ids):,} ids make {self.windows} windows of "
                f"{self.seq_len} (+1 for the last target), fewer than a batch of "
                f"{self.batch_size}"
            )
        self._order: tuple[int, np.ndarray[Any, Any]] | None = None
        if parallel is not None:
            self._sharding()  # a batch that does not divide over the mesh: an AxisError now

    def __len__(self) -> int:
        if self.random and self.steps is not None:
            return self.steps
        return max(self.windows // self.batch_size, 1)

    def _starts(self, epoch: int, batch: int) -> np.ndarray[Any, Any]:
        """Where the windows of ``epoch``'s batch number ``batch`` start (one per row)."""
        b = self.batch_size
        if self.random:
            assert self.key is not None
            return seeded_rng(self.key, epoch, batch).integers(0, len(self.ids) - self.seq_len, b)
        if self._order is None or self._order[0] != epoch:
            order = np.arange(self.windows, dtype=np.int64)
            if self.key is not None:
                order = seeded_rng(self.key, epoch).permutation(order)
            self._order = (epoch, order)
        return self._order[1][batch * b : (batch + 1) * b] * self.seq_len

    def rows(self, starts: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The ids ``[len(starts), seq_len + 1]`` of the windows at ``starts`` (int32)."""
        index = np.asarray(starts)[:, None] + np.arange(self.seq_len + 1)
        return np.asarray(self.ids[index]).astype(np.int32)

    def epoch(self, epoch: int = 0, start: int = 0) -> Iterator[TokenWindow]:
        """The batches of ``epoch``, from batch number ``start``."""
        epoch = non_negative_int("TokenWindows.epoch", "epoch", epoch)
        start = non_negative_int("TokenWindows.epoch", "start", start)
        for n in range(start, len(self)):
            yield self._batch(epoch, n)

    def __iter__(self) -> Iterator[TokenWindow]:
        return self.epoch(0)

    def _batch(self, epoch: int, n: int) -> TokenWindow:
        """``(ids, targets)`` of ``epoch``'s batch number ``n``."""
        starts = self._starts(epoch, n)
        if self.parallel is not None:
            return self._global(starts)
        chunk = self.rows(starts)
        return Tensor(jnp.asarray(chunk[:, :-1]), self.axes), Tensor(
            jnp.asarray(chunk[:, 1:]), self.axes
        )

    def _sharding(self) -> Any:
        assert self.parallel is not None
        t = TensorType(I32, self.axes, (self.batch_size, self.seq_len))
        return self.parallel.batch_sharding(t)

    def _global(self, starts: np.ndarray[Any, Any]) -> TokenWindow:
        """A batch as global arrays: each process reads only its devices' rows."""
        sharding, shape = self._sharding(), (self.batch_size, self.seq_len)
        read: dict[tuple[int, int, int], np.ndarray[Any, Any]] = {}

        def block(index: tuple[slice, ...] | None, shift: int) -> np.ndarray[Any, Any]:
            full = (*(index or ()), slice(None), slice(None))
            rows, cols = full[0], full[1]
            at = rows.indices(self.batch_size)
            if at not in read:
                read[at] = self.rows(starts[rows])
            part: np.ndarray[Any, Any] = read[at][:, shift : shift + self.seq_len][:, cols]
            return part

        x = jax.make_array_from_callback(shape, sharding, lambda i: block(i, 0))
        y = jax.make_array_from_callback(shape, sharding, lambda i: block(i, 1))
        return Tensor(x, self.axes), Tensor(y, self.axes)
