"""Lowering an op: its forward run as it is, or inside a ``jax.custom_vjp`` whose bwd is
its own backward.

``apply`` (core/_op.py) has the result's type and the switches it read once
(core/_context.py); :func:`lower` returns the forward's result arrays:

- an operand is a JAX tracer, ``ax.config.autodiff`` is ``"axjax"`` and the op does not ask
  for JAX's autodiff (:attr:`~axjax.Op.jax_vjp`): the forward inside a ``jax.custom_vjp``
  whose bwd is ``op.backward``, so JAX's reverse mode uses axjax's own derivative;
- otherwise the forward directly: concrete operands have nothing to differentiate (no
  wrapper: cheap eager dispatch), and under ``ax.jax_autodiff()`` JAX differentiates it.

Either way the forward (and the backward) runs through the layout step
(core/_placement.py), the identity without an Explicit mesh; the results are checked by the
op contract (core/_contract.py). An op that accumulates runs on float32 copies of F16/BF16
values (:func:`_widened`, :func:`_narrowed`). Inside ``ax.debug_nans`` results are checked
for NaN and infinity (core/_finite.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import jax
import jax.core  # jax.core.Tracer: the submodule, imported by name for type checkers
import numpy as np

from ._context import Switches
from ._contract import check_cotangents, forward_arrays
from ._dtype import accumulation_dtype
from ._finite import check_backward, check_forward, op_site
from ._jax_hints import forward_mode_error
from ._placement import Layout, Out, Unplaced, cast_varying, explicit_layout, match_varying
from ._protocols import Arrays, Cotangents, Operand
from ._tensor import AnyTensor, Tensor
from ._tensor_type import TensorType

if TYPE_CHECKING:  # lowering sits below Op (core/_op.py calls it): types only
    from ._op import Op

__all__ = ["lower"]

_Tracer = jax.core.Tracer
Placement = Layout | Unplaced
#: the forward's or backward's view of a result: a Tensor, or a tuple of them (several results)
Wrapped = AnyTensor | tuple[AnyTensor, ...]
#: what an op's forward returns, before the contract judges it (arrays or Tensors, per result)
Forwarded = object


def lower(op: Op[Any], xs: Sequence[Operand], out: Out, now: Switches, check: bool) -> Arrays:
    """The arrays of ``op.forward(*xs)``, through a ``jax.custom_vjp`` when JAX is
    differentiating with axjax's derivatives (``now``: the switches ``apply`` read);
    ``check``: also check their shapes and dtypes against ``out`` (``forward_arrays``)."""
    layout = explicit_layout(xs, now.rules)  # the identity without an Explicit mesh
    site = op_site(now.site) if now.finite else None  # inside ax.debug_nans: where to report
    for x in xs:
        if isinstance(x._array, _Tracer):  # JAX may differentiate: with whose derivative?
            if now.autodiff != "jax" and not op.jax_vjp:
                return _custom_vjp_call(op, xs, out, site, layout, check)
            break
    y = layout.forward(_checked_forward, xs, out, op, check)
    if site is not None:
        check_forward(op, xs, _typed(y, out), site)
    return y


def _typed(y: Arrays, out: Out) -> AnyTensor | tuple[AnyTensor, ...]:
    """The forward's result ``y`` as Tensors of the declared types (for reports)."""
    if isinstance(out, tuple):
        return tuple(
            Tensor._wrap(getattr(v, "_array", v), t.axes) for v, t in zip(y, out, strict=True)
        )
    return Tensor._wrap(getattr(y, "_array", y), out.axes)


def _custom_vjp_call(
    op: Op[Any],
    xs: Sequence[Operand],
    out: Out,
    site: str | None,
    layout: Placement,
    check: bool,
) -> Arrays:
    """``op.forward`` in a ``jax.custom_vjp`` whose bwd is ``op.backward``; inside
    ``ax.debug_nans`` (a ``site``) both check their results for NaN and infinity."""
    in_axes = [x._axes for x in xs]

    def wrap_out(a: Arrays) -> Wrapped:
        if isinstance(out, tuple):
            return tuple(Tensor._wrap(v, t.axes) for v, t in zip(a, out, strict=True))
        return Tensor._wrap(a, out.axes)

    def fwd_arrays(*arrays: jax.Array) -> Arrays:
        wrapped = [Tensor._wrap(a, ax_) for a, ax_ in zip(arrays, in_axes, strict=True)]
        y = layout.forward(_checked_forward, wrapped, out, op, check)
        if site is not None:
            check_forward(op, wrapped, wrap_out(y), site)
        return y

    def fwd(*arrays: jax.Array) -> tuple[Arrays, tuple[Arrays, tuple[jax.Array, ...]]]:
        y = fwd_arrays(*arrays)
        return y, (y, arrays)

    def bwd(res: tuple[Arrays, tuple[jax.Array, ...]], dy: Arrays) -> Cotangents:
        y, arrays = res
        wrapped = [Tensor._wrap(a, ax_) for a, ax_ in zip(arrays, in_axes, strict=True)]
        grads = _backward(op, wrap_out, dy, y, wrapped, layout)
        if site is not None:
            check_backward(
                op,
                wrap_out(dy),
                wrapped,
                [
                    Tensor._wrap(g, x._axes) if g.shape == x._array.shape else g
                    for g, x in zip(grads, wrapped, strict=True)
                ],
                site,
            )
        return grads

    f = jax.custom_vjp(fwd_arrays)
    f.defvjp(fwd, bwd)
    try:
        return f(*match_varying([x._array for x in xs]))
    except TypeError as e:  # JAX refusing forward mode: say to use ax.jax_autodiff()
        error = forward_mode_error(op.describe(), e)
        if error is e:
            raise
        raise error from e


