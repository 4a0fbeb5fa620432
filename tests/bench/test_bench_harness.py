"""The benchmark harness in quick mode: it runs, and its report has the promised structure.

Nothing here looks at a time: only that every figure is there, that every framework
trained the same model from the same weights on the same batches (equal losses), and
that the report and the targets are written.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from benchmarks.__main__ import _parser, main, run
from benchmarks._dispatch import OPS, bench_dispatch
from benchmarks._memory import bench_memory
from benchmarks._report import markdown, targets
from benchmarks.models import FRAMEWORKS, MODELS, available, builder

SUMMARY = {"median", "min", "max"}


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    args = _parser().parse_args(
        [
            "--quick",
            "--models",
            "mlp",
            "--frameworks",
            "jax,expert,expert-int,axjax,graph,fit,equinox",
            "--no-memory",
            "--no-dispatch",
        ]
    )
    return run(args, log=lambda s: None)


def test_every_framework_has_every_figure(results: dict[str, Any]) -> None:
    model = results["models"]["mlp"]
    assert set(model["frameworks"]) == {
        "jax",
        "expert",
        "expert-int",
        "axjax",
        "graph",
        "fit",
        "equinox",
    }
    assert model["experts"] == ["jax", "expert", "expert-int"]
    for fw, r in model["frameworks"].items():
        assert "skipped" not in r, f"{fw}: {r.get('skipped')}"
        for key in (
            "fixed_steps_per_s",
            "loop_steps_per_s",
            "fixed_ratio",
            "loop_ratio",
            "fixed_best_ratio",
            "loop_best_ratio",
            "first_step_s",
            "host_us_per_step",
        ):
            assert SUMMARY <= set(r[key]), (fw, key)
            assert all(math.isfinite(v) and v > 0 for v in (r[key][k] for k in SUMMARY))
        assert r["traces"] == 1, f"{fw} traced {r['traces']} times"
        assert len(r["losses"]) == 3


def test_same_weights_same_batches_same_losses(results: dict[str, Any]) -> None:
    runs = results["models"]["mlp"]["frameworks"]
    for fw, r in runs.items():
        assert r["loss_diff"] < 1e-5, f"{fw}: losses {r['losses']} vs {runs['jax']['losses']}"
    assert 2.0 < runs["jax"]["losses"][0] < 2.6  # about log(10): an untrained classifier


def test_report_and_targets(results: dict[str, Any]) -> None:
    text = markdown(results)
    assert "### MLP 784-300-100-10" in text and "| axjax |" in text and "| graph |" in text
    lines = targets(results)
    assert any(ln.startswith("mlp/axjax fixed steps/s ÷ best expert") for ln in lines)
    assert any(ln.startswith("mlp/graph first step") for ln in lines)
    assert any(ln.startswith("mlp/fit loop steps/s") for ln in lines)
    assert all(("met" in ln) or ("MISSED" in ln) for ln in lines)
    assert json.loads(json.dumps(results)) == results  # the results file round-trips


def test_dispatch_rows() -> None:
    ops = {k: OPS[k] for k in ("add", "sum over an axis")}
    out = bench_dispatch(rounds=2, calls=3, warmup=1, ops=ops)
    assert set(out) == {"add", "sum over an axis"}
    for r in out.values():
        assert SUMMARY <= set(r["ratio"]) and r["jnp_us"]["median"] > 0
        assert SUMMARY <= set(r["cpu_ratio"]) and r["axjax_cpu_us"]["median"] > 0


def test_memory_child_reports_a_peak() -> None:
    out = bench_memory(["mlp"], ["jax"], steps=2, log=lambda s: None)
    entry = out["mlp"]["jax"]
    assert "skipped" not in entry, entry
    assert entry["peak_rss_mib"] >= entry["rss_before_mib"] > 50
    assert entry["delta_mib"] > 0 and entry["build_mib"] >= 0
    assert entry["peak_ratio"] == entry["delta_ratio"] == 1.0


def test_unknown_names_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="unknown model resnet"):
        main(["--quick", "--models", "resnet"])
    with pytest.raises(SystemExit, match="unknown framework tf"):
        main(["--quick", "--frameworks", "jax,tf"])


def test_registry() -> None:
    assert list(MODELS) == ["mlp", "cnn", "lstm", "attention"]
    assert FRAMEWORKS[0] == "jax" and available("jax") and available("axjax")
    for model in MODELS.values():
        assert hasattr(model, "build_jax") and hasattr(model, "build_axjax")
        assert builder(model, "expert") is model.build_expert
        assert builder(model, "expert-int") is model.build_expert_int


def test_fit_loop_runs() -> None:
    from benchmarks.fit_loop import main as fit_loop

    res = fit_loop(per_epoch=(2,), rounds=1)[2]
    assert set(res) == {"expert", "fit", "fit guard=off"}
    assert res["expert"]["ratio"] == [1.0]


def test_lstm_layout_variants_compute_the_same_model() -> None:
    import numpy as np

    from benchmarks._common import load_mnist
    from benchmarks.lstm_layout import runners

    data = load_mnist()
    idx = data.batches(seed=1, count=1)[0]
    losses = {
        k: float(r.step(r.state, *r.put(data.images[idx], data.labels[idx]))[1])
        for k, r in runners().items()
    }
    assert len(losses) == 4
    np.testing.assert_allclose(list(losses.values()), losses["jax [in, out]"], rtol=1e-5)


def test_fit_guard_variants_compute_the_same_loss() -> None:
    import numpy as np

    from benchmarks._common import load_mnist
    from benchmarks.fit_guard import _variant
    from benchmarks.models import _mlp

    data = load_mnist()
    idx = data.batches(seed=1, count=1)[0]
    ref = _mlp.build_jax(_mlp.init(0))
    want = float(ref.step(ref.state, *ref.put(data.images[idx], data.labels[idx]))[1])
    for kind in ("norm only", "keep-if, loss only", "guard as in fit"):
        r = _variant(kind)
        _, mon = r.step(r.state, *r.put(data.images[idx], data.labels[idx]))
        np.testing.assert_allclose(float(mon.sums["loss"]), want, rtol=1e-6)


def test_provenance_benchmark_runs_both_modes_and_restores_the_switch() -> None:
    import axjax as ax
    from benchmarks.provenance import bench_provenance, markdown

    before = ax.config.provenance
    res = bench_provenance(rounds=2, calls=3, warmup=1)
    assert ax.config.provenance == before
    assert {"add", "transpose", "rename"} <= set(res)
    assert all(r["on_cpu_us"]["median"] > 0 for r in res.values())
    assert "| rename |" in markdown(res)
