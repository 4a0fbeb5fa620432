"""A mistake made at a public call is reported by that call, with the argument at fault.

Every layer of the layer registry and every public function of ``ax``, ``ax.nn`` and
``ax.train`` that takes Tensors (found by introspection; op functions name their op
already) has a valid call in ``FIXTURES`` below. Each of its Tensor arguments is then
given a wrong dtype and wrong axes (a mask or labels: a float one), and the error must be
axjax's own, its first line naming the callable and the argument, and no public call inside
it (core/_calls.py: the call context). A new public function taking Tensors without a fixture fails
:func:`test_every_callable_has_a_fixture`; :func:`test_the_check_fails_without_the_context`
is the mutation: the call context switched off makes the generated check fail.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, final

import jax
import pytest

import axjax as ax
from axjax.core import _calls
from axjax.core._internal import NAMED, declared_ops
from axjax.nn._registry import declared_layers

AXJAX_DIR = str(Path(ax.__file__).parent)
KEY = jax.random.key(0)


@final
class B(ax.Axis): ...


@final
class T(ax.Axis): ...


@final
class E(ax.Axis): ...


@final
class C(ax.Axis): ...


@final
class H(ax.Axis): ...


@final
class W(ax.Axis): ...


@final
class Ch(ax.Axis): ...


@final
class Out(ax.Axis): ...


@final
class Hid(ax.Axis): ...


@final
class Z(ax.Axis): ...


STRAYS = tuple(type(f"Stray{i}", (ax.Axis,), {}) for i in range(6))

#: what an argument is: ``input`` (read by axis: wrong axes are an error), ``any-axes`` (an
#: elementwise input: only its dtype is probed), ``any-dtype`` (the sequence of a fold: the
#: user's function decides its dtype, so only its axes are probed), ``mask`` (Bool),
#: ``labels`` / ``ids`` (integers)
Role = Literal["input", "any-axes", "any-dtype", "mask", "labels", "ids"]


@dataclasses.dataclass(frozen=True)
class Fixture:
    """``call(**args)`` is valid; ``roles`` says how each Tensor argument is probed."""

    call: Callable[..., Any]
    args: Callable[[], dict[str, Any]]
    roles: dict[str, Role]
    #: the probes that are valid calls of this callable (``"x: dtype Bool"``)
    accepts: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Exempt:
    reason: str


def ones(*axes_sizes: tuple[type[ax.Axis], int], dtype: Any = ax.F32) -> Any:
    return ax.ones(tuple(n for _, n in axes_sizes), *(a for a, _ in axes_sizes), dtype=dtype)


def image() -> Any:
    return ones((B, 2), (Ch, 2), (H, 4), (W, 4))


def cell_args(state: Any) -> Callable[[], dict[str, Any]]:
    return lambda: {"state": state(), "x": ones((B, 2), (E, 3))}


def layer(make: Callable[[], Any], *positional: str) -> Callable[..., Any]:
    """A call of the layer ``make()`` builds (``positional``: arguments passed by position);
    the probes run it abstractly (:func:`abstractly`), so building it costs nothing."""

    def call(**kw: Any) -> Any:
        args = [kw.pop(n) for n in positional]
        return make()(*args, **kw)

    return call


def abstractly(call: Callable[..., Any], kw: dict[str, Any]) -> Any:
    """``call(**kw)`` traced without computing (``jax.eval_shape``): the checks run as they
    do in a jitted step, and no op is compiled for each probe's shapes."""
    return jax.eval_shape(lambda kw: call(**kw), kw)


def _tree_cell() -> Any:
    return ax.nn.ChildSumTreeLSTMCell(E, Hid, 3, 2, key=KEY)


def _tree_args() -> dict[str, Any]:
    h = ones((B, 2), (ax.nn.Child, 2), (Hid, 2))
    return {
        "children": (h, h),
        "x": ones((B, 2), (E, 3)),
        "mask": ones((B, 2), (ax.nn.Child, 2), dtype=ax.Bool),
    }


