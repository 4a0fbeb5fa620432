"""Every callable of ``axjax.nn`` that checks its axes at run time has a static rule in the
mypy plugin (issue 44, class 1).

The callables that check axes are declared in one place, ``axjax/nn/_registry.py``: every
layer class (``register_layer``) and every function declared with its rule
(``checks_axes``, e.g. ``rotary_embedding``). A layer judged on stand-ins needs its rule in
``axjax/mypy/_layer_rules.py``; a chain, stack, wrapper or ensemble has the plugin's own
hook; a layer typed by its signature alone is listed below with the reason it has no rule
(the gaps, in view); a declared function needs the plugin's hook (``AXIS_RULES``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import equinox as eqx

from axjax.nn._registry import LayerSpec, axis_rules, declared_layers
from tests.conftest import requires

#: layers typed by their hand-written signature, and why the plugin has no rule for them
SIGNATURE_ONLY = {
    "Dropout": "no axis rule: any tensor, any dtype",
    "Lambda": "a user function: its own types are its rule",
    "Conv": "the n-d base: its axes are given per call (Conv1D/2D/3D have rules)",
    "MaxPool": "the n-d base: its axes are given per call (MaxPool1D/2D have rules)",
    "AvgPool": "the n-d base: its axes are given per call (AvgPool1D/2D have rules)",
    "GlobalMaxPool": "not generic over its axes yet: checked at run time only",
    "GlobalAvgPool": "not generic over its axes yet: checked at run time only",
    "LoRA": "not generic over its base layer yet: checked at run time only",
    "ChildSumTreeLSTMCell": "not generic over its axes yet: checked at run time only",
}


def missing_rules(
    layers: Iterable[LayerSpec],
    functions: Mapping[str, str],
    rules: Iterable[str],
    hooked_functions: Mapping[str, str],
) -> list[str]:
    """The declared callables the plugin has no static rule for."""
    names = set(rules)
    missing = [
        s.name
        for s in layers
        if (s.typed == "stand-in" and s.name not in names)
        or (s.typed == "signature" and s.name not in SIGNATURE_ONLY)
    ]
    missing += [f for f, rule in functions.items() if hooked_functions.get(f) != rule]
    return sorted(missing)


def _plugin() -> tuple[set[str], dict[str, str]]:
    requires("mypy")
    from axjax.mypy import _layer_rules, _plugin

    return set(_layer_rules.RULES), dict(_plugin.AXIS_RULES)


def test_every_axis_rule_has_a_static_rule() -> None:
    rules, hooked = _plugin()
    assert "axjax.nn._rope.rotary_embedding" in axis_rules()
    assert {"GroupedQueryAttention", "SwiGLU"} <= rules
    assert missing_rules(declared_layers(), axis_rules(), rules, hooked) == []
    declared = {s.name for s in declared_layers() if s.typed == "signature"}
    assert set(SIGNATURE_ONLY) == declared, "a layer listed here is no longer signature-only"


class Planted(eqx.Module):
    """A layer declared for the plugin with no rule made for it."""

    def __call__(self, x: Any) -> Any:
        return x


def test_mutation_a_planted_layer_or_function_without_a_rule_is_reported() -> None:
    rules, hooked = _plugin()
    layer = LayerSpec(Planted, "stand-in", False)
    assert missing_rules([*declared_layers(), layer], axis_rules(), rules, hooked) == ["Planted"]
    signature = LayerSpec(Planted, "signature", False)
    assert missing_rules([signature], {}, rules, hooked) == ["Planted"]
    planted = {**axis_rules(), "axjax.nn._planted.f": "axjax.nn._planted.f_axes"}
    assert missing_rules([], planted, rules, hooked) == ["axjax.nn._planted.f"]
