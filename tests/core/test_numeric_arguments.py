"""Every int/float argument of every public callable is checked by one validator.

The callables and their numeric parameters come from introspection: every public callable
of ``ax``, ``ax.nn``, ``ax.nn.init`` and ``ax.train`` (classes through their
constructors, and the public methods of those classes), and each parameter whose
annotation names ``int`` or ``float``. Each is driven with ``0``, ``-1``, ``2.5``,
``True`` and a valid numpy scalar (``np.int64(k)``), on top of a valid baseline call from
the table ``FIXTURES`` below, and must either succeed or raise axjax's own error naming
the argument: never a raw ``ZeroDivisionError``/``MLIRError``/numpy error, never a silent
truncation (``2.5`` where an int is meant, ``True`` anywhere). A new public callable with a
numeric parameter and no fixture fails :func:`test_every_numeric_parameter_has_a_fixture`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import inspect
import itertools
import math
import numbers
import os
import re
import sys
import time
import traceback
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, final

import equinox as eqx
import jax
import numpy as np
import optax
import pytest

import axjax as ax
from axjax.core import _op, _validate
from axjax.core._internal import declared_ops
from axjax.train import Batch, Class, Pixel

NAMESPACES = (("ax", ax), ("ax.nn", ax.nn), ("ax.nn.init", ax.nn.init), ("ax.train", ax.train))
AXJAX_DIR = str(Path(ax.__file__).parent)
SHARED_DATA = Path(  # where tests/conftest.py looks for the real data sets
    os.environ.get("AXJAX_TEST_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data"
)
ERRORS = (TypeError, ValueError, ax.train.CheckpointError, ax.train.DataError)


@final
class A(ax.Axis): ...


@final
class B(ax.Axis): ...


@final
class New(ax.Axis): ...


@final
class Hid(ax.Axis): ...


@final
class H(ax.Axis): ...


@final
class W(ax.Axis): ...


@final
class Ch(ax.Axis): ...


@final
class Out(ax.Axis): ...


@final
class T(ax.Axis): ...


KEY = jax.random.key(0)


def x23() -> Any:
    return ax.ones((2, 3), A, B)


def image() -> Any:
    return ax.ones((1, 4, 4, 2), A, H, W, Ch)


def kernel() -> Any:
    return ax.ones((3, 2, 2, 2), Out, Ch, H, W)


def dataset(n: int = 8) -> ax.train.Dataset:
    rng = np.random.default_rng(0)
    return ax.train.Dataset(
        rng.normal(size=(n, 3)).astype(np.float32), np.arange(n) % 2, classes=("a", "b")
    )


def tiny_model() -> Any:
    return ax.nn.Affine(Pixel, Class, 3, 2, key=KEY)


def classify(model: Any, x: Any, y: Any) -> Any:
    return ax.mean(ax.train.softmax_cross_entropy(model(x), y, Class), Batch)


# ----------------------------------------------------------------------------- fixtures
@dataclasses.dataclass(frozen=True)
class Fixture:
    """A valid call: ``call(**baseline)`` succeeds; ``call(**{**baseline, p: v})`` probes
    parameter ``p`` (for a tuple or mapping baseline, every entry becomes ``v``)."""

    baseline: dict[str, Any]
    call: Callable[..., Any]
    expensive: bool = False  # left out of the mutation run (a training loop, files)


@dataclasses.dataclass(frozen=True)
class Exempt:
    """A callable whose numeric parameters are not user arguments, and why."""

    reason: str


class _Tiny(eqx.Module):
    """The smallest ``ax.nn.Decoder``: an embedding and a causal attention layer."""

    emb: Any
    attn: Any

    def init_cache(self, batch: Any, max_len: int) -> Any:
        return self.attn.init_cache(batch, max_len)

    def __call__(self, ids: Any, *, cache: Any) -> Any:
        y, cache = self.attn(self.emb(ids), cache=cache)
        return ax.contract(y, self.emb.weight, over=B), cache


@functools.cache
def _decoder() -> _Tiny:
    """One :class:`_Tiny` for every probe of ``generate``: a class made per call was a new
    pytree type, so each of the 21 probes compiled ``generate`` again (52 s of the test's 143
    s on the loaded 2-core machine, 17 s now): the probes with the same static arguments
    share one compilation."""
    attn = ax.nn.MultiheadAttention(B, 4, num_heads=2, query_pos=T, causal=True, key=KEY)
    return _Tiny(ax.nn.Embedding(New, B, 5, 4, key=KEY), attn)


def _cache() -> Any:
    return ax.nn.MultiheadAttention(B, 4, num_heads=2, query_pos=T, key=KEY).init_cache({A: 2}, 4)


def _stacked_cache() -> Any:
    """A cache of 3 layers, stacked over ``Layer`` (a stacked model's)."""
    one = _cache()
    stack = [ax.stack([t] * 3, ax.nn.Layer) for t in (one.keys, one.values)]
    return ax.nn.KVCache(*stack, one.length, one.key_pos, ax.nn.Layer)


def _token_file(tmp: Path) -> ax.train.TokenFile:
    path = tmp / "tokens.bin"
    if path.is_file():
        return ax.train.TokenFile(path)
    return ax.train.write_tokens(path, [np.arange(20)])


def _log_once(tmp: Path, step: int, metrics: dict[str, float]) -> None:
    """One ``TensorBoardLogger.log``, the writer closed after (an open one is closed at
    exit, when Python 3.12 can no longer start its thread)."""
    logger = ax.train.TensorBoardLogger(tmp / "tb2")
    try:
        logger.log(step, metrics)
    finally:
        logger.close()


def _ckpts(tmp: Path) -> ax.train.Checkpoints:
    ckpts = ax.train.Checkpoints(tmp / "ckpts", keep=2)
    if not ckpts.steps():
        ckpts.save(0, {"w": ax.ones((2,), A)})
    return ckpts


def _download(tmp: Path, size: Any, timeout: Any) -> Any:
    src = tmp / "mirror" / "f.bin"
    src.parent.mkdir(exist_ok=True)
    src.write_bytes(b"axjax")
    digest = hashlib.sha256(b"axjax").hexdigest()
    dest = tmp / "dl" / "f.bin"
    dest.unlink(missing_ok=True)
    return ax.train.download(
        "f.bin",
        [src.parent.as_uri() + "/"],
        dest,
        digest,
        size=size,
        timeout=timeout,
        progress=False,
    )


def _tiny_idx(tmp: Path) -> tuple[ax.train.DatasetSpec, Path]:
    """A four-image data set in IDX files, and its spec (sizes and sha256 of the files)."""
    folder = tmp / "tiny"
    names = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
    if not folder.is_dir():
        folder.mkdir()
        ax.train.write_idx(folder / names[0], np.zeros((4, 2, 2), np.uint8))
        ax.train.write_idx(folder / names[1], np.array([0, 1, 0, 1], np.uint8))
    files = {
        n: (hashlib.sha256((folder / n).read_bytes()).hexdigest(), (folder / n).stat().st_size)
        for n in names
    }
    return ax.train.DatasetSpec("tiny", "Tiny", files, (), ("a", "b")), folder


def _real_or_absent(load: Callable[..., Any], name: str, timeout: Any) -> Any:
    """``load`` from the real data when this machine has it; elsewhere its "not found"
    error counts as a success (the timeout is checked before the files are looked for)."""
    try:
        return load("test", data_dir=SHARED_DATA / name, download_missing=False, timeout=timeout)
    except ax.train.DataError as e:
        if "not found" not in str(e):
            raise
        return None


def _all_initialisers(sizes: Any) -> Any:
    init = ax.nn.init
    init.glorot_uniform()(KEY, sizes, fan_in=B, fan_out=A)
    return init.orthogonal()(KEY, sizes, fan_in=B, fan_out=A)


def fixtures(tmp: Path) -> dict[str, Fixture | Exempt]:
    """One valid call per callable with numeric parameters, keyed by its public name."""
    nn, train, init = ax.nn, ax.train, ax.nn.init
    trees = [nn.Tree(1, (nn.Tree(2), nn.Tree(3)))]
    spec, tiny = _tiny_idx(tmp)
    folders = itertools.count()
    records = "a result record axjax fills in, not an argument a user passes"
    return {
        # ------------------------------------------------------------------ ax: ops
        "ax.zeros": Fixture({"shape": (2, 3)}, lambda shape: ax.zeros(shape, A, B)),
        "ax.ones": Fixture({"shape": (2, 3)}, lambda shape: ax.ones(shape, A, B)),
        "ax.full": Fixture({"shape": (2,)}, lambda shape: ax.full(shape, A, value=1.0)),
        "ax.normal": Fixture(
            {"shape": (2,), "stddev": 1.0, "mean": 0.0},
            lambda shape, stddev, mean: ax.normal(KEY, shape, A, stddev=stddev, mean=mean),
        ),
        "ax.uniform": Fixture(
            {"shape": (2,), "minval": -3.0, "maxval": 3.0},
            lambda shape, minval, maxval: ax.uniform(KEY, shape, A, minval=minval, maxval=maxval),
        ),
        "ax.randint": Fixture(
            {"shape": (2,), "minval": -2, "maxval": 5},
            lambda shape, minval, maxval: ax.randint(KEY, shape, A, minval=minval, maxval=maxval),
        ),
        "ax.arange": Fixture({"n": 3}, lambda n: ax.arange(A, n)),
        "ax.expand_dims": Fixture({"at": 1}, lambda at: ax.expand_dims(x23(), New, at=at)),
        "ax.stack": Fixture({"at": 1}, lambda at: ax.stack([x23(), x23()], New, at=at)),
        "ax.tile": Fixture({"n": 2}, lambda n: ax.tile(x23(), B, n)),
        "ax.unflatten": Fixture(
            {"sizes": (1, 3)}, lambda sizes: ax.unflatten(x23(), B, (H, W), sizes)
        ),
        "ax.broadcast": Fixture(
            {"sizes": {New: 2}}, lambda sizes: ax.broadcast(x23(), (New, A, B), sizes=sizes)
        ),
        "ax.index": Fixture({"i": 1}, lambda i: ax.index(x23(), B, i)),
        "ax.slice": Fixture(
            {"start": 0, "stop": 2, "step": 1},
            lambda start, stop, step: ax.slice(x23(), B, start, stop, step),
        ),
        "ax.one_hot": Fixture(
            {"n": 3}, lambda n: ax.one_hot(ax.tensor([0, 2], A, dtype=ax.I32), New, n)
        ),
        "ax.conv": Fixture(
            {"stride": 1, "dilation": 1, "groups": 1, "padding": 0},
            lambda stride, dilation, groups, padding: ax.conv(
                image(), kernel(), (H, W), stride, padding, dilation, groups
            ),
        ),
        "ax.Conv": Fixture(
            {"stride": 1, "dilation": 1, "groups": 1, "padding": 0},
            lambda stride, dilation, groups, padding: ax.Conv(
                (H, W), stride, padding, dilation, groups
            )(image(), kernel()),
        ),
        "ax.max_pool": Fixture(
            {"window": 2, "stride": 1, "padding": 0},
            lambda window, stride, padding: ax.max_pool(image(), (H, W), window, stride, padding),
        ),
        "ax.avg_pool": Fixture(
            {"window": 2, "stride": 1, "padding": 0},
            lambda window, stride, padding: ax.avg_pool(image(), (H, W), window, stride, padding),
        ),
        "ax.train.linear_cross_entropy": Fixture(
            {"chunk": 2},
            lambda chunk: ax.train.linear_cross_entropy(
                x23(), ax.ones((4, 3), Out, B), ax.zeros((2,), A, dtype=ax.I32), Out, chunk=chunk
            ),
        ),
        "ax.train.LinearCrossEntropy": Fixture(
            {"chunk": 2},
            lambda chunk: ax.train.LinearCrossEntropy(Out, chunk)(
                x23(), ax.ones((4, 3), Out, B), ax.zeros((2,), A, dtype=ax.I32)
            ),
        ),
        "ax.Pool": Fixture(
            {"window": 2, "stride": 1, "padding": 0},
            lambda window, stride, padding: ax.Pool("max", (H, W), window, stride, padding)(
                image()
            ),
        ),
        # ------------------------------------------------------------------ ax: transforms, graph
        "ax.grad": Fixture(
            {"argnums": 0}, lambda argnums: ax.grad(lambda t: ax.sum(t, (A, B)), argnums)(x23())
        ),
        "ax.value_and_grad": Fixture(
            {"argnums": 0},
            lambda argnums: ax.value_and_grad(lambda t: ax.sum(t, (A, B)), argnums)(x23()),
        ),
        "ax.vmap": Fixture({"at": 0}, lambda at: ax.vmap(lambda t: t * 2.0, A, at=at)(x23())),
        "ax.scan": Fixture(
            {"at": 0},
            lambda at: ax.scan(lambda s, x: s + x, A, at=at)(ax.zeros((3,), B), x23()),
        ),
        "ax.Input": Fixture({"sizes": {B: 3}}, lambda sizes: ax.Input(ax.F32, A, B, sizes=sizes)),
        "ax.TensorType": Exempt(
            "the type an op's type rule returns, built on every op application (a hot path); "
            "its sizes come from checked operands"
        ),
        "ax.Part": Exempt("built by a MultiApply node: its index is the result's position"),
        "ax.Loop": Exempt("built by ax.fold/ax.scan on graph nodes: start is their own count"),
        # ------------------------------------------------------------------ ax.nn: layers
        "ax.nn.Linear": Fixture(
            {"in_size": 3, "out_size": 2},
            lambda in_size, out_size: nn.Linear(A, B, in_size, out_size, key=KEY),
        ),
        "ax.nn.Affine": Fixture(
            {"in_size": 3, "out_size": 2},
            lambda in_size, out_size: nn.Affine(A, B, in_size, out_size, key=KEY),
        ),
        "ax.nn.LoRA": Fixture(
            {"rank": 2, "alpha": 4.0},
            lambda rank, alpha: nn.LoRA(
                nn.Linear(B, Hid, 3, 2, key=KEY), rank=rank, alpha=alpha, key=KEY
            )(x23()),
        ),
        "ax.nn.LoRAWeight": Fixture(
            {"rank": 2, "alpha": 4.0},
            lambda rank, alpha: nn.LoRAWeight(
                ax.zeros((2, 3), Hid, B), (B,), (Hid,), rank=rank, alpha=alpha, key=KEY
            ).merge(),
        ),
        "ax.nn.lora": Fixture(
            {"rank": 2, "alpha": 4.0},
            lambda rank, alpha: nn.lora(
                {"fc": nn.Linear(B, Hid, 3, 2, key=KEY)},
                where="fc",
                rank=rank,
                alpha=alpha,
                key=KEY,
            )["fc"](x23()),
        ),
        "ax.nn.MLP": Fixture(
            {"in_size": 3, "out_size": 2, "hidden": {Hid: 4}},
            lambda in_size, out_size, hidden: nn.MLP(
                A, B, in_size, out_size, hidden=hidden, key=KEY
            ),
        ),
        "ax.nn.Embedding": Fixture(
            {"vocab_size": 5, "embed_size": 2},
            lambda vocab_size, embed_size: nn.Embedding(A, B, vocab_size, embed_size, key=KEY),
        ),
        "ax.nn.Conv": Fixture(
            {
                "in_size": 2,
                "out_size": 2,
                "kernel_size": 2,
                "stride": 1,
                "dilation": 1,
                "groups": 1,
                "padding": 0,
            },
            lambda in_size, out_size, kernel_size, stride, dilation, groups, padding: nn.Conv(
                (H, W),
                Ch,
                Out,
                in_size,
                out_size,
                kernel_size,
                stride=stride,
                dilation=dilation,
                groups=groups,
                padding=padding,
                key=KEY,
            ),
        ),
        "ax.nn.Conv1D": Fixture(
            {"in_size": 2, "out_size": 2, "kernel_size": 2},
            lambda in_size, out_size, kernel_size: nn.Conv1D(
                W, Ch, Out, in_size, out_size, kernel_size, key=KEY
            ),
        ),
        "ax.nn.Conv2D": Fixture(
            {"in_size": 2, "out_size": 2, "kernel_size": 2},
            lambda in_size, out_size, kernel_size: nn.Conv2D(
                (H, W), Ch, Out, in_size, out_size, kernel_size, key=KEY
            ),
        ),
        "ax.nn.Conv3D": Fixture(
            {"in_size": 2, "out_size": 2, "kernel_size": 2},
            lambda in_size, out_size, kernel_size: nn.Conv3D(
                (T, H, W), Ch, Out, in_size, out_size, kernel_size, key=KEY
            ),
        ),
        "ax.nn.MaxPool": Fixture(
            {"window": 2, "stride": 1, "padding": 0},
            lambda window, stride, padding: nn.MaxPool((H, W), window, stride, padding)(image()),
        ),
        "ax.nn.AvgPool": Fixture(
            {"window": 2, "stride": 1, "padding": 0},
            lambda window, stride, padding: nn.AvgPool((H, W), window, stride, padding)(image()),
        ),
        "ax.nn.MaxPool1D": Fixture(
            {"window": 2, "stride": 1, "padding": 0},
            lambda window, stride, padding: nn.MaxPool1D(W, window, stride, padding)(image()),
        ),
        "ax.nn.AvgPool1D": Fixture(
            {"window": 2, "stride": 1, "padding": 0},
            lambda window, stride, padding: nn.AvgPool1D(W, window, stride, padding)(image()),
        ),
        "ax.nn.MaxPool2D": Fixture(
            {"window": 2, "stride": 1, "padding": 0},
            lambda window, stride, padding: nn.MaxPool2D((H, W), window, stride, padding)(image()),
        ),
        "ax.nn.AvgPool2D": Fixture(
            {"window": 2, "stride": 1, "padding": 0},
            lambda window, stride, padding: nn.AvgPool2D((H, W), window, stride, padding)(image()),
        ),
        "ax.nn.LayerStack.init": Fixture(
            {"n": 2},
            lambda n: nn.LayerStack.init(
                lambda k: nn.Linear(Hid, Out, 3, 3, key=k), n, key=jax.random.key(0)
            ),
        ),
        "ax.nn.Ensemble.init": Fixture(
            {"n": 2},
            lambda n: nn.Ensemble.init(
                lambda k: nn.Linear(Hid, Out, 3, 3, key=k), n, key=jax.random.key(0)
            ),
        ),
        "ax.nn.Dropout": Fixture({"p": 0.5}, lambda p: nn.Dropout(p)(x23(), key=jax.random.key(1))),
        "ax.nn.MultiheadAttention": Fixture(
            {"embed_size": 4, "num_heads": 2, "head_size": 2, "dropout_p": 0.0},
            lambda embed_size, num_heads, head_size, dropout_p: nn.MultiheadAttention(
                B,
                embed_size,
                num_heads=num_heads,
                head_size=head_size,
                dropout_p=dropout_p,
                query_pos=T,
                key=KEY,
            ),
        ),
        "ax.nn.GroupedQueryAttention": Fixture(
            {
                "embed_size": 8,
                "num_heads": 2,
                "num_kv_heads": 1,
                "head_size": 4,
                "rope_theta": 100.0,
                "sliding_window": 2,
            },
            lambda **kw: nn.GroupedQueryAttention(B, query_pos=T, key=KEY, **kw)(
                ax.ones((2, 3, 8), A, T, B)
            ),
        ),
        "ax.nn.GroupedQueryAttention.init_cache": Fixture(
            {"batch": {A: 2}, "max_len": 4},
            lambda batch, max_len: nn.GroupedQueryAttention(
                B, 8, num_heads=2, num_kv_heads=1, query_pos=T, key=KEY
            ).init_cache(batch, max_len),
        ),
        "ax.nn.SwiGLU": Fixture(
            {"embed_size": 3, "hidden_size": 2},
            lambda embed_size, hidden_size: nn.SwiGLU(B, embed_size, Hid, hidden_size, key=KEY)(
                x23()
            ),
        ),
        "ax.nn.rope_frequencies": Fixture(
            {"head_size": 4, "theta": 100.0},
            lambda head_size, theta: nn.rope_frequencies(head_size, theta),
        ),
        "ax.nn.rotary_embedding": Fixture(
            {"theta": 100.0},
            lambda theta: nn.rotary_embedding(ax.ones((3, 4), T, B), T, B, theta=theta, offset=2),
        ),
        "ax.nn.causal_mask": Fixture(
            {"n_query": 2, "n_key": 3},
            lambda n_query, n_key: nn.causal_mask(T, nn.KeyOfAnyQuery, n_query, n_key, 1),
        ),
        "ax.nn.MultiheadAttention.init_cache": Fixture(
            {"batch": {A: 2}, "max_len": 4},
            lambda batch, max_len: nn.MultiheadAttention(
                B, 4, num_heads=2, query_pos=T, key=KEY
            ).init_cache(batch, max_len),
        ),
        "ax.nn.generate": Fixture(
            {
                "steps": 2,
                "temperature": 0.5,
                "top_k": 2,
                "top_p": 0.9,
                "max_len": 4,
                "stop": 3,
                "pad_id": 0,
                "stream_every": 2,
            },  # fmt: skip
            lambda **kw: nn.generate(
                _decoder(), ax.zeros((1, 2), A, T, dtype=ax.I32), key=KEY, **kw
            ),
        ),
        "ax.nn.KVCache.positions": Fixture({"n": 2}, lambda n: _cache().positions(T, n)),
        "ax.nn.KVCache.layer_view": Fixture(
            {"layer": 1}, lambda layer: _stacked_cache().layer_view(layer)
        ),
        "ax.nn.Decoder.init_cache": Exempt("a protocol: the user's model implements it"),
        "ax.nn.FusedAttention": Exempt(
            "an op the attention layers build: its window is a layer's sliding_window, "
            "checked by the layer (GroupedQueryAttention's fixture)"
        ),
        "ax.rearrange": Fixture(
            {"axes": {"New": 2}},
            lambda axes: ax.rearrange(ax.zeros((4,), A), "(New B) -> New B", New, B, **axes),
        ),
        "ax.nn.cudnn_refusal": Fixture(
            {"head_dim": 64, "n_query": 4, "n_key": 4},
            lambda head_dim, n_query, n_key: nn.cudnn_refusal(
                ax.BF16, head_dim, causal=True, n_query=n_query, n_key=n_key
            ),
        ),
        "ax.nn.default_attention_path": Fixture(
            {"head_dim": 64, "n_query": 4, "n_key": 4},
            lambda head_dim, n_query, n_key: nn.default_attention_path(
                ax.BF16, head_dim, causal=True, n_query=n_query, n_key=n_key
            ),
        ),
        "ax.nn.LayerNorm": Fixture(
            {"sizes": 3, "eps": 1e-5}, lambda sizes, eps: nn.LayerNorm(B, sizes, eps=eps)(x23())
        ),
        "ax.nn.RMSNorm": Fixture(
            {"sizes": 3, "eps": 1e-5}, lambda sizes, eps: nn.RMSNorm(B, sizes, eps=eps)(x23())
        ),
        "ax.nn.RNNCell": Fixture(
            {"in_size": 3, "hidden_size": 2},
            lambda in_size, hidden_size: nn.RNNCell(B, Hid, in_size, hidden_size, key=KEY),
        ),
        "ax.nn.GRUCell": Fixture(
            {"in_size": 3, "hidden_size": 2},
            lambda in_size, hidden_size: nn.GRUCell(B, Hid, in_size, hidden_size, key=KEY),
        ),
        "ax.nn.LSTMCell": Fixture(
            {"in_size": 3, "hidden_size": 2},
            lambda in_size, hidden_size: nn.LSTMCell(B, Hid, in_size, hidden_size, key=KEY),
        ),
        "ax.nn.ChildSumTreeLSTMCell": Fixture(
            {"in_size": 3, "hidden_size": 2},
            lambda in_size, hidden_size: nn.ChildSumTreeLSTMCell(
                B, Hid, in_size, hidden_size, key=KEY
            ),
        ),
        "ax.nn.RNNCell.init_state": Fixture(
            {"batch": {A: 2}}, lambda batch: nn.RNNCell(B, Hid, 3, 2, key=KEY).init_state(batch)
        ),
        "ax.nn.GRUCell.init_state": Fixture(
            {"batch": {A: 2}}, lambda batch: nn.GRUCell(B, Hid, 3, 2, key=KEY).init_state(batch)
        ),
        "ax.nn.LSTMCell.init_state": Fixture(
            {"batch": {A: 2}}, lambda batch: nn.LSTMCell(B, Hid, 3, 2, key=KEY).init_state(batch)
        ),
        "ax.nn.ChildSumTreeLSTMCell.init_state": Fixture(
            {"batch": {A: 2}},
            lambda batch: nn.ChildSumTreeLSTMCell(B, Hid, 3, 2, key=KEY).init_state(batch),
        ),
        "ax.nn.TreeBatch.from_trees": Fixture(
            {"max_nodes": 4, "max_levels": 2, "max_width": 2, "max_children": 2},
            lambda **limits: nn.TreeBatch.from_trees(trees, A, **limits),
        ),
        "ax.nn.Policy": Fixture(
            {"loss_scale": 2.0, "period": 10},
            lambda loss_scale, period: nn.Policy(loss_scale=loss_scale, period=period),
        ),
        "ax.nn.elu": Fixture({"alpha": 1.0}, lambda alpha: nn.elu(x23(), alpha)),
        "ax.nn.leaky_relu": Fixture(
            {"negative_slope": 0.1}, lambda negative_slope: nn.leaky_relu(x23(), negative_slope)
        ),
        # ------------------------------------------------------------------ ax.nn.init
        "ax.nn.init.constant": Fixture(
            {"value": 0.5}, lambda value: init.constant(value)(KEY, {A: 2})
        ),
        "ax.nn.init.uniform": Fixture(
            {"limit": 0.5}, lambda limit: init.uniform(limit)(KEY, {A: 2})
        ),
        "ax.nn.init.normal": Fixture(
            {"stddev": 0.5}, lambda stddev: init.normal(stddev)(KEY, {A: 2})
        ),
        "ax.nn.init.variance_scaling": Fixture(
            {"scale": 1.0},
            lambda scale: init.variance_scaling(scale, "fan_in", "normal")(
                KEY, {A: 2, B: 3}, fan_in=B
            ),
        ),
        "ax.nn.init.orthogonal": Fixture(
            {"gain": 1.0},
            lambda gain: init.orthogonal(gain)(KEY, {A: 2, B: 3}, fan_in=B, fan_out=A),
        ),
        "ax.nn.init.fan": Fixture({"sizes": {A: 2, B: 3}}, lambda sizes: init.fan(sizes, B)),
        "ax.nn.init.Initializer.__call__": Fixture({"sizes": {A: 2, B: 3}}, _all_initialisers),
        # ------------------------------------------------------------------ ax.train
        "ax.train.Loader": Fixture(
            {"batch_size": 4, "normalize": (0.5, 0.25)},
            lambda batch_size, normalize: train.Loader(
                dataset(), batch_size, axes=(Batch, Pixel), normalize=normalize
            ),
        ),
        "ax.train.Loader.epoch": Fixture(
            {"epoch": 0, "start": 1},
            lambda epoch, start: list(train.Loader(dataset(), 4).epoch(epoch, start)),
        ),
        "ax.train.Loader.order": Fixture(
            {"epoch": 1}, lambda epoch: train.Loader(dataset(), 4, key=KEY).order(epoch)
        ),
        "ax.train.BatchSource.epoch": Exempt(
            "a Protocol: Loader.epoch is the implementation, tested above"
        ),
        "ax.train.Dataset.subset": Fixture(
            {"start": 0, "stop": 2}, lambda start, stop: dataset().subset(start, stop)
        ),
        "ax.train.DatasetSpec": Fixture(
            {"files": 10},
            lambda files: train.DatasetSpec("d", "D", {"f.gz": ("0" * 64, files)}, (), ()),
        ),
        "ax.train.fit": Fixture(
            {"epochs": 1, "max_steps": 1, "log_every": 1},
            lambda epochs, max_steps, log_every: train.fit(
                tiny_model(),
                optax.sgd(0.1),
                classify,
                train.Loader(dataset(), 8),
                epochs=epochs,
                max_steps=max_steps,
                log_every=log_every,
                progress=False,
            ),
            expensive=True,
        ),
        "ax.train.EarlyStopping": Fixture(
            {"patience": 2, "min_delta": 0.0, "best": 1.0, "wait": 0},
            lambda **kw: train.EarlyStopping("eval_loss", **kw),
        ),
        "ax.train.RunningMean.update": Exempt(
            "value and weight are data (arrays, traced inside jit), not arguments a user sets"
        ),
        "ax.train.EarlyStopping.update": Exempt(
            "fit calls it with the evaluated metric; a non-finite metric is fit's guard's"
        ),
        "ax.train.ParallelPreset": Fixture(
            {"model": 2}, lambda model: train.ParallelPreset(model, {B: "data"})
        ),
        "ax.train.FitResult": Exempt(records),
        "ax.train.Restored": Exempt(records),
        "ax.train.TrainingDiverged": Exempt(records),
        "ax.train.Checkpoints": Fixture(
            {"keep": 2, "every": 5},
            lambda keep, every: train.Checkpoints(tmp / "c", keep=keep, every=every),
        ),
        "ax.train.Checkpoints.path": Fixture({"step": 3}, lambda step: _ckpts(tmp).path(step)),
        "ax.train.Checkpoints.save": Fixture(
            {"step": 1}, lambda step: _ckpts(tmp).save(step, {"w": ax.ones((2,), A)}), True
        ),
        "ax.train.Checkpoints.restore": Fixture(
            {"step": 0}, lambda step: _ckpts(tmp).restore({"w": ax.ones((2,), A)}, step), True
        ),
        "ax.train.save_checkpoint": Fixture(
            {"step": 1},
            lambda step: train.save_checkpoint(tmp / "s.npz", {"w": ax.ones((2,), A)}, step=step),
            True,
        ),
        "ax.train.save_sharded": Fixture(
            {"step": 1},
            lambda step: train.save_sharded(
                tmp / f"sh{next(folders)}", {"w": ax.ones((2,), A)}, step=step
            ),
            True,
        ),
        "ax.train.TokenFile.check_vocab": Fixture(
            {"vocab_size": 20, "chunk": 4},
            lambda vocab_size, chunk: _token_file(tmp).check_vocab(vocab_size, chunk=chunk),
        ),
        "ax.train.TokenWindows": Fixture(
            {"batch_size": 2, "seq_len": 3, "steps": 2},
            lambda **kw: train.TokenWindows(_token_file(tmp), key=KEY, random=True, **kw),
        ),
        "ax.train.TokenWindows.epoch": Fixture(
            {"epoch": 0, "start": 1},
            lambda epoch, start: list(
                train.TokenWindows(_token_file(tmp), 2, 3).epoch(epoch, start)
            ),
        ),
        "ax.train.write_tokens": Fixture(
            {"separator": 0},
            lambda separator: train.write_tokens(tmp / "w.bin", [[1, 2]], separator=separator),
        ),
        "ax.train.pack_documents": Fixture(
            {"seq_len": 4, "batch_size": 1, "separator": 0},
            lambda seq_len, batch_size, separator: train.pack_documents(
                np.array([0, 1, 2, 0, 3, 4]), seq_len, batch_size, separator=separator
            ),
        ),
        "ax.train.Logger.log": Exempt("a Protocol: the user's logger; fit passes its step"),
        "ax.train.TensorBoardLogger": Fixture(
            {"purge_step": 1},
            lambda purge_step: train.TensorBoardLogger(tmp / "tb", purge_step=purge_step).close(),
        ),
        "ax.train.TensorBoardLogger.log": Fixture(
            {"step": 1, "metrics": {"loss": 1.0}},
            lambda step, metrics: _log_once(tmp, step, metrics),
        ),
        "ax.train.MetricsLog": Fixture(
            {"resume_at": 0}, lambda resume_at: train.MetricsLog(tmp / "log", resume_at=resume_at)
        ),
        "ax.train.read_idx": Fixture(
            {"ndim": 1}, lambda ndim: train.read_idx(tiny / "t10k-labels-idx1-ubyte.gz", ndim=ndim)
        ),
        "ax.train.download": Fixture(
            {"size": 5, "timeout": 10.0},
            lambda size, timeout: _download(tmp, size, timeout),
            True,
        ),
        "ax.train.find_dataset": Fixture(
            {"timeout": 10.0},
            lambda timeout: train.find_dataset(
                spec, tiny, split="test", download_missing=False, timeout=timeout
            ),
        ),
        "ax.train.load_dataset": Fixture(
            {"timeout": 10.0},
            lambda timeout: train.load_dataset(
                spec, "test", data_dir=tiny, download_missing=False, timeout=timeout
            ),
        ),
        "ax.train.mnist": Fixture(
            {"timeout": 10.0}, lambda timeout: _real_or_absent(train.mnist, "mnist", timeout), True
        ),
        "ax.train.fashion_mnist": Fixture(
            {"timeout": 10.0},
            lambda timeout: _real_or_absent(train.fashion_mnist, "fashion-mnist", timeout),
            True,
        ),
    }


# ----------------------------------------------------------------------------- introspection
def _leaves(tp: Any) -> Iterator[Any]:
    """The classes a (resolved) annotation is made of, ``Literal`` values left out."""
    if typing.get_origin(tp) is typing.Literal:
        return
    args = typing.get_args(tp)
    if not args:
        yield tp
        return
    origin = typing.get_origin(tp)
    if origin is type:  # type[Axis] is a class, not a number
        return
    for arg in args:
        yield from _leaves(arg)


def numeric_kind(annotation: Any, namespace: dict[str, Any]) -> str | None:
    """``"int"``, ``"float"``, ``"operand"`` (a Tensor or a number: data, not an argument)
    or ``None``, read from a parameter's annotation (a string under PEP 563)."""
    if isinstance(annotation, typing.ForwardRef):  # a NamedTuple's fields
        annotation = annotation.__forward_arg__
    text = annotation if isinstance(annotation, str) else repr(annotation)
    if not re.search(r"\b(int|float)\b", text) and not isinstance(annotation, str):
        return None
    if "Tensor" in text:
        return "operand" if re.search(r"\b(int|float)\b", text) else None
    try:
        resolved = eval(annotation, namespace) if isinstance(annotation, str) else annotation  # noqa: S307
        leaves = set(_leaves(resolved))
    except Exception:  # a name only the type checkers see: read the text
        leaves = {int} if re.search(r"\bint\b", text) else set()
        leaves |= {float} if re.search(r"\bfloat\b", text) else set()
    if int in leaves:
        return "int"
    return "float" if float in leaves else None


def _namespace(obj: Any) -> dict[str, Any]:
    module = sys.modules.get(getattr(obj, "__module__", ""), None)
    return dict(vars(module)) if module else {}


def public_callables() -> dict[str, Any]:
    """Every public callable (and public method of a public axjax class), by public name."""
    found: dict[str, Any] = {}
    seen: set[int] = set()
    for prefix, ns in NAMESPACES:
        for name in sorted(dir(ns)):
            obj = getattr(ns, name)
            if name.startswith("_") or inspect.ismodule(obj) or not callable(obj):
                continue
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            found[f"{prefix}.{name}"] = obj
            if inspect.isclass(obj) and obj.__module__.startswith("axjax"):
                for mname in sorted(dir(obj)):
                    if mname.startswith("_") and mname != "__call__":
                        continue
                    member = inspect.getattr_static(obj, mname, None)
                    fn = (
                        member.__func__
                        if isinstance(member, classmethod | staticmethod)
                        else member
                    )
                    if not inspect.isfunction(fn) or not fn.__module__.startswith("axjax"):
                        continue
                    found[f"{prefix}.{name}.{mname}"] = getattr(obj, mname)
    return found


def numeric_parameters() -> dict[str, dict[str, str]]:
    """``{callable name: {parameter: "int" | "float"}}`` for every callable that has any,
    and the count of operands (Tensor-or-number parameters) set aside."""
    out: dict[str, dict[str, str]] = {}
    for name, fn in public_callables().items():
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            continue
        target = fn.__init__ if inspect.isclass(fn) else fn
        namespace = {**vars(typing), **_namespace(fn), **_namespace(target)}
        params = {
            p.name: kind
            for p in sig.parameters.values()
            if (kind := numeric_kind(p.annotation, namespace)) in ("int", "float")
        }
        if params:
            out[name] = params
    return out


# ----------------------------------------------------------------------------- probes
PROBES: tuple[Any, ...] = (0, -1, 2.5, True)
TIMES: dict[str, float] = {}


def _apply(base: Any, value: Any) -> Any:
    """``value`` in place of the number ``base``, or of each number it holds."""
    if isinstance(base, Mapping):
        return {k: value for k in base}
    if isinstance(base, tuple | list):
        return type(base)(value for _ in base)
    return value


def _as_numpy(base: Any, kind: str) -> Any:
    """``base`` with every number a numpy scalar (a valid value of another type)."""
    convert = np.int64 if kind == "int" else np.float64
    if isinstance(base, Mapping):
        return {k: convert(v) for k, v in base.items()}
    if isinstance(base, tuple | list):
        return type(base)(convert(v) for v in base)
    return convert(base)


def _from_axjax(error: BaseException) -> bool:
    """Whether ``error`` was raised by axjax's own code (not deep inside JAX or numpy)."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and frames[-1].filename.startswith(AXJAX_DIR)


def check_callable(name: str, params: dict[str, str], fixture: Fixture) -> tuple[list[str], int]:
    """Drive each numeric parameter of ``name``; return the problems found and the number
    of probes made."""
    problems: list[str] = []
    probes = 0

    def run(label: str, kw: dict[str, Any], must: str, param: str) -> None:
        nonlocal probes
        probes += 1
        try:
            with warnings_as_errors():
                fixture.call(**kw)
        except ERRORS as e:
            if must == "succeed":
                problems.append(f"{name}({label}) raised {type(e).__name__}: {e}")
            elif param not in str(e):
                problems.append(f"{name}({label}): the message does not name {param}: {e}")
            elif not _from_axjax(e):
                problems.append(f"{name}({label}): raw {type(e).__name__} from inside: {e}")
        except Exception as e:  # a raw error: ZeroDivisionError, MLIRError, ...
            problems.append(f"{name}({label}) raised a raw {type(e).__name__}: {e}")
        else:
            if must == "raise":
                problems.append(f"{name}({label}) was accepted silently")

    run("baseline", dict(fixture.baseline), "succeed", "")
    for param, kind in params.items():
        base = fixture.baseline[param]
        run(f"{param}=np", {**fixture.baseline, param: _as_numpy(base, kind)}, "succeed", param)
        for value in PROBES:
            must = "raise" if value is True or (kind == "int" and value == 2.5) else "either"
            kw = {**fixture.baseline, param: _apply(base, value)}
            run(f"{param}={value!r}", kw, must, param)
    return problems, probes


@contextlib.contextmanager
def warnings_as_errors() -> Iterator[None]:
    """A numpy overflow warning is a silent wrong value: make it an error here."""
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        yield


def run_all(
    tmp: Path, include_expensive: bool = True, prefix: str = r"ax\."
) -> tuple[list[str], dict[str, int]]:
    table = fixtures(tmp)
    problems: list[str] = []
    counts = {"callables": 0, "parameters": 0, "probes": 0, "exempt": 0}
    for name, params in numeric_parameters().items():
        fixture = table[name]
        if isinstance(fixture, Exempt):
            counts["exempt"] += 1
            continue
        if (fixture.expensive and not include_expensive) or not re.match(prefix, name):
            continue
        start = time.perf_counter()
        found, n = check_callable(name, params, fixture)
        TIMES[name] = time.perf_counter() - start
        problems += found
        counts["callables"] += 1
        counts["parameters"] += len(params)
        counts["probes"] += n
    return problems, counts


# ----------------------------------------------------------------------------- tests
def test_every_numeric_parameter_has_a_fixture(tmp_path: Path) -> None:
    table = fixtures(tmp_path)
    params = numeric_parameters()
    callables = public_callables()
    prefixes = {"axjax": "ax", "axjax.nn": "ax.nn", "axjax.train": "ax.train"}
    for spec in declared_ops():  # the registry's functions are among those introspected
        for fn in spec.functions:
            assert f"{prefixes[spec.namespace]}.{fn}" in callables, (spec, fn)
    missing = sorted(set(params) - set(table))
    assert not missing, f"public callables with numeric parameters and no fixture: {missing}"
    stale = sorted(set(table) - set(params))
    assert not stale, f"fixtures of callables without numeric parameters: {stale}"
    for name, fixture in table.items():
        if isinstance(fixture, Fixture):
            assert set(fixture.baseline) == set(params[name]), name
            for value in fixture.baseline.values():
                leaves = value.values() if isinstance(value, Mapping) else value
                leaves = leaves if isinstance(leaves, tuple | list | type({}.values())) else [value]
                assert all(isinstance(v, numbers.Real) for v in leaves), (name, value)


def test_every_numeric_argument_is_checked(tmp_path: Path) -> None:
    problems, counts = run_all(tmp_path)
    print(
        f"\nnumeric arguments: {counts['callables']} callables, {counts['parameters']} "
        f"parameters, {counts['probes']} probes ({counts['exempt']} callables exempt)"
    )
    slow = sorted(TIMES.items(), key=lambda kv: -kv[1])[:12]
    print("slowest:", ", ".join(f"{k} {v:.2f}s" for k, v in slow))
    assert not problems, "\n".join(problems)
    assert counts["callables"] >= 60 and counts["parameters"] >= 100


def test_the_check_fails_without_the_validator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mutation: the validator accepting everything must make the generated check fail."""

    def accept_int(where: str, name: str, value: Any, *args: Any, **kwargs: Any) -> Any:
        return value

    monkeypatch.setattr(_op, "_OPS", {})  # ops built unchecked here must not be reused
    monkeypatch.setattr(_validate, "check_int", accept_int)
    monkeypatch.setattr(_validate, "check_float", accept_int)
    # the ops of ax itself (not ax.nn, ax.train): enough to show the check can fail
    problems, counts = run_all(tmp_path, include_expensive=False, prefix=r"ax\.(?!nn\.|train\.)")
    print(f"\nwith the validator off: {len(problems)} problems in {counts['probes']} probes")
    assert len(problems) >= 40, problems
    silent = [p for p in problems if "accepted silently" in p]
    raw = [p for p in problems if "raw" in p]
    assert silent and raw


# ----------------------------------------------------------------------------- the quoted examples
@pytest.mark.parametrize(
    "make, error, message",
    [
        (
            lambda: ax.nn.Conv2D((H, W), Ch, Out, 2, 2, 3, stride=0, key=KEY),
            ValueError,
            "Conv2D: stride must be a positive int or 2 positive ints, got 0",
        ),
        (
            lambda: ax.nn.Linear(A, B, 2.5, 3, key=KEY),
            TypeError,
            "Linear: in_size must be a positive int (1, 2, ...), got float 2.5 (a float where "
            "a count or position is meant: convert with int() or use //)",
        ),
        (
            lambda: ax.nn.Linear(A, B, 2.0, 3, key=KEY),
            TypeError,
            "Linear: in_size must be a positive int (1, 2, ...), got float 2.0",
        ),
        (
            lambda: ax.nn.MultiheadAttention(B, 4, num_heads=0, query_pos=T, key=KEY),
            ValueError,
            "MultiheadAttention: num_heads must be a positive int (1, 2, ...), got 0",
        ),
        (
            lambda: ax.nn.Dropout(True),
            TypeError,
            "Dropout: p must be a probability in [0, 1], got True (a bool)",
        ),
        (
            lambda: ax.expand_dims(x23(), New, at=True),
            TypeError,
            "expand_dims: at must be an int (negative counts from the end), got True (a bool)",
        ),
        (
            lambda: ax.tile(x23(), B, -1),
            ValueError,
            "tile: n must be a positive int (1, 2, ...), got -1",
        ),
        (
            lambda: ax.zeros((2, -1), A, B),
            ValueError,
            "zeros: shape must be a non-negative int (0, 1, ...), got -1",
        ),
        (
            lambda: ax.train.Loader(dataset(), 0),
            ValueError,
            "Loader: batch_size must be a positive int (1, 2, ...), got 0",
        ),
        (
            lambda: ax.train.Checkpoints("unused", keep=-1),
            ValueError,
            "Checkpoints: keep must be a positive int (1, 2, ...), got -1",
        ),
        (
            lambda: ax.nn.init.fan({A: 0}, A),
            ValueError,
            "fan: sizes[A] must be a positive int, got 0",
        ),
    ],
)
def test_quoted_examples(make: Callable[[], Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error) as info:
        make()
    assert str(info.value).startswith(message), str(info.value)


def test_numpy_integers_are_ints_and_equal_floats_are_not_cached_as_ints() -> None:
    t = ax.expand_dims(x23(), New, at=np.int64(1))
    assert t.axes == (A, New, B)
    ax.expand_dims(x23(), New, at=1)  # caches the op for 1
    for bad in (1.0, True):  # 1.0 == True == 1: the cache must not let them through
        with pytest.raises(TypeError, match="expand_dims: at must be an int"):
            ax.expand_dims(x23(), New, at=bad)
    assert math.isclose(ax.nn.Dropout(np.float32(0.25)).p, 0.25)
