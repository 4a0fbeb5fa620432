"""JAX transformations that speak in Tensors and axis names: grad, value_and_grad, vmap."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, cast

import jax

from ._axis import Axis, axis_name, check_axis_label
from ._errors import AxisError, describe
from ._symbolic import Symbolic, is_symbolic
from ._tensor import Tensor

__all__ = ["grad", "value_and_grad", "vmap"]



def _scalar(out: Any, where: str) -> Any:
    if isinstance(out, Tensor):
        if out.axes:
            raise AxisError(
                f"Cannot apply {where} to {describe(out)}: the function must return a scalar "
                "(reduce the remaining axes with ax.sum or ax.mean)"
            )
        return out.array
    return out


def value_and_grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False, *, wrt: Any = None, inputs: Any = None
                   ) -> Callable[..., Any]:
    """``jax.value_and_grad`` for functions returning a scalar ``Tensor`` (or array).

    Gradients have the structure of the arguments: a Tensor's gradient is a Tensor with
    the same axes; an Equinox model's gradient is a model. Given a graph node (a scalar
    loss) instead of a function, returns a jitted function of ``inputs`` that gives the
    loss and the gradients of the Params in ``wrt`` (see ``axjax.graph_grad``).

    Example:
        >>> loss, g = ax.value_and_grad(loss_fn)(model, x, y)
        >>> loss, (gw, gb) = ax.value_and_grad(loss_node, wrt=[w, b], inputs=[x, y])(xs, ys)
    """
    if is_symbolic(fun):  # a graph loss: the graph differentiates itself
        return cast(Symbolic, fun).differentiate(wrt, inputs, with_value=True)
    _no_graph_args(wrt, inputs, "value_and_grad")
    return _value_and_grad(fun, argnums, has_aux, "value_and_grad")


def _no_graph_args(wrt: Any, inputs: Any, name: str) -> None:
    if wrt is not None or inputs is not None:
        raise TypeError(f"{name}: wrt= and inputs= are for graph losses (ax.{name}(loss_node, "
                        "wrt=[...], inputs=[...])); a function is differentiated by argnums=")


def _value_and_grad(fun: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool,
                    name: str) -> Callable[..., Any]:
    def scalar_fun(*args: Any, **kwargs: Any) -> Any:
        out = fun(*args, **kwargs)
        if has_aux:
            value, aux = out
            return _scalar(value, name), aux
        return _scalar(out, name)

    inner = jax.value_and_grad(scalar_fun, argnums=argnums, has_aux=has_aux)

    @functools.wraps(fun)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        (value, *aux), grads = _split(inner(*args, **kwargs), has_aux)
        value = Tensor._wrap(value, ())
        return ((value, aux[0]) if has_aux else value), grads

    return wrapper


def _split(out: Any, has_aux: bool) -> tuple[list[Any], Any]:
    value, grads = out
    return (list(value) if has_aux else [value]), grads


def grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
         has_aux: bool = False, *, wrt: Any = None, inputs: Any = None) -> Callable[..., Any]:
    """``jax.grad`` for functions returning a scalar ``Tensor`` (or array).

    Given a graph node (a scalar loss) instead of a function, returns a jitted function of
    ``inputs`` giving the gradients of the Params in ``wrt``, computed by each op's own
    backward (see ``axjax.graph_grad``).

    Example:
        >>> g = ax.grad(loss_fn)(model, x, y)
        >>> gw, gb = ax.grad(loss_node, wrt=[w, b], inputs=[x, y])(xs, ys)
    """
    if is_symbolic(fun):  # a graph loss: the graph differentiates itself
        return cast(Symbolic, fun).differentiate(wrt, inputs, with_value=False)
    _no_graph_args(wrt, inputs, "grad")
    vg = _value_and_grad(fun, argnums, has_aux, "grad")

    @functools.wraps(fun)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        (value, grads) = vg(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    return wrapper


def vmap(fun: Callable[..., Any], over: type[Axis], at: int = 0) -> Callable[..., Any]:
    """Batch a function written for one example over the named axis ``over``.

    Every Tensor argument that has axis ``over`` is mapped along it (wherever it is);
    Tensors without it are shared. Every Tensor result gets ``over`` back at position
    ``at``. This is the paper's automatic batching, by name rather than by position.
    (Statically the batched function takes any arguments; under the ``axjax.mypy``
    plugin its result type is exact: ``over`` inserted at ``at``.)

    Example:
        >>> def predict(x: ax.Tensor[ax.F32, Pixel]) -> ax.Tensor[ax.F32, Class]: ...
        >>> ax.vmap(predict, over=Batch)(images)     # [Batch, Pixel] -> [Batch, Class]
    """
    over = check_axis_label(over, "vmap")
    is_tensor = lambda x: isinstance(x, Tensor)  # noqa: E731

    @functools.wraps(fun)
    def wrapper(*args: Any) -> Any:
        leaves, treedef = jax.tree_util.tree_flatten(args, is_leaf=is_tensor)
        in_axes: list[int | None] = []
        size: int | None = None
        for leaf in leaves:
            if isinstance(leaf, Tensor) and over in leaf.axes:
                in_axes.append(leaf.axes.index(over))
                n = leaf.size(over)
                if size is not None and n != size:
                    raise AxisError(
                        f"Cannot apply vmap over {axis_name(over)}: the arguments give it "
                        f"sizes {size} and {n} (equal axes must have equal sizes; slice or "
                        "pad one argument)"
                    )
                size = n
            else:
                in_axes.append(None)
        if size is None:
            raise AxisError(f"Cannot apply vmap over {axis_name(over)}: no argument has axis "
                            f"{axis_name(over)} (add it with ax.expand_dims or map over "
                            "another axis)")
        inner_axes = [
            tuple(a for a in leaf.axes if a is not over) if isinstance(leaf, Tensor) else None
            for leaf in leaves
        ]
        out_axes: list[Any] = []

        def on_arrays(*arrays: Any) -> Any:
            rebuilt = [
                Tensor._wrap(arr, axs) if axs is not None else arr
                for arr, axs in zip(arrays, inner_axes, strict=True)
            ]
            out = fun(*jax.tree_util.tree_unflatten(treedef, rebuilt))
            out_leaves, out_def = jax.tree_util.tree_flatten(out, is_leaf=is_tensor)
            out_axes.append(out_def)
            for leaf in out_leaves:
                if isinstance(leaf, Tensor) and over in leaf.axes:
                    raise AxisError(
                        f"Cannot apply vmap over {axis_name(over)} to {describe(leaf)}: a "
                        f"result already has axis {axis_name(over)} (rename it, or return it "
                        "without the mapped axis)")
            out_axes.append(
                [leaf.axes if isinstance(leaf, Tensor) else None for leaf in out_leaves]
            )
            return [leaf.array if isinstance(leaf, Tensor) else leaf for leaf in out_leaves]

        arrays = [leaf.array if isinstance(leaf, Tensor) else leaf for leaf in leaves]
        out_arrays = jax.vmap(on_arrays, in_axes=tuple(in_axes), out_axes=at)(*arrays)
        out_def, per_leaf = out_axes[0], out_axes[1]
        rebuilt_out = []
        for arr, axs in zip(out_arrays, per_leaf, strict=True):
            if axs is None:
                rebuilt_out.append(arr)
            else:
                k = at if at >= 0 else len(axs) + 1 + at
                rebuilt_out.append(Tensor._wrap(arr, axs[:k] + (over,) + axs[k:]))
        return jax.tree_util.tree_unflatten(out_def, rebuilt_out)

    return wrapper
