"""Tensor in other tools (core/_interop.py) and what it shows (core/_display.py).

- ``jax.export``: a jitted function of Tensors serializes to bytes and loads back, in this
  process and in another one, for every dtype; labels that cannot be found say so.
- treescope: ``render_array`` names the axes; a Tensor in a tree shows its type and summary;
  ``import axjax`` does not import treescope.
- ``repr`` / ``_repr_html_``: statistics reduced on the device (only scalars are read, under
  a transfer guard), the same text as the host's computation for every dtype; the preview
  has the axis names as headers and an ellipsis.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, final

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from axjax.core import _display, _interop
from axjax.core._internal import to_numpy_dtype
from tests.axes import Batch, Hidden, Pixel, Time

ROOT = Path(__file__).resolve().parents[2]


def dtype_markers() -> list[type[ax.DType]]:
    """Every concrete dtype marker (the leaves below ``ax.DType``)."""
    found: list[type[ax.DType]] = []
    todo: list[type[ax.DType]] = [ax.DType]
    while todo:
        cls = todo.pop()
        subs = cls.__subclasses__()
        if not subs and cls is not ax.DType:
            found.append(cls)
        todo.extend(subs)
    return sorted(found, key=lambda c: c.__name__)


DTYPES = dtype_markers()


@contextlib.contextmanager
def x64_for(dtype: type[ax.DType]) -> Iterator[None]:
    if dtype in (ax.F64, ax.I64):
        with jax.enable_x64(True):
            yield
    else:
        yield


def sample(dtype: type[ax.DType], shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    np_dtype = jnp.dtype(to_numpy_dtype(dtype))
    if dtype is ax.Bool:
        return rng.random(shape) < 0.3
    if np.issubdtype(np_dtype, np.integer):
        return rng.integers(0, 100, shape).astype(np_dtype)
    return rng.normal(1.0, 2.0, shape).astype(np_dtype)


# ------------------------------------------------------------------------- jax.export


def test_dtype_enumeration_covers_the_markers() -> None:
    assert {ax.F32, ax.BF16, ax.F16, ax.F64, ax.I8, ax.I32, ax.I64, ax.U8, ax.U32, ax.Bool} <= set(
        DTYPES
    )


def roundtrip(f: Any, *args: Any) -> tuple[Any, Any]:
    """f(*args) directly, and through export -> bytes -> deserialize -> call."""
    exported = jax.export.export(jax.jit(f))(*args)
    blob = exported.serialize()
    assert isinstance(blob, bytearray | bytes) and len(blob) > 100
    return f(*args), jax.export.deserialize(blob).call(*args)


def same(a: Any, b: Any) -> None:
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb  # the axes are aux data: equal trees have equal axes
    for x, y in zip(la, lb, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_export_round_trip_for_every_dtype(dtype: type[ax.DType]) -> None:
    with x64_for(dtype):
        x = ax.tensor(sample(dtype, (2, 3)), Batch, Pixel)
        y = ax.tensor(sample(dtype, (3,), seed=1), Pixel)

        def f(inputs: dict[str, Any]) -> Any:
            a, b = inputs["x"], inputs["y"]
            moved = ax.transpose(a, Pixel, Batch)
            return {"moved": moved, "pair": (b, ax.rename(b, Pixel, Hidden))}

        direct, loaded = roundtrip(f, {"x": x, "y": y})
        same(direct, loaded)
        assert loaded["moved"].axes == (Pixel, Batch)
        assert loaded["pair"][1].axes == (Hidden,) and loaded["pair"][1].dtype is dtype


def test_export_of_a_layer_forward_round_trips() -> None:
    model = ax.nn.Affine(Pixel, Hidden, 3, 4, key=jax.random.key(0))
    x = ax.normal(jax.random.key(1), (2, 3), Batch, Pixel)
    direct, loaded = roundtrip(lambda x: ax.relu(model(x)), x)
    assert loaded.axes == (Batch, Hidden)
    np.testing.assert_allclose(np.asarray(loaded), np.asarray(direct), rtol=1e-6)


def test_export_with_an_open_batch_size_takes_any_batch() -> None:
    (b,) = jax.export.symbolic_shape("b")
    spec = ax.Tensor(jax.ShapeDtypeStruct((b, 3), np.float32), (Batch, Pixel))
    f = jax.export.export(jax.jit(lambda t: ax.sum(t * 2.0, Pixel)))(spec)
    loaded = jax.export.deserialize(f.serialize())
    for n in (1, 5):
        out = loaded.call(ax.ones((n, 3), Batch, Pixel))
        assert out.axes == (Batch,) and np.asarray(out).tolist() == [6.0] * n


def test_export_loads_in_another_process(tmp_path: Path) -> None:
    x = ax.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3), Batch, Pixel)
    blob = jax.export.export(jax.jit(lambda t: ax.sum(t * 2.0, Pixel)))(x).serialize()
    (tmp_path / "f.bin").write_bytes(bytes(blob))
    script = textwrap.dedent(
        """
        import sys, jax, numpy as np
        import axjax as ax
        from tests.axes import Batch, Pixel
        f = jax.export.deserialize(bytearray(open(sys.argv[1], "rb").read()))
        out = f.call(ax.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3), Batch, Pixel))
        print(repr(out), out.axes[0] is Batch, "treescope" in sys.modules)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "f.bin")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # ... and `import axjax` (with jax.export's registration) did not import treescope
    assert done.stdout.strip() == "Tensor[F32, Batch=2]([ 6., 24.]) True False"


