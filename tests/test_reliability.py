"""The reliability classes of issue 43, each checked over every public call it reaches.

1. State handed back to a stateful call (an optimizer state, a KV cache, a model's weights
   after a donating step) is checked against what it was made for by one mechanism
   (core/_state.py): the error names the call and the argument, never JAX's or optax's
   internals. :func:`test_every_stateful_call_has_rows` enumerates the public calls that
   take state back (a parameter named ``opt_state`` or ``cache``, and those given a model
   a donating step may have deleted), so a new one fails until it has its rows.
2. Concrete ids are checked before a public call's jit boundary (``generate``, the
   models' calls, ``evaluate``): an id past the vocabulary, or negative, raises instead of
   being clamped.
3. A public entry point names itself and the argument at fault, never an inner call.
4. (tests/models/test_hf_contradictions.py: a key the configuration makes unused.)
5. Empty data is an error, not a NaN, in every reduction over data.

Each class has its mutation below: the mechanism switched off, the generated rows fail.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import axjax as ax
from axjax.models import gpt2, llama

#: the module (``ax.nn.generate`` is the function)
_generate = importlib.import_module("axjax.nn._generate")


Batch = ax.train.Batch


@final
class In(ax.Axis): ...


@final
class Out(ax.Axis): ...


class Tiny(eqx.Module):
    w: ax.Tensor[ax.F32, In, Out]

    def __call__(self, x: ax.Tensor[ax.F32, Batch, In]) -> ax.Tensor[ax.F32, Batch, Out]:
        return ax.contract(x, self.w, over=In)


def _loss(model: Tiny, x: Any, y: Any) -> Any:
    return ax.mean(ax.sum((model(x) - y) ** 2, over=Out), over=Batch)


def _tiny(n_out: int = 2, dtype: Any = jnp.float32) -> Tiny:
    return Tiny(ax.Tensor(jnp.ones((3, n_out), dtype), (In, Out)))


X = ax.Tensor(jnp.ones((4, 3)), (Batch, In))
Y = ax.Tensor(jnp.zeros((4, 2)), (Batch, Out))
ADAM = optax.adam(0.1)


def _gpt2() -> gpt2.GPT2:
    cfg = gpt2.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    return gpt2.GPT2(cfg, key=jax.random.key(0))


def _llama() -> llama.Llama:
    cfg = llama.LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1,
    )  # fmt: skip
    return llama.Llama(cfg, key=jax.random.key(0))


FAMILIES: dict[str, tuple[Callable[[], Any], type[ax.Axis]]] = {
    "GPT2": (_gpt2, gpt2.Pos),
    "Llama": (_llama, llama.Pos),
}


def _ids(family: str, rows: list[list[int]]) -> ax.Tensor[Any, Any, Any]:
    return ax.Tensor(jnp.asarray(rows, jnp.int32), (Batch, FAMILIES[family][1]))


def _donated(tree: Any) -> Any:
    """``tree`` after a donating call deleted its arrays (as a donating step does)."""
    out = jax.tree.map(jnp.copy, tree)
    for leaf in jax.tree.leaves(out):
        leaf.delete()
    return out


# ---------------------------------------------------------------- class 1: state
def _train_step(opt_state: Any = None, model: Any = None) -> Callable[[], Any]:
    return lambda: ax.train.TrainStep(model or _tiny(), ADAM, _loss, opt_state=opt_state)


def _raw_step(opt_state: Any = None, params: Any = None) -> Callable[[], Any]:
    p, static = eqx.partition(_tiny(), eqx.is_array)
    step = ax.train.make_train_step(_loss, ADAM, static, guard=False)
    mon = ax.train.Monitor.zero(("loss",), guarded=False)
    state = ADAM.init(p) if opt_state is None else opt_state
    return lambda: step(params or p, state, mon, (X, Y), jax.random.key(0), 0)


def _graph_step(opt_state: Any) -> Callable[[], Any]:
    x = ax.Input(ax.F32, Batch, In, name="x")
    w = ax.Param(ax.Tensor(jnp.ones(3), (In,)), name="w")
    step = ax.compile_step(ax.mean(ax.contract(x, w, over=In) ** 2, over=Batch), ADAM, inputs=[x])

    def run() -> Any:
        step.opt_state = opt_state(step.opt_state)
        return step(X)

    return run


def _cached(family: str) -> Callable[[], Any]:
    model = FAMILIES[family][0]()
    cache = model.init_cache({Batch: 1}, 8)
    return lambda: model(_ids(family, [[1, 2], [3, 4]]), cache=cache)


def _generate_donated(family: str) -> Callable[[], Any]:
    model = _donated(FAMILIES[family][0]())
    return lambda: ax.nn.generate(model, _ids(family, [[1, 2]]), 2, temperature=0)


def _load_lora_donated() -> Callable[[], Any]:
    model = _donated(_tiny())  # refused before the file is read
    return lambda: ax.nn.load_lora(model, "unused.safetensors")


def _load_peft_donated() -> Callable[[], Any]:
    model = _donated(FAMILIES["GPT2"][0]())  # refused before the folder is read
    return lambda: ax.models.load_peft(model, "unused")


_SGD = optax.sgd(0.1, momentum=0.9)
_OTHER_MODEL = ADAM.init(_tiny(5))
_OTHER_DTYPE = ADAM.init(_tiny(dtype=jnp.bfloat16))

#: (call, argument, what is wrong, the call that hands the state back)
STATE_ROWS: list[tuple[str, str, str, Callable[[], Callable[[], Any]]]] = [
    ("TrainStep", "opt_state", "optimizer", lambda: _train_step(_SGD.init(_tiny()))),
    ("TrainStep", "opt_state", "model", lambda: _train_step(_OTHER_MODEL)),
    ("TrainStep", "opt_state", "dtype", lambda: _train_step(_OTHER_DTYPE)),
    ("TrainStep", "model", "donated", lambda: _train_step(model=_donated(_tiny()))),
    ("make_train_step", "opt_state", "optimizer", lambda: _raw_step(_SGD.init(_tiny()))),
    ("make_train_step", "opt_state", "model", lambda: _raw_step(_OTHER_MODEL)),
    ("make_train_step", "opt_state", "dtype", lambda: _raw_step(_OTHER_DTYPE)),
    ("make_train_step", "params", "donated", lambda: _raw_step(params=_donated(_tiny()))),
    ("compile_step", "opt_state", "optimizer", lambda: _graph_step(_SGD.init)),
    ("compile_step", "opt_state", "donated", lambda: _graph_step(_donated)),
    ("GPT2", "cache", "batch", lambda: _cached("GPT2")),
    ("Llama", "cache", "batch", lambda: _cached("Llama")),
    ("generate", "model", "donated", lambda: _generate_donated("GPT2")),
    ("load_lora", "model", "donated", _load_lora_donated),
    ("load_peft", "model", "donated", _load_peft_donated),
]

#: the public calls given a model (or params) that a donating step may have deleted
TAKES_DONATED = {
    "TrainStep", "make_train_step", "generate", "load_lora", "load_peft", "compile_step"
}  # fmt: skip
#: results that hand state out (their fields are named opt_state), taking none back
HANDS_OUT = {"FitResult", "TrainingDiverged"}
#: the internals a state mistake leaked before the check
LEAKED = ("has no attribute", "Buffer has been deleted", "dynamic_update_slice", "PyTreeDef")


def _public_calls() -> dict[str, Callable[..., Any]]:
    out: dict[str, Callable[..., Any]] = {}
    for module in (ax, ax.nn, ax.train):
        for name in getattr(module, "__all__", dir(module)):
            value = getattr(module, name, None)
            if callable(value) and not name.startswith("_"):
                out[name] = value
    for family in (gpt2.GPT2, llama.Llama):
        out[family.__name__] = family.__call__
    return out


def test_every_stateful_call_has_rows() -> None:
    """A public call that takes state back (a parameter ``opt_state`` or ``cache``) has a
    row in STATE_ROWS, and every call given a donated model has its donated row."""
    stateful = set()
    for name, fn in _public_calls().items():
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            continue
        if {"opt_state", "cache"} & set(params):
            stateful.add(name)
    covered = {row[0] for row in STATE_ROWS}
    assert stateful - HANDS_OUT <= covered, stateful - HANDS_OUT - covered
    assert TAKES_DONATED <= {row[0] for row in STATE_ROWS if row[2] == "donated"}


@pytest.mark.parametrize(
    ("call", "argument", "wrong", "make"), STATE_ROWS, ids=[f"{r[0]}-{r[2]}" for r in STATE_ROWS]
)
def test_state_made_for_something_else_is_named(
    call: str, argument: str, wrong: str, make: Callable[[], Callable[[], Any]]
) -> None:
    run = make()
    with pytest.raises((TypeError, ValueError)) as info:
        run()
    text = str(info.value)
    assert text.startswith(f"{call}") or f"{call}'s step" in text, text
    assert f": {argument} " in text, text
    if wrong == "donated":
        assert "donated" in text, text
    assert not any(leak in text for leak in LEAKED), text


def test_state_check_mutation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mechanism switched off (core/_state.py's checks do nothing, wherever they were
    imported): every row fails, on JAX's or optax's internals or on no error at all."""
    import sys

    off = {"check_state", "check_not_donated", "state_mismatch"}
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("axjax"):
            for name in off & set(vars(module)):
                if name == "state_mismatch":
                    monkeypatch.setattr(module, name, lambda *a, **k: _Quiet())
                else:
                    monkeypatch.setattr(module, name, lambda *a, **k: None)
    failed = []
    for row in STATE_ROWS:
        try:
            test_state_made_for_something_else_is_named(*row)
        except (Exception, pytest.fail.Exception):  # noqa: BLE001 - the internals, or no error
            failed.append(f"{row[0]}-{row[2]}")
    assert len(failed) == len(STATE_ROWS), set(map(str, STATE_ROWS)) - set(failed)


