"""What a training step compiles to: op counts, host transfers, retraces (no timing).

Axis names must cost nothing once traced, so the axjax step should lower to no more ops
than the hand-written one. These helpers count the ops of a lowered step twice: in the
StableHLO that JAX emits (what axjax's ops produce) and in the HLO that XLA compiles
(what runs). The test suite turns them into guards (``tests/bench``); the report prints
them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

import jax
import numpy as np

from ._common import load_mnist

__all__ = [
    "ALLOWANCE",
    "AttentionCensus",
    "COST_KINDS",
    "HOST_MARKERS",
    "KIND_ALLOWANCE",
    "MUTATIONS",
    "allowed",
    "compiled_ops",
    "cost_kinds",
    "custom_calls",
    "host_transfers",
    "kind_excess",
    "mutation",
    "on_cpu",
    "pretend_cuda",
    "score_census",
    "step_structure",
    "stablehlo_ops",
    "structure_table",
]

#: how many ops the axjax step may have beyond the hand-written one: 2 % plus 4. An op's
#: own backward may take a different form (``select`` against ``multiply`` by a mask) and
#: a constant more or less is harmless; anything beyond this is a real extra cost.
ALLOWANCE = (0.02, 4)

#: text that marks a transfer between host and device inside compiled code
HOST_MARKERS = (
    "callback",
    "infeed",
    "outfeed",
    "send(",
    "recv(",
    "send-done",
    "recv-done",
    "host_compute",
    "MoveToHost",
    "MoveToDevice",
)

_STABLEHLO = re.compile(r"=\s*\"?((?:stablehlo|chlo|mhlo)\.[a-z_]+|func\.call|call)\b")
_FUSION = re.compile(r"\sfusion\(.*?\bkind=(k\w+)")
_HLO = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][a-z\-]*)\(")


@contextlib.contextmanager
def on_cpu() -> Iterator[None]:
    """Build, lower and compile on the CPU inside this block, whatever the default backend.

    The counts of compiled kinds and their allowances were measured on XLA:CPU; XLA:GPU
    fuses and lays out differently (matrix products become custom fusions, layout
    assignment absorbs transposes), so every structural guard compiles for the CPU. Arrays
    created inside land on the CPU, and ``jax.jit`` places and compiles for it.
    """
    with jax.default_device(jax.devices("cpu")[0]):
        yield


def stablehlo_ops(text: str) -> Counter[str]:
    """Op name -> count in StableHLO text (``lowered.as_text()``)."""
    return Counter(m.group(1) for m in _STABLEHLO.finditer(text))


def compiled_ops(text: str) -> Counter[str]:
    """Instruction name -> count in compiled HLO text (every computation, fusions too)."""
    out: Counter[str] = Counter()
    for line in text.splitlines():
        m = _HLO.match(line)
        if m:
            out[m.group(1)] += 1
    return out


#: what a compiled step spends its time on, counted per kind (:func:`cost_kinds`)
COST_KINDS = (
    "dot",
    "convolution",
    "transpose",
    "copy",
    "gather",
    "scatter",
    "while",
    "fusion kLoop",
    "fusion kInput",
    "fusion kOutput",
    "fusion kCustom",
)

#: how many more of a kind an axjax step may have than the expert baseline, and why. Each
#: entry is a documented difference of lowering that measures no slower; anything beyond
#: is a guard failure (``tests/bench/test_bench_structure.py``).
KIND_ALLOWANCE: dict[str, dict[str, int]] = {
    # softmax_cross_entropy picks each label's logit with one gather (take_along_axis);
    # the expert's one-hot form multiplies instead. Its backward is softmax - onehot:
    # no scatter (the integer-label expert has a gather and a scatter).
    "*": {"gather": 1},
    # MultiheadAttention: no allowance. Its scores are laid out as dot_general makes them,
    # [Batch, Head, Time, KeyPos] (nn/_attention_kernels.py: _score_layout): fewer transposes and
    # copies than the expert's einsums; the StableHLO census (score_census) sees to it that
    # no transpose ever touches the position-by-position scores.
}


def cost_kinds(text: str) -> Counter[str]:
    """Per kind of :data:`COST_KINDS`, how many instructions compiled HLO text has
    (every computation, fusion bodies too; a fusion counted by its ``kind=``)."""
    ops = compiled_ops(text)
    out: Counter[str] = Counter({k: ops[k] for k in COST_KINDS if ops[k]})
    for m in _FUSION.finditer(text):
        out[f"fusion {m.group(1)}"] += 1
    return out


def kind_excess(got: Counter[str], ref: Counter[str], model: str) -> dict[str, tuple[int, int]]:
    """``{kind: (got, allowed)}`` for each kind where an axjax step has more than the
    expert step ``ref`` plus :data:`KIND_ALLOWANCE` (empty: the guard passes)."""
    extra = KIND_ALLOWANCE["*"] | KIND_ALLOWANCE.get(model, {})
    out = {}
    for kind in COST_KINDS:
        allowed_n = ref[kind] + extra.get(kind, 0)
        if got[kind] > allowed_n:
            out[kind] = (got[kind], allowed_n)
    return out


def host_transfers(text: str) -> list[str]:
    """The lines of compiled HLO text that move data between host and device."""
    return [
        ln.strip()[:160] for ln in text.splitlines() if any(mark in ln for mark in HOST_MARKERS)
    ]


def allowed(reference: int) -> int:
    """The most ops an axjax step may have where the hand-written one has ``reference``."""
    rel, absolute = ALLOWANCE
    return int(reference * (1 + rel)) + absolute


def step_structure(
    model: ModuleType, frameworks: tuple[str, ...] = ("jax", "axjax", "graph")
) -> dict[str, dict[str, Any]]:
    """Lower and compile each framework's step of ``model`` on one batch; count its ops.

    Returns ``{framework: {"stablehlo": n, "compiled": n, "host": [lines], "texts": ...}}``.
    """
    with on_cpu():
        return _step_structure(model, frameworks)


def _step_structure(model: ModuleType, frameworks: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    data = load_mnist()
    idx = data.batches(seed=1, count=1)[0]
    params = model.init(0)
    out: dict[str, dict[str, Any]] = {}
    for fw in frameworks:
        runner = getattr(model, f"build_{fw.replace('-', '_')}")(params)
        assert runner.lowered is not None, f"{fw} has no lowering"
        x, y = runner.put(np.asarray(data.images[idx]), np.asarray(data.labels[idx]))
        lowered = runner.lowered(x, y)
        hlo = lowered.compile().as_text()
        shlo = lowered.as_text()
        out[fw] = {
            "stablehlo": sum(stablehlo_ops(shlo).values()),
            "compiled": sum(compiled_ops(hlo).values()),
            "kinds": cost_kinds(hlo),
            "host": host_transfers(hlo),
            "texts": (shlo, hlo),
        }
    return out


def structure_table(models: Sequence[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{model: {framework: {"stablehlo": n, "compiled": n, "kinds": {kind: n}, "host": k}}}``
    for the report: the three baselines, axjax modules, the graph and ``fit``'s step."""
    from .models import MODELS

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in models:
        model = MODELS[name]
        fws = tuple(
            fw for fw in ("jax", "expert", "expert-int", "axjax", "graph", "fit") if _has(model, fw)
        )
        counts = step_structure(model, fws)
        out[name] = {
            fw: {
                "stablehlo": c["stablehlo"],
                "compiled": c["compiled"],
                "kinds": dict(c["kinds"]),
                "host": len(c["host"]),
            }
            for fw, c in counts.items()
        }
    return out


