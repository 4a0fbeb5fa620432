"""The training loop's names and empty data: reserved metric names, metrics that change
between batches, which argument is empty, and a collective outside ``shard_map``."""

from __future__ import annotations

import re
import warnings
from typing import Any, final

import jax
import optax
import pytest

import axjax as ax
from axjax.train import Batch, Class, Pixel

KEY = jax.random.key(0)


@final
class Hidden(ax.Axis): ...


def model() -> Any:
    return ax.nn.Affine(Pixel, Class, 3, 2, key=KEY)


def data(n: int = 4) -> list[Any]:
    return [(ax.ones((n, 3), Batch, Pixel), ax.tensor([i % 2 for i in range(n)], Batch))]


def loss(m: Any, x: Any, y: Any) -> Any:
    return ax.mean(ax.train.softmax_cross_entropy(m(x), y, Class), Batch)


def fit(loss_fn: Any, batches: Any, **kw: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ax.train.fit(model(), optax.sgd(0.1), loss_fn, batches, progress=False, **kw)


@pytest.mark.parametrize("name", ["loss", "count"])
def test_a_reserved_metric_name_is_refused(name: str) -> None:
    def named(m: Any, x: Any, y: Any) -> Any:
        value = loss(m, x, y)
        return value, {name: value * 0.0 + 7.0}

    message = f"loss_fn returned a metric named {name!r}: that name is reserved"
    with pytest.raises(ValueError, match=re.escape(message)):
        fit(named, data())
    with pytest.raises(ValueError, match=re.escape(message)):
        ax.train.evaluate(model(), named, data())


def test_metric_names_that_change_between_batches_are_an_error() -> None:
    def changing(m: Any, x: Any, y: Any) -> Any:
        value = loss(m, x, y)
        return value, {f"m{x.size(Batch)}": value}

    batches = data(4) + data(2)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "evaluate: loss_fn returned the metrics (m2) for this batch and (m4) for the "
            "first; every batch must return the same metric names"
        ),
    ):
        ax.train.evaluate(model(), changing, batches)
    with pytest.raises(ValueError, match=re.escape("fit: loss_fn returned the metrics (m2)")):
        fit(changing, batches)


def test_an_integer_loss_is_refused() -> None:
    def counted(m: Any, x: Any, y: Any) -> Any:
        return ax.sum(ax.argmax(m(x), Class), Batch)

    with pytest.raises(
        TypeError, match=re.escape("loss_fn returned a loss of dtype int32: a loss to")
    ):
        fit(counted, data())


def test_empty_data_names_the_argument() -> None:
    with pytest.raises(ValueError, match=r"^evaluate: data: the list of batches is empty$"):
        ax.train.evaluate(model(), loss, [])
    with pytest.raises(ValueError, match=r"^fit: eval_data: the list of batches is empty$"):
        fit(loss, data(), eval_data=[])
    with pytest.raises(ValueError, match=r"^fit: data: the list of batches is empty$"):
        fit(loss, [])


@pytest.mark.parametrize("collective", [ax.all_gather, ax.psum, ax.pmean])
def test_a_collective_outside_shard_map_with_no_rules_says_so(collective: Any) -> None:
    name = collective.__name__
    with pytest.raises(
        ax.AxisError,
        match=re.escape(
            f"{name}(Tensor[F32, Hidden=2], Hidden): no mesh axis is bound here: {name} "
            "communicates between blocks, inside the function given to jax.shard_map; "
            "outside shard_map every array is already whole"
        ),
    ):
        collective(ax.ones((2,), Hidden), Hidden)
