"""Graph nodes, the paper's GADT: the :class:`Node` base, the leaves ``Input``, ``Param``
and ``Const``, ``Apply`` (an op applied to nodes) and the nodes with several results: their
base :class:`Results`, ``MultiApply`` (an op with several results) and ``Part`` (one
result). The recurrence ``Loop`` is in ``_loop.py``, which builds on this module.

A node is a symbolic ``Tensor[D, *Axes]``: it has a dtype, axes and sizes (a size may be
``None`` until the graph is compiled) but no array. Applying any op to a node runs the op's
type rule at once (so an axis mistake fails on the line that builds the graph) and returns
an :class:`Apply` node. Nodes are immutable and hashed by identity.

Example:
    >>> x = ax.Input(ax.F32, Batch, In, sizes={In: 2}, name="x")
    >>> w = ax.Param(ax.normal(key, (2, 3), In, Hidden), name="w")
    >>> h = ax.sigmoid(x @ w)      # Apply node, Tensor[F32, Batch=?, Hidden=3]
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeVar, TypeVarTuple, cast, overload

import jax

from ..core import AnyTensor, Axis, AxisError, DType, Op, Tensor, TensorType
from ..core._internal import (
    axis_name,
    check_axis_label,
    check_unique_axes,
    constructed,
    describe,
    dtype_marker,
    origins,
    provenance_enabled,
)
from ._applied import Applied
from ._check import check_value, input_sizes

if TYPE_CHECKING:  # the modules that build on this one: types only here
    from ._compile import InputList
    from ._graph_grad import GraphGrad, Wrt
    from ._loop import Loop

__all__ = [
    "Node",
    "AnyNode",
    "Input",
    "Param",
    "Const",
    "Apply",
    "Results",
    "MultiApply",
    "Part",
    "mark",
    "ABOVE",
]

D = TypeVar("D", bound=DType)
Axes = TypeVarTuple("Axes")
# the dtype and label type variables of the generated Input overloads (tools/gen_overloads.py)
DIn = TypeVar("DIn", bound=DType)  # not D, which the Input class binds
A0 = TypeVar("A0", bound=Axis)
A1 = TypeVar("A1", bound=Axis)
A2 = TypeVar("A2", bound=Axis)
A3 = TypeVar("A3", bound=Axis)
A4 = TypeVar("A4", bound=Axis)
A5 = TypeVar("A5", bound=Axis)

_serial = itertools.count()


def mark() -> int:
    """A serial number: every node built after this call has a larger one."""
    return next(_serial)


class Node(Tensor[D, *Axes]):
    """Base of graph nodes: a symbolic ``Tensor`` with a type but no value.

    ``.dtype``, ``.axes``, ``.shape`` and ``.sizes`` work as on a Tensor (open sizes are
    ``None``); ``.array`` and conversions to numbers raise, since there is no value until
    the graph is compiled with :func:`axjax.compile`.
    """

    __slots__ = ("_type", "_name", "_serial")
    _is_symbolic: ClassVar[bool] = True
    #: the node kind shown in listings ("Input", "Param", "Const", "Apply")
    kind: ClassVar[str] = "Node"

    _type: TensorType
    _name: str | None
    _serial: int

    # -- the protocol core calls (axjax.core._internal.Symbolic) ------------------------
    def record_apply(
        self, op: Op, operands: tuple[Any, ...], out_type: TensorType | tuple[TensorType, ...]
    ) -> Node[Any, *tuple[Any, ...]] | tuple[Node[Any, *tuple[Any, ...]], ...]:
        """The node applying ``op`` builds: eager Tensors become Consts, the result an
        Apply node (a tuple of Parts of one MultiApply node for an op with several
        results)."""
        args = tuple(x if isinstance(x, Node) else Const(x) for x in operands)
        if isinstance(out_type, tuple):
            return MultiApply(op, args, out_type).parts
        return Apply(op, args, out_type)

    def differentiate(self, wrt: Wrt, inputs: InputList, with_value: bool) -> GraphGrad:
        """``ax.grad`` / ``ax.value_and_grad`` of this scalar loss node (``ABOVE.gradient``:
        a :class:`~axjax.graph.GraphGrad`)."""
        return ABOVE.gradient(self, wrt, inputs, with_value)

    def _init(self, type_: TensorType, name: str | None, serial: int | None = None) -> None:
        if name is not None and not isinstance(name, str):
            raise TypeError(f"{type(self).__name__}: name must be a string, got {name!r}")
        object.__setattr__(self, "_type", type_)
        object.__setattr__(self, "_axes", type_.axes)
        object.__setattr__(self, "_array", None)  # no value (core code may probe it)
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_serial", next(_serial) if serial is None else serial)
        if provenance_enabled() and not isinstance(self, Applied):  # a leaf: its own line
            object.__setattr__(self, "_prov", constructed(len(type_.axes), f"ax.{self.kind}"))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"graph nodes are immutable (cannot set {name})")

    # ------------------------------------------------------------------ type
    @property
    def name(self) -> str | None:
        """The name given at construction (``None`` if none)."""
        return self._name

    @property
    def dtype(self) -> type[D]:
        return self._type.dtype  # type: ignore[return-value]  # _type is the node's own type

    @property
    def axes(self) -> tuple[type[Axis], ...]:
        return self._type.axes

    @property
    def shape(self) -> tuple[int, ...]:
        """Sizes in axis order; an open size is ``None``."""
        return self._type.shape  # type: ignore[return-value]  # Tensor's signature; open sizes are None

    @property
    def sizes(self) -> dict[type[Axis], int]:
        return self._type.sizes  # type: ignore[return-value]  # Tensor's signature; open sizes are None

    @property
    def ndim(self) -> int:
        return len(self._type.axes)

    def size(self, axis: type[Axis]) -> int:
        """The size of ``axis``; an ``AxisError`` if it is open until compile."""
        if axis not in self.axes:
            raise AxisError(
                f"Cannot read the size of axis {axis_name(axis)} of "
                f"{describe(self)}: {axis_name(axis)} is not an axis of the node"
            )
        n = self._type.shape[self.axes.index(axis)]
        if n is None:
            raise AxisError(
                f"Cannot read the size of axis {axis_name(axis)} of {describe(self)}: it is "
                "not known until the graph is called (give it with ax.Input(..., sizes=...), "
                "or broadcast against a node: ax.broadcast(t, node))"
            )
        return n

    @property
    def args(self) -> tuple[Node[Any, *tuple[Any, ...]], ...]:
        """The operand nodes (none for a leaf)."""
        return ()

    def op_label(self) -> str:
        """What the node computes, as listings show it (its kind for a leaf)."""
        return self.kind

    # ------------------------------------------------------------------ no value
    def _no_value(self, what: str) -> NoReturn:
        hint = " (its value is .value)" if isinstance(self, Param | Const) else ""
        raise TypeError(
            f"{self.label()} is a symbolic graph node{hint}: {what} has no value until the "
            "graph is compiled and called (ax.compile(outputs, inputs=[...]))"
        )

    @property
    def array(self) -> jax.Array:
        self._no_value(".array")

    def __array__(self, dtype: object = None, copy: bool | None = None) -> NoReturn:
        self._no_value("np.asarray(node)")

    def __bool__(self) -> bool:
        self._no_value("bool(node)")

    def __float__(self) -> float:
        self._no_value("float(node)")

    def __int__(self) -> int:
        self._no_value("int(node)")

    def item(self) -> NoReturn:
        self._no_value("node.item()")

    # ------------------------------------------------------------------ display
    def label(self) -> str:
        """How messages name the node: its kind and name (``Input x``)."""
        return f"{self.kind} {self._name}" if self._name else self.kind

    def __repr__(self) -> str:
        return f"{self.label()}: {describe(self._type)}"

    def _repr_html_(self) -> str:
        return ABOVE.html(self)  # the drawing of the node's graph (_graph.py)

    @property
    def type(self) -> TensorType:  # last: the name would shadow `type[...]` in annotations
        """The node's :class:`TensorType` (dtype, axes, sizes with ``None`` for open)."""
        return self._type


