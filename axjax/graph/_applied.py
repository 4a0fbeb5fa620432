"""What nodes made by applying an op share: the op, the operand nodes and the ``file:line``
that built them (:class:`Applied`, a base of ``Apply`` and ``MultiApply``), and the walk over
operands that orders a graph (:func:`toposort`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..core import Op
from ..core._internal import user_site as user_site

if TYPE_CHECKING:
    from ._nodes import AnyNode

__all__ = ["Applied", "toposort", "user_site"]


class Applied:
    """What a node made by applying an op has (:class:`~axjax.graph.Apply`,
    :class:`~axjax.graph.MultiApply`): the op, its operand nodes and the ``file:line`` that
    built it."""

    __slots__ = ()
    _op: Op
    _args: tuple[AnyNode, ...]
    _site: str

    def _applied(self, op: Op, args: tuple[AnyNode, ...]) -> None:
        object.__setattr__(self, "_op", op)
        object.__setattr__(self, "_args", tuple(args))
        object.__setattr__(self, "_site", user_site())

    @property
    def op(self) -> Op:
        return self._op

    @property
    def args(self) -> tuple[AnyNode, ...]:
        return self._args

    @property
    def site(self) -> str:
        return self._site

    def op_label(self) -> str:
        return self._op.describe()


def toposort(
    outputs: Sequence[AnyNode], descend: Callable[[AnyNode], bool] | None = None
) -> tuple[AnyNode, ...]:
    """Operands before users, each node once (iterative DFS: linear, no recursion limit).

    ``descend(node) -> False`` keeps a node but not its operands (a loop body stops there).
    """
    order: list[AnyNode] = []
    seen: set[int] = set()
    for out in outputs:
        if id(out) in seen:
            continue
        stack: list[tuple[AnyNode, int]] = [(out, 0)]
        seen.add(id(out))
        while stack:
            node, i = stack[-1]
            args = node.args if descend is None or descend(node) else ()
            if i < len(args):
                stack[-1] = (node, i + 1)
                arg = args[i]
                if id(arg) not in seen:
                    seen.add(id(arg))
                    stack.append((arg, 0))
            else:
                stack.pop()
                order.append(node)
    return tuple(order)
