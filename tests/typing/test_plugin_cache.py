"""The plugin's cache key covers every module whose rules it runs: a change to an op's
``infer`` (ops/), a layer's check (nn/) or a loss's rule (train/) re-checks the user's
modules, never replays a verdict cached under the old rule."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy is not installed: pip install -e '.[dev]'")

from axjax.mypy._calls import fingerprint_files  # noqa: E402


def test_the_cache_key_hashes_every_module_the_plugin_can_run() -> None:
    for name in ("axjax", "axjax.nn", "axjax.train", "axjax.models", "axjax.mypy._plugin"):
        importlib.import_module(name)
    hashed = {p.resolve() for p in fingerprint_files()}
    loaded = {
        Path(m.__file__).resolve()
        for name, m in list(sys.modules.items())
        if name.split(".")[0] == "axjax" and getattr(m, "__file__", None)
    }
    assert {p.parent.name for p in loaded} >= {"ops", "nn", "core", "train", "mypy"}
    missing = sorted(str(p) for p in loaded - hashed)
    assert not missing, f"the plugin's cache key misses modules it runs: {missing}"
