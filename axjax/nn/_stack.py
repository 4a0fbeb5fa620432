# mypy: disable-error-code="overload-overlap"
# (the call restates the norms' overloads, whose axis positions mypy takes as overlapping)
"""``LayerStack``: ``n`` copies of one block, parameters stacked along a named axis, run
as a scan.

A transformer's blocks are alike: same structure, own parameters. A Python loop over them
unrolls into the program, so compile time and program size grow with depth. A
``LayerStack`` holds *one* block whose every parameter Tensor has a leading ``Layer`` axis
(a real axis of the Tensor: it shards, saves and loads like any other), and its call is one
:func:`axjax.fold` over ``Layer``: a single ``lax.scan`` (an XLA ``while``) whose body
applies the block to the carried activations with the parameters of one layer. The body is
traced and compiled once, whatever the depth (what Haliax's ``Stacked``, Penzai's
``LayerStack`` and ``nnx.scan`` do).

``remat=`` rematerialises the body in the backward pass under a ``jax.checkpoint``
policy (the names of :func:`axjax.nn.remat`), so the scan keeps only each layer's input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Concatenate, Generic, NamedTuple, TypeVarTuple, cast, final, overload

import equinox as eqx
import jax
import jax.numpy as jnp
from typing_extensions import ParamSpec, TypeVar

from ..core import AnyTensor, Axis, AxisError, DType, Tensor
from ..core._internal import (
    PyTree,
    argument,
    axis_name,
    check_axis_label,
    describe,
    flatten,
    index_int,
    is_symbolic,
    is_tensor,
    positive_int,
    unflatten,
)
from ..graph import fold
from ..parallel._internal import unsplit_leading
from ._linear import _Dense  # pyright: ignore[reportPrivateUsage]  # a stack of Affines' call
from ._norm import _Norm  # pyright: ignore[reportPrivateUsage]  # a stack of norms' call
from ._registry import register_layer
from ._remat import Policy, resolve_policy

__all__ = ["LayerStack", "Layer", "scan_layers"]

#: the block's type (covariant: a call reads the block's own call signature)
M = TypeVar("M", covariant=True, default=Any)
#: the stacking axis
L = TypeVar("L", bound=Axis, covariant=True, default=Any)
M2 = TypeVar("M2")
X = TypeVar("X")
D = TypeVar("D", bound=DType)
Ts = TypeVarTuple("Ts")
LS = TypeVar("LS", bound=Axis)  # a stack's axis, in a method's self-type
P = ParamSpec("P")
# a stack of norms' call: the norm's dtype and axes (the norms' own overloads, restated)
DN = TypeVar("DN", bound=DType)
A0 = TypeVar("A0", bound=Axis)
A1 = TypeVar("A1", bound=Axis)
T0 = TypeVar("T0", bound=Axis)
T1 = TypeVar("T1", bound=Axis)
T2 = TypeVar("T2", bound=Axis)
T3 = TypeVar("T3", bound=Axis)
T4 = TypeVar("T4", bound=Axis)
T5 = TypeVar("T5", bound=Axis)
Axes = TypeVarTuple("Axes")
Rest = TypeVarTuple("Rest")

#: ``remat=``: ``False`` (keep every activation), ``True`` (save only each layer's input),
#: a policy name of :func:`axjax.nn.remat` or a ``jax.checkpoint_policies`` function
Remat = bool | Policy


@final
class Layer(Axis):
    """The default axis of a :class:`LayerStack`: one entry per block."""


#: the axis of a stack being built (``Layer`` when none is given)
L2 = TypeVar("L2", bound=Axis, default=Layer)


@final
class _KeyData(Axis):
    """The words of a PRNG key, when per-layer keys ride along a scan as a Tensor."""


def dynamic_leaf(leaf: object) -> bool:
    return is_tensor(leaf) or eqx.is_array(leaf)


class StackWords(NamedTuple):
    """How :func:`stacked_size`'s errors speak of a container of stacked modules."""

    unit: str  # one entry: "the block's field ..."
    owner: str  # "a stacked block's parameters must be Tensors"
    axis: str  # "without the stacking axis Layer first"
    build: str  # what to do instead
    whole: str  # "every parameter of a stack has one entry per layer"
    entry: str


STACK_WORDS = StackWords(
    "block",
    "a stacked block's",
    "stacking axis",
    "build the stack with LayerStack.init or LayerStack.from_layers",
    "a stack",
    "layer",
)


