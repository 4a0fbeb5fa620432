"""Shared pytest set-up: strict JAX settings, full-precision matrix products on accelerators,
the location of the real data sets, and optional tools (skip, but never in CI)."""

from __future__ import annotations

import functools
import importlib
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, overload

import jax
import pytest

jax.config.update("jax_numpy_rank_promotion", "raise")

#: What little effort means for XLA:CPU's code generator too: its fusion emitters (the
#: default) cost two to three times the compile time of its earlier emitters on the suite's
#: small programs (a jitted gradient of a 5-op program: 154 against 67 ms; the op table: 105
#: against 61 CPU seconds). Same HLO passes and math, but two programs of the same math may
#: round an ulp apart, so a test comparing two programs bit for bit is marked optimized; a
#: program compiled fully (``@pytest.mark.optimized``) keeps XLA's default, as a user's does.
CHEAP_XLA_OPTIONS: dict[str, bool] = {"xla_cpu_use_fusion_emitters": False}

#: the same option as the ``XLA_FLAGS`` entry this conftest gives the processes the tests
#: start (below); a pytest-xdist worker inherits it from the controller's environment, so it
#: comes off before this process's XLA starts, or the worker's fully optimised compilations
#: would get it too
CHILD_FLAG = " ".join(f"--{k}={str(v).lower()}" for k, v in CHEAP_XLA_OPTIONS.items())
os.environ["XLA_FLAGS"] = " ".join(
    f for f in os.environ.get("XLA_FLAGS", "").split() if f != CHILD_FLAG
)
#: what this process's XLA reads when it starts (just below)
XLA_FLAGS_AT_START = os.environ["XLA_FLAGS"]

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"


# ------------------------------------------------------------------ matrix-product precision
def matmul_precision_for(backend: str) -> str | None:
    """The suite's one precision rule: ``"highest"`` on every backend but the CPU, else
    ``None`` (JAX's default, already full float32 on the CPU).

    The suite compares float32 results with float32 tolerances (scanned against unrolled
    blocks, remat, a batched Tree-LSTM against its recursive reference). JAX's ``DEFAULT``
    precision runs float32 matrix products as TF32 on Ampere and Hopper GPUs (10-bit
    mantissa) and as bfloat16 passes on TPUs, so two programs of the same math differ by
    ~1e-3 relative there (jax-ml/jax#12008). The tests check the math, not the speed, so
    they run every float32 product at full precision; the benchmarks keep the default.

    Example:
        >>> matmul_precision_for("gpu"), matmul_precision_for("cpu")
        ('highest', None)
    """
    return None if backend == "cpu" else "highest"


def apply_matmul_precision(backend: str) -> str | None:
    """Set ``jax_default_matmul_precision`` as :func:`matmul_precision_for` says for
    ``backend``; return what was set (``None``: left as it is)."""
    precision = matmul_precision_for(backend)
    if precision is not None:
        jax.config.update("jax_default_matmul_precision", precision)
    return precision


#: applied once, at import, for every test in the process (each xdist worker imports this)
MATMUL_PRECISION = apply_matmul_precision(jax.default_backend())


# ------------------------------------------------------------------ float32 tolerances
#: How much further apart two *different programs* of the same float32 math may land on
#: each backend than on the CPU. Even at full precision (above), a GPU's kernels sum in
#: other orders (tiled reductions, fused softmax, atomics-free but blocked matmuls), so
#: a stacked model against its unrolled twin differs by up to ~2e-6 where the CPU gives
#: ~5e-7 (seen on an H200: 1.7e-6 against an atol of 1e-6).
FLOAT32_SPREAD = {"cpu": 1.0, "gpu": 4.0, "tpu": 4.0}


def across_programs(atol: float, backend: str | None = None) -> float:
    """The suite's one tolerance rule for float32 results of two programs: ``atol`` as a
    test writes it for the CPU, widened by :data:`FLOAT32_SPREAD` on ``backend`` (default:
    JAX's). A result compared with itself (the same program twice) needs no widening.

    Example:
        >>> across_programs(1e-6, "cpu"), across_programs(1e-6, "gpu")
        (1e-06, 4e-06)
    """
    return atol * FLOAT32_SPREAD.get(backend or jax.default_backend(), 4.0)


