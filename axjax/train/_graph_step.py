"""An optax training step over a graph: ``ax.compile_step`` / :class:`GraphStep`.

The step differentiates a graph loss by each op's own ``backward`` (as ``ax.grad`` on a
node does) and applies one optimizer update per call, keeping the Params' values and the
optimizer state.

Example:
    >>> step = ax.compile_step(loss, optax.sgd(0.5), inputs=[x, y])
    >>> for _ in range(200):
    ...     value = step(xs, ys)
    >>> step.value(w)                      # the trained value of Param w
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import jax
import optax

from ..core import AnyTensor, Tensor, config
from ..core._internal import PyTree, is_floating
from ..graph import Graph, LossProgram, Node, Param
from ..nn import LossScaled, Policy
from ..nn._internal import Selection, selector
from ._precision import Optimizer
from ._run_state import copy_tree
from ._setup import prepare
from ._step import check_opt_state

__all__ = ["GraphStep", "compile_step"]

AnyParam = Param[Any, *tuple[Any, ...]]


class GraphStep:
    """One optax update of a graph's Params per call; it keeps the values and the state.

    Attributes:
        params: every Param of the loss graph with its current value (pass it to a compiled
            graph as ``params=``); opt_state: the optimizer state; trace_count: how many
            times JAX traced the step (once per distinct input sizes).
    """

    def __init__(
        self,
        loss: AnyTensor,
        optimizer: optax.GradientTransformation,
        inputs: Sequence[AnyTensor] | AnyTensor | None = None,
        wrt: Sequence[AnyTensor] | AnyTensor | None = None,
        precision: Policy | None = None,
        trainable: Selection | None = None,
    ) -> None:
        self.precision = precision
        if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
            raise TypeError(
                "compile_step: optimizer must be an optax.GradientTransformation "
                f"(optax.adam(1e-3), ...), got {type(optimizer).__name__}"
            )
        if wrt is None and isinstance(loss, Node):  # integer Params are not trained
            wrt = tuple(p for p in Graph(loss).params if is_floating(p.dtype))
        if trainable is not None:
            wrt = _selected(loss, wrt, trainable)
        self._lp = LossProgram(loss, wrt, inputs, "compile_step")
        self.optimizer = optimizer
        # under a policy: the loss cast to its compute dtype and, with loss scaling, the
        # trained values carried as a LossScaled and updated by a ScaledOptimizer (the
        # set-up of fit and TrainStep; the Params keep their own dtype: no model is cast)
        prepared = prepare(  # opt_state: initialised below, on the trained values
            (), optimizer, self._lp.loss, precision=precision, opt_state=(), check=False
        )
        self._opt: Optimizer = prepared.optimizer
        self._policy_loss: Callable[..., Any] | None = (
            None if precision is None else prepared.loss_fn
        )
        self._scale: tuple[jax.Array, jax.Array] | None = None
        if isinstance(prepared.model, LossScaled):
            self._scale = (prepared.model.scale, prepared.model.good)
        self.graph: Graph = self._lp.program.graph
        self.wrt: tuple[AnyParam, ...] = self._lp.wrt
        values = list(self._lp.program.values(None))
        self._trained = frozenset(self._lp.index)
        for i in self._trained:  # the step updates these in place: never the caller's arrays
            values[i] = copy_tree(values[i])
        self._values = tuple(values)
        self.opt_state: PyTree = copy_tree(self._opt.init(self._wrap(self._train())))  # Tensors
        #: the state the step made or last checked: one handed back (``step.opt_state =``)
        #: is checked against what it must fit at its first call (an identity test per step)
        self._known_state: PyTree = self.opt_state
        self.trace_count: int = 0
        # 0: the autodiff mode; the trained values and the optimizer state are donated
        self._jit = jax.jit(self._step, static_argnums=0, donate_argnums=(1, 3))

    def _train(self) -> tuple[AnyTensor, ...]:
        return tuple(self._values[i] for i in self._lp.index)

    def _wrap(self, train: tuple[AnyTensor, ...]) -> PyTree:
        """The trained values as the step takes them (a LossScaled under loss scaling)."""
        return train if self._scale is None else LossScaled(train, *self._scale)

    @property
    def loss_scale(self) -> float | None:
        """The current loss scale (``None`` without loss scaling)."""
        return None if self._scale is None else float(self._scale[0])

    def _step(
        self,
        mode: str,
        train: PyTree,
        values: PyTree,
        opt_state: PyTree,
        inputs: tuple[AnyTensor, ...],
    ) -> tuple[PyTree, PyTree, jax.Array]:
        self.trace_count += 1
        value, grads = jax.value_and_grad(self._loss)(train, values, inputs)
        updates: PyTree  # a LossScaled under loss scaling: a tree optax applies alike
        updates, opt_state = self._opt.update(grads, opt_state, train)
        return optax.apply_updates(train, updates), opt_state, value

    def _loss(self, train: PyTree, values: PyTree, inputs: tuple[AnyTensor, ...]) -> jax.Array:
        """The graph's loss; under a precision policy, run in its compute dtype (and its
        gradient scaled by the loss scale on the way back)."""
        run = self._lp.loss if self._policy_loss is None else self._policy_loss
        value: jax.Array = run(train, values, inputs)
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Tensor[Any]:
        """Run one update on these inputs; returns the loss before the update."""
        inputs = self._lp.program.bind(args, kwargs)
        if self.opt_state is not self._known_state:
            self._check_opt_state()
        fixed = tuple(None if i in self._trained else v for i, v in enumerate(self._values))
        train, self.opt_state, value = self._jit(
            config.autodiff, self._wrap(self._train()), fixed, self.opt_state, inputs
        )
        self._known_state = self.opt_state
        if isinstance(train, LossScaled):
            self._scale, train = (train.scale, train.good), train.model
        values = list(self._values)
        for i, v in zip(self._lp.index, train, strict=True):
            values[i] = v
        self._values = tuple(values)
        return Tensor(value, ())

    def _check_opt_state(self) -> None:
        """The ``opt_state`` handed back, against what this step's optimizer makes for its
        trained Params (structure, shapes, dtypes; a donated buffer named as such)."""
        check_opt_state("compile_step", self._opt, self.opt_state, self._wrap(self._train()))
        self._known_state = self.opt_state

    @property
    def params(self) -> tuple[AnyParam, ...]:
        """The graph's Params, each holding its current value (a copy of a trained one:
        the next step updates the step's own buffers in place)."""
        return tuple(p.rebound(self._held(i)) for i, p in enumerate(self._lp.program.params))

    def _held(self, i: int) -> AnyTensor:
        value = self._values[i]
        return cast(AnyTensor, copy_tree(value)) if i in self._trained else value

    def value(self, param: AnyTensor) -> AnyTensor:
        """The current value of ``param`` (a Param of the loss graph)."""
        i = self._lp.program.param_index.get(param) if isinstance(param, Param) else None
        if i is None:
            raise TypeError(f"GraphStep.value: {param!r} is not a Param of the loss graph")
        return self._held(i)


