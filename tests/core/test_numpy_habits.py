"""numpy habits on a Tensor keep the axes or name the axjax spelling (core/_numpy_habits.py).

Generated over every public attribute of ``numpy.ndarray`` that ``Tensor`` lacks, and over
every numpy function that dispatches on its arguments (``__array_function__``); checked
through numpy itself on a broad list of calls; mutation tests switch the protocol off and
see the silent bare arrays and the plain ``AttributeError`` come back.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, final

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax

AnyT = ax.Tensor[Any, *tuple[Any, ...]]


@final
class Batch(ax.Axis): ...


@final
class Pixel(ax.Axis): ...


def x23() -> AnyT:
    return ax.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3), Batch, Pixel)


SHOWN = "Tensor[F32, Batch=2, Pixel=3]"
VALUES = "; np.asarray(t) gives the plain values in the order of t.axes)"

# ----------------------------------------------------------------------- attributes
NDARRAY_ONLY = sorted(
    n for n in dir(np.ndarray) if not n.startswith("_") and not hasattr(ax.Tensor, n)
)


def _attribute_error(name: str) -> str:
    with pytest.raises(AttributeError) as info:
        getattr(x23(), name)
    return str(info.value)


@pytest.mark.parametrize("name", NDARRAY_ONLY)
def test_every_numpy_attribute_names_the_axjax_spelling(name: str) -> None:
    message = _attribute_error(name)
    assert message.startswith(f"{SHOWN} has no .{name}"), message
    assert "ax." in message or "t.array" in message, message


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("T", "has no .T: axes are named; use ax.transpose(t, *axes) (name the new order)"),
        ("sum", "has no .sum(): axes are named; use ax.sum(t, Axis)"),
        ("mean", "has no .mean(): axes are named; use ax.mean(t, Axis)"),
        ("max", "has no .max(): axes are named; use ax.max(t, Axis)"),
        ("transpose", "has no .transpose(): axes are named; use ax.transpose(t, *axes)"),
        (
            "reshape",
            "has no .reshape(): axes are named; use ax.flatten(t, (A, B), AB) or "
            "ax.unflatten(t, AB, (A, B), sizes)",
        ),
        (
            "cumsum",
            "has no .cumsum() (a numpy array method): axes are named; axjax has no such op: "
            "compute on t.array (the jax.Array, dimensions in the order of t.axes; "
            "t.array.cumsum if it has one) and name the result's axes with "
            "ax.tensor(result, *axes)",
        ),
    ],
)
def test_the_quoted_attribute_habits(name: str, message: str) -> None:
    assert _attribute_error(name).startswith(f"{SHOWN} {message}")


def test_other_attributes_stay_plain_and_the_tensor_stays_a_pytree() -> None:
    t = x23()
    with pytest.raises(AttributeError, match=r"^'Tensor' object has no attribute 'nonsense'$"):
        t.nonsense  # noqa: B018
    assert not hasattr(t, "__deepcopy__") and not hasattr(t, "T")
    assert t.shape == (2, 3) and t.ndim == 2 and t.dtype is ax.F32  # kept, as before
    import copy
    import pickle

    for clone in (copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
        np.testing.assert_array_equal(np.asarray(clone), np.asarray(t))
    assert jax.jit(lambda a: a * 2)(t).axes == (Batch, Pixel)


def test_without_the_fallback_the_attribute_errors_say_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The mutation test: without ``Tensor.__getattr__`` the generated test fails."""
    monkeypatch.delattr(ax.Tensor, "__getattr__")
    plain = [n for n in NDARRAY_ONLY if "ax." not in _attribute_error(n)]
    assert plain == NDARRAY_ONLY


# ------------------------------------------------------------------------ functions
def _dispatched() -> dict[str, Callable[..., Any]]:
    """Every numpy function that dispatches on its arguments (numpy, linalg, fft)."""
    found: dict[str, Callable[..., Any]] = {}
    for space, prefix in ((np, ""), (np.linalg, "linalg."), (np.fft, "fft.")):
        for name in dir(space):
            f = getattr(space, name)
            if not name.startswith("_") and type(f).__name__ == "_ArrayFunctionDispatcher":
                found.setdefault(prefix + name, f)
    return found


DISPATCHED = _dispatched()
#: the numpy functions a Tensor answers itself (by the sizes: no values lost)
SERVED = {"shape": (2, 3), "ndim": 2, "size": 6}


@pytest.mark.parametrize("name", sorted(DISPATCHED))
def test_every_numpy_function_keeps_the_axes_or_names_the_spelling(name: str) -> None:
    t = x23()
    if name in SERVED:
        assert t.__array_function__(DISPATCHED[name], (ax.Tensor,), (t,), {}) == SERVED[name]
        return
    with pytest.raises((TypeError, ValueError)) as info:
        t.__array_function__(DISPATCHED[name], (ax.Tensor,), (t,), {})
    message = str(info.value)
    assert message.startswith(("Cannot apply numpy.", "Cannot convert")), message
    assert "ax." in message or "t.array" in message, message


