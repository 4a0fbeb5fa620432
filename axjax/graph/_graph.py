"""``Graph``: the nodes that outputs depend on, in topological order, for inspection.

``print(graph)`` lists one node per line (name, op, inputs, type); ``graph.inputs``,
``graph.params``, ``len(graph)``; in Jupyter the graph renders as an SVG drawing, and
``graph.save("g.svg")`` (or ``.png``, ``.dot``, ``.txt``) writes it to a file.

Example:
    >>> g = ax.Graph({"loss": loss})
    >>> print(g)
    >>> g.save("xor.svg")
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from ..core import AnyTensor, Tensor
from ..core._internal import describe
from ._applied import toposort
from ._loop import Loop
from ._nodes import ABOVE, Const, Input, Node, Param, Results
from ._render import save, to_dot, to_svg

__all__ = ["Graph"]

AnyNode = Node[Any, *tuple[Any, ...]]
#: what ``Graph`` and ``compile`` take: nodes (statically typed as Tensors) in a structure
Outputs = AnyTensor | Sequence[AnyTensor] | Mapping[str, AnyTensor]
#: how the outputs were given: ``None`` (one node), their number (a sequence) or the dict keys
Structure = tuple[str, ...] | int | None


class Graph:
    """The computation graph that ``outputs`` depend on, walked once in topological order.

    Args:
        outputs: a node, a sequence of nodes, or a dict ``{name: node}`` (the names label
            the outputs in listings and drawings).

    Attributes:
        nodes: every node, operands before the nodes that use them.
        outputs: the output nodes, in the order given.
        inputs / params / consts: the leaves of each kind, in topological order.

    Example:
        >>> g = ax.Graph(y)
        >>> len(g), g.inputs, g.params
    """

    structure: Structure
    outputs: tuple[AnyNode, ...]

    def __init__(self, outputs: Outputs) -> None:
        self.structure, self.outputs = _flatten_outputs(outputs, "Graph")
        self.nodes: tuple[AnyNode, ...] = toposort(self.outputs)
        self.inputs: tuple[Input[Any, *tuple[Any, ...]], ...] = tuple(
            n for n in self.nodes if isinstance(n, Input)
        )
        self.params: tuple[Param[Any, *tuple[Any, ...]], ...] = _one_value_each(
            n for n in self.nodes if isinstance(n, Param)
        )
        self.consts: tuple[Const[Any, *tuple[Any, ...]], ...] = tuple(
            n for n in self.nodes if isinstance(n, Const)
        )
        self.names: dict[AnyNode, str] = _names(self.nodes, self.structure, self.outputs)
        #: the loops (fold/scan nodes) at any depth, each with its body named in ``names``
        self.loops: tuple[Loop, ...] = _name_bodies(self.nodes, self.names)

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, node: object) -> bool:
        return node in self.names

    def uses(self, node: AnyNode) -> list[AnyNode]:
        """The nodes that take ``node`` as an operand."""
        return [n for n in self.nodes if any(a is node for a in n.args)]

    # ------------------------------------------------------------------ listing
    def rows(self, nodes: Sequence[AnyNode] | None = None) -> list[tuple[str, str, str, str]]:
        """One ``(name, op, inputs, type)`` row per node (of ``nodes``: default, the graph's;
        ``graph.rows(loop.body)`` lists a loop's body), in topological order."""
        return [
            (self.names[n], n.op_label(), ", ".join(self.names[a] for a in n.args), type_label(n))
            for n in (self.nodes if nodes is None else nodes)
        ]

    def summary(self) -> str:
        """``Graph: 2 inputs, 4 params, 0 consts, 13 nodes; outputs: loss``."""
        outs = ", ".join(self.names[o] for o in self.outputs)
        return (
            f"Graph: {_count(len(self.inputs), 'input')}, {_count(len(self.params), 'param')}"
            f", {_count(len(self.consts), 'const')}, {_count(len(self.nodes), 'node')}; "
            f"outputs: {outs}"
        )

    def __str__(self) -> str:
        return "\n".join([self.summary(), *self._listing(self.nodes, "  ", header=True)])

    def _listing(self, nodes: Sequence[AnyNode], indent: str, header: bool = False) -> list[str]:
        """The table of ``nodes``; each loop's body follows its row, indented."""
        rows = self.rows(nodes)
        head = [("name", "op", "inputs", "type")] if header else []
        widths = [max(len(r[i]) for r in [*head, *rows]) for i in range(3)]
        lines = []
        for r, n in [*((h, None) for h in head), *zip(rows, nodes, strict=True)]:
            cells = [c.ljust(w) for c, w in zip(r[:3], widths, strict=True)]
            lines.append((indent + "  ".join(cells) + "  " + r[3]).rstrip())
            if isinstance(n, Loop):
                lines += self._listing(n.body, indent + "    ")
        return lines

    def __repr__(self) -> str:
        return f"<{self.summary()}>"

    # ------------------------------------------------------------------ drawing
    def to_dot(self) -> str:
        """The graph in Graphviz DOT text."""
        return to_dot(self)

    def to_svg(self, engine: str = "builtin") -> str:
        """An SVG drawing: ``engine="builtin"`` (pure Python, layered), ``"dot"`` (needs the
        Graphviz ``dot`` program) or ``"auto"`` (``dot`` when installed)."""
        return to_svg(self, engine)

    def save(self, path: str | Path, engine: str = "auto") -> Path:
        """Write the graph to ``path``; the suffix picks the format.

        ``.svg`` (drawing), ``.png`` (through ``dot`` when installed, else matplotlib),
        ``.dot`` / ``.gv`` (Graphviz text), ``.txt`` (the listing).

        Example:
            >>> ax.Graph(loss).save("loss.svg")
        """
        return save(self, Path(path), engine)

    def _repr_html_(self) -> str:
        return self.to_html()

    def to_html(self) -> str:
        """The drawing and the listing as HTML (what Jupyter shows)."""
        listing = html.escape(str(self))
        return (
            f"<div class='axjax-graph'>{self.to_svg()}<details><summary>"
            f"{html.escape(self.summary())}</summary><pre>{listing}</pre></details></div>"
        )


ABOVE.html = lambda node: Graph(node).to_html()  # what Jupyter shows for a node (_nodes.py)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _flatten_outputs(outputs: object, where: str) -> tuple[Structure, tuple[AnyNode, ...]]:
    """``(structure, nodes)``: structure is ``None`` (one node), ``len`` or the dict keys."""
    if isinstance(outputs, Mapping):
        keys = tuple(outputs.keys())
        for k in keys:
            if not isinstance(k, str):
                raise TypeError(f"{where}: output names must be strings, got {k!r}")
        structure: Structure = keys
        items = tuple(outputs.values())
    elif isinstance(outputs, Tensor):
        structure, items = None, (outputs,)
    elif isinstance(outputs, Sequence) and not isinstance(outputs, str):
        structure, items = len(outputs), tuple(outputs)
    else:
        raise TypeError(
            f"{where}: outputs are a graph node, a list of nodes or a dict of "
            f"nodes, got {type(outputs).__name__}"
        )
    if not items:
        raise TypeError(f"{where}: give at least one output node")
    for o in items:
        if not isinstance(o, Node):
            got = describe(o) if isinstance(o, Tensor) else type(o).__name__
            raise TypeError(
                f"{where}: outputs must be graph nodes, got {got} (an eager value: build "
                "outputs from ax.Input / ax.Param nodes so the ops are recorded)"
            )
    return structure, cast(tuple[AnyNode, ...], items)


def type_label(node: AnyNode) -> str:
    """A node's type as listings show it (a loop: the types of its results)."""
    return node.types() if isinstance(node, Results) else describe(node.type)


def _names(
    nodes: Sequence[AnyNode],
    structure: Structure,
    outputs: Sequence[AnyNode],
    names: dict[AnyNode, str] | None = None,
    wanted: dict[int, str] | None = None,
    prefix: str = "%",
) -> dict[AnyNode, str]:
    """Unique display names: given names, output names, then ``%k`` by position (``prefix``
    and ``names``, the names already taken, serve a loop's body)."""
    wanted = {} if wanted is None else wanted
    if isinstance(structure, tuple):
        for key, node in zip(structure, outputs, strict=True):
            wanted.setdefault(id(node), key)
    names = {} if names is None else names
    taken: set[str] = set(names.values())
    for k, n in enumerate(nodes):
        base = n.name or wanted.get(id(n))
        if base is None:
            base = f"{prefix}{k}" if n.args else f"{n.kind.lower()}{k}"
        name, i = base, 2
        while name in taken:
            name, i = f"{base}_{i}", i + 1
        taken.add(name)
        names[n] = name
    return names


def _name_bodies(nodes: Sequence[AnyNode], names: dict[AnyNode, str]) -> tuple[Loop, ...]:
    """Name the nodes of every loop body (at any depth) in ``names``: the carries
    ``state[0]``..., the slices ``x[t]`` after their sequence, the results ``next[0]``...,
    the other body nodes ``%5.k`` in loop ``%5``. Returns the loops, outer ones first."""
    loops: list[Loop] = []
    pending = [n for n in nodes if isinstance(n, Loop)]
    while pending:
        loop = pending.pop(0)
        loops.append(loop)
        paths = [p.path for p in loop.parts]
        wanted: dict[int, str] = {}
        for c, path in zip(loop.carries, paths, strict=True):
            wanted[id(c)] = f"state{path}"
        n_init = len(loop.carries)
        for s, x in zip(loop.slices, loop.args[n_init:], strict=False):
            wanted[id(s)] = f"{names[x]}[t]"
        for r, path in zip(loop.results, paths, strict=True):
            wanted.setdefault(id(r), f"next{path}")
        _names(loop.body, None, (), names, wanted, f"{names[loop]}.")
        pending += [n for n in loop.body if isinstance(n, Loop)]
    return tuple(loops)


def _one_value_each(params: Iterable[Param[Any, *tuple[Any, ...]]]) -> tuple[Any, ...]:
    """The distinct Params, in order; a ``ValueError`` if one Param appears with two values.

    Copies of a Param (``p.replace(v)``, an optimizer's update) are the same parameter, so a
    graph holds one value for it: using two of them in one graph would silently compute
    with one value in place of both.
    """
    first: dict[Param[Any, *tuple[Any, ...]], Param[Any, *tuple[Any, ...]]] = {}
    for p in params:
        q = first.setdefault(p, p)
        if q is not p and not same_value(q.value, p.value):
            raise ValueError(
                f"Graph: Param {p.name or '(unnamed)'} ({describe(p.type)}) appears with two "
                "different values (the Param and a copy from replace() or an update): a graph "
                "holds one value per Param. Give new values when calling it (params=), or make "
                "a distinct Param (ax.Param(value)) for a separate parameter"
            )
    return tuple(first)


def same_value(a: AnyTensor, b: AnyTensor) -> bool:
    """Whether two values of one Param are the same (the same arrays, as pytree copies
    of one Param hold)."""
    return a is b or (a.axes == b.axes and a.array is b.array)
