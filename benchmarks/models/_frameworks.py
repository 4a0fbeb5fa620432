"""Training steps written the way each framework's users write them.

- raw JAX: :func:`benchmarks._common.jit_train_step` (one ``jax.jit``);
- axjax (``axjax``): the loop the docs recommend, ``ax.train.TrainStep`` (the step of
  ``fit`` on a flat list of arrays, the model rebuilt only on request);
- axjax modules under the user's own ``jax.jit`` (``axjax-jit``): ``jit_train_step`` over
  the partitioned modules, which pays the Python flatten and unflatten of every Equinox
  module (and Tensor) per call: the cost of Equinox modules as ``jax.jit`` arguments;
- the axjax graph: the model's Tensors become ``ax.Param``s, the batch ``ax.Input``s, and
  ``ax.compile_step`` lowers loss, gradient and update to one jitted function;
- axjax's own training loop: the step ``ax.train.fit`` runs (``ax.train.make_train_step``:
  the same update plus the NaN/Inf guard and running sums on the device);
- Equinox and Haliax: ``eqx.filter_jit`` and ``eqx.filter_value_and_grad``;
- PyTorch: eager ``loss.backward()`` and ``torch.optim.Adam``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import axjax as ax

from .._common import LR, Runner

__all__ = [
    "RunningLoss",
    "eqx_runner",
    "fit_runner",
    "graph_runner",
    "int_xent",
    "onehot_xent",
    "put_jax",
    "torch_runner",
    "train_step_runner",
]

Put = Callable[[np.ndarray, np.ndarray], tuple[Any, Any]]


def onehot_xent(logits: Any, y: Any) -> Any:
    """optax's softmax cross-entropy on one-hot labels, averaged: its backward is
    ``softmax - onehot``, with no gather or scatter (the expert's form)."""
    return optax.softmax_cross_entropy(logits, jax.nn.one_hot(y, logits.shape[-1])).mean()


def int_xent(logits: Any, y: Any) -> Any:
    """optax's softmax cross-entropy on integer labels, averaged: its backward is a
    gather and a scatter."""
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def put_jax(x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
    """Host batch -> device arrays (a copy each, as in a real data loop)."""
    return jnp.asarray(x), jnp.asarray(y)


def eqx_runner(model: Any, loss_fn: Callable[[Any, Any, Any], Any], put: Put) -> Runner:
    """``eqx.filter_jit`` around ``eqx.filter_value_and_grad`` and an optax update."""
    opt = optax.adam(LR)
    count = [0]

    @eqx.filter_jit
    def step(model: Any, opt_state: Any, x: Any, y: Any) -> tuple[Any, Any, Any]:
        count[0] += 1
        loss, grads = eqx.filter_value_and_grad(loss_fn)(model, x, y)
        updates, opt_state = opt.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), opt_state, loss

    def run(state: Any, x: Any, y: Any) -> tuple[Any, Any]:
        m, s, loss = step(state[0], state[1], x, y)
        return (m, s), loss

    return Runner(
        (model, opt.init(eqx.filter(model, eqx.is_array))), run, put, traces=lambda: count[0]
    )


def fit_runner(model: Any, loss_fn: Callable[[Any, Any, Any], Any], put: Put) -> Runner:
    """The step of ``ax.train.fit`` with its default ``guard="replay"``, called as ``fit``
    calls it: on the leaves of ``(params, opt_state, monitor)``, donated, the step number a
    Python int. Its loss is read from the running sum. (``fit`` also checks finiteness
    once per log point and epoch: ``benchmarks.fit_loop`` times the whole loop.)"""
    from axjax.train import Monitor
    from axjax.train._internal import make_flat_train_step

    params, static = eqx.partition(model, eqx.is_array)
    opt = optax.adam(LR)
    count = [0]

    def counted(model: Any, x: Any, y: Any) -> Any:
        count[0] += 1
        return loss_fn(model, x, y)

    tree = (params, opt.init(params), Monitor.zero(("loss",), guarded=False))
    leaves, treedef = jax.tree.flatten(jax.tree.map(jnp.copy, tree))
    step = make_flat_train_step(counted, opt, static, treedef, guard=False)
    key = jax.random.key(0)
    last = [0.0]

    def run(state: Any, x: Any, y: Any) -> tuple[Any, Any]:
        leaves, i = state
        leaves = step(leaves, (x, y), key, i)
        return (leaves, i + 1), leaves

    def value(leaves: Any) -> float:  # this step's loss: the growth of the running sum
        mon = jax.tree.unflatten(treedef, leaves)[2]
        total = float(mon.sums["loss"])
        out, last[0] = total - last[0], total
        return out

    shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in leaves]

    def lowered(x: Any, y: Any) -> Any:
        return step.lower(shapes, (x, y), key, 0)

    return Runner((leaves, 0), run, put, traces=lambda: count[0], value=value, lowered=lowered)


