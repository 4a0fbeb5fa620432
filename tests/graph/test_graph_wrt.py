"""One value and one gradient per Param, at every graph entry point.

- ``wrt=`` listing a Param twice (``ax.grad(loss, wrt=[w, w])``) is a ``ValueError`` at
  every public callable that takes ``wrt`` (found by ``inspect.signature``), not a zero
  gradient for the first copy or JAX's "donate the same buffer twice";
- a Param and its ``replace()`` copy holding another value in one graph is a ``ValueError``
  at every entry point that builds a graph, not one value silently used for both; so is
  ``params=`` giving one Param two values.

Each has a mutation test: with the check switched off, the same calls go wrong.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any, final

import numpy as np
import optax
import pytest

import axjax as ax
from axjax.graph import _graph, _graph_grad

AnyT = ax.Tensor[Any, *tuple[Any, ...]]


@final
class Batch(ax.Axis): ...


@final
class In(ax.Axis): ...


def _wrt_entry_points() -> dict[str, Callable[..., Any]]:
    """Every public callable of ``axjax`` (and its namespaces) with a ``wrt`` parameter."""
    found: dict[str, Callable[..., Any]] = {}
    for space, prefix in ((ax, "ax."), (ax.train, "ax.train."), (ax.graph, "ax.graph.")):
        for name in getattr(space, "__all__", dir(space)):
            f = getattr(space, name, None)
            if name.startswith("_") or not callable(f):
                continue
            try:
                params = inspect.signature(f).parameters
            except (TypeError, ValueError):
                continue
            if "wrt" in params and f not in found.values():
                found[prefix + name] = f
    return found


WRT = _wrt_entry_points()


def _graph_of(double: bool = False) -> tuple[Any, Any, Any, AnyT]:
    """``x``, ``w``, the loss ``sum(x * w)`` (``+ sum(x * w')`` with ``w'`` a replaced copy
    of ``w`` holding 5s when ``double``) and the input values."""
    x = ax.Input(ax.F32, Batch, In, name="x")
    w = ax.Param(ax.tensor(np.ones(3, np.float32), In), name="w")
    xs = ax.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3), Batch, In)
    loss = ax.sum(ax.sum(x * ax.broadcast(w, x), Batch), In)
    if double:
        w5 = w.replace(ax.tensor(np.full(3, 5.0, np.float32), In))
        loss = loss + ax.sum(ax.sum(x * ax.broadcast(w5, x), Batch), In)
    return x, w, loss, xs


def _call(entry: Callable[..., Any], loss: Any, wrt: Any, x: Any, xs: AnyT) -> Any:
    """Build the entry point from its signature's parameter names, then run it once."""
    given = {
        "loss": loss,
        "fun": loss,
        "wrt": wrt,
        "inputs": [x],
        "optimizer": optax.sgd(0.1),
        "where": "test",
    }
    args: dict[str, Any] = {}
    for name, p in inspect.signature(entry).parameters.items():
        if name in given:
            args[name] = given[name]
        elif p.default is inspect.Parameter.empty and p.kind not in (
            p.VAR_POSITIONAL,
            p.VAR_KEYWORD,
        ):
            raise AssertionError(f"{entry}: no test value for its parameter {name!r}")
    built = entry(**args)
    return built(xs) if callable(built) else built


def test_the_entry_points_are_found() -> None:
    assert {"ax.grad", "ax.value_and_grad", "ax.compile_step", "ax.graph_grad"} <= set(WRT)


DUPLICATE = re.escape(
    "wrt lists the same Param twice (Param w: Tensor[F32, In=3]); each Param gets one "
    "gradient (list it once)"
)


@pytest.mark.parametrize("name", sorted(WRT))
def test_wrt_listing_a_param_twice_is_an_error(name: str) -> None:
    x, w, loss, xs = _graph_of()
    with pytest.raises(ValueError, match=f": {DUPLICATE}$"):
        _call(WRT[name], loss, [w, w], x, xs)
    # a replaced copy is the same Param: also listed twice
    with pytest.raises(ValueError, match=DUPLICATE):
        _call(WRT[name], loss, [w, w.replace(w.value)], x, xs)
    _call(WRT[name], loss, [w], x, xs)  # listed once: fine


def test_the_quoted_examples() -> None:
    x, w, loss, xs = _graph_of()
    with pytest.raises(ValueError, match=re.escape("ax.grad: ") + DUPLICATE):
        ax.grad(loss, wrt=[w, w], inputs=[x])
    with pytest.raises(ValueError, match=re.escape("compile_step: ") + DUPLICATE):
        ax.compile_step(loss, optax.sgd(0.1), wrt=[w, w], inputs=[x])


def test_without_the_check_wrt_twice_goes_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutation test: with the check off, no entry point raises it; ``ax.grad`` then
    gives the first copy a zero gradient (the silent result the check prevents)."""
    monkeypatch.setattr(_graph_grad, "distinct_wrt", lambda wanted, where: None)
    x, w, loss, xs = _graph_of()
    for name, entry in WRT.items():
        try:
            _call(entry, loss, [w, w], x, xs)
        except ValueError as e:
            assert "twice" not in str(e), name
        except Exception:  # JAX's own error (donating one buffer twice)
            pass
    first, second = ax.grad(loss, wrt=[w, w], inputs=[x])(xs)
    assert float(np.abs(first.array).sum()) == 0.0 and float(second.array.sum()) > 0


# -------------------------------------------------------------- a Param and its replace()
REPLACED = re.escape(
    "Graph: Param w (Tensor[F32, In=3]) appears with two different values (the Param and a "
    "copy from replace() or an update): a graph holds one value per Param. Give new values "
    "when calling it (params=), or make a distinct Param (ax.Param(value)) for a separate "
    "parameter"
)


def _graph_entry_points() -> dict[str, Callable[[Any, Any, AnyT], Any]]:
    """Every entry point that builds a graph from a loss: the wrt ones, compile, Graph."""
    found: dict[str, Callable[[Any, Any, AnyT], Any]] = {
        name: (lambda loss, x, xs, f=f: _call(f, loss, None, x, xs)) for name, f in WRT.items()
    }
    found["ax.compile"] = lambda loss, x, xs: ax.compile(loss, inputs=[x])(xs)
    found["ax.Graph"] = lambda loss, x, xs: ax.Graph(loss)
    return found


GRAPHS = _graph_entry_points()


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_a_param_and_its_replaced_copy_in_one_graph_is_an_error(name: str) -> None:
    x, w, loss, xs = _graph_of(double=True)
    with pytest.raises(ValueError, match=REPLACED):
        GRAPHS[name](loss, x, xs)


def test_a_copy_holding_the_same_value_is_the_same_param() -> None:
    x, w, loss, xs = _graph_of()
    same = loss + ax.sum(ax.sum(x * ax.broadcast(w.replace(w.value), x), Batch), In)
    assert ax.Graph(same).params == (w,)
    assert float(ax.compile(same, inputs=[x])(xs).item()) == 2 * float(np.sum(xs.array))


def test_without_the_check_one_value_is_silently_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutation test: with the check off, every entry point accepts the graph, and the
    compiled loss uses one value for both (ones: 15 * 2 = 30, not 15 + 15 * 5 = 90)."""
    monkeypatch.setattr(_graph, "_one_value_each", lambda ps: tuple(dict.fromkeys(ps)))
    x, w, loss, xs = _graph_of(double=True)
    for build in GRAPHS.values():
        build(loss, x, xs)  # no error from any entry point
    assert float(ax.compile(loss, inputs=[x])(xs).item()) == 30.0


def test_params_giving_one_param_two_values_is_an_error() -> None:
    x, w, loss, xs = _graph_of()
    run = ax.compile(loss, inputs=[x])
    a = w.replace(ax.tensor(np.full(3, 2.0, np.float32), In))
    b = w.replace(ax.tensor(np.full(3, 3.0, np.float32), In))
    with pytest.raises(
        ValueError,
        match=re.escape(
            "the compiled graph: params= holds Param w twice, with two different values: give "
            "one value per Param"
        ),
    ):
        run(xs, params=[a, b])
    assert float(run(xs, params=[a, a]).item()) == 2 * float(np.sum(xs.array))
