"""The validator knows each callable's whole domain: dtype kind, integer width and rank.

Every public callable with a ``dtype`` parameter (introspection over ``ax``, ``ax.nn``,
``ax.nn.init``'s initialisers and ``ax.train``) has a row in ``DOMAINS`` saying which kind
of dtype it takes. Each is called with every dtype marker: a dtype of its kind must give a
result of that dtype, any other must be refused by axjax's own ``TypeError`` naming
``dtype`` (never a raw JAX error deep inside, never a silent result: an orthogonal matrix in
I32 is all zeros). Integer width and rank are probed over the fixtures of
tests/core/test_numeric_arguments.py: ``2**64`` for every int argument, ``at=`` beyond the
result's rank for every position. The mutations switch the checks off and watch the
generated tests fail.
"""

from __future__ import annotations

import inspect
import re
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, final

import equinox as eqx
import jax
import pytest

import axjax as ax
from axjax.core import _validate
from tests.core import test_numeric_arguments as numeric

AXJAX_DIR = str(Path(ax.__file__).parent)
KEY = jax.random.key(0)
Kind = Literal["floating", "integer", "number", "any"]
DTYPES = (ax.F32, ax.F16, ax.BF16, ax.I32, ax.I8, ax.U8, ax.U32, ax.Bool)


@final
class A(ax.Axis): ...


@final
class B(ax.Axis): ...


@final
class T(ax.Axis): ...


@final
class Ch(ax.Axis): ...


def _leaf_dtypes(out: Any) -> set[Any]:
    leaves = jax.tree_util.tree_leaves(out, is_leaf=lambda x: isinstance(x, ax.Tensor))
    return {x.dtype for x in leaves if isinstance(x, ax.Tensor)}


def _sizes() -> dict[type[ax.Axis], int]:
    return {A: 3, B: 3}


