"""The recurrence node: :class:`Loop` (``ax.fold`` / ``ax.scan`` on nodes) and the
placeholders of its body, :class:`Carry` (a leaf of the state) and :class:`Slice` (one step
of a sequence).

``ax.fold`` / ``ax.scan`` on nodes trace their unit once, on placeholders for one
step, into the body of a single :class:`Loop` node (lowered to one ``lax.scan``); the
state they return is made of the Loop's ``Part`` nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, TypeVarTuple

import jax

from ..core import AnyTensor, DType, TensorType
from ._applied import toposort, user_site
from ._nodes import AnyNode, Const, Node, Part, Results

__all__ = ["Loop", "Carry", "Slice", "Lowering"]

D = TypeVar("D", bound=DType)
Axes = TypeVarTuple("Axes")
#: ``lowering(unit, init, xs, mask) -> state``: the eager fold/scan a Loop runs when compiled
Lowering = Callable[[Callable[[Any, Any], Any], Any, Any, Any], Any]


class Carry(Node[D, *Axes]):
    """A placeholder in a :class:`Loop` body: one leaf of the state the loop carries."""

    __slots__ = ()
    kind = "Carry"

    def __init__(self, type_: TensorType) -> None:
        self._init(type_, None)


class Slice(Node[D, *Axes]):
    """A placeholder in a :class:`Loop` body: one step of a sequence (the scanned axis gone)."""

    __slots__ = ()
    kind = "Slice"

    def __init__(self, type_: TensorType) -> None:
        self._init(type_, None)


class Loop(Results):
    """A recurrence over graph nodes: ``ax.fold`` / ``ax.scan``, one ``lax.scan`` when
    compiled. Its results are its :attr:`parts`, one :class:`Part` per leaf of the state.

    The unit was traced once, on placeholders for one step, into :attr:`body`: the
    :attr:`carries` (the state's leaves), the :attr:`slices` (one step of each sequence),
    then the nodes the unit built, in topological order; :attr:`results` are the nodes it
    returned as the next state. ``.args`` are the initial state's leaves, the sequences'
    leaves, the mask (when given), then :attr:`captured`: the nodes the body reads from
    outside (the unit's Params and Consts, and any node built before the loop).

    A Loop is not one Tensor: ``.type``, ``.axes`` and using it as an operand raise.
    """

    _parts_hint = "the state that ax.nn.fold / ax.nn.scan returned"

    __slots__ = (
        "_what",
        "_args",
        "_site",
        "_carries",
        "_slices",
        "_results",
        "_body",
        "_captured",
        "_parts",
        "_lowering",
        "_state_def",
        "_xs_def",
        "_masked",
    )
    kind = "Loop"

    _what: str
    _args: tuple[AnyNode, ...]
    _site: str
    _carries: tuple[AnyNode, ...]
    _slices: tuple[AnyNode, ...]
    _results: tuple[AnyNode, ...]
    _body: tuple[AnyNode, ...]
    _captured: tuple[AnyNode, ...]
    _parts: tuple[Part[Any, *tuple[Any, ...]], ...]
    _lowering: Lowering
    # the pytree structures (jax.tree_util.PyTreeDef, which pyright cannot use: no stub)
    _state_def: object
    _xs_def: object
    _masked: bool

    def __init__(
        self,
        what: str,
        lowering: Lowering,
        init: Sequence[Any],
        xs: Sequence[Any],
        mask: AnyTensor | None,
        carries: Sequence[AnyNode],
        slices: Sequence[AnyNode],
        results: Sequence[Any],
        types: Sequence[TensorType],
        state_def: object,
        xs_def: object,
        start: int,
    ) -> None:
        self._blank()
        holes = {id(n) for n in (*carries, *slices)}
        results = [r if isinstance(r, Node) else Const(r) for r in results]  # eager: Consts

        def inside(n: AnyNode) -> bool:  # built by the unit: a body node, not captured
            return id(n) not in holes and n._serial >= start and bool(n.args)

        walked = toposort(results, inside)
        body = (*carries, *slices, *(n for n in walked if inside(n)))
        captured = tuple(n for n in walked if id(n) not in holes and not inside(n))
        outer = [
            x if isinstance(x, Node) else Const(x)
            for x in (*init, *xs, *(() if mask is None else (mask,)))
        ]
        fields = {
            "_what": what,
            "_args": (*outer, *captured),
            "_site": user_site(),
            "_carries": tuple(carries),
            "_slices": tuple(slices),
            "_results": tuple(results),
            "_body": body,
            "_captured": captured,
            "_lowering": lowering,
            "_state_def": state_def,
            "_xs_def": xs_def,
            "_masked": mask is not None,
        }
        for k, v in fields.items():
            object.__setattr__(self, k, v)
        paths = [
            jax.tree_util.keystr(p)
            for p, _ in jax.tree_util.tree_flatten_with_path(
                jax.tree_util.tree_unflatten(state_def, [0] * len(types))
            )[0]
        ]
        object.__setattr__(
            self,
            "_parts",
            tuple(
                Part(self, k, t, path) for k, (t, path) in enumerate(zip(types, paths, strict=True))
            ),
        )

    # ------------------------------------------------------------------ structure
    @property
    def args(self) -> tuple[AnyNode, ...]:
        return self._args

    @property
    def carries(self) -> tuple[AnyNode, ...]:
        return self._carries

    @property
    def slices(self) -> tuple[AnyNode, ...]:
        return self._slices

    @property
    def results(self) -> tuple[AnyNode, ...]:
        return self._results

    @property
    def body(self) -> tuple[AnyNode, ...]:
        return self._body

    @property
    def captured(self) -> tuple[AnyNode, ...]:
        return self._captured

    @property
    def masked(self) -> bool:
        return self._masked

    @property
    def state_def(self) -> object:
        """The pytree structure of the state (its leaves are the carries and the parts)."""
        return self._state_def

    @property
    def xs_def(self) -> object:
        """The pytree structure of the sequences (its leaves are the slices)."""
        return self._xs_def

    @property
    def lowering(self) -> Lowering:
        """``lowering(unit, init, xs, mask)``: the eager fold/scan that compiling runs."""
        return self._lowering

    def op_label(self) -> str:
        return self._what

    def describe(self) -> str:
        """``Fold(Time)``, ``Scan(Time, reverse, masked)``."""
        return self._what

    def __repr__(self) -> str:
        return f"Loop {self._what}: {self.types()}"
