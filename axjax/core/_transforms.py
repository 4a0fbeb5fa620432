"""JAX transformations that speak in Tensors and axis names: grad, value_and_grad, vmap."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar, cast, overload

import jax
import jax.numpy as jnp

from ._axis import Axis, axis_name, check_axis_label
from ._dtype import DType
from ._errors import AxisError, describe
from ._jax_typed import PyTree
from ._symbolic import Symbolic, is_symbolic
from ._tensor import Tensor
from ._validate import index_int, non_negative_int, position

__all__ = ["grad", "value_and_grad", "vmap"]

# The user's function and its arguments are what JAX itself types as `Any` (forwarded as
# they are); pytree results are `PyTree`, their leaves (Tensors, arrays, Python scalars)
# `object`, and graph nodes core knows only through the `Symbolic` protocol.

AxisLabels = tuple[type[Axis], ...]
"""A Tensor's axes; ``None`` in a list of them marks a pytree leaf that is not a Tensor."""

P = ParamSpec("P")
A = TypeVar("A")  # the first argument: its gradient has its type (a Tensor, a model)
X = TypeVar("X")  # the auxiliary result (has_aux=True)
DL = TypeVar("DL", bound=DType)  # the loss's dtype


# ---------------------------------------------------------------------- grad, value_and_grad
# Typed as JAX's are used most: with the default argnums=0 the gradient has the type of the
# first argument, and the value is the loss's Tensor[D]. Other argnums are typed loosely.


@overload
def value_and_grad(
    fun: Callable[Concatenate[A, P], Tensor[DL]],
    argnums: Literal[0] = 0,
    has_aux: Literal[False] = False,
) -> Callable[Concatenate[A, P], tuple[Tensor[DL], A]]: ...
@overload
def value_and_grad(
    fun: Callable[Concatenate[A, P], tuple[Tensor[DL], X]],
    argnums: Literal[0] = 0,
    *,
    has_aux: Literal[True],
) -> Callable[Concatenate[A, P], tuple[tuple[Tensor[DL], X], A]]: ...
@overload
def value_and_grad(
    fun: Callable[..., object], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]: ...