def _np_error(call: Callable[[AnyT], Any]) -> str:
    with pytest.raises(TypeError) as info:
        call(x23())
    return str(info.value)


CALLS: dict[str, tuple[Callable[[AnyT], Any], str]] = {
    "concatenate": (lambda t: np.concatenate([t, t]), "ax.concat(ts, Axis)"),
    "vstack": (lambda t: np.vstack([t, t]), "ax.concat(ts, Axis)"),
    "stack": (lambda t: np.stack([t, t]), "ax.stack(ts, NewAxis)"),
    "sum": (np.sum, "ax.sum(t, Axis)"),
    "mean": (np.mean, "ax.mean(t, Axis)"),
    "max": (np.max, "ax.max(t, Axis)"),
    "min": (np.min, "ax.min(t, Axis)"),
    "var": (np.var, "ax.var(t, Axis)"),
    "std": (np.std, "ax.sqrt(ax.var(t, Axis))"),
    "argmax": (np.argmax, "ax.argmax(t, Axis)"),
    "transpose": (np.transpose, "ax.transpose(t, *axes)"),
    "reshape": (lambda t: np.reshape(t, -1), "ax.flatten(t, (A, B), AB)"),
    "ravel": (np.ravel, "ax.flatten(t, (A, B), AB)"),
    "squeeze": (np.squeeze, "ax.squeeze(t, Axis)"),
    "expand_dims": (lambda t: np.expand_dims(t, 0), "ax.expand_dims(t, NewAxis)"),
    "dot": (lambda t: np.dot(t, t), "ax.contract(a, b, over=Axis)"),
    "einsum": (lambda t: np.einsum("ij,ij->", t, t), "ax.contract(a, b, over=Axis)"),
    "take": (lambda t: np.take(t, [0]), "ax.take(t, Axis, indices)"),
    "tile": (lambda t: np.tile(t, 2), "ax.tile(t, Axis, n)"),
    "clip": (lambda t: np.clip(t, 0, 1), "ax.minimum(ax.maximum(t, low), high)"),
    "split": (lambda t: np.split(t, 2), "ax.unstack(t, Axis)"),
    "zeros_like": (np.zeros_like, "ax.zeros(t.shape, *t.axes, dtype=t.dtype)"),
    "allclose": (lambda t: np.allclose(t, t), "compare the plain values in one axis order"),
    "copy": (np.copy, "Tensors are immutable: use t itself"),
    "linalg.norm": (np.linalg.norm, "ax.sqrt(ax.sum(ax.square(t), Axis))"),
    "cumsum": (np.cumsum, None),  # type: ignore[dict-item]
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_numpy_calls_on_tensors_name_the_axjax_spelling(name: str) -> None:
    call, spelling = CALLS[name]
    fix = (
        "axjax has no such op: compute on t.array, the jax.Array with its dimensions in the "
        "order of t.axes, and name the result's axes with ax.tensor(result, *axes)"
        if spelling is None
        else spelling
        if not spelling.startswith("ax.")
        else f"use {spelling}"
    )
    message = _np_error(call)
    assert message.startswith(
        f"Cannot apply numpy.{name} to {SHOWN}: numpy would drop the axes ({fix}"
    ), message
    assert message.endswith(VALUES)
    with pytest.raises(TypeError, match=re.escape(message)):  # the same under jit
        jax.jit(lambda t: call(t))(x23())


def test_the_quoted_concatenate() -> None:
    assert _np_error(lambda t: np.concatenate([t, t])) == (
        f"Cannot apply numpy.concatenate to {SHOWN}: numpy would drop the axes (use "
        f"ax.concat(ts, Axis), which keeps the axes{VALUES}"
    )


def test_np_where_keeps_the_axes_and_sizes_read_the_storage_order() -> None:
    t = x23()
    out = np.where(t > 2.0, t, ax.negative(t))
    assert isinstance(out, ax.Tensor) and out.axes == (Batch, Pixel)
    np.testing.assert_array_equal(np.asarray(out), [[-0.0, -1.0, -2.0], [3.0, 4.0, 5.0]])
    assert (np.shape(t), np.ndim(t), np.size(t)) == ((2, 3), 2, 6)
    np.testing.assert_allclose(t, np.arange(6.0).reshape(2, 3))  # np.testing still reads values


@pytest.mark.parametrize("convert", [jnp.asarray, jnp.array], ids=["asarray", "array"])
def test_jnp_asarray_names_t_array(convert: Callable[[Any], Any]) -> None:
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"Cannot convert {SHOWN} to a JAX array implicitly (jnp.asarray, jnp.array, "
            "np.result_type: the axes would be lost): use t.array, the jax.Array with its "
            "dimensions in the order of t.axes (t.array.dtype for its numpy dtype), or the "
            "axjax op, which keeps the axes (docs/ops.md lists them)"
        ),
    ):
        convert(x23())
    assert jnp.asarray(x23().array).shape == (2, 3)  # the fix


