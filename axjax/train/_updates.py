"""``apply_updates``: ``eqx.apply_updates`` with the model's type kept.

Equinox annotates ``eqx.apply_updates(model, updates)`` as returning ``Any``, so after
``model = eqx.apply_updates(model, updates)`` a hand-written loop is no longer checked.
This is the same update, typed as the model passed in (``ax.train.TrainStep`` does the whole
step and hands back ``step.model`` typed the same way).
"""

from __future__ import annotations

from typing import TypeVar

import equinox as eqx

from ..core._internal import PyTree

__all__ = ["apply_updates"]

M = TypeVar("M")


def apply_updates(model: M, updates: PyTree) -> M:
    """``model`` with ``updates`` added to its arrays (``None`` updates leave a leaf as it
    is), typed as ``model``: ``eqx.apply_updates``, which is typed ``Any``.

    Example:
        >>> updates, opt_state = optimizer.update(grads, opt_state, model)
        >>> model = ax.train.apply_updates(model, updates)   # still an ax.nn.MLP[F32, ...]
    """
    out: M = eqx.apply_updates(model, updates)
    return out
