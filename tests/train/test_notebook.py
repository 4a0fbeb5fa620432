"""The quickstart notebook runs top to bottom in a real Jupyter kernel (nbclient)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import data_dir, requires

nbformat = requires("nbformat", extra="dev")
nbclient = requires("nbclient", extra="dev")
requires("ipykernel", extra="dev")  # the kernel the notebook runs in

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "quickstart.ipynb"


def test_quickstart_notebook_executes(tmp_path, monkeypatch):
    monkeypatch.setenv("AXJAX_DATA", str(data_dir("mnist").parent))  # the kernel inherits it
    work = tmp_path / "examples"
    work.mkdir()
    shutil.copy(NOTEBOOK, work)
    nb = nbformat.read(work / NOTEBOOK.name, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(work)}}
    )
    client.execute()  # raises CellExecutionError, with the traceback, if any cell fails
    text = "\n".join(
        o.get("text", "") or str(o.get("data", {}).get("text/plain", ""))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
    )
    assert "Tensor[F32, Batch=4, Pixel=784]" in text
    assert (
        "Cannot apply Add to Tensor[F32, Batch=4, Pixel=784] and Tensor[F32, Pixel=784, "
        "Batch=4]: same axes in a different order"
    ) in text
    assert "<Graph: 1 input" in text
    graph_html = [
        o["data"]["text/html"]
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "text/html" in o.get("data", {}) and "<svg" in o["data"]["text/html"]
    ]
    assert graph_html, "the graph was not drawn as SVG"
    accuracy = float(text.split("test accuracy ")[1].split("%")[0])
    assert accuracy > 85.0
    assert (work / "runs" / "quickstart-curves.png").read_bytes()[:4] == b"\x89PNG"
