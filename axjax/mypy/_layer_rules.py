"""The stand-ins of the layers whose calls the mypy plugin judges: one rule per layer.

A layer's call is judged by running the layer (:mod:`._layers`) on a *stand-in*: an
instance of the layer's own class, made without ``__init__``, whose parameters are
``ax.Input`` nodes with the axes its type arguments name (sizes open). :data:`RULES` maps
each layer's name in ``axjax.nn`` to the rule that makes its stand-in from those type
arguments; :func:`build` looks the rule up and applies it. A layer without a rule, or
whose type arguments say too little, gets the gradual result (``CannotEvaluate``).

A new layer's rule is one entry in :data:`RULES`. Most layers are typed ``Layer[D, *Axes]``:
their rule, decorated ``@_typed``, gets the stand-ins of the dtype and of the axes.

Example (the rule of a layer ``Scale[D, A]`` with one weight over ``A``; its entry in
:data:`RULES` is ``"Scale": _scale``):

    >>> @_typed
    ... def _scale(kind: str, env: Env, d: type[DType], axes: list[Any]) -> Stand:
    ...     (a,) = axes
    ...     return _make(_layer_class(kind), weight=_param(env, d, a), axis=a)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from mypy.types import AnyType, Instance, TupleType, Type, UnpackType, get_proper_type

from .. import nn
from ..core import Axis, DType
from ..core._internal import output_role
from ..graph import Input
from ..nn._registry import declared_layers
from ._evaluate import SIZE, CannotEvaluate, Env

__all__ = ["LAYERS", "RULES", "SIZED", "Rule", "Stand", "build"]

# The tables below come from the registry of layers (axjax/nn/_registry.py), the one list.
#: the layers whose calls the plugin judges on stand-ins, by full name -> public name
LAYERS = {s.path: s.name for s in declared_layers() if s.typed == "stand-in"}
#: layers run on sized stand-ins (they build a zero state from the input's sizes)
SIZED = frozenset(s.name for s in declared_layers() if s.sized)

#: a stand-in layer: called on the stand-ins of a call's arguments
Stand = Callable[..., object]
#: ``rule(kind, env, args)``: the stand-in of the layer named ``kind`` (its public name)
#: whose type arguments are ``args`` (not empty); ``CannotEvaluate`` when they say too little
Rule = Callable[[str, Env, list[Type]], Stand]
#: a rule of a layer typed ``Layer[D, *Axes]``, given the stand-ins of its dtype and axes
TypedRule = Callable[[str, Env, type[DType], list[Any]], Stand]


def build(kind: str, env: Env, args: list[Type]) -> Stand:
    """A stand-in of a layer of class ``kind`` whose type arguments are ``args``, made by
    the layer's rule in :data:`RULES`."""
    rule = RULES.get(kind)
    if not args or rule is None:
        raise CannotEvaluate
    return rule(kind, env, args)


# ---------------------------------------------------------------------- the pieces
def _axes(env: Env, args: list[Type]) -> list[Any]:
    """Stand-ins of type arguments that are axes (``*tuple[A, B]`` spliced)."""
    out: list[Any] = []
    for a in args:
        if isinstance(a, UnpackType):
            inner = get_proper_type(a.type)
            if not isinstance(inner, TupleType):
                raise CannotEvaluate  # *tuple[Any, ...] or a *Ts of the layer's axes
            out += _axes(env, list(inner.items))
            continue
        if isinstance(get_proper_type(a), AnyType):
            raise CannotEvaluate  # a bare annotation: the layer's axes are not known
        out.append(env.klass(a))
    return out


def _param(
    env: Env,
    dtype: type[DType],
    *axes: type[Axis],
    sized: bool = False,
    known: dict[Any, int] | None = None,
) -> Input[Any, *tuple[Any, ...]]:
    """A parameter of the stand-in: sizes open, unless the rule reads them (``sized``), and
    those ``known`` (a cell's number of gates)."""
    fill = SIZE if env.sized or sized else None
    return Input(dtype, *axes, sizes=[(known or {}).get(a, fill) for a in axes])


T = TypeVar("T")


class _Layer(Protocol):
    """A layer as the stand-ins are used: called on the arguments' stand-ins."""

    def __call__(self, *args: object, **kwargs: object) -> object: ...


def _layer_class(kind: str) -> type[_Layer]:
    """The ``ax.nn`` class named ``kind`` (a layer class of the registry)."""
    cls: type[_Layer] = getattr(nn, kind)
    return cls


