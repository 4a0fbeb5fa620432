"""Parallel checks, run as ``python tests/parallel/_checks.py NAME...`` in a subprocess with 8
simulated CPU devices (JAX fixes the device count when it starts, so pytest's own process
cannot host them). Each check asserts; the script prints ``PASS name`` per check."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, final

import jax

# 8 simulated devices; the two-process check (_two_process.py) asks for 4 per process
jax.config.update("jax_num_cpu_devices", int(os.environ.get("AXJAX_CHECK_DEVICES", "8")))

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import axjax as ax  # noqa: E402
from tests.axes import Batch, Class, Hidden, Pixel, Time  # noqa: E402
from tests.parallel._examples import load_example  # noqa: E402

FULL = os.environ.get("AXJAX_FULL_PARALLEL") == "1"
CHECKS: dict[str, Callable[[], None]] = {}


def check(fn: Callable[[], None]) -> Callable[[], None]:
    CHECKS[fn.__name__] = fn
    return fn


def mesh(kind: str, shape: tuple[int, int] = (4, 2)) -> jax.sharding.Mesh:
    t = AxisType.Explicit if kind == "explicit" else AxisType.Auto
    return jax.make_mesh(shape, ("data", "model"), axis_types=(t, t))


def raises(exc: type[BaseException], text: str, fn: Callable[[], Any]) -> None:
    try:
        fn()
    except exc as e:
        assert text in str(e), f"expected {text!r} in {e}"
        return
    raise AssertionError(f"no {exc.__name__} raised (expected {text!r})")


# ------------------------------------------------------------------------- HLO collectives
def collectives(hlo: str, kind: str) -> list[frozenset[frozenset[int]]]:
    """The device groups of every ``kind`` (all-reduce, all-gather, ...) in compiled HLO."""
    found = []
    for line in hlo.splitlines():
        if f" {kind}(" not in line and f" {kind}-start(" not in line:
            continue
        m = re.search(
            r"replica_groups=(\{\{[\d,{}]*\}\}|\[[\d,]+\]<=\[[\d,]+\](T\([\d,]+\))?"
            r"|mesh\[[^\]]*\](, device_ids=\([^)]*\)\))? \{[^}]*\})",
            line,
        )
        assert m, line
        found.append(_groups(m.group(1)))
    return found


def _groups(text: str) -> frozenset[frozenset[int]]:
    if text.startswith("mesh"):  # mesh['axis_0'=4,'axis_1'=2] {'axis_0'}: groups span axis_0
        dims = re.findall(r"'(\w+)'=(\d+)", text)
        chosen = re.findall(r"'(\w+)'", text.rsplit("{", 1)[1])
        ids = np.arange(int(np.prod([int(n) for _, n in dims])))
        perm = re.search(r"device_ids=\(\[([\d,]+)\](?:T\(([\d,]+)\))?\)", text)
        if perm:  # device_ids=([4,2]T(1,0)): the device at each mesh position
            ids = ids.reshape([int(v) for v in perm.group(1).split(",")])
            if perm.group(2):
                ids = ids.transpose([int(v) for v in perm.group(2).split(",")])
        ids = ids.reshape([int(n) for _, n in dims])
        where = [i for i, (name, _) in enumerate(dims) if name in chosen]
        moved = np.moveaxis(ids, where, list(range(-len(where), 0)))
        size = int(np.prod([ids.shape[i] for i in where]))
        return frozenset(frozenset(int(v) for v in r) for r in moved.reshape(-1, size))
    if text.startswith("{"):
        return frozenset(
            frozenset(int(v) for v in g.split(",") if v) for g in re.findall(r"\{([\d,]*)\}", text)
        )
    m = re.match(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
    assert m
    out_shape = [int(v) for v in m.group(1).split(",")]
    iota = np.arange(int(np.prod([int(v) for v in m.group(2).split(",")])))
    iota = iota.reshape([int(v) for v in m.group(2).split(",")])
    if m.group(3):
        iota = iota.transpose([int(v) for v in m.group(3).split(",")])
    rows = iota.reshape(out_shape)
    return frozenset(frozenset(int(v) for v in r) for r in rows)


def groups_over(m: jax.sharding.Mesh, name: str) -> frozenset[frozenset[int]]:
    """The device groups of a collective over mesh axis ``name`` (by device position)."""
    ids = np.vectorize(lambda d: d.id)(m.devices)
    axis = m.axis_names.index(name)
    moved = np.moveaxis(ids, axis, -1).reshape(-1, ids.shape[axis])
    position = {d: i for i, d in enumerate(ids.reshape(-1))}
    return frozenset(frozenset(position[d] for d in g) for g in moved)


# ------------------------------------------------------------------------------ models
class Mlp(eqx.Module):
    l1: ax.nn.Affine[Any, Pixel, Hidden]
    l2: ax.nn.Affine[Any, Hidden, Class]

    def __init__(self, key: jax.Array) -> None:
        k1, k2 = jax.random.split(key)
        self.l1 = ax.nn.Affine(Pixel, Hidden, 12, 16, key=k1)
        self.l2 = ax.nn.Affine(Hidden, Class, 16, 4, key=k2)

    def __call__(self, x: Any) -> Any:
        return self.l2(ax.tanh(self.l1(x)))


@final
class Height(ax.Axis): ...


@final
class Width(ax.Axis): ...


class Cnn(eqx.Module):
    conv: ax.nn.Conv2D[Any, Any, Any, Pixel, Hidden]
    out: ax.nn.Affine[Any, Hidden, Class]

    def __init__(self, key: jax.Array) -> None:
        k1, k2 = jax.random.split(key)
        self.conv = ax.nn.Conv2D((Height, Width), Pixel, Hidden, 3, 16, 3, key=k1)
        self.out = ax.nn.Affine(Hidden, Class, 16, 4, key=k2)

    def __call__(self, x: Any) -> Any:
        h = ax.relu(self.conv(x))
        return self.out(ax.mean(ax.mean(h, Height), Width))


class Attn(eqx.Module):
    attn: ax.nn.MultiheadAttention
    out: ax.nn.Affine[Any, Pixel, Class]

    def __init__(self, key: jax.Array) -> None:
        k1, k2 = jax.random.split(key)
        self.attn = ax.nn.MultiheadAttention(Pixel, 12, num_heads=2, query_pos=Time, key=k1)
        self.out = ax.nn.Affine(Pixel, Class, 12, 4, key=k2)

    def __call__(self, x: Any) -> Any:
        return self.out(ax.mean(self.attn(x), Time))


class Lstm(eqx.Module):
    rnn: ax.nn.Recurrent
    out: ax.nn.Affine[Any, Hidden, Class]

    def __init__(self, key: jax.Array) -> None:
        k1, k2 = jax.random.split(key)
        self.rnn = ax.nn.Recurrent(ax.nn.LSTMCell(Pixel, Hidden, 12, 16, key=k1), over=Time)
        self.out = ax.nn.Affine(Hidden, Class, 16, 4, key=k2)

    def __call__(self, x: Any) -> Any:
        return self.out(ax.mean(self.rnn(x), Time))


def model_input(name: str, seed: int = 0) -> Any:
    k = jax.random.key(seed + 7)
    if name == "cnn":
        return ax.tensor(jax.random.normal(k, (8, 6, 6, 3)), Batch, Height, Width, Pixel)
    if name in ("attention", "lstm"):
        return ax.tensor(jax.random.normal(k, (8, 5, 12)), Batch, Time, Pixel)
    return data(seed)[0]


MODELS: dict[str, tuple[Callable[[jax.Array], Any], dict[str, Any]]] = {
    "mlp": (Mlp, {Hidden: "model"}),
    "cnn": (Cnn, {Hidden: "model"}),
    "attention": (Attn, {ax.nn.Head: "model"}),
    "lstm": (Lstm, {Hidden: "model"}),
}


def loss_fn(model: Any, x: Any, y: Any) -> Any:
    d = model(x) - y
    return ax.mean(ax.mean(d * d, Batch), Class).array


def reference_steps(model: Any, opt: Any, x: Any, y: Any, n: int) -> tuple[Any, list[float]]:
    """``n`` steps on one device (jitted: faster than op by op for the scan and attention)."""
    state = opt.init(eqx.filter(model, eqx.is_array))

    @eqx.filter_jit
    def step(model: Any, state: Any) -> Any:
        loss, g = eqx.filter_value_and_grad(loss_fn)(model, x, y)
        updates, state = opt.update(g, state, model)
        return eqx.apply_updates(model, updates), state, loss

    losses = []
    for _ in range(n):
        model, state, loss = step(model, state)
        losses.append(float(loss))
    return model, losses


def sharded_steps(
    model: Any, opt: Any, x: Any, y: Any, n: int, m: Any, rules: Any, param_rules: Any = None
) -> tuple[Any, list[float], str]:
    with ax.axis_rules(m, rules, param_rules=param_rules):
        model = ax.shard(model, params=True)
        x, y = ax.shard(x), ax.shard(y)
        state = opt.init(eqx.filter(model, eqx.is_array))
        p_sh = ax.sharding(model, params=True)
        s_sh = ax.sharding(state, params=True)

        def step(model: Any, state: Any, x: Any, y: Any) -> Any:
            loss, g = eqx.filter_value_and_grad(loss_fn)(model, x, y)
            updates, state = opt.update(g, state, model)
            return eqx.apply_updates(model, updates), state, loss

        # compiled once: the HLO checked is the program that runs
        compiled = (
            jax.jit(step, out_shardings=(p_sh, s_sh, None)).lower(model, state, x, y).compile()
        )
        hlo = compiled.as_text()
        losses = []
        for _ in range(n):
            model, state, loss = compiled(model, state, x, y)
            losses.append(float(loss))
        for t, s in zip(
            jax.tree.leaves(model, is_leaf=lambda v: isinstance(v, ax.Tensor)),
            jax.tree.leaves(p_sh),
            strict=True,
        ):
            if isinstance(t, ax.Tensor):
                assert t.array.sharding.spec == s.spec, (t, t.array.sharding, s)
    return model, losses, hlo


def data(seed: int = 0, batch: int = 8) -> tuple[Any, Any]:
    k1, k2 = jax.random.split(jax.random.key(seed))
    return (
        ax.tensor(jax.random.normal(k1, (batch, 12)), Batch, Pixel),
        ax.tensor(jax.random.normal(k2, (batch, 4)), Batch, Class),
    )


def close(a: Any, b: Any, tol: float = 2e-6) -> None:
    for u, v in zip(
        jax.tree.leaves(eqx.filter(a, eqx.is_array)),
        jax.tree.leaves(eqx.filter(b, eqx.is_array)),
        strict=True,
    ):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=tol, atol=tol)


RULES = {
    "data": ({Batch: "data"}, None),
    "tensor": ({Hidden: "model"}, None),
    "data+tensor": ({Batch: "data", Hidden: "model"}, None),
    "fsdp": ({Batch: ("data", "model")}, {Hidden: ("data", "model")}),
}


@check
def mlp_sharded_equals_unsharded() -> None:
    x, y = data()
    model = Mlp(jax.random.key(1))
    kinds = ["explicit", "auto"]
    opts = {"sgd": optax.sgd(0.1), "adam": optax.adam(1e-2)}
    cases = [(r, k, o) for r in RULES for k in kinds for o in opts]
    if not FULL:  # representative: every rule set, both mesh kinds, both optimizers
        cases = [c for i, c in enumerate(cases) if i % 3 == 0]
    refs = {o: reference_steps(model, opts[o], x, y, 3) for o in opts}  # one device
    for rname, kind, oname in cases:
        rules, param_rules = RULES[rname]
        ref, ref_losses = refs[oname]
        got, losses, hlo = sharded_steps(
            model, opts[oname], x, y, 3, mesh(kind), rules, param_rules
        )
        np.testing.assert_allclose(losses, ref_losses, rtol=2e-6, err_msg=f"{rname} {kind}")
        close(got, ref)
        m = mesh(kind)
        reduces = collectives(hlo, "all-reduce")
        if rname == "data":
            assert groups_over(m, "data") in reduces, (rname, kind, reduces)
        if rname in ("tensor", "data+tensor"):
            assert groups_over(m, "model") in reduces, (rname, kind, reduces)
        if rname == "data+tensor":
            assert groups_over(m, "data") in reduces, (rname, kind, reduces)
        if rname == "fsdp":  # the weights, split over all 8 devices, gathered for use
            everything = frozenset({frozenset(range(8))})
            assert everything in collectives(hlo, "all-gather"), (kind, hlo)


def model_rules(name: str, rname: str) -> tuple[dict[Any, Any], dict[Any, Any] | None]:
    """(compute rules, parameter rules) of rule set ``rname`` for model ``name``: tensor
    parallel splits the model's inner axis over "model"; FSDP splits the batch over all 8
    devices and each weight along an axis that divides (the attention's Pixel=12 over the
    4 of "data")."""
    tensor = MODELS[name][1]
    if rname == "fsdp":
        weights = {Pixel: "data"} if name == "attention" else {Hidden: ("data", "model")}
        return {Batch: ("data", "model")}, weights
    return {"data": {Batch: "data"}, "tensor": tensor, "data+tensor": {Batch: "data", **tensor}}[
        rname
    ], None


OPTS: dict[str, Callable[[], Any]] = {
    "sgd": lambda: optax.sgd(0.1),
    "adam": lambda: optax.adam(1e-2),
}


@check
def models_sharded_equal_unsharded() -> None:
    y = data()[1]
    cases = [
        (n, r, k, o)
        for n in MODELS
        for r in ("data", "tensor", "data+tensor", "fsdp")
        for k in ("explicit", "auto")
        for o in OPTS
    ]
    if not FULL:  # representative: each model under data+tensor (SGD) and FSDP (Adam); the
        # LSTM's data+tensor on an Explicit mesh (its scan's initial state, replicated,
        # resharded to the [Batch@data, Hidden@model] the cell gives: graph/_scan.py)
        cases = []
        for i, n in enumerate(MODELS):
            kinds = ("explicit", "auto") if i % 2 == 0 or n == "lstm" else ("auto", "explicit")
            cases += [(n, "data+tensor", kinds[0], "sgd"), (n, "fsdp", kinds[1], "adam")]
    refs: dict[tuple[str, str], tuple[Any, list[float]]] = {}
    for name, rname, kind, oname in cases:
        rules, param_rules = model_rules(name, rname)
        model, x = MODELS[name][0](jax.random.key(3)), model_input(name)
        if (name, oname) not in refs:  # the one-device run, once per model and optimizer
            refs[name, oname] = reference_steps(model, OPTS[oname](), x, y, 2)
        ref, ref_losses = refs[name, oname]
        m = mesh(kind)
        got, losses, hlo = sharded_steps(model, OPTS[oname](), x, y, 2, m, rules, param_rules)
        where = f"{name} {rname} {kind} {oname}"
        np.testing.assert_allclose(losses, ref_losses, rtol=5e-6, err_msg=where)
        close(got, ref, 5e-6)
        reduces = collectives(hlo, "all-reduce")
        if rname in ("data", "data+tensor"):  # the gradients summed over the batch blocks
            assert groups_over(m, "data") in reduces, (where, reduces)
        if rname in ("tensor", "data+tensor"):  # the partial sums over the split axis
            assert groups_over(m, "model") in reduces, (where, reduces)
        if rname == "fsdp":  # the weights gathered for use
            assert collectives(hlo, "all-gather"), where


@check
def rules_errors_name_the_axes() -> None:
    m = mesh("explicit", (1, 8))
    x = ax.zeros((4, 100), Batch, Hidden)
    raises(
        ax.AxisError,
        "Hidden=100 cannot be split 8 ways over mesh axis 'model'",
        lambda: ax.sharding(x, {Hidden: "model"}, mesh=m),
    )
    raises(
        ax.AxisError,
        "mesh axis 'model' would shard both Batch and Hidden",
        lambda: ax.sharding(
            ax.zeros((8, 8), Batch, Hidden), {Batch: "model", Hidden: "model"}, mesh=m
        ),
    )
    raises(
        ax.AxisError,
        "Hidden maps to mesh axis 'modl', but the mesh has axes ('data', 'model')",
        lambda: ax.axis_rules(m, {Hidden: "modl"}).__enter__(),
    )
    raises(RuntimeError, "no axis rules", lambda: ax.shard(x))
    with ax.axis_rules(m, {Batch: "data"}):
        raises(
            ax.AxisError,
            "Hidden has no mesh axis in the rules",
            lambda: ax.psum(ax.zeros((4,), Batch), Hidden),
        )
        raises(
            ax.AxisError,
            "the tensor still has axis Batch",
            lambda: ax.psum(ax.zeros((4,), Batch), Batch),
        )


@check
def shard_sharding_abstract() -> None:
    for kind in ("explicit", "auto"):
        m = mesh(kind)
        x = ax.tensor(jnp.arange(32.0).reshape(8, 4), Batch, Hidden)
        with ax.axis_rules(m, {Batch: "data", Hidden: "model"}) as rules:
            s = ax.sharding({"x": x, "n": 3})
            assert s == {"x": NamedSharding(m, P("data", "model")), "n": None}, s
            y = ax.shard(x)
            assert y.array.sharding.spec == P("data", "model")
            assert y.array.addressable_shards[0].data.shape == (2, 2)
            z = jax.device_put(x, ax.sharding(x))
            assert z.array.sharding == s["x"]
            a = ax.abstract(x)
            assert isinstance(a, ax.Tensor) and a.axes == (Batch, Hidden)
            assert a.array.sharding == s["x"] and a.array.shape == (8, 4)

            @jax.jit
            def f(t: Any) -> Any:
                return ax.shard(ax.transpose(t, Hidden, Batch) * 2.0)

            out = f(ax.tensor(x.array, Batch, Hidden))
            assert out.array.sharding.spec == P("model", "data"), (kind, out.array.sharding)
            np.testing.assert_array_equal(out.array, 2 * x.array.T)
            assert "AxisRules" in repr(rules)


def largest_buffer(hlo: str) -> int:
    """The element count of the largest array shape in compiled (per-device) HLO."""
    shapes = re.findall(r"\b(?:pred|[suf]\d+|bf16|c\d+)\[([\d,]*)\]", hlo)
    return max(int(np.prod([int(v) for v in s.split(",") if v])) for s in shapes)


@check
def sharded_init_never_whole() -> None:
    """The program ``ax.sharded_init`` runs (captured from it) has no buffer as large as a
    whole split parameter: its largest is one device's block of the largest parameter, and
    its outputs per device are the blocks; no collectives."""
    from axjax.parallel import _rules

    programs: list[Any] = []
    build = _rules._init_program

    def capture(*a: Any, **k: Any) -> Any:
        programs.append(build(*a, **k))
        return programs[-1]

    ref = Mlp(jax.random.key(1))
    _rules._init_program = capture  # type: ignore[assignment]
    try:
        for kind in ("explicit", "auto"):
            with ax.axis_rules(
                mesh(kind), {Batch: "data"}, param_rules={Hidden: ("data", "model")}
            ):
                model = ax.sharded_init(Mlp, jax.random.key(1))
            close(model, ref, 0)
            w = model.l1.weight  # [Hidden=16, Pixel=12]: blocks of [2, 12]
            assert w.array.sharding.spec == P(("data", "model"), None)
            assert {s.data.shape for s in w.array.addressable_shards} == {(2, 12)}
            compiled = programs[-1][0]
            hlo = compiled.as_text()
            assert largest_buffer(hlo) == 2 * 12 < 16 * 12, (kind, largest_buffer(hlo))
            params = jax.tree.leaves(model, is_leaf=lambda v: isinstance(v, ax.Tensor))
            blocks = sum(t.array.addressable_shards[0].data.nbytes for t in params)
            whole = sum(t.array.nbytes for t in params)
            out = compiled.memory_analysis().output_size_in_bytes  # + the tuple's pointers
            assert blocks <= out <= blocks + 8 * len(params) < whole, (kind, out, blocks)
            assert collectives(hlo, "all-gather") == [] and collectives(hlo, "all-reduce") == []
    finally:
        _rules._init_program = build  # type: ignore[assignment]
    assert len(programs) == 2


@check
def shard_map_data_and_tensor_parallel() -> None:
    x, y = data()
    model = Mlp(jax.random.key(1))
    ref_loss, ref_g = eqx.filter_value_and_grad(loss_fn)(model, x, y)
    m = mesh("explicit")
    rules = {Batch: "data", Hidden: "model"}
    with ax.axis_rules(m, rules):
        specs_m = jax.tree.map(
            lambda t: ax.partition_spec(t, rules), model, is_leaf=lambda v: isinstance(v, ax.Tensor)
        )
        model_s = ax.shard(model)
        x_s, y_s = ax.shard(x), ax.shard(y)

        def local_loss(model: Any, x: Any, y: Any) -> Any:
            h = ax.tanh(model.l1(x))  # Hidden blocks: column-parallel
            z = ax.contract(h, model.l2.weight)  # partial sums over Hidden
            z = ax.psum(z, Hidden) + ax.broadcast(model.l2.bias, z)
            d = z - y
            return ax.mean(ax.mean(d * d, Batch), Class)

        def global_loss(model: Any, x: Any, y: Any) -> Any:
            # the mean over the data blocks: with check_vma=True, JAX transposes the casts
            # of the replicated parameters into the psum over "data" their gradients need
            return ax.pmean(local_loss(model, x, y), Batch).array

        def step(model: Any, x: Any, y: Any) -> Any:
            return eqx.filter_value_and_grad(global_loss)(model, x, y)

        f = jax.jit(
            jax.shard_map(step, in_specs=(specs_m, P("data"), P("data")), out_specs=(P(), specs_m))
        )
        loss, g = f(model_s, x_s, y_s)
        hlo = f.lower(model_s, x_s, y_s).compile().as_text()
    np.testing.assert_allclose(loss, ref_loss, rtol=2e-6)
    close(g, ref_g, 2e-6)
    reduces = collectives(hlo, "all-reduce")
    assert groups_over(m, "model") in reduces and groups_over(m, "data") in reduces

    # FSDP by hand: each device keeps its block of every Hidden weight, ax.all_gather
    # rebuilds the whole weight for the forward (invariant over "model", so the loss leaves
    # with P()), and its transpose gives each device the gradient of its block
    def gathered_loss(model: Any, x: Any, y: Any) -> Any:
        whole = jax.tree.map(
            lambda t: ax.all_gather(t, Hidden) if Hidden in t.axes else t,
            model,
            is_leaf=lambda v: isinstance(v, ax.Tensor),
        )
        d = whole(x) - y
        return ax.pmean(ax.mean(ax.mean(d * d, Batch), Class), Batch).array

    with ax.axis_rules(m, rules):
        f = jax.jit(
            jax.shard_map(
                eqx.filter_value_and_grad(gathered_loss),
                in_specs=(specs_m, P("data"), P("data")),
                out_specs=(P(), specs_m),
            )
        )
        loss, g = f(model_s, x_s, y_s)
        hlo = f.lower(model_s, x_s, y_s).compile().as_text()
    np.testing.assert_allclose(loss, ref_loss, rtol=2e-6)
    close(g, ref_g, 2e-6)
    assert collectives(hlo, "all-gather").count(groups_over(m, "model")) >= 2, hlo


TBatch, TPixel, TClass = ax.train.Batch, ax.train.Pixel, ax.train.Class


def tiny_dataset() -> ax.train.Dataset:
    rng = np.random.default_rng(0)
    return ax.train.Dataset(
        rng.integers(0, 256, (64, 4, 4), dtype=np.uint8),
        rng.integers(0, 4, (64,), dtype=np.uint8),
        ("a", "b", "c", "d"),
    )


class FitMlp(eqx.Module):
    l1: ax.nn.Affine[Any, TPixel, Hidden]
    l2: ax.nn.Affine[Any, Hidden, TClass]

    def __init__(self, key: jax.Array) -> None:
        k1, k2 = jax.random.split(key)
        self.l1 = ax.nn.Affine(TPixel, Hidden, 16, 16, key=k1)
        self.l2 = ax.nn.Affine(Hidden, TClass, 16, 4, key=k2)

    def __call__(self, x: Any) -> Any:
        return self.l2(ax.tanh(self.l1(x)))


def train_losses(history: list[dict[str, Any]]) -> list[float]:
    """The ``train_loss`` of every row that has one; never empty, so a comparison of two
    histories cannot pass by comparing nothing."""
    losses = [r["train_loss"] for r in history if "train_loss" in r]
    assert losses, f"no train_loss in the history: {history}"
    return losses


def fit_loss(model: Any, x: Any, y: Any) -> Any:
    return ax.mean(ax.train.softmax_cross_entropy(model(x), y), TBatch)


def interleaved_mesh(kind: str) -> jax.sharding.Mesh:
    """Devices in the order [0, 1, 4, 5, 2, 3, 6, 7]: rows p*B/P are not process p's."""
    devices = np.array(jax.devices())[[0, 1, 4, 5, 2, 3, 6, 7]].reshape(4, 2)
    t = AxisType.Explicit if kind == "explicit" else AxisType.Auto
    return jax.sharding.Mesh(devices, ("data", "model"), axis_types=(t, t))