def domains() -> dict[str, tuple[Kind, Callable[[Any], Any]] | str]:
    """``{public name: (kind, call(dtype))}``, or the reason a callable is left out."""
    nn, init = ax.nn, ax.nn.init
    floating: Kind = "floating"
    table: dict[str, tuple[Kind, Callable[[Any], Any]] | str] = {
        "ax.normal": (floating, lambda d: ax.normal(KEY, (2,), A, dtype=d)),
        "ax.uniform": (floating, lambda d: ax.uniform(KEY, (2,), A, dtype=d)),
        "ax.randint": ("integer", lambda d: ax.randint(KEY, (2,), A, minval=0, maxval=2, dtype=d)),
        "ax.arange": ("number", lambda d: ax.arange(A, 2, d)),
        "ax.zeros": ("any", lambda d: ax.zeros((2,), A, dtype=d)),
        "ax.ones": ("any", lambda d: ax.ones((2,), A, dtype=d)),
        "ax.full": ("any", lambda d: ax.full((2,), A, value=1, dtype=d)),
        "ax.tensor": ("any", lambda d: ax.tensor([0, 1], A, dtype=d)),
        "ax.astype": ("any", lambda d: ax.astype(ax.ones((2,), A), d)),
        "ax.one_hot": ("any", lambda d: ax.one_hot(ax.tensor([0, 1], A, dtype=ax.I32), B, 2, d)),
        "ax.Input": ("any", lambda d: ax.Input(d, A)),
        "ax.nn.cast": (floating, lambda d: nn.cast({"w": ax.ones((2,), A)}, d)),
        "ax.nn.Affine": (floating, lambda d: nn.Affine(A, B, 3, 2, dtype=d, key=KEY)),
        "ax.nn.Linear": (floating, lambda d: nn.Linear(A, B, 3, 2, dtype=d, key=KEY)),
        "ax.nn.MLP": (floating, lambda d: nn.MLP(A, B, 3, 2, dtype=d, key=KEY)),
        "ax.nn.Embedding": (floating, lambda d: nn.Embedding(A, B, 3, 2, dtype=d, key=KEY)),
        "ax.nn.Conv": (floating, lambda d: nn.Conv(T, Ch, B, 2, 2, 2, dtype=d, key=KEY)),
        "ax.nn.Conv1D": (floating, lambda d: nn.Conv1D(T, Ch, B, 2, 2, 2, dtype=d, key=KEY)),
        "ax.nn.Conv2D": (
            floating,
            lambda d: nn.Conv2D((T, A), Ch, B, 2, 2, 2, dtype=d, key=KEY),
        ),
        "ax.nn.Conv3D": (
            floating,
            lambda d: nn.Conv3D((T, A, nn.Slot), Ch, B, 2, 2, 2, dtype=d, key=KEY),
        ),
        "ax.nn.LayerNorm": (floating, lambda d: nn.LayerNorm(A, 3, dtype=d)),
        "ax.nn.RMSNorm": (floating, lambda d: nn.RMSNorm(A, 3, dtype=d)),
        "ax.nn.RNNCell": (floating, lambda d: nn.RNNCell(A, B, 3, 2, dtype=d, key=KEY)),
        "ax.nn.GRUCell": (floating, lambda d: nn.GRUCell(A, B, 3, 2, dtype=d, key=KEY)),
        "ax.nn.LSTMCell": (floating, lambda d: nn.LSTMCell(A, B, 3, 2, dtype=d, key=KEY)),
        "ax.nn.ChildSumTreeLSTMCell": (
            floating,
            lambda d: nn.ChildSumTreeLSTMCell(A, B, 3, 2, dtype=d, key=KEY),
        ),
        "ax.nn.MultiheadAttention": (
            floating,
            lambda d: nn.MultiheadAttention(A, 4, num_heads=2, query_pos=T, dtype=d, key=KEY),
        ),
        "ax.nn.GroupedQueryAttention": (
            floating,
            lambda d: nn.GroupedQueryAttention(
                A, 4, num_heads=2, num_kv_heads=1, query_pos=T, dtype=d, key=KEY
            ),
        ),
        "ax.nn.GroupedQueryAttention.init_cache": (
            floating,
            lambda d: _keys_values(
                nn.GroupedQueryAttention(
                    A, 4, num_heads=2, num_kv_heads=1, query_pos=T, key=KEY
                ).init_cache({B: 1}, 3, d)
            ),
        ),
        "ax.nn.SwiGLU": (floating, lambda d: nn.SwiGLU(A, 3, B, 2, dtype=d, key=KEY)),
        "ax.nn.MultiheadAttention.init_cache": (
            floating,
            lambda d: _keys_values(
                nn.MultiheadAttention(A, 4, num_heads=2, query_pos=T, key=KEY).init_cache(
                    {B: 1}, 3, d
                )
            ),
        ),
        "ax.TensorType": "the type an op's type rule returns (any dtype: not a user call)",
        "ax.nn.cudnn_refusal": "a question about a dtype (why cuDNN would refuse it): any",
        "ax.nn.default_attention_path": "a question about a dtype (which path it takes): any",
        "ax.nn.init.Initializer.__call__": "the protocol: each initialiser is a row below",
        "ax.train.TokenFile": "a file's storage dtype by NumPy name ('uint16', 'uint32', "
        "'int32'), not a Tensor dtype: tests/train/test_tokens.py refuses the others",
        "ax.train.write_tokens": "a file's storage dtype by NumPy name ('uint16' or 'uint32'), "
        "not a Tensor dtype: tests/train/test_tokens.py",
    }
    for name in initialisers():
        make = getattr(init, name)
        args = {"constant": (1.0,), "uniform": (0.5,), "normal": (0.5,)}.get(name, ())
        if name == "variance_scaling":
            args = (1.0, "fan_avg", "normal")
        table[f"ax.nn.init.{name}"] = (
            floating,
            lambda d, make=make, args=args: make(*args)(
                KEY, _sizes(), fan_in=A, fan_out=B, dtype=d
            ),
        )
    return table


