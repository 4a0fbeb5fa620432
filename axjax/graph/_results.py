"""Nodes with several results: the :class:`Results` base (of ``MultiApply`` and ``Loop``),
:class:`MultiApply` (an op with several results applied to nodes, ``ax.unstack``) and
:class:`Part`, one result of such a node.

A node with several results is not one Tensor: ``.type``, ``.axes`` and using it as an
operand raise; each result is one of its :attr:`~Results.parts`, a ``Part`` node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeVar, TypeVarTuple

from ..core import Axis, DType, Op, TensorType
from ..core._internal import describe
from ._applied import Applied
from ._nodes import AnyNode, Node, mark

if TYPE_CHECKING:
    from ._loop import Loop

__all__ = ["Results", "MultiApply", "Part"]

D = TypeVar("D", bound=DType)
Axes = TypeVarTuple("Axes")


class Results(Node[Any]):
    """Base of nodes with several results (:class:`Loop`, :class:`MultiApply`): not one
    Tensor. Its results are its :attr:`parts`, one :class:`Part` node each; ``.type``,
    ``.axes`` and using it as an operand raise."""

    __slots__ = ()
    _parts: tuple[Part[Any, *tuple[Any, ...]], ...]
    _site: str

    def _blank(self) -> None:
        object.__setattr__(self, "_type", None)
        object.__setattr__(self, "_axes", ())
        object.__setattr__(self, "_array", None)
        object.__setattr__(self, "_name", None)
        object.__setattr__(self, "_serial", mark())

    @property
    def parts(self) -> tuple[Part[Any, *tuple[Any, ...]], ...]:
        return self._parts

    @property
    def site(self) -> str:
        """``file:line`` of the call that built the node (the op, or the fold/scan)."""
        return self._site

    def types(self) -> str:
        """The types of the results, as listings show them."""
        shown = ", ".join(describe(p.type) for p in self._parts)
        return shown if len(self._parts) == 1 else f"({shown})"

    def _several(self) -> NoReturn:
        raise TypeError(
            f"{self!r} holds {len(self._parts)} result"
            f"{'s' * (len(self._parts) != 1)}, not one Tensor: use its parts "
            f"({self._parts_hint})"
        )

    _parts_hint: ClassVar[str] = "node.parts"

    @property
    def dtype(self) -> NoReturn:
        self._several()

    @property
    def axes(self) -> tuple[type[Axis], ...]:
        self._several()

    @property
    def shape(self) -> tuple[int, ...]:
        self._several()

    @property
    def sizes(self) -> dict[type[Axis], int]:
        self._several()

    @property
    def ndim(self) -> int:
        self._several()

    def size(self, axis: type[Axis]) -> int:
        self._several()

    @property
    def type(self) -> TensorType:
        self._several()


class MultiApply(Applied, Results):
    """An op with several results applied to nodes (``ax.unstack``): one node, computed
    once; each result is one of its :attr:`parts` (``Part[0]``, ``Part[1]``, ...), so the
    op's own backward (one concatenate for ``Unstack``) is the one used.

    Example:
        >>> i, f, g, o = ax.unstack(z, Gate)   # z a node: four Parts of one MultiApply
        >>> i.source.op
        Unstack(Gate)
    """

    __slots__ = ("_op", "_args", "_site", "_parts")
    kind = "MultiApply"
    _parts_hint = "the tuple the op returned"

    def __init__(self, op: Op, args: tuple[AnyNode, ...], types: Sequence[TensorType]) -> None:
        self._blank()
        self._applied(op, args)
        object.__setattr__(
            self, "_parts", tuple(Part(self, k, t, f"[{k}]") for k, t in enumerate(types))
        )

    def __repr__(self) -> str:
        return f"MultiApply {self._op.describe()}: {self.types()}"


class Part(Node[D, *Axes]):
    """One result of a node with several results: of a :class:`Loop`, a leaf of the last
    state (fold) or of every state, stacked along the scanned axis (scan); of a
    :class:`MultiApply`, one of the op's results. ``.source`` (``.loop`` for a Loop),
    ``.index`` (the result's position)."""

    __slots__ = ("_source", "_index", "_path")
    kind = "Part"

    _source: Results
    _index: int
    _path: str

    def __init__(self, source: Results, index: int, type_: TensorType, path: str) -> None:
        self._init(type_, None)
        object.__setattr__(self, "_source", source)
        object.__setattr__(self, "_index", index)
        object.__setattr__(self, "_path", path)

    @property
    def path(self) -> str:
        """Where this part sits in its source's result (``[0]``, ``.h``, ...)."""
        return self._path

    @property
    def source(self) -> Results:
        """The node whose result this is."""
        return self._source

    @property
    def loop(self) -> Loop:
        """The :class:`Loop` whose result this is (a ``TypeError`` for another source)."""
        from ._loop import Loop  # _loop builds on this module

        if not isinstance(self._source, Loop):
            raise TypeError(f"{self!r} is a result of {self._source!r}, not of a Loop")
        return self._source

    @property
    def index(self) -> int:
        return self._index

    @property
    def args(self) -> tuple[AnyNode, ...]:
        return (self._source,)

    @property
    def site(self) -> str:
        return self._source.site

    def op_label(self) -> str:
        return f"Part{self._path}"

    def __repr__(self) -> str:
        return f"Part{self._path} of {self._source.op_label()}: {describe(self._type)}"