def fixtures() -> dict[str, Fixture | Exempt]:
    nn = ax.nn
    mha = lambda: nn.MultiheadAttention(E, 4, num_heads=2, query_pos=T, key=KEY)  # noqa: E731
    seq = lambda: ones((B, 2), (T, 3), (E, 3))  # noqa: E731
    rnn = lambda: nn.GRUCell(E, Hid, 3, 2, key=KEY)  # noqa: E731
    stack = lambda: nn.LayerStack.init(lambda k: nn.LayerNorm(E, 3), 2, key=KEY)  # noqa: E731
    ensemble = lambda: nn.Ensemble.init(lambda k: nn.LayerNorm(E, 3), 2, key=KEY)  # noqa: E731
    x = lambda: {"x": ones((B, 2), (E, 3))}  # noqa: E731
    img = lambda: {"x": image()}  # noqa: E731
    qkv = lambda: {  # noqa: E731
        "query": ones((B, 2), (T, 3), (E, 4)),
        "key": ones((B, 2), (nn.KeyOfAnyQuery, 3), (E, 4)),
        "value": ones((B, 2), (nn.KeyOfAnyQuery, 3), (E, 4)),
        "mask": ones((T, 3), (nn.KeyOfAnyQuery, 3), dtype=ax.Bool),
    }
    inp: Role = "input"
    free: Role = "any-axes"
    table: dict[str, Fixture | Exempt] = {
        # ------------------------------------------------------------------ layers
        "Dropout": Fixture(  # any dtype: in inference a Dropout is the identity
            layer(lambda: nn.Dropout(0.5, inference=True)), x, {"x": free}, ("x: dtype Bool",)
        ),
        "MultiheadAttention": Fixture(
            layer(mha),
            lambda: {
                "query": ones((B, 2), (T, 3), (E, 4)),
                "mask": ones((T, 3), (ax.KeyOf[T], 3), dtype=ax.Bool),
            },
            {"query": inp, "mask": "mask"},
        ),
        "GroupedQueryAttention": Fixture(
            layer(
                lambda: nn.GroupedQueryAttention(
                    E, 4, num_heads=2, num_kv_heads=1, query_pos=T, key=KEY
                )
            ),
            lambda: {
                "x": ones((B, 2), (T, 3), (E, 4)),
                "mask": ones((T, 3), (ax.KeyOf[T], 3), dtype=ax.Bool),
            },
            {"x": inp, "mask": "mask"},
        ),
        "SwiGLU": Fixture(layer(lambda: nn.SwiGLU(E, 3, Hid, 2, key=KEY)), x, {"x": inp}),
        "Conv": Fixture(layer(lambda: nn.Conv((H, W), Ch, Out, 2, 3, 2, key=KEY)), img, {"x": inp}),
        "Conv1D": Fixture(layer(lambda: nn.Conv1D(W, Ch, Out, 2, 3, 2, key=KEY)), img, {"x": inp}),
        "Conv2D": Fixture(
            layer(lambda: nn.Conv2D((H, W), Ch, Out, 2, 3, 2, key=KEY)), img, {"x": inp}
        ),
        "Conv3D": Fixture(
            layer(lambda: nn.Conv3D((T, H, W), Ch, Out, 2, 3, 2, key=KEY)),
            lambda: {"x": ones((B, 1), (Ch, 2), (T, 3), (H, 3), (W, 3))},
            {"x": inp},
        ),
        "Embedding": Fixture(
            layer(lambda: nn.Embedding(C, E, 5, 3, key=KEY)),
            lambda: {"ids": ax.tensor([1, 2], B, dtype=ax.I32)},
            {"ids": "ids"},
            ("ids: stray axes",),  # ids have any axes: the result has them and Embed
        ),
        "Affine": Fixture(layer(lambda: nn.Affine(E, Out, 3, 2, key=KEY)), x, {"x": inp}),
        "Linear": Fixture(layer(lambda: nn.Linear(E, Out, 3, 2, key=KEY)), x, {"x": inp}),
        "LoRA": Fixture(
            layer(lambda: nn.LoRA(nn.Linear(E, Out, 3, 2, key=KEY), rank=2, key=KEY)),
            x,
            {"x": inp},
        ),
        "MLP": Fixture(
            layer(lambda: nn.MLP(E, Out, 3, 2, hidden={Hid: 4}, key=KEY)), x, {"x": inp}
        ),
        "LayerNorm": Fixture(layer(lambda: nn.LayerNorm(E, 3)), x, {"x": inp}),
        "RMSNorm": Fixture(layer(lambda: nn.RMSNorm(E, 3)), x, {"x": inp}),
        "MaxPool": Fixture(layer(lambda: nn.MaxPool((H, W), 2)), img, {"x": inp}),
        "AvgPool": Fixture(layer(lambda: nn.AvgPool((H, W), 2)), img, {"x": inp}),
        "MaxPool1D": Fixture(layer(lambda: nn.MaxPool1D(W, 2)), img, {"x": inp}),
        "MaxPool2D": Fixture(layer(lambda: nn.MaxPool2D((H, W), 2)), img, {"x": inp}),
        "AvgPool1D": Fixture(layer(lambda: nn.AvgPool1D(W, 2)), img, {"x": inp}),
        "AvgPool2D": Fixture(layer(lambda: nn.AvgPool2D((H, W), 2)), img, {"x": inp}),
        "GlobalMaxPool": Fixture(  # the max of Bools is their "any"
            layer(lambda: nn.GlobalMaxPool((H, W))), img, {"x": inp}, ("x: dtype Bool",)
        ),
        "GlobalAvgPool": Fixture(layer(lambda: nn.GlobalAvgPool((H, W))), img, {"x": inp}),
        "RNNCell": Fixture(
            layer(lambda: nn.RNNCell(E, Hid, 3, 2, key=KEY)),
            cell_args(lambda: ones((B, 2), (Hid, 2))),
            {"state": inp, "x": inp},
        ),
        "GRUCell": Fixture(
            layer(rnn), cell_args(lambda: ones((B, 2), (Hid, 2))), {"state": inp, "x": inp}
        ),
        "LSTMCell": Fixture(
            layer(lambda: nn.LSTMCell(E, Hid, 3, 2, key=KEY)),
            cell_args(lambda: (ones((B, 2), (Hid, 2)), ones((B, 2), (Hid, 2)))),
            {"state": inp, "x": inp},
        ),
        "Remat": Fixture(layer(lambda: nn.remat(nn.Affine(E, Out, 3, 2, key=KEY))), x, {"x": inp}),
        "Recurrent": Fixture(
            layer(lambda: nn.Recurrent(rnn(), T)),
            lambda: {"xs": seq(), "mask": ones((B, 2), (T, 3), dtype=ax.Bool)},
            {"xs": inp, "mask": "mask"},
        ),
        "Bidirectional": Fixture(
            layer(lambda: nn.Bidirectional(rnn(), nn.GRUCell(E, Hid, 3, 2, key=KEY), T)),
            lambda: {"xs": seq(), "mask": ones((B, 2), (T, 3), dtype=ax.Bool)},
            {"xs": inp, "mask": "mask"},
        ),
        "Stacked": Fixture(
            layer(lambda: nn.Stacked([nn.Recurrent(rnn(), T)])),
            lambda: {"xs": seq(), "mask": ones((B, 2), (T, 3), dtype=ax.Bool)},
            {"xs": inp, "mask": "mask"},
        ),
        "Lambda": Fixture(layer(lambda: nn.Lambda(ax.relu)), x, {"x": free}),
        "Sequential": Fixture(
            layer(lambda: nn.Sequential([nn.Linear(E, Out, 3, 2, key=KEY), ax.relu])),
            x,
            {"x": inp},
        ),
        "LayerStack": Fixture(layer(stack, "x"), x, {"x": inp}),
        "Ensemble": Fixture(layer(ensemble, "x"), x, {"x": inp}),
        "ChildSumTreeLSTMCell": Fixture(
            layer(_tree_cell), _tree_args, {"children": inp, "x": inp, "mask": "mask"}
        ),
        # ------------------------------------------------------------------ functions
        "ax.nn.dot_product_attention": Fixture(
            lambda **kw: nn.dot_product_attention(**kw, over=E, key_pos=nn.KeyOfAnyQuery),
            qkv,
            {"query": inp, "key": inp, "value": inp, "mask": "mask"},
        ),
        "ax.nn.rotary_embedding": Fixture(
            lambda **kw: nn.rotary_embedding(**kw, pos=T, over=E),
            lambda: {"x": ones((B, 2), (T, 3), (E, 4))},
            {"x": inp},
        ),
        "ax.nn.attention_weights": Fixture(
            lambda **kw: nn.attention_weights(**kw, over=nn.KeyOfAnyQuery),
            lambda: {"scores": ones((B, 2), (T, 3), (nn.KeyOfAnyQuery, 3))},
            {"scores": inp},
        ),
        "ax.nn.segment_mask": Fixture(
            lambda **kw: nn.segment_mask(**kw, query_pos=T, key_pos=ax.KeyOf[T]),
            lambda: {"segments": ax.tensor([[1, 1, 2]], B, T, dtype=ax.I32)},
            {"segments": "ids"},
        ),
        "ax.nn.causal_mask": Exempt(
            "builds a mask from axes and sizes; its one Tensor argument is an optional traced "
            "offset (a KV cache's length): tests/nn/test_nn_generate.py"
        ),
        "ax.nn.generate": Exempt(
            "decodes with the user's model: a wrong prompt is that model's own call's error "
            "(tests/nn/test_nn_generate.py)"
        ),
        "ax.nn.identity": Fixture(nn.identity, x, {"x": free}, accepts=("x: dtype Bool",)),
        "ax.train.accuracy": Fixture(
            lambda **kw: ax.train.accuracy(**kw, axis=C),
            lambda: {"logits": ones((B, 2), (C, 3)), "labels": ax.tensor([0, 2], B)},
            {"logits": inp, "labels": "labels"},
            ("logits: dtype Bool",),  # the argmax of Bools is defined
        ),
        "ax.train.mean_squared_error": Fixture(
            ax.train.mean_squared_error,
            lambda: {"predictions": ones((B, 2), (C, 3)), "targets": ones((B, 2), (C, 3))},
            {"predictions": inp, "targets": inp},
        ),
        "ax.fold": Fixture(
            lambda **kw: ax.fold(lambda s, x: s + x, over=T)(**kw),
            lambda: {
                "init": ones((B, 2), (E, 3)),
                "xs": seq(),
                "mask": ones((B, 2), (T, 3), dtype=ax.Bool),
            },
            {"xs": "any-dtype", "mask": "mask"},
        ),
        "ax.scan": Fixture(
            lambda **kw: ax.scan(lambda s, x: s + x, over=T)(**kw),
            lambda: {
                "init": ones((B, 2), (E, 3)),
                "xs": seq(),
                "mask": ones((B, 2), (T, 3), dtype=ax.Bool),
            },
            {"xs": "any-dtype", "mask": "mask"},
        ),
        # ------------------------------------------------------------------ exempt
        "ax.all_gather": Exempt("a collective inside shard_map: tests/parallel/test_errors.py"),
        "ax.psum": Exempt("a collective inside shard_map: tests/parallel/test_errors.py"),
        "ax.pmean": Exempt("a collective inside shard_map: tests/parallel/test_errors.py"),
        "ax.compile": Exempt("takes graph Inputs, not data: tests/graph"),
        "ax.compile_step": Exempt("takes a graph's loss node, not data: tests/graph"),
        "ax.train.compile_step": Exempt("takes a graph's loss node, not data: tests/graph"),
        "ax.graph_grad": Exempt("takes a graph's loss node, not data: tests/graph"),
        "ax.grad": Exempt("a transform of the user's function: its errors are the function's"),
        "ax.value_and_grad": Exempt(
            "a transform of the user's function: its errors are the function's"
        ),
        "ax.tensor": Exempt("makes a Tensor from data: tests/core/test_bad_input_tensors.py"),
    }
    for name in ("elu", "leaky_relu", "log_sigmoid"):
        table[f"ax.nn.{name}"] = Fixture(getattr(nn, name), x, {"x": free})
    return table


