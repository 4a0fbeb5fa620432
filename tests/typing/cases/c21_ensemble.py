"""Named ensembles (issue 35): ``ax.nn.Ensemble`` holds models of one structure whose
parameters have a leading ``Member`` axis and calls them all with ``ax.vmap(over=Member)``,
so a member mapping ``Tensor[D, *B, In]`` to ``Tensor[D, *B, Out]`` makes the ensemble map
``Tensor[D, *B, In]`` to ``Tensor[D, Member, *B, Out]``; an input the member does not take,
or one that already has the ``Member`` axis, is an error."""

from typing import final, reveal_type

import equinox as eqx
import jax
from axes import N

import axjax as ax
from axjax import BF16, F32, Tensor


@final
class Hidden(ax.Axis): ...


@final
class Other(ax.Axis): ...


@final
class Seed(ax.Axis): ...


@final
class Wide(ax.Axis): ...


class Head(eqx.Module):
    lin: ax.nn.Affine[F32, Hidden, Other]

    def __init__(self, key: jax.Array) -> None:
        self.lin = ax.nn.Affine(Hidden, Other, 5, 3, key=key)

    def __call__(self, x: Tensor[F32, N, Hidden]) -> Tensor[F32, N, Other]:
        return self.lin(x)


key = jax.random.key(0)
x = ax.normal(key, (4, 5), N, Hidden)
ens = ax.nn.Ensemble.init(Head, 3, ax.nn.Member, key=key)
reveal_type(ens)  # want: Ensemble[Head, Member]
reveal_type(ens(x))  # want: Tensor[F32, Member, N, Other]
reveal_type(ens[0])  # want: Head
reveal_type(ens.unstack())  # want: list[Head]
y: Tensor[F32, ax.nn.Member, N, Other] = ens(x)  # ok
seeds = ax.nn.Ensemble.from_members([Head(key), Head(key)], Seed)
reveal_type(seeds(x))  # want: Tensor[F32, Seed, N, Other]
reveal_type(ens.members.lin.weight)  # want[plugin]: Tensor[F32, Member, Other, Hidden]
mean = ax.mean(ens(x), ax.nn.Member)  # ok

# the input must be what the member takes
e1 = ens(ax.normal(key, (4, 5), N, Other))  # want-error: incompatible type "Tensor[F32, N, Other]"; want-error[mypy]; want-error[pyright]
e2 = ens(ax.astype(x, BF16))  # want-error: incompatible type "Tensor[BF16, N, Hidden]"; want-error[mypy]; want-error[pyright]
e3: Tensor[F32, N, Other] = ens(x)  # want-error; want-error[pyright]; runs: annotations are not checked at run time

# the output has the Member axis first, not last
e4: Tensor[F32, N, Other, ax.nn.Member] = ens(x)  # want-error; want-error[pyright]; runs: annotations are not checked at run time

# an ensemble of a layer the plugin types by its rule (any rank, the axis anywhere); plain
# mypy types it by the Ensemble's overloads for dense layers (issue 44, class 2: it was
# Tensor[F32, Member, *tuple[Never, ...]], a false error on every correct call)
affines = ax.nn.Ensemble.init(lambda k: ax.nn.Affine(Hidden, Other, 5, 3, key=k), 2, key=key)
reveal_type(affines(x))  # want: Tensor[F32, Member, N, Other]
a0: Tensor[F32, ax.nn.Member, N, Other] = affines(x)  # ok
reveal_type(affines(ax.normal(key, (5, 4), Hidden, N)))  # want: Tensor[F32, Member, N, Other]
a1 = affines(ax.normal(key, (4, 5), N, Other))  # want-error[plugin]: Hidden is not an axis of the input; want-error[pyright]; want-error[mypy]
mlps = ax.nn.Ensemble.init(
    lambda k: ax.nn.MLP(Hidden, Other, 5, 3, hidden={Wide: 4}, key=k), 3, Seed, key=key
)
reveal_type(mlps(x))  # want: Tensor[F32, Seed, N, Other]
m0 = ax.mean(mlps(x), Seed)  # ok
m1: Tensor[F32, Seed, Other] = mlps(x)  # want-error: Incompatible types in assignment; want-error[mypy]; want-error[pyright]; runs: annotations are not checked at run time
m2 = mlps(ax.astype(x, BF16))  # want-error[plugin]: the input is BF16; want-error[mypy]; want-error[pyright]

# every member gets the same input: an input with the ensemble's axis is refused (no
# overload can say "without the axis Member": PEP 646 has no exclusion; the plugin only)
stacked = ax.normal(key, (3, 4, 5), ax.nn.Member, N, Hidden)
a2 = affines(stacked)  # want-error[plugin]: already has the ensemble's axis Member; miss[mypy,pyright]: the member's call accepts it

# ensemble_loss: a model's loss made the ensemble's (the sum over the members)


def head_loss(m: Head, x: Tensor[F32, N, Hidden]) -> Tensor[F32]:
    return ax.sum(ax.sum(m(x), N), Other)


total = ax.nn.ensemble_loss(head_loss)
reveal_type(total(ens, x))  # want: Tensor[F32]
l1 = total(Head(key), x)  # want-error[plugin,pyright]: "Head"; show[mypy]; raises: TypeError
l2 = total(ens, ax.normal(key, (4, 5), N, Other))  # want-error: "Tensor[F32, N, Other]"; want-error[mypy]; want-error[pyright]