@check
def loader_rows_by_index() -> None:
    ds, key = tiny_dataset(), jax.random.key(4)
    par = ax.train.Parallel(interleaved_mesh("explicit"), {TBatch: ("data", "model")})
    plain = ax.train.Loader(ds, 16, key=key)
    sharded = ax.train.Loader(ds, 16, key=key, parallel=par)
    for (x0, y0), (x1, y1) in zip(plain.epoch(1), sharded.epoch(1), strict=True):
        assert x1.array.sharding.spec == P(("data", "model"), None), x1.array.sharding
        np.testing.assert_allclose(np.asarray(x1.array), np.asarray(x0.array), rtol=1e-6)
        np.testing.assert_array_equal(np.asarray(y1.array), np.asarray(y0.array))
    raises(
        ax.AxisError,
        "Batch=10 cannot be split 8 ways",
        lambda: ax.train.Loader(ds.subset(0, 10), 10, parallel=par),
    )


def assert_rules_shardings(tree: Any, par: Any, where: str) -> None:
    """Every array of ``tree`` has the sharding ``ax.sharding(tree, params=True)`` gives
    under ``par``'s rules (Tensors by their axes; bare arrays, like Adam's count,
    replicated)."""
    with par.active():
        want = ax.sharding(tree, params=True)
    is_t = lambda v: isinstance(v, ax.Tensor)  # noqa: E731
    leaves = jax.tree.leaves(tree, is_leaf=is_t)
    shardings = jax.tree.leaves(want)
    assert len(leaves) == len(shardings) and any(
        is_t(t) and t.array.sharding.spec != P() for t in leaves
    ), (where, want)
    for t, s in zip(leaves, shardings, strict=True):
        a = t.array if is_t(t) else t
        assert a.sharding.is_equivalent_to(s, a.ndim), (where, t, a.sharding, s)