# ----------------------------------------------------------------------------- enumeration
def public_functions() -> list[str]:
    """Public non-op functions of ax, ax.nn, ax.train with a Tensor parameter, plus the call
    objects of ax.fold / ax.scan (their masks)."""
    spaces = {"axjax": ax, "axjax.train": ax.train}
    ops = {id(getattr(spaces[s.namespace], f)) for s in declared_ops() for f in s.functions}
    found = ["ax.fold", "ax.scan"]
    for prefix, _module, ns in (
        ("ax", "axjax", ax),
        ("ax.nn", "axjax.nn", ax.nn),
        ("ax.train", "axjax.train", ax.train),
    ):
        for name in sorted(dir(ns)):
            fn = getattr(ns, name)
            if name.startswith("_") or not inspect.isfunction(fn) or id(fn) in ops:
                continue
            params = inspect.signature(fn).parameters.values()
            if any(re.search(r"\bTensor\[|AnyTensor", str(p.annotation)) for p in params):
                found.append(f"{prefix}.{name}")
    return found


def callables() -> list[str]:
    return [s.name for s in declared_layers()] + public_functions()


# ----------------------------------------------------------------------------- probes
def wrong_dtypes(role: Role) -> tuple[Any, ...]:
    """The dtypes that must be refused for an argument of ``role``."""
    return {"mask": (ax.F32,), "labels": (ax.F32,), "ids": (ax.F32,)}.get(role, (ax.Bool,))


