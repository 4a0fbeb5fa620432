"""Axis labels and comparison helpers shared by the layer tests."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, final

import jax
import jax.numpy as jnp
import numpy as np

import axjax as ax

AnyT = ax.Tensor[Any, *tuple[Any, ...]]


@final
class Batch(ax.Axis): ...


@final
class Time(ax.Axis): ...


@final
class In(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


@final
class Hidden2(ax.Axis): ...


@final
class Out(ax.Axis): ...


@final
class Height(ax.Axis): ...


@final
class Width(ax.Axis): ...


@final
class Chan(ax.Axis): ...


@final
class Feature(ax.Axis): ...


@final
class Embed(ax.Axis): ...


@final
class Vocab(ax.Axis): ...


@final
class Extra(ax.Axis): ...


def arr(t: AnyT, *axes: type[ax.Axis]) -> jax.Array:
    """The values of ``t`` with its axes in the order ``axes``."""
    assert set(t.axes) == set(axes) and len(t.axes) == len(axes), (t.axes, axes)
    return jnp.transpose(t.array, [t.axes.index(a) for a in axes])


def close(got: Any, want: Any, tol: float = 1e-5, what: str = "") -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol, err_msg=what)


def orders(t: AnyT, n: int = 3) -> list[AnyT]:
    """Up to ``n`` storage orders of ``t`` (the first is ``t`` itself)."""
    perms = list(itertools.permutations(t.axes))
    step = max(1, len(perms) // n)
    return [ax.transpose(t, *p) for p in perms[::step][:n]]


def tree_close(a: Any, b: Any, tol: float = 1e-5) -> None:
    la = jax.tree_util.tree_leaves(a)
    lb = jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb), (len(la), len(lb))
    for x, y in zip(la, lb, strict=True):
        close(x, y, tol)


def grad_pair(
    ax_loss: Callable[..., Any],
    oracle_loss: Callable[..., Any],
    args: Sequence[Any],
    tol: float = 1e-4,
) -> None:
    """``jax.grad`` through axjax (the ops' own backward) equals ``jax.grad`` of the oracle."""
    nums = tuple(range(len(args)))
    g1 = jax.grad(lambda *a: ax_loss(*a), nums)(*args)
    g2 = jax.grad(oracle_loss, nums)(*args)
    tree_close(g1, g2, tol)


def rand(shape: tuple[int, ...], *axes: type[ax.Axis], seed: int = 0) -> AnyT:
    """A float32 Tensor of standard normal values (numpy draws: nothing to compile)."""
    values = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    return ax.tensor(values, *axes)
