"""Fetching data files: mirrors in order, a deadline per file, a progress bar, sha256 checked
before the rename.

Each attempt (one file from one mirror) runs under a deadline: connecting, waiting for the
headers, every read and the whole transfer must finish within ``timeout`` seconds
(``timeout=`` or ``$AXJAX_DOWNLOAD_TIMEOUT``; default 120 s), and a mirror that sends
nothing for ``min(timeout, 15)`` seconds is abandoned as stalled. The network is read by a
worker thread; the calling thread owns the clock and the ``.part`` file, so it gives up on
time however the server behaves, and deletes the partial file before trying the next mirror.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, NoReturn

from ..core._internal import Feature, non_negative_int, positive_float
from ._idx import DataError

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = [
    "DATA_ENV",
    "DEFAULT_TIMEOUT",
    "TIMEOUT_ENV",
    "download",
    "download_timeout",
    "fetch",
    "sha256_of",
]

_CHUNK = 1 << 16
TIMEOUT_ENV = "AXJAX_DOWNLOAD_TIMEOUT"
#: the folder of the data sets (``find_dataset``'s second place, after ``data_dir``)
DATA_ENV = "AXJAX_DATA"
DEFAULT_TIMEOUT = 120.0
_STALL = 15.0  # seconds without a byte after which a mirror counts as stalled
_BAR = Feature("tqdm", "ax.train.download")


def sha256_of(path: str | os.PathLike[str]) -> str:
    """The hex sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download_timeout(timeout: float | None = None) -> float:
    """The deadline in seconds for one file from one mirror.

    ``timeout`` when given, else ``$AXJAX_DOWNLOAD_TIMEOUT``, else 120 s.

    Raises:
        ValueError: ``timeout`` is not a positive, finite number of seconds.
        DataError: ``$AXJAX_DOWNLOAD_TIMEOUT`` is set but not such a number.
    """
    if timeout is not None:
        try:
            return positive_float("download", "timeout", timeout)
        except (TypeError, ValueError):
            raise ValueError(
                f"download timeout must be a positive number of seconds, got {timeout!r}"
            ) from None
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise DataError(
            f"${TIMEOUT_ENV} must be a positive number of seconds (such as 300), "
            f"got {text!r}; fix or unset it"
        )
    return value


@dataclasses.dataclass(frozen=True)
class _Msg:
    """What the reader thread sends: the length when connected, a block, the end, or an error."""

    kind: Literal["open", "data", "error"]
    data: bytes = b""
    length: int | None = None
    error: BaseException | None = None