@check
def fit_parallel_equals_one_device() -> None:
    ds, key = tiny_dataset(), jax.random.key(4)
    model = FitMlp(jax.random.key(5))
    common = dict(epochs=2, log_every=1, progress=False, key=jax.random.key(6))
    ref = ax.train.fit(model, optax.sgd(0.1), fit_loss, ax.train.Loader(ds, 16, key=key), **common)
    kinds = ["explicit", "auto"] if FULL else ["explicit"]
    for kind in kinds:
        for rules, param_rules in (
            ({TBatch: "data"}, {Hidden: "model"}),
            ({TBatch: ("data", "model")}, {Hidden: ("data", "model")}),
        ):
            par = ax.train.Parallel(interleaved_mesh(kind), rules, param_rules=param_rules)
            got = ax.train.fit(
                model,
                optax.sgd(0.1),
                fit_loss,
                ax.train.Loader(ds, 16, key=key, parallel=par),
                parallel=par,
                **common,
            )
            np.testing.assert_allclose(
                train_losses(got.history),
                train_losses(ref.history),
                rtol=2e-6,
            )
            close(got.model, ref.model, 2e-6)
            w = got.model.l1.weight
            assert w.array.sharding.spec == par.axis_rules.spec(w, params=True), (
                kind,
                w.array.sharding,
            )
    # the shardings fit leaves the parameters and Adam's state in: what the rules give
    for kind in ("explicit", "auto"):
        par = ax.train.Parallel(
            interleaved_mesh(kind), {TBatch: "data"}, param_rules={Hidden: ("data", "model")}
        )
        got = ax.train.fit(
            model,
            optax.adam(1e-2),
            fit_loss,
            ax.train.Loader(ds, 16, key=key, parallel=par),
            parallel=par,
            **{**common, "epochs": 1},
        )
        assert_rules_shardings((got.model, got.opt_state), par, kind)
    # a list of batches: each placed by the compute rules
    batches = list(ax.train.Loader(ds, 32).epoch(0))
    one = ax.train.fit(model, optax.sgd(0.1), fit_loss, batches, **common)
    par = ax.train.Parallel(interleaved_mesh("explicit"), {TBatch: "data"})
    many = ax.train.fit(model, optax.sgd(0.1), fit_loss, batches, parallel=par, **common)
    close(many.model, one.model, 2e-6)
    # resume: one epoch, checkpoint, then the second epoch from the checkpoint
    par = ax.train.Parallel(
        interleaved_mesh("explicit"), {TBatch: "data"}, param_rules={Hidden: "model"}
    )
    for sharded in (False, True):  # one .npz per step, or orbax folders
        with tempfile.TemporaryDirectory() as tmp:
            loader = ax.train.Loader(ds, 16, key=key, parallel=par)
            ckpts = ax.train.Checkpoints(tmp, keep=1, every=3, sharded=sharded)
            ax.train.fit(
                model,
                optax.sgd(0.1),
                fit_loss,
                loader,
                parallel=par,
                checkpoints=ckpts,
                **{**common, "epochs": 1},
            )
            assert ckpts.steps() == [4], ckpts.steps()  # the older ones pruned
            got = ax.train.fit(
                model,
                optax.sgd(0.1),
                fit_loss,
                loader,
                parallel=par,
                checkpoints=ckpts,
                resume=True,
                **common,
            )
        close(got.model, ref.model, 2e-6)
        w = got.model.l1.weight
        assert w.array.sharding.spec == P("model", None), w.array.sharding


