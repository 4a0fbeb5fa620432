"""The suite's own rules (tests/conftest.py): float32 matrix products at full precision on
accelerators, applied once at import; optional tools skip outside CI and fail inside it."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.conftest import (
    CHEAP_CODEGEN,
    CHEAP_XLA_OPTIONS,
    CHILD_XLA_FLAGS,
    _install_cheap_codegen,
    across_programs,
    cheap_codegen,
    matmul_precision_for,
    requires,
    set_compile_effort,
)

CONFTEST = Path(__file__).resolve().parent / "conftest.py"
#: what a test may end with early: a skip or a failure (caught here to tell them apart)
OUTCOMES = (pytest.skip.Exception, pytest.fail.Exception)


@pytest.fixture
def precision_restored() -> Iterator[None]:
    """Put ``jax_default_matmul_precision`` back as it was after the test."""
    old = jax.config.jax_default_matmul_precision
    try:
        yield
    finally:
        jax.config.update("jax_default_matmul_precision", old)


def _product_precision() -> str:
    """The precision of a jitted float32 product, as its StableHLO states it."""
    a = jnp.ones((4, 4), jnp.float32)
    (line,) = [s for s in jax.jit(jnp.matmul).lower(a, a).as_text().splitlines() if "dot" in s]
    return line.split("precision = [")[1].split(",")[0]


def test_full_precision_on_every_backend_but_the_cpu() -> None:
    assert matmul_precision_for("gpu") == "highest"  # TF32 by default on Ampere/Hopper
    assert matmul_precision_for("tpu") == "highest"  # bfloat16 passes by default
    assert matmul_precision_for("cpu") is None


def test_the_rule_is_in_force_on_this_backend() -> None:
    """What the import set: on a GPU, ``highest`` (fails there if the rule is removed)."""
    want = matmul_precision_for(jax.default_backend())
    assert jax.config.jax_default_matmul_precision == want
    assert _product_precision() == (want or "default").upper()


@pytest.mark.parametrize(("backend", "want"), [("gpu", "HIGHEST"), ("cpu", "DEFAULT")])
def test_importing_the_conftest_on_a_gpu_sets_full_precision(
    monkeypatch: pytest.MonkeyPatch, precision_restored: None, backend: str, want: str
) -> None:
    """The conftest run afresh with the backend query answering ``backend``: on ``gpu`` its
    import sets the precision, and a jitted float32 product then lowers at ``HIGHEST``
    (``cpu``, the mutation's view: the same check sees ``DEFAULT``)."""
    jax.config.update("jax_default_matmul_precision", None)
    monkeypatch.setattr(jax, "default_backend", lambda: backend)
    spec = importlib.util.spec_from_file_location("conftest_afresh", CONFTEST)
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert _product_precision() == want


def test_a_present_tool_is_returned() -> None:
    assert requires("json") is json
    assert requires(Path(sys.executable).name, program=True).endswith(Path(sys.executable).name)


@pytest.mark.parametrize("program", [False, True], ids=["module", "program"])
@pytest.mark.parametrize("ci", [None, "false", "0"])
def test_a_missing_tool_skips_outside_ci(
    monkeypatch: pytest.MonkeyPatch, program: bool, ci: str | None
) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(OUTCOMES) as info:
        requires("axjax_no_such_tool", extra="dev", program=program)
    assert info.type is pytest.skip.Exception
    assert info.match(r'not installed.*: pip install -e "\.\[dev\]"$')


@pytest.mark.parametrize("program", [False, True], ids=["module", "program"])
@pytest.mark.parametrize("ci", ["true", "1", "TRUE"])
def test_a_missing_tool_fails_in_ci(
    monkeypatch: pytest.MonkeyPatch, program: bool, ci: str
) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(OUTCOMES) as info:
        requires("axjax_no_such_tool", program=program)
    assert info.type is pytest.fail.Exception  # not a skip, which CI would not notice
    assert info.match(r'pip install -e "\.\[test\]"; CI installs every extra, so this fails$')


@pytest.mark.parametrize("ci", [None, "true", "1"])
def test_a_tool_of_no_extra_skips_in_ci_too(
    monkeypatch: pytest.MonkeyPatch, ci: str | None
) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(OUTCOMES) as info:
        requires("axjax_no_such_tool.sub", extra=None)
    assert info.type is pytest.skip.Exception  # torch is in no extra: CI does not install it
    assert info.match(r"not installed.*: pip install axjax_no_such_tool \(no extra installs it")


# ------------------------------------------------------------------ run summaries
SUMMARY_TEST = """
def test_a(record_property):
    record_property("summary", "first summary line")

def test_b(record_property):
    record_property("summary", "second summary line")
    record_property("other", "not a summary")
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2", "--dist", "loadfile", "-p", "xdist"]])
def test_summaries_reach_the_terminal_in_one_process_and_from_xdist_workers(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    """A test's ``record_property("summary", text)`` is printed once at the end of the run
    (the generated programs' and the docs blocks' counts), run in one process or in
    pytest-xdist workers (``make test``); other properties are not."""
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_summaries=SUMMARY_TEST)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", *workers)
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert out.count("first summary line") == 1 and out.count("second summary line") == 1
    assert "not a summary" not in out


FLAGS_TEST = """
import conftest


def test_this_process_started_without_the_childrens_flag():
    assert conftest.CHILD_FLAG not in conftest.XLA_FLAGS_AT_START
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2", "-p", "xdist"]])
def test_a_worker_does_not_compile_with_the_childrens_flag(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    """The controller of ``make test`` gives the processes the tests start the cheap code
    generator in ``XLA_FLAGS``, and pytest-xdist's workers inherit that environment: each
    takes it off before its XLA starts, so its fully optimised compilations are a user's
    (the mutation, the flag kept: the bench structure's mutation guards then miss)."""
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_flags=FLAGS_TEST)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", *workers)
    result.assert_outcomes(passed=1)


def test_switching_the_compile_effort_leaves_no_executable_behind() -> None:
    """What was compiled with little effort is not reused once the suite compiles fully: an
    eager draw equals the same draw under ``jit`` bit for bit afterwards (with the cheap
    executable reused, 127 of these 256 values differ in the last bit on the CPU)."""

    def draw(key: jax.Array) -> jax.Array:
        return jax.random.uniform(key, (256,), minval=-0.3, maxval=0.3)

    key = jax.random.key(3)
    jitted = jax.jit(draw)
    try:
        set_compile_effort(True)
        assert jax.config.read("jax_disable_most_optimizations")
        draw(key)
        set_compile_effort(False)
        assert not jax.config.read("jax_disable_most_optimizations")
        np.testing.assert_array_equal(np.asarray(draw(key)), np.asarray(jitted(key)))
    finally:
        set_compile_effort(True)  # as the suite runs (the next test sets its own anyway)


def test_every_test_compiles_cheaply_unless_marked_optimized() -> None:
    assert jax.config.read("jax_disable_most_optimizations")


@pytest.mark.optimized
def test_a_test_marked_optimized_compiles_fully() -> None:
    assert not jax.config.read("jax_disable_most_optimizations")


def test_the_costliest_files_are_files_of_the_suite() -> None:
    """A renamed or removed file in ``COSTLIEST_FIRST`` would silently run in xdist's order."""
    from tests.conftest import COSTLIEST_FIRST, ROOT

    assert len(set(COSTLIEST_FIRST)) == len(COSTLIEST_FIRST)
    missing = [name for name in COSTLIEST_FIRST if not (ROOT / name).is_file()]
    assert not missing


def test_little_effort_compiles_with_the_cheap_code_generator() -> None:
    """Under little effort every compilation gets :data:`CHEAP_XLA_OPTIONS`, fully optimised
    none does (the mutation's view: without the wrapper no compilation gets them), wrapping
    twice (the conftest imported afresh) adds them once, and the processes the tests start
    get them through ``XLA_FLAGS``."""
    if not CHEAP_CODEGEN:
        pytest.skip("this JAX or XLA has no cheaper code generator to ask for: compiles as before")
    from jax._src import compiler

    try:
        for cheap in (True, False):
            set_compile_effort(cheap)
            overrides = compiler.get_compile_options(1, 1).env_option_overrides
            want = list(CHEAP_XLA_OPTIONS.items()) if cheap else []
            assert [o for o in overrides if o[0] in CHEAP_XLA_OPTIONS] == want, (cheap, overrides)
    finally:
        set_compile_effort(True)
    assert cheap_codegen(compiler.get_compile_options) is compiler.get_compile_options
    assert CHILD_XLA_FLAGS == "--xla_cpu_use_fusion_emitters=false"
    assert CHILD_XLA_FLAGS in os.environ["XLA_FLAGS"]


def test_a_jax_without_the_option_compiles_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where this XLA does not know the option (a newer one may drop it), the first
    compilation through the wrapper fails, the wrapper comes off and nothing else changes."""
    if not CHEAP_CODEGEN:
        pytest.skip("this JAX or XLA has no cheaper code generator to ask for: compiles as before")
    from jax._src import compiler

    unwrapped = compiler.get_compile_options.__wrapped__
    monkeypatch.setattr(compiler, "get_compile_options", unwrapped)
    monkeypatch.setitem(CHEAP_XLA_OPTIONS, "xla_no_such_option_in_any_xla", True)
    assert not _install_cheap_codegen()
    assert compiler.get_compile_options is unwrapped


def test_float32_results_of_two_programs_get_the_backends_tolerance() -> None:
    """The one tolerance rule beside the precision rule: a CPU tolerance as written, wider
    on an accelerator (its kernels sum in other orders), an unknown backend as wide."""
    assert across_programs(1e-6, "cpu") == 1e-6
    assert across_programs(1e-6, "gpu") == across_programs(1e-6, "tpu") == 4e-6
    assert across_programs(1e-5, "rocm") == 4e-5
    # the H200's stacked-against-unrolled Llama logits: 1.7e-6 off, within the GPU's rule
    assert 1.7e-6 > across_programs(1e-6, "cpu") and 1.7e-6 <= across_programs(1e-6, "gpu")
