"""Lowering a graph to one ``jax.jit`` function; gradients and an optax step over a graph.

The graph is walked once, in topological order, into the same op calls eager code makes
(:func:`axjax.core._op.apply` on concrete Tensors), inside one ``jax.jit``. So every op's
type rule re-runs with the real sizes at trace time, and every op's own ``backward`` is
what differentiation uses. Param and Const values are arguments of the jitted function,
not baked-in constants: new values never retrace; new input sizes compile once each.
A :class:`~axjax.graph.Loop` (``ax.fold`` / ``ax.scan`` on nodes) runs the
eager fold/scan, one ``lax.scan``, whose unit evaluates the loop's body the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeGuard, TypeVar, TypeVarTuple, cast, overload

import jax
import jax.numpy as jnp
import numpy as np

from ..core import AnyTensor, AxisError, DType, Op, Tensor, config
from ..core._internal import (
    PyTree,
    apply,
    checking_finite,
    describe,
    fit_dtype,
    node_site,
    trusted_tensor,
)
from ._check import check_value, mismatch
from ._graph import Graph, Outputs, Structure, same_value
from ._loop import Loop
from ._nodes import Apply, Const, Input, MultiApply, Node, Param, Part

__all__ = ["compile", "CompiledGraph"]

AnyParam = Param[Any, *tuple[Any, ...]]
AnyInput = Input[Any, *tuple[Any, ...]]
AnyNode = Node[Any, *tuple[Any, ...]]
#: the ``inputs=`` of compile / grad: the Inputs in argument order (``None``: the graph's own)
InputList = Sequence[AnyTensor] | AnyTensor | None
#: one computed node: (its slot, the node, its operands' slots, how: the op of an Apply,
#: the plan of a Loop's body, the index of a Part)
Step = tuple[int, AnyNode, tuple[int, ...], "Op | LoopPlan | int"]


class Program:
    """A graph ready to run: leaf sources, one step per Apply node, output slots."""

    def __init__(self, outputs: Outputs, inputs: InputList, where: str) -> None:
        self.where = where
        self.graph: Graph = Graph(outputs)
        graph = self.graph
        self.inputs: tuple[AnyInput, ...] = _check_inputs(graph, inputs, where)
        self.params: tuple[AnyParam, ...] = graph.params
        self.param_index: dict[AnyParam, int] = {p: i for i, p in enumerate(self.params)}
        self.const_values: tuple[AnyTensor, ...] = tuple(c.value for c in graph.consts)
        slot = {id(n): k for k, n in enumerate(graph.nodes)}
        input_index = {id(x): i for i, x in enumerate(self.inputs)}
        const_index = {id(c): i for i, c in enumerate(graph.consts)}
        self.leaves: list[tuple[int, int, int]] = []  # (slot, 0 param / 1 const / 2 input, i)
        for k, n in enumerate(graph.nodes):
            if isinstance(n, Param):
                self.leaves.append((k, 0, self.param_index[n]))
            elif isinstance(n, Const):
                self.leaves.append((k, 1, const_index[id(n)]))
            elif isinstance(n, Input):
                self.leaves.append((k, 2, input_index[id(n)]))
        self.steps: list[Step] = plan_steps(
            graph.nodes, {k for k, _, _ in self.leaves}, graph.names
        )
        self.out_slots: tuple[int, ...] = tuple(slot[id(o)] for o in graph.outputs)

    def run(
        self, params: Sequence[AnyTensor], consts: Sequence[AnyTensor], inputs: Sequence[AnyTensor]
    ) -> tuple[AnyTensor, ...]:
        """Evaluate the graph on concrete (or traced) Tensors: one op call per Apply node."""
        env: list[Any] = [None] * len(self.graph.nodes)
        sources = (params, consts, inputs)
        for k, src, i in self.leaves:
            env[k] = sources[src][i]
        execute(self.steps, env, self.graph.names)
        return tuple(env[s] for s in self.out_slots)

    # ------------------------------------------------------------------ call arguments
    def bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[AnyTensor, ...]:
        """Match call arguments to the inputs (by position, or by name) and check them."""
        if not kwargs and len(args) == len(self.inputs):  # the per-step fast path
            fast = [_fits(v, x) for x, v in zip(self.inputs, args, strict=True)]
            if all(fast):
                return tuple(args)
        names = [x.name or f"input{i}" for i, x in enumerate(self.inputs)]
        listing = ", ".join(names)
        if len(args) > len(names):
            raise TypeError(
                f"{self.where} takes {len(names)} input{'s' * (len(names) != 1)} "
                f"({listing}) but {len(args)} were given"
            )
        given: dict[int, Any] = dict(enumerate(args))
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError(f"{self.where} got an unknown input {key!r} (inputs: {listing})")
            i = names.index(key)
            if i in given:
                raise TypeError(f"{self.where} got input {key!r} twice")
            given[i] = value
        missing = [names[i] for i in range(len(names)) if i not in given]
        if missing:
            raise TypeError(
                f"{self.where} is missing input{'s' * (len(missing) > 1)} "
                f"{', '.join(missing)} (inputs: {listing})"
            )
        return tuple(self._tensor(x, names[i], given[i]) for i, x in enumerate(self.inputs))

    def _tensor(self, x: AnyInput, name: str, value: object) -> AnyTensor:
        if _fits(value, x):
            return value
        head = f"Cannot call {self.where}: input {name} is {describe(x.type)}"
        if isinstance(value, Node):
            raise TypeError(f"{head}, got the graph node {value!r} (pass a value)")
        if not isinstance(value, Tensor):
            value = _from_array(x, value, head)
        why = mismatch(x.type, value)
        if why:
            raise AxisError(f"{head}, got {describe(value)}: {why}")
        checked: AnyTensor = value
        return checked

    def values(self, override: PyTree) -> tuple[AnyTensor, ...]:
        """Param values: the Params' own, replaced by those in ``override`` (see ``params=``)."""
        vals = [p.value for p in self.params]
        if override is None:
            return tuple(vals)
        if isinstance(override, Mapping) and any(isinstance(k, Param) for k in override):
            pairs = list(override.items())
        else:
            leaves = jax.tree_util.tree_leaves(override, is_leaf=lambda t: isinstance(t, Param))
            pairs = [(p, p.value) for p in leaves if isinstance(p, Param)]
            if not pairs:
                raise TypeError(
                    f"{self.where}: params= holds no Params (give {{param: value}}"
                    ", Params with new values, or a model holding Params)"
                )
        given: dict[int, AnyTensor] = {}
        for p, v in pairs:
            if not isinstance(p, Param):
                raise TypeError(f"{self.where}: params= maps Params to values, got key {p!r}")
            i = self.param_index.get(p)
            if i is not None:
                check_value(p, v, self.where)
                if i in given and not same_value(given[i], v):
                    raise ValueError(
                        f"{self.where}: params= holds Param {p.name or '(unnamed)'} twice, "
                        "with two different values: give one value per Param"
                    )
                vals[i] = given[i] = v
        return tuple(vals)