class RunningLoss:
    """What the ``TrainStep`` runner returns as its loss: ``float()`` reads the mean loss
    since the last read (one host sync; after each step, that step's loss), and
    ``block_until_ready`` waits for the queued steps (``jax.block_until_ready`` calls it)."""

    def __init__(self, step: ax.train.TrainStep[Any]) -> None:
        self.step = step

    def __float__(self) -> float:
        return self.step.metrics()["loss"]

    def block_until_ready(self) -> RunningLoss:
        self.step.block_until_ready()
        return self


def train_step_runner(model: Any, loss_fn: Callable[[Any, Any, Any], Any], put: Put) -> Runner:
    """The recommended hand-written loop: ``step = ax.train.TrainStep(model, adam, loss_fn)``
    then ``step(x, y)`` per batch (defaults: donated, unguarded, the step number on the
    device). The runner's state is the step object itself."""
    step = ax.train.TrainStep(model, optax.adam(LR), loss_fn)

    def run(state: Any, x: Any, y: Any) -> tuple[Any, Any]:
        state(x, y)
        return state, RunningLoss(state)

    return Runner(
        step,
        run,
        put,
        traces=lambda: step.trace_count,
        value=float,
        lowered=lambda x, y: step.lower(x, y),
    )


def _to_params(model: Any) -> Any:
    is_tensor = lambda t: isinstance(t, ax.Tensor)  # noqa: E731
    return jax.tree.map(lambda t: ax.Param(t) if is_tensor(t) else t, model, is_leaf=is_tensor)


def graph_runner(
    model: Any, loss_of: Callable[[Any], Any], inputs: Sequence[Any], put: Put
) -> Runner:
    """The graph path: Params for the weights, ``ax.compile_step`` for the update.

    ``loss_of(model)`` builds the loss node from a model whose weights are Params (the
    symbolic Inputs are closed over); the step object keeps the values and optimizer state.
    """
    loss = loss_of(_to_params(model))
    graph_step = ax.compile_step(loss, optax.adam(LR), inputs=list(inputs))

    def run(state: Any, x: Any, y: Any) -> tuple[Any, Any]:
        return state, state(x, y)

    def sync(out: Any) -> Any:
        state, last = out
        return jax.block_until_ready((last, state._values))

    def lowered(x: Any, y: Any) -> Any:
        # the step's own jitted function, lowered with the arguments one call passes it
        # (recorded by running one step: the graph API has no public lowering)
        real, seen = graph_step._jit, []

        def record(*args: Any, **kwargs: Any) -> Any:
            seen.append((args, kwargs))
            return real(*args, **kwargs)

        graph_step._jit = record
        try:
            graph_step(x, y)
        finally:
            graph_step._jit = real
        args, kwargs = seen[0]
        return real.lower(*args, **kwargs)

    return Runner(
        graph_step, run, put, sync=sync, traces=lambda: graph_step.trace_count, lowered=lowered
    )


def torch_runner(model: Any, prep: Put, lr: float) -> Runner:
    """Eager PyTorch: ``cross_entropy``, ``backward``, ``Adam.step`` (synchronous on CPU)."""
    import torch
    import torch.nn.functional as F

    opt = torch.optim.Adam(model.parameters(), lr=lr)

    def step(state: Any, x: Any, y: Any) -> tuple[Any, Any]:
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return state, loss.detach()

    def put(x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
        x, y = prep(x, y)
        return torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(y.astype(np.int64))

    return Runner(model, step, put, sync=lambda out: None)