def initialisers() -> list[str]:
    """The functions of ``ax.nn.init`` that make an initialiser."""
    return [
        n
        for n, fn in vars(ax.nn.init).items()
        if inspect.isfunction(fn)
        and not n.startswith("_")
        and "Initializer" in str(inspect.signature(fn).return_annotation)
    ]


def _keys_values(cache: Any) -> Any:
    """A cache's keys and values: in ``dtype``; its lengths are counts (``I32``)."""
    return cache.keys, cache.values


def with_dtype() -> list[str]:
    """Every public callable with a ``dtype`` parameter (the ``astype`` methods of Tensors
    and graph nodes are ``ax.astype``), and every initialiser."""
    found = []
    for name, fn in numeric.public_callables().items():
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            continue
        if "dtype" in params and not (name.endswith(".astype") and name != "ax.astype"):
            found.append(name)
    return found + [f"ax.nn.init.{n}" for n in initialisers()]


def _from_axjax(error: BaseException) -> bool:
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and frames[-1].filename.startswith(AXJAX_DIR)


def _of_kind(dtype: Any, kind: Kind) -> bool:
    if kind == "any":
        return True
    if kind == "number":
        return dtype is not ax.Bool
    return issubclass(dtype, ax.Floating if kind == "floating" else ax.Integer)


def check_dtypes(name: str, kind: Kind, call: Callable[[Any], Any]) -> list[str]:
    problems = []
    for dtype in DTYPES:
        label = f"{name}(dtype={dtype.__name__})"
        try:
            out = eqx.filter_eval_shape(call, dtype)  # traced only: nothing is compiled
        except (TypeError, ValueError) as e:
            if _of_kind(dtype, kind) and kind != "any":
                problems.append(f"{label} is in its domain but raised: {e}")
            elif not _from_axjax(e):
                problems.append(f"{label}: a raw {type(e).__name__}: {e}")
            elif not re.search(r"\bdtype\b|\bBool\b", str(e)):
                problems.append(f"{label}: the message does not name dtype: {e}")
        except Exception as e:  # noqa: BLE001 - a raw error of any kind is the finding
            problems.append(f"{label}: a raw {type(e).__name__}: {e}")
        else:
            if not _of_kind(dtype, kind):
                problems.append(f"{label} is outside its domain ({kind}) and was accepted")
            elif _leaf_dtypes(out) - {dtype}:
                problems.append(f"{label} gave {_leaf_dtypes(out)}")
    return problems


def run_dtypes() -> list[str]:
    table = domains()
    problems = []
    for name in with_dtype():
        row = table[name]
        if not isinstance(row, str):
            problems += check_dtypes(name, *row)
    return problems


# ----------------------------------------------------------------------------- dtype kind
def test_every_dtype_parameter_has_a_domain() -> None:
    missing = sorted(set(with_dtype()) - set(domains()))
    assert not missing, f"callables with a dtype parameter and no row in DOMAINS: {missing}"
    stale = sorted(set(domains()) - set(with_dtype()))
    assert not stale, f"rows of no callable: {stale}"


def test_every_dtype_outside_the_domain_is_refused_by_name() -> None:
    problems = run_dtypes()
    assert not problems, "\n".join(problems)