def plan_steps(
    nodes: Sequence[AnyNode], given: set[int], names: Mapping[AnyNode, str]
) -> list[Step]:
    """One step per computed node of ``nodes`` (the slots in ``given`` get their values
    from outside); a Loop's step holds the plan of its body."""
    slot = {id(n): k for k, n in enumerate(nodes)}
    steps: list[Step] = []
    for k, n in enumerate(nodes):
        if k in given:
            continue
        if not isinstance(n, Apply | MultiApply | Loop | Part):
            where = (
                "it is a placeholder of a fold/scan body, with no value outside it "
                "(use the state that fold/scan returned)"
                if n.kind in ("Carry", "Slice")
                else "it has no value here"
            )
            raise TypeError(
                f"Cannot compile the graph: node {names.get(n, '?')} ({n!r}) is used, but {where}"
            )
        how: Op | LoopPlan | int = (
            n.op
            if isinstance(n, Apply | MultiApply)
            else n.index
            if isinstance(n, Part)
            else LoopPlan(n, names)
        )
        steps.append((k, n, tuple(slot[id(a)] for a in n.args), how))
    return steps


def execute(steps: Sequence[Step], env: list[Any], names: Mapping[AnyNode, str]) -> None:
    """Run ``steps`` on ``env`` (slot -> value, the given slots filled in)."""
    for k, node, arg_slots, how in steps:
        args = [env[j] for j in arg_slots]
        if isinstance(how, int):  # a Part: one result of the loop or op it reads
            env[k] = args[0][how]
            continue
        try:
            if isinstance(how, LoopPlan):
                env[k] = how.run(args)
            elif checking_finite():  # inside ax.debug_nans: report the node's line
                with node_site(getattr(node, "site", "?")):
                    env[k] = apply(how, args)
            else:
                env[k] = apply(how, args)
        except Exception as e:
            e.add_note(
                f"while running graph node {names[node]} = {node.op_label()}"
                f"({', '.join(names[a] for a in node.args)}), built at "
                f"{getattr(node, 'site', '?')}"
            )
            raise


