"""Structural guards for "axis names cost nothing" (no timing anywhere).

- The axjax MLP, CNN and attention training steps, eager modules and graph, lower to no
  more ops than the hand-written JAX + optax steps, beyond the small allowance documented
  in ``benchmarks/_structure.py`` (2 % + 4), in StableHLO and in the compiled HLO. So does the
  LSTM, eagerly and as a graph (whose fold is one Loop node): as many ``while`` loops as
  JAX's (the forward scan and its transpose), not an unrolled sequence, and no padded
  cotangents from the gate split.
- The step is traced once, however many batches it sees.
- Nothing moves between host and device inside the step: the compiled HLO has no
  callbacks, infeed/outfeed or send/recv, and steps run under
  ``jax.transfer_guard("disallow")`` once the batch is on the device.
Each guard is shown to fire on a step that breaks it.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks._common import jit_train_step, load_mnist
from benchmarks._structure import (
    allowed,
    compiled_ops,
    host_transfers,
    stablehlo_ops,
    step_structure,
)
from benchmarks.models import MODELS


@pytest.fixture(scope="module")
def data() -> Any:
    return load_mnist()


@pytest.fixture(scope="module", params=["mlp", "cnn", "attention"])
def structure(request: pytest.FixtureRequest) -> tuple[str, dict[str, dict[str, Any]]]:
    return request.param, step_structure(MODELS[request.param])


@pytest.mark.parametrize("path", ["axjax", "graph"])
@pytest.mark.parametrize("ir", ["stablehlo", "compiled"])
def test_no_more_ops_than_hand_written(structure: Any, path: str, ir: str) -> None:
    name, counts = structure
    ref, got = counts["jax"][ir], counts[path][ir]
    assert ref > 50, f"{name}: the hand-written step has only {ref} {ir} ops"
    assert got <= allowed(ref), (
        f"{name}/{path}: {got} {ir} ops against {ref} hand-written (allowed {allowed(ref)})")


@pytest.mark.parametrize("path", ["jax", "axjax", "graph"])
def test_no_host_transfer_in_compiled_step(structure: Any, path: str) -> None:
    name, counts = structure
    assert counts[path]["host"] == [], f"{name}/{path}: {counts[path]['host']}"


def test_lstm_is_one_scan_and_no_more_ops(data: Any) -> None:
    counts = step_structure(MODELS["lstm"], ("jax", "axjax", "graph"))
    ref_shlo, ref_hlo = counts["jax"]["texts"]
    for path in ("axjax", "graph"):
        for ir in ("stablehlo", "compiled"):
            ref, got = counts["jax"][ir], counts[path][ir]
            assert got <= allowed(ref), f"lstm/{path}: {got} {ir} ops against {ref} hand-written"
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


def test_host_guard_sees_a_callback() -> None:
    def leaky(a: Any) -> Any:
        shape = jax.ShapeDtypeStruct(a.shape, a.dtype)
        return jax.pure_callback(lambda v: np.asarray(v) * 2, shape, a) + 1

    text = jax.jit(leaky).lower(jnp.ones(3)).compile().as_text()
    assert host_transfers(text), "a pure_callback must show up as a host transfer"


@pytest.mark.parametrize(("name", "path"), [(m, p) for m in ("mlp", "cnn")
                                             for p in ("jax", "axjax", "graph")]
                         + [("lstm", "graph")])
def test_traced_once_and_no_transfer_over_steps(data: Any, name: str, path: str) -> None:
    model = MODELS[name]
    runner = getattr(model, f"build_{path}")(model.init(0))
    batches = [runner.put(data.images[i], data.labels[i])
               for i in data.batches(seed=3, count=4)]
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
    runner.sync(runner.step(runner.state, x, y))
    with jax.transfer_guard("disallow"), pytest.raises(Exception, match="[Dd]isallowed"):
        runner.step(runner.state, np.asarray(x), y)


def test_retrace_counter_counts() -> None:
    runner = jit_train_step(lambda p, x, y: jnp.sum(p * x) + jnp.sum(y), jnp.ones(2),
                            lambda x, y: (jnp.asarray(x), jnp.asarray(y)))
    state, _ = runner.step(runner.state, jnp.ones(2), jnp.ones(3))
    state, _ = runner.step(state, jnp.ones(2), jnp.ones(3))
    assert runner.traces is not None and runner.traces() == 1
    runner.step(state, jnp.ones(2), jnp.ones(4))  # a new shape: one more trace
    assert runner.traces() == 2