def _has(model: ModuleType, fw: str) -> bool:
    return getattr(model, f"build_{fw.replace('-', '_')}", None) is not None


# ----------------------------------------------------------------------------- mutations
def _einsum_dot(
    x: Any, x_axes: tuple[Any, ...], y: Any, y_axes: tuple[Any, ...], out: tuple[Any, ...]
) -> Any:
    """``x ⋈ y`` through ``jnp.einsum`` (the lowering before ``contract`` had its own)."""
    import jax.numpy as jnp

    letters = {a: chr(97 + i) for i, a in enumerate(dict.fromkeys(x_axes + y_axes))}

    def sub(axes: tuple[Any, ...]) -> str:
        return "".join(letters[a] for a in axes)

    return jnp.einsum(f"{sub(x_axes)},{sub(y_axes)}->{sub(out)}", x, y)


@contextlib.contextmanager
def mutation(kind: str) -> Iterator[None]:
    """Trace axjax steps inside this block with a deliberately slower lowering, to prove
    that the guards catch it:

    - ``"einsum"``: every contraction through ``jnp.einsum``;
    - ``"transpose"``: every contraction computed in the other operand order, then
      transposed to the order wanted (an extra transpose per product);
    - ``"no custom backward"``: JAX's autodiff of each op's forward instead of the op's
      own backward (``ax.jax_autodiff()``).
    """
    import jax.numpy as jnp

    import axjax as ax
    from axjax.ops import _contract

    if kind not in MUTATIONS:
        raise ValueError(f"unknown mutation {kind!r} (choose from {', '.join(MUTATIONS)})")
    if kind == "no custom backward":
        with ax.jax_autodiff():
            yield
        return
    original = _contract.dot

    def transposed(
        x: Any, x_axes: tuple[Any, ...], y: Any, y_axes: tuple[Any, ...], out: tuple[Any, ...]
    ) -> Any:
        batch = [a for a in out if a in x_axes and a in y_axes]
        other = tuple(
            batch
            + [a for a in out if a in y_axes and a not in batch]
            + [a for a in out if a in x_axes and a not in y_axes]
        )
        z = original(x, x_axes, y, y_axes, other)
        return jnp.transpose(z, [other.index(a) for a in out])

    _contract.dot = _einsum_dot if kind == "einsum" else transposed  # type: ignore[assignment]
    try:
        yield
    finally:
        _contract.dot = original  # type: ignore[assignment]


