"""Hooks for the layers of ``axjax.nn``: a layer's call is judged by running the layer.

A layer's type names its dtype and axes (``Affine[F32, Pixel, Hidden]``). For a call
``layer(x)`` the plugin builds a stand-in of the layer from those type arguments (its
parameters are ``ax.Input`` nodes with the layer's axes, sizes open: the layer's rule in
:mod:`._layer_rules`), calls the layer's own ``__call__`` on stand-ins of the arguments (see
:mod:`._evaluate`), and maps the result back to a static type. Whatever the layer checks at
run time (its input axis anywhere in the input, the axis it produces not there yet, the
dtype, a mask's axes, a state's batch axes) is therefore checked statically in the run-time
words, at any rank and position.

``ax.nn.Sequential([...])`` keeps its layers' types as type arguments; its call threads the
argument's type through each of them (a layer's call, a function's call), so a chain whose
axes cannot line up is an error on the call. ``ax.nn.LayerStack[Block, Layer]``'s call is
the block's call (judged as above where the block is a known layer), whose result must be
the argument's type: the output of one layer is the input of the next.

A layer whose type arguments are not known (a bare ``Affine`` annotation, ``Any``) gets the
gradual result and no error, as ops do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mypy.checker import TypeChecker
from mypy.maptype import map_instance_to_supertype
from mypy.messages import format_type
from mypy.nodes import (
    ARG_NAMED,
    ARG_POS,
    ARG_STAR,
    ARG_STAR2,
    CallExpr,
    DictExpr,
    Expression,
    ListExpr,
    MemberExpr,
    SymbolTableNode,
    TempNode,
    TupleExpr,
    TypeInfo,
)
from mypy.plugin import AttributeContext, FunctionContext, MethodContext
from mypy.subtypes import is_same_type, is_subtype
from mypy.types import (
    AnyType,
    Instance,
    TupleType,
    Type,
    TypeOfAny,
    UnpackType,
    get_proper_type,
)

from ..graph import Node
from ..nn._registry import declared_layers
from ._calls import AXES_ERROR, JOIN_ERROR
from ._evaluate import SIZE, CannotEvaluate, Env, Joined, deliberate, message
from ._layer_rules import LAYERS, SIZED, build
from ._origins import note_origins
from ._types import DTYPE, TENSOR, TT, class_of, make_tensor, tensor_of

NN = "axjax.nn"
SEQUENTIAL = f"{NN}._sequential.Sequential"
#: ``LayerStack[Block, Layer]``: the block applied n times, so its call keeps its input's type
LAYER_STACK = next(s.path for s in declared_layers() if s.typed == "stack")
#: ``Remat[Block]``: one module called as it is, so its call is the module's call
WRAPPERS = tuple(s.path for s in declared_layers() if s.typed == "wrapper")
#: ``Ensemble[Model, Member]``: the model called on every member, ``Member`` first in its output
ENSEMBLES = tuple(s.path for s in declared_layers() if s.typed == "ensemble")
CAST = f"{NN}._precision.cast"
#: ``Affine``'s and ``Linear``'s base: a square layer's weight is ``[Out[E], E]``
DENSE = f"{NN}._linear._Dense"
OUT_ROLE = "axjax.core._roles.Out"
#: the base of the recurrent cells (``AbstractCell[D, In, H]``): ``init_state`` is typed
CELL = f"{NN}._recurrent.AbstractCell"
#: a policy's cast (``policy.cast_to_compute(tree)``): ``DTypeCast[C]`` called
POLICY_CAST = f"{NN}._precision.DTypeCast.__call__"
FLOATS = frozenset(f"axjax.core._dtype.{n}" for n in ("F16", "BF16", "F32", "F64"))
# The tables below come from the registry of layers (axjax/nn/_registry.py), the one list
# (those of the layers judged on stand-ins, LAYERS and SIZED: ._layer_rules).
#: layers that apply a list of layers in turn (Sequential; Stacked passes a mask along)
CHAINS = tuple(s.path for s in declared_layers() if s.typed == "chain")
#: keyword arguments that carry no axes (a PRNG key, a flag): not given to the stand-in
IGNORED = frozenset({"key", "inference"})


@dataclass
class Tools:
    """What the hooks need of the plugin (bound methods, so no private access)."""

    lookup: Callable[[str], SymbolTableNode | None]
    env: Callable[[FunctionContext | MethodContext, str, bool], Env]
    gradual: Callable[[], Instance]
    tensor: Callable[[], TypeInfo]
    tuple_info: Callable[[], TypeInfo]


class LayerHooks:
    """The layer hooks of :class:`~axjax.mypy._plugin.AxjaxPlugin`."""

    def __init__(self, tools: Tools) -> None:
        self.tools = tools
        self._known: dict[str, str | None] = {}

    # ------------------------------------------------------------------ registration
    def layer_of(self, cls: str) -> str | None:
        """The known layer class ``cls`` is (or derives from, keeping its ``__call__``), by
        full name; ``None`` for other classes and for a subclass with its own ``__call__``."""
        if cls not in self._known:
            sym = self.tools.lookup(cls) if "." in cls else None
            info = sym.node if sym is not None else None
            known = None
            if isinstance(info, TypeInfo):
                owner = next((c for c in info.mro if "__call__" in c.names), None)
                if owner is not None and owner.fullname.startswith(NN + "."):
                    known = next((k for k in LAYERS if info.has_base(k)), None)
            self._known[cls] = known
        return self._known[cls]

    def is_layer_call(self, fullname: str) -> bool:
        """``Affine.__call__`` (or a subclass's): a call the hooks judge."""
        cls, _, method = fullname.rpartition(".")
        if method != "__call__" or not cls:
            return False
        return (
            cls in CHAINS
            or cls in WRAPPERS
            or cls in ENSEMBLES
            or cls == LAYER_STACK
            or self.layer_of(cls) is not None
        )

    # ------------------------------------------------------------------ hooks
    def judged(self, t: Type) -> bool:
        """Whether the hooks judge a call on a layer of type ``t``: its dtype and axes are
        known (a bare ``Conv2D`` annotation keeps the declared overloads), or a Sequential."""
        p = get_proper_type(t)
        if not isinstance(p, Instance):
            return False
        if any(p.type.has_base(c) for c in CHAINS):
            return _layers_of(p) is not None
        for holder in (LAYER_STACK, *WRAPPERS, *ENSEMBLES):
            if p.type.has_base(holder):
                inner = map_instance_to_supertype(p, self._info(holder)).args[0]
                return not isinstance(get_proper_type(inner), AnyType)
        known = self.layer_of(p.type.fullname)
        if known is None:
            return False
        args = map_instance_to_supertype(p, self._info(known)).args
        return _known_args(args)

    def call(self, ctx: MethodContext) -> Type:
        """The result of ``layer(x, ...)``, computed by the layer itself."""
        p = get_proper_type(ctx.type)
        if not isinstance(p, Instance):
            return self.tools.gradual()
        if not self.judged(p):  # a sequence layer's overloads mean nothing with Any axes
            known = self.layer_of(p.type.fullname)
            return (
                self.tools.gradual()
                if known is not None and LAYERS[known] in SIZED
                else (ctx.default_return_type)
            )
        if any(p.type.has_base(c) for c in CHAINS):
            return self.chain(ctx, p)
        if p.type.has_base(LAYER_STACK):
            return self.stack(ctx, p)
        ensemble = next((e for e in ENSEMBLES if p.type.has_base(e)), None)
        if ensemble is not None:
            return self.ensemble(ctx, map_instance_to_supertype(p, self._info(ensemble)))
        wrapper = next((w for w in WRAPPERS if p.type.has_base(w)), None)
        if wrapper is not None:
            inner = map_instance_to_supertype(p, self._info(wrapper)).args[0]
            out = self._call_inner(ctx, inner)
            return self.tools.gradual() if out is None else out
        known = self.layer_of(p.type.fullname)
        if known is None:
            return self.tools.gradual()
        if cache_call(ctx.context):  # ``(y, cache)``, as the overloads declare
            return ctx.default_return_type
        args = list(map_instance_to_supertype(p, self._info(known)).args)

        def run(env: Env) -> object:
            layer = build(LAYERS[known], env, args)
            pos: list[object] = []
            kw: dict[str, object] = {}
            for i, param in enumerate(ctx.callee_arg_names):
                for expr, typ, kind, key in zip(
                    ctx.args[i], ctx.arg_types[i], ctx.arg_kinds[i], ctx.arg_names[i], strict=True
                ):
                    if kind in (ARG_STAR, ARG_STAR2):
                        raise CannotEvaluate
                    if param in IGNORED:
                        continue
                    value = env.value(expr, typ)
                    if key is None:
                        pos.append(value)
                    else:
                        kw[key] = value
            return layer(*pos, **kw)

        return self.evaluate(ctx, run, LAYERS[known] in SIZED)

    def evaluate(
        self, ctx: MethodContext, run: Callable[[Env], object], sized: bool = False
    ) -> Type:
        """Run ``run`` on stand-ins; its result as a type, or its error reported."""
        env = self.tools.env(ctx, "float", sized)
        try:
            try:
                return self.result(env, run(env))
            except Exception as e:
                if isinstance(e, CannotEvaluate | Joined) or deliberate(e):
                    raise
                env = self.tools.env(ctx, "float", True)  # a rule that needs sizes
                return self.result(env, run(env))
        except CannotEvaluate:
            return self.tools.gradual()
        except Joined as j:
            ctx.api.fail(
                f"{j.what} is an operand widened to a base class, as a join of "
                "different tensors makes it (a list literal, a conditional); annotate "
                "the variable with its exact Tensor[...] type",
                ctx.context,
                code=JOIN_ERROR,
            )
            return self.tools.gradual()
        except Exception as e:  # noqa: BLE001 - the layer's own error, or one we cannot judge
            if _reportable(env, e) and not self._passes_for_ints(ctx, env, run):
                said = message(e)
                if sized:  # the stand-in's own sizes, in a cell's name: not the program's
                    said = said.replace(f"={SIZE})", ")")
                ctx.api.fail(said, ctx.context, code=AXES_ERROR)
                note_origins(ctx)
            return self.tools.gradual()

    def _passes_for_ints(self, ctx: MethodContext, env: Env, run: Callable[[Env], object]) -> bool:
        if not env.dtype_vars:
            return False
        try:
            run(self.tools.env(ctx, "int", env.sized))
        except Exception:  # noqa: BLE001
            return False
        return True

    def result(self, env: Env, out: object) -> Type:
        """The static type of a layer's result: a Tensor, or a tuple of them (a state)."""
        if isinstance(out, tuple):
            items = [self.result(env, o) for o in out]
            return TupleType(
                items, Instance(self.tools.tuple_info(), [AnyType(TypeOfAny.special_form)])
            )
        if not isinstance(out, Node):
            raise CannotEvaluate
        tt: TT = env.result(out)
        return make_tensor(self.tools.tensor(), tt, self.tools.tuple_info())

    # ------------------------------------------------------------------ a cell's state
    def is_init_state(self, fullname: str) -> bool:
        """``LSTMCell.init_state`` (a cell's, or a subclass's): typed from its batch."""
        cls, _, method = fullname.rpartition(".")
        if method != "init_state" or "." not in cls:
            return False
        sym = self.tools.lookup(cls)
        info = sym.node if sym is not None else None
        return isinstance(info, TypeInfo) and info.has_base(CELL)

    def init_state(self, ctx: MethodContext) -> Type:
        """``cell.init_state({Batch: 32, Time: 8})``: ``Tensor[D, Batch, Time, Hidden]`` (a
        pair of them for an LSTM): the batch axes of a dict literal, in its order. Another
        mapping keeps the declared (gradual) axes."""
        cell = get_proper_type(ctx.type)
        if not isinstance(cell, Instance) or not cell.type.has_base(CELL):
            return ctx.default_return_type
        args = map_instance_to_supertype(cell, self._info(CELL)).args
        if len(args) != 3 or isinstance(get_proper_type(args[2]), AnyType):
            return ctx.default_return_type
        given = ctx.args[0] if ctx.args else []
        if not given:
            return ctx.default_return_type  # no batch: the overloads say [Hidden]
        batch = given[0]
        lookup = getattr(ctx.api, "lookup_type_or_none", None)
        if not isinstance(batch, DictExpr) or lookup is None:
            return ctx.default_return_type
        axes: list[Type] = []
        for key, _ in batch.items:
            label = class_of(lookup(key)) if key is not None and lookup(key) is not None else None
            if label is None or isinstance(get_proper_type(label), AnyType):
                return ctx.default_return_type
            axes.append(label)
        state = make_tensor(
            self.tools.tensor(), TT(args[0], [*axes, args[2]]), self.tools.tuple_info()
        )
        ret = get_proper_type(ctx.default_return_type)
        if isinstance(ret, TupleType):
            return ret.copy_modified(items=[state for _ in ret.items])
        return state

    # ------------------------------------------------------------------ ax.nn.cast
    def cast(self, ctx: FunctionContext) -> Type:
        """``ax.nn.cast(tree, BF16)``: a Tensor, a layer, a Sequential or a tuple of them with
        its floating dtype replaced (``Affine[F32, In, Out]`` -> ``Affine[BF16, In, Out]``).
        Other trees keep their type (their fields' types are not type arguments)."""
        if len(ctx.arg_types) < 2 or not ctx.arg_types[0] or not ctx.arg_types[1]:
            return ctx.default_return_type
        target = class_of(ctx.arg_types[1][0])
        if not (isinstance(target, Instance) and target.type.fullname in FLOATS):
            return ctx.default_return_type
        return self._recast(_own_type(ctx), target)

    def policy_cast(self, ctx: MethodContext) -> Type:
        """``policy.cast_to_compute(tree)`` (a ``DTypeCast[C]`` called): as :meth:`cast`
        with the policy's dtype; another tree is ``Any``, as the overloads say."""
        caster = get_proper_type(ctx.type)
        if not (
            isinstance(caster, Instance) and caster.args and ctx.arg_types and ctx.arg_types[0]
        ):
            return ctx.default_return_type
        target = get_proper_type(caster.args[0])
        if not (isinstance(target, Instance) and target.type.fullname in FLOATS):
            return ctx.default_return_type
        tree = _own_type(ctx)
        if not self._typed_tree(tree):
            return ctx.default_return_type
        return self._recast(tree, target)

    def _typed_tree(self, t: Type) -> bool:
        """What a cast types: a Tensor, a known layer, a tuple of these, or a module generic
        in one of them (``LayerStack[Affine[...], Layer]``, ``Remat[...]``, ``Recurrent[...]``,
        ``Sequential[...]``, a user's ``Residual[Affine[...]]``)."""
        p = get_proper_type(t)
        if isinstance(p, TupleType):
            return all(self._typed_tree(i) for i in p.items)
        if not isinstance(p, Instance) or not p.args:
            return False
        if p.type.fullname == TENSOR or p.type.fullname in LAYERS:
            return True
        return _is_module(p.type) and any(self._typed_tree(a) for a in _flat_args(p))

    def _recast(self, t: Type, target: Instance) -> Type:
        """``t`` with the floating dtype of every Tensor and layer in it replaced: a layer's
        or Tensor's first type argument, and recursively the type arguments of a module that
        holds them (a container's layers are cast with it)."""
        if isinstance(t, UnpackType):  # Sequential[*tuple[A, B]]
            inner = get_proper_type(t.type)
            return UnpackType(self._recast(inner, target)) if isinstance(inner, TupleType) else t
        p = get_proper_type(t)
        if isinstance(p, TupleType):
            return p.copy_modified(items=[self._recast(i, target) for i in p.items])
        if not isinstance(p, Instance) or not p.args:
            return t
        first = get_proper_type(p.args[0])
        if isinstance(first, Instance) and first.type.has_base(DTYPE):  # Affine[F32, ...]
            floating = first.type.fullname in FLOATS
            return p.copy_modified(args=[target, *p.args[1:]]) if floating else t
        if _is_module(p.type):  # Recurrent[LSTMCell[F32, ...], Time], a user's Residual[...]
            return p.copy_modified(args=[self._recast(a, target) for a in p.args])
        return t

    # ------------------------------------------------------------------ Sequential
    def sequential(self, ctx: FunctionContext) -> Type:
        """``Sequential([l1, f, l2])``: a ``Sequential`` typed by its layers, in order."""
        ret = get_proper_type(ctx.default_return_type)
        arg = ctx.args[0][0] if ctx.args and ctx.args[0] else None
        lookup = getattr(ctx.api, "lookup_type_or_none", None)
        if (
            not isinstance(ret, Instance)
            or not isinstance(arg, ListExpr | TupleExpr)
            or (lookup is None)
        ):
            return ctx.default_return_type
        items = [lookup(e) for e in arg.items]
        if any(t is None for t in items) or not items:
            return ctx.default_return_type
        return ret.copy_modified(args=[t for t in items if t is not None])

    def chain(self, ctx: MethodContext, seq: Instance) -> Type:
        """``model(x)``: ``x``'s type through every layer of the Sequential in turn."""
        layers = _layers_of(seq)
        checker = ctx.api
        if layers is None or not isinstance(checker, TypeChecker) or len(ctx.args[0]) != 1:
            return ctx.default_return_type
        current: Type = ctx.arg_types[0][0]
        calls = checker.expr_checker
        # a Stacked's mask goes to every layer
        extra = [
            TempNode(t, context=ctx.context)
            for name, ts in zip(ctx.callee_arg_names, ctx.arg_types, strict=True)
            if name == "mask"
            for t in ts
        ]
        for layer in layers:
            node = TempNode(current, context=ctx.context)
            errors = checker.msg.errors.num_messages()
            calls.type_context.append(None)  # each step is judged by its argument alone
            try:
                current, _ = calls.check_call(
                    layer,
                    [node, *extra],
                    [ARG_POS] + [ARG_NAMED] * len(extra),
                    ctx.context,
                    [None] + ["mask"] * len(extra),
                )
            finally:
                calls.type_context.pop()
            if checker.msg.errors.num_messages() != errors:
                return self.tools.gradual()  # reported by the layer's own hook
            if isinstance(get_proper_type(current), AnyType):
                return current
        return current

    # ------------------------------------------------------------------ LayerStack
    def stack(self, ctx: MethodContext, stack: Instance) -> Type:
        """``stack(x, *args, **kwargs)``: the block's call on the same arguments, whose
        result must have ``x``'s type; the result is ``x``'s type."""
        block = map_instance_to_supertype(stack, self._info(LAYER_STACK)).args[0]
        if not ctx.arg_types or len(ctx.args[0]) != 1:
            return ctx.default_return_type
        x = ctx.arg_types[0][0]
        out = self._call_inner(ctx, block)
        if out is None:
            return self.tools.gradual()  # reported by the block's own call
        if not is_subtype(out, x):  # a gradual result passes
            ctx.api.fail(
                f"LayerStack: the block returns {format_type(out, ctx.api.options)} for "
                f"{format_type(x, ctx.api.options)}; a stacked block must return what it is "
                "given (its output is the next layer's input)",
                ctx.context,
                code=AXES_ERROR,
            )
            return self.tools.gradual()
        return x

    # ------------------------------------------------------------------ Ensemble
    def ensemble(self, ctx: MethodContext, ens: Instance) -> Type:
        """``ensemble(x, *args, **kwargs)``: the model's call on the same arguments, with
        the ensemble's axis first in each Tensor of the result; an argument that already has
        that axis is an error (every member gets the same input)."""
        model, axis = ens.args[0], ens.args[1]
        known_axis = not isinstance(get_proper_type(axis), AnyType)
        tensor = self.tools.tensor()
        for types in ctx.arg_types:
            for t in types:
                tt = tensor_of(t, tensor)
                if known_axis and tt is not None and tt.axes is not None:
                    if any(is_same_type(a, axis) for a in tt.axes):
                        name = format_type(axis, ctx.api.options).strip('"')
                        ctx.api.fail(
                            f"Ensemble(over={name}): the input {format_type(t, ctx.api.options)} "
                            f"already has the ensemble's axis {name}; every member gets the "
                            "same input",
                            ctx.context,
                            code=AXES_ERROR,
                        )
                        return self.tools.gradual()
        out = self._call_inner(ctx, model)
        if out is None:
            return self.tools.gradual()  # reported by the model's own call
        if not known_axis:
            return self.tools.gradual()
        return self._with_axis(out, axis)

    def _with_axis(self, t: Type, axis: Type) -> Type:
        """``t`` (a Tensor or a tuple of them) with ``axis`` first in each Tensor; another
        type is gradual."""
        p = get_proper_type(t)
        if isinstance(p, TupleType):
            return p.copy_modified(items=[self._with_axis(i, axis) for i in p.items])
        tt = tensor_of(p, self.tools.tensor())
        if tt is None or tt.axes is None or isinstance(p, AnyType):
            return self.tools.gradual()
        return make_tensor(
            self.tools.tensor(), TT(tt.dtype, [axis, *tt.axes]), self.tools.tuple_info()
        )

    def _call_inner(self, ctx: MethodContext, inner: Type) -> Type | None:
        """The result of calling a module of type ``inner`` with the arguments of ``ctx``'s
        call (mypy's own check of the call, the inner layer's hooks included); ``None`` when
        that call was reported wrong."""
        checker = ctx.api
        if not isinstance(checker, TypeChecker):
            return ctx.default_return_type
        nodes: list[Expression] = []
        kinds: list[Any] = []
        names: list[str | None] = []
        for types, arg_kinds, arg_names in zip(
            ctx.arg_types, ctx.arg_kinds, ctx.arg_names, strict=True
        ):
            for t, kind, name in zip(types, arg_kinds, arg_names, strict=True):
                nodes.append(TempNode(t, context=ctx.context))
                kinds.append(kind)
                names.append(name)
        calls = checker.expr_checker
        calls.type_context.append(None)  # judged by the arguments alone
        try:  # a watcher that passes the errors on: mypy may hold them in an outer one
            with checker.msg.filter_errors(filter_errors=False) as watcher:
                out, _ = calls.check_call(inner, nodes, kinds, ctx.context, names)
        finally:
            calls.type_context.pop()
        return None if watcher.has_new_errors() else out

    def stacked_attribute(self, ctx: AttributeContext) -> Type:
        """``stack.layers.down.weight``: a parameter Tensor reached through a
        ``LayerStack``'s ``layers`` has the stacking axis first (``Tensor[F32, Layer, Other,
        Hidden]``), as it has at run time; the block's own class types it without.
        ``stack.layers`` itself, declared ``Any`` (exact for no other checker), is the block's
        type here, so the walk above reaches its fields."""
        if ctx.is_lvalue:
            return ctx.default_attr_type
        default = self._square_weight(ctx)
        t = get_proper_type(default)
        holder = get_proper_type(ctx.type)
        if (
            isinstance(ctx.context, MemberExpr)
            and ctx.context.name == "layers"
            and isinstance(holder, Instance)
            and holder.type.has_base(LAYER_STACK)
        ):  # declared gradual (`Any`) for the other checkers: here the block's own type
            return map_instance_to_supertype(holder, self._info(LAYER_STACK)).args[0]
        if not (isinstance(t, Instance) and t.type.has_base(TENSOR)):
            return default
        lookup = getattr(ctx.api, "lookup_type_or_none", None)
        node = ctx.context.expr if isinstance(ctx.context, MemberExpr) else None
        while isinstance(node, MemberExpr) and lookup is not None:
            if node.name in ("layers", "members"):
                holder = get_proper_type(lookup(node.expr))
                base = next(
                    (
                        b
                        for b in (LAYER_STACK, *ENSEMBLES)
                        if isinstance(holder, Instance)
                        and holder.type.has_base(b)
                        and node.name == ("layers" if b == LAYER_STACK else "members")
                    ),
                    None,
                )
                if isinstance(holder, Instance) and base is not None:
                    axis = map_instance_to_supertype(holder, self._info(base)).args[1]
                    tt = tensor_of(t, self.tools.tensor())
                    if tt is None or tt.axes is None:
                        return default
                    return make_tensor(
                        self.tools.tensor(), TT(tt.dtype, [axis, *tt.axes]), self.tools.tuple_info()
                    )
            node = node.expr
        return default

    def _square_weight(self, ctx: AttributeContext) -> Type:
        """``Linear(E, E).weight`` (and ``Affine``'s): ``Tensor[D, Out[E], E]``, as at run
        time (a weight never has an axis twice), where the declared field says ``[E, E]``."""
        holder = get_proper_type(ctx.type)
        if not (
            isinstance(ctx.context, MemberExpr)
            and ctx.context.name == "weight"
            and isinstance(holder, Instance)
            and holder.type.has_base(DENSE)
        ):
            return ctx.default_attr_type
        d, i, o = map_instance_to_supertype(holder, self._info(DENSE)).args
        if not is_same_type(i, o) or isinstance(get_proper_type(i), AnyType):
            return ctx.default_attr_type
        rows = Instance(self._info(OUT_ROLE), [o])
        return make_tensor(self.tools.tensor(), TT(d, [rows, i]), self.tools.tuple_info())

    def _info(self, fullname: str) -> TypeInfo:
        sym = self.tools.lookup(fullname)
        assert sym is not None and isinstance(sym.node, TypeInfo), fullname
        return sym.node


def _own_type(ctx: FunctionContext | MethodContext) -> Type:
    """The first argument's type, inferred without the cast's parameter types as context: an
    inline generic call (``cast(ax.nn.remat(fc))``) would otherwise take the ``Any`` of the
    overloads' ``Remat[Affine[Any, ...]]`` (mypy infers an argument in its formal's context)."""
    t, expr = ctx.arg_types[0][0], ctx.args[0][0]
    checker = ctx.api
    if not isinstance(expr, CallExpr) or not isinstance(checker, TypeChecker):
        return t
    with checker.msg.filter_errors():  # already reported once, in context
        return checker.expr_checker.accept(expr, type_context=None)


def _is_module(info: TypeInfo) -> bool:
    """An Equinox module (a layer, a container, a user's block): ``cast`` maps its leaves."""
    return any(c.name == "Module" and c.fullname.startswith("equinox.") for c in info.mro)


def _flat_args(p: Instance) -> list[Type]:
    """Type arguments with a spelt-out ``*tuple[A, B]`` spliced (a Sequential's layers)."""
    out: list[Type] = []
    for a in p.args:
        inner = get_proper_type(a.type) if isinstance(a, UnpackType) else None
        out += inner.items if isinstance(inner, TupleType) else [a]
    return out


def _layers_of(seq: Instance) -> list[Type] | None:
    """The layer types a ``Sequential[...]`` carries (``None``: not known)."""
    items: list[Type] = []
    for a in seq.args:
        if isinstance(a, UnpackType):
            inner = get_proper_type(a.type)
            if not isinstance(inner, TupleType):
                return None  # a bare `Sequential`: *tuple[Any, ...]
            items += inner.items
        else:
            items.append(a)
    return items or None


def _known_args(args: Sequence[Type]) -> bool:
    """Type arguments with no ``Any`` (a bare annotation), also inside a cell's type."""
    for a in args:
        p = get_proper_type(a)
        if isinstance(p, AnyType) or (
            isinstance(a, UnpackType) and not isinstance(get_proper_type(a.type), TupleType)
        ):
            return False
        if isinstance(p, Instance) and p.type.fullname in LAYERS and not _known_args(p.args):
            return False
    return True


def _reportable(env: Env, e: Exception) -> bool:
    if not isinstance(e, TypeError) or not deliberate(e) or "symbolic graph node" in str(e):
        return False
    if env.uncertain or env.variadic:
        return False
    return not (env.placeholders and type(e) is TypeError)


def cache_call(context: object) -> bool:
    """A layer call given ``cache=`` (attention with a KV cache): its declared overloads
    type it (``(y, cache)``), not the layer run on stand-ins."""
    return isinstance(context, CallExpr) and "cache" in context.arg_names


__all__ = [
    "CAST",
    "CHAINS",
    "LAYERS",
    "LAYER_STACK",
    "SEQUENTIAL",
    "WRAPPERS",
    "LayerHooks",
    "Tools",
    "cache_call",
]
