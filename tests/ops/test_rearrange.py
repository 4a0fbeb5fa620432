"""``ax.rearrange`` by axis names against the explicit ``unflatten``/``flatten``/``transpose``
compositions (bit for bit), its errors by their text, and ``ax.contract(..., out=)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, final

import numpy as np
import pytest

import axjax as ax
from axjax.nn import Head, HeadDim

AnyT = ax.Tensor[Any, *tuple[Any, ...]]


@final
class Batch(ax.Axis): ...


@final
class Pos(ax.Axis): ...


@final
class Embed(ax.Axis): ...


@final
class Height(ax.Axis): ...


@final
class Width(ax.Axis): ...


@final
class Pixel(ax.Axis): ...


@final
class Chan(ax.Axis): ...


def _x(shape: tuple[int, ...], *axes: type[ax.Axis]) -> AnyT:
    data = np.random.default_rng(len(shape)).normal(size=shape).astype(np.float32)
    return ax.tensor(data, *axes)


X = _x((2, 5, 8), Batch, Pos, Embed)
Y = _x((2, 4, 5, 2), Batch, Head, Pos, HeadDim)
IMG = _x((2, 3, 4, 6), Batch, Height, Width, Chan)

#: (x, pattern, the classes passed after it, keywords, the explicit composition)
CASES: list[tuple[AnyT, str, tuple[type[ax.Axis], ...], dict[str, Any], Callable[[], AnyT]]] = [
    (
        X,
        "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim",
        (Head, HeadDim),
        {"Head": 4},
        lambda: ax.transpose(
            ax.unflatten(X, Embed, (Head, HeadDim), (4, 2)), Batch, Head, Pos, HeadDim
        ),
    ),
    (
        X,
        "Batch Pos Embed=(Head HeadDim) -> Batch Pos Head HeadDim",
        (),
        {"HeadDim": (HeadDim, 2), "Head": Head},
        lambda: ax.unflatten(X, Embed, (Head, HeadDim), (4, 2)),
    ),
    (
        Y,
        "Batch Head Pos HeadDim -> Batch Pos Embed=(Head HeadDim)",
        (Embed,),
        {},
        lambda: ax.flatten(ax.transpose(Y, Batch, Pos, Head, HeadDim), (Head, HeadDim), Embed),
    ),
    (
        Y,
        "Batch Head Pos HeadDim -> Batch Pos Embed=(HeadDim Head)",
        (),
        {"Embed": Embed},
        lambda: ax.flatten(ax.transpose(Y, Batch, Pos, HeadDim, Head), (HeadDim, Head), Embed),
    ),
    (X, "Batch Pos Embed -> Embed Batch Pos", (), {}, lambda: ax.transpose(X, Embed, Batch, Pos)),
    (X, "Batch Pos Embed -> Batch Pos Embed", (), {}, lambda: X),
    (
        IMG,
        "Batch Height Width Chan -> Batch Pixel=(Height Width) Chan",
        (Pixel,),
        {},
        lambda: ax.flatten(IMG, (Height, Width), Pixel),
    ),
    (
        IMG,
        "Batch Height Width Chan -> Chan Batch Pixel=(Width Height)",
        (Pixel,),
        {},
        lambda: ax.transpose(ax.flatten(IMG, (Width, Height), Pixel), Chan, Batch, Pixel),
    ),
    (
        X,
        "Pos Batch (Head HeadDim) -> Head Batch Pos HeadDim",  # left order free: by names
        (HeadDim,),
        {"Head": (Head, 2)},
        lambda: ax.transpose(
            ax.unflatten(X, Embed, (Head, HeadDim), (2, 4)), Head, Batch, Pos, HeadDim
        ),
    ),
    (
        X,
        "Batch Pos (Head HeadDim) -> Batch Pixel=(Pos Head) HeadDim",
        (Head, HeadDim, Pixel),
        {"Head": 4},
        lambda: ax.flatten(ax.unflatten(X, Embed, (Head, HeadDim), (4, 2)), (Pos, Head), Pixel),
    ),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_patterns_equal_the_explicit_compositions_bit_for_bit(case: int) -> None:
    x, pattern, new, kw, explicit = CASES[case]
    got, want = ax.rearrange(x, pattern, *new, **kw), explicit()
    assert got.axes == want.axes and got.shape == want.shape
    assert np.array_equal(np.asarray(got.array), np.asarray(want.array))
    assert got.array.dtype == want.array.dtype


def test_the_issue_example() -> None:
    y = ax.rearrange(X, "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim", Head, HeadDim, Head=4)
    assert y.axes == (Batch, Head, Pos, HeadDim) and y.shape == (2, 4, 5, 2)
    back = ax.rearrange(y, "Batch Head Pos HeadDim -> Batch Pos Embed=(Head HeadDim)", Embed)
    assert np.array_equal(np.asarray(back.array), np.asarray(X.array))


HH = (Head, HeadDim)

#: (pattern, the classes passed after it, keywords, the message)
ERRORS: list[tuple[str, tuple[type[ax.Axis], ...], dict[str, Any], str]] = [
    (
        "Batch Pos (Head Foo) -> Batch Head Pos Foo",
        (Head,),
        {"Head": 4},
        "unknown name Foo: not an axis of x (Batch, Pos, Embed) nor a class passed; pass it "
        "after the pattern (rearrange(x, pattern, Foo)) or as Foo=TheAxisClass",
    ),
    (
        "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim",
        (Head,),
        {"Head": 4},
        "unknown name HeadDim: not an axis of x (Batch, Pos, Embed) nor a class passed",
    ),
    (
        "Batch (Head HeadDim) -> Batch Head HeadDim",
        HH,
        {"Head": 4},
        "missing axis Embed: x has (Batch, Pos, Embed), the left side leaves Embed out",
    ),
    (
        "Batch Pos Chan -> Batch Pos Chan",
        (Chan,),
        {},
        "missing axis Chan: x has (Batch, Pos, Embed)",
    ),
    (
        "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim",
        HH,
        {"Head": 3},
        "inconsistent size: Embed (8) does not divide into (Head HeadDim) by 3",
    ),
    (
        "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim",
        HH,
        {"Head": 4, "HeadDim": 4},
        "inconsistent size: (Head HeadDim) is 16, but Embed has size 8",
    ),
    (
        "Batch Pos Embed -> Batch Pos",
        (),
        {},
        "missing axis Embed: the left side has it, the right not",
    ),
    (
        "Batch Pos (Head HeadDim) -> Batch Pos (Head HeadDim)",
        HH,
        {"Head": 4},
        "a merged group needs the new axis's name: Name=(Head HeadDim)",
    ),
    ("Batch Pos Embed -> Batch Pos Embed", (), {"Chan": 2}, "the keyword Chan= names no axis"),
    (
        "Batch Pos Embed -> Batch Pos Embed",
        (Chan,),
        {},
        "the axis class Chan names no axis of the pattern",
    ),
    (
        "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim",
        HH,
        {},
        "the group (Head HeadDim) needs the sizes of all but one of its axes (give Head=...)",
    ),
    (
        "Batch Pos Embed -> Batch Embed Pos",
        (),
        {"Embed": Chan},
        "Embed= is another class than the axis Embed it names",
    ),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_name_it(case: int) -> None:
    pattern, new, kw, message = ERRORS[case]
    with pytest.raises(ax.AxisError) as e:
        ax.rearrange(X, pattern, *new, **kw)
    assert str(e.value).startswith(f"Cannot rearrange by {pattern!r}: {message}")


def test_a_class_named_as_an_axis_of_x_must_be_that_axis() -> None:
    @final
    class Batch(ax.Axis): ...  # another class of the same name as X's Batch

    with pytest.raises(ax.AxisError, match="the class .*Batch is another class than the axis"):
        ax.rearrange(X, "Batch Pos Embed -> Pos Batch Embed", Batch)


def test_names_resolve_only_against_x_and_the_call() -> None:
    """A class the calling code sees under the name is not looked up (no frame inspection):
    the call means the same wherever it is written, as the plugin types it."""
    Pixel_ = Pixel  # noqa: F841 - visible in this scope, yet not passed
    with pytest.raises(ax.AxisError, match="unknown name Pixel"):
        ax.rearrange(IMG, "Batch Height Width Chan -> Batch Pixel=(Height Width) Chan")
    y = ax.rearrange(IMG, "Batch Height Width Chan -> Batch Pixel=(Height Width) Chan", Pixel)
    assert y.axes == (Batch, Pixel, Chan)


def test_a_keyword_class_may_alias_a_short_name() -> None:
    y = ax.rearrange(X, "B P (H D) -> B H P D", B=Batch, P=Pos, H=(Head, 4), D=HeadDim)
    assert y.axes == (Batch, Head, Pos, HeadDim)


def test_after_the_pattern_come_axis_classes() -> None:
    with pytest.raises(TypeError, match="after the pattern come the axis classes it names, got 4"):
        ax.rearrange(X, "Batch Pos Embed -> Batch Pos Embed", 4)  # type: ignore[arg-type]


def test_rearrange_in_a_graph() -> None:
    x = ax.Input(ax.F32, Batch, Pos, Embed, sizes={Embed: 8})  # Batch, Pos stay open
    y = ax.rearrange(x, "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim", *HH, Head=4)
    assert y.axes == (Batch, Head, Pos, HeadDim) and y.shape == (None, 4, None, 2)


def test_an_open_axis_split_needs_every_size() -> None:
    x = ax.Input(ax.F32, Batch, Pos, Embed)  # Embed open
    pattern = "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim"
    with pytest.raises(ax.AxisError, match="the size of Embed is open .*: give HeadDim=... as"):
        ax.rearrange(x, pattern, *HH, Head=4)
    y = ax.rearrange(x, pattern, *HH, Head=4, HeadDim=2)
    assert y.axes == (Batch, Head, Pos, HeadDim) and y.shape == (None, 4, None, 2)


# --------------------------------------------------------------------------- rearrange(out=)
def test_rearrange_out_names_the_result_and_changes_nothing() -> None:
    pattern = "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim"
    plain = ax.rearrange(X, pattern, *HH, Head=4)
    got = ax.rearrange(X, pattern, *HH, Head=4, out=(Batch, Head, Pos, HeadDim))
    assert got.axes == plain.axes and got.shape == plain.shape
    assert np.array_equal(np.asarray(got.array), np.asarray(plain.array))
    x = ax.Input(ax.F32, Batch, Pos, Embed, sizes={Embed: 8})  # in a graph, too
    y = ax.rearrange(x, pattern, *HH, Head=4, out=(Batch, Head, Pos, HeadDim))
    assert y.axes == (Batch, Head, Pos, HeadDim) and y.shape == (None, 4, None, 2)


@pytest.mark.parametrize(
    ("out", "gives"),
    [
        ((Batch, Pos, Embed), "(Pos, Batch, Embed)"),  # the same axes, another order
        ((Pos, Batch), "(Pos, Batch, Embed)"),  # one left out
        ((Pos, Batch, Embed, Chan), "(Pos, Batch, Embed)"),  # one too many
    ],
)
def test_rearrange_out_that_is_not_the_result_is_an_axis_error(
    out: tuple[type[ax.Axis], ...], gives: str
) -> None:
    from axjax.ops._rearrange import standin

    pattern = "Batch Pos Embed -> Pos Batch Embed"
    said = ", ".join(a.__name__ for a in out)
    message = f"Cannot rearrange by '{pattern}': out=({said}) says the result's axes, but the "
    message += f"pattern gives {gives}"
    for run in (ax.rearrange, standin):  # standin: what the mypy plugin runs
        with pytest.raises(ax.AxisError) as e:
            run(X, pattern, out=out)
        assert str(e.value) == message


def test_rearrange_out_is_a_tuple_of_axis_classes() -> None:
    for out in ([Pos, Batch, Embed], (Pos, Batch, 8)):
        with pytest.raises(TypeError, match="rearrange: out= is a tuple of axis classes, got"):
            ax.rearrange(X, "Batch Pos Embed -> Pos Batch Embed", out=out)  # type: ignore[call-overload]


# --------------------------------------------------------------------------- contract(out=)
def test_contract_out_fixes_the_order() -> None:
    w = _x((8, 3), Embed, Chan)
    plain = ax.contract(X, w)
    assert plain.axes == (Batch, Pos, Chan)
    for out in [(Chan, Batch, Pos), (Pos, Chan, Batch), (Batch, Pos, Chan)]:
        got = ax.contract(X, w, out=out)
        assert got.axes == out
        assert np.array_equal(np.asarray(got.array), np.asarray(ax.transpose(plain, *out).array))


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ((Chan, Batch), "out=(Chan, Batch) leaves Pos out"),
        ((Chan, Batch, Pos, Pos), "out=(Chan, Batch, Pos, Pos) names Pos twice"),
        ((Chan, Batch, Embed), "out= names Embed, which the result (Batch, Pos, Chan) lacks"),
    ],
)
def test_contract_out_that_is_no_permutation_is_an_axis_error(
    out: tuple[type[ax.Axis], ...], message: str
) -> None:
    with pytest.raises(ax.AxisError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ax.contract(X, _x((8, 3), Embed, Chan), out=out)
