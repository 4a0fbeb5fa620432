"""``Ensemble``: ``n`` models of one structure, parameters stacked along a named axis, all
called at once with :func:`axjax.vmap`.

A deep ensemble trains several copies of one model from different initial keys and
averages (or otherwise combines) their predictions. Stored as one module whose every
parameter Tensor has a leading ``Member`` axis (a real axis: it shards, saves and loads like
any other), the members run as one vectorised program: ``ax.vmap(over=Member)`` maps the
model's call over the members' parameters, and every output gets the ``Member`` axis first.
Trained on the *sum* of the members' losses (:func:`ensemble_loss`), each member follows
exactly the trajectory it would follow alone: the gradient of a sum is the members' own
gradients, and optimizers act leaf by leaf.
"""

# the call's overloads for dense members spell "In at any position": they overlap where two
# positions agree
# mypy: disable-error-code="overload-overlap"
from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, Generic, TypeVarTuple, cast, final, overload

import equinox as eqx
import jax
from typing_extensions import ParamSpec, TypeVar

from ..core import AnyTensor, Axis, AxisError, DType, Tensor, vmap
from ..core._internal import (
    PyTree,
    axis_name,
    check_axis_label,
    describe,
    flatten,
    index_int,
    is_symbolic,
    is_tensor,
    positive_int,
)
from ..ops import mean
from ..ops import sum as ax_sum
from ._registry import register_layer
from ._stack import (
    StackWords,
    dynamic_leaf,
    key_of,
    keys_tensor,
    stack_modules,
    stacked_size,
)

if TYPE_CHECKING:  # for the dense layers' call (an annotation: no import at run time)
    from ._linear import _Dense  # pyright: ignore[reportPrivateUsage]

__all__ = ["Ensemble", "Member", "ensemble_loss"]

#: the member model's type (covariant: a call reads the model's own call signature)
M = TypeVar("M", covariant=True, default=Any)
#: the ensemble's axis
A = TypeVar("A", bound=Axis, covariant=True, default=Any)
M2 = TypeVar("M2")
AE = TypeVar("AE", bound=Axis)  # an ensemble's axis, in a method's self-type
D = TypeVar("D", bound=DType)
D2 = TypeVar("D2", bound=DType)
Ts = TypeVarTuple("Ts")
Us = TypeVarTuple("Us")
R = TypeVar("R")
X = TypeVar("X")
In = TypeVar("In", bound=Axis)
Out = TypeVar("Out", bound=Axis)
T0 = TypeVar("T0", bound=Axis)
T1 = TypeVar("T1", bound=Axis)
P = ParamSpec("P")


@final
class Member(Axis):
    """The default axis of an :class:`Ensemble`: one entry per member."""


#: the axis of an ensemble being built
A2 = TypeVar("A2", bound=Axis)
#: ``Ensemble(members)``'s default axis, ``Member`` (typed ``Any`` to be a default of
#: ``type[A]``; ``init`` and ``from_members`` type it exactly by their overloads)
_DEFAULT_AXIS: Any = Member


_ENSEMBLE_WORDS = StackWords(
    "model",
    "an ensemble's",
    "ensemble's axis",
    "build it with Ensemble.init or Ensemble.from_members",
    "an ensemble",
    "member",
)


def _count(members: PyTree, axis: type[Axis], where: str) -> int:
    """The number of members: the size of ``axis``, leading on every parameter Tensor."""
    return stacked_size(members, axis, where, _ENSEMBLE_WORDS)


def _refuse_axis(tree: PyTree, axis: type[Axis], where: str, what: str) -> None:
    """An input that already has the ensemble's axis is refused: every member gets the
    same input, and ``vmap`` would otherwise split it among the members."""
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree, is_leaf=is_tensor):
        if is_tensor(leaf) and axis in leaf.axes:
            name = what + jax.tree_util.keystr(path)
            raise AxisError(
                f"{where}: the input {name} already has the ensemble's axis "
                f"{axis_name(axis)} ({describe(leaf)}); every member gets the same input, and "
                f"the output gets {axis_name(axis)} (rename the input's axis, or build the "
                "ensemble over another axis)"
            )


