"""Run every feature of axjax that needs an optional module, with that module made
unimportable, and print one JSON line per feature: did it fail or degrade as declared?

Run by tests/test_optional.py in a fresh interpreter::

    python tests/_optional_scenarios.py MODULE[,MODULE...] TMPDIR [--mutate]

The modules are blocked before axjax is imported (an import of one of them, or of a
submodule, raises ``ModuleNotFoundError`` as if it were not installed). Each feature in
``axjax.core._optional.FEATURES`` whose dependency is blocked runs its scenario below:

- ``missing="raise"``: the scenario must raise ``ImportError`` whose message is the
  feature's (it names the feature, the package and the ``pip install`` command);
- ``missing="warn"``: the scenario runs twice and must finish, with exactly one
  ``OptionalDependencyWarning`` carrying that message, and pass its own checks.

``--mutate`` first switches the mechanism off (the bare ``ImportError`` of the import, no
warning): every feature must then be reported as failing.
"""

from __future__ import annotations

import importlib
import importlib.abc
import json
import pkgutil
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any


class _Block(importlib.abc.MetaPathFinder):
    """Make ``modules`` (and their submodules) unimportable, as if not installed."""

    def __init__(self, modules: Sequence[str]) -> None:
        self.tops = {m.split(".")[0] for m in modules}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name.split(".")[0] in self.tops:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None


def _tiny_fit(tmp: Path, **kw: Any) -> Any:
    import jax
    import numpy as np
    import optax

    import axjax as ax
    from tests.train.models import TinyMLP, classify

    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 6)).astype(np.float32)
    y = np.argmax(x @ rng.normal(size=(6, 3)), axis=1).astype(np.uint8)
    data = ax.train.Loader(ax.train.Dataset(x, y, name="synthetic"), 16)
    model = TinyMLP(jax.random.key(0), n_in=6, n_hidden=4, n_out=3)
    return ax.train.fit(model, optax.sgd(0.1), classify, data, epochs=2, **kw)


def _graph_png(tmp: Path) -> None:
    import axjax as ax
    from tests.axes import Batch, In, Out

    x = ax.Input(ax.F32, Batch, In, sizes={In: 2}, name="x")
    w = ax.Param(ax.ones((2, 1), In, Out), name="w")
    ax.Graph(ax.contract(x, w)).save(tmp / "graph.png", engine="builtin")


def _plot_history(tmp: Path) -> None:
    import axjax as ax

    ax.train.plot_history([{"step": 1, "train_loss": 1.0}], tmp / "curves.png")


def _fit_curves(tmp: Path) -> None:
    for run in ("a", "b"):  # the warning comes once per process, however many runs
        _tiny_fit(tmp, logdir=tmp / run, progress=False)
        files = sorted(p.name for p in (tmp / run).iterdir() if p.name != "tensorboard")
        assert files == ["metrics.csv", "metrics.jsonl"], f"{run}: wrote {files}"


def _tensorboard_logger(tmp: Path) -> None:
    import axjax as ax

    ax.train.TensorBoardLogger(tmp / "tb")


def _fit_tensorboard(tmp: Path) -> None:
    logdir = tmp / f"run{len(list(tmp.glob('run*')))}"  # the scenario runs twice: one warning
    _tiny_fit(tmp, logdir=logdir, progress=False)
    assert (logdir / "metrics.jsonl").is_file() and not (logdir / "tensorboard").exists()


def _sharded(tmp: Path) -> None:
    import axjax as ax
    from tests.axes import Batch

    tree = {"w": ax.zeros((2,), Batch)}
    _expect_raise(lambda: ax.train.save_sharded(tmp / "s", tree), "save_sharded")
    (tmp / "old" / "manifest").mkdir(parents=True)  # a folder that looks saved
    _expect_raise(lambda: ax.train.read_sharded_manifest(tmp / "old"), "read_sharded_manifest")
    ax.train.load_sharded(tmp / "old", tree)


def _checkpoints_sharded(tmp: Path) -> None:
    import axjax as ax

    ax.train.Checkpoints(tmp / "ckpt", sharded=True)


def _save_safetensors(tmp: Path) -> None:
    import axjax as ax
    from tests.axes import Batch

    ax.nn.save_safetensors({"w": ax.zeros((2,), Batch)}, tmp / "m.safetensors")


def _load_safetensors(tmp: Path) -> None:
    import axjax as ax
    from tests.axes import Batch

    ax.nn.load_safetensors({"w": ax.zeros((2,), Batch)}, tmp / "m.safetensors")


def _load_hf(tmp: Path) -> None:
    from axjax.models import gpt2, load_weights

    load_weights(tmp, {}, gpt2.TABLE, layers=0)


def _save_hf(tmp: Path) -> None:
    from axjax.models import Table, save_weights

    save_weights(tmp, {}, Table("none", ()), layers=0)


def _gpt2_fixture_model() -> Any:
    """The GPT-2 fixture's architecture with fresh weights (no safetensors read)."""
    import jax

    from axjax.models import gpt2, read_config

    fixture = Path(__file__).resolve().parent / "models" / "fixtures" / "gpt2"
    return gpt2.GPT2(read_config(fixture, gpt2.GPT2Config, gpt2.TABLE), key=jax.random.key(0))


