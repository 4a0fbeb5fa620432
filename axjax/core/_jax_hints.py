"""Clear errors where a JAX transformation meets what axjax ops are.

- forward mode (``jax.jvp``, ``jax.jacfwd``, ``jax.hessian``) cannot differentiate an op's
  ``jax.custom_vjp``: the op says to use ``ax.jax_autodiff()``;
- a Tensor where JAX wants one of its own arrays (the result of ``jax.grad``'s function,
  ``jax.lax``): JAX's message gets, as its cause, one that says what to pass instead.
"""

from __future__ import annotations

from typing import Any, NoReturn

from jax._src import core as _jax_core  # the registry of JAX types: no public hook exists

from ._errors import describe
from ._tensor import Tensor

__all__ = ["TransformError", "forward_mode_error", "install_jax_hints"]

FORWARD_MODE = "can't apply forward-mode autodiff (jvp) to a custom_vjp function"


class TransformError(TypeError):
    """A JAX transformation was applied to axjax ops or Tensors in a way they do not support
    as they are; the message says what to use instead.

    Example:
        >>> jax.jvp(ax.exp, (t,), (t,))  # doctest: +SKIP
        axjax.TransformError: Cannot apply Exp under forward-mode autodiff ...
    """

    __module__ = "axjax"


def forward_mode_error(op_name: str, error: TypeError) -> TypeError:
    """``error`` as JAX raised it, or the hint when it is JAX refusing forward mode."""
    if FORWARD_MODE not in str(error):
        return error
    return TransformError(
        f"Cannot apply {op_name} under forward-mode autodiff (jax.jvp, jax.jacfwd, "
        "jax.hessian, jax.linearize): axjax ops differentiate with their own backward, a "
        "jax.custom_vjp, which JAX can only run in reverse mode (run it inside `with "
        "ax.jax_autodiff():`, where ops lower to plain JAX autodiff with the same values and "
        "gradients)"
    )


def _not_a_jax_value(x: Any) -> NoReturn:
    rank = "a rank-0 " if not x.axes else ""
    fix = (
        "use ax.grad or ax.value_and_grad, which take a rank-0 Tensor result, or return its .array"
        if not x.axes
        else "reduce it to rank 0 first (ax.sum or ax.mean over its axes), or pass its .array"
    )
    raise TransformError(
        f"{describe(x)} is {rank}axjax Tensor, not a JAX array: JAX transformations and "
        f"functions that take arrays (jax.grad's result, jax.lax) need .array ({fix})"
    )


def install_jax_hints() -> None:
    """Register Tensor with JAX's type lookup so that where JAX wants an array, its error
    is caused by (and shown after) axjax's hint. Behaviour is otherwise unchanged: JAX
    raised a TypeError for a Tensor there before."""
    _jax_core.pytype_aval_mappings.setdefault(Tensor, _not_a_jax_value)
