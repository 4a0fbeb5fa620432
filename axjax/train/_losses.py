"""Losses over named axes: softmax cross-entropy, binary cross-entropy, mean squared error.

Each loss keeps the axes it does not consume, like optax's losses keep the batch; reduce
them explicitly (``ax.mean(loss, Batch)``). The two cross-entropies are ``ax.Op``s with their
own backward (``softmax - one_hot`` and ``sigmoid - target``): stable and one fused step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar, TypeVarTuple, cast, overload

import jax
import jax.core
import jax.numpy as jnp
import numpy as np

from ..core import AnyTensor, Axis, DType, Floating, Op, Tensor, TensorType
from ..core._internal import (
    HasType,
    axes_names,
    axis_labels,
    axis_name,
    check_axis_label,
    check_some_data,
    fail,
    is_floating,
    is_symbolic,
    public_call,
    register_op,
)
from ..ops import mean as _mean
from ..ops._internal import check_labels as check_class_labels
from ..ops._internal import narrowed, widened
from ._axes import Class

__all__ = [
    "BinaryCrossEntropy",
    "SoftmaxCrossEntropy",
    "binary_cross_entropy",
    "mean_squared_error",
    "softmax_cross_entropy",
]

D = TypeVar("D", bound=DType)
Ts = TypeVarTuple("Ts")
_DR = TypeVar("_DR", bound=Floating)  # floating-point dtypes only (ax.mean needs them)
Array = jax.Array
AnyOf = Tensor[D, *tuple[Any, ...]]
# Remaining Any: the dtype/axes parameters of the public Tensor aliases.


def _integer(t: HasType) -> bool:
    return bool(jnp.issubdtype(t.dtype.numpy, jnp.integer))


@register_op("softmax_cross_entropy", kind="other", namespace="axjax.train")
class SoftmaxCrossEntropy(Op):
    """``logsumexp(logits) - logits[label]`` along a class axis; backward ``softmax - onehot``.

    Operands: ``logits[..., Class, ...]`` (floating) and integer ``labels`` with the
    logits' other axes in the same order. The result has the labels' axes.
    """

    accumulates = True  # logsumexp sums over the classes: in float32 for F16/BF16 logits

    def __init__(self, axis: type[Axis] = Class) -> None:
        self.axis: type[Axis] = check_axis_label(axis, "SoftmaxCrossEntropy")

    def describe(self) -> str:
        return f"SoftmaxCrossEntropy({axis_name(self.axis)})"

    def __call__(self, *xs: object) -> AnyTensor:
        """Apply the loss, checked in the order a user reads the call: the axes and dtypes
        (the type rule), then the labels' values (the index rule: core's check_indices)."""
        logits, labels = xs if len(xs) == 2 else (None, None)
        if isinstance(logits, Tensor) and isinstance(labels, Tensor) and not is_symbolic(logits):
            self.infer(logits, labels)  # an axis or dtype mistake is named before any value
            check_labels("softmax_cross_entropy", labels, logits.size(self.axis), self.axis)
        out: AnyTensor = super().__call__(*xs)
        return out

    def infer(self, logits: HasType, labels: HasType) -> TensorType:
        ops = (logits, labels)
        if self.axis not in logits.axes:
            raise self.fail(
                ops,
                f"the logits have no axis {axis_name(self.axis)} (name the "
                "class axis with axis=...)",
            )
        if not is_floating(logits.dtype):
            raise self.fail(ops, f"logits must be floating-point, got {logits.dtype.__name__}")
        if not _integer(labels):
            raise self.fail(
                ops,
                f"labels must be integer class indices, got "
                f"{labels.dtype.__name__} (for probabilities use "
                "-ax.sum(p * ax.log_softmax(logits, Class), Class))",
            )
        p = logits.axes.index(self.axis)
        rest, sizes = (
            logits.axes[:p] + logits.axes[p + 1 :],
            logits.shape[:p] + logits.shape[p + 1 :],
        )
        if tuple(labels.axes) != rest:
            hint = (
                "same axes in a different order: transpose the labels"
                if set(labels.axes) == set(rest)
                else f"the labels need the logits' axes without {axis_name(self.axis)}: "
                f"({axes_names(rest)})"
            )
            if self.axis in labels.axes:  # axis= named an axis the labels have, not the classes
                hint += f" (axis={axis_name(self.axis)} is the class axis: is it the right one?)"
            raise self.fail(ops, f"labels have axes ({axes_names(labels.axes)}); {hint}")
        for a, n, m in zip(rest, sizes, labels.shape, strict=True):
            if n is not None and m is not None and n != m:
                raise self.fail(
                    ops, f"axis {axis_name(a)} has size {n} in the logits and {m} in the labels"
                )
        return TensorType(logits.dtype, rest, sizes)

    def forward(self, logits: AnyTensor, labels: AnyTensor) -> Array:
        p = logits.axes.index(self.axis)
        x, lab = logits.array, labels.array
        valid = (lab >= 0) & (lab < x.shape[p])
        # an out-of-range label (possible only under jit: eager labels are checked) picks no
        # class: zero loss, and (backward) zero gradient, as jax.grad of this forward gives
        safe = jnp.where(valid, lab, 0)
        picked = jnp.take_along_axis(x, jnp.expand_dims(safe, p), axis=p, mode="promise_in_bounds")
        return jnp.where(valid, jax.nn.logsumexp(x, axis=p) - jnp.squeeze(picked, p), 0)

    def backward(
        self, dy: AnyTensor, y: AnyTensor, logits: AnyTensor, labels: AnyTensor
    ) -> tuple[Array, None]:
        p = logits.axes.index(self.axis)
        x, lab = logits.array, labels.array
        valid = (lab >= 0) & (lab < x.shape[p])
        g = jnp.where(valid, dy.array, 0)
        onehot = jax.nn.one_hot(lab, x.shape[p], dtype=x.dtype, axis=p)
        return jnp.expand_dims(g, p) * (jax.nn.softmax(x, axis=p) - onehot), None


def check_labels(where: str, labels: AnyTensor, n: int, axis: type[Axis]) -> None:
    """``ax.one_hot``'s check of concrete labels, offering the loss's fix for a label
    ``>= n`` (more classes in the logits)."""
    check_class_labels(
        where, labels, n, axis, too_large="give the logits {top} classes if they are right"
    )


def softmax_cross_entropy(
    logits: Tensor[D, *tuple[Any, ...]],
    labels: Tensor[Any, *tuple[Any, ...]],
    axis: type[Axis] = Class,
) -> Tensor[D, *tuple[Any, ...]]:
    """Cross-entropy of integer ``labels`` under ``softmax(logits)`` along ``axis``.

    Args:
        logits: unnormalised scores, e.g. ``Tensor[F32, Batch, Class]``.
        labels: integer class indices with the logits' other axes, e.g. ``Tensor[I32, Batch]``.
        axis: the class axis, which the loss sums out.

    Returns:
        The per-example loss with the labels' axes; average it with ``ax.mean(loss, Batch)``.

    Raises:
        ValueError: a label outside ``[0, n)`` (``n`` the size of ``axis``), when the labels'
            values are known (eagerly, or closed over by ``jax.grad``). Under ``jax.jit``
            (as in ``fit``) they are not: there an out-of-range label, negative ones
            included, picks no class and contributes zero loss and zero gradient, in the
            forward, in the op's backward and in ``jax.grad`` under ``ax.jax_autodiff()``
            alike; a function traced inside ``ax.checkify_indices`` checks them.

    Example:
        >>> loss = ax.mean(ax.train.softmax_cross_entropy(model(x), y, Class), Batch)
    """
    return SoftmaxCrossEntropy(axis)(logits, labels)


@register_op("binary_cross_entropy", kind="other", namespace="axjax.train")
class BinaryCrossEntropy(Op):
    """``-t log σ(x) - (1-t) log(1-σ(x))`` from logits, computed stably.

    Backward: ``dy (σ(x) - t)`` for the logits and ``-dy x`` for the targets.
    """

    def infer(self, logits: HasType, targets: HasType) -> TensorType:
        ops = (logits, targets)
        if not is_floating(logits.dtype) or targets.dtype is not logits.dtype:
            raise self.fail(
                ops,
                "logits and targets must have the same floating-point dtype "
                "(convert the targets with astype)",
            )
        if tuple(logits.axes) != tuple(targets.axes):
            hint = (
                "same axes in a different order: transpose one operand first"
                if set(logits.axes) == set(targets.axes)
                else "give both the same axes"
            )
            raise self.fail(ops, f"logits and targets have different axes ({hint})")
        if tuple(logits.shape) != tuple(targets.shape):
            raise self.fail(ops, "logits and targets have different sizes")
        return TensorType(logits.dtype, logits.axes, logits.shape)

    def forward(self, logits: AnyTensor, targets: AnyTensor) -> Array:
        x, t = logits.array, targets.array
        return jnp.maximum(x, 0) - x * t + jnp.log1p(jnp.exp(-jnp.abs(x)))

    def backward(
        self, dy: AnyTensor, y: AnyTensor, logits: AnyTensor, targets: AnyTensor
    ) -> tuple[Array, Array]:
        x, t, g = logits.array, targets.array, dy.array
        return g * (jax.nn.sigmoid(x) - t), -g * x


def check_targets(where: str, targets: AnyTensor) -> None:
    """Raise a ``ValueError`` naming the first target outside ``[0, 1]`` (or NaN) when the
    targets' values are known (a concrete Tensor: eagerly, or closed over by ``jax.grad``).
    Under ``jax.jit`` they are not, and nothing is checked."""
    arr = targets.array if type(targets) is Tensor else None
    if arr is None or isinstance(arr, jax.core.Tracer):
        return
    host = np.asarray(arr, dtype=np.float64)
    bad = ~((host >= 0) & (host <= 1))  # NaN included
    if not bad.any():
        return
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    at = ", ".join(f"{axis_name(a)}={i}" for a, i in zip(targets.axes, first, strict=True))
    count = int(bad.sum())
    more = f"; {count} of {host.size} targets are out of range" if count > 1 else ""
    raise ValueError(
        f"{where}: target {host[first]:g}{f' (at {at})' if at else ''} is not a "
        f"probability: targets must lie in [0, 1]{more} (outside it the loss has no minimum "
        "and can be negative; scale the targets into [0, 1], e.g. targets / 255, or use "
        "mean_squared_error for unbounded ones)"
    )


def binary_cross_entropy(logits: Tensor[_DR, *Ts], targets: Tensor[_DR, *Ts]) -> Tensor[_DR, *Ts]:
    """Elementwise binary cross-entropy of ``targets`` in [0, 1] under ``sigmoid(logits)``.

    Takes logits, not probabilities (stable for large ``|logits|``); both have the same axes.

    Raises:
        ValueError: a target outside ``[0, 1]`` or NaN, when the targets' values are known
            (eagerly, or closed over by ``jax.grad``). Under ``jax.jit`` (as in ``fit``)
            they are not: there the formula ``max(x, 0) - x t + log(1 + exp(-|x|))`` is
            computed as it is, and a target above 1 or below 0 gives a loss without a
            minimum (negative for large logits of the target's sign). Check the data once
            outside the step.

    Example:
        >>> loss = ax.mean(ax.train.binary_cross_entropy(scores, targets), (Batch, Out))
    """
    check_targets("binary_cross_entropy", targets)
    return cast("Tensor[_DR, *Ts]", BinaryCrossEntropy()(logits, targets))


@overload
def mean_squared_error(
    predictions: Tensor[_DR, *Ts], targets: Tensor[_DR, *Ts], over: None = None
) -> Tensor[_DR]: ...
@overload
def mean_squared_error(
    predictions: Tensor[_DR, *Ts],
    targets: Tensor[_DR, *Ts],
    over: type[Axis] | Sequence[type[Axis]],
) -> Tensor[_DR, *tuple[Any, ...]]: ...
@public_call()
def mean_squared_error(
    predictions: Tensor[_DR, *tuple[Any, ...]],
    targets: Tensor[_DR, *tuple[Any, ...]],
    over: type[Axis] | Sequence[type[Axis]] | None = None,
) -> Tensor[_DR, *tuple[Any, ...]]:
    """``mean((predictions - targets)**2)`` over the axes ``over`` (default: all of them).

    Example:
        >>> ax.train.mean_squared_error(pred, target)               # a scalar
        >>> ax.train.mean_squared_error(pred, target, over=Out)     # per example
    """
    if tuple(predictions.axes) != tuple(targets.axes):
        same = set(predictions.axes) == set(targets.axes)
        raise fail(
            "mean_squared_error",
            (predictions, targets),
            "predictions and targets have different axes ("
            + (
                "same axes in a different order: transpose one operand first)"
                if same
                else "give both the same axes)"
            ),
        )
    # the squares and their mean in float32 for F16/BF16, cast back once
    diff = widened(predictions) - widened(targets)
    axes = (
        tuple(predictions.axes) if over is None else axis_labels(over, "mean_squared_error: over")
    )
    sq = diff * diff
    check_some_data("mean_squared_error", "predictions", predictions, tuple(axes))
    return narrowed(_mean(sq, axes) if axes else sq, predictions.dtype)