def _make(cls: type[T], **fields: object) -> T:
    obj = object.__new__(cls)
    for k, v in fields.items():
        object.__setattr__(obj, k, v)
    return obj


def _typed(make: TypedRule) -> Rule:
    """The rule of a layer typed ``Layer[D, *Axes]``: ``make`` gets the stand-ins of its
    dtype and of its axes (``*tuple[A, B]`` spliced), in that order."""

    def rule(kind: str, env: Env, args: list[Type]) -> Stand:
        return make(kind, env, env.dtype(args[0]), _axes(env, args[1:]))

    return rule


# ---------------------------------------------------------------------- the rules
@_typed
def _affine(kind: str, env: Env, d: type[DType], axes: list[Any]) -> Stand:
    """``Affine[D, In, Out]`` (weight and bias) and ``Linear[D, In, Out]`` (no bias)."""
    i, o = axes
    bias = _param(env, d, o) if kind == "Affine" else None
    rows = output_role(o) if o is i else o  # a square layer's weight: [Out[E], E]
    return _make(
        _layer_class(kind),
        weight=_param(env, d, rows, i),
        **({"bias": bias} if kind == "Affine" else {}),
        in_axis=i,
        out_axis=o,
    )


@_typed
def _mlp(kind: str, env: Env, d: type[DType], axes: list[Any]) -> Stand:
    """``MLP[D, In, Out]``: one ``Affine`` from ``In`` to ``Out``, no activation."""
    i, o = axes
    one = _make(
        nn.Affine, weight=_param(env, d, o, i), bias=_param(env, d, o), in_axis=i, out_axis=o
    )
    return _make(nn.MLP, layers=(one,), activation=lambda x: x, final_activation=None)


@_typed
def _embedding(kind: str, env: Env, d: type[DType], axes: list[Any]) -> Stand:
    """``Embedding[D, Vocab, Embed]``."""
    v, e = axes
    return _make(nn.Embedding, weight=_param(env, d, v, e), vocab_axis=v, embed_axis=e)


@_typed
def _norm(kind: str, env: Env, d: type[DType], axes: list[Any]) -> Stand:
    """``LayerNorm[D, *Axes]`` (weight and bias) and ``RMSNorm[D, *Axes]`` (weight)."""
    extra = {"bias": _param(env, d, *axes)} if kind == "LayerNorm" else {}
    return _make(
        _layer_class(kind),
        weight=_param(env, d, *axes),
        axes=tuple(axes),
        sizes=(None,) * len(axes),
        eps=1e-5,
        **extra,
    )


@_typed
def _conv(kind: str, env: Env, d: type[DType], axes: list[Any]) -> Stand:
    """``Conv1D[D, *Spatial, In, Out]`` (and 2D, 3D): stride, dilation and groups 1,
    ``"VALID"`` padding."""
    *spatial, i, o = axes
    n = len(spatial)
    return _make(
        _layer_class(kind),
        weight=_param(env, d, o, i, *spatial),
        bias=_param(env, d, o),
        spatial=tuple(spatial),
        in_axis=i,
        out_axis=o,
        stride=(1,) * n,
        padding="VALID",
        dilation=(1,) * n,
        groups=1,
    )


@_typed
def _cell(kind: str, env: Env, d: type[DType], axes: list[Any]) -> Stand:
    """``RNNCell[D, In, Hidden]``, ``GRUCell`` and ``LSTMCell``: their gate weights with
    the number of gates known."""
    i, h = axes
    gates = (nn.Gate,) if kind != "RNNCell" else ()
    known = {nn.Gate: 3 if kind == "GRUCell" else 4}
    read = nn.Prev if i is h else i
    fields: dict[str, object] = {
        "weight_ih": _param(env, d, read, *gates, h, known=known),
        "weight_hh": _param(env, d, nn.Prev, *gates, h, known=known),
        "bias": _param(env, d, *gates, h, known=known),
        "in_axis": i,
        "hidden_axis": h,
    }
    if kind == "GRUCell":
        fields["bias_n"] = _param(env, d, h)
    return _make(_layer_class(kind), **fields)


@_typed
def _attention(kind: str, env: Env, d: type[DType], axes: list[Any]) -> Stand:
    """``MultiheadAttention[D, Query, Key, Embed, Head, HeadDim]``: einsum, no bias, no
    dropout, not causal."""
    q, k, e, h, hd = axes
    proj = _param(env, d, h, hd, e, sized=True)  # the call reads the Embed size
    return _make(
        nn.MultiheadAttention,
        query_proj=proj,
        key_proj=proj,
        value_proj=proj,
        output_proj=_param(env, d, e, h, hd),
        biases=None,
        dropout=None,
        embed_axis=e,
        query_pos=q,
        key_pos=k,
        head_axis=h,
        head_dim_axis=hd,
        causal=False,
        implementation="einsum",
    )


