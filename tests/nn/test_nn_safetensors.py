"""Modules saved to and loaded from safetensors files: round trip (f32 and bf16), axis
metadata, files written by the ``safetensors`` library from plain arrays, and the errors."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

import axjax as ax
from tests.nn.helpers import Embed, Hidden, Time

KeyPos, Head, HeadDim = ax.KeyOf[Time], ax.nn.Head, ax.nn.HeadDim


def _model(seed: int = 0) -> ax.nn.Sequential:
    k1, k2 = jax.random.split(jax.random.key(seed))
    return ax.nn.Sequential(
        [
            ax.nn.MultiheadAttention(Embed, 8, num_heads=2, query_pos=Time, key=k1),
            ax.nn.Affine(Embed, Hidden, 8, 3, key=k2),
        ]
    )


def _same(a: object, b: object) -> None:
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("dtype", [ax.F32, ax.BF16])
def test_round_trip_keeps_values_axes_and_dtype(tmp_path: Path, dtype: type[ax.DType]) -> None:
    model = ax.nn.cast(_model(0), dtype)
    path = tmp_path / "m.safetensors"
    ax.nn.save_safetensors(model, path, metadata={"note": "hi"})
    loaded = ax.nn.load_safetensors(ax.nn.cast(_model(1), dtype), path)
    _same(loaded, model)
    assert loaded.layers[0].query_proj.axes == (Head, HeadDim, Embed)
    with safe_open(str(path), framework="numpy") as f:  # a standard file, axes in metadata
        meta = f.metadata()
        assert meta["note"] == "hi"
        entry = json.loads(meta["axjax"])["layers.0.query_proj"]
        assert entry == {
            "axes": ["Head", "HeadDim", "Embed"],
            "shape": [2, 4, 8],
            "dtype": np.dtype(dtype.numpy).name,
        }
        assert f.get_tensor("layers.1.weight").shape == (3, 8)


def test_loads_a_file_written_from_plain_arrays(tmp_path: Path) -> None:
    model = _model(0)
    rng = np.random.default_rng(0)
    arrays = {
        "layers.0.query_proj": rng.normal(size=(2, 4, 8)),
        "layers.0.key_proj": rng.normal(size=(2, 4, 8)),
        "layers.0.value_proj": rng.normal(size=(2, 4, 8)),
        "layers.0.output_proj": rng.normal(size=(8, 2, 4)),
        "layers.1.weight": rng.normal(size=(3, 8)),
        "layers.1.bias": rng.normal(size=3),
    }
    arrays = {k: v.astype(np.float32) for k, v in arrays.items()}
    save_file(arrays, str(tmp_path / "plain.safetensors"))
    loaded = ax.nn.load_safetensors(model, tmp_path / "plain.safetensors")
    np.testing.assert_array_equal(loaded.layers[1].weight.array, arrays["layers.1.weight"])
    assert loaded.layers[1].weight.axes == model.layers[1].weight.axes
    bad = dict(arrays, **{"layers.1.weight": arrays["layers.1.weight"].T.copy()})
    save_file(bad, str(tmp_path / "bad.safetensors"))
    with pytest.raises(ax.nn.SafetensorsError) as e:
        ax.nn.load_safetensors(model, tmp_path / "bad.safetensors")
    assert str(e.value) == (
        f"load_safetensors: entry 'layers.1.weight' of {tmp_path / 'bad.safetensors'} is an "
        "array of shape (8, 3), but the module has [Hidden=3, Embed=8] (the module's shape "
        "transposed: a file in PyTorch's layout, which stores a weight as [out, in] for W x, "
        "where this layer keeps the axes shown; transpose the array when converting the "
        "file, e.g. {name: w.T} with safetensors.numpy)"
    )
    # sizes in another order, not reversed (rank 3): the general hint
    permuted = dict(
        arrays, **{"layers.0.output_proj": arrays["layers.0.output_proj"].transpose(1, 0, 2).copy()}
    )
    save_file(permuted, str(tmp_path / "permuted.safetensors"))
    with pytest.raises(
        ax.nn.SafetensorsError,
        match=r"is an array of shape \(2, 8, 4\), .*"
        r"\(the module's sizes in another order: a file in another framework's",
    ):
        ax.nn.load_safetensors(model, tmp_path / "permuted.safetensors")
    # other sizes: no layout hint
    other = dict(arrays, **{"layers.1.weight": np.zeros((3, 7), np.float32)})
    save_file(other, str(tmp_path / "other.safetensors"))
    with pytest.raises(ax.nn.SafetensorsError) as e:
        ax.nn.load_safetensors(model, tmp_path / "other.safetensors")
    assert str(e.value).endswith(
        "is an array of shape (3, 7), but the module has [Hidden=3, Embed=8]"
    )


def test_mismatches_are_clear_errors(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    ax.nn.save_safetensors(_model(0), path)
    other = ax.nn.Sequential(
        [
            ax.nn.MultiheadAttention(Embed, 8, num_heads=2, query_pos=Time, key=jax.random.key(0)),
            ax.nn.Affine(Embed, Hidden, 8, 5, key=jax.random.key(1)),
        ]
    )
    with pytest.raises(
        ax.nn.SafetensorsError,
        match=r"entry 'layers.1.weight' .* is "
        r"\[Hidden=3, Embed=8\], but the module has \[Hidden=5, Embed=8\]",
    ):
        ax.nn.load_safetensors(other, path)
    renamed = ax.nn.Sequential(
        [_model().layers[0], ax.nn.Affine(Hidden, Embed, 3, 8, key=jax.random.key(1))]
    )
    with pytest.raises(
        ax.nn.SafetensorsError,
        match=r"is \[Hidden=3, Embed=8\], but the "
        r"module has \[Embed=8, Hidden=3\] \(same axes in another order",
    ):
        ax.nn.load_safetensors(renamed, path)
    with pytest.raises(ax.nn.SafetensorsError, match="is float32, the module's is bfloat16"):
        ax.nn.load_safetensors(ax.nn.cast(_model(), ax.BF16), path)
    bigger = ax.nn.Sequential([*_model().layers, ax.nn.LayerNorm(Hidden, 3)])
    with pytest.raises(
        ax.nn.SafetensorsError,
        match=r"has no entry 'layers.2.weight' \(the "
        r"module's \[Hidden=3\]\)",
    ):
        ax.nn.load_safetensors(bigger, path)
    with pytest.raises(ValueError, match="the metadata key 'axjax' is axjax's own"):
        ax.nn.save_safetensors(_model(), path, metadata={"axjax": "x"})