def _leaves(tree: PyTree) -> list[Any]:
    return jax.tree_util.tree_leaves(tree, is_leaf=lambda t: isinstance(t, Tensor))


class LoopPlan:
    """A Loop ready to run: its body as steps, evaluated by the eager fold/scan's unit."""

    def __init__(self, loop: Loop, names: Mapping[AnyNode, str]) -> None:
        self.loop, self.names = loop, names
        self.nodes = (*loop.captured, *loop.body)  # the body starts with carries, slices
        given = len(loop.captured) + len(loop.carries) + len(loop.slices)
        self.steps = plan_steps(self.nodes, set(range(given)), names)
        slot = {id(n): k for k, n in enumerate(self.nodes)}
        self.out_slots = tuple(slot[id(r)] for r in loop.results)

    def run(self, args: Sequence[Any]) -> tuple[AnyTensor, ...]:
        """The loop's results from the values of its operands (``loop.args``)."""
        loop = self.loop
        n_init, n_xs = len(loop.carries), len(loop.slices)
        captured = list(args[len(args) - len(loop.captured) :])
        mask = args[n_init + n_xs] if loop.masked else None

        def unit(state: PyTree, x_t: PyTree) -> PyTree:
            env: list[Any] = [*captured, *_leaves(state), *_leaves(x_t)]
            env += [None] * (len(self.nodes) - len(env))
            execute(self.steps, env, self.names)
            return jax.tree_util.tree_unflatten(loop.state_def, [env[s] for s in self.out_slots])

        init = jax.tree_util.tree_unflatten(loop.state_def, args[:n_init])
        xs = jax.tree_util.tree_unflatten(loop.xs_def, args[n_init : n_init + n_xs])
        return tuple(_leaves(loop.lowering(unit, init, xs, mask)))


def _fits(value: object, x: AnyInput) -> TypeGuard[AnyTensor]:
    """Whether ``value`` is a concrete Tensor that ``x`` accepts as it is (no message built:
    a step calls this for every input, and formatting the message costs more than the check)."""
    return type(value) is Tensor and not mismatch(x.type, value)


def _from_array(x: AnyInput, value: object, head: str) -> AnyTensor:
    """An array (or nested lists) in the input's axis order, converted to its dtype."""
    arr = value if isinstance(value, jax.Array) else np.asarray(value)
    want = x.dtype.numpy

    def kind(d: np.dtype[Any]) -> str:
        return "f" if d == np.dtype(jnp.bfloat16) else d.kind  # bfloat16's kind is "V"

    ok = {"f": "fiub", "c": "fiubc", "i": "iub", "u": "iub", "b": "b"}.get(kind(want), "")
    if kind(arr.dtype) not in ok:
        raise AxisError(
            f"{head}, got an array of dtype {arr.dtype}: it cannot become "
            f"{x.dtype.__name__} without losing values (convert it first)"
        )
    if arr.ndim != len(x.axes):
        raise AxisError(
            f"{head}, got an array of shape {tuple(arr.shape)}: {arr.ndim} "
            f"dimension{'s' * (arr.ndim != 1)} for {len(x.axes)} axes (give one "
            "dimension per axis, in the input's axis order)"
        )
    # a value the Input's dtype cannot hold (300 for U8, 1e6 for F16) is a ValueError
    return trusted_tensor(jnp.asarray(fit_dtype(head, arr, want), dtype=want), x.axes)


