"""Selecting parts of a model by name or by axes: what ``trainable=`` and ``ax.nn.lora``'s
``where=`` take.

A *selector* is a predicate ``(path, leaf) -> bool`` over the model's leaves (Tensors and
arrays) or, for ``lora``, its dense layers. ``path`` is the dotted attribute path that
``ax.nn.save_safetensors`` names entries by (``blocks.0.attn.query.weight``).
:func:`by_path` selects by a glob over that path, :func:`by_axes` by the axes a Tensor (or
a layer's weight) carries; selectors combine with ``&``, ``|`` and ``~``. Wherever a
selector is taken, a pattern string stands for ``by_path(pattern)`` and a tuple for the
union of its members.

Example:
    >>> attn = ax.nn.by_path("blocks.*.attn")            # every leaf under an attn block
    >>> heads = ax.nn.by_axes(ax.nn.Head, ax.nn.HeadDim)  # Tensors with both axes
    >>> ax.train.fit(model, opt, loss_fn, data, trainable=attn & ~heads)
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

from ..core import Axis, Tensor
from ..core._internal import axis_name, check_axis_label

__all__ = ["Selection", "Selector", "by_axes", "by_path", "leaves_with_paths", "selector"]

Predicate = Callable[[str, Any], Any]


class Selector:
    """A named predicate ``(path, leaf) -> bool``; ``&``, ``|`` and ``~`` combine them.

    Example:
        >>> sel = ax.nn.by_path("encoder.**") & ~ax.nn.by_path("**.bias")
        >>> sel("encoder.fc.weight", w), sel("encoder.fc.bias", b)
        (True, False)
    """

    __module__ = "axjax.nn"

    def __init__(self, test: Callable[[str, Any], bool], text: str) -> None:
        self._test = test
        self._text = text

    def __call__(self, path: str, leaf: Any) -> bool:
        return self._test(path, leaf)

    def __and__(self, other: Selector | Predicate | str) -> Selector:
        b = selector(other, "Selector &")
        return Selector(lambda p, x: self(p, x) and b(p, x), f"({self} & {b})")

    def __or__(self, other: Selector | Predicate | str) -> Selector:
        b = selector(other, "Selector |")
        return Selector(lambda p, x: self(p, x) or b(p, x), f"({self} | {b})")

    def __invert__(self) -> Selector:
        return Selector(lambda p, x: not self(p, x), f"~{self}")

    def __repr__(self) -> str:
        return self._text


#: what ``trainable=`` and ``where=`` take: a selector, a plain predicate, a path pattern,
#: or a tuple of these (their union)
Selection = Selector | Predicate | str | tuple[Selector | Predicate | str, ...]


def _segments_match(pattern: list[str], path: list[str]) -> bool:
    """Whether ``pattern`` matches ``path`` or a prefix of it (a module selects what it
    holds); ``*`` stays within one segment, ``**`` spans any number of them."""
    if not pattern:
        return True
    if pattern[0] == "**":
        return any(_segments_match(pattern[1:], path[i:]) for i in range(len(path) + 1))
    if not path:
        return False
    return fnmatch.fnmatchcase(path[0], pattern[0]) and _segments_match(pattern[1:], path[1:])


def by_path(*patterns: str) -> Selector:
    """Select by dotted path: a leaf is selected when a pattern matches its path or the
    path of a module that holds it.

    A pattern is a glob over the dotted segments: ``*`` (and ``?``, ``[ab]``) match within
    one segment, ``**`` any number of segments. ``"blocks.*.attn"`` selects every leaf of
    the ``attn`` module of each block; ``"**.bias"`` every bias; ``"head.weight"`` one leaf.

    Raises:
        TypeError: a pattern that is not a string.
        ValueError: no pattern, or an empty one.

    Example:
        >>> ax.nn.by_path("blocks.*.attn")("blocks.0.attn.query.weight", w)
        True
    """
    if not patterns:
        raise ValueError("by_path: give at least one pattern, e.g. by_path('blocks.*.attn')")
    split = []
    for p in patterns:
        if not isinstance(p, str):
            raise TypeError(
                f"by_path: a pattern must be a string such as 'blocks.*.attn', got "
                f"{type(p).__name__} {p!r}"
            )
        if not p or any(not s for s in p.split(".")):
            raise ValueError(
                f"by_path: the pattern {p!r} has an empty segment; write segments between "
                "dots, e.g. 'blocks.*.attn' ('*' for one segment, '**' for any number)"
            )
        split.append(p.split("."))

    def test(path: str, leaf: Any) -> bool:
        segments = path.split(".")
        return any(_segments_match(p, segments) for p in split)

    return Selector(test, f"by_path({', '.join(map(repr, patterns))})")


def _axes_of(leaf: Any) -> tuple[type[Axis], ...]:
    """The axes of a Tensor, or of a layer's ``weight`` Tensor; ``()`` for anything else."""
    if isinstance(leaf, Tensor):
        return leaf.axes
    weight = getattr(leaf, "weight", None)
    return weight.axes if isinstance(weight, Tensor) else ()


