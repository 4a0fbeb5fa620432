"""``@ax.check_axes``: annotations checked against the actual tensors at each call."""

from __future__ import annotations

from typing import Any, TypeVar, TypeVarTuple, final

import jax
import pytest

import axjax as ax
from axjax import F32, I32, Tensor
from axjax.core import _arrays, _check_axes


@final
class N(ax.Axis): ...


@final
class A(ax.Axis): ...


@final
class B(ax.Axis): ...


@final
class C(ax.Axis): ...


D = TypeVar("D", bound=ax.DType)
In = TypeVar("In")
Out = TypeVar("Out")
Bs = TypeVarTuple("Bs")


@ax.check_axes
def affine(x: Tensor[D, *Bs, In], w: Tensor[D, In, Out]) -> Tensor[D, *Bs, Out]:
    return ax.contract(x, w, over=w.axes[0])


def test_matching_calls_pass_through() -> None:
    y = affine(ax.ones((2, 5, 3), N, C, A), ax.ones((3, 4), A, B))
    assert y.axes == (N, C, B)
    assert affine(ax.ones((3,), A), ax.ones((3, 4), A, B)).axes == (B,)  # *Bs empty


def test_a_type_variable_binds_once_per_call() -> None:
    with pytest.raises(ax.AxisError) as e:
        affine(ax.ones((2, 3), N, A), ax.ones((4, 3), B, A))
    assert str(e.value) == (
        "Cannot apply affine to Tensor[F32, B=4, A=3]: argument w should be "
        "Tensor[D=F32, In=A, Out], but In is A elsewhere in this call and B at axis 0"
    )


def test_the_dtype_variable_binds_too() -> None:
    with pytest.raises(
        ax.AxisError,
        match=r"D is F32 elsewhere in this call and I32 as its "
        r"dtype \(convert it with astype\)",
    ):
        affine(ax.ones((2, 3), N, A), ax.ones((3, 4), A, B, dtype=I32))


def test_too_few_axes() -> None:
    with pytest.raises(ax.AxisError) as e:
        affine(ax.ones(()), ax.ones((3, 4), A, B))
    assert str(e.value) == (
        "Cannot apply affine to Tensor[F32]: argument x should be "
        "Tensor[D=F32, *Bs, In], but it has 0 axes"
    )


@ax.check_axes
def pair(x: Tensor[F32, *Bs, A], y: Tensor[F32, *Bs, B]) -> Tensor[F32, *Bs]:
    return ax.sum(x, A)


def test_star_binds_the_same_run_in_every_argument() -> None:
    assert pair(ax.ones((2, 3), N, A), ax.ones((2, 4), N, B)).axes == (N,)
    with pytest.raises(
        ax.AxisError,
        match=r"\*Bs is \(N\) elsewhere in this call and \(C\) "
        r"here",
    ):
        pair(ax.ones((2, 3), N, A), ax.ones((2, 4), C, B))


def test_labels_and_rank_must_match_exactly() -> None:
    @ax.check_axes
    def head(x: Tensor[F32, N, A]) -> Tensor[F32, A]:
        return ax.index(x, N, 0)

    with pytest.raises(
        ax.AxisError,
        match=r"should be Tensor\[F32, N, A\], but it has C at "
        r"axis 1",
    ):
        head(ax.ones((2, 3), N, C))
    with pytest.raises(ax.AxisError, match="but it has 1 axis$"):
        head(ax.ones((3,), A))


def test_a_wrong_result_is_reported() -> None:
    @ax.check_axes
    def wrong(x: Tensor[F32, N, A]) -> Tensor[F32, A, N]:
        return x  # type: ignore[return-value]

    with pytest.raises(ax.AxisError) as e:
        wrong(ax.ones((2, 3), N, A))
    assert str(e.value) == (
        "Cannot apply test_a_wrong_result_is_reported.<locals>.wrong to "
        "Tensor[F32, N=2, A=3]: its result should be Tensor[F32, A, N], but "
        "it has N at axis 0"
    )


def test_any_and_unannotated_arguments_are_not_checked() -> None:
    @ax.check_axes
    def loose(x: Tensor[Any, *tuple[Any, ...]], scale: float, y: Any) -> Tensor[Any, Any]:
        return ax.sum(x, A) * scale

    assert loose(ax.ones((2, 3), N, A, dtype=F32), 2.0, "anything").axes == (N,)


def test_a_non_tensor_argument_is_a_type_error() -> None:
    with pytest.raises(
        TypeError,
        match=r"Cannot apply affine: argument x should be "
        r"Tensor\[D, \*Bs, In\], got ndarray",
    ):
        affine(jax.numpy.ones((2, 3)).__array__(), ax.ones((3, 4), A, B))


def test_graph_nodes_are_checked_like_tensors() -> None:
    y = affine(ax.Input(ax.F32, N, A), ax.Param(ax.ones((3, 4), A, B)))
    assert y.axes == (N, B)


def test_under_jit_the_check_runs_once_per_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = _check_axes._Call.match

    def counting(self: Any, *args: Any) -> None:
        calls.append(args[1])
        real(self, *args)

    monkeypatch.setattr(_check_axes._Call, "match", counting)
    f = jax.jit(affine)
    w = ax.ones((3, 4), A, B)
    f(ax.ones((2, 3), N, A), w)
    f(ax.ones((2, 3), N, A), w)
    assert calls == ["argument x", "argument w", "its result"]  # one trace, three checks
    f(ax.ones((5, 3), N, A), w)  # new sizes: a new trace, checked again
    assert len(calls) == 6