def test_without_the_registration_export_cannot_serialize(tmp_path: Path) -> None:
    """The mutation: with register_export switched off (the issue's state), the round trip
    fails, so the tests above can fail."""
    script = textwrap.dedent(
        """
        import jax.export
        real = jax.export.register_pytree_node_serialization
        def skip(nodetype, **kw):
            if nodetype.__name__ != "Tensor":
                return real(nodetype, **kw)
            return nodetype
        jax.export.register_pytree_node_serialization = skip
        import jax, axjax as ax
        from tests.axes import Batch
        x = ax.ones((2,), Batch)
        try:
            jax.export.export(jax.jit(lambda t: t * 2.0))(x).serialize()
        except Exception as e:
            print("FAILED:", type(e).__name__, e)
        else:
            print("SERIALIZED")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("FAILED:") and "Tensor" in done.stdout, done.stdout


def test_a_label_defined_in_a_function_is_refused_when_serializing() -> None:
    @final
    class Local(ax.Axis): ...

    x = ax.ones((2,), Local)
    exported = jax.export.export(jax.jit(lambda t: t + 1.0))(x)
    with pytest.raises(ax.ExportAxisError) as e:
        exported.serialize()
    assert str(e.value) == (
        f"Cannot serialize axis label Local ({__name__}:test_a_label_defined_in_a_"
        "function_is_refused_when_serializing.<locals>.Local) for jax.export: it is defined "
        "inside a function, so no other process can import it (define the label at the top "
        "level of a module)"
    )


def test_a_label_defined_again_is_refused_when_serializing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tests.axes as axes_module

    @final
    class Time(ax.Axis): ...  # what a notebook cell run twice makes

    Time.__module__, Time.__qualname__ = "tests.axes", "Time"
    x = ax.ones((2,), Time)
    assert axes_module.Time is not Time
    exported = jax.export.export(jax.jit(lambda t: t + 1.0))(x)
    with pytest.raises(ax.ExportAxisError, match=r"tests\.axes:Time is another class \(was the"):
        exported.serialize()


def _module_with_label(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> Any:
    (tmp_path / f"{name}.py").write_text(
        "from typing import final\nimport axjax as ax\n\n\n@final\nclass Far(ax.Axis): ...\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    return importlib.import_module(name)


def test_a_label_whose_module_is_missing_at_load_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = _module_with_label(tmp_path, monkeypatch, "axjax_export_gone")
    x = ax.ones((2,), mod.Far)
    blob = jax.export.export(jax.jit(lambda t: t * 3.0))(x).serialize()
    assert jax.export.deserialize(blob).call(x).axes == (mod.Far,)
    monkeypatch.delitem(sys.modules, "axjax_export_gone")
    (tmp_path / "axjax_export_gone.py").unlink()
    with pytest.raises(ax.ExportAxisError) as e:
        jax.export.deserialize(blob)
    assert str(e.value) == (
        "Cannot load the axis label axjax_export_gone:Far of a serialized jax.export "
        "function: axjax_export_gone cannot be imported here (No module named "
        "'axjax_export_gone'); make the module that defines the label importable (install "
        "it, or add its folder to sys.path) before jax.export.deserialize"
    )


def test_a_label_missing_from_its_module_at_load_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = _module_with_label(tmp_path, monkeypatch, "axjax_export_moved")
    blob = jax.export.export(jax.jit(lambda t: t * 3.0))(ax.ones((2,), mod.Far)).serialize()
    monkeypatch.delattr(mod, "Far")
    with pytest.raises(ax.ExportAxisError) as e:
        jax.export.deserialize(blob)
    assert str(e.value) == (
        "Cannot load the axis label axjax_export_moved:Far of a serialized jax.export "
        "function: module axjax_export_moved has no Far (define the label there, as the "
        "exporting program did, before jax.export.deserialize)"
    )
    monkeypatch.setattr(mod, "Far", 3, raising=False)
    with pytest.raises(ax.ExportAxisError, match="Far in module axjax_export_moved is 3, not an"):
        jax.export.deserialize(blob)


def test_axis_references_resolve_to_the_same_class() -> None:
    for label in (Batch, Pixel, Hidden, Time):
        ref = _interop.axis_reference(label)
        assert ref == f"tests.axes:{label.__name__}"
        assert _interop.resolve_axis(ref) is label
    assert _interop._deserialize_axes(_interop._serialize_axes((Batch, Pixel))) == (Batch, Pixel)
    record = json.loads(_interop._serialize_axes((Batch,)))
    assert record == {"format": 1, "axes": ["tests.axes:Batch"]}
    with pytest.raises(ax.ExportAxisError, match="its record has format 9"):
        _interop._deserialize_axes(json.dumps({"format": 9, "axes": []}).encode())
    with pytest.raises(ax.ExportAxisError, match="is not axjax's record"):
        _interop._deserialize_axes(b"\x00garbage")


def test_roles_made_on_demand_are_named_by_their_axis() -> None:
    """``ax.KeyOf[Time]`` and ``ax.Out[Hidden]`` live in no module: they are written as the
    role of their axis and made again when read (the attention layers' default key axis and
    a square Linear's output axis round-trip through jax.export)."""
    for role, inner, kind in ((ax.KeyOf[Time], Time, "KeyOf"), (ax.Out[Hidden], Hidden, "Out")):
        ref = _interop.axis_reference(role)
        assert ref == f"axjax:{kind}[tests.axes:{inner.__name__}]"
        assert _interop.resolve_axis(ref) is role
    nested = _interop.axis_reference(ax.KeyOf[ax.Out[Hidden]])
    assert nested == "axjax:KeyOf[axjax:Out[tests.axes:Hidden]]"
    assert _interop.resolve_axis(nested) is ax.KeyOf[ax.Out[Hidden]]


# ------------------------------------------------------------------------- treescope


def test_treescope_render_array_names_the_axes() -> None:
    treescope = pytest.importorskip("treescope", reason="treescope is in the dev extra")
    x = ax.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4), Batch, Pixel)
    page = treescope.lowering.render_to_html_as_root(
        treescope.render_array(x).treescope_part, compressed=False
    )
    assert '"label": "Batch: 3"' in page and '"label": "Pixel: 4"' in page
    adapter = type(x).__treescope_ndarray_adapter__(x)
    infos = adapter.get_axis_info_for_array_data(x)
    assert [(i.axis_name, i.size) for i in infos] == [("Batch", 3), ("Pixel", 4)]
    assert adapter.get_array_summary(x, fast=True) == "Tensor[F32, Batch=3, Pixel=4]"
    assert adapter.get_array_summary(x, fast=False) == (
        "Tensor[F32, Batch=3, Pixel=4](mean=5.5, std=3.452, min=0, max=11)"
    )
    # a Tensor mask is lined up by axis name, whatever its order
    mask = ax.tensor(np.array([True, False, True, True]), Pixel)
    data, kept = adapter.get_array_data_with_truncation(x, mask, (None, None))
    np.testing.assert_array_equal(data, np.arange(12.0).reshape(3, 4))
    np.testing.assert_array_equal(kept, np.broadcast_to([True, False, True, True], (3, 4)))
    with pytest.raises(ValueError, match="the mask has axes Time that the tensor lacks"):
        adapter.get_array_data_with_truncation(x, ax.ones((2,), Time, dtype=ax.Bool), (None,) * 2)
    masked = treescope.render_array(x, valid_mask=mask).treescope_part
    assert '"label": "Batch: 3"' in treescope.lowering.render_to_html_as_root(
        masked, compressed=False
    )


