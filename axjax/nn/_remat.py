"""Rematerialisation: recompute a module's activations in the backward pass.

``ax.nn.remat(block)`` wraps a module so that its call runs under ``eqx.filter_checkpoint``
(``jax.checkpoint`` on the arrays, everything else static): the forward keeps only the
block's inputs (and what ``policy`` says to save), and the backward runs the block again.
Memory for activations falls from one set per block to one set in all, at the cost of a
second forward. Values and gradients are unchanged; axjax's ops are ``custom_vjp`` calls,
which ``jax.checkpoint`` recomputes like any other primitive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import equinox as eqx
import jax

from ..core._internal import check_choice, checks_choices, describe, is_symbolic
from ._export import name_static_value
from ._registry import register_layer

__all__ = ["Remat", "remat", "resolve_policy"]

M = TypeVar("M")
#: the wrapped module's type (covariant: a call reads the module's own call signature)
MC = TypeVar("MC", covariant=True)

#: Named ``jax.checkpoint_policies``: ``"nothing"`` saves nothing (recompute all, the least
#: memory), ``"dots"`` saves matrix products without batch dimensions, ``"everything"``
#: saves all (no recomputation: for comparisons); ``"offload_dots"`` moves the matrix products
#: ``"dots"`` saves to pinned host memory instead (where the backend has it: GPU, TPU).
PolicyName = Literal["nothing", "dots", "dots_with_batch", "everything", "offload_dots"]
Policy = PolicyName | Callable[..., bool] | None

_POLICIES: dict[str, Callable[..., bool]] = {
    "nothing": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "dots_with_batch": jax.checkpoint_policies.dots_saveable,
    "everything": jax.checkpoint_policies.everything_saveable,
    "offload_dots": jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host"),
}

for _name, _value in _POLICIES.items():  # written by name in a serialized jax.export function
    name_static_value(_value, f"remat:{_name}")


def _policy(policy: Policy) -> Callable[..., bool] | None:
    return resolve_policy(policy, "remat")


def resolve_policy(policy: Policy, where: str, name: str = "policy") -> Callable[..., bool] | None:
    """The ``jax.checkpoint`` policy a name (or function, or ``None``) stands for; another
    string is a ``ValueError`` listing the names (``name``: the argument that gave it)."""
    if policy is None or callable(policy):
        return policy
    try:
        return _POLICIES[check_choice(where, name, policy, _POLICIES)]
    except ValueError as e:
        raise ValueError(f"{e} (or a jax.checkpoint_policies function)") from None


def _call(module: Any, *args: Any, **kwargs: Any) -> Any:
    return module(*args, **kwargs)


def _remat_call(self: Remat[Any], *args: object, **kwargs: object) -> object:
    """Call the wrapped module under ``eqx.filter_checkpoint`` (``Remat.__call__``)."""
    leaves = jax.tree_util.tree_leaves((args, kwargs), is_leaf=is_symbolic)
    node = next((x for x in leaves if is_symbolic(x)), None)
    if node is not None:
        raise TypeError(
            f"remat: the {type(self.module).__name__} it wraps is called on a graph node "
            f"({describe(node)}); rematerialisation runs on Tensors, eagerly or under jit. "
            "In a graph call the module itself (ax.nn.remat(m).module), or call the "
            "remat module on Tensors inside a jitted step"
        )
    out: object = eqx.filter_checkpoint(_call, policy=self.policy)(self.module, *args, **kwargs)
    return out


@register_layer(typed="wrapper")
class Remat(eqx.Module, Generic[MC]):
    """A module whose call is rematerialised in the backward pass (see :func:`remat`).

    Typing: ``Remat[Block]``; its call is the module's own call (same parameters, same
    result), in every checker; under the mypy plugin also for layers typed by their rules.
    """

    module: MC
    policy: Callable[..., bool] | None = eqx.field(static=True)

    if TYPE_CHECKING:
        # the call is the wrapped module's own call, overloads included: a ParamSpec
        # (`self: Remat[Callable[P, R]]`) takes no signature from an overloaded `__call__`
        # in mypy, which then rejected every call of a remat layer
        @property
        def __call__(self) -> MC:
            """Call the wrapped module under ``eqx.filter_checkpoint``."""
            ...

    else:
        __call__ = _remat_call


@checks_choices
def remat(module: M, policy: Policy = None) -> Remat[M]:
    """Wrap ``module`` so its activations are recomputed in the backward pass.

    Args:
        module: any callable Equinox module (a transformer block, an MLP).
        policy: what to save rather than recompute: ``None`` or ``"nothing"`` (save only
            the inputs), ``"dots"`` (also matrix products without batch dimensions),
            ``"dots_with_batch"``, ``"everything"``, ``"offload_dots"`` (GPU/TPU: to host
            memory), or a ``jax.checkpoint_policies`` function.

    Example:
        >>> blocks = [ax.nn.remat(Block(cfg, key=k)) for k in keys]
        >>> x = blocks[0](x)         # same value; its activations are not stored for grad
    """
    if not callable(module):
        raise TypeError(f"remat: expected a callable module, got {type(module).__name__}")
    return Remat(module, _policy(policy))