def nan_gradient_loss(model: Any, x: Any, y: Any) -> Any:
    """A finite loss whose gradient is not: the backward of ``sqrt`` at 0."""
    z = model(x)
    return fit_loss(model, x, y) + ax.mean(ax.mean(ax.sqrt(z * 0.0), TBatch), TClass)


def diverged_report(kind: str, guard: str) -> str:
    """The ``TrainingDiverged`` message of ``fit`` on ``nan_gradient_loss`` over a mesh."""
    ds, key = tiny_dataset(), jax.random.key(4)
    par = ax.train.Parallel(interleaved_mesh(kind), {TBatch: "data"}, param_rules={Hidden: "model"})
    try:
        ax.train.fit(
            FitMlp(jax.random.key(5)),
            optax.sgd(0.1),
            nan_gradient_loss,
            ax.train.Loader(ds, 16, key=key, parallel=par),
            parallel=par,
            progress=False,
            log_every=2,
            guard=guard,  # type: ignore[arg-type]
        )
    except ax.train.TrainingDiverged as e:
        return str(e)
    raise AssertionError(f"{kind} {guard}: no TrainingDiverged")


@check
def nan_report_under_mesh() -> None:
    """A NaN gradient under ``fit(parallel=...)`` is a ``TrainingDiverged`` whose op-by-op
    report names the op, on Explicit and Auto meshes, for both guards (the report replays
    the step eagerly: it must run under the step's mesh)."""
    cases = [("explicit", "replay"), ("explicit", "step")]
    cases += [("auto", "replay"), ("auto", "step")] if FULL else []
    for kind, guard in cases:
        text = diverged_report(kind, guard)
        assert "training stopped at step 1: the gradient norm is nan" in text, text
        assert "the first non-finite value came from the backward" in text, text
        assert "of Sqrt at _checks.py" in text, text
    # the check can fail: without the placement context, JAX's raw error comes back
    placement = ax.train.Parallel.placement
    ax.train.Parallel.placement = lambda self: contextlib.nullcontext()  # type: ignore[method-assign, assignment, return-value]
    try:
        raises(ValueError, "Length of device assignment 1", lambda: diverged_report(*cases[0]))
    finally:
        ax.train.Parallel.placement = placement  # type: ignore[method-assign]