def _load_peft(tmp: Path) -> None:
    from axjax.models import load_peft

    fixture = Path(__file__).resolve().parent / "models" / "fixtures" / "peft-gpt2-mlp"
    load_peft(_gpt2_fixture_model(), fixture)


def _save_peft(tmp: Path) -> None:
    import jax

    import axjax as ax
    from axjax.models import save_peft

    tuned = ax.nn.lora(_gpt2_fixture_model(), where="**.fc", rank=2, key=jax.random.key(0))
    save_peft(tuned, tmp / "adapter")


def _load_tokenizer(tmp: Path) -> None:
    from axjax.models import gpt2, llama, load_tokenizer

    fixture = Path(__file__).resolve().parent / "models" / "fixtures" / "llama-kv2"
    _expect_raise(lambda: gpt2.tokenizer(tmp), "gpt2.tokenizer of an empty folder")
    _expect_raise(lambda: llama.tokenizer(fixture), "llama.tokenizer")
    load_tokenizer(fixture, pos=llama.Pos)


def _fit_progress(tmp: Path) -> None:
    _tiny_fit(tmp, progress=True)


def _download(tmp: Path) -> None:
    import axjax as ax

    (tmp / "mirror").mkdir()
    (tmp / "mirror" / "f.bin").write_bytes(b"x")
    ax.train.download(
        "f.bin", [(tmp / "mirror").as_uri() + "/"], tmp / "f.bin", "0" * 64, progress=False
    )


#: one scenario per feature, by the feature's name (a feature without one is a failure)
SCENARIOS: dict[str, Callable[[Path], None]] = {
    'Graph.save("graph.png") without Graphviz': _graph_png,
    "ax.train.plot_history": _plot_history,
    "fit(logdir=...)'s curves.png": _fit_curves,
    "sharded checkpoints (ax.train.save_sharded, load_sharded, read_sharded_manifest)": _sharded,
    "ax.train.Checkpoints(sharded=True)": _checkpoints_sharded,
    "ax.nn.save_safetensors": _save_safetensors,
    "ax.nn.load_safetensors": _load_safetensors,
    "axjax.models.load_weights": _load_hf,
    "axjax.models.save_weights": _save_hf,
    "axjax.models.load_peft": _load_peft,
    "axjax.models.save_peft": _save_peft,
    "axjax.models.load_tokenizer (gpt2.tokenizer, llama.tokenizer)": _load_tokenizer,
    "fit(progress=True)": _fit_progress,
    "ax.train.download": _download,
    "TensorBoard logs (ax.train.TensorBoardLogger)": _tensorboard_logger,
    "fit(logdir=...)'s TensorBoard files": _fit_tensorboard,
}

_current: Any = None  # the feature whose scenario runs


def _expect_raise(call: Callable[[], object], what: str) -> None:
    """For a scenario that checks several calls: each must raise the feature's error."""
    try:
        call()
    except ImportError as e:
        if str(e) != _current.message():
            raise AssertionError(f"{what}: {e}") from e
        return
    raise AssertionError(f"{what} ran without its module")


def check(feature: Any, scenario: Callable[[Path], None], tmp: Path) -> str | None:
    """``None`` when the feature failed or degraded as declared, else what went wrong."""
    global _current
    _current = feature
    tmp.mkdir(parents=True)
    expected = feature.message()
    install = feature.dependency.install()
    if install not in expected or feature.name not in expected:
        return f"the message does not name the feature and {install!r}: {expected!r}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            scenario(tmp)
        except ImportError as e:
            if feature.missing == "warn":
                return f"raised instead of degrading: {e!r}"
            if str(e) != expected:
                return f"raised ImportError({str(e)!r}), expected {expected!r}"
            return None
        except Exception:
            return "failed: " + traceback.format_exc(limit=3)
    if feature.missing == "raise":
        return "ran without its module (expected ImportError)"
    from axjax.core._optional import OptionalDependencyWarning

    ours = [str(w.message) for w in caught if issubclass(w.category, OptionalDependencyWarning)]
    if len(ours) != 1 or not ours[0].startswith(expected):
        return f"expected one OptionalDependencyWarning {expected!r}, got {ours}"
    return None


def _mutate(optional: ModuleType) -> None:
    """The mechanism off: the import's own error, and no warning."""

    def bare_error(self: Any, cause: ImportError) -> ImportError:
        return cause

    optional.Feature.missing_error = bare_error
    optional.Feature.warn_missing = lambda self: None


def main(argv: Sequence[str]) -> int:
    blocked, tmp = argv[0].split(","), Path(argv[1])
    sys.meta_path.insert(0, _Block(blocked))
    import axjax
    from axjax.core import _optional

    for info in pkgutil.walk_packages(axjax.__path__, "axjax."):  # every declared feature
        if not info.name.startswith("axjax.mypy"):
            importlib.import_module(info.name)

    if "--mutate" in argv:
        _mutate(_optional)
    tops = {m.split(".")[0] for m in blocked}
    for i, feature in enumerate(_optional.FEATURES):
        if feature.module.split(".")[0] not in tops:
            continue
        scenario = SCENARIOS.get(feature.name)
        problem = (
            f"no scenario in tests/_optional_scenarios.py for {feature.name!r}"
            if scenario is None
            else check(feature, scenario, tmp / f"feature{i}")
        )
        print(json.dumps({"feature": feature.name, "module": feature.module, "problem": problem}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
