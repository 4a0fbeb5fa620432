"""Gradients of a graph's Params, and an optax training step over a graph.

``ax.grad(loss, wrt=[w, b], inputs=[x, y])`` (a symbolic ``loss``) returns a jitted function
of the inputs that gives the gradients; they come from each op's own ``backward``, because
the graph is lowered to the same op calls as eager code.
``ax.compile_step(loss, optax.adam(1e-2), inputs=[x, y])`` returns a :class:`GraphStep`
whose call applies one optimizer update to the Params and returns the loss.

Example:
    >>> step = ax.compile_step(loss, optax.sgd(0.5), inputs=[x, y])
    >>> for _ in range(200):
    ...     value = step(xs, ys)
    >>> step.value(w)                      # the trained value of Param w
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import jax
import optax

from ._compile import AnyParam, AnyTensor, Program
from ._dtype import is_floating
from ._errors import AxisError, describe
from ._nodes import Node, Param
from ._op import config
from ._tensor import Tensor

__all__ = ["GraphGrad", "GraphStep", "graph_grad", "compile_step"]

class _LossProgram:
    """A scalar loss, the Params to differentiate, and the loss as a function of them."""

    def __init__(self, loss: AnyTensor, wrt: Any, inputs: Any, where: str) -> None:
        if not isinstance(loss, Node):
            raise TypeError(f"{where}: the loss must be a graph node, got {type(loss).__name__}")
        if loss.axes or not is_floating(loss.dtype):
            raise AxisError(f"{where}: the loss must be a floating-point scalar, got "
                            f"{describe(loss.type)} (reduce the remaining axes with ax.sum or "
                            "ax.mean)")
        self.program = p = Program(loss, inputs, where)
        self.single = isinstance(wrt, Node)
        wanted = p.params if wrt is None else (wrt,) if self.single else tuple(wrt)
        for w in wanted:
            if not isinstance(w, Param):
                kind = f"{w!r}" if isinstance(w, Node) else type(w).__name__
                raise TypeError(f"{where}: wrt= lists Params, got {kind} (only Params get "
                                "gradients; make it an ax.Param)")
            if w not in p.param_index:
                raise TypeError(f"{where}: {w!r} is not used by the loss (remove it from wrt=)")
            if not is_floating(w.dtype):
                raise TypeError(f"{where}: {w!r} holds {w.dtype.__name__} values, which have no "
                                "gradient")
        self.wrt: tuple[AnyParam, ...] = tuple(wanted)
        self.index = tuple(p.param_index[w] for w in self.wrt)

    def loss(self, train: Sequence[AnyTensor], values: Sequence[AnyTensor],
             inputs: Sequence[AnyTensor]) -> Any:
        vals = list(values)
        for i, v in zip(self.index, train, strict=True):
            vals[i] = v
        return self.program.run(vals, self.program.const_values, inputs)[0].array


class GraphGrad:
    """Jitted gradients (and optionally the value) of a graph loss; see :func:`graph_grad`.

    Call it like a compiled graph: inputs by position or name, ``params=`` for other Param
    values. Returns the gradient of each Param in ``wrt`` (a Tensor with its axes; a tuple
    for a list ``wrt``), preceded by the loss when built by ``ax.value_and_grad``.
    """

    def __init__(self, loss: AnyTensor, wrt: Any = None, inputs: Any = None,
                 with_value: bool = False) -> None:
        where = "ax.value_and_grad" if with_value else "ax.grad"
        self._lp = _LossProgram(loss, wrt, inputs, where)
        self.with_value = with_value
        self.graph = self._lp.program.graph
        self.wrt = self._lp.wrt
        self.trace_count = 0
        self._jit = jax.jit(self._value_and_grad, static_argnums=0)  # 0: the autodiff mode

    def _value_and_grad(self, mode: str, train: Any, values: Any, inputs: Any) -> Any:
        self.trace_count += 1
        return jax.value_and_grad(self._lp.loss)(train, values, inputs)

    def __call__(self, *args: Any, params: Any = None, **kwargs: Any) -> Any:
        p = self._lp.program
        values = p.values(params)
        train = tuple(values[i] for i in self._lp.index)
        value, grads = self._jit(config.autodiff, train, values, p.bind(args, kwargs))
        g = grads[0] if self._lp.single else grads
        return (Tensor._wrap(value, ()), g) if self.with_value else g


def graph_grad(loss: AnyTensor, wrt: Any = None, inputs: Any = None,
               with_value: bool = False) -> GraphGrad:
    """Gradients of a scalar graph ``loss`` with respect to Params (``ax.grad`` on a node).

    Args:
        loss: a floating-point scalar node.
        wrt: a Param (one gradient), a list of Params (a tuple), or ``None`` (every Param
            of the graph, in ``graph.params`` order).
        inputs: the Inputs in argument order (as in :func:`axjax.compile`).
        with_value: also return the loss, first.

    Example:
        >>> grads = ax.grad(loss, wrt=[w, b], inputs=[x, y])
        >>> gw, gb = grads(xs, ys)             # Tensors with the axes of w and b
    """
    return GraphGrad(loss, wrt, inputs, with_value)


class GraphStep:
    """One optax update of a graph's Params per call; it keeps the values and the state.

    Attributes:
        params: every Param of the loss graph with its current value (pass it to a compiled
            graph as ``params=``); opt_state: the optimizer state; trace_count: how many
            times JAX traced the step (once per distinct input sizes).
    """

    def __init__(self, loss: AnyTensor, optimizer: optax.GradientTransformation,
                 inputs: Any = None, wrt: Any = None) -> None:
        if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
            raise TypeError("compile_step: optimizer must be an optax.GradientTransformation "
                            f"(optax.adam(1e-3), ...), got {type(optimizer).__name__}")
        self._lp = _LossProgram(loss, wrt, inputs, "compile_step")
        self.optimizer = optimizer
        self.graph = self._lp.program.graph
        self.wrt = self._lp.wrt
        self._values = self._lp.program.values(None)
        self.opt_state = optimizer.init(cast(Any, self._train()))  # a pytree of Tensors
        self.trace_count = 0
        self._jit = jax.jit(self._step, static_argnums=0)  # 0: the autodiff mode

    def _train(self) -> tuple[AnyTensor, ...]:
        return tuple(self._values[i] for i in self._lp.index)

    def _step(self, mode: str, train: Any, values: Any, opt_state: Any, inputs: Any) -> Any:
        self.trace_count += 1
        value, grads = jax.value_and_grad(self._lp.loss)(train, values, inputs)
        updates, opt_state = self.optimizer.update(grads, opt_state, train)
        return optax.apply_updates(train, updates), opt_state, value

    def __call__(self, *args: Any, **kwargs: Any) -> Tensor[Any]:
        """Run one update on these inputs; returns the loss before the update."""
        inputs = self._lp.program.bind(args, kwargs)
        train, self.opt_state, value = self._jit(config.autodiff, self._train(), self._values,
                                                 self.opt_state, inputs)
        values = list(self._values)
        for i, v in zip(self._lp.index, train, strict=True):
            values[i] = v
        self._values = tuple(values)
        return Tensor._wrap(value, ())  # type: ignore[no-any-return]

    @property
    def params(self) -> tuple[AnyParam, ...]:
        """The graph's Params, each holding its current value."""
        return tuple(p._rebuild(p._id, v) for p, v in
                     zip(self._lp.program.params, self._values, strict=True))

    def value(self, param: AnyTensor) -> AnyTensor:
        """The current value of ``param`` (a Param of the loss graph)."""
        i = self._lp.program.param_index.get(param) if isinstance(param, Param) else None
        if i is None:
            raise TypeError(f"GraphStep.value: {param!r} is not a Param of the loss graph")
        return self._values[i]


def compile_step(loss: AnyTensor, optimizer: optax.GradientTransformation, inputs: Any = None,
                 wrt: Any = None) -> GraphStep:
    """A jitted training step: gradients of ``loss`` by each op's backward, then ``optimizer``.

    Args:
        loss: a floating-point scalar node.
        optimizer: any ``optax.GradientTransformation``.
        inputs: the Inputs in argument order (as in :func:`axjax.compile`).
        wrt: the Params to train (default: all of the graph's Params).

    Example:
        >>> step = ax.compile_step(loss, optax.adam(0.05), inputs=[x, y])
        >>> for _ in range(300):
        ...     step(xs, ys)
        >>> ax.compile(pred, inputs=[x])(xs, params=step.params)
    """
    return GraphStep(loss, optimizer, inputs, wrt)
