"""The one set-up of a training step (``train/_setup.py``): ``TrainStep(precision=...,
parallel=...)`` trains as ``fit`` does under the same policy and layout."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import jax
import numpy as np
import optax
import pytest

import axjax as ax
from axjax.train import Batch, Pixel
from tests.train.models import TinyMLP, classify

ROOT = Path(__file__).resolve().parents[2]


def _data(n: int = 4) -> list[tuple[Any, Any]]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n * 16, 8)).astype(np.float32)
    y = rng.integers(0, 3, size=n * 16).astype(np.int32)
    return [
        (ax.tensor(x[i : i + 16], Batch, Pixel), ax.tensor(y[i : i + 16], Batch, dtype=ax.I32))
        for i in range(0, n * 16, 16)
    ]


def _leaves(model: Any) -> list[np.ndarray]:
    return [np.asarray(t.array) for t in (model.w1, model.b1, model.w2, model.b2)]


def _train_step(policy: ax.nn.Policy | None) -> Any:
    step = ax.train.TrainStep(
        TinyMLP(jax.random.key(1), 8, 16, 3), optax.sgd(0.5), classify, precision=policy
    )
    for batch in _data():
        step(*batch)
    return step.model


@pytest.mark.parametrize("compute", [ax.BF16, ax.F16])
def test_train_step_under_a_policy_makes_fits_updates(compute: type[ax.Floating]) -> None:
    """Same model, data and policy: ``TrainStep`` and ``fit`` end with the same parameters,
    which differ from the f32 ones (a policy the step ignored would give those)."""
    policy = ax.nn.Policy.mixed(compute)
    fitted = ax.train.fit(
        TinyMLP(jax.random.key(1), 8, 16, 3),
        optax.sgd(0.5),
        classify,
        _data(),
        progress=False,
        precision=policy,
    ).model
    stepped, plain = _train_step(policy), _train_step(None)
    assert stepped.w1.dtype is ax.F32  # the model as passed in: f32 master weights, unwrapped
    for a, b in zip(_leaves(stepped), _leaves(fitted), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    pairs = zip(_leaves(stepped), _leaves(plain), strict=True)
    gap = max(float(np.abs(a - f).max()) for a, f in pairs)
    assert gap > 1e-4, gap  # the policy changed the updates


def test_train_step_under_loss_scaling_refuses_the_stepwise_guard() -> None:
    with pytest.raises(ValueError, match="TrainStep: guard=True stops at the first overflow"):
        ax.train.TrainStep(
            TinyMLP(jax.random.key(1), 8, 16, 3),
            optax.sgd(0.5),
            classify,
            guard=True,
            precision=ax.nn.Policy.mixed(ax.F16),
        )


_PARALLEL = textwrap.dedent(
    """
    import jax, numpy as np, optax
    import axjax as ax
    from axjax.train import Batch
    from tests.train.models import TinyMLP, classify
    from tests.train.test_train_step_setup import _data, _leaves

    assert jax.device_count() == 2
    par = ax.train.Parallel(jax.make_mesh((2,), ("data",)), {Batch: "data"})
    models = {}
    for name, parallel in (("one", None), ("mesh", par)):
        step = ax.train.TrainStep(
            TinyMLP(jax.random.key(1), 8, 16, 3), optax.adam(1e-2), classify, parallel=parallel
        )
        for batch in _data():
            step(*batch)
        models[name] = step.model
        print(name, len(step.model.w1.array.sharding.device_set))
    for a, b in zip(_leaves(models["one"]), _leaves(models["mesh"]), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    print("same")
    """
)


def test_train_step_over_a_mesh_trains_as_on_one_device() -> None:
    """On 2 simulated CPU devices (a subprocess: JAX fixes the count when it starts), the
    step's parameters live on the whole mesh and end as on one device."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    done = subprocess.run(
        [sys.executable, "-c", _PARALLEL],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["one", "1", "mesh", "2", "same"], done.stdout