def test_treescope_shows_a_tensor_in_a_tree_by_its_type() -> None:
    treescope = pytest.importorskip("treescope", reason="treescope is in the dev extra")
    x = ax.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4), Batch, Pixel)
    small = ax.ones((2, 2), Batch, Pixel)  # numpy prints its values on two lines
    text = treescope.render_to_text({"w": x, "b": ax.ones((2,), Batch), "s": small})
    assert "'w': Tensor[F32, Batch=3, Pixel=4](mean=5.5, std=3.452, min=0, max=11)" in text
    assert "'b': Tensor[F32, Batch=2]([1., 1.])" in text
    assert "'s': Tensor[F32, Batch=2, Pixel=2]([[1., 1.], [1., 1.]])" in text
    page = treescope.render_to_html({"w": x}, compressed=False)
    assert "Tensor[F32, Batch=3, Pixel=4]" in page and "Batch ↓ Pixel →" in page


# ------------------------------------------------------------------------- repr / HTML


class FetchSpy:
    """Records the bytes of every ``jax.device_get`` result."""

    def __init__(self) -> None:
        self.fetched = 0
        self.real = jax.device_get

    def __call__(self, tree: Any) -> Any:
        out = self.real(tree)
        self.fetched += sum(np.asarray(v).nbytes for v in jax.tree_util.tree_leaves(out))
        return out


