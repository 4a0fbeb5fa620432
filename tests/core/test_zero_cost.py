"""Axis names cost nothing after ``jax.jit``: structural checks on jaxprs, no timing.

The paper's 784-300-100-10 MLP (relu, log-softmax cross-entropy), forward and backward,
written with ax ops, must lower to no more primitives than the same network written by hand
with ``jax.numpy``. Primitives are counted recursively through sub-jaxprs (``jit`` bodies,
``custom_jvp_call`` of ``jax.nn.relu``), after dead-code elimination (the op's own backward
also computes the cotangent of the input images, which nobody asks for; ``jax.jit`` drops it,
and so does the count). Wrapper primitives that only call a sub-jaxpr are not counted:
``pjit``/``jit``, ``closed_call``, ``custom_jvp_call``, ``custom_vjp_call*``,
``custom_lin`` — their bodies are.

The allowance is zero: axjax must not emit more primitives than hand-written JAX. (It emits
fewer: its matmul backward contracts the right dimensions without transposes, and its
reductions broadcast back with one ``broadcast_in_dim``.)
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from jax.extend.core import ClosedJaxpr, Jaxpr

import axjax as ax
from tests.axes import Batch, Class, Hidden1, Hidden2, Pixel

WRAPPERS = {
    "pjit",
    "jit",
    "closed_call",
    "core_call",
    "custom_jvp_call",
    "custom_vjp_call",
    "custom_vjp_call_jaxpr",
    "custom_lin",
}


def _subjaxprs(params: dict[str, Any]) -> list[Jaxpr]:
    found = []
    for value in params.values():
        for v in value if isinstance(value, list | tuple) else (value,):
            if isinstance(v, ClosedJaxpr):
                found.append(v.jaxpr)
            elif isinstance(v, Jaxpr):
                found.append(v)
    return found


def live_equations(jaxpr: Jaxpr) -> list[Any]:
    """The equations whose outputs reach the jaxpr's outputs (effect-free DCE)."""
    needed = {id(v) for v in jaxpr.outvars}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if eqn.effects or any(id(v) in needed for v in eqn.outvars):
            kept.append(eqn)
            needed.update(id(v) for v in eqn.invars)
    return kept[::-1]


def count_primitives(jaxpr: Jaxpr, counts: Counter[str] | None = None) -> Counter[str]:
    counts = Counter() if counts is None else counts
    for eqn in live_equations(jaxpr):
        for sub in _subjaxprs(eqn.params):
            count_primitives(sub, counts)
        if eqn.primitive.name not in WRAPPERS:
            counts[eqn.primitive.name] += 1
    return counts


SHAPES = [(784, 300), (300,), (300, 100), (100,), (100, 10), (10,)]
AXES = [(Pixel, Hidden1), (Hidden1,), (Hidden1, Hidden2), (Hidden2,), (Hidden2, Class), (Class,)]


def ax_loss(params: list[Any], x: Any, y: Any) -> Any:
    w1, b1, w2, b2, w3, b3 = params
    h = ax.relu(x @ w1 + ax.broadcast(b1, (Batch, Hidden1), sizes={Batch: x.size(Batch)}))
    h = ax.relu(h @ w2 + ax.broadcast(b2, (Batch, Hidden2), sizes={Batch: x.size(Batch)}))
    logits = h @ w3 + ax.broadcast(b3, (Batch, Class), sizes={Batch: x.size(Batch)})
    return -ax.mean(ax.sum(ax.log_softmax(logits, Class) * y, Class), Batch)


def jnp_loss(params: list[Any], x: Any, y: Any) -> Any:
    w1, b1, w2, b2, w3, b3 = params
    h = jax.nn.relu(x @ w1 + b1)
    h = jax.nn.relu(h @ w2 + b2)
    logits = h @ w3 + b3
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits, axis=-1) * y, axis=-1))


def jaxprs() -> tuple[Jaxpr, Jaxpr]:
    keys = jax.random.split(jax.random.key(0), len(SHAPES))
    raw = [jax.random.normal(k, s) * 0.05 for k, s in zip(keys, SHAPES)]
    x, y = jnp.ones((8, 784)), jax.nn.one_hot(jnp.arange(8) % 10, 10)
    params = [ax.tensor(r, *a) for r, a in zip(raw, AXES)]
    X, Y = ax.tensor(x, Batch, Pixel), ax.tensor(y, Batch, Class)
    ours = jax.make_jaxpr(jax.jit(ax.value_and_grad(ax_loss)))(params, X, Y).jaxpr
    with jax.numpy_rank_promotion("allow"):  # hand-written JAX broadcasts the biases
        theirs = jax.make_jaxpr(jax.jit(jax.value_and_grad(jnp_loss)))(raw, x, y).jaxpr
    return ours, theirs


def test_mlp_forward_backward_has_no_extra_primitives() -> None:
    ours, theirs = jaxprs()
    a, b = count_primitives(ours), count_primitives(theirs)
    detail = f"axjax {sorted(a.items())}\njnp   {sorted(b.items())}"
    assert sum(a.values()) <= sum(b.values()), detail
    # the expensive work is the same: one dot_general per matmul and per cotangent needed
    assert a["dot_general"] == b["dot_general"] == 3 + 5, detail
    assert a["transpose"] == 0, detail
    assert a["convert_element_type"] <= b["convert_element_type"], detail


def test_named_axes_leave_no_trace_in_the_jaxpr() -> None:
    ours, _ = jaxprs()
    text = str(ours)
    for name in ("Batch", "Pixel", "Hidden1", "Class"):
        assert name not in text


def test_the_counter_sees_inside_sub_jaxprs_and_drops_dead_code() -> None:
    def f(x: Any) -> Any:
        unused = jnp.sin(x)  # noqa: F841 - dead code, never counted
        return jax.jit(lambda v: jnp.cos(v) * 2)(x)

    counts = count_primitives(jax.make_jaxpr(f)(1.0).jaxpr)
    assert counts == Counter({"cos": 1, "mul": 1})


@pytest.mark.parametrize("n_batch", [0, 1, 2])
def test_identity_layouts_emit_no_transpose(n_batch: int) -> None:
    """Ops whose operands are already in order move no data, forward or backward."""
    batch = (Batch, Class)[:n_batch]
    axes = (*batch, Hidden1, Hidden2)

    def loss(arr: Any) -> Any:
        t = ax.tensor(arr, *axes)
        t = ax.broadcast(ax.transpose(t, *axes), t)  # both already in order: no op at all
        flat = ax.flatten(t, (Hidden1, Hidden2), Pixel)  # adjacent and in order: a reshape
        return ax.sum(ax.tanh(flat), (*batch, Pixel)).array

    arr = jnp.ones((2, 3)[:n_batch] + (4, 5))
    counts = count_primitives(jax.make_jaxpr(jax.grad(loss))(arr).jaxpr)
    assert counts["transpose"] == 0, counts
    assert counts["reshape"] == 2, counts  # flatten forward, and back in its backward
