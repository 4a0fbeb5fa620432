"""Sum-product on a tree-structured factor graph, written as natural contractions.

Run: ``python examples/sum_product/marginals.py`` (a second on a laptop CPU).

Each variable is an axis; a factor over variables is a tensor over their axes, so the
paper's natural contraction ⋈ *is* the sum-product: multiplying factors and summing out the
variables they share. The graph (unary factors ``phi`` on every variable)::

    Rain ── Wet ── Slip
             │
           Sprinkler ── Season

The marginal of each variable is computed three ways and checked against each other:

1. one n-ary contraction of all factors, summing every other variable
   (``ax.contract(*factors, over=others)``: a variable in three or more factors is named in
   ``over=``; opt_einsum picks the order);
2. belief propagation: the message from ``i`` to ``j`` is ``phi_i ⋈ psi_ij ⋈ (messages
   into i from its other neighbours)``, summed over ``i``; a marginal is ``phi_j ⋈`` all
   messages into ``j``, normalised;
3. brute-force enumeration of every joint assignment.

For a chain of pairwise factors alone each inner variable is in exactly two factors, so the
plain natural contraction ``ax.contract(psi_ab, psi_bc, psi_cd)`` sums them and leaves the
joint of the two ends, with no ``over=`` at all (:func:`chain_ends`).
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any, final

import jax
import numpy as np

import axjax as ax

AnyTensor = ax.Tensor[ax.F32, *tuple[Any, ...]]


@final
class Rain(ax.Axis):
    """Rain: no / yes."""


@final
class Wet(ax.Axis):
    """Wet grass: dry / damp / soaked."""


@final
class Slip(ax.Axis):
    """Someone slips: no / yes."""


@final
class Sprinkler(ax.Axis):
    """Sprinkler: off / low / high."""


@final
class Season(ax.Axis):
    """Season: the four of them."""


VARIABLES: dict[type[ax.Axis], int] = {Rain: 2, Wet: 3, Slip: 2, Sprinkler: 3, Season: 4}
EDGES: list[tuple[type[ax.Axis], type[ax.Axis]]] = [
    (Rain, Wet),
    (Wet, Slip),
    (Wet, Sprinkler),
    (Sprinkler, Season),
]


def random_factors(
    key: jax.Array,
) -> tuple[dict[type[ax.Axis], AnyTensor], dict[tuple[type[ax.Axis], type[ax.Axis]], AnyTensor]]:
    """Positive unary factors ``phi[v]`` over ``v`` and pairwise ``psi[(u, v)]`` over ``u, v``."""
    keys = iter(jax.random.split(key, len(VARIABLES) + len(EDGES)))
    phi = {v: ax.uniform(next(keys), (n,), v, minval=0.5, maxval=2.0) for v, n in VARIABLES.items()}
    psi = {
        (u, v): ax.uniform(next(keys), (VARIABLES[u], VARIABLES[v]), u, v, minval=0.1, maxval=1.0)
        for u, v in EDGES
    }
    return phi, psi


def normalised(t: AnyTensor) -> AnyTensor:
    """``t / Σ t``: a distribution over its one axis."""
    (axis,) = t.axes
    return t / ax.sum(t, axis)


def marginals_by_contraction(
    phi: dict[type[ax.Axis], AnyTensor], psi: dict[tuple[type[ax.Axis], type[ax.Axis]], AnyTensor]
) -> dict[type[ax.Axis], AnyTensor]:
    """Each marginal as one n-ary contraction of every factor over the other variables."""
    factors = [*phi.values(), *psi.values()]
    return {
        v: normalised(ax.contract(*factors, over=tuple(u for u in VARIABLES if u is not v)))
        for v in VARIABLES
    }


def marginals_by_messages(
    phi: dict[type[ax.Axis], AnyTensor], psi: dict[tuple[type[ax.Axis], type[ax.Axis]], AnyTensor]
) -> dict[type[ax.Axis], AnyTensor]:
    """Belief propagation on the tree: each message one contraction over the sender."""
    neighbours: dict[type[ax.Axis], list[type[ax.Axis]]] = {v: [] for v in VARIABLES}
    pair: dict[tuple[type[ax.Axis], type[ax.Axis]], AnyTensor] = {}
    for (u, v), f in psi.items():
        neighbours[u].append(v)
        neighbours[v].append(u)
        pair[(u, v)] = pair[(v, u)] = f
    messages: dict[tuple[type[ax.Axis], type[ax.Axis]], AnyTensor] = {}

    def message(i: type[ax.Axis], j: type[ax.Axis]) -> AnyTensor:  # μ_{i→j}, over j
        if (i, j) not in messages:
            inbox = [message(k, i) for k in neighbours[i] if k is not j]
            messages[(i, j)] = ax.contract(phi[i], pair[(i, j)], *inbox, over=i)
        return messages[(i, j)]

    out: dict[type[ax.Axis], AnyTensor] = {}
    for v in VARIABLES:
        inbox = [message(k, v) for k in neighbours[v]]
        out[v] = normalised(_product(phi[v], inbox))  # every factor over v: kept, multiplied
    return out


def _product(first: AnyTensor, others: list[AnyTensor]) -> AnyTensor:
    """The elementwise product of factors over the same one axis."""
    for t in others:
        first = first * t
    return first


def marginals_by_enumeration(
    phi: dict[type[ax.Axis], AnyTensor], psi: dict[tuple[type[ax.Axis], type[ax.Axis]], AnyTensor]
) -> dict[type[ax.Axis], np.ndarray[Any, np.dtype[np.float64]]]:
    """The reference: the unnormalised probability of every joint assignment, summed."""
    order = list(VARIABLES)
    p_phi = {v: np.asarray(t.array, np.float64) for v, t in phi.items()}
    p_psi = {e: np.asarray(t.array, np.float64) for e, t in psi.items()}
    sums = {v: np.zeros(n) for v, n in VARIABLES.items()}
    for values in itertools.product(*(range(VARIABLES[v]) for v in order)):
        at = dict(zip(order, values, strict=True))
        p = np.prod([p_phi[v][at[v]] for v in order])
        p *= np.prod([p_psi[(u, v)][at[u], at[v]] for u, v in EDGES])
        for v in order:
            sums[v][at[v]] += p
    return {v: s / s.sum() for v, s in sums.items()}


def chain_ends(psi: dict[tuple[type[ax.Axis], type[ax.Axis]], AnyTensor]) -> AnyTensor:
    """The joint of the chain Rain ── Wet ── Sprinkler ── Season's two ends: the plain
    natural contraction (each inner variable is in exactly two factors)."""
    return ax.contract(psi[(Rain, Wet)], psi[(Wet, Sprinkler)], psi[(Sprinkler, Season)])


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description="Sum-product marginals as contractions.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    phi, psi = random_factors(jax.random.key(args.seed))
    exact = marginals_by_enumeration(phi, psi)
    worst = 0.0
    for name, found in (
        ("contraction", marginals_by_contraction(phi, psi)),
        ("messages", marginals_by_messages(phi, psi)),
    ):
        for v, m in found.items():
            assert m.axes == (v,), m
            worst = max(worst, float(np.abs(np.asarray(m.array) - exact[v]).max()))
        print(
            f"{name:12} "
            + "  ".join(
                f"{v.__name__}={np.round(np.asarray(found[v].array), 3)}" for v in VARIABLES
            )
        )
    ends = chain_ends(psi)
    print(f"chain ends: {ends}")
    print(f"largest difference from brute-force enumeration: {worst:.2e}")
    return worst


if __name__ == "__main__":
    main()