# ------------------------------------------------------------------ compilation effort
#: Every test compiles with little effort (``jax_disable_most_optimizations``), and so do
#: the processes the tests start (the environment variable): the suite compiles thousands
#: of small programs once each, and XLA's optimisation passes were most of its CPU time
#: (tests/nn's attention, generation and layer stacks: 91 s against 57 s). The tests check
#: the math, which the flag does not change. A test that reads what XLA makes of a program
#: (its fusions, its kernels, its collectives) or that the optimised program must agree
#: with bit for bit is marked ``@pytest.mark.optimized`` (or a module, with ``pytestmark``)
#: and runs fully optimised, as a user's program does.
os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "1"


def set_compile_effort(cheap: bool) -> None:
    """Compile with little effort (``cheap``) or fully from now on.

    ``jax_disable_most_optimizations`` is not part of JAX's compilation-cache key, so an
    executable compiled before the switch (an eager op's, a jitted function's) would be
    reused after it, and a test would run code compiled the other way: eager and jitted
    results then differ in the last bit, depending on what the worker ran before. So a
    switch clears JAX's caches; setting the effort already in force does nothing.
    """
    if jax.config.read("jax_disable_most_optimizations") is cheap:
        return
    jax.clear_caches()
    jax.config.update("jax_disable_most_optimizations", cheap)


jax.config.update("jax_disable_most_optimizations", True)


def cheap_codegen(get_compile_options: Callable[..., Any]) -> Callable[..., Any]:
    """``jax._src.compiler.get_compile_options`` that adds :data:`CHEAP_XLA_OPTIONS` to every
    compilation made with little effort (``jax_disable_most_optimizations``, read at each
    compilation, so :func:`set_compile_effort` switches both). Wrapping twice wraps once."""
    if getattr(get_compile_options, "cheap_codegen", False):
        return get_compile_options

    @functools.wraps(get_compile_options)
    def get(*args: Any, **kwargs: Any) -> Any:
        options = get_compile_options(*args, **kwargs)
        if jax.config.read("jax_disable_most_optimizations"):
            options.env_option_overrides = [
                *CHEAP_XLA_OPTIONS.items(),
                *options.env_option_overrides,
            ]
        return options

    get.cheap_codegen = True  # type: ignore[attr-defined]  # the marker read above
    return get


def _install_cheap_codegen() -> bool:
    """Wrap JAX's compile options with :func:`cheap_codegen` where this JAX and XLA have them
    (a private function, and an XLA flag that may go): a first compilation through the
    wrapper proves it, and where it fails the wrapper comes off, so a newer JAX runs the
    suite as before, only slower (``False``)."""
    try:
        from jax._src import compiler
    except ImportError:
        return False
    original = compiler.get_compile_options
    compiler.get_compile_options = cheap_codegen(original)
    try:  # compiled with little effort (set above): through the wrapper
        jax.jit(lambda x: x + 1).lower(1.0).compile()
    except Exception:  # noqa: BLE001 - an unknown option or a changed signature: no speed-up
        compiler.get_compile_options = original
        return False
    return True


CHEAP_CODEGEN = _install_cheap_codegen()
#: the processes the tests start compile with little effort throughout (the variable above),
#: so they get the cheap code generator through ``XLA_FLAGS`` (read when their XLA starts;
#: this process's XLA has started, so the variable does not reach it)
CHILD_XLA_FLAGS = CHILD_FLAG if CHEAP_CODEGEN else ""
if CHILD_XLA_FLAGS and CHILD_XLA_FLAGS not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {CHILD_XLA_FLAGS}".strip()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "optimized: compile fully optimised, as a user's program is (the suite compiles with "
        "little effort otherwise: tests/conftest.py)",
    )


def _effort_as_marked(request: pytest.FixtureRequest) -> None:
    set_compile_effort(request.node.get_closest_marker("optimized") is None)


#: a module's own fixtures compile as the module's mark says (autouse fixtures come first
#: within their scope), and each test as its own mark says (switching only on a change)
_module_compile_effort = pytest.fixture(autouse=True, scope="module")(_effort_as_marked)
_compile_effort = pytest.fixture(autouse=True)(_effort_as_marked)