@overload
def value_and_grad(
    fun: Tensor[DL],
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    *,
    wrt: object,
    inputs: object,
) -> Callable[..., Any]: ...
def value_and_grad(
    fun: Callable[..., Any] | Tensor[Any],
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    *,
    wrt: object = None,
    inputs: object = None,
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
    _reject_graph_args(wrt, inputs, "value_and_grad")
    return _value_and_grad(cast(Callable[..., Any], fun), argnums, has_aux, "value_and_grad")


@overload
def grad(
    fun: Callable[Concatenate[A, P], Tensor[DL]],
    argnums: Literal[0] = 0,
    has_aux: Literal[False] = False,
) -> Callable[Concatenate[A, P], A]: ...
@overload
def grad(
    fun: Callable[Concatenate[A, P], tuple[Tensor[DL], X]],
    argnums: Literal[0] = 0,
    *,
    has_aux: Literal[True],
) -> Callable[Concatenate[A, P], tuple[A, X]]: ...
@overload
def grad(
    fun: Callable[..., object], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]: ...
@overload
def grad(
    fun: Tensor[DL],
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    *,
    wrt: object,
    inputs: object,
) -> Callable[..., Any]: ...
def grad(
    fun: Callable[..., Any] | Tensor[Any],
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    *,
    wrt: object = None,
    inputs: object = None,
) -> Callable[..., Any]:
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
    _reject_graph_args(wrt, inputs, "grad")
    fn = cast(Callable[..., Any], fun)  # a scalar graph node (Tensor[D]) returned above
    value_and_grad_fun = _value_and_grad(fn, argnums, has_aux, "grad")

    @functools.wraps(fn)
    def grad_fun(*args: Any, **kwargs: Any) -> PyTree:
        out, grads = value_and_grad_fun(*args, **kwargs)
        if has_aux:
            _, aux = out
            return grads, aux
        return grads

    return grad_fun


def _integer_argument(
    name: str, argnums: int | tuple[int, ...], args: tuple[Any, ...]
) -> TypeError:
    """The error for a differentiated argument holding integers: the argument, the leaf and
    its dtype, and the remedy (JAX's own message names none of them)."""
    for i in (argnums,) if isinstance(argnums, int) else argnums:
        if i >= len(args):
            continue
        tensor = lambda x: hasattr(x, "axes")  # noqa: E731 - a Tensor is one leaf here
        for path, leaf in jax.tree_util.tree_flatten_with_path(args[i], is_leaf=tensor)[0]:
            dtype = getattr(getattr(leaf, "array", leaf), "dtype", None)
            if dtype is not None and not jnp.issubdtype(dtype, jnp.inexact):
                at = f" (at {jax.tree_util.keystr(path)})" if path else ""
                return TypeError(
                    f"{name}: argument {i}{at} holds {jnp.dtype(dtype).name} values: a "
                    "gradient is taken with respect to floating-point values only; convert "
                    "it (x.astype(ax.F32)), differentiate another argument (argnums=), or "
                    "close over it"
                )
    return TypeError(f"{name}: the differentiated arguments must hold floating-point values")


def _reject_graph_args(wrt: object, inputs: object, name: str) -> None:
    """``wrt=`` and ``inputs=`` name a graph's Params and Inputs: refuse them for a function."""
    if wrt is not None or inputs is not None:
        raise TypeError(
            f"{name}: wrt= and inputs= are for graph losses (ax.{name}(loss_node, "
            "wrt=[...], inputs=[...])); a function is differentiated by argnums="
        )


def _value_and_grad(
    fun: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool, name: str
) -> Callable[..., Any]:
    """``jax.value_and_grad`` of ``fun`` with its scalar result unwrapped going in and the
    value wrapped as a 0-axis Tensor coming out; ``name`` is the transform errors speak of."""

    def scalar_fun(*args: Any, **kwargs: Any) -> object:
        out = fun(*args, **kwargs)
        if has_aux:
            value, aux = out
            return _scalar_array(value, name), aux
        return _scalar_array(out, name)

    argnums = (
        tuple(non_negative_int(name, "argnums", a) for a in argnums)
        if isinstance(argnums, Sequence)
        else non_negative_int(name, "argnums", argnums)
    )
    jax_value_and_grad = jax.value_and_grad(scalar_fun, argnums=argnums, has_aux=has_aux)

    @functools.wraps(fun)
    def value_and_grad_fun(*args: Any, **kwargs: Any) -> tuple[object, PyTree]:
        try:
            out, grads = jax_value_and_grad(*args, **kwargs)
        except TypeError as e:  # translated after the fact: no check on a good call
            if "real- or complex-valued inputs" in str(e):
                raise _integer_argument(name, argnums, args) from e
            raise
        if has_aux:
            value, aux = out
            return (Tensor._wrap(value, ()), aux), grads
        return Tensor._wrap(out, ()), grads

    return value_and_grad_fun


def _scalar_array(out: object, where: str) -> object:
    """The array of a 0-axis Tensor result (other results pass as they are, for JAX to check).

    Example:
        >>> _scalar_array(ax.sum(x, (Batch, Pixel)), "grad")   # Tensor[F32] -> 0-d array
    """
    if isinstance(out, Tensor):
        if out.axes:
            raise AxisError(
                f"Cannot apply {where} to {describe(out)}: the function must return a scalar "
                "(reduce the remaining axes with ax.sum or ax.mean)"
            )
        return out.array
    return out


# ---------------------------------------------------------------------- vmap


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
    at = index_int("vmap", "at", at)

    @functools.wraps(fun)
    def batched(*args: Any) -> PyTree:
        leaves, treedef = jax.tree_util.tree_flatten(args, is_leaf=_is_tensor)
        _check_mapped_sizes(leaves, over)
        example_axes = [_axes_without(leaf, over) for leaf in leaves]
        results = _VmapResults(over, at)

        def per_example(*arrays: object) -> list[object]:
            example = jax.tree_util.tree_unflatten(treedef, _wrap(arrays, example_axes))
            return results.record(fun(*example))

        in_axes = tuple(_mapped_position(leaf, over) for leaf in leaves)
        out_arrays = jax.vmap(per_example, in_axes=in_axes, out_axes=at)(*_unwrap(leaves))
        return results.rebuild(out_arrays, at)

    return batched


class _VmapResults:
    """What the per-example function returns, recorded while ``jax.vmap`` traces it (its
    pytree structure and each Tensor leaf's axes), to name the batched arrays afterwards.

    Example:
        >>> results = _VmapResults(Batch)
        >>> arrays = results.record({"y": y})        # y: [Hidden] -> [y.array]
        >>> results.rebuild(batched_arrays, at=0)    # -> {"y": Tensor[..., Batch, Hidden]}
    """

    def __init__(self, over: type[Axis], at: int | None = None) -> None:
        self.over, self.at = over, at
        # a jax.tree_util.PyTreeDef, which pyright cannot use as a type (jaxlib has no stub)
        self.treedef: Any = None
        self.leaf_axes: list[AxisLabels | None] = []

    def record(self, out: PyTree) -> list[object]:
        """Remember ``out``'s structure and axes; return its leaves as arrays."""
        leaves, self.treedef = jax.tree_util.tree_flatten(out, is_leaf=_is_tensor)
        for leaf in leaves:
            if isinstance(leaf, Tensor) and self.over in leaf.axes:
                raise AxisError(
                    f"Cannot apply vmap over {axis_name(self.over)} to {describe(leaf)}: a "
                    f"result already has axis {axis_name(self.over)} (rename it, or return it "
                    "without the mapped axis)"
                )
        self.leaf_axes = [leaf.axes if isinstance(leaf, Tensor) else None for leaf in leaves]
        for axes in self.leaf_axes:  # `at` places `over` in each result: within its rank
            if axes is not None and self.at is not None:
                position("vmap", "at", self.at, len(axes))
        return _unwrap(leaves)

    def rebuild(self, arrays: Sequence[object], at: int) -> PyTree:
        """The recorded structure with ``arrays`` as leaves, Tensors named with ``over`` at
        ``at``."""
        batched_axes = [
            None if axes is None else _insert_axis(axes, self.over, at) for axes in self.leaf_axes
        ]
        return jax.tree_util.tree_unflatten(self.treedef, _wrap(arrays, batched_axes))


def _check_mapped_sizes(leaves: Sequence[Any], over: type[Axis]) -> None:
    """Raise unless some Tensor in ``leaves`` has axis ``over`` and all such agree on its size.

    Example:
        >>> _check_mapped_sizes([x, w], Batch)   # x: [Batch=4, Pixel], w: [Pixel, Hidden]: ok
    """
    size: int | None = None
    for leaf in leaves:
        if not (isinstance(leaf, Tensor) and over in leaf.axes):
            continue
        n = leaf.size(over)
        if size is not None and n != size:
            raise AxisError(
                f"Cannot apply vmap over {axis_name(over)}: the arguments give it "
                f"sizes {size} and {n} (equal axes must have equal sizes; slice or "
                "pad one argument)"
            )
        size = n
    if size is None:
        raise AxisError(
            f"Cannot apply vmap over {axis_name(over)}: no argument has axis "
            f"{axis_name(over)} (add it with ax.expand_dims or map over "
            "another axis)"
        )


def _is_tensor(x: object) -> bool:
    """Treat Tensors as pytree leaves: ``is_leaf=_is_tensor``."""
    return isinstance(x, Tensor)


def _mapped_position(leaf: object, over: type[Axis]) -> int | None:
    """The ``in_axes`` entry for one leaf: where ``over`` is in a Tensor, ``None`` (shared)
    for a Tensor without it or a leaf that is not a Tensor.

    Example:
        >>> _mapped_position(x, Batch)   # x: [Pixel, Batch] -> 1
    """
    if isinstance(leaf, Tensor) and over in leaf.axes:
        return leaf.axes.index(over)
    return None


def _axes_without(leaf: object, over: type[Axis]) -> AxisLabels | None:
    """A Tensor leaf's axes as one example sees them (without ``over``); ``None`` for others.

    Example:
        >>> _axes_without(x, Batch)   # x: [Pixel, Batch] -> (Pixel,)
    """
    if isinstance(leaf, Tensor):
        return tuple(a for a in leaf.axes if a is not over)
    return None


def _insert_axis(axes: AxisLabels, over: type[Axis], at: int) -> AxisLabels:
    """``axes`` with ``over`` inserted where ``jax.vmap(..., out_axes=at)`` puts it.

    Example:
        >>> _insert_axis((Hidden,), Batch, -1)   # -> (Hidden, Batch)
    """
    k = at if at >= 0 else len(axes) + 1 + at
    return axes[:k] + (over,) + axes[k:]


def _unwrap(leaves: Sequence[object]) -> list[object]:
    """Tensors to their arrays; other leaves as they are."""
    return [leaf.array if isinstance(leaf, Tensor) else leaf for leaf in leaves]


def _wrap(arrays: Sequence[object], leaf_axes: Sequence[AxisLabels | None]) -> list[object]:
    """The inverse of :func:`_unwrap`: name each array whose axes are given."""
    return [
        arr if axes is None else Tensor._wrap(arr, axes)
        for arr, axes in zip(arrays, leaf_axes, strict=True)
    ]