class _Quiet(Exception):  # noqa: N818
    """What the mutated ``state_mismatch`` gives: not the TypeError the rows expect."""


# ---------------------------------------------------------------- class 2: concrete values
def _generate_ids(family: str, bad: int) -> Callable[[], Any]:
    model = FAMILIES[family][0]()
    return lambda: ax.nn.generate(model, _ids(family, [[1, bad]]), 2, temperature=0)


def _call(family: str, bad: int) -> Callable[[], Any]:
    model = FAMILIES[family][0]()
    return lambda: model(_ids(family, [[1, bad]]))


def _evaluate(family: str, bad: int) -> Callable[[], Any]:
    model = FAMILIES[family][0]()
    pos = FAMILIES[family][1]

    def loss(m: Any, ids: Any) -> Any:
        return ax.mean(ax.mean(m(ids), over=gpt2.Vocab if family == "GPT2" else llama.Vocab),
                       over=(Batch, pos))  # fmt: skip

    return lambda: ax.train.evaluate(model, loss, [(_ids(family, [[1, bad]]),)])


#: every public call that jits inside and is not a per-step call, for every family
JIT_CALLS = {"generate": _generate_ids, "model call": _call, "evaluate": _evaluate}
JIT_ROWS = [(call, family, bad) for call in JIT_CALLS for family in FAMILIES for bad in (32, -1)]


