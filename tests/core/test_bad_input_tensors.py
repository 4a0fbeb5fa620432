"""Tensors meeting inputs they cannot take: numpy on the left, 64-bit dtypes without x64,
positional indexing and truth values, reprs of nested/stacked tensors, data that is not an
array. Each case computes the right thing or raises axjax's message (exact text here)."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from axjax.core._internal import trusted_tensor
from tests.axes import Batch, Pixel, Time

X64_HINT = (
    '(enable jax_enable_x64 for 64-bit types: jax.config.update("jax_enable_x64", '
    "True), or `with jax.enable_x64(True):`)"
)


def x23() -> ax.Tensor[ax.F32, Batch, Pixel]:
    return ax.tensor(jnp.arange(6.0).reshape(2, 3), Batch, Pixel, dtype=ax.F32)


def exactly(message: str) -> str:
    """The whole message (under jax.jit, JAX may append its note on filtered frames)."""
    return "(?s)^" + re.escape(message) + r"(\n-{20}\nFor simplicity, JAX .*)?$"


def both(f: Callable[[Any], Any], x: Any) -> Iterator[Any]:
    """``f(x)`` eagerly, then under ``jax.jit``."""
    yield f(x)
    yield jax.jit(f)(x)


def same(a: ax.Tensor[Any, *tuple[Any, ...]], b: ax.Tensor[Any, *tuple[Any, ...]]) -> None:
    assert a.axes == b.axes and a.dtype is b.dtype
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


# ------------------------------------------------------------------ 1. numpy on the left
@pytest.mark.parametrize(
    "scalar",
    [
        np.sqrt(2.0),
        np.float32(1.5),
        np.float16(0.5),
        np.int64(3),
        np.int32(-2),
        np.bool_(True),
        np.asarray(2.0, jnp.bfloat16)[()],
    ],
)
def test_numpy_scalar_mixes_like_a_python_number(scalar: Any) -> None:
    number = scalar.item()
    for out in both(lambda t: scalar * t, x23()):
        same(out, x23() * number)
    for out in both(lambda t: t * scalar, x23()):
        same(out, x23() * number)
    same(scalar + x23(), number + x23())
    same(scalar - x23(), number - x23())
    same(scalar / (x23() + 1.0), number / (x23() + 1.0))
    same(abs(scalar) ** x23(), abs(number) ** x23())
    same(scalar < x23(), number < x23())
    same(x23() >= scalar, x23() >= number)


def test_numpy_scalar_keeps_the_tensor_dtype_and_its_checks() -> None:
    bf = x23().astype(ax.BF16)
    assert (np.float32(2.0) * bf).dtype is ax.BF16
    assert (np.sqrt(2.0) * x23()).array.dtype == np.float32
    ints = ax.zeros((2,), Batch, dtype=ax.I32)
    with pytest.raises(
        ax.AxisError,
        match=exactly(
            "Cannot apply Add to Tensor[I32, Batch=2]: the float 0.5 cannot mix with I32 values "
            "(convert the tensor with astype(ax.F32))"
        ),
    ):
        np.float32(0.5) + ints


@pytest.mark.parametrize("array", [np.ones((2, 3)), jnp.ones((2, 3))], ids=["numpy", "jax"])
def test_array_on_the_left_is_refused(array: Any) -> None:
    name = "ndarray" if isinstance(array, np.ndarray) else "jax.Array"
    for op, word in (
        (lambda a, t: a + t, "Add"),
        (lambda a, t: a * t, "Multiply"),
        (lambda a, t: a - t, "Subtract"),
        (lambda a, t: a / t, "Divide"),
    ):
        msg = exactly(
            f"Cannot apply {word} to {name} of shape (2, 3): operands must be Tensors "
            "or Python numbers (wrap arrays with ax.tensor(array, *axes))"
        )
        with pytest.raises(TypeError, match=msg):
            op(array, x23())
        with pytest.raises(TypeError, match=msg):
            jax.jit(lambda t, op=op: op(array, t))(x23())


def test_array_on_the_left_wrapped_works() -> None:
    same(ax.tensor(np.ones((2, 3), np.float32), Batch, Pixel) + x23(), x23() + 1.0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            np.exp,
            "numpy.exp to Tensor[F32, Batch=2, Pixel=3]: numpy would drop the axes (use "
            "ax.exp, which keeps the axes",
        ),
        (
            np.abs,
            "numpy.absolute to Tensor[F32, Batch=2, Pixel=3]: numpy would drop the axes (use "
            "ax.abs, which keeps the axes",
        ),
        (
            np.add.reduce,
            "numpy.add.reduce to Tensor[F32, Batch=2, Pixel=3]: numpy would drop the axes "
            "(use ax.sum, which keeps the axes",
        ),
        (
            np.sum,
            "numpy.sum to Tensor[F32, Batch=2, Pixel=3]: numpy would drop the axes "
            "(use ax.sum(t, Axis), which keeps the axes",
        ),
        (
            np.isnan,
            "numpy.isnan to Tensor[F32, Batch=2, Pixel=3]: numpy would drop the axes (use "
            "the axjax op (docs/ops.md lists them)",
        ),
        (
            lambda t: np.ones((3, 2)) @ t,
            "numpy.matmul to Tensor[F32, Batch=2, Pixel=3]: numpy "
            "would drop the axes (use ax.matmul, which keeps the axes",
        ),
        (
            lambda t: np.add(t, 1.0, out=np.zeros((2, 3))),
            "numpy.add to Tensor[F32, Batch=2, "
            "Pixel=3]: numpy would drop the axes (use ax.add, which keeps the axes",
        ),
    ],
    ids=["exp", "abs", "add-reduce", "sum", "isnan", "matmul", "add-out"],
)
def test_numpy_ufuncs_on_a_tensor_are_refused(call: Callable[[Any], Any], message: str) -> None:
    msg = exactly(
        f"Cannot apply {message}; np.asarray(t) gives the plain values in the order of t.axes)"
    )
    with pytest.raises(TypeError, match=msg):
        call(x23())
    with pytest.raises(TypeError, match=msg):
        jax.jit(lambda t: call(t))(x23())


def test_np_asarray_is_the_values_in_storage_order() -> None:
    t = x23()
    flipped = ax.transpose(t, Pixel, Batch)
    np.testing.assert_array_equal(np.asarray(t), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(np.asarray(flipped), np.arange(6.0).reshape(2, 3).T)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    with pytest.raises(
        TypeError,
        match=exactly(
            "Cannot convert Tensor[F32, Batch=2, Pixel=3] to a numpy array while it is traced "
            "(inside jax.jit, jax.grad, ...): its values are not known yet (use axjax ops on the "
            "tensor, and convert the result the transformed function returns)"
        ),
    ):
        jax.jit(lambda x: ax.tensor(np.asarray(x), Batch, Pixel))(t)


# ------------------------------------------------------------------ 2. 64-bit dtypes
@pytest.fixture
def x64() -> Iterator[None]:
    before = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)


def _make64(key: jax.Array) -> list[tuple[str, str, str, Callable[[], Any]]]:
    return [
        ("zeros", "F64", "F32", lambda: ax.zeros((2,), Batch, dtype=ax.F64)),
        ("ones", "F64", "F32", lambda: ax.ones((2,), Batch, dtype=ax.F64)),
        ("full", "F64", "F32", lambda: ax.full((2,), Batch, value=0.5, dtype=ax.F64)),
        ("normal", "F64", "F32", lambda: ax.normal(key, (2,), Batch, dtype=ax.F64)),
        ("uniform", "F64", "F32", lambda: ax.uniform(key, (2,), Batch, dtype=ax.F64)),
        (
            "randint",
            "I64",
            "I32",
            lambda: ax.randint(key, (2,), Batch, minval=0, maxval=5, dtype=ax.I64),
        ),
        ("arange", "I64", "I32", lambda: ax.arange(Time, 3, dtype=ax.I64)),
        ("astype", "F64", "F32", lambda: x23().astype(ax.F64)),
        ("astype", "I64", "I32", lambda: ax.astype(x23(), ax.I64)),
    ]


def test_64_bit_without_x64_is_an_error(key: jax.Array) -> None:
    assert not jax.config.read("jax_enable_x64")
    for where, asked, made, make in _make64(key):
        with pytest.raises(
            TypeError, match=exactly(f"{where}: asked for {asked} but JAX made {made} {X64_HINT}")
        ):
            make()
    with pytest.raises(
        TypeError, match=exactly(f"astype: asked for F64 but JAX made F32 {X64_HINT}")
    ):
        jax.jit(lambda t: t.astype(ax.F64))(x23())
    with (
        pytest.raises(
            TypeError, match=exactly(f"tensor: asked for F64 but JAX made F32 {X64_HINT}")
        ),
        pytest.warns(UserWarning),
    ):
        ax.tensor([1.0], Batch, dtype=ax.F64)
    # a graph may be built with F64; making its values without x64 is the same error
    x = ax.Input(ax.F32, Batch)
    run = ax.compile(x.astype(ax.F64), inputs=[x])
    with pytest.raises(
        TypeError,
        match="^"
        + re.escape(f"astype: asked for F64 but JAX made F32 {X64_HINT}\nwhile running graph node"),
    ):
        run(ax.ones((2,), Batch))


@pytest.mark.usefixtures("x64")
def test_64_bit_with_jax_enable_x64(key: jax.Array) -> None:
    for _, asked, _, make in _make64(key):
        t = make()
        assert t.dtype is getattr(ax, asked)
        assert t.array.dtype == np.dtype(asked.replace("F", "float").replace("I", "int"))
    out = jax.jit(lambda t: t.astype(ax.F64) * 2.0)(x23())
    assert out.dtype is ax.F64 and out.array.dtype == np.float64
    assert ax.tensor([1.0], Batch, dtype=ax.F64).dtype is ax.F64


def test_64_bit_in_enable_x64_context(key: jax.Array) -> None:
    with jax.enable_x64(True):
        for _, asked, _, make in _make64(key):
            assert make().dtype is getattr(ax, asked)
    with pytest.raises(TypeError, match="^zeros: asked for F64 but JAX made F32"):
        ax.zeros((2,), Batch, dtype=ax.F64)


# ------------------------------------------------------------------ 3. positions, truth values
@pytest.mark.parametrize(
    ("index", "shown", "fix"),
    [
        (
            lambda t: t[0],
            "t[0]",
            "use ax.index(t, Batch, 0) for entry 0 along Batch, or "
            "ax.slice(t, Batch, start, stop) for a range",
        ),
        (
            lambda t: t[1:3],
            "t[1:3]",
            "use ax.slice(t, Batch, 1, 3) for that range along Batch, or "
            "ax.index(t, Batch, i) for one entry",
        ),
        (
            lambda t: t[:, 0],
            "t[:, 0]",
            "use ax.index(t, Batch, i) for entry i along Batch, or "
            "ax.slice(t, Batch, start, stop) for a range",
        ),
        (
            lambda t: list(t),
            "t[0]",
            "use ax.index(t, Batch, 0) for entry 0 along Batch, or "
            "ax.slice(t, Batch, start, stop) for a range",
        ),
    ],
    ids=["int", "slice", "tuple", "iterate"],
)
def test_positional_indexing_is_refused(index: Callable[[Any], Any], shown: str, fix: str) -> None:
    msg = exactly(
        f"Cannot index Tensor[F32, Batch=2, Pixel=3] by position ({shown}): axjax "
        f"picks entries by axis name, not position ({fix})"
    )
    with pytest.raises(TypeError, match=msg):
        index(x23())
    with pytest.raises(TypeError, match=msg):
        jax.jit(index)(x23())


def test_indexing_a_rank_0_tensor_is_refused() -> None:
    with pytest.raises(
        TypeError,
        match=exactly(
            "Cannot index Tensor[F32] by position (t[0]): a rank-0 tensor has no axes (read its "
            "value with t.item())"
        ),
    ):
        cast(Any, ax.tensor(1.0))[0]  # refused statically too: __getitem__ takes Never


BOOL_FIX = (
    "reduce it first: ax.max(t, (Batch, Pixel)) is true if any entry is, "
    "ax.min(t, (Batch, Pixel)) if all are; or compare a reduction, e.g. "
    "ax.sum(t, (Batch, Pixel)) > 0"
)
NUMBER_FIX = (
    "reduce it first, e.g. ax.sum(t, (Batch, Pixel)), ax.mean or ax.max, or pick one "
    "entry with ax.index"
)


@pytest.mark.parametrize(
    ("convert", "to", "fix"),
    [
        (bool, "bool", BOOL_FIX),
        (float, "float", NUMBER_FIX),
        (int, "int", NUMBER_FIX),
    ],
)
def test_python_values_of_a_tensor_with_axes(
    convert: Callable[[Any], Any], to: str, fix: str
) -> None:
    msg = exactly(
        f"Cannot convert Tensor[F32, Batch=2, Pixel=3] to {to}: it has 6 elements, not one ({fix})"
    )
    with pytest.raises(TypeError, match=msg):
        convert(x23())
    with pytest.raises(TypeError, match=msg):
        jax.jit(convert)(x23())
    mask = x23() > 2.0
    if to == "bool":
        with pytest.raises(TypeError, match=re.escape("to bool: it has 6 elements, not one")):
            bool(mask)
        assert bool(ax.max(mask, (Batch, Pixel))) and not bool(ax.min(mask, (Batch, Pixel)))


def test_python_values_of_one_element_with_axes() -> None:
    one = ax.ones((1,), Batch)
    for convert, to in ((bool, "bool"), (float, "float"), (int, "int")):
        with pytest.raises(
            TypeError,
            match=exactly(
                f"Cannot convert Tensor[F32, Batch=1] to {to}: it has axes Batch (read its one "
                "value with t.item(), or take the axes off with ax.squeeze)"
            ),
        ):
            convert(one)
    assert one.item() == 1.0 and float(ax.squeeze(one, Batch)) == 1.0
    with pytest.raises(
        TypeError,
        match=exactly(
            "Cannot read Tensor[F32, Time=3] with item(): it has 3 elements, not one (reduce it "
            "first, e.g. ax.sum(t, Time), ax.mean or ax.max, or pick one entry with ax.index)"
        ),
    ):
        ax.ones((3,), Time).item()


def test_python_values_of_rank_0_tensors() -> None:
    s = ax.sum(x23(), (Batch, Pixel))
    assert float(s) == 15.0 and int(s) == 15 and bool(s) and s.item() == 15.0
    # reverse-mode tracers of concrete values keep JAX's rules (here: concrete, so allowed)
    assert (
        ax.grad(lambda t: ax.sum(t * (2.0 if bool(ax.tensor(1.0) > 0.0) else 3.0), (Batch, Pixel)))(
            x23()
        ).array[0, 0]
        == 2.0
    )


# ------------------------------------------------------------------ 4. repr never raises
def _g(x: Any) -> Any:
    return x * x


def test_repr_of_a_jacobian_and_a_hessian() -> None:
    x = ax.tensor(jnp.arange(3.0), Time)
    with ax.jax_autodiff():
        jac = jax.jacobian(_g)(x)
        hess = jax.hessian(lambda t: ax.sum(t * t * t, Time))(x)
    tail = (
        " of all levels, outermost first; jax.jacobian and jax.hessian nest the argument's "
        "Tensor in the result's (name the dimensions with "
        "ax.tensor(jax.tree_util.tree_leaves(t)[0], *axes), giving a repeated axis a new "
        "label)"
    )
    jac_text = (
        "Tensor[F32, Time](array is nested: it holds a Tensor[Time], which holds an "
        "array of shape (3, 3) for the axes (Time, Time)" + tail + ")"
    )
    assert repr(jac) == jac_text
    assert html_text(jac) == html.escape(jac_text)
    assert repr(hess) == (
        "Tensor[F32](array is nested: it holds a Tensor[Time], which holds a "
        "Tensor[Time], which holds an array of shape (3, 3) for the axes "
        "(Time, Time)" + tail + ")"
    )
    assert "array is nested" in hess._repr_html_()
    # what to do instead: name the leaf's dimensions
    named = ax.tensor(jax.tree_util.tree_leaves(jac)[0], Batch, Time)
    np.testing.assert_allclose(np.asarray(named), np.diag([0.0, 2.0, 4.0]))
    with pytest.raises(
        TypeError,
        match=re.escape(
            "Cannot apply Add to Tensor[F32, Time]: array is nested: it holds a Tensor[Time]"
        ),
    ):
        jac + jac


def test_repr_of_stacked_and_lost_dimensions() -> None:
    stacked = jax.vmap(lambda a: ax.tensor(a, Pixel))(jnp.ones((4, 3)))
    text = "Tensor[F32, Pixel](stacked: array of shape (4, 3), 1 unnamed leading dimension (4,))"
    assert repr(stacked) == text and html_text(stacked) == html.escape(text)
    lost = trusted_tensor(jnp.ones(3), (Batch, Pixel))
    text = (
        "Tensor[F32, Batch, Pixel](array of shape (3,) has lost 1 named dimension: a raw "
        "jax.vmap or jax.lax.scan sliced a named axis (use ax.vmap(f, over=Axis)))"
    )
    assert repr(lost) == text and html_text(lost) == html.escape(text)


def html_text(t: Any) -> str:
    out: str = t._repr_html_()
    assert out.startswith("<code>") and out.endswith("</code>")
    return out[len("<code>") : -len("</code>")]


class _Odd:
    """An array-like leaf whose ``ndim`` and ``shape`` disagree."""

    ndim = 2
    shape = (1, 2, 3)
    dtype = np.dtype(np.float32)


def test_repr_never_raises() -> None:
    odd = trusted_tensor(_Odd(), (Batch, Pixel))
    assert repr(odd) == (
        "Tensor[Batch, Pixel](unprintable: ValueError: zip() argument 2 is longer than argument 1)"
    )
    assert html_text(odd) == html.escape(repr(odd))
    assert repr(trusted_tensor(None, (Batch,))) == "Tensor[Batch](None)"


# ------------------------------------------------------------------ 5. data that is no array
@pytest.mark.parametrize(
    ("data", "axes", "error", "message"),
    [
        (
            [[1, 2], [3]],
            (Batch, Pixel),
            ValueError,
            "tensor: the nested lists are ragged: after shape (2,) the lists have lengths 2 and 1; "
            "every list at one depth needs the same length (pad them, or make one tensor per row)",
        ),
        (
            [[[1], [2]], [[3], [4, 5]]],
            (Batch, Pixel, Time),
            ValueError,
            "tensor: the nested lists are ragged: after shape (2, 2) the lists have "
            "lengths 1 and 2; "
            "every list at one depth needs the same length (pad them, or make one tensor per row)",
        ),
        (
            [[1, 2], 3],
            (Batch, Pixel),
            ValueError,
            "tensor: the nested lists are ragged: after shape (2,) some entries are lists and some "
            "are not; every list at one depth needs the same length (pad them, or make one tensor "
            "per row)",
        ),
        (
            np.array([object()]),
            (Batch,),
            TypeError,
            "tensor: a numpy array of dtype object cannot be a tensor: axjax holds numbers and "
            "booleans (convert it first, e.g. np.asarray(data, dtype=np.float32))",
        ),
        (
            np.array(["a", "b"]),
            (Batch,),
            TypeError,
            "tensor: a numpy array of dtype <U1 cannot be a tensor: "
            "axjax holds numbers and booleans "
            "(convert it first, e.g. np.asarray(data, dtype=np.float32))",
        ),
        (
            [1.0, "one"],
            (Batch,),
            TypeError,
            "tensor: entry 'one' (str) is not a number; a tensor's data is numbers or booleans",
        ),
        (
            [ax.ones((2,), Pixel), ax.ones((2,), Pixel)],
            (Batch, Pixel),
            TypeError,
            "tensor: the list holds Tensors; stack them along a new axis with "
            "ax.stack([t1, t2, ...], "
            "Axis), or wrap their arrays (t.array)",
        ),
        (
            None,
            (),
            TypeError,
            "tensor: cannot make an array from NoneType (None is not a valid value for jnp.array); "
            "pass a number, nested lists of numbers or a numpy/JAX array",
        ),
    ],
    ids=["ragged", "ragged-deep", "mixed", "object", "str", "str-entry", "tensors", "none"],
)
def test_data_that_cannot_be_a_tensor(
    data: Any, axes: tuple[type[ax.Axis], ...], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=exactly(message)):
        ax.tensor(data, *axes)

    def inside(t: Any) -> Any:
        ax.tensor(data, *axes)
        return t

    with pytest.raises(error, match=exactly(message)):
        jax.jit(inside)(x23())


def test_good_nested_lists_still_work() -> None:
    t = ax.tensor([[1, 2], [3, 4]], Batch, Pixel)
    assert t.dtype is ax.I32 and t.sizes == {Batch: 2, Pixel: 2}
    assert ax.tensor([np.float32(1), 2.5], Batch).dtype is ax.F32
    assert ax.tensor([], Batch).sizes == {Batch: 0}


# ----------------------------------------------------------------- JAX transformations' edges


@pytest.mark.parametrize("transform", ["jvp", "jacfwd"])
def test_forward_mode_without_jax_autodiff_says_to_use_it(transform):
    x = ax.tensor(jnp.arange(3.0), Batch)

    def f(a: jax.Array) -> jax.Array:
        return ax.sum(ax.exp(ax.tensor(a, Batch)), Batch).array

    run = {
        "jvp": lambda: jax.jvp(f, (x.array,), (x.array,)),
        "jacfwd": lambda: jax.jacfwd(f)(x.array),
    }[transform]
    with pytest.raises(
        ax.TransformError,
        match=re.escape(
            "Cannot apply Exp under forward-mode autodiff (jax.jvp, jax.jacfwd, jax.hessian, "
            "jax.linearize): axjax ops differentiate with their own backward, a "
            "jax.custom_vjp, which JAX can only run in reverse mode (run it inside `with "
            "ax.jax_autodiff():`, where ops lower to plain JAX autodiff with the same values "
            "and gradients)"
        ),
    ):
        run()
    with ax.jax_autodiff():
        run()  # the fix works


@pytest.mark.parametrize(
    ("axes", "hint"),
    [
        (
            (),
            "Tensor[F32] is a rank-0 axjax Tensor, not a JAX array: JAX transformations and "
            "functions that take arrays (jax.grad's result, jax.lax) need .array (use ax.grad or "
            "ax.value_and_grad, which take a rank-0 Tensor result, or return its .array)",
        ),
        (
            (Batch,),
            "Tensor[F32, Batch=3] is axjax Tensor, not a JAX array: JAX transformations "
            "and functions that take arrays (jax.grad's result, jax.lax) need .array "
            "(reduce it to rank 0 first (ax.sum or ax.mean over its axes), or pass its "
            ".array)",
        ),
    ],
)
def test_jax_grad_of_a_tensor_result_explains_what_to_return(axes, hint):
    x = ax.tensor(jnp.arange(3.0), Batch)

    def f(t: Any) -> Any:
        return ax.sum(t * t, Batch) if not axes else t * t

    with pytest.raises(
        TypeError, match="^Gradient only defined for scalar-output functions"
    ) as info:
        jax.grad(f)(x)
    assert isinstance(info.value.__cause__, ax.TransformError)
    assert str(info.value.__cause__) == hint
    if not axes:
        np.testing.assert_allclose(ax.grad(f)(x).array, [0.0, 2.0, 4.0])  # the fix


def test_a_compiled_graph_input_of_64_bits_without_x64_says_to_enable_it():
    x = ax.Input(ax.F64, Batch)
    predict = ax.compile(ax.exp(x), inputs=[x])
    with pytest.raises(
        ax.AxisError,
        match=re.escape(
            "Cannot call the compiled graph: input input0 is Tensor[F64, Batch=?], got "
            "Tensor[F32, Batch=3]: the Input is declared F64, and its data became F32 "
            "because jax_enable_x64 is off (JAX makes no F64 then: enable it with "
            'jax.config.update("jax_enable_x64", True) before building the data, or '
            "declare the Input F32)"
        ),
    ):
        predict(ax.tensor(np.arange(3.0), Batch))  # float64 data
