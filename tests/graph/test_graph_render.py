"""Inspecting a graph: listing, counts, SVG / PNG / DOT / text files, Jupyter display."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import final

import pytest

import axjax as ax
from axjax.graph import _render
from tests.conftest import requires


@final
class Batch(ax.Axis): ...


@final
class In(ax.Axis): ...


@final
class Out(ax.Axis): ...


def _graph() -> tuple[ax.Graph, ax.Input, ax.Param, ax.Apply]:
    x = ax.Input(ax.F32, Batch, In, sizes={In: 2}, name="x")
    w = ax.Param(ax.ones((2, 1), In, Out), name="w")
    y = ax.sigmoid(x @ w)
    loss = ax.mean(ax.sum(y * 0.5, Out), Batch)
    return ax.Graph({"loss": loss, "y": y}), x, w, loss


def test_listing_has_one_line_per_node() -> None:
    g, x, w, loss = _graph()
    assert str(g) == "\n".join(
        [
            "Graph: 1 input, 1 param, 1 const, 8 nodes; outputs: loss, y",
            "  name    op           inputs     type",
            "  x       Input                   Tensor[F32, Batch=?, In=2]",
            "  w       Param                   Tensor[F32, In=2, Out=1]",
            "  %2      MatMul       x, w       Tensor[F32, Batch=?, Out=1]",
            "  y       Sigmoid      %2         Tensor[F32, Batch=?, Out=1]",
            "  const4  Const                   Tensor[F32]",
            "  %5      Multiply     y, const4  Tensor[F32, Batch=?, Out=1]",
            "  %6      Sum(Out)     %5         Tensor[F32, Batch=?]",
            "  loss    Mean(Batch)  %6         Tensor[F32]",
        ]
    )
    assert repr(g) == "<Graph: 1 input, 1 param, 1 const, 8 nodes; outputs: loss, y>"
    assert g.inputs == (x,) and g.params == (w,) and len(g) == len(g.nodes) == 8
    assert g.outputs[0] is loss and x in g and ax.Input(ax.F32, Batch) not in g
    assert g.uses(x) == [g.nodes[2]]


def test_names_are_unique() -> None:
    a = ax.Input(ax.F32, Batch, name="a")
    b = ax.Input(ax.F32, Batch, name="a")
    g = ax.Graph(a + b)
    assert [g.names[n] for n in g.nodes] == ["a", "a_2", "%2"]


def test_svg_is_well_formed_with_a_box_per_node_and_an_edge_per_operand() -> None:
    g, *_ = _graph()
    svg = g.to_svg()
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert len(root.findall(f"{ns}g/{ns}rect")) == len(g) == 8
    assert len(root.findall(f"{ns}path")) == 7  # one per operand
    texts = [t.text for t in root.iter(f"{ns}text")]
    assert "loss = Mean(Batch)" in texts and "Tensor[F32, Batch=?, In=2]" in texts
    boxes, edges, width, height = _render.layout(g)
    for a, b in edges:  # operands sit above their users
        assert boxes[a].y + boxes[a].h < boxes[b].y
    assert all(0 <= bx.x and bx.x + bx.w <= width and bx.y + bx.h <= height for bx in boxes)


def test_jupyter_displays_the_graph_as_html_with_svg() -> None:
    DisplayFormatter = requires("IPython.core.formatters", extra="dev").DisplayFormatter

    g, x, w, loss = _graph()
    data, _ = DisplayFormatter().format(g)
    assert data["text/html"].startswith("<div class='axjax-graph'><svg")
    assert "Graph: 1 input, 1 param" in data["text/html"]
    node_html, _ = DisplayFormatter().format(loss)
    assert "<svg" in node_html["text/html"]


def test_a_node_displays_its_graph() -> None:
    # _nodes.py sits below _graph.py: the node's _repr_html_ is what _graph.py registers
    g, x, w, loss = _graph()
    assert loss._repr_html_() == ax.Graph(loss).to_html()
    assert x._repr_html_().startswith("<div class='axjax-graph'><svg")


def test_save_writes_each_format(tmp_path: Path) -> None:
    g, *_ = _graph()
    svg = g.save(tmp_path / "g.svg", engine="builtin")
    assert ET.parse(svg).getroot().tag.endswith("svg")
    png = g.save(tmp_path / "g.png", engine="builtin")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 2000
    dot = g.save(tmp_path / "g.dot").read_text()
    assert dot.startswith("digraph axjax {") and dot.count("->") == 7
    assert 'label="loss = Mean(Batch)\\nTensor[F32]"' in dot
    assert g.save(tmp_path / "g.txt").read_text() == str(g) + "\n"
    with pytest.raises(ValueError, match=r"unknown suffix '.pdf' \(use .svg, .png"):
        g.save(tmp_path / "g.pdf")
    with pytest.raises(ValueError, match="engine must be 'auto', 'builtin' or 'dot'"):
        g.to_svg(engine="neato")


def test_engine_dot_without_graphviz_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    g, *_ = _graph()
    monkeypatch.setattr(_render.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="engine='dot' needs the Graphviz `dot` program"):
        g.to_svg(engine="dot")
    assert g.to_svg(engine="auto") == g.to_svg(engine="builtin")  # falls back


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
def test_engine_dot_renders_through_graphviz(tmp_path: Path) -> None:
    g, *_ = _graph()
    assert "<svg" in g.to_svg(engine="dot")
    assert g.save(tmp_path / "g.png", engine="dot").read_bytes()[:4] == b"\x89PNG"