class _MirrorFailed(Exception):
    """This mirror did not deliver the file; the message says why (without the URL)."""

    def __init__(self, reason: str, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


def _reason(e: BaseException) -> str:
    if isinstance(e, urllib.error.HTTPError):
        return f"HTTP {e.code} {e.reason}"
    if isinstance(e, urllib.error.URLError):
        return str(e.reason)
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _reader(url: str, socket_timeout: float, out: queue.Queue[_Msg], stop: threading.Event) -> None:
    """Read ``url`` block by block into ``out`` until the end, an error, or ``stop``."""
    try:
        with urllib.request.urlopen(url, timeout=socket_timeout) as response:  # noqa: S310
            response_any: Any = response
            header: object = response_any.headers.get("Content-Length")
            length = int(header) if isinstance(header, str) and header.isdigit() else None
            out.put(_Msg("open", length=length))
            # read1: at most one system call per block, so a trickling server cannot hold
            # one read open past the stall limit
            read: Callable[[int], bytes] = getattr(response_any, "read1", response_any.read)
            while not stop.is_set():
                block = read(_CHUNK)
                out.put(_Msg("data", data=block))
                if not block:
                    return
    except Exception as e:  # noqa: BLE001 - every failure of a mirror is reported, none raised
        out.put(_Msg("error", error=e))


@dataclasses.dataclass
class _Attempt:
    """The clock and counters of one attempt: the deadline, the stall limit, bytes so far."""

    deadline: float
    stall: float
    end: float
    last: float
    got: int = 0
    length: int | None = None

    def late(self, now: float) -> _MirrorFailed:
        """The failure for a mirror that missed the deadline or stalled, as of ``now``."""
        if now >= self.end or self.last + self.stall >= self.end:
            where = (
                f"{self.got} bytes received, the last {now - self.last:.1f} s ago"
                if self.got
                else "0 bytes received"
            )
            what = "no answer" if self.length is None else f"not finished ({where})"
            return _MirrorFailed(f"{what} within the {self.deadline:g} s deadline", timed_out=True)
        what = "no answer" if self.length is None else f"stalled after {self.got} bytes"
        return _MirrorFailed(
            f"{what}: nothing received for {self.stall:g} s (a stalled "
            f"mirror is left after {self.stall:g} s; the deadline is "
            f"{self.deadline:g} s)",
            timed_out=True,
        )

    def wait(self, messages: queue.Queue[_Msg]) -> _Msg:
        """The reader's next message, waited for until the deadline or the stall limit."""
        now = time.monotonic()
        if now >= self.end:
            raise self.late(now)
        try:
            msg = messages.get(timeout=max(0.0, min(self.end, self.last + self.stall) - now))
        except queue.Empty:
            raise self.late(time.monotonic()) from None
        self.last = time.monotonic()
        return msg


def _receive(
    messages: queue.Queue[_Msg], attempt: _Attempt, out: BinaryIO, bar: tqdm[NoReturn]
) -> str:
    """Write the reader's blocks to ``out`` until the end of the file; return their sha256.

    Raises:
        _MirrorFailed: the reader failed, the mirror stalled or missed the deadline, or the
            connection ended before the announced length.
    """
    h = hashlib.sha256()
    while True:
        msg = attempt.wait(messages)
        if msg.kind == "error":
            assert msg.error is not None
            raise _MirrorFailed(_reason(msg.error))
        if msg.kind == "open":
            attempt.length = msg.length
            if msg.length is not None:
                bar.total = msg.length
                bar.refresh()
            continue
        if not msg.data:
            break
        out.write(msg.data)
        h.update(msg.data)
        attempt.got += len(msg.data)
        bar.update(len(msg.data))
    if attempt.length is not None and attempt.got != attempt.length:
        raise _MirrorFailed(f"the connection ended after {attempt.got} of {attempt.length} bytes")
    return h.hexdigest()


def _fetch(url: str, dest: Path, size: int | None, progress: bool, deadline: float) -> str:
    """Stream ``url`` into ``dest`` within ``deadline`` seconds; return the sha256 written.

    Raises:
        _MirrorFailed: the mirror failed, stalled, or missed the deadline.
        OSError: ``dest`` could not be written (a local problem, not the mirror's).
    """
    _BAR.require()
    from tqdm import tqdm

    stall = min(deadline, _STALL)
    start = time.monotonic()
    attempt = _Attempt(deadline=deadline, stall=stall, end=start + deadline, last=start)
    messages: queue.Queue[_Msg] = queue.Queue()
    stop = threading.Event()
    # the reader's own socket timeout is a little longer than ours, so that we (not it)
    # notice a stall first, and it still ends by itself soon after we give up
    worker = threading.Thread(
        target=_reader, args=(url, stall + 1.0, messages, stop), name="axjax-download", daemon=True
    )
    try:
        with (
            open(dest, "wb") as out,
            tqdm(
                total=size,
                unit="B",
                unit_scale=True,
                desc=dest.name.removesuffix(".part"),
                disable=not progress,
                leave=False,
            ) as bar,
        ):
            worker.start()
            digest = _receive(messages, attempt, out, bar)
            out.flush()
            os.fsync(out.fileno())
    finally:
        stop.set()
    return digest


def _local_error(name: str, what: str, e: OSError) -> DataError:
    """The error for a local problem (not a mirror's) while downloading ``name``."""
    return DataError(
        f"Cannot download {name}: {what} ({e.strerror or e}); copy {name} into a "
        "writable folder and pass it as data_dir / --data-dir, or set AXJAX_DATA "
        "to it."
    )


def _install(
    url: str,
    part: Path,
    dest: Path,
    *,
    name: str,
    sha256: str,
    size: int | None,
    progress: bool,
    deadline: float,
) -> None:
    """Fetch ``url`` into ``part``, check its sha256 and rename it to ``dest``.

    ``part`` is deleted whatever goes wrong.

    Raises:
        _MirrorFailed: the mirror failed, missed the deadline or served other bytes.
        DataError: ``part`` could not be written or renamed (a local problem).
    """
    try:
        digest = _fetch(url, part, size, progress, deadline)
    except OSError as e:
        part.unlink(missing_ok=True)
        raise _local_error(name, f"writing {part} failed", e) from None
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    if digest != sha256:
        part.unlink(missing_ok=True)
        raise _MirrorFailed(f"served a file with sha256 {digest}, expected {sha256}")
    try:
        os.replace(part, dest)
    except OSError as e:
        part.unlink(missing_ok=True)
        raise _local_error(name, f"renaming {part} to {dest} failed", e) from None


def _no_mirror_error(
    name: str,
    folder: Path,
    failures: Sequence[str],
    timed_out: bool,
    deadline: float,
    looked_in: Sequence[Path] = (),
) -> DataError:
    """The error when no mirror served ``name``: each mirror's failure and what to do."""
    tried = "\n  ".join(failures) if failures else "(no mirrors given)"
    slow = (
        f"A mirror that times out may be down or the link slow: try another mirror "
        f"(mirrors=...), or allow more than {deadline:g} s per file with timeout= or "
        f"${TIMEOUT_ENV}.\n"
        if timed_out
        else ""
    )
    where = (
        "It was looked for in:\n  " + "\n  ".join(str(p) for p in looked_in) + "\n"
        if looked_in
        else ""
    )
    unset = "" if os.environ.get(DATA_ENV) else f" ({DATA_ENV} is not set)"
    return DataError(
        f"Could not download {name}:\n  {tried}\n{slow}{where}"
        f"If this machine is offline, copy {name} into {folder}, or set {DATA_ENV} to a "
        f"folder that holds it{unset}, or pass data_dir= (--data-dir in the examples)."
    )


def download(
    name: str,
    mirrors: Sequence[str],
    dest: str | os.PathLike[str],
    sha256: str,
    *,
    size: int | None = None,
    progress: bool = True,
    timeout: float | None = None,
) -> Path:
    """Download file ``name`` from the first mirror that serves it with the right checksum.

    Each mirror is a base URL (``https://host/mnist/``, ``file:///srv/mnist/``); the file
    is streamed to ``dest.part``, its sha256 compared with ``sha256``, then renamed to
    ``dest``. A mirror that fails, serves other bytes or misses the deadline is skipped,
    and its partial file deleted.

    Args:
        timeout: the deadline in seconds for this file from one mirror. Connecting, the
            headers, every read and the whole transfer must finish within it, and a mirror
            that sends nothing for ``min(timeout, 15)`` seconds counts as stalled. ``None``:
            ``$AXJAX_DOWNLOAD_TIMEOUT`` if set, else 120 s. Raise it for a slow link.

    Raises:
        DataError: no mirror worked (the message lists each mirror's failure and what to
            do), ``dest``'s folder cannot be written, or ``$AXJAX_DOWNLOAD_TIMEOUT`` is bad.
        ValueError: ``timeout`` is not a positive number of seconds.

    Example:
        >>> ax.train.download("t10k-labels-idx1-ubyte.gz", MNIST.mirrors, "data/t10k...gz",
        ...                   sha256=MNIST.files["t10k-labels-idx1-ubyte.gz"][0], timeout=30)
    """
    return fetch(name, mirrors, dest, sha256, size=size, progress=progress, timeout=timeout)


def fetch(
    name: str,
    mirrors: Sequence[str],
    dest: str | os.PathLike[str],
    sha256: str,
    *,
    size: int | None = None,
    progress: bool = True,
    timeout: float | None = None,
    looked_in: Sequence[Path] = (),
) -> Path:
    """:func:`download`, whose failure also lists ``looked_in``: the folders
    ``find_dataset`` searched before downloading."""
    deadline = download_timeout(timeout)
    size = None if size is None else non_negative_int("download", "size", size)
    dest = Path(dest)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _local_error(name, f"the folder {dest.parent} cannot be created", e) from None
    part = dest.with_name(dest.name + ".part")
    failures: list[str] = []
    timed_out = False
    for base in mirrors:
        url = base if base.endswith(name) else base.rstrip("/") + "/" + name
        try:
            _install(
                url,
                part,
                dest,
                name=name,
                sha256=sha256,
                size=size,
                progress=progress,
                deadline=deadline,
            )
        except _MirrorFailed as e:
            failures.append(f"{url}: {e.reason}")
            timed_out = timed_out or e.timed_out
            continue
        return dest
    raise _no_mirror_error(name, dest.parent, failures, timed_out, deadline, looked_in)
