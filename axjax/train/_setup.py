"""The set-up of a training step, shared by ``fit``, :class:`TrainStep` and
``compile_step``: a precision policy and a parallel layout wrap the pieces of the step
(model, optimizer, loss), as optax wraps a transformation, instead of being threaded
through the loop.

Example:
    >>> p = prepare(model, optax.adam(1e-3), loss_fn, precision=ax.nn.Policy.mixed())
    >>> p.model, p.optimizer, p.loss_fn, p.opt_state      # what the step trains
    >>> p.unwrap(trained)                                 # the model as it was given
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import optax

from ..core._internal import PyTree, check_not_donated
from ..nn import Policy, Selector
from ..nn._internal import Selection, selector
from ..parallel import Parallel
from ._loader import BatchSource
from ._precision import Optimizer, for_training, same
from ._step import DONATED_REMEDY, check_opt_state, check_trainable, takes_key
from ._step import trainable as split_trainable

__all__ = ["Prepared", "prepare"]


class Prepared(NamedTuple):
    """What a step trains: the model cast to the policy's ``param`` dtype (a
    ``LossScaled`` under loss scaling) and placed by the parallel layout's parameter
    rules, the optimizer (unscaling the gradient under loss scaling), the loss run in the
    policy's dtypes, the placed optimizer state, ``unwrap`` (trained model -> the model
    as given), ``data`` with its batches placed by the compute rules, ``select``: the
    leaves the step trains (``None``: every floating-point array), and the ``parallel``
    layout itself (``None``: none)."""

    model: PyTree
    optimizer: Optimizer
    loss_fn: Callable[..., Any]
    opt_state: PyTree
    unwrap: Callable[[PyTree], PyTree]
    data: BatchSource | None
    select: Selector | None = None
    parallel: Parallel | None = None

    def batches(self) -> BatchSource:
        """``data``, for a set-up that was given it."""
        if self.data is None:
            raise ValueError("prepare: no data was given")
        return self.data


def prepare(
    model: PyTree,
    optimizer: optax.GradientTransformation,
    loss_fn: Callable[..., Any],
    precision: Policy | None = None,
    parallel: Parallel | None = None,
    data: BatchSource | None = None,
    trainable: Selection | None = None,
    *,
    opt_state: PyTree = None,
    where: str = "fit",
    check: bool = True,
) -> Prepared:
    """The pieces of a training step under ``precision`` and ``parallel`` (either may be
    ``None``: that piece is kept as it is).

    ``opt_state`` (default ``optimizer.init`` of the model's floating-point arrays) is
    the state of ``optimizer`` as given: under loss scaling the wrapped optimizer keeps it.
    ``data`` (a batch source), when given, comes back with every batch placed by
    ``parallel``'s compute rules. ``trainable`` (a selector, pattern or predicate over
    ``(path, leaf)``) picks the floating-point leaves the step trains; the optimizer state
    holds arrays for those alone, and a selection that freezes everything is a
    ``ValueError`` (``where`` names the caller in the messages). A given ``opt_state`` is
    checked against what ``optimizer.init`` makes (``check=False``: a caller that builds
    its own state afterwards, as ``compile_step``).
    """
    select = None if trainable is None else selector(trainable, f"{where}: trainable")
    check_not_donated(where, "model", model, DONATED_REMEDY)  # the state entering: once
    unwrap: Callable[[PyTree], PyTree] = same
    opt: Optimizer = optimizer
    if precision is not None:
        model, opt, loss_fn, unwrap = for_training(
            precision, model, optimizer, loss_fn, takes_key(loss_fn)
        )
    if parallel is not None:  # the model (so its optimizer state) and batches placed by rules
        model, data = (
            parallel.prepare(model, data)
            if data is not None
            else (parallel.place_params(model), None)
        )
    check_trainable(where, eqx.filter(model, eqx.is_array), select)
    trained = split_trainable(eqx.filter(model, eqx.is_array), select)[0]
    if opt_state is None:  # what is trained
        opt_state = opt.init(trained)
    elif check:  # a resumed state: made for this optimizer and these arrays
        check_opt_state(where, opt, opt_state, trained)
    if parallel is not None:  # its bare arrays (Adam's count) too: a resume restores into these
        opt_state = parallel.place_params(opt_state)
    return Prepared(model, opt, loss_fn, opt_state, unwrap, data, select, parallel)
