"""Drawing a :class:`~axjax.Graph`: a layered layout in pure Python, SVG, DOT and PNG.

No system package is needed: the SVG comes from a simple layered layout (one row per
depth, rows ordered by the barycentre of their neighbours), and PNG from matplotlib. When
Graphviz's ``dot`` program is installed, ``engine="dot"`` (or ``"auto"``) uses it instead.
A fold/scan (a ``Loop``) is one box, its body summarised; its results hang below it.
"""

from __future__ import annotations

import html
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._internal import Feature, describe
from ._loop import Loop
from ._nodes import Node, Results

if TYPE_CHECKING:  # a Graph's methods call this module: types only here
    from ._graph import Graph

__all__ = ["to_dot", "to_svg", "save", "layout"]

CHAR_W, LINE_H, PAD, ROW_GAP, COL_GAP, MARGIN = 7.2, 15.0, 8.0, 34.0, 18.0, 12.0
FILL = {
    "Input": "#dbeafe",
    "Param": "#fde68a",
    "Const": "#e5e7eb",
    "Apply": "#ffffff",
    "MultiApply": "#ffffff",
    "Loop": "#dcfce7",
    "Part": "#ffffff",
}
STROKE = {
    "Input": "#2563eb",
    "Param": "#b45309",
    "Const": "#6b7280",
    "Apply": "#374151",
    "MultiApply": "#374151",
    "Loop": "#15803d",
    "Part": "#374151",
}


@dataclass
class Box:
    """One node's place in the drawing (``x``, ``y`` = top-left corner)."""

    node: Node[Any, *tuple[Any, ...]]
    lines: tuple[str, str]
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = 2 * LINE_H + 2 * PAD


def _lines(graph: Graph, node: Node[Any, *tuple[Any, ...]]) -> tuple[str, str]:
    name = graph.names[node]
    head = f"{name} = {node.op_label()}" if node.args else f"{name} : {node.kind}"
    if isinstance(node, Loop):
        n, k = len(node.body), len(node.parts)
        return head, f"body: {n} node{'s' * (n != 1)}, {k} result{'s' * (k != 1)}"
    if isinstance(node, Results):
        return head, f"{len(node.parts)} results"
    return head, describe(node.type)


def layout(graph: Graph) -> tuple[list[Box], list[tuple[int, int]], float, float]:
    """``(boxes, edges, width, height)``: boxes in ``graph.nodes`` order, edges as
    ``(operand, user)`` indices, one per operand in argument order.

    Leaves sit one row above their first user; every op sits one row below its deepest
    operand; each row is ordered by the mean position of its neighbours (two sweeps).
    """
    nodes = graph.nodes
    index = {id(n): k for k, n in enumerate(nodes)}
    edges = [(index[id(a)], k) for k, n in enumerate(nodes) for a in n.args]
    users: list[list[int]] = [[] for _ in nodes]
    parents: list[list[int]] = [[] for _ in nodes]
    for src, dst in edges:
        users[src].append(dst)
        parents[dst].append(src)
    depth = [0] * len(nodes)
    for k, n in enumerate(nodes):
        if n.args:
            depth[k] = 1 + max((depth[p] for p in parents[k]), default=-1)
    for k, n in enumerate(nodes):
        if not n.args and users[k]:
            depth[k] = max(0, min(depth[u] for u in users[k]) - 1)
    rows: dict[int, list[int]] = {}
    for k in range(len(nodes)):
        rows.setdefault(depth[k], []).append(k)
    ordered = [rows[d] for d in sorted(rows)]
    pos = [0.0] * len(nodes)

    def place(row: list[int]) -> None:
        for i, k in enumerate(row):
            pos[k] = i - (len(row) - 1) / 2

    def sweep(rows_: list[list[int]], neighbours: list[list[int]]) -> None:
        for row in rows_:
            keys = {
                k: (
                    sum(pos[m] for m in neighbours[k]) / len(neighbours[k])
                    if neighbours[k]
                    else pos[k]
                )
                for k in row
            }
            row.sort(key=lambda k: keys[k])
            place(row)

    for row in ordered:
        place(row)
    sweep(ordered, parents)
    sweep(ordered[::-1], users)
    sweep(ordered, parents)

    boxes = [Box(n, _lines(graph, n)) for n in nodes]
    for b in boxes:
        b.w = max(len(s) for s in b.lines) * CHAR_W + 2 * PAD
    widths = [sum(boxes[k].w for k in row) + COL_GAP * (len(row) - 1) for row in ordered]
    width = max(widths, default=0.0) + 2 * MARGIN
    y = MARGIN
    for row, row_w in zip(ordered, widths, strict=True):
        x = (width - row_w) / 2
        for k in row:
            boxes[k].x, boxes[k].y = x, y
            x += boxes[k].w + COL_GAP
        y += boxes[0].h + ROW_GAP
    return boxes, edges, width, y - ROW_GAP + MARGIN


