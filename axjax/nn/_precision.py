"""Mixed precision: a policy of parameter, compute and output dtypes, and loss scaling.

A :class:`Policy` names three dtypes, as ``jmp`` does: parameters are *stored* in
``param`` (f32 master weights), the model *computes* in ``compute`` (bf16 or f16 on an
accelerator) and the loss leaves in ``output`` (f32). ``ax.train.fit(..., precision=policy)``
casts the model and the floating inputs to ``compute`` inside the step, casts the loss to
``output``, and differentiates with respect to the ``param`` copy, so the optimizer updates
f32 weights. Nothing is cast implicitly elsewhere: a bf16 activation meeting an f32 weight
is still an ``AxisError`` (dtypes differ), unless a policy (or :func:`cast`) cast the weight.

f16 has a narrow range, so small gradients underflow; ``loss_scale="dynamic"`` multiplies
the gradient by a scale (2**15 at first) on its way back, divides it out before the
optimizer, skips the update and halves the scale when the gradient overflows, and doubles
the scale after ``period`` finite steps (the scheme of ``jmp.DynamicLossScale``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVarTuple, overload

import equinox as eqx
import jax
import jax.numpy as jnp
from typing_extensions import TypeVar

from ..core import BF16, F16, F32, DType, Floating, Tensor
from ..core._internal import is_floating, jax_dtype

if TYPE_CHECKING:
    from ..core import F64, Axis
    from ._attention import MultiheadAttention
    from ._conv import Conv1D, Conv2D, Conv3D
    from ._embedding import Embedding
    from ._linear import MLP, Affine, Linear
    from ._norm import LayerNorm, RMSNorm
    from ._recurrent import GRUCell, LSTMCell, RNNCell

__all__ = ["DTypeCast", "LossScaled", "Policy", "cast", "scale_gradient"]

T = TypeVar("T")
DN = TypeVar("DN", bound=DType)  # the dtype cast to
FD = TypeVar("FD", "F16", "BF16", "F32", "F64")  # the floating dtypes cast leaves cast
A1 = TypeVar("A1", bound="Axis")
A2 = TypeVar("A2", bound="Axis")
A3 = TypeVar("A3", bound="Axis")
A4 = TypeVar("A4", bound="Axis")
A5 = TypeVar("A5", bound="Axis")
# a policy's dtypes; a bare `Policy` annotation is `Policy[Any, Any, Any]` (any policy)
PD = TypeVar("PD", bound=Floating, default=Any)
CD = TypeVar("CD", bound=Floating, default=Any)
OD = TypeVar("OD", bound=Floating, default=Any)
DC = TypeVar("DC", bound=DType, default=Any)  # the dtype a DTypeCast casts to
CF = TypeVar("CF", bound=Floating)  # Policy.mixed's compute dtype
Ts = TypeVarTuple("Ts")
LossScale = float | Literal["dynamic"] | None


def _cast_leaf(x: Any, dtype: Any) -> Any:
    if isinstance(x, Tensor):
        if is_floating(x.dtype) and x.array.dtype != dtype:
            return Tensor(x.array.astype(dtype), x.axes)
        return x
    if isinstance(x, jax.Array | jnp.ndarray) and jnp.issubdtype(x.dtype, jnp.floating):
        return x.astype(dtype) if x.dtype != dtype else x
    return x


# typed casts (issue 12): a layer's or a tensor's floating dtype is replaced in its type
# (the mypy plugin also types a Sequential and tuples of them; other trees keep their type)
@overload
def cast(tree: Affine[Any, A1, A2], dtype: type[DN]) -> Affine[DN, A1, A2]: ...
@overload
def cast(tree: Linear[Any, A1, A2], dtype: type[DN]) -> Linear[DN, A1, A2]: ...
@overload
def cast(tree: MLP[Any, A1, A2], dtype: type[DN]) -> MLP[DN, A1, A2]: ...
@overload
def cast(tree: Embedding[Any, A1, A2], dtype: type[DN]) -> Embedding[DN, A1, A2]: ...
@overload
def cast(tree: LayerNorm[Any, *Ts], dtype: type[DN]) -> LayerNorm[DN, *Ts]: ...
@overload
def cast(tree: RMSNorm[Any, *Ts], dtype: type[DN]) -> RMSNorm[DN, *Ts]: ...
@overload
def cast(tree: Conv1D[Any, A1, A2, A3], dtype: type[DN]) -> Conv1D[DN, A1, A2, A3]: ...
@overload
def cast(tree: Conv2D[Any, A1, A2, A3, A4], dtype: type[DN]) -> Conv2D[DN, A1, A2, A3, A4]: ...
@overload
def cast(
    tree: Conv3D[Any, A1, A2, A3, A4, A5], dtype: type[DN]
) -> Conv3D[DN, A1, A2, A3, A4, A5]: ...
@overload
def cast(tree: RNNCell[Any, A1, A2], dtype: type[DN]) -> RNNCell[DN, A1, A2]: ...
@overload
def cast(tree: GRUCell[Any, A1, A2], dtype: type[DN]) -> GRUCell[DN, A1, A2]: ...
@overload
def cast(tree: LSTMCell[Any, A1, A2], dtype: type[DN]) -> LSTMCell[DN, A1, A2]: ...
@overload
def cast(
    tree: MultiheadAttention[Any, A1, A2, A3, A4, A5], dtype: type[DN]
) -> MultiheadAttention[DN, A1, A2, A3, A4, A5]: ...
@overload
def cast(tree: Tensor[FD, *Ts], dtype: type[DN]) -> Tensor[DN, *Ts]: ...
@overload
def cast(tree: T, dtype: type[DType]) -> T: ...
def cast(tree: Any, dtype: type[DType]) -> Any:
    """``tree`` with every floating-point Tensor and array cast to ``dtype``.

    Integer and Bool Tensors (token ids, masks), static fields and Python numbers are left
    as they are. Use it on a module, a batch, or any pytree.

    Example:
        >>> half = ax.nn.cast(model, ax.BF16)   # every weight Tensor[BF16, ...]
        >>> half(ax.nn.cast(x, ax.BF16))
    """
    if not is_floating(dtype):
        raise TypeError(
            f"cast: {dtype.__name__} is not a floating-point dtype (cast "
            "integer tensors one by one with ax.astype)"
        )
    target = jax_dtype(dtype, "cast")
    return jax.tree.map(
        lambda x: _cast_leaf(x, target), tree, is_leaf=lambda x: isinstance(x, Tensor)
    )


class DTypeCast(Generic[DC]):
    """A policy's cast to one dtype (``policy.cast_to_compute`` is a ``DTypeCast[C]``).

    Called on a tree it is :func:`cast` to its dtype, and typed like it: a Tensor's or a
    layer's floating dtype is replaced in its type (``Tensor[F32, N, In]`` ->
    ``Tensor[BF16, N, In]``, ``Affine[F32, In, Out]`` -> ``Affine[BF16, In, Out]``; under
    the mypy plugin also a ``Sequential`` and tuples of these). Any other pytree is
    ``Any`` after the cast: its fields' dtypes are not in its type.
    """

    __slots__ = ("dtype",)
    dtype: type[DC]

    def __init__(self, dtype: type[DC]) -> None:
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"DTypeCast({self.dtype.__name__})"

    @overload
    def __call__(self, tree: Affine[Any, A1, A2]) -> Affine[DC, A1, A2]: ...
    @overload
    def __call__(self, tree: Linear[Any, A1, A2]) -> Linear[DC, A1, A2]: ...
    @overload
    def __call__(self, tree: MLP[Any, A1, A2]) -> MLP[DC, A1, A2]: ...
    @overload
    def __call__(self, tree: Embedding[Any, A1, A2]) -> Embedding[DC, A1, A2]: ...
    @overload
    def __call__(self, tree: LayerNorm[Any, *Ts]) -> LayerNorm[DC, *Ts]: ...
    @overload
    def __call__(self, tree: RMSNorm[Any, *Ts]) -> RMSNorm[DC, *Ts]: ...
    @overload
    def __call__(self, tree: Conv1D[Any, A1, A2, A3]) -> Conv1D[DC, A1, A2, A3]: ...
    @overload
    def __call__(self, tree: Conv2D[Any, A1, A2, A3, A4]) -> Conv2D[DC, A1, A2, A3, A4]: ...
    @overload
    def __call__(self, tree: Conv3D[Any, A1, A2, A3, A4, A5]) -> Conv3D[DC, A1, A2, A3, A4, A5]: ...
    @overload
    def __call__(self, tree: RNNCell[Any, A1, A2]) -> RNNCell[DC, A1, A2]: ...
    @overload
    def __call__(self, tree: GRUCell[Any, A1, A2]) -> GRUCell[DC, A1, A2]: ...
    @overload
    def __call__(self, tree: LSTMCell[Any, A1, A2]) -> LSTMCell[DC, A1, A2]: ...
    @overload
    def __call__(
        self, tree: MultiheadAttention[Any, A1, A2, A3, A4, A5]
    ) -> MultiheadAttention[DC, A1, A2, A3, A4, A5]: ...
    @overload
    def __call__(self, tree: Tensor[FD, *Ts]) -> Tensor[DC, *Ts]: ...
    @overload
    def __call__(self, tree: Tensor[DN, *Ts]) -> Tensor[DN, *Ts]: ...  # integers, Bool kept
    @overload
    def __call__(self, tree: Any) -> Any: ...
    def __call__(self, tree: Any) -> Any:
        """``tree`` with every floating-point Tensor and array cast to the dtype."""
        return cast(tree, self.dtype)


@dataclasses.dataclass(frozen=True)
class Policy(Generic[PD, CD, OD]):
    """Parameter, compute and output dtypes, and the loss scaling for f16.

    A ``Policy[P, C, O]``: its casts are typed, so after
    ``policy = ax.nn.Policy.mixed(ax.BF16)`` (a ``Policy[F32, BF16, F32]``),
    ``policy.cast_to_compute(x)`` of a ``Tensor[F32, N, In]`` is ``Tensor[BF16, N, In]``
    and of an ``Affine[F32, In, Out]`` an ``Affine[BF16, In, Out]``. A dtype left out of
    the constructor is ``Any`` to mypy (pyright reads the default, ``F32``): give all three,
    or use :meth:`mixed`.

    Args:
        param: dtype the parameters are stored and updated in (``ax.F32``).
        compute: dtype the model runs in (``ax.BF16``, ``ax.F16`` or ``ax.F32``).
        output: dtype of the loss (``ax.F32``).
        loss_scale: ``None`` (no scaling), a fixed factor, or ``"dynamic"``.
        period: finite steps before a dynamic scale doubles.

    Example:
        >>> policy = ax.nn.Policy(param=ax.F32, compute=ax.BF16, output=ax.F32)
        >>> ax.train.fit(model, optax.adam(1e-3), loss_fn, data, precision=policy)
        >>> ax.nn.Policy.mixed(ax.F16).loss_scale   # f16 scales its loss by default
        'dynamic'
    """

    param: type[PD] = F32  # type: ignore[assignment]  # PD is Any when left out
    compute: type[CD] = F32  # type: ignore[assignment]
    output: type[OD] = F32  # type: ignore[assignment]
    loss_scale: LossScale = None
    period: int = 2000

    def __post_init__(self) -> None:
        for name in ("param", "compute", "output"):
            d = getattr(self, name)
            if not (isinstance(d, type) and issubclass(d, DType) and is_floating(d)):
                raise TypeError(
                    f"Policy: {name} must be a floating-point dtype (ax.F32, "
                    f"ax.BF16, ax.F16), got {d!r}"
                )
        s = self.loss_scale
        if not (s is None or s == "dynamic" or (isinstance(s, int | float) and s > 0)):
            raise ValueError(
                f"Policy: loss_scale must be None, a positive number or 'dynamic', got {s!r}"
            )

    @overload
    @classmethod
    def mixed(cls) -> Policy[F32, BF16, F32]: ...
    @overload
    @classmethod
    def mixed(cls, compute: type[CF]) -> Policy[F32, CF, F32]: ...
    @classmethod
    def mixed(cls, compute: type[DType] = BF16) -> Policy[Any, Any, Any]:
        """f32 parameters and output, ``compute`` inside; dynamic loss scaling for f16."""
        return Policy(F32, compute, F32, "dynamic" if compute is F16 else None)

    @property
    def cast_to_param(self) -> DTypeCast[PD]:
        """Cast the floating leaves of a tree to :attr:`param` (typed: see :class:`DTypeCast`)."""
        return DTypeCast(self.param)

    @property
    def cast_to_compute(self) -> DTypeCast[CD]:
        """Cast the floating leaves of a tree to :attr:`compute` (typed: see
        :class:`DTypeCast`)."""
        return DTypeCast(self.compute)

    @property
    def cast_to_output(self) -> DTypeCast[OD]:
        """Cast the floating leaves of a tree to :attr:`output` (typed: see
        :class:`DTypeCast`)."""
        return DTypeCast(self.output)

    def wrap_loss(self, loss_fn: Callable[..., Any], with_key: bool) -> Callable[..., Any]:
        """``loss_fn`` run in ``compute`` (model and floating batch cast), loss in ``output``.

        With loss scaling the model argument is a :class:`LossScaled` and the loss's
        gradient is multiplied by its scale on the way back (the value is unchanged).
        """

        def run(model: Any, batch: tuple[Any, ...], key: Any) -> Any:
            scale = None
            if isinstance(model, LossScaled):
                model, scale = model.model, model.scale
            args = self.cast_to_compute((model, batch))
            out = (
                loss_fn(*args[:1], *args[1], key=key) if with_key else loss_fn(*args[:1], *args[1])
            )
            loss, metrics = out if isinstance(out, tuple) else (out, None)
            loss = self.cast_to_output(loss)
            if scale is not None:
                loss = _scale_loss(loss, scale)
            return loss if metrics is None else (loss, self.cast_to_output(metrics))

        if with_key:

            def keyed(model: Any, *batch: Any, key: Any = None) -> Any:
                return run(model, batch, key)

            return keyed

        def plain(model: Any, *batch: Any) -> Any:
            return run(model, batch, None)

        return plain

    def for_training(
        self, model: Any, optimizer: Any, loss_fn: Callable[..., Any], with_key: bool
    ) -> tuple[Any, Any, Callable[..., Any], Callable[[Any], Any]]:
        """What ``fit`` trains: ``(model, optimizer, loss_fn, unwrap)`` (see
        :func:`for_training`)."""
        return for_training(self, model, optimizer, loss_fn, with_key)

    def initial_scale(self) -> float | None:
        """The first loss scale (``None`` without loss scaling)."""
        if self.loss_scale is None:
            return None
        return 2.0**15 if self.loss_scale == "dynamic" else float(self.loss_scale)

    def next_scale(
        self, scale: jax.Array, good: jax.Array, finite: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        """The scale and finite-step count after a step (fixed scales never change)."""
        if self.loss_scale != "dynamic":
            return scale, good
        grow = finite & (good + 1 >= self.period)
        new_scale = jnp.where(
            finite, jnp.where(grow, scale * 2, scale), jnp.maximum(scale / 2, 1.0)
        )
        new_good = jnp.where(finite & ~grow, good + 1, 0.0)
        return new_scale, new_good


class LossScaled(eqx.Module):
    """A model with its loss scale and count of finite steps (f32 scalars), as ``fit``
    trains it under a policy with loss scaling."""

    model: Any
    scale: jax.Array
    good: jax.Array


@jax.custom_vjp
def scale_gradient(x: jax.Array, scale: jax.Array) -> jax.Array:
    """``x`` unchanged; its cotangent is multiplied by ``scale`` on the way back.

    Example:
        >>> jax.grad(lambda x: ax.nn.scale_gradient(x * x, jnp.float32(8.0)))(1.0)
        Array(16., dtype=float32)
    """
    return x


def _scale_fwd(x: jax.Array, scale: jax.Array) -> tuple[jax.Array, jax.Array]:
    return x, scale


def _scale_bwd(scale: jax.Array, g: jax.Array) -> tuple[jax.Array, jax.Array]:
    return (g * scale.astype(g.dtype), jnp.zeros_like(scale))


scale_gradient.defvjp(_scale_fwd, _scale_bwd)


def _scale_loss(loss: Any, scale: jax.Array) -> Any:
    if isinstance(loss, Tensor):
        return Tensor(scale_gradient(loss.array, scale), loss.axes)
    return scale_gradient(jnp.asarray(loss), scale)


class ScaledOptimizer:
    """Wraps an optax ``GradientTransformation`` for a :class:`LossScaled` model: divides the
    gradient by the scale, skips the update (parameters and optimizer state unchanged) when
    the gradient is not finite, and moves the scale as the policy says.

    It has optax's ``init``/``update`` (``nn`` does not import optax, which works on any
    object with those methods)."""

    def __init__(self, inner: Any, policy: Policy) -> None:
        self.inner, self.policy = inner, policy

    def init(self, params: LossScaled) -> Any:
        return self.inner.init(params.model)

    def update(
        self, grads: LossScaled, state: Any, params: LossScaled | None = None
    ) -> tuple[LossScaled, Any]:
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
        scale, good = self.policy.next_scale(params.scale, params.good, finite)
        return LossScaled(updates, scale - params.scale, good - params.good), new_state


def for_training(
    policy: Policy, model: Any, optimizer: Any, loss_fn: Callable[..., Any], with_key: bool
) -> tuple[Any, Any, Callable[..., Any], Callable[[Any], Any]]:
    """What ``fit`` trains under ``policy``: ``(model, optimizer, loss_fn, unwrap)``.

    The model's parameters are cast to ``policy.param``; with loss scaling the model is a
    :class:`LossScaled` and the optimizer a :class:`ScaledOptimizer`; ``unwrap`` gives the
    trained model back.
    """
    model = policy.cast_to_param(model)
    loss = policy.wrap_loss(loss_fn, with_key)
    first = policy.initial_scale()
    if first is None:
        return model, optimizer, loss, lambda m: m
    scaled = LossScaled(model, jnp.asarray(first, jnp.float32), jnp.zeros((), jnp.float32))
    return scaled, ScaledOptimizer(optimizer, policy), loss, _unwrap


def _unwrap(m: Any) -> Any:
    return m.model if isinstance(m, LossScaled) else m
