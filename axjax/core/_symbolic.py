"""What core asks of a graph node: the one seam between ``axjax.core`` and ``axjax.graph``.

Core never imports the graph package. A graph node is a ``Tensor`` subclass whose class
sets ``_is_symbolic = True`` and implements this protocol; core calls it when an op meets a
node (build an ``Apply`` node instead of computing) and when ``ax.grad`` is given a node
instead of a function (differentiate the graph).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ._op import Op
    from ._tensor import AnyTensor
    from ._tensor_type import TensorType

__all__ = ["Symbolic", "is_symbolic"]


class Symbolic(Protocol):
    """A graph node as core sees it (``axjax.graph.Node`` implements it)."""

    def record_apply(
        self, op: Op, operands: tuple[Any, ...], out_type: TensorType | tuple[TensorType, ...]
    ) -> AnyTensor | tuple[AnyTensor, ...]:
        """The node (or nodes) that applying ``op`` to ``operands`` builds."""
        ...

    def differentiate(self, wrt: object, inputs: object, with_value: bool) -> Callable[..., Any]:
        """``ax.grad`` / ``ax.value_and_grad`` of this scalar node (a jitted function)."""
        ...


def is_symbolic(x: object) -> bool:
    """``True`` for a graph node (a symbolic Tensor with no value yet)."""
    return bool(getattr(type(x), "_is_symbolic", False))
