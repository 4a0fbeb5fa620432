"""Mistakes with meshes are axjax's own errors, with the fix: generated over every
collective of ``axjax.parallel._collective`` and every public callable that takes rules.

One device is enough: a 1 x 1 mesh has the axes ``("data", "model")`` the rules name.
Each check is also run with its mechanism switched off, to show it can fail.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import jax
import pytest
from jax.sharding import PartitionSpec as P

import axjax as ax
from axjax.parallel import _collective, _rules, _sharding
from tests.axes import Batch, Hidden, Pixel

BAD = {Hidden: "modl"}  # a mesh axis the mesh does not have


def mesh() -> jax.sharding.Mesh:
    return jax.make_mesh((1, 1), ("data", "model"))


# ------------------------------------------------------------------------- collectives
COLLECTIVES = {name: getattr(_collective, name) for name in _collective.__all__}


def valid_input(fn: Callable[..., Any]) -> tuple[Any, type[ax.Axis]]:
    """The operand ``fn`` accepts inside ``shard_map`` (found by trying both: a tensor
    that has the communicated axis, for a gather, or one that no longer has it, for a
    reduction)."""
    candidates = [ax.zeros((4,), Hidden), ax.zeros((2, 4), Batch, Hidden)]
    accepted = []
    for t in candidates:
        try:
            inside_shard_map(lambda a, t=t: fn(ax.Tensor._wrap(a, t.axes), Batch), t)
        except ax.AxisError:
            continue
        accepted.append(t)
    assert len(accepted) == 1, (fn, accepted)
    return accepted[0], Batch


def inside_shard_map(body: Callable[[Any], Any], t: Any, rules: Any = None) -> Any:
    m = mesh()
    with ax.axis_rules(m, rules or {Batch: "data"}):
        f = jax.shard_map(
            lambda a: body(a).array, in_specs=P(), out_specs=P(), check_vma=False, mesh=m
        )
        return f(t.array)


def collective_errors(name: str) -> list[str]:
    """What is wrong with collective ``name``'s errors (empty: right)."""
    fn = COLLECTIVES[name]
    t, over = valid_input(fn)
    problems: list[str] = []
    outside: list[tuple[str, Callable[[], Any]]] = [
        ("no mesh", lambda: fn(t, over, rules={Batch: "data"})),
        ("under axis_rules", lambda: _under_rules(lambda: fn(t, over))),
        ("under jax.jit", lambda: _under_rules(lambda: jax.jit(lambda a: fn(a, over))(t))),
    ]
    for where, call in outside:
        problems += _expect(
            f"{name} {where}",
            call,
            [f"{name}(", "mesh axis 'data' is not bound here", "jax.shard_map", f"drop the {name}"],
        )
    problems += _expect(  # no rules at all: shard_map is what is missing, not the rules
        f"{name} with no rules",
        lambda: fn(t, over),
        [f"{name}(", "no mesh axis is bound here", "jax.shard_map", f"drop the {name}"],
    )
    problems += _expect(
        f"{name} with a rule naming mesh axis 'modl'",
        lambda: inside_shard_map(
            lambda a: fn(ax.Tensor._wrap(a, t.axes), Batch), t, {Batch: "modl", **{}}
        ),
        ["Batch maps to mesh axis 'modl', but the mesh has axes ('data', 'model')"],
    )
    return problems


def _under_rules(call: Callable[[], Any]) -> Any:
    with ax.axis_rules(mesh(), {Batch: "data"}):
        return call()


def _expect(where: str, call: Callable[[], Any], texts: list[str]) -> list[str]:
    try:
        call()
    except ax.AxisError as e:
        missing = [s for s in texts if s not in str(e)]
        return [f"{where}: {missing} not in {e}"] if missing else []
    except Exception as e:  # a raw error from JAX
        return [f"{where}: {type(e).__name__}: {e}"]
    return [f"{where}: no error"]


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
def test_collective_outside_shard_map_and_unknown_mesh_axis(name: str) -> None:
    assert collective_errors(name) == []


