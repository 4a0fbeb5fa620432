"""An error names the public entry point the user called, never a public call inside it.

The one mechanism is core/_calls.py's call context. An entry point declares its checks
(``Checks``) with the argument each is about. The context runs them in ``STAGES``: axes,
then dtypes, then values, all before the body, so no inner call fails first. An
entry point's own message is kept as it is. An error raised by a public call inside it
(``causal_mask``, ``KVCache.positions``, ``GPT2.init_cache``, ``generate`` inside
``generate_text``, a ``LoRA`` built by ``lora``) is re-attributed to the outermost call. Its
first line names that call, the argument at fault and what the argument should be, and the
inner message follows as the reason.

:func:`test_every_entry_point_is_a_public_call_or_exempt` enumerates every public callable
of ``ax``, ``ax.nn``, ``ax.train`` and ``axjax.models`` (its families too). Each is a public
call (a call context of its own) or is exempt for a reason. The Tensor-taking layers and
functions have their wrong-axis and wrong-dtype probes in test_public_errors.py. ``ROWS``
below holds the entry points that call other public calls: generate, generate_text, the
models' calls, lora and the loss. Each has a wrong argument and, where it applies, wrong
axes, a wrong dtype and a wrong value at once (``order`` rows: the axes must be reported).
The first line must name the entry point and the argument, and no other public call. The
mutations switch the re-attribution off, swap the stage order and reword an own message.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
import axjax.models
from axjax.core import _calls
from axjax.core._internal import NAMED, declared_ops
from axjax.models import gpt2, llama
from axjax.nn._registry import declared_layers
from tests.core.test_public_errors import names_inner

Batch = ax.train.Batch
#: every family module of axjax.models (gpt2, llama, mistral, ...): a new one is enumerated
FAMILIES = sorted(
    m.name for m in pkgutil.iter_modules(axjax.models.__path__) if not m.name.startswith("_")
)
NAMESPACES = ("axjax", "axjax.nn", "axjax.train", "axjax.models",
              *(f"axjax.models.{f}" for f in FAMILIES))  # fmt: skip

_RUNS_USER_CODE = (
    "runs the user's function: an error inside is named by the call the user wrote there "
    "(core/_calls.py: user_code), never re-attributed to this one; its own checks name it"
)
_FILES = "files, data, downloads and the command line: its errors name the file, key or flag"
_MAKES = "makes a Tensor or a key from sizes and values: it calls no public call on them"
_SWITCH = "a context manager or a switch: it takes no data"
_COLLECTIVE = "a collective or a sharding rule for shard_map: tests/parallel/test_errors.py"
_OP_CLASS = "an op's class: its instances are ops, named by the op (core/_op.py)"
_TREE = "walks a module's tree by path and dtype: no Tensor of it is read by another call"
_QUERY = "a query of the platform or of the attention paths: takes no data"
_GRAPH = "builds or runs a graph from Inputs and Params: tests/graph (its nodes name the op)"

EXEMPT: dict[str, str] = {
    **dict.fromkeys(
        (
            "ax.grad",
            "ax.value_and_grad",
            "ax.vmap",
            "ax.check_axes",
            "ax.fold",
            "ax.scan",
            "ax.nn.tree_fold",
            "ax.nn.tree_scan",
            "ax.nn.remat",
            "ax.nn.ensemble_loss",
            "ax.train.fit",
            "ax.train.evaluate",
            "ax.train.make_train_step",
            "ax.train.make_eval_step",
            "ax.train.TrainStep",
        ),
        _RUNS_USER_CODE,
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "ax.nn.load_lora",
            "ax.nn.save_lora",
            "ax.nn.load_safetensors",
            "ax.nn.save_safetensors",
            "ax.train.add_parallel_args",
            "ax.train.cache_dir",
            "ax.train.download",
            "ax.train.fashion_mnist",
            "ax.train.find_dataset",
            "ax.train.load_checkpoint",
            "ax.train.load_dataset",
            "ax.train.load_sharded",
            "ax.train.mnist",
            "ax.train.pack_documents",
            "ax.train.parallel_from_args",
            "ax.train.plot_history",
            "ax.train.read_idx",
            "ax.train.read_jsonl",
            "ax.train.read_manifest",
            "ax.train.read_sharded_manifest",
            "ax.train.save_checkpoint",
            "ax.train.save_sharded",
            "ax.train.write_idx",
            "ax.train.write_tokens",
            "models.load_peft",
            "models.read_peft",
            "models.save_peft",
            "models.write_peft",
            "models.load_pretrained",
            "models.load_tokenizer",
            "models.load_weights",
            "models.read_config",
            "models.save_weights",
            "models.write_config",
            "gpt2.from_hf",
            "gpt2.to_hf",
            "gpt2.tokenizer",
            "llama.from_hf",
            "llama.to_hf",
            "llama.tokenizer",
            "llama.table",
            "mistral.from_hf",
            "mistral.tokenizer",
            "qwen2.from_hf",
            "qwen2.tokenizer",
        ),
        _FILES,
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "ax.arange",
            "ax.full",
            "ax.normal",
            "ax.ones",
            "ax.randint",
            "ax.tensor",
            "ax.uniform",
            "ax.zeros",
            "ax.nn.rope_frequencies",
        ),
        _MAKES,
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "ax.abstract",
            "ax.axis_rules",
            "ax.check_finite",
            "ax.checkify_indices",
            "ax.debug_nans",
            "ax.jax_autodiff",
        ),
        _SWITCH,
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "ax.all_gather",
            "ax.pmean",
            "ax.psum",
            "ax.shard",
            "ax.sharded_init",
            "ax.sharding",
            "ax.partition_spec",
            "ax.train.unsharded",
        ),
        _COLLECTIVE,
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "ax.ElementwiseOp",
            "ax.FloatElementwiseOp",
            "ax.FloatReductionOp",
            "ax.Op",
            "ax.ReductionOp",
            "ax.nn.FusedAttention",
            "ax.train.LinearCrossEntropy",
            "ax.train.SoftmaxCrossEntropy",
        ),
        _OP_CLASS,
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "ax.nn.by_axes",
            "ax.nn.by_path",
            "ax.nn.Selector",
            "ax.nn.cast",
            "ax.nn.merge_lora",
            "ax.train.apply_updates",
            "ax.nn.exportable",
            "ax.nn.is_exportable",
        ),
        _TREE,
    ),  # fmt: skip
    **dict.fromkeys(
        ("ax.nn.compute_capability", "ax.nn.cudnn_refusal", "ax.nn.default_attention_path"),
        _QUERY,
    ),
    **dict.fromkeys(
        (
            "ax.compile",
            "ax.compile_step",
            "ax.graph_grad",
            "ax.as_params",
            "ax.as_values",
            "ax.CompiledGraph",
            "ax.GraphGrad",
            "ax.GraphStep",
        ),
        _GRAPH,
    ),  # fmt: skip
    "ax.rearrange": "one op's pattern (ops/_rearrange.py): its checks name rearrange and the "
    "pattern, and the ops it applies are reported as its own",
    "ax.nn.identity": "returns its argument: nothing inside can fail",
    "ax.nn.Decoder": "a protocol: generate's model (generate is the entry point)",
}
_PREFIX = {
    "axjax": "ax",
    "axjax.nn": "ax.nn",
    "axjax.train": "ax.train",
    "axjax.models": "models",
    **{f"axjax.models.{f}": f for f in FAMILIES},
}


def entry_points() -> dict[str, Callable[..., Any]]:
    """Every public callable (ops and the registered layers aside: an op names itself, a
    layer is a public call by its registration), under its namespace's short name; a class
    by its ``__call__``."""
    spaces = {"axjax": ax, "axjax.train": ax.train}
    ops = {id(getattr(spaces[s.namespace], f)) for s in declared_ops() for f in s.functions}
    layers = {id(s.layer) for s in declared_layers()}
    out: dict[str, Callable[..., Any]] = {}
    seen: set[int] = set()
    for space in NAMESPACES:
        module = importlib.import_module(space)
        for name in sorted(dir(module)):
            value = getattr(module, name)
            if name.startswith("_") or id(value) in ops | seen | layers:
                continue
            seen.add(id(value))
            if inspect.isfunction(value):
                out[f"{_PREFIX[space]}.{name}"] = value
            elif inspect.isclass(value) and "__call__" in vars(value):
                out[f"{_PREFIX[space]}.{name}"] = vars(value)["__call__"]
    return out


def test_every_entry_point_is_a_public_call_or_exempt() -> None:
    points = entry_points()
    unwrapped = {n for n, fn in points.items() if fn not in NAMED}
    missing = sorted(unwrapped - set(EXEMPT))
    assert not missing, f"public entry points neither a public call nor exempt: {missing}"
    stale = sorted(set(EXEMPT) - unwrapped)
    assert not stale, f"exempt, but a public call now (or gone): {stale}"
    wrapped = sorted(set(points) - unwrapped)
    for name in ("ax.nn.generate", "models.generate_text", "gpt2.GPT2", "llama.Llama",
                 "ax.nn.lora", "ax.nn.causal_mask", "gpt2.Block", "llama.Block"):  # fmt: skip
        assert name in wrapped, name


# ----------------------------------------------------------------------------- the rows
@functools.cache
def _model(family: str) -> Any:
    if family == "GPT2":
        cfg = gpt2.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2)
        return gpt2.GPT2(cfg, key=jax.random.key(0))
    lcfg = llama.LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1,
    )  # fmt: skip
    return llama.Llama(lcfg, key=jax.random.key(0))


def _pos(family: str) -> type[ax.Axis]:
    return gpt2.Pos if family == "GPT2" else llama.Pos


def _ids(family: str, rows: Any, dtype: Any = jnp.int32, swap: bool = False) -> Any:
    array = jnp.asarray(rows, dtype).reshape(np.shape(rows))
    axes = (Batch, _pos(family))
    return ax.Tensor(array.T, axes[::-1]) if swap else ax.Tensor(array, axes)


def _generate(family: str, ids: Any, steps: int = 2, **kw: Any) -> Callable[[], Any]:
    return lambda: ax.nn.generate(_model(family), ids, steps, temperature=0, **kw)


@functools.cache
def _text_model() -> tuple[Any, Any]:
    pytest.importorskip("tokenizers")
    from pathlib import Path

    from axjax.models import load_pretrained

    return load_pretrained(Path(__file__).parents[1] / "models" / "fixtures" / "gpt2")


def _text(prompts: Any, steps: int) -> Callable[[], Any]:
    from axjax.models import generate_text

    model, tok = _text_model()
    return lambda: generate_text(model, tok, prompts, max_new_tokens=steps)


def _loss(axis: Any, labels: list[int]) -> Callable[[], Any]:
    logits = ax.Tensor(jnp.zeros((3, 2)), (Batch, ax.train.Class))
    y = ax.Tensor(jnp.asarray(labels, jnp.int32), (Batch,))
    return lambda: ax.train.softmax_cross_entropy(logits, y, axis=axis)


class _Model(eqx.Module):
    proj: Any


def _lora_of_rank_axis() -> Any:
    """A layer mapping to ``ax.nn.Rank``: the LoRA lora builds refuses it."""
    dense = ax.nn.Linear(Batch, ax.nn.Rank, 3, 2, key=jax.random.key(0))
    return ax.nn.lora(_Model(dense), where=ax.nn.by_path("proj"), rank=2, key=jax.random.key(0))


class Row(NamedTuple):
    entry: str  # the call the user made, as its errors name it
    argument: str  # the argument at fault
    make: Callable[[], Callable[[], Any]]  # the wrong call
    words: str = ""  # more the first line must say (a regex)
    kind: str = "argument"  # "order": wrong axes, dtype and value at once; "inner": an
    # inner public call's error, re-attributed; "own": the entry point's own words, kept


ROWS: dict[str, Row] = {
    # the five examples
    "generate: 0-length prompt": Row(
        "generate",
        "prompt",
        lambda: _generate("GPT2", _ids("GPT2", np.zeros((1, 0)))),
        "no tokens",
    ),  # fmt: skip
    "generate: pos on the batch": Row(
        "generate",
        "pos",
        lambda: _generate("GPT2", _ids("GPT2", [[1, 2]]), pos=Batch),
        r"^generate: pos=Batch, but the model reads its positions on Pos",
        "own",
    ),  # fmt: skip
    "generate: past the context": Row(
        "generate",
        "steps",
        lambda: _generate("GPT2", _ids("GPT2", [[1] * 10]), 12),
        r"prompt \+ steps",
    ),  # fmt: skip
    "Llama: ids without Pos": Row(
        "Llama",
        "ids",
        lambda: lambda: _model("Llama")(_ids("Llama", [[1, 2]], swap=True)),
        "^Llama: ids are a Tensor",
    ),  # fmt: skip
    "softmax_cross_entropy: axis=Batch": Row(
        "SoftmaxCrossEntropy", "axis", lambda: _loss(Batch, [0, 1, 2]), "without Batch"
    ),
    # the order: wrong axes, dtype and value at once report the axes; dtype before value
    "generate: order": Row(
        "generate",
        "pos",
        lambda: _generate("GPT2", _ids("GPT2", np.zeros((1, 0)), jnp.float32), pos=Batch),
        "pos=Batch",
        "order",
    ),  # fmt: skip
    "generate: dtype before value": Row(
        "generate",
        "prompt",
        lambda: _generate("GPT2", _ids("GPT2", np.zeros((1, 0)), jnp.float32)),
        "token ids, got F32",
        "order",
    ),  # fmt: skip
    "GPT2: order": Row(
        "GPT2",
        "ids",
        lambda: lambda: _model("GPT2")(_ids("GPT2", [[-1]], jnp.float32, True)),
        "Pos last",
        "order",
    ),  # fmt: skip
    "softmax_cross_entropy: order": Row(  # the axes before the labels' values (a float
        # label is a one-hot's probabilities: its dtype message is the one that helps)
        "SoftmaxCrossEntropy",
        "axis",
        lambda: _loss(Batch, [0, 1, 7]),
        "without Batch",
        "order",
    ),  # fmt: skip
    # an inner public call's error, re-attributed to the call the user made
    "generate_text: max_new_tokens=0": Row(
        "generate_text",
        "max_new_tokens",
        lambda: _text("Hi", 0),
        "should be a positive int",
        "inner",
    ),  # fmt: skip
    "generate_text: past the context": Row(
        "generate_text",
        "max_new_tokens",
        lambda: _text(["Hi"], 100),
        "within the model's",
        "inner",
    ),  # fmt: skip
    "generate_text: empty prompt": Row(
        "generate_text", "prompts", lambda: _text("", 2), "at least one token", "inner"
    ),
    "lora: a LoRA it builds": Row(
        "lora", "model", lambda: _lora_of_rank_axis, "the axis Rank", "inner"
    ),
    "lora: rank=0": Row(
        "lora",
        "rank",
        lambda: (
            lambda: ax.nn.lora(
                _model("GPT2"), where=ax.nn.by_path("*"), rank=0, key=jax.random.key(0)
            )
        ),
        "positive int",
    ),  # fmt: skip
}


def check(case: str) -> str | None:
    """The problem of one row (None: it holds)."""
    row = ROWS[case]
    run = row.make()
    try:
        run()
    except (TypeError, ValueError) as e:
        first = str(e).split("\n", 1)[0]
        given = ("GPT2",) if row.entry in ("generate", "lora") else ()
        inner = names_inner(row.entry, first, given)
        if not re.search(rf"\b{re.escape(row.entry)}\b", first):
            return f"{case}: the first line does not name {row.entry}: {first}"
        if not re.search(rf"\b{row.argument}\b", first):
            return f"{case}: the first line does not name {row.argument}: {first}"
        if inner:
            return f"{case}: the first line names the inner call {inner}: {first}"
        if not re.search(row.words, first):
            return f"{case}: the first line does not say {row.words!r}: {first}"
        return None
    return f"{case}: accepted"


@pytest.mark.parametrize("case", list(ROWS))
def test_the_entry_point_names_itself_and_the_argument(case: str) -> None:
    problem = check(case)
    assert problem is None, problem


def _failing(kinds: tuple[str, ...]) -> list[str]:
    return [p for c, r in ROWS.items() if r.kind in kinds and (p := check(c)) is not None]


def test_mutation_no_reattribution(monkeypatch: pytest.MonkeyPatch) -> None:
    """The re-attribution switched off: every inner row names the inner call again."""
    _text_model()
    monkeypatch.setattr(_calls, "reattribute", lambda *a, **k: None)
    failing = _failing(("inner",))
    print("\n".join(["", *failing]))
    assert len(failing) == sum(r.kind == "inner" for r in ROWS.values()), failing


def test_mutation_stages_swapped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stages run values first: generate's order rows report the value or the dtype."""
    monkeypatch.setattr(_calls, "STAGES", tuple(reversed(_calls.STAGES)))
    failing = _failing(("order",))
    print("\n".join(["", *failing]))
    assert {f.split(":", 2)[1].strip() for f in failing} >= {"order", "dtype before value"}


def test_mutation_own_words_reworded(monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry point's own message reworded by its call context (the last attempt's
    bug): the own row fails."""
    monkeypatch.setattr(_calls, "_names_one", lambda *a: False)
    failing = _failing(("own",))
    print("\n".join(["", *failing]))
    assert len(failing) == sum(r.kind == "own" for r in ROWS.values()), failing