def _selected(
    loss: AnyTensor, wrt: Sequence[AnyTensor] | AnyTensor | None, trainable: Selection
) -> tuple[AnyTensor, ...]:
    """The Params of ``wrt`` that ``trainable`` selects, asked by each Param's name (``""``
    for an unnamed one) and value; a ``ValueError`` when it selects none."""
    select = selector(trainable, "compile_step: trainable")
    given = (wrt,) if isinstance(wrt, Tensor) else tuple(wrt or ())
    params = [p for p in given if isinstance(p, Param)]
    chosen = tuple(p for p in params if select(p.name or "", p.value))
    if not chosen:
        names = ", ".join(p.name or "(unnamed)" for p in params) or "none"
        raise ValueError(
            f"compile_step: trainable={select} freezes every Param of the loss graph (it "
            f"selects none of {names}); Params are selected by their name= "
            "(ax.Param(value, name='head.w'))"
        )
    return chosen


def compile_step(
    loss: Tensor[Any],
    optimizer: optax.GradientTransformation,
    inputs: Sequence[AnyTensor] | AnyTensor | None = None,
    wrt: Sequence[AnyTensor] | AnyTensor | None = None,
    precision: Policy | None = None,
    trainable: Selection | None = None,
) -> GraphStep:
    """A jitted training step: gradients of ``loss`` by each op's backward, then ``optimizer``.

    The step updates its own copies of the trained Params' values and the optimizer state in
    place (donated buffers); ``step.params`` and ``step.value(w)`` hand out copies, which
    later steps leave intact, and the Params' own values are never touched.

    Args:
        loss: a floating-point scalar node (typed ``Tensor[D]``, no axes: a loss with axes
            is a type error; reduce it first).
        optimizer: any ``optax.GradientTransformation``.
        inputs: the Inputs in argument order (as in :func:`axjax.compile`).
        wrt: the Params to train (default: all of the graph's floating-point Params;
            integer ones keep their values, as Equinox leaves non-float leaves alone).
        precision: an ``ax.nn.Policy``: Params, values and inputs are cast to its compute
            dtype for the loss and gradient, the loss to its output dtype; the Params are
            updated in their own dtype; with the policy's loss scaling (f16), the loss's
            gradient is scaled, a non-finite step is skipped and the scale moves, as in
            ``fit`` (``step.loss_scale`` reads it).
        trainable: a selection among those Params, as ``fit``'s ``trainable=`` (a
            selector, a pattern, a tuple of them, or a predicate), asked about each Param
            by its ``name=`` and value: ``trainable="head.*"`` trains the Params named
            ``head.w``, ``head.b``; the others keep their values. Selecting none is a
            ``ValueError``.

    Example:
        >>> step = ax.compile_step(loss, optax.adam(0.05), inputs=[x, y])
        >>> for _ in range(300):
        ...     step(xs, ys)
        >>> ax.compile(pred, inputs=[x])(xs, params=step.params)
    """
    return GraphStep(loss, optimizer, inputs, wrt, precision, trainable)