# ------------------------------------------------------------------ the order of the files
#: The costliest test files, costliest first (seconds on the 2-core CPU, measured with
#: ``--durations``): they run first, so that the workers of ``make test`` end together
#: instead of one running a long file alone at the end (xdist by default starts the files
#: with the most tests first, which put the one-test 200-second file last).
COSTLIEST_FIRST = (
    "tests/typing/test_typing.py",
    "tests/parallel/test_parallel.py",
    "tests/test_generated_programs.py",
    "tests/train/test_transformer_example.py",
    "tests/bench/test_bench_structure.py",
    "tests/test_docs_blocks.py",
    "tests/train/test_fit.py",
    "tests/ops/test_op_table.py",
    "tests/train/test_examples.py",
    "tests/ops/test_add_an_op.py",
    "tests/bench/test_bench_harness.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The costliest files first (in :data:`COSTLIEST_FIRST`'s order), the rest as
    collected; a file's tests stay together and in their order."""
    rank = {name: i for i, name in enumerate(COSTLIEST_FIRST)}

    def file_rank(item: pytest.Item) -> int:
        path = Path(item.path)
        name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
        return rank.get(name, len(rank))

    items.sort(key=file_rank)  # stable: the rest keep their order


# ------------------------------------------------------------------ optional tools
def in_ci() -> bool:
    """Whether ``$CI`` says this is a CI run (``true``, ``1``, ...; not ``false``/``0``)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@overload
def requires(
    name: str, *, extra: str | None = ..., program: Literal[False] = ...
) -> ModuleType: ...
@overload
def requires(name: str, *, extra: str | None = ..., program: Literal[True]) -> str: ...
def requires(name: str, *, extra: str | None = "test", program: bool = False) -> str | ModuleType:
    """The module ``name`` (or, with ``program=True``, the path of the executable ``name``,
    looked up beside the running Python, then on ``PATH``) for a test that needs a tool
    from an extra. Where it is missing the test skips, saying which extra installs it;
    under ``CI`` (which installs every extra) it fails instead, so CI never skips the
    typing tests silently. ``extra=None``: a tool that no extra installs (torch and
    transformers, for the fixtures of ``axjax.models``): the test is optional everywhere and
    skips in CI too. Works at module level too.

    Example:
        >>> mypy_api = requires("mypy.api")             # module-level or in a test
        >>> pyright = requires("pyright", extra="dev", program=True)
        >>> transformers = requires("transformers", extra=None)   # skips in CI too
    """
    if program:
        here = str(Path(sys.executable).parent)
        found = shutil.which(name, path=here) or shutil.which(name)
        if found is not None:
            return found
        why = f"the program {name!r} is not installed"
    else:
        try:
            return importlib.import_module(name)
        except ImportError as e:
            why = f"{name} is not installed ({e})"
    if extra is None:
        top = name.split(".")[0]
        pytest.skip(
            f"{why}: pip install {top} (no extra installs it: optional, in CI too)",
            allow_module_level=True,
        )
    where = f'pip install -e ".[{extra}]"'
    if in_ci():
        pytest.fail(f"{why}: {where}; CI installs every extra, so this fails", pytrace=False)
    pytest.skip(f"{why}: {where}", allow_module_level=True)


# ------------------------------------------------------------------ fixtures and data
@pytest.fixture
def key() -> jax.Array:
    return jax.random.key(0)


def data_dir(name: str) -> Path:
    """``../shared/data/<name>`` or skip the test, saying where the files are expected."""
    env = os.environ.get("AXJAX_TEST_DATA")
    base = Path(env) if env else SHARED_DATA
    path = base / name
    if not path.is_dir():
        pytest.skip(f"real {name} IDX files not found at {path} (set AXJAX_TEST_DATA)")
    return path


# ------------------------------------------------------------------ summaries of a run
#: what tests reported with ``record_property("summary", text)``, printed after the run
_SUMMARIES: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect the ``summary`` properties of the tests that ran. Under pytest-xdist the
    controller receives every worker's reports (with their properties) and collects them
    here, so the lines reach the terminal whether or not the suite runs in workers."""
    if report.when == "call":
        _SUMMARIES.extend(str(v) for k, v in report.user_properties if k == "summary")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for text in _SUMMARIES:
        terminalreporter.write_line(text)