# ---------------------------------------------------------------- sizes, through jaxtyping
def test_an_axis_has_one_size_across_the_arguments() -> None:
    with pytest.raises(ax.AxisError) as e:
        affine(ax.ones((2, 3), N, A), ax.ones((5, 4), A, B))
    assert str(e.value) == (
        "Cannot apply affine to Tensor[F32, A=5, B=4]: argument w should be "
        "Tensor[D=F32, In=A, Out=B], but A has size 3 in argument x and 5 at axis 0"
    )
    with pytest.raises(ax.AxisError, match=r"N has size 2 in argument x and 7 at axis 0$"):
        pair(ax.ones((2, 3), N, A), ax.ones((7, 4), N, B))  # an axis inside *Bs too
    with pytest.raises(ax.AxisError, match=r"A has size 3 in argument x and 5 at axis 0$"):
        affine(x=ax.ones((2, 3), N, A), w=ax.ones((5, 4), A, B))  # keywords: the same


def test_the_result_has_the_sizes_of_the_arguments() -> None:
    @ax.check_axes
    def grow(x: Tensor[F32, N, A]) -> Tensor[F32, N, A]:
        return ax.ones((x.sizes[N] + 1, x.sizes[A]), N, A)

    with pytest.raises(ax.AxisError) as e:
        grow(ax.ones((2, 3), N, A))
    assert str(e.value) == (
        "Cannot apply test_the_result_has_the_sizes_of_the_arguments.<locals>.grow to "
        "Tensor[F32, N=3, A=3]: its result should be Tensor[F32, N, A], but N has size 2 in "
        "argument x and 3 at axis 0"
    )


def test_sizes_are_bound_per_call() -> None:
    assert affine(ax.ones((2, 3), N, A), ax.ones((3, 4), A, B)).sizes == {N: 2, B: 4}
    assert affine(ax.ones((6, 5), N, A), ax.ones((5, 1), A, B)).sizes == {N: 6, B: 1}

    @ax.check_axes
    def outer(x: Tensor[F32, N, A]) -> Tensor[F32, N, B]:
        inner = affine(ax.ones((7, 3), N, A), ax.ones((3, 4), A, B))  # its own N
        assert inner.sizes[N] == 7
        return affine(x, ax.ones((3, 4), A, B))

    assert outer(ax.ones((2, 3), N, A)).sizes == {N: 2, B: 4}


def test_axes_with_the_same_name_do_not_share_a_size() -> None:
    def make() -> type[ax.Axis]:
        @final
        class N(ax.Axis): ...  # same __name__ as the module's N, another class

        return N

    other = make()
    assert _arrays.dim_name(other) != _arrays.dim_name(N)
    assert _arrays.dim_name(other).isidentifier()
    y = pair(ax.ones((2, 5, 3), N, other, A), ax.ones((2, 5, 4), N, other, B))
    assert y.sizes == {N: 2, other: 5}

    @ax.check_axes
    def both(x: Tensor[F32, N, A], y: Tensor[F32, Any, A]) -> Tensor[F32, A]:
        return ax.sum(x, N)

    assert both(ax.ones((2, 3), N, A), ax.ones((9, 3), other, A)).sizes == {A: 3}


def test_dimension_names_are_jaxtyping_names() -> None:
    odd = type("_odd name", (ax.Axis,), {})
    name = _arrays.dim_name(odd)
    assert name.isidentifier() and not name.startswith("_")
    assert _arrays.dims((N, A)) == f"{_arrays.dim_name(N)} {_arrays.dim_name(A)}"
    assert _arrays.dims((N, A), (False, True)) == f"_ {_arrays.dim_name(A)}"
    x = jax.numpy.ones((2, 3))
    assert isinstance(x, _arrays.array_type(F32, N, odd))
    assert not isinstance(x, _arrays.array_type(I32, N, A))
    assert not isinstance(x, _arrays.array_type(None, N))


def test_raw_arrays_inside_the_call_share_its_sizes() -> None:
    @ax.check_axes
    def f(x: Tensor[F32, N, A], raw: jax.Array) -> Tensor[F32, N, A]:
        assert isinstance(x.array, _arrays.array_type(F32, N, A))
        if not isinstance(raw, _arrays.array_type(None, N)):
            raise ValueError("raw has another N")
        return x

    f(ax.ones((2, 3), N, A), jax.numpy.zeros((2,)))
    with pytest.raises(ValueError, match="raw has another N"):
        f(ax.ones((2, 3), N, A), jax.numpy.zeros((4,)))


def test_sizes_are_checked_while_jit_traces() -> None:
    f = jax.jit(affine)
    with pytest.raises(ax.AxisError, match=r"A has size 3 in argument x and 5 at axis 0"):
        f(ax.ones((2, 3), N, A), ax.ones((5, 4), A, B))
    assert f(ax.ones((2, 3), N, A), ax.ones((3, 4), A, B)).sizes == {N: 2, B: 4}


def test_graph_nodes_check_the_sizes_they_know() -> None:
    y = affine(ax.Input(ax.F32, N, A, sizes=(None, 3)), ax.Param(ax.ones((3, 4), A, B)))
    assert y.axes == (N, B)
    with pytest.raises(ax.AxisError, match=r"A has size 5 in argument x and 3 at axis 0$"):
        affine(ax.Input(ax.F32, N, A, sizes=(None, 5)), ax.Param(ax.ones((3, 4), A, B)))