def test_without_the_protocol_numpy_calls_return_bare_arrays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The mutation test: without ``Tensor.__array_function__``, the calls above silently
    give bare arrays (or numpy's own errors), never the axjax spelling."""
    monkeypatch.delattr(ax.Tensor, "__array_function__")
    named = []  # calls that still name the axjax spelling (numpy's ufunc path: np.sum)
    for name, (call, _) in CALLS.items():
        try:
            out = call(x23())
        except Exception as e:
            if "ax." in str(e):
                named.append(name)
        else:
            assert not isinstance(out, ax.Tensor), name  # a bare array (or a bool)
    assert len(named) <= 4, named


# ----------------------------------------------------------------------- jax.numpy
#: jax.numpy functions that read only the sizes, or take no array: their results hold no
#: values of the tensor (index tables from its shape, a context manager, a wrapper)
JNP_SHAPE_ONLY = frozenset(
    {
        "ndim",
        "shape",
        "size",
        "isscalar",
        "iterable",
        "tril_indices_from",
        "triu_indices_from",
        "printoptions",
        "vectorize",
    }
)
JNP_FUNCTIONS = sorted(
    n
    for n in dir(jnp)
    if not n.startswith("_")
    and callable(getattr(jnp, n))
    and not isinstance(getattr(jnp, n), type)
    and n not in ("load", "save", "savez", "fromfile")  # files, not arrays
)


def _bare_results(until: str | None = None) -> list[str]:
    """The jax.numpy functions that, given a Tensor, return array values without the axes
    (in alphabetical order; with ``until``, up to that one: the functions after it are not
    called)."""
    bare = []
    for name in JNP_FUNCTIONS:
        if name in JNP_SHAPE_ONLY:
            continue
        try:
            out = getattr(jnp, name)(x23())
        except Exception:
            continue
        if any(isinstance(v, (jax.Array, np.ndarray)) for v in jax.tree.leaves(out)):
            bare.append(name)
            if name == until:
                break
    return bare


def test_no_jax_numpy_function_returns_a_bare_array() -> None:
    """Generated over every public function of jax.numpy: given a Tensor each one raises
    (JAX's message, or axjax's for jnp.asarray/jnp.array), or reads only the sizes."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # JAX's "in a future release"
        assert _bare_results() == []
    with pytest.raises(TypeError, match=r"exp requires ndarray or scalar arguments, got <class"):
        jnp.exp(x23())  # the example: JAX's message (docs/tensors.md says why)
    assert not hasattr(ax.Tensor, "__jax_array__")


def test_with_jax_array_the_named_errors_would_be_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """Why a Tensor has no ``__jax_array__`` (docs/tensors.md, "jax.numpy on a Tensor"): with
    it, jax.numpy functions return bare arrays and ``jax_array + t`` skips the Tensor's own
    operator and its error. The generated check above fails then."""
    with pytest.raises(TypeError, match=r"Cannot apply Add to jax.Array of shape \(2, 3\)"):
        jnp.ones((2, 3)) + x23()
    monkeypatch.setattr(ax.Tensor, "__jax_array__", lambda self: self.array, raising=False)
    out = jnp.ones((2, 3)) + x23()
    assert isinstance(out, jax.Array)  # no error, no axes
    # the generated check reports the example; it stops there, as every function
    # runs then (the whole list took 128 s on the loaded 2-core machine, up to exp 13 s)
    assert "exp" in _bare_results(until="exp")


def test_the_docs_list_the_jax_numpy_functions_with_an_ax_op() -> None:
    """docs/tensors.md names every jax.numpy function that has an ``ax`` op of the same name
    (generated from both modules: a new op or a new JAX function changes the list)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "tensors.md").read_text()
    section = text.split("### `jax.numpy` on a Tensor", 1)[1].split("\n#", 1)[0]
    listed = section.split("The `jax.numpy` functions with an `ax` op of the same name are", 1)[1]
    listed = listed.split("(`tests/core", 1)[0]
    both = sorted(
        n
        for n in JNP_FUNCTIONS
        if callable(getattr(ax, n, None)) and not isinstance(getattr(ax, n), type)
    )
    assert re.findall(r"`(\w+)`", listed) == both