def stacked_size(
    tree: PyTree, axis: type[Axis], where: str, words: StackWords = STACK_WORDS
) -> int:
    """The size of ``axis``, leading on every Tensor of ``tree``; a clear error otherwise."""
    sizes: set[int] = set()
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree, is_leaf=is_tensor):
        name = jax.tree_util.keystr(path, simple=True, separator=".") or f"the {words.unit}"
        if eqx.is_array(leaf):
            raise TypeError(
                f"{where}: the {words.unit}'s field {name} is a bare array; {words.owner} "
                "parameters must be Tensors (wrap it with ax.tensor(array, *axes))"
            )
        if not is_tensor(leaf):
            continue
        if not leaf.axes or leaf.axes[0] is not axis:
            raise AxisError(
                f"{where}: the parameter {name} is {describe(leaf)}, without the "
                f"{words.axis} {axis_name(axis)} first ({words.build})"
            )
        if leaf.shape[0] is not None:
            sizes.add(leaf.shape[0])
    if len(sizes) > 1:
        raise AxisError(
            f"{where}: the parameters have {axis_name(axis)} sizes {sorted(sizes)}; every "
            f"parameter of {words.whole} has one entry per {words.entry}"
        )
    if not sizes:
        raise ValueError(f"{where}: the {words.unit} has no parameter Tensors to stack")
    return sizes.pop()


def _with_leading(tree: PyTree, axis: type[Axis]) -> PyTree:
    """``tree`` with ``axis`` named first on every Tensor whose array gained a leading
    dimension (the result of a ``vmap`` or of stacking the arrays)."""

    def name(leaf: object) -> object:
        if isinstance(leaf, Tensor):
            return Tensor(leaf.array, (axis, *leaf.axes))
        return leaf

    return jax.tree.map(name, tree, is_leaf=is_tensor)


def _check_remat(remat: Remat, where: str) -> Remat:
    if remat is not False and remat is not True:
        resolve_policy(remat, where, "remat")  # an unknown name fails here, not at the call
    return remat