def adam_runs(par: Any, sharded: bool, model: Any, loader: Any, folder: str) -> tuple[Any, Any]:
    """Two epochs of Adam straight through, and the same two epochs stopped after the
    first (checkpoints in ``folder``) and resumed."""
    common = dict(log_every=1, progress=False, key=jax.random.key(6), parallel=par)
    through = ax.train.fit(model, optax.adam(1e-2), fit_loss, loader, epochs=2, **common)
    ckpts = ax.train.Checkpoints(folder, keep=1, every=3, sharded=sharded)
    ax.train.fit(model, optax.adam(1e-2), fit_loss, loader, epochs=1, checkpoints=ckpts, **common)
    resumed = ax.train.fit(
        model,
        optax.adam(1e-2),
        fit_loss,
        loader,
        epochs=2,
        checkpoints=ckpts,
        resume=True,
        **common,
    )
    return through, resumed


@check
def adam_resume_bit_for_bit() -> None:
    """Adam (its step count a bare scalar) resumed from sharded (and, with
    AXJAX_FULL_PARALLEL=1, from .npz) checkpoints equals the uninterrupted run bit for bit,
    every leaf in the rules' sharding."""
    ds, key = tiny_dataset(), jax.random.key(4)
    model = FitMlp(jax.random.key(5))
    par = ax.train.Parallel(
        interleaved_mesh("explicit"), {TBatch: "data"}, param_rules={Hidden: "model"}
    )
    loader = ax.train.Loader(ds, 16, key=key, parallel=par)
    for sharded in (True, False) if FULL else (True,):  # CI: the orbax folders
        with tempfile.TemporaryDirectory() as tmp:
            through, resumed = adam_runs(par, sharded, model, loader, tmp)
        assert resumed.step == through.step == 8, (resumed.step, through.step)
        tree = (resumed.model, resumed.opt_state)
        for a, b in zip(
            jax.tree.leaves(tree), jax.tree.leaves((through.model, through.opt_state)), strict=True
        ):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=str(sharded))
        assert train_losses(resumed.history) == train_losses(through.history)
        assert_rules_shardings(tree, par, f"resumed, sharded={sharded}")
    # the check can fail: with the optimizer state's bare arrays left on one device (as
    # before), the resumed count lands on one device and the step refuses it
    place = ax.train.Parallel.place_params
    ax.train.Parallel.place_params = lambda self, t: ax.shard(t, self.axis_rules, params=True)  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            raises(
                ValueError, "incompatible devices", lambda: adam_runs(par, True, model, loader, tmp)
            )
    finally:
        ax.train.Parallel.place_params = place  # type: ignore[method-assign]


