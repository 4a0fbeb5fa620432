"""The NaN/Inf guard of :func:`axjax.train.fit`: checks at log points, snapshots, replay."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import equinox as eqx
import jax

from ..core import NonFiniteError, NonFiniteReport, debug_nans
from ._loader import BatchSource
from ._run_state import PyTree, RunState, copy_tree, finite_and_copy
from ._step import Monitor, TrainingDiverged, all_finite

__all__ = ["GUARDS", "FlatSteps", "Guard", "NanGuard", "ReplayStep", "explain_step"]

#: how ``fit`` guards against NaN/Inf (see :func:`axjax.train.fit`)
Guard = Literal["replay", "step", "off"]
GUARDS: tuple[Guard, ...] = ("replay", "step", "off")

#: ``(params, opt_state, batch, key, step) -> (params, opt_state, loss, grad_norm, finite)``
ReplayStep = Callable[
    [PyTree, PyTree, PyTree, jax.Array, int], tuple[PyTree, PyTree, jax.Array, jax.Array, jax.Array]
]

#: ``treedef -> step``: the run's own compiled step ``(leaves, batch, key, step) -> leaves``
#: on the leaves of ``(params, opt_state, monitor)`` (``make_flat_train_step``, one per
#: tree structure)
FlatSteps = Callable[[Any], Callable[[list[jax.Array], Any, jax.Array, int], list[jax.Array]]]


class Snapshot(NamedTuple):
    """The last state checked finite, and where the data stood then."""

    params: PyTree
    opt_state: PyTree
    step: int
    epoch: int
    batch: int


class NanGuard:
    """Reads the monitor at check points and acts on a non-finite value per ``mode``.

    ``"step"``: raise at the bad step the guarded train step recorded. ``"replay"``: keep
    the last finite state as a snapshot; when the loss sum or the state is not finite,
    replay the steps since the snapshot and raise at the first bad one. The replay
    recomputes the state with the run's own compiled step (``flat_steps``), so the state it
    keeps is the run's to the bit wherever that step is deterministic; a checking step
    (built by ``make_replay`` on the first replay only) gives the gradient norm. Two
    compilations of one update need not agree to the last bit on a GPU (fusion, autotuned
    matrix products, TF32), which is why the checking step never supplies the state.
    ``"off"``: only read the means.

    Built before the run's arrays are copied for a donating step, so the first snapshot
    holds the caller's (never donated) arrays.
    """

    def __init__(
        self,
        mode: Guard,
        run: RunState,
        source: BatchSource,
        *,
        donate: bool,
        make_replay: Callable[[], ReplayStep],
        flat_steps: FlatSteps,
    ) -> None:
        self.mode = mode
        self.source = source
        self.donate = donate
        self.make_replay = make_replay
        self.flat_steps = flat_steps
        self.replay_step: ReplayStep | None = None
        self.snapshot: Snapshot | None = None
        if mode == "replay":
            self.snapshot = Snapshot(run.params, run.opt_state, run.step, run.epoch, run.batch)

    def check(self, run: RunState) -> dict[str, float]:
        """One host sync: the monitor's means (``{}`` after a replay, whose sums belonged
        to the discarded steps), after checking the state as ``mode`` says."""
        assert run.monitor is not None
        flag, copied = None, None
        if self.mode == "replay" and self.donate:  # the check and the snapshot's copy at once
            flag, copied = finite_and_copy((run.params, run.opt_state))
        elif self.mode == "replay":
            flag = all_finite((run.params, run.opt_state))
        means, bad, finite = run.monitor.read_with(flag)
        if self.mode == "step" and bad is not None:
            raise TrainingDiverged(
                *bad,
                model=run.model(),
                opt_state=run.opt_state,
                report=self._explain(run, int(bad[0])),
            )
        if self.mode == "replay":
            if not (finite and math.isfinite(means.get("loss", 0.0))):
                run.params, run.opt_state = self._replay(run)
                means, run.monitor, copied = {}, run.monitor.reset(), None
            self._keep(run, copied)
        return means

    def _keep(self, run: RunState, copied: tuple[PyTree, PyTree] | None = None) -> None:
        """Make the run's state the snapshot (a copy where the step donates it: ``copied``
        when the check already made it)."""
        if copied is None and self.donate:
            copied = copy_tree((run.params, run.opt_state))
        params, opt_state = copied if copied is not None else (run.params, run.opt_state)
        self.snapshot = Snapshot(params, opt_state, run.step, *run.position())

    def _explain(self, run: RunState, step: int) -> NonFiniteReport | None:
        """For ``"step"``: the op report of update ``step`` (1-based, in this epoch: every
        epoch end is a check), from the state the guarded step kept (from before it)."""
        index = step - 1 - (run.step - run.batch)  # the batch's index in this epoch
        if index < 0:
            return None
        if self.replay_step is None:
            self.replay_step = self.make_replay()
        batch = next(iter(self.source.epoch(run.epoch, index)))
        return explain_step(self.replay_step, run.params, run.opt_state, batch, run.key, step - 1)

    def _replay(self, run: RunState) -> tuple[PyTree, PyTree]:
        """Run the steps since the snapshot again, checking each; raise at the first bad
        one. Return the replayed state if none is bad (a non-deterministic device)."""
        snap = self.snapshot
        assert snap is not None and run.monitor is not None
        if self.replay_step is None:
            self.replay_step = self.make_replay()
        params, opt_state = snap.params, snap.opt_state
        batches = self.source.epoch(snap.epoch, snap.batch)
        for k, batch in zip(range(snap.step, run.step), batches, strict=False):
            new_params, new_opt_state, loss = self._run_step(
                params, opt_state, run.monitor, batch, run.key, k
            )
            gnorm = self.replay_step(params, opt_state, batch, run.key, k)[3]
            finite = all_finite((new_params, new_opt_state))
            loss, gnorm, finite = jax.device_get((loss, gnorm, finite))
            if not (math.isfinite(loss) and math.isfinite(gnorm) and finite):
                raise TrainingDiverged(
                    k + 1,
                    float(loss),
                    float(gnorm),
                    model=eqx.combine(params, run.static),
                    opt_state=opt_state,
                    report=explain_step(self.replay_step, params, opt_state, batch, run.key, k),
                )
            params, opt_state = new_params, new_opt_state
        warnings.warn(
            f"fit: steps {snap.step + 1}-{run.step} left a non-finite loss or "
            "state, but replaying them gave finite values throughout (a "
            "non-deterministic computation?); training goes on from the replayed "
            "state",
            stacklevel=3,
        )
        return params, opt_state

    def _run_step(
        self,
        params: PyTree,
        opt_state: PyTree,
        monitor: Monitor,
        batch: PyTree,
        key: jax.Array,
        step: int,
    ) -> tuple[PyTree, PyTree, jax.Array]:
        """One update by the run's own compiled step (the one ``fit``'s loop called, found
        by the same tree structure), on copies where it donates: ``(params, opt_state,
        loss)``, the loss read from a fresh monitor's sum (``0 + loss``)."""
        if self.donate:  # the step must not consume the snapshot or the state before a bad step
            params, opt_state = copy_tree((params, opt_state))
        leaves, treedef = jax.tree.flatten((params, opt_state, monitor.reset()))
        new_params, new_opt_state, mon = jax.tree.unflatten(
            treedef, self.flat_steps(treedef)(leaves, batch, key, step)
        )
        return new_params, new_opt_state, mon.sums["loss"]


def explain_step(
    replay_step: ReplayStep,
    params: PyTree,
    opt_state: PyTree,
    batch: PyTree,
    key: jax.Array,
    step: int,
) -> NonFiniteReport | None:
    """Run one step again op by op under :func:`axjax.debug_nans` and return the report of
    the first op whose forward or backward result is not finite (``None`` if no op's is:
    the optimizer's update made the state non-finite)."""
    try:
        with debug_nans():
            replay_step(params, opt_state, batch, key, step)
    except NonFiniteError as e:
        return e.report
    return None