@pytest.mark.parametrize(("call", "family", "bad"), JIT_ROWS)
def test_a_concrete_id_out_of_range_raises(call: str, family: str, bad: int) -> None:
    run = JIT_CALLS[call](family, bad)
    with pytest.raises(ValueError, match=rf"id {bad} .*vocabulary of 32"):
        run()


def test_concrete_ids_mutation(monkeypatch: pytest.MonkeyPatch) -> None:
    """generate's check before the jit switched off: the id is clamped, tokens come out."""
    monkeypatch.setattr(_generate, "_check_ids", lambda *a: None)
    with pytest.raises(pytest.fail.Exception):
        test_a_concrete_id_out_of_range_raises("generate", "GPT2", 32)


# ---------------------------------------------------------------- class 3: blame
def _softmax_axis() -> Any:
    logits = ax.Tensor(jnp.zeros((3, 2)), (Batch, ax.train.Class))
    labels = ax.Tensor(jnp.array([0, 1, 2]), (Batch,))
    return ax.train.softmax_cross_entropy(logits, labels, axis=Batch)


def _gen(family: str, rows: Any, steps: int = 2, **kw: Any) -> Callable[[], Any]:
    model = FAMILIES[family][0]()
    array = jnp.asarray(rows, jnp.int32).reshape(np.shape(rows))
    ids = ax.Tensor(array, (Batch, FAMILIES[family][1]))
    return lambda: ax.nn.generate(model, ids, steps, temperature=0, **kw)


def _wrong_ids(family: str) -> Callable[[], Any]:
    model = FAMILIES[family][0]()
    return lambda: model(ax.Tensor(jnp.zeros((1, 2), jnp.int32), (FAMILIES[family][1], Batch)))


#: (entry point, the argument at fault, the words that name it, the wrong call)
BLAME_ROWS: list[tuple[str, str, str, Callable[[], Callable[[], Any]]]] = [
    ("generate", "prompt", "no tokens", lambda: _gen("GPT2", np.zeros((1, 0), int))),
    ("generate", "pos", "pos=Batch", lambda: _gen("GPT2", [[1, 2]], pos=Batch)),
    ("generate", "steps", "steps=", lambda: _gen("GPT2", [[1] * 10], steps=12)),
    ("generate", "prompt", "no rows", lambda: _gen("Llama", np.zeros((0, 2), int))),
    ("GPT2", "ids", "ids are", lambda: _wrong_ids("GPT2")),
    ("Llama", "ids", "ids are", lambda: _wrong_ids("Llama")),
    ("SoftmaxCrossEntropy", "axis", "without Batch", lambda: _softmax_axis),
]
#: the inner calls a mistake used to be blamed on
INNER = ("causal_mask", "init_cache", "transpose", "MultiheadAttention", "n_query", "not a class")