MUTATIONS = ("einsum", "transpose", "no custom backward")


# ----------------------------------------------------------------------------- attention scores
_TENSOR = re.compile(r"tensor<((?:\d+x)*)([a-z]\w*)>")
_OP = re.compile(r"=\s*\"?((?:stablehlo|chlo|mhlo)\.[a-z_]+)")
_DIMS = re.compile(r"batching_dims\s*=\s*\[([^\]]*)\]\s*x\s*\[([^\]]*)\]")
_CALL = re.compile(r"custom_call\s*@([\w$.]+)")


def _types(text: str) -> list[tuple[tuple[int, ...], str]]:
    """``(shape, dtype)`` of each ``tensor<...>`` type in ``text``, in order."""
    return [
        (tuple(int(n) for n in dims.split("x") if n), dtype)
        for dims, dtype in _TENSOR.findall(text)
    ]


def _is_score(shape: tuple[int, ...], n_query: int, n_key: int) -> bool:
    """Whether a shape holds both position axes (query by key: the attention scores)."""
    if n_query == n_key:
        return shape.count(n_query) >= 2
    return n_query in shape and n_key in shape


@dataclasses.dataclass
class AttentionCensus:
    """The StableHLO ops of a step that touch the attention scores (tensors with a query
    position axis and a key position axis), from :func:`score_census`."""

    #: ``"op:dtype"`` -> count, per op whose result is score-shaped
    ops: Counter[str]
    #: the ``transpose`` lines with a score-shaped operand or result
    transposes: list[str]
    #: the ``dot_general`` lines with a score-shaped operand
    dots: list[str]
    #: those of ``dots`` whose score-shaped operand's batch dimensions are not its leading
    #: ones (a batched product that wants a transposed copy first, or a strided one)
    non_leading: list[str]
    #: how many lines hold a score-shaped tensor type at all (operands, results, arguments)
    lines: int

    @property
    def total(self) -> int:
        """How many ops produce a score-shaped tensor."""
        return sum(self.ops.values())


