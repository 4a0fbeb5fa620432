"""Every primitive, checked by the op-test helper (forward vs a jnp oracle, its own backward vs
jax.grad of the oracle and finite differences, plain JAX autodiff), and proof that the table
of cases, the ops declared in the registry (``axjax/core/_registry.py``) and the rows of
``docs/ops.md`` are the same set, and that every declaration is exported and used."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
import sys
from pathlib import Path

import pytest

import axjax as ax
import axjax.core
import axjax.graph
import axjax.nn
import axjax.ops
import axjax.train
from axjax.core._internal import declared_ops
from axjax.core._registry import operator as registry_operator
from tests.conftest import requires
from tests.ops.helpers import OpCase, check_op
from tests.ops.op_cases import CASES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "ops.md"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_op(case: OpCase) -> None:
    # the first case of each op gets three draws, variants (with an id) two
    check_op(case, max_examples=2 if case.id else 3)


def op_classes() -> set[type[ax.Op]]:
    """The concrete ``Op`` subclasses defined in the library (any ``axjax.*`` module).

    A class with subclasses of its own (``UnaryOp``, ``Reduction``, ...) is a base, not a
    primitive.
    """
    for pkg in (axjax.core, axjax.parallel, axjax.ops, axjax.graph, axjax.nn, axjax.train):
        for info in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{pkg.__name__}.{info.name}")
    found: set[type[ax.Op]] = set()
    todo = [ax.Op]
    while todo:
        cls = todo.pop()
        subs = cls.__subclasses__()
        todo.extend(subs)
        if (
            cls is not ax.Op
            and not subs
            and cls.__module__.startswith("axjax.")
            and not cls.__dict__.get("user_base")
        ):  # ax.ElementwiseOp, ...: for users
            found.add(cls)
    return found


def primitives() -> set[str]:
    """Names of the declared ops public in ``axjax`` (the table of docs/ops.md)."""
    return {spec.op.__name__ for spec in declared_ops() if spec.namespace == "axjax"}


def documented() -> dict[str, str]:
    """``{op: row}`` for each row of the table in docs/ops.md (first cell: `` `Op` ``)."""
    rows = {}
    for line in DOCS.read_text().splitlines():
        m = re.match(r"^\|\s*`(\w+)`\s*\|", line)
        if m:
            rows[m.group(1)] = line
    return rows


def test_every_primitive_has_a_test_case() -> None:
    tested = {c.op for c in CASES}
    missing = primitives() - tested
    assert not missing, f"primitives without a case in tests/ops/op_cases.py: {sorted(missing)}"
    assert tested <= primitives(), f"cases for unknown ops: {sorted(tested - primitives())}"


def test_every_primitive_is_documented_and_every_row_is_tested() -> None:
    rows = documented()
    assert set(rows) == primitives(), (
        f"docs/ops.md rows without an op: {sorted(set(rows) - primitives())}; "
        f"ops without a row: {sorted(primitives() - set(rows))}"
    )
    assert set(rows) <= {c.op for c in CASES}
    for op, row in rows.items():
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 4 and all(cells), f"docs/ops.md row for {op} needs 4 filled cells"


def test_every_op_class_is_declared_once() -> None:
    declared = [spec.op for spec in declared_ops()]
    assert len(declared) == len(set(declared))
    missing = op_classes() - set(declared)
    names = sorted(c.__name__ for c in missing)
    assert not missing, f"Op classes without a register_op declaration: {names}"


def test_every_declared_function_is_exported() -> None:
    for spec in declared_ops():
        namespace = importlib.import_module(spec.namespace)
        module = importlib.import_module(spec.module)
        for name in spec.functions:
            fn = getattr(module, name, None)
            assert callable(fn), f"{spec.op.__name__}: {spec.module} defines no function {name}"
            assert getattr(namespace, name, None) is fn, (
                f"{spec.namespace}.{name} is not the function {spec.module}.{name}"
            )
            if spec.namespace == "axjax":
                assert getattr(axjax.ops, name, None) is fn, f"axjax.ops does not export {name}"
        assert (spec.kind == "internal") == (not spec.functions)


def public_names() -> dict[str, dict[str, object]]:
    """``{namespace: {name: object}}`` of the public namespaces users import from."""
    spaces = {"axjax": ax, "axjax.nn": axjax.nn, "axjax.train": axjax.train}
    return {
        space: {n: getattr(mod, n) for n in dir(mod) if not n.startswith("_")}
        for space, mod in spaces.items()
    }


def test_a_declared_name_means_one_thing_in_every_namespace() -> None:
    # a new `swish` op beside the existing `ax.nn.swish` (an alias of silu) would give two
    # functions under one name: the declared function must be the only thing of its name
    clashes = sorted(
        f"{spec.namespace}.{name} (the {spec.op.__name__} op) and {space}.{name}"
        for spec in declared_ops()
        for name in spec.functions
        for space, names in public_names().items()
        if name in names
        and names[name] is not getattr(importlib.import_module(spec.namespace), name)
    )
    assert not clashes, f"one name, two meanings: {clashes}"


def test_the_name_check_sees_a_clash(monkeypatch: pytest.MonkeyPatch) -> None:
    # mutation: a declared `ax.swish` op beside ax.nn.swish (another object) is reported
    from axjax.core._registry import OpSpec

    class Swish(ax.Op):
        pass

    fake = OpSpec(Swish, ("swish",), "unary", "axjax", ())
    real = declared_ops()
    monkeypatch.setattr(ax, "swish", lambda x: x, raising=False)
    monkeypatch.setattr(sys.modules[__name__], "declared_ops", lambda: (*real, fake))
    with pytest.raises(AssertionError, match=r"axjax.swish \(the Swish op\) and axjax.nn.swish"):
        test_a_declared_name_means_one_thing_in_every_namespace()


def test_a_function_name_is_declared_once() -> None:
    from axjax.core._registry import register_op

    class Exp2(ax.Op):
        pass

    with pytest.raises(TypeError, match=r"axjax.exp is already declared by Exp"):
        register_op("exp", kind="unary")(Exp2)


def test_tensor_operators_call_the_declared_functions() -> None:
    for spec in declared_ops():
        for method in spec.operators:
            assert hasattr(ax.Tensor, method), f"Tensor has no {method}"
            assert registry_operator(method) is getattr(ax, spec.functions[0])


def test_the_mypy_plugin_tables_come_from_the_registry() -> None:
    requires("mypy")
    from axjax.mypy import _plugin

    by_kind: dict[str, set[str]] = {}
    for spec in declared_ops():
        if spec.namespace == "axjax":
            by_kind.setdefault(spec.kind, set()).update(spec.functions)
    assert _plugin.UNARY == by_kind["unary"]
    assert _plugin.BINARY == by_kind["binary"]
    assert _plugin.POSITIONAL == by_kind["positional"]
    assert _plugin.SET_ALGEBRA == by_kind["set_algebra"]
    assert _plugin.AXIS_OPS == by_kind["axis"] | by_kind["positional"] | by_kind["set_algebra"]


def test_the_coverage_check_sees_a_new_op() -> None:
    class Identity(ax.Op):
        def infer(self, x: object) -> ax.TensorType:
            raise NotImplementedError

    Identity.__module__ = "axjax.ops._fake"
    try:
        assert Identity in op_classes()
        assert Identity not in {spec.op for spec in declared_ops()}
    finally:
        Identity.__module__ = __name__


def test_the_overload_generator_covers_every_declared_axis_function() -> None:
    spec = importlib.util.spec_from_file_location(
        "gen_overloads", Path(__file__).resolve().parents[2] / "tools" / "gen_overloads.py"
    )
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    docs = gen.runtime_docs()
    generated = {
        name
        for build in gen.MODULES.values()
        for names in build(docs).exports.values()
        for name in names
    }
    assert gen.check_coverage(generated) == []
    assert gen.check_coverage(generated - {"squeeze"}) == ["squeeze"]  # a new op is noticed
    assert {"sum", "softmax", "argmax", "add", "less"} <= generated  # read from the registry