@check
def fit_bounds_the_queue_on_cpu_meshes() -> None:
    """On simulated CPU devices ``fit`` and ``evaluate`` wait for every step (XLA:CPU runs
    queued steps at once and their collectives can deadlock: docs/parallel.md); on one
    device they do not."""
    ds, key = tiny_dataset(), jax.random.key(4)
    model = FitMlp(jax.random.key(5))
    par = ax.train.Parallel(interleaved_mesh("explicit"), {TBatch: "data"})
    waits: list[int] = []
    wait = jax.block_until_ready

    def counting(x: Any) -> Any:
        waits.append(1)
        return wait(x)

    def count(parallel: Any) -> int:
        waits.clear()
        jax.block_until_ready = counting  # type: ignore[assignment]
        try:
            ax.train.fit(
                model,
                optax.sgd(0.1),
                fit_loss,
                ax.train.Loader(ds, 8, key=key, parallel=parallel),  # 8 steps
                eval_data=ax.train.Loader(ds, 8, parallel=parallel),  # 8 batches
                parallel=parallel,
                progress=False,
                log_every=100,
            )
        finally:
            jax.block_until_ready = wait
        return len(waits)

    assert count(par) >= 16, waits
    assert count(None) == 0, waits
    # the check can fail: without the bound, nothing waits
    from axjax.train import _fit

    bound = _fit.queue_bound
    _fit.queue_bound = lambda tree: None  # type: ignore[assignment]
    try:
        assert count(par) == 0
    finally:
        _fit.queue_bound = bound