@pytest.mark.parametrize(
    ("call", "argument", "words", "make"), BLAME_ROWS, ids=[f"{r[0]}-{r[1]}" for r in BLAME_ROWS]
)
def test_the_entry_point_and_argument_are_named(
    call: str, argument: str, words: str, make: Callable[[], Callable[[], Any]]
) -> None:
    run = make()
    with pytest.raises((TypeError, ValueError)) as info:
        run()
    first = str(info.value).split("\n", 1)[0]
    assert call in first and words in first, first
    assert not any(inner in first for inner in INNER), first


def test_blame_mutation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The call context's re-attribution switched off, with generate's staged checks: the
    0-length prompt is blamed on an inner call again (``KVCache.positions: n must be a
    positive int``)."""
    from axjax.core import _calls

    monkeypatch.setattr(_calls, "STAGES", ())
    monkeypatch.setattr(_calls, "reattribute", lambda *a, **k: None)
    with pytest.raises(AssertionError, match="KVCache.positions"):
        test_the_entry_point_and_argument_are_named(*BLAME_ROWS[0])


# ---------------------------------------------------------------- class 5: empty data
def _empty_evaluate() -> Any:
    none = ax.Tensor(jnp.ones((0, 3)), (Batch, In)), ax.Tensor(jnp.ones((0, 2)), (Batch, Out))
    return ax.train.evaluate(_tiny(), _loss, [none])


@final
class Member(ax.Axis): ...


def _empty_ensemble() -> Any:
    members = Tiny(ax.Tensor(jnp.ones((0, 3, 2)), (Member, In, Out)))
    return ax.nn.ensemble_loss(_loss)(ax.nn.Ensemble(members, Member), X, Y)


EMPTY_ROWS: dict[str, Callable[[], Any]] = {
    "ensemble_loss": _empty_ensemble,
    "evaluate": _empty_evaluate,
    "accuracy": lambda: ax.train.accuracy(
        ax.Tensor(jnp.zeros((0, 3)), (Batch, ax.train.Class)),
        ax.Tensor(jnp.zeros((0,), jnp.int32), (Batch,)),
    ),
    "mean_squared_error": lambda: ax.train.mean_squared_error(
        ax.Tensor(jnp.ones((0, 2)), (Batch, Out)), ax.Tensor(jnp.ones((0, 2)), (Batch, Out))
    ),
    "generate": _gen("GPT2", np.zeros((0, 2), int)),
}


@pytest.mark.parametrize("call", list(EMPTY_ROWS))
def test_empty_data_is_an_error(call: str) -> None:
    words = "no data|no examples|no rows|no members"
    with pytest.raises(ValueError, match=rf"{call}\b.*: .*({words})"):
        EMPTY_ROWS[call]()


def test_empty_data_mutation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The empty-data rule switched off in the metrics: accuracy over no examples is NaN."""
    metrics = importlib.import_module("axjax.train._metrics")
    monkeypatch.setattr(metrics, "check_some_data", lambda *a: None)
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        test_empty_data_is_an_error("accuracy")


# ---------------------------------------------------------------- class 6: small checks
SMALL_ROWS: dict[str, tuple[Callable[[], Any], str]] = {
    "KeyOf[3]": (lambda: ax.KeyOf[3], r"ax\.KeyOf\[\.\.\.\]: 3 is not an axis label"),
    "grad of integers": (
        lambda: ax.grad(lambda x: ax.sum(x, over=Batch))(ax.Tensor(jnp.arange(3), (Batch,))),
        r"grad: argument 0 holds int32 values",
    ),
    "lora key=None": (
        lambda: ax.nn.lora(_tiny(), where="w", rank=1, key=None),  # type: ignore[arg-type]
        r"lora: key must be a PRNG key",
    ),
}


@pytest.mark.parametrize("case", list(SMALL_ROWS))
def test_small_checks_name_the_argument(case: str) -> None:
    run, text = SMALL_ROWS[case]
    with pytest.raises(TypeError, match=text):
        run()


def test_small_checks_mutation(monkeypatch: pytest.MonkeyPatch) -> None:
    """KeyOf's check switched off: ``ax.KeyOf[3]`` no longer gives the named error (it
    fails deep inside, building a role class of an int), so the check's test fails."""
    roles = importlib.import_module("axjax.core._roles")
    monkeypatch.setattr(roles, "check_axis_label", lambda label, where: label)
    with pytest.raises((pytest.fail.Exception, AttributeError)):
        test_small_checks_name_the_argument("KeyOf[3]")