def _retyped(value: Any, change: Callable[[Any], Any]) -> Any:
    if isinstance(value, tuple):
        return tuple(change(v) for v in value)
    return change(value)


def probes(args: dict[str, Any], roles: dict[str, Role]) -> Iterator[tuple[str, str, dict]]:
    """``(argument, what, arguments)`` for each wrong call."""
    for name, role in roles.items():
        for dtype in () if role == "any-dtype" else wrong_dtypes(role):
            bad = _retyped(args[name], lambda t, d=dtype: ax.astype(t, d))
            yield name, f"dtype {dtype.__name__}", {**args, name: bad}
        if role != "any-axes":

            def stray(t: Any) -> Any:
                return ax.tensor(t.array, *STRAYS[: len(t.axes)], dtype=t.dtype)

            yield name, "stray axes", {**args, name: _retyped(args[name], stray)}


def inner_names(entry: str, given: tuple[str, ...] = ()) -> set[str]:
    """Every public call's name but the entry point's and those of the objects the user
    gave it (a model's class may be named: the user passed it): what a first line must not
    name (core/_calls.py names the outermost call; tests/core/test_entry_points.py)."""
    names = {n for n in NAMED.values() if not n.startswith("<")}
    names |= {s.name for s in declared_layers()} | {"init_cache", "KVCache.positions"}
    names |= {"GPT2", "Llama", "Block", "KVCache", "Transpose"}
    return names - {entry, *given}