def _edge_points(
    boxes: list[Box], edges: list[tuple[int, int]]
) -> list[tuple[float, float, float, float]]:
    """Edge ends: from the operand's bottom centre to the user's top, spread left to right
    in argument order (the first operand arrives leftmost)."""
    count = [0] * len(boxes)
    for _, b in edges:
        count[b] += 1
    seen = [0] * len(boxes)
    out = []
    for a, b in edges:
        s, t = boxes[a], boxes[b]
        seen[b] += 1
        out.append((s.x + s.w / 2, s.y + s.h, t.x + t.w * seen[b] / (count[b] + 1), t.y))
    return out


def _builtin_svg(graph: Graph) -> str:
    boxes, edges, width, height = layout(graph)
    outputs = {id(o) for o in graph.outputs}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="monospace" font-size="12">',
        '<defs><marker id="axjax-arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#6b7280"/></marker>'
        "</defs>",
    ]
    for x1, y1, x2, y2 in _edge_points(boxes, edges):
        ym = (y1 + y2) / 2
        parts.append(
            f'<path d="M{x1:.1f},{y1:.1f} C{x1:.1f},{ym:.1f} {x2:.1f},{ym:.1f} '
            f'{x2:.1f},{y2:.1f}" fill="none" stroke="#9ca3af" '
            'marker-end="url(#axjax-arrow)"/>'
        )
    for b in boxes:
        kind = b.node.kind
        sw = 2.5 if id(b.node) in outputs else 1.0
        head, typ = (html.escape(s) for s in b.lines)
        parts.append(
            f"<g><title>{head}&#10;{typ}</title>"
            f'<rect x="{b.x:.1f}" y="{b.y:.1f}" width="{b.w:.1f}" height="{b.h:.1f}" rx="6" '
            f'fill="{FILL.get(kind, "#fff")}" stroke="{STROKE.get(kind, "#000")}" '
            f'stroke-width="{sw}"/>'
            f'<text x="{b.x + PAD:.1f}" y="{b.y + PAD + 11:.1f}" font-weight="bold">{head}</text>'
            f'<text x="{b.x + PAD:.1f}" y="{b.y + PAD + 11 + LINE_H:.1f}" fill="#374151">'
            f"{typ}</text></g>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _dot_label(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def to_dot(graph: Graph) -> str:
    """Graphviz DOT text: one box per node (name, op, type), one edge per operand."""
    index = {id(n): k for k, n in enumerate(graph.nodes)}
    outputs = {id(o) for o in graph.outputs}
    lines = [
        "digraph axjax {",
        "  rankdir=TB;",
        '  node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10];',
    ]
    for k, n in enumerate(graph.nodes):
        head, typ = _lines(graph, n)
        extra = ", penwidth=2.5" if id(n) in outputs else ""
        lines.append(
            f'  n{k} [label="{_dot_label(head)}\\n{_dot_label(typ)}", '
            f'fillcolor="{FILL.get(n.kind, "#ffffff")}", '
            f'color="{STROKE.get(n.kind, "#000000")}"{extra}];'
        )
    for k, n in enumerate(graph.nodes):
        lines.extend(f"  n{index[id(a)]} -> n{k};" for a in n.args)
    lines.append("}")
    return "\n".join(lines)


def _engine(engine: str) -> str:
    if engine not in ("auto", "builtin", "dot"):
        raise ValueError(f"engine must be 'auto', 'builtin' or 'dot', got {engine!r}")
    have_dot = shutil.which("dot") is not None
    if engine == "dot" and not have_dot:
        raise RuntimeError(
            "engine='dot' needs the Graphviz `dot` program on PATH (install "
            "the graphviz system package, or use engine='builtin')"
        )
    return "dot" if engine == "dot" or (engine == "auto" and have_dot) else "builtin"


def _run_dot(graph: Graph, fmt: str) -> bytes:
    done = subprocess.run(
        ["dot", f"-T{fmt}"], input=to_dot(graph).encode(), capture_output=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"dot -T{fmt} failed: {done.stderr.decode(errors='replace')}")
    return done.stdout


def to_svg(graph: Graph, engine: str = "builtin") -> str:
    """The graph drawn as SVG text (see :meth:`axjax.Graph.to_svg`)."""
    if _engine(engine) == "dot":
        return _run_dot(graph, "svg").decode()
    return _builtin_svg(graph)


_PNG = Feature("matplotlib", 'Graph.save("graph.png") without Graphviz')


def _png(graph: Graph, path: Path) -> None:
    _PNG.require()
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyBboxPatch

    boxes, edges, width, height = layout(graph)
    dpi = min(150.0, 8000.0 * 100 / max(width, height))  # at most 8000 pixels a side
    fig = Figure(figsize=(width / 100, height / 100), dpi=dpi)
    axes = fig.add_axes((0, 0, 1, 1))
    axes.set_xlim(0, width)
    axes.set_ylim(height, 0)
    axes.axis("off")
    size = 12 * 72 / 100  # 12 px text at 1 unit = 1 px (independent of the dpi)
    for x1, y1, x2, y2 in _edge_points(boxes, edges):
        axes.annotate(
            "",
            xy=(x2, y2),
            xytext=(x1, y1),
            arrowprops={"arrowstyle": "->", "color": "#9ca3af"},
            zorder=1,
        )
    outputs = {id(o) for o in graph.outputs}
    for b in boxes:
        kind = b.node.kind
        axes.add_patch(
            FancyBboxPatch(
                (b.x, b.y),
                b.w,
                b.h,
                boxstyle="round,pad=0,rounding_size=6",
                facecolor=FILL.get(kind, "#fff"),
                zorder=2,
                linewidth=2.5 if id(b.node) in outputs else 1.0,
                edgecolor=STROKE.get(kind, "#000"),
            )
        )
        axes.text(
            b.x + PAD,
            b.y + PAD + 6,
            b.lines[0],
            family="monospace",
            fontsize=size,
            weight="bold",
            va="center",
            zorder=3,
        )
        axes.text(
            b.x + PAD,
            b.y + PAD + 6 + LINE_H,
            b.lines[1],
            family="monospace",
            fontsize=size,
            va="center",
            zorder=3,
        )
    fig.savefig(path, format="png", dpi=dpi)


def save(graph: Graph, path: Path, engine: str = "auto") -> Path:
    """Write ``graph`` to ``path`` in the format its suffix names (see :meth:`Graph.save`)."""
    suffix = path.suffix.lower()
    if suffix == ".svg":
        path.write_text(to_svg(graph, engine))
    elif suffix == ".png":
        if _engine(engine) == "dot":
            path.write_bytes(_run_dot(graph, "png"))
        else:
            _png(graph, path)
    elif suffix in (".dot", ".gv"):
        path.write_text(to_dot(graph) + "\n")
    elif suffix == ".txt":
        path.write_text(str(graph) + "\n")
    else:
        raise ValueError(
            f"Graph.save: unknown suffix {path.suffix!r} (use .svg, .png, .dot, .gv or .txt)"
        )
    return path
