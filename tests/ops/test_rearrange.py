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

#: (x, pattern, keywords, the explicit composition)
CASES: list[tuple[AnyT, str, dict[str, Any], Callable[[], AnyT]]] = [
    (
        X,
        "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim",
        {"Head": 4},
        lambda: ax.transpose(
            ax.unflatten(X, Embed, (Head, HeadDim), (4, 2)), Batch, Head, Pos, HeadDim
        ),
    ),
    (
        X,
        "Batch Pos Embed=(Head HeadDim) -> Batch Pos Head HeadDim",
        {"HeadDim": 2},
        lambda: ax.unflatten(X, Embed, (Head, HeadDim), (4, 2)),
    ),
    (
        Y,
        "Batch Head Pos HeadDim -> Batch Pos Embed=(Head HeadDim)",
        {},
        lambda: ax.flatten(ax.transpose(Y, Batch, Pos, Head, HeadDim), (Head, HeadDim), Embed),
    ),
    (
        Y,
        "Batch Head Pos HeadDim -> Batch Pos Embed=(HeadDim Head)",
        {},
        lambda: ax.flatten(ax.transpose(Y, Batch, Pos, HeadDim, Head), (HeadDim, Head), Embed),
    ),
    (X, "Batch Pos Embed -> Embed Batch Pos", {}, lambda: ax.transpose(X, Embed, Batch, Pos)),
    (X, "Batch Pos Embed -> Batch Pos Embed", {}, lambda: X),
    (
        IMG,
        "Batch Height Width Chan -> Batch Pixel=(Height Width) Chan",
        {},
        lambda: ax.flatten(IMG, (Height, Width), Pixel),
    ),
    (
        IMG,
        "Batch Height Width Chan -> Chan Batch Pixel=(Width Height)",
        {},
        lambda: ax.transpose(ax.flatten(IMG, (Width, Height), Pixel), Chan, Batch, Pixel),
    ),
    (
        X,
        "Pos Batch (Head HeadDim) -> Head Batch Pos HeadDim",  # left order free: by names
        {"Head": (Head, 2)},
        lambda: ax.transpose(
            ax.unflatten(X, Embed, (Head, HeadDim), (2, 4)), Head, Batch, Pos, HeadDim
        ),
    ),
    (
        X,
        "Batch Pos (Head HeadDim) -> Batch Pixel=(Pos Head) HeadDim",
        {"Head": 4},
        lambda: ax.flatten(ax.unflatten(X, Embed, (Head, HeadDim), (4, 2)), (Pos, Head), Pixel),
    ),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_patterns_equal_the_explicit_compositions_bit_for_bit(case: int) -> None:
    x, pattern, kw, explicit = CASES[case]
    got, want = ax.rearrange(x, pattern, **kw), explicit()
    assert got.axes == want.axes and got.shape == want.shape
    assert np.array_equal(np.asarray(got.array), np.asarray(want.array))
    assert got.array.dtype == want.array.dtype


def test_the_issue_example() -> None:
    y = ax.rearrange(X, "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim", Head=4)
    assert y.axes == (Batch, Head, Pos, HeadDim) and y.shape == (2, 4, 5, 2)
    back = ax.rearrange(y, "Batch Head Pos HeadDim -> Batch Pos Embed=(Head HeadDim)")
    assert np.array_equal(np.asarray(back.array), np.asarray(X.array))


ERRORS = [
    (
        "Batch Pos (Head Foo) -> Batch Head Pos Foo",
        {"Head": 4},
        "unknown name Foo: not an axis of x (Batch, Pos, Embed), nor a keyword, nor an axis "
        "class in the caller's scope (give Foo=TheAxisClass)",
    ),
    (
        "Batch (Head HeadDim) -> Batch Head HeadDim",
        {"Head": 4},
        "missing axis Embed: x has (Batch, Pos, Embed), the left side leaves Embed out",
    ),
    (
        "Batch Pos Chan -> Batch Pos Chan",
        {},
        "missing axis Chan: x has (Batch, Pos, Embed)",
    ),
    (
        "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim",
        {"Head": 3},
        "inconsistent size: Embed (8) does not divide into (Head HeadDim) by 3",
    ),
    (
        "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim",
        {"Head": 4, "HeadDim": 4},
        "inconsistent size: (Head HeadDim) is 16, but Embed has size 8",
    ),
    ("Batch Pos Embed -> Batch Pos", {}, "missing axis Embed: the left side has it, the right not"),
    (
        "Batch Pos (Head HeadDim) -> Batch Pos (Head HeadDim)",
        {"Head": 4},
        "a merged group needs the new axis's name: Name=(Head HeadDim)",
    ),
    ("Batch Pos Embed -> Batch Pos Embed", {"Chan": 2}, "the keyword Chan= names no axis"),
    (
        "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim",
        {},
        "the group (Head HeadDim) needs the sizes of all but one of its axes (give Head=...)",
    ),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_name_it(case: int) -> None:
    pattern, kw, message = ERRORS[case]
    with pytest.raises(ax.AxisError) as e:
        ax.rearrange(X, pattern, **kw)
    assert str(e.value) == f"Cannot rearrange by {pattern!r}: {message}" or message in str(e.value)
    assert str(e.value).startswith(f"Cannot rearrange by {pattern!r}: ")


def test_rearrange_in_a_graph() -> None:
    x = ax.Input(ax.F32, Batch, Pos, Embed, sizes={Embed: 8})  # Batch, Pos stay open
    y = ax.rearrange(x, "Batch Pos (Head HeadDim) -> Batch Head Pos HeadDim", Head=4)
    assert y.axes == (Batch, Head, Pos, HeadDim) and y.shape == (None, 4, None, 2)


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