def names_inner(entry: str, first: str, given: tuple[str, ...] = ()) -> list[str]:
    """The inner calls a first line names (case-sensitive, as whole words)."""
    inner = inner_names(entry, given)
    return sorted(n for n in inner if re.search(rf"\b{re.escape(n)}\b", first))


def _from_axjax(error: BaseException) -> bool:
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and frames[-1].filename.startswith(AXJAX_DIR)


def check(name: str, fixture: Fixture) -> list[str]:
    """The problems of one callable: a wrong call accepted, a raw error, a first line that
    does not name the callable and the argument."""
    short = name.rsplit(".", 1)[-1]
    problems = []
    try:
        abstractly(fixture.call, fixture.args())  # the baseline is valid
    except Exception as e:
        return [f"{name}: the valid call raised {type(e).__name__}: {e}"]
    for arg, what, kw in probes(fixture.args(), fixture.roles):
        label = f"{name}({arg}: {what})"
        try:
            abstractly(fixture.call, kw)
        except (ax.AxisError, TypeError, ValueError) as e:
            first = str(e).split("\n", 1)[0]
            if not _from_axjax(e):
                problems.append(f"{label}: a raw {type(e).__name__}: {first}")
            elif not re.search(rf"\b{re.escape(short)}\b", first):
                problems.append(f"{label}: the first line does not name {short}: {first}")
            elif not re.search(rf"\b{re.escape(arg)}\b", first):
                problems.append(f"{label}: the first line does not name {arg}: {first}")
            elif inner := names_inner(short, first):
                problems.append(f"{label}: the first line names the inner call {inner}: {first}")
        else:
            if f"{arg}: {what}" not in fixture.accepts:
                problems.append(f"{label}: accepted")
    return problems


TIMES: dict[str, float] = {}


def run_all(names: list[str] | None = None) -> list[str]:
    table = fixtures()
    problems = []
    for name in names or callables():
        fixture = table[name]
        if isinstance(fixture, Fixture):
            start = time.perf_counter()
            problems += check(name, fixture)
            TIMES[name] = time.perf_counter() - start
    return problems


