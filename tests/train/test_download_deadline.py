"""Download deadlines: mirrors on 127.0.0.1 that accept and never answer, stall mid-body,
trickle forever or hang up early must fail on time, fall through to the next mirror and leave
no partial file. Every server here stops by itself after a few seconds."""

from __future__ import annotations

import functools
import hashlib
import http.server
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import axjax as ax
from axjax.train import DataError, DatasetSpec, load_dataset

NAME = "blob.bin"
BODY = bytes(range(256)) * 64
SHA = hashlib.sha256(BODY).hexdigest()
MARGIN = 1.5  # seconds allowed beyond the deadline (thread start-up, a loaded CI machine)


class _RawServer:
    """Accepts connections on 127.0.0.1 and hands each to ``handle`` in its own thread;
    closes everything after ``stop()`` or ``lifetime`` seconds, whichever comes first."""

    def __init__(
        self, handle: Callable[[socket.socket, threading.Event], None], lifetime: float = 8.0
    ) -> None:
        self.handle = handle
        self.stopped = threading.Event()
        self.deadline = time.monotonic() + lifetime
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.conns: list[socket.socket] = []
        self.accepted = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/"

    def _serve(self) -> None:
        while not self.stopped.is_set() and time.monotonic() < self.deadline:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            self.accepted += 1
            self.conns.append(conn)
            threading.Thread(target=self._run, args=(conn,), daemon=True).start()
        self.stopped.set()
        for c in self.conns:
            c.close()
        self.sock.close()

    def _run(self, conn: socket.socket) -> None:
        try:
            self.handle(conn, self.stopped)
        except OSError:
            pass

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=2)


def _silent(conn: socket.socket, stopped: threading.Event) -> None:
    """Accept and never answer (the request is not even read)."""


def _read_request(conn: socket.socket) -> None:
    conn.settimeout(2)
    data = b""
    while b"\r\n\r\n" not in data:
        block = conn.recv(4096)
        if not block:
            return
        data += block


def _headers_then_stall(conn: socket.socket, stopped: threading.Event) -> None:
    _read_request(conn)
    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY[:1000])


def _trickle(conn: socket.socket, stopped: threading.Event) -> None:
    """One byte every 50 ms: never stalled, never done."""
    _read_request(conn)
    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BODY))
    for b in BODY:
        if stopped.wait(0.05):
            return
        conn.sendall(bytes([b]))


def _hang_up_early(conn: socket.socket, stopped: threading.Event) -> None:
    _read_request(conn)
    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY[:10])
    conn.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def raw() -> Iterator[Callable[[Callable[[socket.socket, threading.Event], None]], _RawServer]]:
    servers: list[_RawServer] = []

    def make(handle: Callable[[socket.socket, threading.Event], None]) -> _RawServer:
        servers.append(_RawServer(handle))
        return servers[-1]

    yield make
    for s in servers:
        s.stop()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def good(tmp_path: Path) -> Iterator[str]:
    """A working mirror serving BODY as blob.bin."""
    root = tmp_path / "served"
    root.mkdir()
    (root / NAME).write_bytes(BODY)
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root))
    )
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize("behaviour", [_silent, _headers_then_stall, _trickle])
def test_a_stuck_mirror_misses_the_deadline_and_the_next_one_is_used(
    tmp_path, raw, good, behaviour
):
    stuck = raw(behaviour)
    dest = tmp_path / "data" / NAME
    t0 = time.monotonic()
    got = ax.train.download(NAME, [stuck.url, good], dest, SHA, progress=False, timeout=1.0)
    elapsed = time.monotonic() - t0
    assert got == dest and dest.read_bytes() == BODY
    assert stuck.accepted == 1
    assert 0.9 < elapsed < 1.0 + MARGIN
    assert _leftovers(dest.parent) == [NAME]  # no .part


def test_every_mirror_stuck_fails_on_time_with_a_clear_message(tmp_path, raw):
    silent, stalled, trickle = raw(_silent), raw(_headers_then_stall), raw(_trickle)
    dest = tmp_path / "data" / NAME
    t0 = time.monotonic()
    with pytest.raises(DataError) as info:
        ax.train.download(
            NAME, [silent.url, stalled.url, trickle.url], dest, SHA, progress=False, timeout=0.6
        )
    elapsed = time.monotonic() - t0
    assert elapsed < 3 * 0.6 + MARGIN
    msg = str(info.value)
    assert msg.startswith(f"Could not download {NAME}:\n")
    assert f"{silent.url}{NAME}: no answer within the 0.6 s deadline\n" in msg
    assert re.search(
        rf"{stalled.url}{NAME}: not finished \(1000 bytes received, the last "
        r"0\.[4-6] s ago\) within the 0.6 s deadline\n",
        msg,
    ), msg
    assert re.search(
        rf"{trickle.url}{NAME}: not finished \(\d+ bytes received, the last "
        r"0\.[01] s ago\) within the 0.6 s deadline\n",
        msg,
    ), msg
    assert (
        "try another mirror (mirrors=...), or allow more than 0.6 s per file with "
        "timeout= or $AXJAX_DOWNLOAD_TIMEOUT"
    ) in msg
    assert f"If this machine is offline, copy {NAME} into {dest.parent}" in msg
    assert "--data-dir" in msg and "AXJAX_DATA" in msg
    assert _leftovers(dest.parent) == []


