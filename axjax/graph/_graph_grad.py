"""Gradients of a graph's Params.

``ax.grad(loss, wrt=[w, b], inputs=[x, y])`` (a symbolic ``loss``) returns a jitted function
of the inputs that gives the gradients; they come from each op's own ``backward``, because
the graph is lowered to the same op calls as eager code.

Example:
    >>> grads = ax.grad(loss, wrt=[w, b], inputs=[x, y])
    >>> gw, gb = grads(xs, ys)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax

from ..core import AnyTensor, AxisError, Tensor, config
from ..core._internal import PyTree, describe, is_floating, trusted_tensor
from ._compile import AnyParam, InputList, Program
from ._graph import Graph
from ._nodes import ABOVE, Node, Param

__all__ = ["GraphGrad", "LossProgram", "distinct_wrt", "graph_grad"]

#: the ``wrt=`` of grad: one Param, a list of Params, or ``None`` (every Param of the graph)
Wrt = Sequence[AnyTensor] | AnyTensor | None


def distinct_wrt(wanted: Sequence[Any], where: str) -> None:
    """Raise unless every entry of ``wrt`` is a different Param (copies of one Param, such as
    ``w.replace(v)``, are the same Param): each gets one gradient, so a repeat would get
    none, or an optimizer would update one buffer twice."""
    seen: set[Any] = set()
    for w in wanted:
        if isinstance(w, Param):
            if w in seen:
                raise ValueError(
                    f"{where}: wrt lists the same Param twice ({w!r}); each Param gets one "
                    "gradient (list it once)"
                )
            seen.add(w)


class LossProgram:
    """A scalar loss, the Params to differentiate, and the loss as a function of them."""

    def __init__(self, loss: AnyTensor, wrt: Wrt, inputs: InputList, where: str) -> None:
        if not isinstance(loss, Node):
            raise TypeError(f"{where}: the loss must be a graph node, got {type(loss).__name__}")
        if loss.axes or not is_floating(loss.dtype):
            raise AxisError(
                f"{where}: the loss must be a floating-point scalar, got "
                f"{describe(loss.type)} (reduce the remaining axes with ax.sum or "
                "ax.mean)"
            )
        self.program: Program = Program(loss, inputs, where)
        p = self.program
        self.single: bool = isinstance(wrt, Node)
        wanted = p.params if wrt is None else (wrt,) if isinstance(wrt, Tensor) else tuple(wrt)
        distinct_wrt(wanted, where)
        for w in wanted:
            if not isinstance(w, Param):
                kind = f"{w!r}" if isinstance(w, Node) else type(w).__name__
                raise TypeError(
                    f"{where}: wrt= lists Params, got {kind} (only Params get "
                    "gradients; make it an ax.Param)"
                )
            if w not in p.param_index:
                raise TypeError(f"{where}: {w!r} is not used by the loss (remove it from wrt=)")
            if not is_floating(w.dtype):
                raise TypeError(
                    f"{where}: {w!r} holds {w.dtype.__name__} values, which have no gradient"
                )
        self.wrt: tuple[AnyParam, ...] = tuple(w for w in wanted if isinstance(w, Param))  # all
        self.index: tuple[int, ...] = tuple(p.param_index[w] for w in self.wrt)

    def loss(
        self, train: Sequence[AnyTensor], values: Sequence[AnyTensor], inputs: Sequence[AnyTensor]
    ) -> jax.Array:
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

    def __init__(
        self, loss: AnyTensor, wrt: Wrt = None, inputs: InputList = None, with_value: bool = False
    ) -> None:
        where = "ax.value_and_grad" if with_value else "ax.grad"
        self._lp = LossProgram(loss, wrt, inputs, where)
        self.with_value = with_value
        self.graph: Graph = self._lp.program.graph
        self.wrt: tuple[AnyParam, ...] = self._lp.wrt
        self.trace_count: int = 0
        self._jit = jax.jit(self._value_and_grad, static_argnums=0)  # 0: the autodiff mode

    def _value_and_grad(
        self,
        mode: str,
        train: Sequence[AnyTensor],
        values: Sequence[AnyTensor],
        inputs: Sequence[AnyTensor],
    ) -> tuple[jax.Array, tuple[AnyTensor, ...]]:
        self.trace_count += 1
        return jax.value_and_grad(self._lp.loss)(train, values, inputs)

    def __call__(self, *args: object, params: PyTree = None, **kwargs: object) -> PyTree:
        p = self._lp.program
        values = p.values(params)
        train = tuple(values[i] for i in self._lp.index)
        value, grads = self._jit(config.autodiff, train, values, p.bind(args, kwargs))
        g = grads[0] if self._lp.single else grads
        return (trusted_tensor(value, ()), g) if self.with_value else g


ABOVE.gradient = GraphGrad  # ax.grad of a loss node: Node.differentiate (_nodes.py)


def graph_grad(
    loss: Tensor[Any], wrt: Wrt = None, inputs: InputList = None, with_value: bool = False
) -> GraphGrad:
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