def test_collectives_error_check_can_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the translation of JAX's NameError and the mesh check, every collective's
    errors are raw."""

    def raw(where: str, t: Any, over: Any, names: Any, fn: Any, *args: Any, **kw: Any) -> Any:
        return fn(*args, names, **kw)

    monkeypatch.setattr(_collective, "_bound", raw)
    monkeypatch.setattr(_collective, "check_mesh_axes", lambda *a: None)
    for name in COLLECTIVES:
        assert collective_errors(name), name


# ------------------------------------------------------------------------------- rules
def rule_entry_points() -> dict[str, Callable[..., Any]]:
    """Every public callable of ``ax``, ``ax.train`` and ``ax.nn`` with a ``rules`` or
    ``param_rules`` parameter."""
    found: dict[str, Callable[..., Any]] = {}
    for prefix, module in (("ax", ax), ("ax.train", ax.train), ("ax.nn", ax.nn)):
        for name in dir(module):
            obj = getattr(module, name)
            if name.startswith("_") or not callable(obj):
                continue
            try:
                params = inspect.signature(obj).parameters
            except (TypeError, ValueError):
                continue
            if {"rules", "param_rules"} & set(params):
                found[f"{prefix}.{name}"] = obj
    return found


ENTRY_POINTS = rule_entry_points()


def _preset_through_args(preset: ax.train.ParallelPreset) -> Any:
    """A ``ParallelPreset`` is data; its rules meet the mesh in ``parallel_from_args``."""
    args = argparse.Namespace(
        devices=None, parallel="p", coordinator=None, num_processes=None, process_id=None
    )
    return ax.train.parallel_from_args(args, {"p": preset})


#: what a returned value goes through before its rules meet a mesh
THROUGH: dict[str, Callable[[Any], Any]] = {"ax.train.ParallelPreset": _preset_through_args}


def argument(param: inspect.Parameter, m: jax.sharding.Mesh) -> Any:
    """A value for a parameter, by its name (a callable with a new one fails the test)."""
    values: dict[str, Any] = {
        "mesh": m,
        "tree": ax.zeros((2, 4), Batch, Hidden),
        "t": ax.zeros((4,), Pixel),
        "over": Hidden,
        "fn": lambda: ax.nn.Affine(Pixel, Hidden, 4, 4, key=jax.random.key(0)),
        "model": 1,
    }
    if param.name not in values:
        raise AssertionError(f"no test value for parameter {param.name!r}: add one")
    return values[param.name]


def call_with(fn: Callable[..., Any], bad: str) -> Any:
    """``fn`` called with ``BAD`` for its parameter ``bad`` (the other rules good)."""
    m = mesh()
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in inspect.signature(fn).parameters.values():
        if p.name in ("rules", "param_rules"):
            value: Any = BAD if p.name == bad else {Batch: "data"}
        elif p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or (
            p.default is not p.empty and p.name not in ("mesh", "over")
        ):
            continue
        else:
            value = argument(p, m)
        if p.kind == p.POSITIONAL_ONLY:
            args.append(value)
        else:
            kwargs[p.name] = value
    with contextlib.ExitStack() as stack:
        stack.enter_context(jax.set_mesh(m))
        out = fn(*args, **kwargs)
        if hasattr(out, "__enter__"):  # a context (axis_rules): its rules apply on entry
            stack.enter_context(out)
        return out


def rule_cases() -> Iterator[tuple[str, str]]:
    for name, fn in ENTRY_POINTS.items():
        params = inspect.signature(fn).parameters
        for bad in ("rules", "param_rules"):
            if bad in params:
                yield name, bad


def rule_errors(name: str, bad: str) -> list[str]:
    fn = ENTRY_POINTS[name]

    def call() -> Any:
        return THROUGH.get(name, lambda v: v)(call_with(fn, bad))

    return _expect(
        f"{name}({bad}=...)",
        call,
        ["Hidden maps to mesh axis 'modl'", "the mesh has axes ('data', 'model')"],
    )


def test_rule_entry_points_found() -> None:
    """The enumeration finds the known entry points (and so would find new ones)."""
    assert {"ax.axis_rules", "ax.shard", "ax.psum", "ax.train.Parallel"} <= set(ENTRY_POINTS)


@pytest.mark.parametrize(("name", "bad"), list(rule_cases()))
def test_rules_naming_an_unknown_mesh_axis(name: str, bad: str) -> None:
    assert rule_errors(name, bad) == []


def test_rules_check_can_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``check_mesh_axes`` the entry points accept the rule or fail raw."""
    for module in (_sharding, _rules, _collective):
        monkeypatch.setattr(module, "check_mesh_axes", lambda *a: None)
    failing = [case for case in rule_cases() if rule_errors(*case)]
    assert len(failing) == len(list(rule_cases())), failing
