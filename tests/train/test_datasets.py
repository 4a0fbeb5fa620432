"""Finding, downloading and checking MNIST-style data sets (never touching the network)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

import axjax as ax
from axjax.train import DataError, DatasetSpec, load_dataset, write_idx
from tests.conftest import data_dir


def _tiny_files(folder: Path, n: int = 6) -> dict[str, tuple[str, int]]:
    """Write a small, valid train/test split; return its {name: (sha256, size)} table."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    table = {}
    for prefix in ("train", "t10k"):
        write_idx(
            folder / f"{prefix}-images-idx3-ubyte.gz",
            rng.integers(0, 256, (n, 28, 28), dtype=np.uint8),
        )
        write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", np.arange(n, dtype=np.uint8) % 10)
    for p in folder.iterdir():
        table[p.name] = (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_size)
    return table


def _spec(table: dict[str, tuple[str, int]], mirrors: tuple[str, ...] = ()) -> DatasetSpec:
    return DatasetSpec("tiny", "Tiny", table, mirrors, tuple(str(i) for i in range(10)))


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """No AXJAX_DATA, and a private cache folder."""
    monkeypatch.delenv("AXJAX_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


@pytest.fixture
def server(tmp_path):
    """An HTTP server on 127.0.0.1 serving tmp_path/served."""
    root = tmp_path / "served"
    root.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def test_real_mnist_and_fashion():
    mnist = ax.train.mnist("test", data_dir=data_dir("mnist"), download_missing=False)
    assert len(mnist) == 10000 and mnist.images.shape == (10000, 28, 28)
    assert mnist.labels.dtype == np.uint8 and mnist.name == "MNIST test"
    fashion = ax.train.fashion_mnist(
        "test", data_dir=data_dir("fashion-mnist").parent, download_missing=False
    )
    assert len(fashion) == 10000 and fashion.classes[9] == "Ankle boot"
    # the two data sets are different files, and each is checked against its own hashes
    assert not np.array_equal(mnist.images[:10], fashion.images[:10])


def test_mnist_files_are_not_fashion(tmp_path):
    with pytest.raises(
        DataError,
        match="t10k-images-idx3-ubyte.gz is the MNIST file, not the "
        "Fashion-MNIST one: point data_dir at a folder holding the Fashion-MNIST",
    ):
        ax.train.load_dataset(
            ax.train.FASHION_MNIST, "test", data_dir=data_dir("mnist"), download_missing=False
        )


def test_truncated_real_file_is_caught(tmp_path):
    folder = tmp_path / "mnist"
    folder.mkdir()
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        shutil.copy(data_dir("mnist") / name, folder / name)
    cut = folder / "t10k-images-idx3-ubyte.gz"
    cut.write_bytes(cut.read_bytes()[:100_000])
    with pytest.raises(
        DataError,
        match=r"is truncated: 100000 bytes, but the MNIST file has "
        r"1648877. Delete it",
    ):
        ax.train.mnist("test", data_dir=folder, download_missing=False)
    # without the checksum the IDX reader still refuses it
    with pytest.raises(DataError, match="damaged gzip file"):
        load_dataset(ax.train.MNIST, "test", data_dir=folder, download_missing=False, verify=False)


def test_corrupt_byte_is_caught(isolated):
    table = _tiny_files(isolated / "d")
    path = isolated / "d" / "train-labels-idx1-ubyte.gz"
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(
        DataError, match="train-labels-idx1-ubyte.gz has sha256 .* but the Tiny file has"
    ):
        load_dataset(_spec(table), "train", data_dir=isolated / "d", download_missing=False)


def test_search_order_data_dir_env_cache(isolated, monkeypatch):
    table = _tiny_files(isolated / "src")
    spec = _spec(table)
    # 1. the cache, in a folder named after the data set
    shutil.copytree(isolated / "src", isolated / "cache" / "axjax" / "tiny")
    assert (
        ax.train.find_dataset(spec, download_missing=False) == isolated / "cache" / "axjax" / "tiny"
    )
    # 2. AXJAX_DATA wins over the cache (the files directly inside it)
    monkeypatch.setenv("AXJAX_DATA", str(isolated / "src"))
    assert ax.train.find_dataset(spec, download_missing=False) == isolated / "src"
    # 3. data_dir wins over both
    shutil.copytree(isolated / "src", isolated / "mine" / "tiny")
    assert (
        ax.train.find_dataset(spec, isolated / "mine", download_missing=False)
        == isolated / "mine" / "tiny"
    )
    ds = load_dataset(spec, "test", data_dir=isolated / "mine", download_missing=False)
    assert len(ds) == 6 and ds.labels.tolist() == [0, 1, 2, 3, 4, 5]


def test_missing_offline_error_says_where_to_put_files(isolated):
    spec = _spec(_tiny_files(isolated / "src"))
    with pytest.raises(
        DataError,
        match=r"(?s)Tiny files train-images-idx3-ubyte.gz, "
        r"train-labels-idx1-ubyte.gz not found. Looked in:.*cache/axjax/tiny",
    ):
        load_dataset(spec, "train", download_missing=False)


def test_download_from_local_http_server(isolated, server):
    root, url = server
    table = _tiny_files(root)
    spec = _spec(table, mirrors=(url + "missing/", url))  # the first mirror 404s
    ds = load_dataset(spec, "train", progress=False)
    target = isolated / "cache" / "axjax" / "tiny"
    assert len(ds) == 6
    assert sorted(p.name for p in target.iterdir()) == [
        "train-images-idx3-ubyte.gz",
        "train-labels-idx1-ubyte.gz",
    ]
    # a second load finds the cached files without the server
    ds2 = load_dataset(_spec(table), "train", download_missing=False)
    np.testing.assert_array_equal(ds.images, ds2.images)


def test_download_into_data_dir_with_file_url(isolated):
    table = _tiny_files(isolated / "served")
    spec = _spec(table, mirrors=((isolated / "served").as_uri() + "/",))
    ds = load_dataset(spec, "test", data_dir=isolated / "given", progress=False)
    assert len(ds) == 6 and (isolated / "given" / "t10k-images-idx3-ubyte.gz").is_file()


def test_download_wrong_checksum_is_rejected(isolated, server):
    root, url = server
    table = _tiny_files(root)
    bad = dict(table)
    bad["train-images-idx3-ubyte.gz"] = ("0" * 64, table["train-images-idx3-ubyte.gz"][1])
    with pytest.raises(
        DataError,
        match=r"(?s)Could not download train-images-idx3-ubyte.gz:.*"
        r"served a file with sha256 [0-9a-f]{64}, expected 0{64}.*If this machine "
        r"is offline, copy train-images-idx3-ubyte.gz into .*cache/axjax/tiny",
    ):
        load_dataset(_spec(bad, mirrors=(url,)), "train", progress=False)
    leftovers = list((isolated / "cache" / "axjax" / "tiny").glob("train-images*"))
    assert leftovers == []  # neither the bad file nor its .part stays behind


def test_download_unreachable_mirror(isolated):
    spec = _spec(_tiny_files(isolated / "src"), mirrors=("http://127.0.0.1:9/",))
    with pytest.raises(
        DataError,
        match=r"(?s)http://127.0.0.1:9/train-images-idx3-ubyte.gz: "
        r".*refused.*If this machine is offline",
    ):
        load_dataset(spec, "train", progress=False)


def test_the_download_failure_names_every_place_and_the_variable(isolated, monkeypatch):
    """Issue 33: the failure lists every folder searched (data_dir, $AXJAX_DATA, the cache,
    each as given and with /<name>) and names AXJAX_DATA."""
    spec = _spec(_tiny_files(isolated / "src"), mirrors=("http://127.0.0.1:9/",))
    cache = isolated / "cache" / "axjax"
    with pytest.raises(DataError) as e:
        load_dataset(spec, "train", data_dir=isolated / "given", progress=False)
    looked = [isolated / "given", isolated / "given" / "tiny", cache, cache / "tiny"]
    assert "It was looked for in:\n  " + "\n  ".join(map(str, looked)) + "\n" in str(e.value)
    assert str(e.value).endswith(
        f"If this machine is offline, copy train-images-idx3-ubyte.gz into {isolated / 'given'}"
        ", or set AXJAX_DATA to a folder that holds it (AXJAX_DATA is not set), or pass "
        "data_dir= (--data-dir in the examples)."
    )
    monkeypatch.setenv("AXJAX_DATA", str(isolated / "env"))
    with pytest.raises(DataError) as e:
        load_dataset(spec, "train", progress=False)
    looked = [isolated / "env", isolated / "env" / "tiny", cache, cache / "tiny"]
    assert "It was looked for in:\n  " + "\n  ".join(map(str, looked)) + "\n" in str(e.value)
    assert "or set AXJAX_DATA to a folder that holds it, or pass data_dir=" in str(e.value)


def test_no_folder_relative_to_the_working_directory_is_searched(isolated, monkeypatch):
    """The one lookup: argument, $AXJAX_DATA, the cache. A data folder beside the working
    directory (as ../shared/data is beside a checkout) is never found by itself."""
    table = _tiny_files(isolated / "work" / "data" / "tiny")
    shutil.copytree(isolated / "work" / "data", isolated / "shared" / "data")
    monkeypatch.chdir(isolated / "work")
    with pytest.raises(DataError) as e:
        ax.train.find_dataset(_spec(table), download_missing=False)
    cache = isolated / "cache" / "axjax"
    assert f"Looked in:\n  {cache}\n  {cache / 'tiny'}\n" in str(e.value)
    assert "(AXJAX_DATA is not set)" in str(e.value)
    # given explicitly, as the examples and tests do, it is found
    found = ax.train.find_dataset(
        _spec(table), isolated / "shared" / "data", download_missing=False
    )
    assert found == isolated / "shared" / "data" / "tiny"


def test_bad_split_and_mismatched_lengths():
    with pytest.raises(ValueError, match="split must be 'train' or 'test', got 'valid'"):
        load_dataset(ax.train.MNIST, "valid")  # type: ignore[arg-type]
    with pytest.raises(DataError, match="3 images but 2 labels"):
        ax.train.Dataset(np.zeros((3, 2, 2), np.uint8), np.zeros(2, np.uint8))