@register_layer(typed="ensemble")
class Ensemble(eqx.Module, Generic[M, A]):
    """``n`` models of one structure, parameters stacked along ``axis``, called at once.

    Build one with :meth:`init` (member ``i`` is ``make(jax.random.split(key, n)[i])``) or
    :meth:`from_members`. Every parameter Tensor has ``axis`` first
    (``Tensor[F32, Member, In, Out]``). The call ``ensemble(x, *args, **kwargs)`` is
    ``ax.vmap(member(x, *args, **kwargs), over=axis)``: every member gets the same
    arguments, and every Tensor of the output gets ``axis`` first; ``key=`` is split into
    one key per member, so members draw different dropout masks. Train it with
    :func:`ensemble_loss` (the sum of the members' losses).

    Args:
        members: one model whose every parameter Tensor has ``axis`` first.
        axis: the ensemble's axis (:class:`Member` by default).

    Example:
        >>> ens = ax.nn.Ensemble.init(lambda k: ax.nn.MLP(...), 5, Member, key=key)
        >>> ens(x)       # [Batch, In] -> Tensor[F32, Member=5, Batch, Out]
        >>> ens[2]       # the third member, an MLP

    Typing: ``Ensemble[MLP, Member]``; a member mapping ``Tensor[D, *B, In]`` to
    ``Tensor[D, *B, Out]`` makes the call ``Tensor[D, *B, In] -> Tensor[D, Member, *B, Out]``
    (under the mypy plugin also for layers typed by their rules).
    """

    members: M
    axis: type[Axis] = eqx.field(static=True)

    def __init__(self, members: M, axis: type[A] = _DEFAULT_AXIS) -> None:
        self.axis = check_axis_label(axis, "Ensemble")
        _count(members, self.axis, "Ensemble")
        self.members = members

    @overload
    @classmethod
    def init(
        cls, make: Callable[[jax.Array], M2], n: int, *, key: jax.Array
    ) -> Ensemble[M2, Member]: ...
    @overload
    @classmethod
    def init(
        cls, make: Callable[[jax.Array], M2], n: int, axis: type[A2], *, key: jax.Array
    ) -> Ensemble[M2, A2]: ...
    @classmethod
    def init(
        cls,
        make: Callable[[jax.Array], M2],
        n: int,
        axis: type[Axis] = Member,
        *,
        key: jax.Array,
    ) -> Ensemble[M2, Any]:
        """``n`` members ``make(k)``, member ``i`` with ``k = jax.random.split(key, n)[i]``
        (``make`` is called once per member: a make whose models differ is an error).

        Example:
            >>> ens = ax.nn.Ensemble.init(
            ...     lambda k: ax.nn.Affine(In, Out, 8, 2, key=k), 4, Member, key=key)
        """
        n = positive_int("Ensemble.init", "n", n)
        over = check_axis_label(axis, "Ensemble.init")
        members = [make(k) for k in jax.random.split(key, n)]
        return Ensemble(_stack(members, over, "Ensemble.init"), axis)

    @overload
    @classmethod
    def from_members(cls, members: Sequence[M2]) -> Ensemble[M2, Member]: ...
    @overload
    @classmethod
    def from_members(cls, members: Sequence[M2], axis: type[A2]) -> Ensemble[M2, A2]: ...
    @classmethod
    def from_members(cls, members: Sequence[M2], axis: type[Axis] = Member) -> Ensemble[M2, Any]:
        """The ensemble of models already built (same structure, axes and sizes), in order.

        Example:
            >>> ens = ax.nn.Ensemble.from_members([MLP(k) for k in keys], Member)
        """
        if isinstance(members, eqx.Module) or not isinstance(members, Sequence) or not members:
            raise ValueError(
                "Ensemble.from_members: give a non-empty list of models, got "
                + type(members).__name__
            )
        over = check_axis_label(axis, "Ensemble.from_members")
        return Ensemble(_stack(list(members), over, "Ensemble.from_members"), axis)

    def __len__(self) -> int:
        """The number of members."""
        return _count(self.members, self.axis, "Ensemble")

    def __getitem__(self, i: int) -> M:
        """Member ``i`` (its parameters without the ensemble's axis)."""
        n = len(self)
        i = index_int("Ensemble", "index", i, what="an int (negative counts from the end)")
        if not -n <= i < n:
            raise IndexError(f"Ensemble: member {i} is out of range for {n} members")

        def one(leaf: object) -> object:
            if isinstance(leaf, Tensor):
                return Tensor(leaf.array[i % n], leaf.axes[1:])
            return leaf

        out: M = jax.tree.map(one, self.members, is_leaf=is_tensor)
        return out

    def unstack(self) -> list[M]:
        """The members, in order."""
        return [self[i] for i in range(len(self))]

    # an ensemble of dense layers (Linear, Affine, MLP): their own call's overloads, the
    # ensemble's axis first (plain mypy cannot match an overloaded call to the Callable below)
    @overload
    def __call__(
        self: Ensemble[_Dense[D, In, Out], AE],
        x: Tensor[D, *Ts, In],
        /,
        *,
        key: jax.Array | None = None,
    ) -> Tensor[D, AE, *Ts, Out]: ...
    @overload
    def __call__(
        self: Ensemble[_Dense[D, In, Out], AE],
        x: Tensor[D, *Ts, In, T0],
        /,
        *,
        key: jax.Array | None = None,
    ) -> Tensor[D, AE, *Ts, T0, Out]: ...
    @overload
    def __call__(
        self: Ensemble[_Dense[D, In, Out], AE],
        x: Tensor[D, *Ts, In, T0, T1],
        /,
        *,
        key: jax.Array | None = None,
    ) -> Tensor[D, AE, *Ts, T0, T1, Out]: ...
    @overload
    def __call__(
        self: Ensemble[_Dense[D, In, Out], AE],
        x: Tensor[D, In, *Ts],
        /,
        *,
        key: jax.Array | None = None,
    ) -> Tensor[D, AE, *Ts, Out]: ...
    @overload
    def __call__(
        self: Ensemble[_Dense[D, In, Out], AE],
        x: Tensor[D, T0, In, *Ts],
        /,
        *,
        key: jax.Array | None = None,
    ) -> Tensor[D, AE, T0, *Ts, Out]: ...
    @overload
    def __call__(
        self: Ensemble[Callable[Concatenate[Tensor[D, *Ts], P], Tensor[D2, *Us]], AE],
        x: Tensor[D, *Ts],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Tensor[D2, AE, *Us]: ...
    @overload
    def __call__(
        self: Ensemble[Callable[Concatenate[X, P], object], Any],
        x: X,
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Any: ...
    def __call__(self, x: PyTree, /, *args: object, **kwargs: object) -> PyTree:
        """Every member on the same arguments: the outputs' Tensors get the axis first."""
        return _run(self, x, args, dict(kwargs))


def _stack(members: list[M2], over: type[Axis], where: str) -> M2:
    for i, m in enumerate(members):
        if not flatten(eqx.filter(m, is_tensor, is_leaf=is_tensor))[0]:
            raise ValueError(
                f"{where}: member {i} ({type(m).__name__}) has no parameter Tensors; an "
                "ensemble stacks its members' parameters"
            )
    return stack_modules(
        members, over, where, "member", "an ensemble holds models of one structure"
    )


def _run(
    ens: Ensemble[Any, Any], x: PyTree, args: tuple[object, ...], kwargs: dict[str, object]
) -> PyTree:
    where = f"Ensemble(over={axis_name(ens.axis)})"
    n = _count(ens.members, ens.axis, where)
    key = cast("jax.Array | None", kwargs.pop("key", None))  # a PRNG key, as Dropout takes
    _refuse_axis(x, ens.axis, where, "x")
    _refuse_axis((args, kwargs), ens.axis, where, "argument")
    dyn, static = eqx.partition(ens.members, dynamic_leaf, is_leaf=is_tensor)
    if any(is_symbolic(t) for t in flatten((x, args, kwargs, dyn))[0] if is_tensor(t)):
        raise TypeError(f"{where}: an ensemble is called on Tensors, not on graph nodes")

    def one(member_dyn: PyTree, *k: AnyTensor) -> PyTree:
        member = eqx.combine(member_dyn, static, is_leaf=is_tensor)
        if key is None:
            return member(x, *args, **kwargs)
        return member(x, *args, key=key_of(k[0], key), **kwargs)

    mapped = vmap(one, over=ens.axis)
    return mapped(dyn) if key is None else mapped(dyn, keys_tensor(key, n, ens.axis))


def ensemble_loss(
    loss_fn: Callable[Concatenate[M2, P], R],
) -> Callable[Concatenate[Ensemble[M2, Any], P], R]:
    """The loss of an ensemble from the loss of one model: ``loss_fn(member, *batch)`` for
    every member at once (``ax.vmap`` over the ensemble's axis), summed over the members.

    Give it to ``ax.train.fit`` (or any step) in place of ``loss_fn``: each member's
    gradient is then its own loss's, so each trains as it would alone. A loss that returns
    ``(loss, metrics)`` keeps its metrics, averaged over the members. With a ``key``
    parameter, each member gets its own key (``jax.random.split(key, n)[i]``).

    Example:
        >>> result = ax.train.fit(ens, optax.adam(1e-3), ax.nn.ensemble_loss(loss), data)
    """
    if not callable(loss_fn):
        raise TypeError(
            f"ensemble_loss: loss_fn must be a function loss_fn(model, *batch), got "
            f"{type(loss_fn).__name__}"
        )
    try:
        with_key = "key" in inspect.signature(loss_fn).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        with_key = False
    if with_key:

        def keyed(ensemble: object, *batch: object, key: jax.Array | None = None) -> PyTree:
            return _total(loss_fn, ensemble, batch, key, True)

        return cast("Callable[Concatenate[Ensemble[M2, Any], P], R]", keyed)

    def plain(ensemble: object, *batch: object) -> PyTree:
        return _total(loss_fn, ensemble, batch, None, False)

    # the wrapper takes what loss_fn takes after the model (its signature is P)
    return cast("Callable[Concatenate[Ensemble[M2, Any], P], R]", plain)


def _total(
    loss_fn: Callable[..., object],
    ens: object,
    batch: tuple[object, ...],
    key: jax.Array | None,
    with_key: bool,
) -> PyTree:
    if not isinstance(ens, Ensemble):
        raise TypeError(
            f"ensemble_loss: the model must be an ax.nn.Ensemble, got {type(ens).__name__}"
        )
    where = f"ensemble_loss(over={axis_name(ens.axis)})"
    n = _count(ens.members, ens.axis, where)
    if n == 0:  # the empty-data rule: a mean over no members is undefined, never a NaN
        raise ValueError(
            f"{where}: the ensemble has no members ({axis_name(ens.axis)}=0): its metrics "
            "average over the members"
        )
    _refuse_axis(batch, ens.axis, where, "batch")
    dyn, static = eqx.partition(ens.members, dynamic_leaf, is_leaf=is_tensor)

    def one(member_dyn: PyTree, *k: AnyTensor) -> PyTree:
        member = eqx.combine(member_dyn, static, is_leaf=is_tensor)
        if not with_key:
            return loss_fn(member, *batch)
        return loss_fn(member, *batch, key=None if key is None else key_of(k[0], key))

    mapped = vmap(one, over=ens.axis)
    out: PyTree = mapped(dyn) if key is None else mapped(dyn, keys_tensor(key, n, ens.axis))
    pair = isinstance(out, tuple) and len(out) == 2  # noqa: PLR2004  # (loss, metrics)
    loss: PyTree = out[0] if pair else out
    metrics: PyTree = out[1] if pair else None
    if eqx.is_array(loss) and loss.shape == (n,):  # a loss that returns a bare array
        total: PyTree = loss.sum()
    elif is_tensor(loss) and loss.axes == (ens.axis,):
        total = ax_sum(loss, ens.axis)
    else:
        raise TypeError(
            f"{where}: loss_fn must return a scalar Tensor (or (loss, metrics)) for one "
            f"member, got {describe(loss) if is_tensor(loss) else type(loss).__name__} over "
            "the members"
        )
    if metrics is None:
        return total
    averaged = jax.tree.map(
        lambda m: mean(m, ens.axis) if is_tensor(m) else m.mean(axis=0), metrics, is_leaf=is_tensor
    )
    return total, averaged
