"""Fetching data files: mirrors in order, a progress bar, sha256 checked before the rename."""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from ._idx import DataError

__all__ = ["download", "sha256_of"]

_CHUNK = 1 << 16


def sha256_of(path: str | os.PathLike[str]) -> str:
    """The hex sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fetch(url: str, dest: Path, size: int | None, progress: bool, timeout: float) -> str:
    """Stream ``url`` into ``dest``; return the sha256 of what was written."""
    h = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310
        total = response.headers.get("Content-Length") if hasattr(response, "headers") else None
        total = int(total) if total else size
        with (
            open(dest, "wb") as out,
            tqdm(total=total, unit="B", unit_scale=True, desc=dest.name.removesuffix(".part"),
                 disable=not progress, leave=False) as bar,
        ):
            for block in iter(lambda: response.read(_CHUNK), b""):
                out.write(block)
                h.update(block)
                bar.update(len(block))
            out.flush()
            os.fsync(out.fileno())
    return h.hexdigest()


def download(
    name: str,
    mirrors: Sequence[str],
    dest: str | os.PathLike[str],
    sha256: str,
    *,
    size: int | None = None,
    progress: bool = True,
    timeout: float = 60.0,
) -> Path:
    """Download file ``name`` from the first mirror that serves it with the right checksum.

    Each mirror is a base URL (``https://host/mnist/``, ``file:///srv/mnist/``); the file
    is streamed to ``dest.part``, its sha256 compared with ``sha256``, then renamed to
    ``dest``. A mirror that fails or serves other bytes is skipped.

    Raises:
        DataError: no mirror worked; the message lists each mirror's failure.

    Example:
        >>> ax.train.download("t10k-labels-idx1-ubyte.gz", MNIST.mirrors, "data/t10k...gz",
        ...                   sha256=MNIST.files["t10k-labels-idx1-ubyte.gz"][0])
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    failures: list[str] = []
    for base in mirrors:
        url = base if base.endswith(name) else base.rstrip("/") + "/" + name
        try:
            digest = _fetch(url, part, size, progress, timeout)
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", None) or e
            failures.append(f"{url}: {reason}")
            part.unlink(missing_ok=True)
            continue
        if digest != sha256:
            failures.append(f"{url}: served a file with sha256 {digest}, expected {sha256}")
            part.unlink(missing_ok=True)
            continue
        os.replace(part, dest)
        return dest
    tried = "\n  ".join(failures) if failures else "(no mirrors given)"
    raise DataError(
        f"Could not download {name}:\n  {tried}\n"
        f"If this machine is offline, copy {name} into {dest.parent} "
        "(or pass data_dir / --data-dir, or set AXJAX_DATA to a folder that holds it)."
    )