def score_census(text: str, n_query: int, n_key: int) -> AttentionCensus:
    """The ops of StableHLO ``text`` that touch tensors with both position sizes (choose a
    context length that no other size of the model shares).

    Example:
        >>> c = score_census(jitted.trace(*args).lower().as_text(), 24, 24)
        >>> c.transposes, c.non_leading  # [] and [] for the expert's attention
    """
    ops: Counter[str] = Counter()
    transposes, dots, non_leading = [], [], []
    lines = 0
    for line in text.splitlines():
        lines += any(_is_score(t, n_query, n_key) for t, _ in _types(line))
        m = _OP.search(line)
        if m is None:
            continue
        name = m.group(1).split(".")[-1]
        result = line.rsplit("->", 1)[-1] if "->" in line else line.rsplit(":", 1)[-1]
        for shape, dtype in _types(result):
            if _is_score(shape, n_query, n_key):
                ops[f"{name}:{dtype}"] += 1
                break
        if name == "transpose" and any(_is_score(t, n_query, n_key) for t, _ in _types(line)):
            transposes.append(line.strip())
        if name == "dot_general":
            operands = line.rsplit("->", 1)[0].rsplit(":", 1)[-1]
            found = _DIMS.search(line)
            batching = [
                [int(n) for n in part.split(",") if n.strip()]
                for part in (found.groups() if found else ("", ""))
            ]
            scored = [
                i for i, (t, _) in enumerate(_types(operands)[:2]) if _is_score(t, n_query, n_key)
            ]
            if scored:
                dots.append(line.strip())
                if any(batching[i] != list(range(len(batching[i]))) for i in scored):
                    non_leading.append(line.strip())
    return AttentionCensus(ops, transposes, dots, non_leading, lines)


def custom_calls(text: str) -> Counter[str]:
    """``custom_call`` target -> count in StableHLO text (``__cudnn$fmhaSoftmax``, ...)."""
    return Counter(_CALL.findall(text))


#: JAX's private cuDNN queries that :func:`pretend_cuda` answers (``jax._src.cudnn.
#: fused_attention_stablehlo``): the cuDNN version, and compute capability at least / equal
_CUDNN_QUERIES = (
    "check_cudnn_version",
    "check_compute_capability",
    "is_cuda_compute_capability_equal",
)


@contextlib.contextmanager
def pretend_cuda(capability: str = "9.0", cudnn_version: int = 91000) -> Iterator[None]:
    """Trace as on an NVIDIA GPU, on any machine, to lower for CUDA
    (``jitted.trace(*args).lower(lowering_platforms=("cuda",))``): axjax's backend and
    compute-capability queries, and JAX's cuDNN version and capability checks, answer as a
    GPU of ``capability`` with cuDNN ``cudnn_version`` would. Nothing is compiled or run.

    JAX's queries are private names: where they are missing (another JAX version), this
    raises ``LookupError`` naming them, before changing anything.

    Example:
        >>> with pretend_cuda():
        ...     text = step.trace(*args).lower(lowering_platforms=("cuda",)).as_text()
        >>> custom_calls(text)["__cudnn$fmhaSoftmax"]
    """
    import importlib

    from axjax.nn import _attention_paths

    try:
        fa = importlib.import_module("jax._src.cudnn.fused_attention_stablehlo")
    except ImportError as e:
        raise LookupError(f"jax._src.cudnn.fused_attention_stablehlo is missing ({e})") from e
    missing = [n for n in _CUDNN_QUERIES if not hasattr(fa, n)]
    if missing:
        raise LookupError(f"JAX's cuDNN module lacks {', '.join(missing)}")
    want = tuple(int(n) for n in capability.split("."))
    answers: dict[tuple[Any, str], Any] = {
        (fa, "check_cudnn_version"): lambda: cudnn_version,
        (fa, "check_compute_capability"): (lambda c: want >= tuple(int(n) for n in c.split("."))),
        (fa, "is_cuda_compute_capability_equal"): (
            lambda c: want == tuple(int(n) for n in c.split("."))
        ),
        (_attention_paths, "_backend"): lambda: "gpu",
        (_attention_paths, "compute_capability"): lambda: capability,
    }
    saved = {key: getattr(*key) for key in answers}
    try:
        for (module, name), fn in answers.items():
            setattr(module, name, fn)
        yield
    finally:
        for (module, name), fn in saved.items():
            setattr(module, name, fn)