@register_layer(typed="stack")
class LayerStack(eqx.Module, Generic[M, L]):
    """``n`` blocks of one structure, parameters stacked along ``axis``, called as one scan.

    Build one with :meth:`init` (each block made with its own key, under ``eqx.filter_vmap``)
    or :meth:`from_layers` (blocks already built). Every parameter Tensor has ``axis`` first
    (``Tensor[F32, Layer, Mlp, Embed]``): sharding rules, safetensors and orbax treat it as
    any other axis, so ``{Layer: "data"}`` as a parameter rule shards the stack over layers.

    The call ``stack(x, *args, **kwargs)`` runs ``x = block_i(x, *args, **kwargs)`` for
    ``i = 0 .. n-1`` as one :func:`axjax.fold` over ``axis`` (one ``lax.scan``): the block
    must return what it is given (same structure, axes and dtypes), as a residual block
    does. ``key=`` is split into one key per layer; other arguments go to every layer as
    they are.

    Args:
        layers: one block whose every parameter Tensor has ``axis`` first.
        axis: the stacking axis (:class:`Layer` by default).
        remat: ``False`` keeps every activation for the backward pass; ``True`` saves only
            each layer's input and recomputes the rest; a policy name of
            :func:`axjax.nn.remat` (``"dots"``, ``"offload_dots"``, ...) or a
            ``jax.checkpoint_policies`` function saves what it names.

    Example:
        >>> stack = ax.nn.LayerStack.init(lambda k: Block(cfg, k), 24, Layer, key=key)
        >>> stack.layers.up.weight     # Tensor[F32, Layer=24, Mlp=512, Embed=128]
        >>> y = stack(x)               # Tensor[F32, Batch, Pos, Embed] -> the same type
        >>> stack[3]                   # the fourth block, a Block

    Typing: ``LayerStack[Block, Layer]``; the call takes and returns the block's argument
    type (under the mypy plugin also for layers typed by their rules, ``Affine[F32, E, E]``).
    """

    #: the block, its parameters stacked: typed gradually, as its class types one block's
    #: fields without the stacking axis (``stack.stacked(get)`` is exact; the mypy plugin
    #: types ``stack.layers.<...>`` exactly too)
    layers: Any
    axis: type[Axis] = eqx.field(static=True)
    remat: Remat = eqx.field(static=True)

    def __init__(
        self,
        layers: M,
        axis: type[L] = Layer,  # type: ignore[assignment]  # L's default is Layer
        *,
        remat: Remat = False,
    ) -> None:
        self.remat = _check_remat(remat, "LayerStack")  # the options first, then the blocks
        self.axis = check_axis_label(axis, "LayerStack")
        stacked_size(layers, self.axis, "LayerStack")
        self.layers = layers

    @classmethod
    def init(
        cls,
        make: Callable[[jax.Array], M2],
        n: int,
        axis: type[L2] = Layer,  # type: ignore[assignment]  # L2's default is Layer
        *,
        key: jax.Array,
        remat: Remat = False,
    ) -> LayerStack[M2, L2]:
        """``n`` blocks ``make(k)``, each with its own key, built at once (``eqx.filter_vmap``)
        with ``axis`` leading on every parameter Tensor.

        Example:
            >>> stack = ax.nn.LayerStack.init(
            ...     lambda k: ax.nn.Affine(Hidden, Hidden, 64, 64, key=k), 8, Layer, key=key)
        """
        n = positive_int("LayerStack.init", "n", n)
        over = check_axis_label(axis, "LayerStack.init")
        stacked = eqx.filter_vmap(make)(jax.random.split(key, n))
        return LayerStack(_with_leading(stacked, over), axis, remat=remat)

    @classmethod
    def from_layers(
        cls,
        layers: Sequence[M2],
        axis: type[L2] = Layer,  # type: ignore[assignment]  # L2's default is Layer
        *,
        remat: Remat = False,
    ) -> LayerStack[M2, L2]:
        """The stack of blocks already built (same structure, axes and sizes), in order.

        Example:
            >>> stack = ax.nn.LayerStack.from_layers([Block(cfg, k) for k in keys], Layer)
            >>> stack.unstack()[0]     # the first block again
        """
        if not layers:
            raise ValueError("LayerStack.from_layers: give at least one layer")
        over = check_axis_label(axis, "LayerStack.from_layers")
        stacked = stack_modules(
            layers, over, "LayerStack.from_layers", "layer", "a stack holds copies of one block"
        )
        return LayerStack(stacked, axis, remat=remat)

    def __len__(self) -> int:
        """The number of layers."""
        return stacked_size(self.layers, self.axis, "LayerStack")

    def __getitem__(self, i: int) -> M:
        """Block ``i`` (its parameters without the stacking axis)."""
        n = len(self)
        i = index_int("LayerStack", "index", i, what="an int (negative counts from the end)")
        if not -n <= i < n:
            raise IndexError(f"LayerStack: layer {i} is out of range for {n} layers")
        return self._block(lambda t: t[i % n])

    def stacked(
        self: LayerStack[M2, LS], get: Callable[[M2], Tensor[D, *Ts]]
    ) -> Tensor[D, LS, *Ts]:
        """The stacked parameter ``get`` picks from the block, typed with the stacking axis
        first: ``stack.stacked(lambda b: b.down.weight)`` is a ``Tensor[F32, Layer, Other,
        Hidden]``, in every checker (``stack.layers`` is typed exactly only by the mypy
        plugin: gradually, ``Any``, elsewhere).

        Example:
            >>> decay = ax.sum(ax.square(stack.stacked(lambda b: b.down.weight)), Layer)
        """
        out: object = get(self.layers)
        if not isinstance(out, Tensor) or not out.axes or out.axes[0] is not self.axis:
            raise TypeError(
                f"LayerStack.stacked: get must pick a parameter Tensor of the block (its "
                f"stacked Tensors have {axis_name(self.axis)} first), got "
                + (describe(out) if isinstance(out, Tensor) else type(out).__name__)
            )
        return cast("Tensor[D, LS, *Ts]", out)  # the stacked parameter: the axis LS first

    def unstack(self) -> list[M]:
        """The blocks, in order (for an unrolled model or a per-layer look)."""
        return [self[i] for i in range(len(self))]

    def _block(self, take: Callable[[Any], Any]) -> M:
        out: M = _without_leading(self.layers, take)
        return out

    @overload
    def __call__(
        self: LayerStack[Callable[Concatenate[X, P], X], Any],
        x: X,
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> X: ...
    # a stack of a norm, by the norm's own overloads (mypy takes no ParamSpec from an
    # overloaded call: without these, plain mypy rejected every call of a stack of norms)
    @overload
    def __call__(
        self: LayerStack[_Norm[DN, A0], Any],
        x: Tensor[DN, *Axes, A0],
        /,
        *,
        key: jax.Array | None = None,
    ) -> Tensor[DN, *Axes, A0]: ...
    @overload
    def __call__(
        self: LayerStack[_Norm[DN, A0], Any],
        x: Tensor[DN, *Axes, A0, T0],
        /,
        *,
        key: jax.Array | None = None,
    ) -> Tensor[DN, *Axes, A0, T0]: ...
    @overload
    def __call__(
        self: LayerStack[_Norm[DN, A0], Any],
        x: Tensor[DN, *Axes, A0, T0, T1],
        /,
        *,
        key: jax.Array | None = None,
    ) -> Tensor[DN, *Axes, A0, T0, T1]: ...
    @overload
    def __call__(
        self: LayerStack[_Norm[DN, A0], Any],
        x: Tensor[DN, A0, *Axes],
        /,
        *,
        key: jax.Array | None = None,
    ) -> Tensor[DN, A0, *Axes]: ...
    @overload
    def __call__(
        self: LayerStack[_Norm[DN, A0], Any],
        x: Tensor[DN, T0, A0, *Axes],
        /,
        *,
        key: jax.Array | None = None,
    ) -> Tensor[DN, T0, A0, *Axes]: ...
    @overload
    def __call__(
        self: LayerStack[_Norm[DN, A0], Any],
        x: Tensor[DN, T0, T1, T2, T3, T4, T5, *Axes],
        /,
        *,
        key: jax.Array | None = None,
    ) -> Tensor[DN, *tuple[Any, ...]]: ...
    @overload
    def __call__(
        self: LayerStack[_Norm[DN, A0, A1, *Rest], Any],
        x: Tensor[DN, *Axes],
        /,
        *,
        key: jax.Array | None = None,
    ) -> Tensor[DN, *Axes]: ...
    # a stack of an Affine (Linear, MLP) from an axis to itself: the axis last (elsewhere the
    # layer moves it to the end, and the block would not return what it is given)
    @overload
    def __call__(
        self: LayerStack[_Dense[DN, A0, A0], Any],
        x: Tensor[DN, *Axes, A0],
        /,
        *,
        key: jax.Array | None = None,
    ) -> Tensor[DN, *Axes, A0]: ...
    def __call__(self, x: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Apply every layer in turn: one scan over the stacking axis."""
        return _run(self, x, args, dict(kwargs))


def stack_modules(modules: Sequence[M2], over: type[Axis], where: str, noun: str, why: str) -> M2:
    """One module of ``modules``' structure whose every Tensor (and array) stacks theirs
    along a new leading axis ``over``; a clear error naming the first that differs."""
    dyn, static = eqx.partition(modules[0], dynamic_leaf, is_leaf=is_tensor)
    leaves0, def0 = flatten(dyn)
    columns: list[list[Any]] = [[] for _ in leaves0]
    for i, module in enumerate(modules):
        d, s = eqx.partition(module, dynamic_leaf, is_leaf=is_tensor)
        leaves, tdef = flatten(d)
        same = tdef == def0 and eqx.tree_equal(s, static) is True
        if same:
            same = all(
                (is_tensor(a) and is_tensor(b) and a.type == b.type)
                or (not is_tensor(a) and not is_tensor(b) and a.shape == b.shape)
                for a, b in zip(leaves, leaves0, strict=True)
            )
        if not same:
            raise ValueError(
                f"{where}: {noun} {i} differs from {noun} 0 in its structure, its settings "
                f"or its parameters' axes, dtypes or sizes; {why}"
            )
        for column, leaf in zip(columns, leaves, strict=True):
            column.append(leaf)
    stacked: list[Any] = [
        Tensor(jnp.stack([t.array for t in c]), (over, *c[0].axes))
        if is_tensor(c[0])
        else jnp.stack(c)
        for c in columns
    ]
    out: M2 = eqx.combine(unflatten(def0, stacked), static, is_leaf=is_tensor)
    return out


def _run(
    stack: LayerStack[Any, Any], x: PyTree, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> PyTree:
    where = f"LayerStack(over={axis_name(stack.axis)})"
    n = stacked_size(stack.layers, stack.axis, where)
    x_leaves, _ = flatten(x)
    if not x_leaves or not all(is_tensor(t) for t in x_leaves):
        raise TypeError(
            f"{where}: the input must be a Tensor or a pytree of Tensors (the state carried "
            f"from layer to layer), got {type(x).__name__}"
        )
    dyn, static = eqx.partition(stack.layers, dynamic_leaf, is_leaf=is_tensor)
    key = kwargs.pop("key", None)
    symbolic = any(is_symbolic(t) for t in [*x_leaves, *flatten(dyn)[0]])
    if key is not None and symbolic:
        raise TypeError(f"{where}: key= is for a call on Tensors, not on graph nodes")
    if not symbolic:
        dyn = unsplit_leading(dyn)  # FSDP over Layer on an Explicit mesh: gathered first
    xs: PyTree = dyn if key is None else (dyn, keys_tensor(key, n, stack.axis))

    def apply(state: PyTree, sliced: PyTree) -> PyTree:
        if key is None:
            block = eqx.combine(sliced, static, is_leaf=is_tensor)
            out = block(state, *args, **kwargs)
        else:
            layer_dyn, k = sliced
            block = eqx.combine(layer_dyn, static, is_leaf=is_tensor)
            out = block(state, *args, key=key_of(k, key), **kwargs)
        _check_same(out, state, where)
        return out

    if stack.remat is False:
        with argument("x"):  # the blocks' errors on the carried activations
            return fold(apply, over=stack.axis)(x, xs)
    if symbolic:  # a compiled graph replays the Loop node's body, without jax.checkpoint
        raise TypeError(
            f"{where}: remat={stack.remat!r} is for a call on Tensors; on graph nodes the "
            "compiled graph replays the loop's body and would not rematerialise it (build "
            "the graph from LayerStack(stack.layers, axis) without remat)"
        )
    policy = None if stack.remat is True else resolve_policy(stack.remat, where, "remat")
    unit = jax.checkpoint(apply, policy=policy, prevent_cse=False)
    return fold(unit, over=stack.axis)(x, xs)


def scan_layers(
    stack: LayerStack[M2, Any],
    x: X,
    per_layer: PyTree,
    call: Callable[[M2, X, PyTree], tuple[X, PyTree]],
) -> tuple[X, PyTree]:
    """``x, out_i = call(block_i, x, per_layer_i)`` for every layer ``i`` in turn, as one
    ``lax.scan``: the last ``x`` and the ``out_i`` stacked (arrays with a leading layer
    dimension, as ``per_layer``'s are: a KV cache per layer, say).

    The blocks are the stack's own (each parameter without the stacking axis, and gathered
    first where FSDP split the stack over it, as the stack's call does), on Tensors only.

    Example:
        >>> x, (keys, values) = scan_layers(stack, x, (keys, values), cached_block_call)
    """
    dyn, static = eqx.partition(stack.layers, dynamic_leaf, is_leaf=is_tensor)
    dyn = unsplit_leading(dyn)  # FSDP over the stacking axis on an Explicit mesh: gathered

    def layer(h: X, xs: tuple[PyTree, PyTree]) -> tuple[X, PyTree]:
        sliced, entry = xs
        block: M2 = eqx.combine(_without_leading(sliced), static, is_leaf=is_tensor)
        return call(block, h, entry)

    out: tuple[X, PyTree] = jax.lax.scan(layer, x, (dyn, per_layer))
    return out


def _without_leading(tree: PyTree, take: Callable[[Any], Any] = lambda a: a) -> PyTree:
    """``tree`` with every Tensor's first axis dropped and its array ``take(array)``: one
    entry of the stacking axis (``take`` picks it; with none, ``lax.scan`` already did)."""

    def drop(leaf: object) -> object:
        if isinstance(leaf, Tensor):
            return Tensor(take(leaf.array), leaf.axes[1:])
        return leaf

    return jax.tree.map(drop, tree, is_leaf=is_tensor)


def keys_tensor(key: jax.Array, n: int, axis: type[Axis]) -> AnyTensor:
    """One key per layer as a U32 Tensor ``[axis, _KeyData]`` (``fold`` scans Tensors)."""
    keys = jax.random.split(key, n)
    data = jax.random.key_data(keys) if jnp.issubdtype(keys.dtype, jax.dtypes.prng_key) else keys
    return Tensor(data.reshape(n, -1), (axis, _KeyData))


def key_of(k: AnyTensor, like: jax.Array) -> jax.Array:
    """The key of one layer, typed as ``like`` is (a typed key or raw uint32 words)."""
    words: jax.Array = k.array
    if jnp.issubdtype(like.dtype, jax.dtypes.prng_key):
        typed: jax.Array = jax.random.wrap_key_data(words, impl=jax.random.key_impl(like))
        return typed
    return words  # a raw key: its uint32 words as they are


def _check_same(out: PyTree, state: PyTree, where: str) -> None:
    """Raise unless the block returned what it was given: same structure, axes, dtypes."""
    o_leaves, o_def = flatten(out)
    s_leaves, s_def = flatten(state)
    if o_def == s_def and all(
        is_tensor(o) and o.axes == s.axes and o.dtype is s.dtype
        for o, s in zip(o_leaves, s_leaves, strict=True)
    ):
        return
    got = ", ".join(describe(t) if is_tensor(t) else type(t).__name__ for t in o_leaves)
    want = ", ".join(f"{describe(t)}" for t in s_leaves)
    raise AxisError(
        f"{where}: the block returned ({got}) for the input ({want}); a stacked block "
        "must return what it is given, same axes in the same order and the same dtype "
        "(its output is the next layer's input)"
        + ("" if o_def == s_def else f"; the structures differ too: {o_def} vs {s_def}")
    )