@check
def checkpoint_restores_into_template_shardings() -> None:
    model = Mlp(jax.random.key(1))
    with ax.axis_rules(mesh("explicit"), {Batch: "data"}, param_rules={Hidden: "model"}):
        saved = ax.shard(model, params=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ckpt.npz"
        ax.train.save_checkpoint(path, saved, step=3)
        # restore onto another mesh (8 x 1, Auto) with other rules, from an abstract template
        other = mesh("auto", (8, 1))
        like = ax.abstract(model, {Hidden: "data"}, mesh=other)
        back, manifest = ax.train.load_checkpoint(path, like)
    assert manifest["step"] == 3
    close(back, model, 0)
    assert back.l1.weight.array.sharding == NamedSharding(other, P("data", None))
    assert back.l2.weight.array.sharding == NamedSharding(other, P(None, "data"))


@check
def mnist_example_data_tensor() -> None:
    """``examples/mnist/train.py --devices 8 --parallel data+tensor`` against one device, a
    full epoch each: the same test accuracy and parameters, and every step waited for
    (XLA:CPU deadlocked on queued steps before: docs/parallel.md). CI: 16384 images in
    batches of 128, 128 steps; with AXJAX_FULL_PARALLEL=1 all 60000, 469 steps."""
    example = load_example("mnist")
    limits = ["--test-limit", "2000"] if FULL else ["--limit", "16384", "--test-limit", "1000"]
    with tempfile.TemporaryDirectory() as tmp:
        args = [*limits, "--epochs", "1", "--no-progress", "--logdir", tmp]
        one = example.main(args)
        eight = example.main([*args, "--devices", "8", "--parallel", "data+tensor"])
    assert one["steps"] == eight["steps"] == (469 if FULL else 128), (one, eight)
    # 128 Adam steps magnify float noise (the order of sums): close, not equal
    assert abs(one["accuracy"] - eight["accuracy"]) <= 0.005, (one["accuracy"], eight["accuracy"])
    diffs = [
        float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
        for a, b in zip(jax.tree.leaves(eight["model"]), jax.tree.leaves(one["model"]), strict=True)
    ]
    assert max(diffs) < 1e-2, diffs  # weights of size ~0.1; exact equality: the fit checks
    w = eight["model"].layers[0].weight  # [Hidden1, Pixel]: Hidden1 over "model"
    assert w.array.sharding.spec == P("model", None), w.array.sharding


@check
def transformer_example_data_tensor() -> None:
    """``examples/transformer/train.py --devices 8 --parallel data+tensor`` (the test
    preset, 3 AdamW steps) against one device: the same validation loss and parameters,
    with the MLP's hidden axis and the heads split over mesh axis "model"."""
    example = load_example("transformer")
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "--preset",
            "test",
            "--steps",
            "3",
            "--eval-batches",
            "1",
            "--log-every",
            "3",
            "--sample-bytes",
            "0",
            "--limit-bytes",
            "100000",
            "--no-progress",
            "--logdir",
            tmp,
        ]
        one = example.main(args)
        eight = example.main([*args, "--devices", "8", "--parallel", "data+tensor"])
    np.testing.assert_allclose(eight["bits"], one["bits"], rtol=1e-5)
    close(eight["model"], one["model"], 2e-5)
    block = eight["model"].blocks[0]
    assert block.up.weight.array.sharding.spec == P("model", None), block.up.weight  # [Mlp, Embed]
    assert block.attn.query_proj.array.sharding.spec == P("model", None, None), (
        block.attn.query_proj.array.sharding
    )