AnyNode = Node[Any, *tuple[Any, ...]]


class Above:
    """What a node does through the modules that build on this one, which this one cannot
    import: each registers its part when it loads (``axjax/graph/__init__.py`` imports them
    all, so both are set before any node exists).

    Attributes:
        gradient: ``ax.grad`` of a loss node, ``(loss, wrt, inputs, with_value) ->
            GraphGrad`` (``_graph_grad.py``).
        html: the drawing and listing Jupyter shows for a node, ``node -> str``
            (``_graph.py``: its graph's ``to_html()``).

    Example:
        >>> ABOVE.html = lambda node: Graph(node).to_html()   # in _graph.py
    """

    gradient: Callable[[AnyNode, Wrt, InputList, bool], GraphGrad]
    html: Callable[[AnyNode], str]


ABOVE = Above()


class Input(Node[D, *Axes]):
    """A graph input: a symbolic ``Tensor[D, *Axes]`` whose value is given at each call.

    Args:
        dtype: the dtype marker (``ax.F32``).
        *axes: the axis labels, in order.
        sizes: known sizes, as ``{Axis: n}`` or one ``int | None`` per axis; the others stay
            open until the compiled graph is called (each call binds them).
        name: shown in listings; also the keyword the compiled function accepts.

    Example:
        >>> x = ax.Input(ax.F32, Batch, Pixel, sizes={Pixel: 784}, name="x")
        >>> x
        Input x: Tensor[F32, Batch=?, Pixel=784]
    """

    __slots__ = ()
    kind = "Input"

    # BEGIN GENERATED by tools/gen_overloads.py: the constructor's types (do not edit)
    @overload
    def __init__(
        self: Input[DIn],
        dtype: type[DIn],
        /,
        *,
        sizes: Mapping[type[Axis], int | None] | Sequence[int | None] | None = None,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Input[DIn, A0],
        dtype: type[DIn],
        a0: type[A0],
        /,
        *,
        sizes: Mapping[type[Axis], int | None] | Sequence[int | None] | None = None,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Input[DIn, A0, A1],
        dtype: type[DIn],
        a0: type[A0],
        a1: type[A1],
        /,
        *,
        sizes: Mapping[type[Axis], int | None] | Sequence[int | None] | None = None,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Input[DIn, A0, A1, A2],
        dtype: type[DIn],
        a0: type[A0],
        a1: type[A1],
        a2: type[A2],
        /,
        *,
        sizes: Mapping[type[Axis], int | None] | Sequence[int | None] | None = None,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Input[DIn, A0, A1, A2, A3],
        dtype: type[DIn],
        a0: type[A0],
        a1: type[A1],
        a2: type[A2],
        a3: type[A3],
        /,
        *,
        sizes: Mapping[type[Axis], int | None] | Sequence[int | None] | None = None,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Input[DIn, A0, A1, A2, A3, A4],
        dtype: type[DIn],
        a0: type[A0],
        a1: type[A1],
        a2: type[A2],
        a3: type[A3],
        a4: type[A4],
        /,
        *,
        sizes: Mapping[type[Axis], int | None] | Sequence[int | None] | None = None,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Input[DIn, A0, A1, A2, A3, A4, A5],
        dtype: type[DIn],
        a0: type[A0],
        a1: type[A1],
        a2: type[A2],
        a3: type[A3],
        a4: type[A4],
        a5: type[A5],
        /,
        *,
        sizes: Mapping[type[Axis], int | None] | Sequence[int | None] | None = None,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Input[DIn, *tuple[Any, ...]],
        dtype: type[DIn],
        a0: type[Axis],
        a1: type[Axis],
        a2: type[Axis],
        a3: type[Axis],
        a4: type[Axis],
        a5: type[Axis],
        a6: type[Axis],
        /,
        *axes: type[Axis],
        sizes: Mapping[type[Axis], int | None] | Sequence[int | None] | None = None,
        name: str | None = None,
    ) -> None: ...
    # END GENERATED
    def __init__(
        self,
        dtype: type[DType],
        *axes: type[Axis],
        sizes: Mapping[type[Axis], int | None] | Sequence[int | None] | None = None,
        name: str | None = None,
    ) -> None:
        if isinstance(dtype, type) and issubclass(dtype, Axis):
            raise TypeError(
                f"Input: the first argument is the dtype marker, got axis "
                f"{axis_name(dtype)} (write ax.Input(ax.F32, {axis_name(dtype)}, ...))"
            )
        marker = dtype_marker(dtype)
        labels = tuple(check_axis_label(a, "Input") for a in axes)
        check_unique_axes(labels, "Input")
        self._init(TensorType(marker, labels, input_sizes(labels, sizes)), name)