def by_axes(*axes: type[Axis]) -> Selector:
    """Select the Tensors that carry every axis in ``axes`` (for a layer: its weight).

    Raises:
        TypeError: an argument that is not an axis label.
        ValueError: no axis.

    Example:
        >>> heads = ax.nn.by_axes(ax.nn.Head, ax.nn.HeadDim)  # the attention projections
    """
    if not axes:
        raise ValueError("by_axes: give at least one axis, e.g. by_axes(ax.nn.Head)")
    wanted = tuple(check_axis_label(a, "by_axes") for a in axes)

    def test(path: str, leaf: Any) -> bool:
        have = _axes_of(leaf)
        return all(a in have for a in wanted)

    return Selector(test, f"by_axes({', '.join(axis_name(a) for a in wanted)})")


def selector(spec: object, where: str) -> Selector:
    """``spec`` as a :class:`Selector`: a selector as it is, a string as :func:`by_path`, a
    tuple or list as the union of its members, any other callable as a predicate whose
    answers must be bools.

    Raises:
        TypeError: ``spec`` is none of these (the message names ``where``).
    """
    if isinstance(spec, Selector):
        return spec
    if isinstance(spec, str):
        return by_path(spec)
    if isinstance(spec, tuple | list) and spec:
        parts = [selector(s, where) for s in spec]
        return Selector(lambda p, x: any(s(p, x) for s in parts), " | ".join(str(s) for s in parts))
    if callable(spec):
        return Selector(_checked(spec, where), getattr(spec, "__name__", repr(spec)))
    raise TypeError(
        f"{where} must be a predicate (path, leaf) -> bool, a path pattern such as "
        f"'blocks.*.attn', ax.nn.by_path(...) / ax.nn.by_axes(...), or a tuple of these; "
        f"got {type(spec).__name__} {spec!r}"
    )


def _checked(fn: Callable[[str, Any], Any], where: str) -> Callable[[str, Any], bool]:
    """``fn``, with a ``TypeError`` when it answers anything but a bool."""

    def test(path: str, leaf: Any) -> bool:
        answer = fn(path, leaf)
        if isinstance(answer, bool | np.bool_):
            return bool(answer)
        raise TypeError(
            f"{where}: the predicate returned {type(answer).__name__} {answer!r} for "
            f"{path!r}; it must return True or False, decided from the path and the "
            "Tensor's axes, dtype or shape (not from its values)"
        )

    return test


def _is_tensor(x: object) -> bool:
    return isinstance(x, Tensor) and x.array is not None  # one filtered out: no leaf


def leaves_with_paths(tree: object) -> Iterator[tuple[str, Any]]:
    """``(dotted path, leaf)`` for each leaf of ``tree``, a Tensor counting as one leaf:
    the names ``ax.nn.save_safetensors`` gives the entries."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree, is_leaf=_is_tensor)[0]:
        yield jax.tree_util.keystr(path, simple=True, separator="."), leaf