def test_the_dtype_check_fails_without_the_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation: the validator admitting every dtype makes the generated check fail, with
    raw JAX errors and silent results (the orthogonal zeros among them)."""
    monkeypatch.setattr(
        _validate, "_KINDS", {k: (ax.DType, w) for k, (_, w) in _validate._KINDS.items()}
    )
    problems = run_dtypes()
    assert any("raw" in p for p in problems), problems
    assert any("ax.nn.init.orthogonal(dtype=I32) is outside" in p for p in problems), problems


# ----------------------------------------------------------------------------- width and rank
def _int_parameters(tmp: Path) -> list[tuple[str, str, numeric.Fixture]]:
    table = numeric.fixtures(tmp)
    out = []
    for name, params in numeric.numeric_parameters().items():
        fixture = table.get(name)
        if not isinstance(fixture, numeric.Fixture) or fixture.expensive:
            continue
        out += [(name, p, fixture) for p, kind in params.items() if kind == "int"]
    return out


def probe(name: str, param: str, fixture: numeric.Fixture, value: Any) -> str | None:
    """The problem of ``name`` called with ``param=value`` (which it must refuse)."""
    kw = {**fixture.baseline, param: numeric._apply(fixture.baseline[param], value)}
    try:
        fixture.call(**kw)
    except (TypeError, ValueError, ax.train.CheckpointError, ax.train.DataError) as e:
        if not _from_axjax(e):
            return f"{name}({param}={value}): a raw {type(e).__name__}: {e}"
        if param not in str(e):
            return f"{name}({param}={value}): the message does not name {param}: {e}"
        return None
    except Exception as e:  # noqa: BLE001 - a raw error of any kind is the finding
        return f"{name}({param}={value}): a raw {type(e).__name__}: {e}"
    return f"{name}({param}={value}) was accepted"


def run_width(tmp: Path) -> tuple[list[str], int]:
    """Every int argument given ``2**64``; every position (``at``) one beyond the rank of
    its result either way. Returns the problems and the number of probes."""
    found, n = [], 0
    for name, param, fixture in _int_parameters(tmp):
        values = (2**64, 99, -99) if param == "at" else (2**64,)
        for value in values:
            n += 1
            problem = probe(name, param, fixture, value)
            if problem:
                found.append(problem)
    return found, n


def test_every_int_argument_beyond_64_bits_or_the_rank_is_refused(tmp_path: Path) -> None:
    problems, n = run_width(tmp_path)
    assert n >= 100, n
    assert not problems, "\n".join(problems)


def test_the_width_check_fails_without_the_validator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mutation: the 64-bit bound and the rank of ``at`` switched off."""
    monkeypatch.setattr(ax.core._op, "_OPS", {})  # ops built unchecked must not be reused
    monkeypatch.setattr(_validate, "INT64", (-(2**70), 2**70))
    monkeypatch.setattr(_validate, "position", lambda where, name, value, rank: value)
    monkeypatch.setattr(ax.core._transforms, "position", lambda where, name, value, rank: value)
    problems, _ = run_width(tmp_path)
    assert any("tile(n=" in p and "raw" in p for p in problems), problems
    assert any("vmap(at=99)" in p for p in problems), problems


# ----------------------------------------------------------------------------- the quoted examples
def _stack() -> Any:
    return ax.nn.LayerStack.init(lambda k: ax.nn.Linear(A, B, 3, 3, key=k), 2, key=KEY)


def _fold_growing_state() -> Any:
    body = lambda s, x: ax.concat([s, s], A)  # noqa: E731
    return ax.fold(body, over=T)(ax.zeros((2,), A), ax.ones((2, 3), A, T))


def _fused_mask() -> Any:
    q = ax.ones((2, 3, 4), A, T, B)
    k = ax.ones((2, 3, 4), A, ax.nn.KeyOfAnyQuery, B)
    mask = ax.ones((5, 3), T, ax.nn.KeyOfAnyQuery, dtype=ax.Bool)
    attend = ax.nn.dot_product_attention
    return attend(q, k, k, over=B, key_pos=ax.nn.KeyOfAnyQuery, mask=mask, implementation="xla")


def _deleted(save: Callable[[Any, Path], Any], tmp: Path) -> Any:
    t = ax.ones((3,), A)
    t.array.delete()  # as a jitted step that donates it leaves it
    return save({"w": t}, tmp)


def _remat_on_input() -> Any:
    return ax.nn.remat(ax.nn.Linear(A, B, 3, 2, key=KEY))(ax.Input(ax.F32, T, A))


