"""The benchmark models, each written once per framework (see ``_mlp.py`` for the pattern).

Every model module has ``NAME``, ``TITLE``, ``init(seed) -> {name: numpy array}`` and one
``build_<framework>(params) -> Runner`` per framework it supports.
"""

from __future__ import annotations

import importlib.util
from types import ModuleType

from . import _attention, _cnn, _lstm, _mlp

__all__ = ["EXPERTS", "FRAMEWORKS", "MODELS", "available", "builder"]

#: every framework, the references first: hand-written JAX as JAX users usually write it
#: (``jax``: weights stored ``[in, out]``, optax's integer-label loss) and the expert
#: baselines (``expert``: axjax's weight storage, optax's loss on one-hot labels;
#: ``expert-int``: the same with integer labels); all three donate their buffers. ``axjax``
#: is the loop the docs recommend (``ax.train.TrainStep``), ``axjax-jit`` axjax modules
#: under the user's own ``jax.jit`` (the cost of Equinox modules as arguments)
FRAMEWORKS = (
    "jax",
    "expert",
    "expert-int",
    "axjax",
    "axjax-jit",
    "graph",
    "fit",
    "equinox",
    "haliax",
    "torch",
)
#: the baselines whose best, round by round, axjax's paths are measured against
EXPERTS = ("jax", "expert", "expert-int")

MODELS: dict[str, ModuleType] = {m.NAME: m for m in (_mlp, _cnn, _lstm, _attention)}


def available(framework: str) -> bool:
    """Whether the framework can be imported here (Haliax and PyTorch are optional)."""
    if framework in ("haliax", "torch"):
        return importlib.util.find_spec(framework) is not None
    return True


def builder(model: ModuleType, framework: str) -> object | None:
    """The model's ``build_<framework>``, or ``None`` if it has none."""
    return getattr(model, f"build_{framework.replace('-', '_')}", None)