BIG = (1 << 20) + 8  # above _display.ON_HOST: summarised on the device


def big_tensor() -> ax.Tensor[Any, Any, Any]:
    arr = jnp.arange(BIG, dtype=jnp.float32).reshape(2, BIG // 2)
    return ax.tensor(arr, Batch, Pixel)


def test_repr_of_a_large_tensor_reads_only_the_statistics(monkeypatch: pytest.MonkeyPatch) -> None:
    x = big_tensor()
    spy = FetchSpy()
    monkeypatch.setattr(jax, "device_get", spy)
    # on an accelerator the guard refuses an implicit read of the array (np.asarray); on
    # the CPU, whose arrays are host memory, it never fires, and the spy is the check
    with jax.transfer_guard_device_to_host("disallow"):
        text = repr(x)
        page = x._repr_html_()
    assert text == (
        "Tensor[F32, Batch=2, Pixel=524292](mean=5.243e+05, std=3.027e+05, min=0, max=1.049e+06)"
    )
    # repr and HTML: 4 statistics and 4 counts each; the preview: 2 rows x 8 edge columns
    assert spy.fetched == 2 * (4 * 4 + 4 * 4) + 2 * 8 * 4
    assert "<th>Batch ↓ Pixel →</th>" in page and "<td>1.049e+06</td>" in page


def test_the_spy_sees_a_whole_array_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutation: summarising on the host (the old repr) reads the whole array, which the
    spy of the test above reports."""
    x = big_tensor()
    spy = FetchSpy()
    monkeypatch.setattr(jax, "device_get", spy)
    monkeypatch.setattr(_display, "ON_HOST", BIG)
    repr(x)
    assert spy.fetched >= 4 * BIG


CASES = {
    "normal": lambda d: sample(d, (40, 30)),
    "with nan and inf": lambda d: np.where(
        np.arange(1200).reshape(40, 30) % 7 == 0,
        np.array([np.nan, np.inf, -np.inf, np.nan] * 300).reshape(40, 30),
        sample(d, (40, 30)),
    ),
    "all nan": lambda d: np.full((40, 30), np.nan),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_device_and_host_summaries_agree_for_every_dtype(
    dtype: type[ax.DType], monkeypatch: pytest.MonkeyPatch
) -> None:
    np_dtype = jnp.dtype(to_numpy_dtype(dtype))
    floating = np.issubdtype(np_dtype, np.floating) or dtype is ax.BF16
    with x64_for(dtype):
        for name, make in CASES.items():
            if name != "normal" and not floating:
                continue
            x = ax.tensor(np.asarray(make(dtype)).astype(np_dtype), Batch, Pixel)
            host = _display.summary(x.array)
            monkeypatch.setattr(_display, "ON_HOST", 0)
            device = _display.summary(x.array)
            monkeypatch.setattr(_display, "ON_HOST", 1 << 20)
            if dtype in (ax.BF16, ax.F16) and name == "normal":
                # summed in F32 on both sides, in another order: the last digit may differ
                assert host.split(", ")[2:] == device.split(", ")[2:], (name, host, device)
            else:
                assert host == device, (name, host, device)


def test_repr_counts_nan_and_infinities() -> None:
    x = ax.tensor(np.array([1.0, np.nan, np.inf, 3, 4, 5, 6, -np.inf], np.float32), Time)
    assert repr(x) == (
        "Tensor[F32, Time=8](mean=3.8, std=1.72, min=1, max=6, nan=1, +inf=1, -inf=1)"
    )
    assert repr(ax.tensor(np.full(8, np.nan, np.float32), Time)) == (
        "Tensor[F32, Time=8](no finite values: nan=8)"
    )
    assert repr(ax.ones((8,), Time).astype(ax.BF16)) == (
        "Tensor[BF16, Time=8](mean=1, std=0, min=1, max=1)"
    )


def test_repr_of_a_donated_tensor_says_so() -> None:
    x = ax.ones((8,), Time)
    x.array.delete()
    assert repr(x) == (
        "Tensor[F32, Time=8](deleted: its buffer was donated to a jitted call or deleted)"
    )


def test_html_preview_names_the_axes_and_elides_the_middle() -> None:
    x = ax.tensor(np.arange(3 * 20 * 30, dtype=np.int32).reshape(3, 20, 30), Time, Batch, Pixel)
    page = x._repr_html_()
    assert "<caption>Time=0 of 3</caption>" in page
    header = (
        "<tr><th>Batch ↓ Pixel →</th><th>0</th><th>1</th><th>2</th><th>3</th><th>…</th>"
        "<th>26</th><th>27</th><th>28</th><th>29</th></tr>"
    )
    assert header in page
    assert (
        "<tr><th>19</th><td>570</td><td>571</td><td>572</td><td>573</td><td>…</td>"
        "<td>596</td><td>597</td><td>598</td><td>599</td></tr>"
    ) in page
    assert "<tr><th>⋮</th>" + "<td>⋮</td>" * 9 + "</tr>" in page
    row = ax.tensor(np.arange(5, dtype=np.int32), Time)._repr_html_()
    assert (
        "<tr><th>Time →</th><th>0</th><th>1</th><th>2</th><th>3</th><th>4</th></tr>"
        "<tr><th></th><td>0</td><td>1</td><td>2</td><td>3</td><td>4</td></tr>"
    ) in row
    assert "axjax-values" not in ax.tensor(np.float32(2.0))._repr_html_()