def _check_inputs(graph: Graph, inputs: InputList, where: str) -> tuple[AnyInput, ...]:
    if inputs is None:
        if len(graph.inputs) > 1:
            names = ", ".join(graph.names[x] for x in graph.inputs)
            raise TypeError(
                f"{where}: the graph has inputs {names}; pass inputs=[...] to fix "
                "the order of the arguments"
            )
        return graph.inputs
    given = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    for x in given:
        if not isinstance(x, Input):
            raise TypeError(
                f"{where}: inputs= lists ax.Input nodes, got {x!r}"
                + (" (Params and Consts carry their own values)" if isinstance(x, Node) else "")
            )
    listed = tuple(x for x in given if isinstance(x, Input))  # all of them, checked above
    if len({id(x) for x in listed}) != len(listed):
        raise TypeError(f"{where}: an Input is listed twice in inputs=")
    used = {id(x) for x in graph.inputs}
    for x in listed:
        if id(x) not in used:
            raise TypeError(
                f"{where}: {x!r} is listed in inputs= but the outputs do not use it (remove it)"
            )
    listed_ids = {id(x) for x in listed}
    for x in graph.inputs:
        if id(x) not in listed_ids:
            shown = ", ".join(graph.names[i] for i in listed) or "nothing"
            raise TypeError(
                f"{where}: the outputs depend on {graph.names[x]} ({x!r}), which is "
                f"not in inputs= (it lists {shown}; add it)"
            )
    return listed


def restructure(
    structure: Structure, outs: Sequence[AnyTensor]
) -> AnyTensor | dict[str, AnyTensor] | tuple[AnyTensor, ...]:
    """Give results the shape the outputs were given in (one node, a list, a dict)."""
    if structure is None:
        return outs[0]
    if isinstance(structure, tuple):
        return dict(zip(structure, outs, strict=True))
    return tuple(outs)


R = TypeVar("R")
Ins = TypeVarTuple("Ins")
D = TypeVar("D", bound=DType)
Os = TypeVarTuple("Os")
D1 = TypeVar("D1", bound=DType)
D2 = TypeVar("D2", bound=DType)
D3 = TypeVar("D3", bound=DType)
A1 = TypeVarTuple("A1")
A2 = TypeVarTuple("A2")
A3 = TypeVarTuple("A3")
#: what a compiled graph takes for an Input of type ``Tensor[D, *A]``: such a Tensor, or an
#: array in the Input's axis order
Arg = Tensor[D, *Os] | jax.Array | np.ndarray[Any, Any]


