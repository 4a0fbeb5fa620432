"""``examples/<name>/train.py`` loaded as a module (for the parallel tests and checks)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def load_example(name: str) -> Any:
    """``examples/<name>/train.py`` as a module."""
    spec = importlib.util.spec_from_file_location(
        f"{name}_train", ROOT / "examples" / name / "train.py"
    )
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example  # dataclasses look their module up there
    spec.loader.exec_module(example)
    return example
