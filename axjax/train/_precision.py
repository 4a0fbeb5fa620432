"""Training under a precision policy: the loss run in the policy's dtypes, loss scaling,
and the optax wrapper that unscales the gradient and skips an overflowing step.

The policy itself (:class:`axjax.nn.Policy`: its dtypes and typed casts) is in ``nn``;
this is what a training step does with it. :func:`axjax.train._setup.prepare` applies it
for ``fit``, :class:`TrainStep` and ``compile_step`` alike.

Example:
    >>> policy = ax.nn.Policy.mixed(ax.F16)            # dynamic loss scaling
    >>> model, opt, loss, unwrap = for_training(policy, model, optax.adam(1e-3), loss_fn, False)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias, TypeVar

import jax
import jax.numpy as jnp
import optax

from ..core import AnyTensor, Tensor
from ..core._internal import PyTree
from ..nn import LossScaled, Policy, scale_gradient

__all__ = [
    "Optimizer",
    "ScaledOptimizer",
    "check_guard",
    "for_training",
    "next_scale",
    "policy_loss",
]


def policy_loss(policy: Policy, loss_fn: Callable[..., Any], with_key: bool) -> Callable[..., Any]:
    """``loss_fn`` run in ``policy.compute`` (model and floating batch cast), its loss and
    metrics in ``policy.output``.

    With loss scaling the model argument is a :class:`LossScaled` and the loss's gradient
    is multiplied by its scale on the way back (the value is unchanged).
    """

    def run(model: PyTree, batch: tuple[PyTree, ...], key: jax.Array | None) -> object:
        scale = None
        if isinstance(model, LossScaled):
            model, scale = model.model, model.scale
        args = policy.cast_to_compute((model, batch))
        out = loss_fn(*args[:1], *args[1], key=key) if with_key else loss_fn(*args[:1], *args[1])
        loss, metrics = out if isinstance(out, tuple) else (out, None)
        loss = policy.cast_to_output(loss)
        if scale is not None:
            loss = _scale_loss(loss, scale)
        return loss if metrics is None else (loss, policy.cast_to_output(metrics))

    if with_key:

        def keyed(model: PyTree, *batch: PyTree, key: jax.Array | None = None) -> object:
            return run(model, batch, key)

        return keyed

    def plain(model: PyTree, *batch: PyTree) -> object:
        return run(model, batch, None)

    return plain


def _scale_loss(loss: Any, scale: jax.Array) -> AnyTensor | jax.Array:
    if isinstance(loss, Tensor):
        return Tensor(scale_gradient(loss.array, scale), loss.axes)
    return scale_gradient(jnp.asarray(loss), scale)


def next_scale(
    policy: Policy, scale: jax.Array, good: jax.Array, finite: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The loss scale and count of finite steps after a step: a dynamic scale halves on an
    overflow (not below 1) and doubles after ``policy.period`` finite steps; a fixed one
    never changes."""
    if policy.loss_scale != "dynamic":
        return scale, good
    grow = finite & (good + 1 >= policy.period)
    new_scale = jnp.where(finite, jnp.where(grow, scale * 2, scale), jnp.maximum(scale / 2, 1.0))
    new_good = jnp.where(finite & ~grow, good + 1, 0.0)
    return new_scale, new_good


class ScaledOptimizer:
    """Wraps an optax ``GradientTransformation`` for a :class:`LossScaled` model: divides the
    gradient by the scale, skips the update (parameters and optimizer state unchanged) when
    the gradient is not finite, and moves the scale as the policy says. Its state is the
    inner optimizer's."""

    def __init__(self, inner: optax.GradientTransformation, policy: Policy) -> None:
        self.inner, self.policy = inner, policy

    def init(self, params: LossScaled) -> PyTree:
        return self.inner.init(params.model)

    def update(
        self, grads: LossScaled, state: PyTree, params: LossScaled | None = None
    ) -> tuple[LossScaled, PyTree]:
        if params is None:
            raise ValueError("ScaledOptimizer.update needs params (the current scale)")
        inv = 1.0 / params.scale
        g = jax.tree.map(lambda a: a * inv.astype(a.dtype), grads.model)
        leaves = [jnp.isfinite(a).all() for a in jax.tree.leaves(g)]
        finite = jnp.stack(leaves).all() if leaves else jnp.asarray(True)
        g = jax.tree.map(lambda a: jnp.where(finite, a, 0), g)
        updates, new_state = self.inner.update(g, state, params.model)
        updates = jax.tree.map(lambda a: jnp.where(finite, a, jnp.zeros_like(a)), updates)
        new_state = jax.tree.map(lambda a, b: jnp.where(finite, a, b), new_state, state)
        scale, good = next_scale(self.policy, params.scale, params.good, finite)
        return LossScaled(updates, scale - params.scale, good - params.good), new_state


#: what a step updates with: the optimizer given, or it wrapped for loss scaling
Optimizer: TypeAlias = optax.GradientTransformation | ScaledOptimizer


def for_training(
    policy: Policy,
    model: PyTree,
    optimizer: optax.GradientTransformation,
    loss_fn: Callable[..., Any],
    with_key: bool,
) -> tuple[PyTree, Optimizer, Callable[..., Any], Callable[[PyTree], PyTree]]:
    """What a step trains under ``policy``: ``(model, optimizer, loss_fn, unwrap)``.

    The model's parameters are cast to ``policy.param`` and ``loss_fn`` runs as
    :func:`policy_loss` says; with loss scaling the model is a :class:`LossScaled` and the
    optimizer a :class:`ScaledOptimizer`. ``unwrap`` gives the trained model back.
    """
    model = policy.cast_to_param(model)
    loss = policy_loss(policy, loss_fn, with_key)
    first = policy.initial_scale()
    if first is None:
        return model, optimizer, loss, same
    scaled = LossScaled(model, jnp.asarray(first, jnp.float32), jnp.zeros((), jnp.float32))
    return scaled, ScaledOptimizer(optimizer, policy), loss, unwrap_scaled


def check_guard(where: str, precision: Policy | None, stepwise: bool) -> None:
    """Refuse a step-by-step NaN guard under loss scaling, which expects overflows."""
    if stepwise and precision is not None and precision.loss_scale is not None:
        raise ValueError(
            f"{where}: guard='step' stops at the first overflow, which loss scaling "
            "expects and skips; use guard='replay' or 'off'"
            if where == "fit"
            else f"{where}: guard=True stops at the first overflow, which loss scaling "
            "expects and skips; use guard=False"
        )


T = TypeVar("T")


def same(model: T) -> T:
    return model


def unwrap_scaled(m: PyTree) -> PyTree:
    return m.model if isinstance(m, LossScaled) else m
