"""The registry of layers (``axjax/nn/_registry.py``) is the one list of layers: every layer
class ``ax.nn`` exports is declared there, documented in the table of docs/nn.md, covered by
a typing case when the plugin judges it, and the mypy plugin's tables and ``ax.nn.cast``'s
overloads come from it. Each check returns what it finds, so the mutations below can prove
that it fails."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import equinox as eqx
import pytest

import axjax as ax
from axjax.nn._registry import LayerSpec, declared_layers, register_layer
from tests.conftest import requires

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "nn.md"
CASES = ROOT / "tests" / "typing" / "cases"
PRECISION = ROOT / "axjax" / "nn" / "_precision.py"


def is_layer(cls: type[Any]) -> bool:
    """An Equinox module with a call of its own: what a model applies."""
    return (
        isinstance(cls, type)
        and issubclass(cls, eqx.Module)
        and any("__call__" in vars(k) for k in cls.__mro__ if k not in (object, eqx.Module))
    )


def undeclared(namespace: object, specs: tuple[LayerSpec, ...]) -> list[str]:
    declared = {s.layer for s in specs}
    return sorted(
        name
        for name in dir(namespace)
        if not name.startswith("_")
        and is_layer(getattr(namespace, name))
        and getattr(namespace, name) not in declared
    )


def documented(text: str) -> dict[str, list[str]]:
    """``{layer: cells}`` for each row of the table "Every layer" in docs/nn.md."""
    section = text.split("## Every layer", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"^\|\s*`(\w+)`\s*\|", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in line.strip().strip("|").split("|")]
    return rows


def docs_problems(text: str, specs: tuple[LayerSpec, ...]) -> list[str]:
    rows = documented(text)
    problems = [f"no row in docs/nn.md for {s.name}" for s in specs if s.name not in rows]
    problems += [f"a row for an unknown layer {n}" for n in rows.keys() - {s.name for s in specs}]
    typed = {
        "stand-in": "plugin",
        "chain": "chain",
        "stack": "stack",
        "wrapper": "wrapper",
        "ensemble": "ensemble",
        "signature": "signature",
    }
    for s in specs:
        if s.name in rows:
            cells = rows[s.name]
            if cells[2] != typed[s.typed] or (cells[3] == "yes") != s.castable:
                problems.append(f"docs/nn.md's row for {s.name} says {cells[2:]}")
    return problems


def uncovered(cases_text: str, specs: tuple[LayerSpec, ...]) -> list[str]:
    """Layers the plugin judges with no line in a typing case."""
    return sorted(
        s.name
        for s in specs
        if s.typed != "signature" and not re.search(rf"\bnn\.{s.name}\b", cases_text)
    )


def uncast(precision_text: str, specs: tuple[LayerSpec, ...]) -> list[str]:
    """Castable layers without both generated cast overloads."""
    return sorted(
        s.name
        for s in specs
        if s.castable
        and not (
            re.search(rf"def cast\(\s*tree: {s.name}\[Any", precision_text)
            and re.search(rf"def __call__\(\s*self, tree: {s.name}\[Any", precision_text)
        )
    )


def test_every_exported_layer_is_declared() -> None:
    assert undeclared(ax.nn, declared_layers()) == []


def containers(specs: tuple[LayerSpec, ...]) -> list[str]:
    """Layers generic in other layers (``LayerStack[M, L]``, ``Remat[M]``,
    ``Recurrent[Cell, Over]``): a type parameter that is no axis (chains, variadic, excepted:
    the plugin types them)."""
    from typing import TypeVarTuple

    out = []
    for s in specs:
        params = getattr(s.layer, "__parameters__", ())
        if s.castable or any(isinstance(p, TypeVarTuple) for p in params):
            continue
        bounds = [getattr(p, "__bound__", None) for p in params]
        if any(not (isinstance(b, type) and issubclass(b, ax.Axis)) for b in bounds):
            out.append(s.name)
    return out


def uncast_containers(precision_text: str, specs: tuple[LayerSpec, ...]) -> list[str]:
    """Containers without both generated cast overloads."""
    return sorted(
        name
        for name in containers(specs)
        if not (
            re.search(rf"def cast\(\s*tree: {name}\[\w+\[Any", precision_text)
            and re.search(rf"def __call__\(\s*self, tree: {name}\[\w+\[Any", precision_text)
        )
    )


def test_every_container_has_its_cast_overloads() -> None:
    """Issue 32: a cast of a container casts the layers it holds (generated per container
    of the registry and per castable layer it admits)."""
    assert set(containers(declared_layers())) >= {"LayerStack", "Remat", "Recurrent"}
    assert uncast_containers(PRECISION.read_text(), declared_layers()) == []
    assert uncast_containers("", declared_layers()) != []  # the check can fail


def test_every_declared_layer_is_exported_under_its_name() -> None:
    for spec in declared_layers():
        assert getattr(ax.nn, spec.name, None) is spec.layer, f"ax.nn does not export {spec.name}"


def test_every_declared_layer_has_its_row_in_the_docs() -> None:
    assert docs_problems(DOCS.read_text(), declared_layers()) == []


def test_every_layer_the_plugin_judges_has_a_typing_case() -> None:
    text = "\n".join(p.read_text() for p in sorted(CASES.glob("*.py")))
    assert uncovered(text, declared_layers()) == []


def test_the_mypy_plugin_tables_come_from_the_registry() -> None:
    requires("mypy")
    from axjax.mypy import _layers as plugin_layers

    specs = declared_layers()
    assert plugin_layers.LAYERS == {s.path: s.name for s in specs if s.typed == "stand-in"}
    assert set(plugin_layers.CHAINS) == {s.path for s in specs if s.typed == "chain"}
    assert plugin_layers.SIZED == {s.name for s in specs if s.sized}
    for path, name in plugin_layers.LAYERS.items():  # the names mypy sees are the classes'
        module, _, cls = path.rpartition(".")
        assert getattr(__import__(module, fromlist=[cls]), cls) is getattr(ax.nn, name)


def test_every_layer_judged_on_stand_ins_has_its_rule() -> None:
    """The plugin's stand-in of a layer is made by its rule; without one, its calls would
    quietly get the gradual result."""
    requires("mypy")
    from axjax.mypy import _layer_rules

    assert set(_layer_rules.RULES) == set(_layer_rules.LAYERS.values())


def test_every_castable_layer_has_its_cast_overloads() -> None:
    assert uncast(PRECISION.read_text(), declared_layers()) == []
    assert {s.name for s in declared_layers() if s.castable} >= {"Affine", "Conv2D", "LSTMCell"}


def test_a_layer_name_is_declared_once() -> None:
    class Affine(eqx.Module):  # another class of an existing layer's name
        pass

    with pytest.raises(TypeError, match=r"a layer named Affine is already declared"):
        register_layer()(Affine)


# ------------------------------------------------------------------ mutations: the checks fail
class Scale(eqx.Module):
    """A layer nobody declared."""

    def __call__(self, x: Any) -> Any:
        return x


def test_the_checks_see_a_layer_left_out() -> None:
    class Namespace:
        pass

    ns = Namespace()
    for name in dir(ax.nn):
        setattr(ns, name, getattr(ax.nn, name))
    ns.Scale = Scale  # type: ignore[attr-defined]
    assert undeclared(ns, declared_layers()) == ["Scale"]

    fake = LayerSpec(Scale, "stand-in", False)
    specs = (*declared_layers(), fake)
    assert "no row in docs/nn.md for Scale" in docs_problems(DOCS.read_text(), specs)
    text = "\n".join(p.read_text() for p in sorted(CASES.glob("*.py")))
    assert uncovered(text, specs) == ["Scale"]
    wrong = DOCS.read_text().replace(
        "| `Affine` | `W·x + b` from one axis to another | plugin |",
        "| `Affine` | `W·x + b` | signature |",
    )
    assert "docs/nn.md's row for Affine says ['signature', 'yes']" in docs_problems(
        wrong, declared_layers()
    )


def test_the_cast_check_sees_a_missing_overload() -> None:
    text = PRECISION.read_text()
    cut = re.sub(r"@overload\n\s*def __call__\(self, tree: Embedding\[[^\n]*\n", "", text)
    assert cut != text
    assert uncast(cut, declared_layers()) == ["Embedding"]
