"""Dependencies imported on first use: one place that imports them and says what is missing.

``import axjax`` imports none of matplotlib, orbax-checkpoint, safetensors, tensorboardX,
tokenizers or tqdm. Each feature that needs one declares it once, at module level, and
loads it when it runs::

    _CURVES = Feature("matplotlib", "fit(logdir=...)'s curves.png", missing="warn")
    ...
    mpl = _CURVES.load()  # the module, or None after one warning naming the extra

Four of these dependencies are extras (``pip install "axjax[plot]"`` for matplotlib,
``"axjax[sharded]"`` for orbax-checkpoint, ``"axjax[text]"`` for tokenizers,
``"axjax[tensorboard]"`` for tensorboardX); without one,
a feature that can go without (``missing="warn"``) warns once and skips its part, and any
other raises an ``ImportError`` that names the feature and the ``pip install`` command.
safetensors and tqdm are plain dependencies of axjax, imported late only to keep ``import
axjax`` quick.
"""

from __future__ import annotations

import dataclasses
import importlib
import threading
import warnings
from types import ModuleType
from typing import Literal

__all__ = [
    "DEPENDENCIES",
    "FEATURES",
    "Dependency",
    "Feature",
    "OptionalDependencyWarning",
]


@dataclasses.dataclass(frozen=True)
class Dependency:
    """A package imported late: its module, its name on PyPI and the axjax extra with it
    (``None``: a dependency of axjax itself)."""

    module: str
    package: str
    extra: str | None

    def install(self) -> str:
        """The command that installs it."""
        if self.extra is not None:
            return f'pip install "axjax[{self.extra}]"'
        return f"pip install {self.package} (a dependency of axjax: reinstall axjax)"


#: every late-imported module; pyproject.toml's extras must agree (tests/test_optional.py)
DEPENDENCIES: dict[str, Dependency] = {
    d.module: d
    for d in (
        Dependency("matplotlib", "matplotlib", "plot"),
        Dependency("orbax.checkpoint", "orbax-checkpoint", "sharded"),
        Dependency("safetensors", "safetensors", None),
        Dependency("tqdm", "tqdm", None),
        Dependency("tokenizers", "tokenizers", "text"),
        Dependency("tensorboardX", "tensorboardx", "tensorboard"),
    )
}


class OptionalDependencyWarning(UserWarning):
    """A feature skipped its part because an optional dependency is not installed."""

    __module__ = "axjax"


#: every declared feature, in declaration order (the tests run each without its module)
FEATURES: list[Feature] = []

_lock = threading.Lock()


@dataclasses.dataclass(eq=False)
class Feature:
    """A feature of axjax that needs ``module`` (a key of :data:`DEPENDENCIES`).

    Args:
        module: the module to import, e.g. ``"orbax.checkpoint"``.
        name: the feature as users call it, e.g. ``"ax.train.save_sharded"``.
        missing: ``"raise"`` an ``ImportError`` without the module, or ``"warn"`` once and
            let the caller skip the part that needs it.
    """

    module: str
    name: str
    missing: Literal["raise", "warn"] = "raise"
    warned: bool = dataclasses.field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.module not in DEPENDENCIES:
            raise ValueError(
                f"Feature {self.name!r}: {self.module!r} is not in axjax's DEPENDENCIES "
                f"({', '.join(DEPENDENCIES)}); add it there and to pyproject.toml"
            )
        FEATURES.append(self)

    @property
    def dependency(self) -> Dependency:
        return DEPENDENCIES[self.module]

    def message(self) -> str:
        """What is missing and how to install it."""
        dep = self.dependency
        return f"{self.name} needs {dep.package}, which is not installed: {dep.install()}"

    def require(self) -> ModuleType:
        """The module; raises ``ImportError`` with :meth:`message` when it cannot be imported.

        Example:
            >>> ocp = _SAVE.require()  # ImportError: ... pip install "axjax[sharded]"
        """
        try:
            return importlib.import_module(self.module)
        except ImportError as e:
            raise self.missing_error(e) from e

    def load(self) -> ModuleType | None:
        """The module, or ``None`` (after one :class:`OptionalDependencyWarning` per feature
        and process) when it cannot be imported; with ``missing="raise"``, as :meth:`require`.
        """
        if self.missing == "raise":
            return self.require()
        try:
            return importlib.import_module(self.module)
        except ImportError:
            self.warn_missing()
            return None

    def missing_error(self, cause: ImportError) -> ImportError:
        """The error :meth:`require` raises."""
        return ImportError(self.message(), name=self.module)

    def warn_missing(self) -> None:
        """Warn once that the feature is skipped."""
        with _lock:
            if self.warned:
                return
            self.warned = True
        warnings.warn(self.message() + " (skipped; the rest goes on)", OptionalDependencyWarning, 3)