@_typed
def _gqa(kind: str, env: Env, d: type[DType], axes: list[Any]) -> Stand:
    """``GroupedQueryAttention[D, Query, Key, Embed]``: the default head axes, no RoPE (it
    runs on tensors only; its axis rule is ``rotary_embedding``'s, checked on its own), the
    einsum path."""
    q, k, e = axes
    kv, g, hd = nn.KVHead, nn.GroupHead, nn.HeadDim
    return _make(
        nn.GroupedQueryAttention,
        query_proj=_param(env, d, kv, g, hd, e, sized=True),  # the call reads the Embed size
        key_proj=_param(env, d, kv, hd, e),
        value_proj=_param(env, d, kv, hd, e),
        output_proj=_param(env, d, e, kv, g, hd),
        biases=None,
        embed_axis=e,
        query_pos=q,
        key_pos=k,
        kv_head_axis=kv,
        group_axis=g,
        head_dim_axis=hd,
        rope_theta=None,
        implementation="einsum",
        sliding_window=None,
    )


@_typed
def _swiglu(kind: str, env: Env, d: type[DType], axes: list[Any]) -> Stand:
    """``SwiGLU[D, Embed, Hidden]``: gate and up ``[Hidden, Embed]``, down ``[Embed, Hidden]``."""
    e, h = axes
    inner = _param(env, d, h, e, sized=True)  # the call reads the Embed size
    return _make(
        nn.SwiGLU, gate=inner, up=inner, down=_param(env, d, e, h), embed_axis=e, hidden_axis=h
    )


def _pool(kind: str, env: Env, args: list[Type]) -> Stand:
    """``MaxPool2D[*Spatial]`` (and the others): no parameters, no dtype, the pooled axes
    only (a window of 1)."""
    return _make(
        _layer_class(kind),
        spatial=tuple(_axes(env, args)),
        window=1,
        stride=None,
        padding="VALID",
    )


def _cells(env: Env, args: list[Type]) -> tuple[list[Stand], object]:
    """``[*Cells, Over]``: the stand-ins of the cells (each by its own rule) and of the
    axis the sequence runs over."""
    *cells, over_type = args
    units: list[Stand] = []
    for c in cells:
        cell = get_proper_type(c)
        cell_kind = LAYERS.get(cell.type.fullname) if isinstance(cell, Instance) else None
        if cell_kind is None or not isinstance(cell, Instance):
            raise CannotEvaluate  # a cell class the plugin does not know
        units.append(build(cell_kind, env, list(cell.args)))
    return units, env.klass(over_type)


def _recurrent(kind: str, env: Env, args: list[Type]) -> Stand:
    """``Recurrent[Cell, Over]``: the cell run forward over ``Over``."""
    units, over = _cells(env, args)
    return _make(nn.Recurrent, cell=units[0], over=over, reverse=False)


def _bidirectional(kind: str, env: Env, args: list[Type]) -> Stand:
    """``Bidirectional[Cell, Cell2, Over]``: the first cell forward, the second backward."""
    units, over = _cells(env, args)
    return _make(
        nn.Bidirectional,
        forward=_make(nn.Recurrent, cell=units[0], over=over, reverse=False),
        backward=_make(nn.Recurrent, cell=units[1], over=over, reverse=True),
    )


#: the rule of each layer the plugin judges on stand-ins, by its name in ``axjax.nn``
RULES: dict[str, Rule] = {
    "Affine": _affine,
    "Linear": _affine,
    "MLP": _mlp,
    "Embedding": _embedding,
    "LayerNorm": _norm,
    "RMSNorm": _norm,
    "Conv1D": _conv,
    "Conv2D": _conv,
    "Conv3D": _conv,
    "RNNCell": _cell,
    "GRUCell": _cell,
    "LSTMCell": _cell,
    "MultiheadAttention": _attention,
    "SwiGLU": _swiglu,
    "GroupedQueryAttention": _gqa,
    "MaxPool1D": _pool,
    "MaxPool2D": _pool,
    "AvgPool1D": _pool,
    "AvgPool2D": _pool,
    "Recurrent": _recurrent,
    "Bidirectional": _bidirectional,
}