class _ParamId:
    """The identity of a Param, shared by every copy JAX or optax makes of it."""

    __slots__ = ("name", "type", "serial")
    name: str | None
    type: TensorType
    serial: int

    def __init__(self, name: str | None, type_: TensorType) -> None:
        self.name, self.type, self.serial = name, type_, next(_serial)


class Param(Node[D, *Axes]):
    """A trainable graph leaf holding a value: ``ax.Param(tensor, name="w")``.

    It is a pytree whose one leaf is the value's array, so a tuple of Params (or an
    Equinox module holding them) goes through ``jax.grad`` and optax; every copy made that
    way is the same parameter with a new value (it compares equal and hashes alike). Pass
    updated Params to a compiled graph with ``params=``.

    Example:
        >>> w = ax.Param(ax.zeros((2, 3), In, Hidden), name="w")
        >>> w.value.sizes
        {<class 'In'>: 2, <class 'Hidden'>: 3}
    """

    __slots__ = ("_id", "_value")
    kind = "Param"

    _id: _ParamId
    _value: Tensor[D, *Axes]

    def __init__(self, value: Tensor[D, *Axes], name: str | None = None) -> None:
        if isinstance(value, Node) or not isinstance(value, Tensor):
            raise TypeError(
                f"Param holds a Tensor value (ax.Param(ax.zeros((2, 3), A, B))), got {value!r}"
            )
        pid = _ParamId(name, value.type)
        self._init(pid.type, name, pid.serial)
        object.__setattr__(self, "_id", pid)
        object.__setattr__(self, "_value", value)

    @classmethod
    def _rebuild(cls, pid: _ParamId, value: AnyTensor) -> Param[Any, *tuple[Any, ...]]:
        p = object.__new__(cls)
        Node._init(p, pid.type, pid.name, pid.serial)
        object.__setattr__(p, "_id", pid)
        object.__setattr__(p, "_value", value)
        return p

    def rebound(self, value: AnyTensor) -> Param[Any, *tuple[Any, ...]]:
        """The same parameter holding ``value``, unchecked (for values the library made
        from this Param's own, such as an optimizer update; users call :meth:`replace`)."""
        return self._rebuild(self._id, value)

    @staticmethod
    def flatten(p: Param[Any, *tuple[Any, ...]]) -> tuple[tuple[AnyTensor], _ParamId]:
        """The pytree flattening: the value is the leaf, the identity the aux data."""
        return (p._value,), p._id

    @staticmethod
    def flatten_with_keys(
        p: Param[Any, *tuple[Any, ...]],
    ) -> tuple[tuple[tuple[object, AnyTensor]], _ParamId]:  # (GetAttrKey, value): no stub
        return ((jax.tree_util.GetAttrKey("value"), p._value),), p._id

    @staticmethod
    def unflatten(pid: _ParamId, children: Iterable[AnyTensor]) -> Param[Any, *tuple[Any, ...]]:
        return Param._rebuild(pid, tuple(children)[0])

    @property
    def value(self) -> Tensor[D, *Axes]:
        """The value this Param holds (a concrete Tensor)."""
        return self._value

    def replace(self, value: Tensor[D, *Axes]) -> Param[D, *Axes]:
        """The same parameter with a new value (checked against its axes, sizes, dtype)."""
        check_value(self, value, "Param.replace")
        return cast("Param[D, *Axes]", self._rebuild(self._id, value))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Param) and other._id is self._id

    def __hash__(self) -> int:
        return id(self._id)