# ----------------------------------------------------------------------------- tests
def test_every_callable_has_a_fixture() -> None:
    table = fixtures()
    missing = sorted(set(callables()) - set(table))
    assert not missing, f"public callables taking Tensors without a fixture: {missing}"
    stale = sorted(set(table) - set(callables()))
    assert not stale, f"fixtures of no public callable: {stale}"


def test_every_error_names_the_public_call_and_the_argument() -> None:
    problems = run_all()
    assert not problems, "\n".join(problems)


def test_the_check_fails_without_the_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation: the call context naming nothing makes the generated check fail, for the
    layers and the functions alike."""
    monkeypatch.setattr(_calls, "name_error", lambda *a, **k: None)
    problems = run_all()
    print(f"\nwith the call context off: {len(problems)} problems")
    unnamed = [p for p in problems if "does not name" in p]
    assert len(unnamed) >= 30, problems
    assert any(p.startswith("MultiheadAttention(mask") for p in unnamed), unnamed
    assert any(p.startswith("ax.fold(mask") for p in unnamed), unnamed


def test_inner_detail_stays_below_the_first_line() -> None:
    mha = ax.nn.MultiheadAttention(E, 4, num_heads=2, query_pos=T, key=KEY)
    with pytest.raises(ax.AxisError) as info:
        mha(ax.ones((3, 4), T, E, dtype=ax.BF16))
    first, rest = str(info.value).split("\n", 1)
    assert first.startswith("Cannot apply MultiheadAttention to query=Tensor[BF16, T=3, E=4]")
    assert "inside: Cannot apply Contract(over=E)" in rest


# ----------------------------------------------------------------------------- the quoted examples
def _mha_mask() -> Any:
    mha = ax.nn.MultiheadAttention(E, 4, num_heads=2, query_pos=T, key=KEY)
    return mha(ax.ones((3, 4), T, E), mask=ax.ones((3, 3), T, ax.KeyOf[T]))


def _fold_float_mask() -> Any:
    xs = ax.ones((2, 3), B, T)
    return ax.fold(lambda s, x: s + x, over=T)(ax.zeros((2,), B), xs, mask=ax.ones((2, 3), B, T))


@pytest.mark.parametrize(
    "make, error, first",
    [
        (
            _mha_mask,
            ax.AxisError,
            "Cannot apply MultiheadAttention to mask=Tensor[F32, T=3, KeyOf[T]=3]: the mask must "
            "be Bool (true = keep), got F32 (make one with a comparison, e.g. m > 0, or "
            "astype(ax.Bool))",
        ),
        (
            lambda: ax.train.accuracy(ax.ones((2, 3), B, C), ax.tensor([0, 1, 2], B), C),
            ax.AxisError,
            "Cannot apply accuracy to labels=Tensor[I32, B=3]: the labels have 3 entries along "
            "B, the logits 2 (one label per example)",
        ),
        (
            _fold_float_mask,
            ax.AxisError,
            "Cannot apply fold to mask=Tensor[F32, B=2, T=3]: the mask must be Bool (true = "
            "keep), got F32",
        ),
        (
            lambda: ax.train.mean_squared_error(
                ax.ones((2, 3), B, C), ax.ones((2, 3), B, C), over="Batch"
            ),
            TypeError,
            "mean_squared_error: over: 'Batch' is not an axis label but a string: pass the "
            "axis class itself",
        ),
    ],
)
def test_quoted_examples(make: Callable[[], Any], error: type[Exception], first: str) -> None:
    with pytest.raises(error) as info:
        make()
    assert str(info.value).split("\n", 1)[0].startswith(first), str(info.value)


def test_check_axes_checks_each_of_star_args() -> None:
    @ax.check_axes
    def first(*xs: ax.Tensor[ax.F32, B]) -> ax.Tensor[ax.F32, B]:
        return xs[0]

    assert first(ax.ones((2,), B), ax.ones((2,), B)).axes == (B,)  # a correct call passes
    with pytest.raises(ax.AxisError, match=r"argument xs\[1\] should be Tensor\[F32, B\], but"):
        first(ax.ones((2,), B), ax.ones((2,), C))
    with pytest.raises(ax.AxisError, match=r"B has size 2 in argument xs\[0\] and 3 at axis 0"):
        first(ax.ones((2,), B), ax.ones((3,), B))
