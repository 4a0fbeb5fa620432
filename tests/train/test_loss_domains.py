"""Every loss op declared in the registry (namespace ``axjax.train``) refuses concrete
inputs outside its domain with a ``ValueError`` naming the value, its position and the
range; under ``jax.jit`` (values unknown) it computes what its docstring says."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from axjax.core._internal import declared_ops
from axjax.train import Batch, Class, _linear_loss, _losses


class Embed(ax.Axis): ...


def _logits(n: int = 3) -> ax.Tensor[Any, Any]:
    return ax.Tensor(jnp.linspace(-2.0, 2.0, 4 * n).reshape(4, n), (Batch, Class))


def _scores() -> ax.Tensor[Any, Any]:
    return ax.Tensor(jnp.asarray([-3.0, 0.5, 5.0, 1.0]), (Batch,))


def _hidden() -> ax.Tensor[Any, Any]:
    return ax.Tensor(jnp.linspace(-1.0, 1.0, 8).reshape(4, 2), (Batch, Embed))


def _head() -> ax.Tensor[Any, Any]:
    return ax.Tensor(jnp.linspace(-1.0, 1.0, 6).reshape(3, 2), (Class, Embed))


def _targets(*values: float) -> ax.Tensor[Any, Any]:
    return ax.Tensor(jnp.asarray(values, jnp.float32), (Batch,))


def _labels(*values: int) -> ax.Tensor[Any, Any]:
    return ax.Tensor(jnp.asarray(values, jnp.int32), (Batch,))


#: per loss function: (arguments outside the domain, the message expected)
OUT_OF_DOMAIN: dict[str, list[tuple[Callable[[], tuple[Any, ...]], str]]] = {
    "binary_cross_entropy": [
        (
            lambda: (_scores(), _targets(0.0, 1.0, 2.0, 1.0)),
            "binary_cross_entropy: target 2 (at Batch=2) is not a probability: targets must "
            "lie in [0, 1] (outside it the loss has no minimum and can be negative; scale "
            "the targets into [0, 1], e.g. targets / 255, or use mean_squared_error for "
            "unbounded ones)",
        ),
        (
            lambda: (_scores(), _targets(-0.5, 1.0, 0.5, 255.0)),
            "binary_cross_entropy: target -0.5 (at Batch=0) is not a probability: targets "
            "must lie in [0, 1]; 2 of 4 targets are out of range",
        ),
        (lambda: (_scores(), _targets(0.0, np.nan, 0.5, 1.0)), "target nan (at Batch=1)"),
    ],
    "softmax_cross_entropy": [
        (
            lambda: (_logits(), _labels(0, 1, 3, 2), Class),
            "softmax_cross_entropy: label 3 (at Batch=2) is not a class: labels must lie in "
            "[0, 3) for Class of size 3",
        ),
        (lambda: (_logits(), _labels(0, -1, 1, 2), Class), "label -1 (at Batch=1)"),
    ],
    "linear_cross_entropy": [
        (
            lambda: (_hidden(), _head(), _labels(0, 1, 3, 2), Class),
            "linear_cross_entropy: label 3 (at Batch=2) is not a class: labels must lie in "
            "[0, 3) for Class of size 3",
        ),
        (lambda: (_hidden(), _head(), _labels(0, -1, 1, 2), Class), "label -1 (at Batch=1)"),
    ],
}


def _loss_functions() -> list[str]:
    return sorted(
        f for spec in declared_ops() if spec.namespace == "axjax.train" for f in spec.functions
    )


def _findings() -> list[str]:
    found = []
    for name in _loss_functions():
        if name not in OUT_OF_DOMAIN:
            found.append(f"{name}: no out-of-domain case (add one to OUT_OF_DOMAIN)")
            continue
        for make, message in OUT_OF_DOMAIN[name]:
            try:
                getattr(ax.train, name)(*make())
            except ValueError as e:
                if message not in str(e):
                    found.append(f"{name}: {e!s} lacks {message!r}")
                continue
            found.append(
                f"{name}: accepted {make()[-2 if name == 'linear_cross_entropy' else 1]!r}"
            )
    return found


def test_every_loss_refuses_inputs_outside_its_domain() -> None:
    assert _loss_functions() == [
        "binary_cross_entropy",
        "linear_cross_entropy",
        "softmax_cross_entropy",
    ]
    assert _findings() == []


def test_mutation_without_the_checks_the_generated_test_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_losses, "check_targets", lambda where, targets: None)
    monkeypatch.setattr(_losses, "check_labels", lambda where, labels, n, axis: None)
    monkeypatch.setattr(_linear_loss, "check_labels", lambda where, labels, n, axis: None)
    found = _findings()
    assert len(found) == 7 and all("accepted" in f for f in found), found


def test_in_domain_and_under_jit() -> None:
    """Targets in [0, 1] pass; under jit the values are unknown and the formula is applied
    as documented (a target of 2 gives a negative loss for a large logit)."""
    ax.train.binary_cross_entropy(_scores(), _targets(0.0, 1.0, 0.25, 1.0))
    jitted = jax.jit(lambda s, t: ax.train.binary_cross_entropy(s, t))
    out = jitted(_scores(), _targets(0.0, 1.0, 2.0, 1.0))
    x = np.asarray([-3.0, 0.5, 5.0, 1.0])
    t = np.asarray([0.0, 1.0, 2.0, 1.0])
    np.testing.assert_allclose(
        out.array, np.maximum(x, 0) - x * t + np.log1p(np.exp(-np.abs(x))), rtol=1e-6
    )
    assert float(out.array[2]) < 0
    with pytest.raises(ValueError, match=re.escape("target 2 (at Batch=2)")):
        jax.grad(lambda s: ax.train.binary_cross_entropy(s, _targets(0, 1, 2, 1)).array.sum())(
            _scores()
        )