jax.tree_util.register_pytree_with_keys(
    Param, Param.flatten_with_keys, Param.unflatten, Param.flatten
)


class Const(Node[D, *Axes]):
    """A constant graph leaf: its value is fixed and gets no gradient.

    Eager Tensors mixed into a symbolic op become Consts automatically.

    Example:
        >>> half = ax.Const(ax.full((), value=0.5))
    """

    __slots__ = ("_value",)
    kind = "Const"

    _value: Tensor[D, *Axes]

    def __init__(self, value: Tensor[D, *Axes], name: str | None = None) -> None:
        if isinstance(value, Node) or not isinstance(value, Tensor):
            raise TypeError(f"Const holds a Tensor value, got {value!r}")
        self._init(value.type, name)
        object.__setattr__(self, "_value", value)
        if origins(value) is not None:  # an eager tensor in a graph keeps its own record
            object.__setattr__(self, "_prov", origins(value))

    @property
    def value(self) -> Tensor[D, *Axes]:
        """The constant value (a concrete Tensor)."""
        return self._value


class Apply(Applied, Node[D, *Axes]):
    """An op applied to nodes; built by calling any op with a symbolic argument.

    ``.op`` is the :class:`axjax.Op` (with its static parameters), ``.args`` the operand
    nodes and ``.site`` the ``file:line`` that built it (shown in errors at call time).
    """

    __slots__ = ("_op", "_args", "_site")
    kind = "Apply"

    def __init__(
        self, op: Op, args: tuple[AnyNode, ...], type_: TensorType, name: str | None = None
    ) -> None:
        self._init(type_, name)
        self._applied(op, args)

    def __repr__(self) -> str:
        return f"Apply {self._op.describe()}: {describe(self._type)}"


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
        if self._source.kind != "Loop":  # _loop builds on this module: the kind names it
            raise TypeError(f"{self!r} is a result of {self._source!r}, not of a Loop")
        return cast("Loop", self._source)

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