def _checked_forward(xs: Sequence[Operand], out: Out, op: Op[Any], check: bool) -> Arrays:
    """``op.forward(*xs)``'s arrays, checked by ``forward_arrays`` (the layout step's run)."""
    return forward_arrays(op, out, _run_forward(op, xs, out), check)


def _backward(
    op: Op[Any],
    wrap_out: Callable[[Arrays], Wrapped],
    dy: Arrays,
    y: Arrays,
    xs: Sequence[Operand],
    layout: Placement,
) -> Cotangents:
    """``op.backward``'s checked cotangents through the layout step (each with its primal's
    sharding on an Explicit mesh), each cast to its primal's varying mesh axes
    (``shard_map``), as ``jax.custom_vjp`` requires."""
    grads = layout.backward(_checked_backward, dy, y, xs, op, wrap_out)
    return tuple(
        g if isinstance(g, np.ndarray) else cast_varying(g, x._array)
        for g, x in zip(grads, xs, strict=True)
    )


def _checked_backward(
    dy: Arrays, y: Arrays, xs: Sequence[Operand], op: Op[Any], wrap_out: Callable[[Arrays], Wrapped]
) -> Cotangents:
    """``op.backward``'s cotangents, checked by ``check_cotangents`` (the layout step's run)."""
    return check_cotangents(op, _run_backward(op, wrap_out(dy), wrap_out(y), xs), xs)


def _widened(op: Op[Any], values: Sequence[Any]) -> list[Any] | None:
    """For an op that :attr:`~Op.accumulates`: ``values`` (Tensors, or tuples of them)
    with every F16/BF16 array cast to float32; ``None`` when none is (nothing to do)."""
    if not op.accumulates:
        return None
    widened, any_low = [], False
    for v in values:
        if isinstance(v, tuple):
            inner = _widened(op, v)
            widened.append(v if inner is None else tuple(inner))
            any_low = any_low or inner is not None
            continue
        a = v._array
        wide = accumulation_dtype(a.dtype)
        if wide != a.dtype:
            v, any_low = Tensor._wrap(a.astype(wide), v._axes), True
        widened.append(v)
    return widened if any_low else None


def _run_forward(op: Op[Any], xs: Sequence[Operand], out: Out) -> Forwarded:
    """``op.forward(*xs)``; for an op that accumulates, on float32 copies of F16/BF16
    operands, its results cast back to the declared dtypes."""
    if not op.accumulates:
        return op.forward(*xs)
    wide = _widened(op, xs)
    if wide is None:
        return op.forward(*xs)
    y = op.forward(*wide)
    if isinstance(out, tuple):
        return tuple(_narrowed(v, t) for v, t in zip(y, out, strict=True))
    return _narrowed(y, out)


def _narrowed(y: Forwarded, t: TensorType) -> Forwarded:
    """A result computed in float32 for ``t``'s F16/BF16, cast back (anything else is left
    for ``forward_arrays`` to judge)."""
    a = getattr(y, "_array", y)
    want = t.dtype.numpy
    dtype = getattr(a, "dtype", None)
    if dtype == want or dtype != accumulation_dtype(want):
        return y
    narrow = cast(jax.Array, a).astype(want)  # an array: it has the float32 dtype
    return Tensor._wrap(narrow, y._axes) if isinstance(y, Tensor) else narrow


def _run_backward(op: Op[Any], dy: Wrapped, y: Wrapped, xs: Sequence[Operand]) -> Sequence[object]:
    """``op.backward(dy, y, *xs)``; for an op that accumulates, on float32 copies of
    F16/BF16 values (``check_cotangents`` casts the cotangents back to the operands')."""
    wide = _widened(op, (dy, y, *xs))
    if wide is None:
        return op.backward(dy, y, *xs)
    return op.backward(*wide)
