"""Metrics: accuracy over a class axis, and a running mean that stays on the device."""

from __future__ import annotations

from typing import Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from ..core import F32, I32, AnyTensor, Axis, Tensor
from ..core._internal import axis_name, check_axis_label, check_some_data, fail, public_call
from ..ops import argmax, astype, equal
from ..ops import mean as _mean
from ..ops._internal import check_labels
from ._axes import Class

__all__ = ["RunningMean", "accuracy"]


@public_call()
def accuracy(
    logits: Tensor[Any, *tuple[Any, ...]],
    labels: Tensor[Any, *tuple[Any, ...]],
    axis: type[Axis] = Class,
) -> Tensor[F32]:
    """Fraction of examples whose highest logit along ``axis`` is the label (a scalar).

    Args:
        logits: scores, e.g. ``Tensor[F32, Batch, Class]``.
        labels: integer labels with the logits' other axes, e.g. ``Tensor[I32, Batch]``.
        axis: the class axis.

    Raises:
        ValueError: a label outside ``[0, n)`` (``n`` the size of ``axis``) when the labels
            are concrete. Traced labels (under ``jax.jit``) are not checked: such a label
            counts as a miss, unless the call is traced inside ``ax.checkify_indices``.

    Example:
        >>> ax.train.accuracy(model(x), y, Class)
        Tensor[F32](0.9812)
    """
    axis = check_axis_label(axis, "accuracy")
    if axis not in logits.axes:
        raise fail(
            "accuracy",
            (logits, labels),
            f"the logits have no axis {axis_name(axis)} (name the class axis with axis=...)",
            subject=logits,
        )
    predicted = argmax(logits, axis)
    if not jnp.issubdtype(labels.dtype.numpy, jnp.integer):
        raise fail(
            "accuracy",
            (logits, labels),
            f"labels must be integer class indices, got {labels.dtype.__name__}",
            subject=labels,
        )
    if tuple(labels.axes) != tuple(predicted.axes):
        raise fail(
            "accuracy",
            (logits, labels),
            f"the labels need the logits' axes without {axis_name(axis)}, in the same order",
            subject=labels,
        )
    for a, n, m in zip(labels.axes, labels.shape, predicted.shape, strict=True):
        if n is not None and m is not None and n != m:
            raise fail(
                "accuracy",
                (logits, labels),
                f"the labels have {n} entries along {axis_name(a)}, the logits {m} (one label "
                "per example)",
                subject=labels,
            )
    n = logits.shape[logits.axes.index(axis)]
    if n is not None:
        check_labels("accuracy", labels, n, axis, too_large="give the logits {top} classes")
    check_some_data("accuracy", "labels", labels, tuple(labels.axes))
    labels = labels if labels.dtype is I32 else astype(labels, I32)
    hits = astype(equal(predicted, labels), F32)
    return cast(Tensor[F32], _mean(hits, tuple(hits.axes)) if hits.axes else hits)


class RunningMean(eqx.Module):
    """A weighted mean accumulated on the device: update without a host sync, read once.

    It is a pytree, so it can be carried through ``jax.jit`` (the training step does).

    Example:
        >>> m = ax.train.RunningMean.zero()
        >>> m = m.update(loss, weight=128)     # jax arrays or scalar Tensors
        >>> m.value()                          # one host sync
        0.231
    """

    total: jax.Array
    count: jax.Array

    @staticmethod
    def zero() -> RunningMean:
        """An empty mean (its :meth:`value` is NaN until updated)."""
        return RunningMean(jnp.zeros((), jnp.float32), jnp.zeros((), jnp.float32))

    def update(self, value: AnyTensor | ArrayLike, weight: ArrayLike = 1.0) -> RunningMean:
        """Add ``value`` (a scalar array or Tensor) with ``weight``."""
        v = value.array if isinstance(value, Tensor) else jnp.asarray(value)
        w = jnp.asarray(weight, jnp.float32)
        return RunningMean(self.total + w * v.astype(jnp.float32), self.count + w)

    def value(self) -> float:
        """The mean so far as a Python float (this syncs with the device)."""
        total, count = jax.device_get((self.total, self.count))
        return float(total / count) if count else float("nan")