class CompiledGraph(Generic[R, *Ins]):
    """A graph lowered to one ``jax.jit`` function of its inputs (see :func:`compile`).

    Typed by its result ``R`` (the output node's type as a ``Tensor``) and the types its
    arguments may have, ``*Ins``: ``CompiledGraph[Tensor[F32, N, C], Tensor[F32, N, P] |
    jax.Array]`` under the mypy plugin, which reads the Inputs; ``*tuple[Any, ...]``
    otherwise.

    Call it with one value per input, by position or by the Inputs' names: Tensors with
    the Input's axes, dtype and known sizes, or arrays in the Input's axis order.
    ``params=`` gives Param values other than their own: ``{param: tensor}``, Params with
    new values (``step.params``), or any pytree holding Params (an Equinox module).

    Attributes:
        graph: the :class:`Graph`; inputs: the Inputs in argument order; trace_count: how
            many times JAX traced it (once per distinct input sizes).
    """

    def __init__(self, outputs: Outputs, inputs: InputList = None) -> None:
        self._program = Program(outputs, inputs, "the compiled graph")
        self.graph: Graph = self._program.graph
        self.inputs: tuple[AnyInput, ...] = self._program.inputs
        self.trace_count: int = 0
        self._jit = jax.jit(self._run, static_argnums=0)  # 0: the autodiff mode

    def _run(
        self,
        mode: str,
        params: Sequence[AnyTensor],
        consts: Sequence[AnyTensor],
        inputs: Sequence[AnyTensor],
    ) -> tuple[AnyTensor, ...]:
        self.trace_count += 1
        return self._program.run(params, consts, inputs)

    @property
    def params(self) -> tuple[AnyParam, ...]:
        """The graph's Params (with the values they were built with)."""
        return self._program.params

    def __call__(self, *args: *Ins, params: PyTree = None, **kwargs: object) -> R:
        p = self._program
        outs = self._jit(config.autodiff, p.values(params), p.const_values, p.bind(args, kwargs))
        # R is the outputs' type (one node, a tuple or a dict of them), as restructure gives
        return cast(R, restructure(self.graph.structure, outs))

    def __repr__(self) -> str:
        names = ", ".join(self.graph.names[x] for x in self.inputs)
        return f"<CompiledGraph({names}) of {self.graph.summary()}>"


# A tuple of Inputs types the compiled graph's arguments for every checker (a list's type
# has lost the order of its items: the mypy plugin reads the list in the call instead).
@overload
def compile(
    outputs: Tensor[D, *Os], inputs: tuple[Tensor[D1, *A1]]
) -> CompiledGraph[Tensor[D, *Os], Arg[D1, *A1]]: ...
@overload
def compile(
    outputs: Tensor[D, *Os], inputs: tuple[Tensor[D1, *A1], Tensor[D2, *A2]]
) -> CompiledGraph[Tensor[D, *Os], Arg[D1, *A1], Arg[D2, *A2]]: ...
@overload
def compile(
    outputs: Tensor[D, *Os], inputs: tuple[Tensor[D1, *A1], Tensor[D2, *A2], Tensor[D3, *A3]]
) -> CompiledGraph[Tensor[D, *Os], Arg[D1, *A1], Arg[D2, *A2], Arg[D3, *A3]]: ...
@overload
def compile(
    outputs: Tensor[D, *Os], inputs: Sequence[AnyTensor] | AnyTensor | None = None
) -> CompiledGraph[Tensor[D, *Os], *tuple[Any, ...]]: ...
@overload
def compile(
    outputs: Outputs, inputs: Sequence[AnyTensor] | AnyTensor | None = None
) -> CompiledGraph[Any, *tuple[Any, ...]]: ...
def compile(
    outputs: Outputs, inputs: Sequence[AnyTensor] | AnyTensor | None = None
) -> CompiledGraph[Any, *tuple[Any, ...]]:
    """Lower a graph to one jitted function of its inputs that returns Tensors.

    One output node of type ``Tensor[D, *A]`` (an ``Input``, an ``Apply``, ...) makes a
    ``CompiledGraph`` returning ``Tensor[D, *A]``; with the mypy plugin its arguments are
    typed by the Inputs too (transposed data is an error before it runs).

    Args:
        outputs: a node, a list of nodes (the call returns a tuple) or a dict of nodes (the
            call returns a dict).
        inputs: the Inputs, in argument order; every Input the outputs use, each once. May
            be left out when the graph has at most one Input.

    Example:
        >>> predict = ax.compile(y, inputs=[x])
        >>> predict(images)                      # Tensor[F32, Batch=64, Class=10]
        >>> predict(x=images, params=step.params)
    """
    out: CompiledGraph[Any, *tuple[Any, ...]] = CompiledGraph(outputs, inputs)
    return out