@pytest.mark.parametrize(
    "make, error, message",
    [
        (
            lambda tmp: ax.normal(KEY, (2,), A, dtype=ax.I32),
            TypeError,
            "normal: dtype must be a floating dtype (ax.F32, ax.BF16, ax.F16, ax.F64), got I32",
        ),
        (
            lambda tmp: ax.nn.Affine(A, B, 3, 2, dtype=ax.I32, key=KEY),
            TypeError,
            "Affine (variance_scaling): dtype must be a floating dtype",
        ),
        (
            lambda tmp: ax.nn.init.orthogonal()(
                KEY, {A: 3, B: 3}, fan_in=A, fan_out=B, dtype=ax.I32
            ),
            TypeError,
            "orthogonal: dtype must be a floating dtype (ax.F32, ax.BF16, ax.F16, ax.F64), got I32",
        ),
        (
            lambda tmp: ax.randint(KEY, (2,), A, minval=0, maxval=5, dtype=ax.F32),
            TypeError,
            "randint: dtype must be an integer dtype (ax.I32, ax.I8, ax.U8, ax.U32, ax.I64), "
            "got F32",
        ),
        (
            lambda tmp: ax.tensor([1, 2], A, dtype=ax.I32) ** -1,
            ValueError,
            "power: an integer tensor (int32) raised to a negative power has no integer result",
        ),
        (
            lambda tmp: ax.vmap(lambda t: t * 2.0, A, at=3)(ax.ones((2,), A)),
            ValueError,
            "vmap: at must be a position in [-1, 0] (a result of 0 axes), got 3",
        ),
        (
            lambda tmp: ax.tile(ax.ones((2,), A), A, 2**64),
            ValueError,
            "tile: n must be a positive int (1, 2, ...) that fits in 64 bits",
        ),
        (
            lambda tmp: _stack()[1.0],
            TypeError,
            "LayerStack: index must be an int (negative counts from the end), got float 1.0",
        ),
        (
            lambda tmp: _fold_growing_state(),
            ax.AxisError,
            "Cannot fold over T: the unit returned Tensor[F32, A=4] for the state "
            "Tensor[F32, A=2]; a unit must keep the state's sizes",
        ),
        (
            lambda tmp: _deleted(
                lambda tree, path: ax.train.save_checkpoint(path, tree), tmp / "ckpt"
            ),
            ax.train.CheckpointError,
            "cannot save the checkpoint: entry ['w'] has been deleted (its buffer was donated",
        ),
        (
            lambda tmp: _deleted(
                lambda tree, path: ax.nn.save_safetensors(tree, path), tmp / "m.safetensors"
            ),
            ax.nn.SafetensorsError,
            "save_safetensors: the module's leaf ['w'] has been deleted",
        ),
        (
            lambda tmp: _fused_mask(),
            ax.AxisError,
            "Cannot apply dot_product_attention to mask=Tensor[Bool, T=5, KeyOfAnyQuery=3]: "
            "axis T of the mask has size 5, the scores 3",
        ),
        (
            lambda tmp: _remat_on_input(),
            TypeError,
            "remat: the Linear it wraps is called on a graph node (Tensor[F32, T=?, A=?]); "
            "rematerialisation runs on Tensors",
        ),
    ],
)
def test_quoted_examples(
    make: Callable[[Path], Any], error: type[Exception], message: str, tmp_path: Path
) -> None:
    with pytest.raises(error) as info:
        make(tmp_path)
    assert str(info.value).startswith(message), str(info.value)
    assert not list(tmp_path.iterdir()), "nothing is written"


def test_the_fused_op_checks_the_mask_sizes_itself() -> None:
    q = ax.ones((2, 3, 4), A, T, B)
    k = ax.ones((2, 3, 4), A, ax.nn.KeyOfAnyQuery, B)
    op = ax.nn.FusedAttention(B, ax.nn.KeyOfAnyQuery, masked=True, implementation="xla")
    with pytest.raises(ax.AxisError, match="axis T of the mask has size 5, the scores 3"):
        op(q, k, k, ax.ones((5, 3), T, ax.nn.KeyOfAnyQuery, dtype=ax.Bool))
