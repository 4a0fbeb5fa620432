"""Structural guards for "axis names cost nothing" (no timing anywhere).

- Per kind of what costs (``dot``, ``convolution``, ``transpose``, ``copy``, ``gather``,
  ``scatter``, ``while``, fusions of each kind), the compiled training steps of the axjax
  MLP, CNN, LSTM and attention block, as modules, as a graph and as ``fit``'s step, have
  no more than the expert baseline (``build_expert``: the same weight storage, optax's
  one-hot loss, donated), beyond the documented ``KIND_ALLOWANCE`` of
  ``benchmarks/_structure.py``. Each guard is proved by a mutation that must fail it:
  ``contract`` through ``jnp.einsum``, an extra transpose per product, and the ops' own
  backward dropped for JAX's autodiff.
- The LSTM: as many ``while`` loops as the expert's (the scan and its transpose: nothing
  is unrolled) and no ``pad`` (the gate split's backward is one concatenate).
- The step is traced once, however many batches it sees.
- Nothing moves between host and device inside the step: the compiled HLO has no
  callbacks, infeed/outfeed or send/recv, and steps run under
  ``jax.transfer_guard("disallow")`` once the batch is on the device.
Each guard is shown to fire on a step that breaks it.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks._common import jit_train_step, load_mnist
from benchmarks._structure import (
    compiled_ops,
    cost_kinds,
    host_transfers,
    kind_excess,
    mutation,
    stablehlo_ops,
    step_structure,
)
from benchmarks.models import MODELS

#: these tests read what XLA compiles: fully optimised, as a user's program
pytestmark = pytest.mark.optimized

PATHS = ("axjax", "graph", "fit")


@pytest.fixture(scope="module")
def data() -> Any:
    return load_mnist()


@functools.cache
def structure_of(name: str) -> dict[str, dict[str, Any]]:
    """The compiled steps' structure of model ``name`` on every path, compiled once per
    process: the tests that take it through ``indirect`` parameters alternate models, and a
    module fixture is made again at each change of its parameter."""
    return step_structure(MODELS[name], ("expert", *PATHS))


@pytest.fixture(scope="module", params=["mlp", "cnn", "lstm", "attention"])
def structure(request: pytest.FixtureRequest) -> tuple[str, dict[str, dict[str, Any]]]:
    return request.param, structure_of(request.param)


def test_no_more_of_each_costly_kind_than_the_expert(structure: Any) -> None:
    name, counts = structure
    ref = counts["expert"]["kinds"]
    assert ref["dot"] + ref["convolution"] >= 5 and ref["fusion kLoop"] > 20, (
        f"{name}: the expert step has only {dict(ref)}"
    )
    for path in PATHS:
        excess = kind_excess(counts[path]["kinds"], ref, name)
        assert not excess, f"{name}/{path}: (count, allowed) per kind {excess}"


@pytest.mark.parametrize("path", ["expert", *PATHS])
def test_no_host_transfer_in_compiled_step(structure: Any, path: str) -> None:
    name, counts = structure
    assert counts[path]["host"] == [], f"{name}/{path}: {counts[path]['host']}"


# each mutation, on a model where it costs time, with the kinds that must catch it
MUTANTS = [
    ("lstm", "einsum", {"transpose"}),
    ("attention", "transpose", {"transpose", "copy"}),
    ("lstm", "transpose", {"transpose", "copy"}),
    ("mlp", "no custom backward", {"scatter", "fusion kLoop"}),
    ("lstm", "no custom backward", {"transpose", "copy", "scatter"}),
]


@pytest.mark.parametrize(
    ("structure", "kind", "caught_by"),
    MUTANTS,
    indirect=["structure"],
    ids=[f"{m}-{k}" for m, k, _ in MUTANTS],
)
def test_a_slower_lowering_fails_the_guard(structure: Any, kind: str, caught_by: set[str]) -> None:
    name, counts = structure
    with mutation(kind):
        got = step_structure(MODELS[name], ("axjax",))["axjax"]["kinds"]
    excess = kind_excess(got, counts["expert"]["kinds"], name)
    assert caught_by <= set(excess), f"{name} with {kind}: excess {excess}"


def test_the_mutations_restore_the_lowering() -> None:
    from axjax.ops import _contract

    original = _contract.dot
    with mutation("einsum"):
        assert _contract.dot is not original
    assert _contract.dot is original
    with pytest.raises(ValueError, match="unknown mutation 'unroll'"), mutation("unroll"):
        pass


@pytest.mark.parametrize("structure", ["lstm"], indirect=True)
def test_lstm_is_one_scan(structure: Any) -> None:
    _, counts = structure
    ref_shlo, ref_hlo = counts["expert"]["texts"]
    for path in PATHS:
        shlo, hlo = counts[path]["texts"]
        assert stablehlo_ops(shlo)["stablehlo.while"] == stablehlo_ops(ref_shlo)["stablehlo.while"]
        assert compiled_ops(hlo)["while"] == compiled_ops(ref_hlo)["while"] == 2
        # the gate split's backward is one concatenate, as jnp.split's: no cotangent padded
        # into a zero tensor of the gates' size per gate (ax.index's backward; on a graph,
        # what an op with several results used to become)
        assert compiled_ops(hlo)["pad"] == compiled_ops(ref_hlo)["pad"] == 0
        assert counts[path]["host"] == []


def test_op_counters_read_real_text() -> None:
    f = jax.jit(lambda a: jnp.tanh(a) * 2.0 + a)
    lowered = f.lower(jnp.ones(3))
    shlo = stablehlo_ops(lowered.as_text())
    assert shlo["stablehlo.tanh"] == 1 and shlo["stablehlo.multiply"] == 1
    assert shlo["stablehlo.add"] == 1
    hlo = compiled_ops(lowered.compile().as_text())
    assert sum(hlo.values()) >= 3
    g = jax.jit(lambda a, b, i: (jnp.tanh(a @ b.T).T, a[i], jnp.sin(a) + 1))
    kinds = cost_kinds(
        g.lower(jnp.ones((4, 3)), jnp.ones((5, 3)), jnp.arange(2)).compile().as_text()
    )
    assert kinds["dot"] == 1 and kinds["gather"] == 1 and kinds["fusion kLoop"] >= 1
    assert not kinds["scatter"] and not kinds["while"]


def test_host_guard_sees_a_callback() -> None:
    def leaky(a: Any) -> Any:
        shape = jax.ShapeDtypeStruct(a.shape, a.dtype)
        return jax.pure_callback(lambda v: np.asarray(v) * 2, shape, a) + 1

    text = jax.jit(leaky).lower(jnp.ones(3)).compile().as_text()
    assert host_transfers(text), "a pure_callback must show up as a host transfer"


@pytest.mark.parametrize(
    ("name", "path"),
    [(m, p) for m in ("mlp", "cnn") for p in ("jax", "axjax", "graph")] + [("lstm", "graph")],
)
def test_traced_once_and_no_transfer_over_steps(data: Any, name: str, path: str) -> None:
    model = MODELS[name]
    runner = getattr(model, f"build_{path}")(model.init(0))
    batches = [runner.put(data.images[i], data.labels[i]) for i in data.batches(seed=3, count=4)]
    state, loss = runner.step(runner.state, *batches[0])
    runner.sync((state, loss))
    with jax.transfer_guard("disallow"):
        for x, y in batches[1:]:
            state, loss = runner.step(state, x, y)
    runner.sync((state, loss))
    assert runner.traces is not None and runner.traces() == 1
    assert np.isfinite(float(loss))


def test_transfer_guard_fires_on_a_host_batch(data: Any) -> None:
    model = MODELS["mlp"]
    runner = model.build_jax(model.init(0))
    idx = data.batches(seed=3, count=1)[0]
    x, y = runner.put(data.images[idx], data.labels[idx])
    state, loss = runner.step(runner.state, x, y)  # donates runner.state: go on from state
    runner.sync((state, loss))
    with jax.transfer_guard("disallow"), pytest.raises(Exception, match="[Dd]isallowed"):
        runner.step(state, np.asarray(x), y)


def test_retrace_counter_counts() -> None:
    runner = jit_train_step(
        lambda p, x, y: jnp.sum(p * x) + jnp.sum(y),
        jnp.ones(2),
        lambda x, y: (jnp.asarray(x), jnp.asarray(y)),
    )
    state, _ = runner.step(runner.state, jnp.ones(2), jnp.ones(3))
    state, _ = runner.step(state, jnp.ones(2), jnp.ones(3))
    assert runner.traces is not None and runner.traces() == 1
    runner.step(state, jnp.ones(2), jnp.ones(4))  # a new shape: one more trace
    assert runner.traces() == 2