@check
def sharded_checkpoint_restores_on_another_mesh() -> None:
    model = Mlp(jax.random.key(1))
    with ax.axis_rules(mesh("explicit"), {Batch: "data"}, param_rules={Hidden: ("data", "model")}):
        saved = ax.shard(model, params=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "step-7"
        ax.train.save_sharded(
            path, {"model": saved, "key": jax.random.key(3)}, step=7, metadata={"epoch": 1}
        )
        raises(ax.train.CheckpointError, "it exists", lambda: ax.train.save_sharded(path, {}))
        other = mesh("auto", (2, 4))
        like = {
            "model": ax.abstract(model, {Hidden: "model"}, mesh=other),
            "key": jax.random.key(0),
        }
        back, manifest = ax.train.load_sharded(path, like)
        assert manifest["step"] == 7 and manifest["metadata"] == {"epoch": 1}
        close(back["model"], model, 0)
        assert back["model"].l1.weight.array.sharding == NamedSharding(other, P("model", None))
        np.testing.assert_array_equal(
            jax.random.key_data(back["key"]), jax.random.key_data(jax.random.key(3))
        )
        wrong = {"model": Mlp.__new__(Mlp), "key": jax.random.key(0)}
        object.__setattr__(
            wrong["model"], "l1", ax.nn.Affine(Pixel, Hidden, 12, 8, key=jax.random.key(0))
        )
        object.__setattr__(wrong["model"], "l2", model.l2)
        raises(
            ax.train.CheckpointMismatchError,
            "Hidden=16",
            lambda: ax.train.load_sharded(path, wrong),
        )


def two_process_restore(folder: str) -> None:
    """The checkpoint the two processes of ``_two_process.py`` saved in ``folder`` (its
    shards spanning both) loads in one process, on a mesh of 2 of its devices (another mesh
    than the 2 x 4 that saved it), and equals the one-device run they trained against.
    Not in :data:`CHECKS`: it needs their folder (tests/parallel/test_parallel.py)."""
    template = {"model": FitMlp(jax.random.key(0))}
    ref, _ = ax.train.load_checkpoint(Path(folder) / "ref.npz", template)
    m = jax.make_mesh((2, 1), ("data", "model"))  # the first 2 devices
    back, manifest = ax.train.load_sharded(
        Path(folder) / "sharded",
        {"model": ax.abstract(template["model"], {Hidden: "data"}, mesh=m)},
    )
    close(back, ref, 2e-6)  # the two trainings agree to float noise (_two_process.py)
    assert back["model"].l1.weight.array.sharding.spec == P("data", None)
    assert manifest["step"] == 8


def run_check(name: str, fn: Callable[..., None], *args: Any) -> bool:
    """Run one check; print ``PASS name <seconds>s``, or ``FAIL name`` and the traceback;
    whether it passed."""
    t0 = time.perf_counter()
    try:
        fn(*args)
    except Exception:
        print("FAIL", name, flush=True)
        traceback.print_exc(file=sys.stdout)
        sys.stdout.flush()
        return False
    print("PASS", name, f"{time.perf_counter() - t0:.1f}s", flush=True)
    return True


def main(names: list[str], checks: dict[str, Callable[[], None]] = CHECKS) -> int:
    """Run the checks (all of ``checks`` by default), reporting each as :func:`run_check`
    does; return the number that failed."""
    return sum(not run_check(name, checks[name]) for name in names or list(checks))


if __name__ == "__main__":
    sys.exit(1 if main(sys.argv[1:]) else 0)