def test_a_mirror_that_hangs_up_early_is_skipped(tmp_path, raw, good):
    short = raw(_hang_up_early)
    dest = tmp_path / NAME
    with pytest.raises(
        DataError,
        match=rf"{short.url}{NAME}: the connection ended after 10 of "
        rf"{len(BODY)} bytes",
    ):
        ax.train.download(NAME, [short.url], dest, SHA, progress=False, timeout=2)
    assert _leftovers(tmp_path) == ["served"]  # the good mirror's folder, no .part
    ax.train.download(NAME, [short.url, good], dest, SHA, progress=False, timeout=2)
    assert dest.read_bytes() == BODY and _leftovers(tmp_path) == [NAME, "served"]


def test_environment_variable_sets_the_deadline_of_dataset_loading(tmp_path, raw, monkeypatch):
    monkeypatch.delenv("AXJAX_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("AXJAX_DOWNLOAD_TIMEOUT", "0.5")
    silent = raw(_silent)
    spec = DatasetSpec(
        "tiny",
        "Tiny",
        {
            "train-images-idx3-ubyte.gz": ("0" * 64, 10),
            "train-labels-idx1-ubyte.gz": ("0" * 64, 10),
        },
        (silent.url,),
        ("0", "1"),
    )
    t0 = time.monotonic()
    with pytest.raises(
        DataError,
        match=r"train-images-idx3-ubyte.gz: no answer within the "
        r"0.5 s deadline",
    ):
        load_dataset(spec, "train", progress=False)
    assert time.monotonic() - t0 < 0.5 + MARGIN
    # the keyword wins over the variable
    t0 = time.monotonic()
    with pytest.raises(DataError, match=r"no answer within the 0.3 s deadline"):
        load_dataset(spec, "train", progress=False, timeout=0.3)
    assert time.monotonic() - t0 < 0.3 + MARGIN
    assert _leftovers(tmp_path / "cache" / "axjax" / "tiny") == []


def test_bad_deadlines_are_refused_before_any_connection(tmp_path, raw, monkeypatch):
    silent = raw(_silent)
    monkeypatch.setenv("AXJAX_DOWNLOAD_TIMEOUT", "soon")
    with pytest.raises(
        DataError,
        match=r"\$AXJAX_DOWNLOAD_TIMEOUT must be a positive number "
        r"of seconds \(such as 300\), got 'soon'; fix or unset it",
    ):
        ax.train.download(NAME, [silent.url], tmp_path / NAME, SHA, progress=False)
    for bad in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(
            ValueError, match="download timeout must be a positive number of seconds, got"
        ):
            ax.train.download(NAME, [silent.url], tmp_path / NAME, SHA, progress=False, timeout=bad)
    assert silent.accepted == 0 and _leftovers(tmp_path) == []


def test_an_unwritable_destination_is_a_data_error(tmp_path, good):
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(
        DataError,
        match=rf"Cannot download {NAME}: the folder .*file/sub cannot "
        r"be created \(.*\); copy blob.bin into a writable folder and pass it as "
        r"data_dir / --data-dir, or set AXJAX_DATA to it",
    ):
        ax.train.download(NAME, [good], tmp_path / "file" / "sub" / NAME, SHA, progress=False)


def test_a_stall_is_noticed_before_a_long_deadline(tmp_path, raw, good, monkeypatch):
    from axjax.train import _download

    monkeypatch.setattr(_download, "_STALL", 0.4)  # 15 s in real use
    silent, stalled = raw(_silent), raw(_headers_then_stall)
    dest = tmp_path / "data" / NAME
    t0 = time.monotonic()
    with pytest.raises(DataError) as info:
        ax.train.download(NAME, [silent.url, stalled.url], dest, SHA, progress=False, timeout=30)
    assert time.monotonic() - t0 < 2 * 0.4 + MARGIN
    msg = str(info.value)
    assert (
        f"{silent.url}{NAME}: no answer: nothing received for 0.4 s (a stalled mirror is "
        "left after 0.4 s; the deadline is 30 s)"
    ) in msg
    assert f"{stalled.url}{NAME}: stalled after 1000 bytes: nothing received for 0.4 s" in msg
    assert "allow more than 30 s per file with timeout= or $AXJAX_DOWNLOAD_TIMEOUT" in msg
    assert _leftovers(dest.parent) == []
    ax.train.download(NAME, [silent.url, good], dest, SHA, progress=False, timeout=30)
    assert _leftovers(dest.parent) == [NAME]
