"""The mypy plugin: exact result types and axjax's own messages for every op call.

For each op it owns, the plugin

1. replaces the declared signature (often a set of position overloads, see
   ``tools/gen_overloads.py``) by the implementation's, with every Tensor or axis parameter
   widened to ``object``, so mypy never reports "No overload variant" or "Cannot infer
   value of type parameter" for it (``object``, not ``Any``: an ``Any`` formal would become
   the type context of a nested call and erase its axes);
2. computes the result type by running the op's own type rule on symbolic stand-ins
   (:mod:`._evaluate`) and reports a failing rule at the call site, in the run-time words,
   under the error code ``axjax-axes``.

When the axes are not known well enough (``Any``, an unknown rank, ``*Ts`` in generic code
where a rule cannot tell, a label held in a ``type[Axis]`` variable) the call gets the
gradual ``Tensor[Any, *tuple[Any, ...]]`` and no error: the plugin never rejects a call that
could succeed at run time.
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable
from typing import TypeVar, cast

from mypy.nodes import (
    ARG_STAR,
    ARG_STAR2,
    Decorator,
    Expression,
    FuncDef,
    OverloadedFuncDef,
    SymbolNode,
    TypeInfo,
)
from mypy.options import Options
from mypy.plugin import (
    AnalyzeTypeContext,
    AttributeContext,
    ClassDefContext,
    FunctionContext,
    FunctionSigContext,
    MethodContext,
    MethodSigContext,
    Plugin,
    ReportConfigContext,
)
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    Type,
    TypeOfAny,
    get_proper_type,
)

from ..core._internal import declared_ops
from ..nn._registry import axis_rules
from ._calls import (
    AXES_ERROR,
    DEBUG,
    JOIN_ERROR,
    default,
    exact_index,
    fingerprint,
    no_repeated_axis,
    safe,
    vmap_type,
)
from ._evaluate import CannotEvaluate, Env, Joined, Named, deliberate, message
from ._graphs import COMPILE, compile_type
from ._labels import analyzing, check_annotation, check_label_class
from ._layers import CAST, CHAINS, POLICY_CAST, LayerHooks, Tools, cache_call
from ._loops import CALLS as LOOP_CALLS
from ._loops import SCAN_FUNCTION, loop_call_type, scan_position
from ._options import read_options, report_untyped
from ._origins import note_origins
from ._roles import CAUSAL_MASK, mask_signature, mask_type
from ._signature import widen
from ._types import (
    AXIS,
    CORE,
    GRAPH,
    OPS,
    ROLE_BASES,
    TENSOR,
    TT,
    make_tensor,
)
from ._user_ops import inline_op, power_type, untyped_op, untyped_op_note, user_op_call

C = TypeVar("C", FunctionContext, MethodContext)


def _functions(*kinds: str) -> frozenset[str]:
    """The public functions the op registry (axjax/core/_registry.py) declares of ``kinds``."""
    return frozenset(
        f
        for spec in declared_ops()
        if spec.namespace == "axjax" and spec.kind in kinds
        for f in spec.functions
    )


def _loss_names() -> frozenset[str]:
    """The full names of the losses and metrics ``axjax.train._gen_losses`` types: there, and
    where they are defined (a loss typed by its own signature is re-exported)."""
    module = importlib.import_module("axjax.train._gen_losses")
    public = {n: v for n, v in vars(module).items() if callable(v) and n[:1] != "_"}
    return frozenset(
        name
        for n, v in public.items()
        for name in (f"{module.__name__}.{n}", f"{v.__module__}.{n}")
    )


UNARY = _functions("unary")
BINARY = _functions("binary")
AXIS_OPS = _functions("axis", "positional", "set_algebra")
#: rules that compare operands position by position: a *Ts stand-in is exact there, so
#: their errors stand in generic code too
STRUCTURAL = UNARY | BINARY | _functions("matmul")
#: a literal index decides where the new axis goes
POSITIONAL = _functions("positional")
#: set algebra on axes: a *Ts or an Any axis might be any axis, so the result is not known
SET_ALGEBRA = _functions("set_algebra")
CONSTRUCTORS = {
    "tensor": "Any",
    "zeros": "F32",
    "ones": "F32",
    "full": "F32",
    "normal": "F32",
    "uniform": "F32",
    "randint": "I32",
    "arange": "I32",
}
METHODS = frozenset(
    {
        "__add__",
        "__radd__",
        "__sub__",
        "__rsub__",
        "__mul__",
        "__rmul__",
        "__truediv__",
        "__rtruediv__",
        "__pow__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__matmul__",
    }
)
# -- typ-sigs (issue 32): losses, metrics ------------------------------------------------
#: the losses and metrics of axjax.train (tools/gen_overloads.py's LOSSES, typed in
#: train/_gen_losses.py): the plugin runs each on stand-ins, exact at any rank
LOSSES = _loss_names()
#: the class axis a loss or metric takes when ``axis=`` is left out
CLASS = "axjax.train._axes.Class"
#: the collectives: their rule on axes (parallel/_collective.py: check_axes), on stand-ins
COLLECTIVES = frozenset(f"axjax.parallel._collective.{n}" for n in ("psum", "pmean", "all_gather"))
# -- end typ-sigs ---------------------------------------------------------------------------
#: the functions of axjax.nn declared with their axis rule (nn/_registry.py: checks_axes)
AXIS_RULES = axis_rules()
INPUT = f"{GRAPH}._nodes.Input"
VMAP = f"{CORE}._transforms.vmap"
NODES = frozenset(
    {TENSOR, INPUT, *(f"{GRAPH}._nodes.{n}" for n in ("Node", "Param", "Const", "Apply"))}
)
#: calls into these packages return no axjax tensors: no hook for them
FOREIGN = (
    "builtins.",
    "typing.",
    "jax.",
    "jaxlib.",
    "numpy.",
    "equinox.",
    "optax.",
    "mypy.",
    "collections.",
    "functools.",
    "itertools.",
    "os.",
    "re.",
    "matplotlib.",
    "tqdm.",
)


#: ops outside the registry that the plugin runs on stand-ins, each by the function that
#: runs it there: ``rearrange`` resolves a literal pattern's names against its arguments
#: alone (ops/_rearrange.py), so its stand-in run gives the exact result or the run's error
NAMED = {"rearrange": f"{OPS}._rearrange.standin"}


def _short(fullname: str) -> str | None:
    """``axjax.ops._gen_reduce.sum`` -> ``sum`` for the ops the plugin owns."""
    if not fullname.startswith(OPS + "."):
        return None
    short = fullname.rsplit(".", 1)[1]
    owned = UNARY | BINARY | AXIS_OPS | NAMED.keys() | {"matmul"} | CONSTRUCTORS.keys()
    return short if short in owned else None


class AxjaxPlugin(Plugin):
    """Registered by ``plugins = axjax.mypy`` (see docs/typing.md)."""

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self._tensor_classes: dict[str, bool] = {}
        self._options = read_options(options.config_file)
        self._failed: set[int] = set()  # calls whose type rule was reported failing
        self._noted: set[str] = set()  # user ops noted as untyped (_user_ops)
        self._layers = LayerHooks(
            Tools(
                self.lookup_fully_qualified,
                self._env,
                self._gradual,
                lambda: self._info(TENSOR),
                self._tuple_info,
            )
        )

    def _is_tensor_method(self, fullname: str) -> bool:
        """``Tensor.__add__``, ``Input.__matmul__``, ...: an operator of a Tensor class."""
        cls, _, method = fullname.rpartition(".")
        if method not in METHODS:
            return False
        known = self._tensor_classes.get(cls)
        if known is None:
            sym = self.lookup_fully_qualified(cls) if cls else None
            node = sym.node if sym else None
            known = isinstance(node, TypeInfo) and node.has_base(TENSOR)
            self._tensor_classes[cls] = known
        return known

    def report_config_data(self, ctx: ReportConfigContext) -> str | None:
        """Re-check cached modules whenever the type rules or this plugin change (the
        installed third-party packages do not depend on them)."""
        installed = "site-packages" in ctx.path or "typeshed" in ctx.path
        return None if installed and not ctx.id.startswith("axjax") else fingerprint()

    # ------------------------------------------------------------------ registration
    def get_function_signature_hook(
        self, fullname: str
    ) -> Callable[[FunctionSigContext], CallableType] | None:
        if _short(fullname) or fullname == INPUT or fullname in LOSSES:
            return safe(
                lambda ctx: self._widened(fullname, ctx.default_signature),
                lambda ctx: ctx.default_signature,
            )
        if fullname == CAUSAL_MASK:  # the query's role bound: reported by mask_type (_roles)
            return safe(
                lambda ctx: mask_signature(ctx, Instance(self._info(AXIS), [])),
                lambda ctx: ctx.default_signature,
            )
        return None

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        module = fullname.rpartition(".")[0]
        sym = self.lookup_fully_qualified(fullname) if module in self._options.op_modules else None
        if sym is not None and not isinstance(sym.node, TypeInfo):  # a user op's function
            name = "user:" + fullname.rpartition(".")[2]
            return self._watched(
                fullname, safe(lambda ctx: self._function(fullname, name, ctx), default)
            )
        return self._watched(fullname, self._function_hook(fullname))

    def _watched(
        self, fullname: str, hook: Callable[[C], Type] | None
    ) -> Callable[[C], Type] | None:
        """``hook``, reporting a degraded Tensor result where ``warn_untyped`` asks to."""
        if hook is None or not self._options.warn_untyped or fullname.startswith(FOREIGN):
            return hook
        inner = hook
        callee = fullname.rsplit(".", 1)[-1]
        if fullname.startswith("axjax."):
            callee = "ax." + callee

        def watched(ctx: C) -> Type:
            out = inner(ctx)
            module = getattr(getattr(ctx.api, "tree", None), "fullname", "")
            if self._options.warns(module) and id(ctx.context) not in self._failed:
                try:
                    report_untyped(ctx, out, callee, self._info(TENSOR))
                except Exception:  # noqa: BLE001 - a report must never take mypy down
                    if DEBUG:
                        traceback.print_exc()
            return out

        return watched

    def _function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        short = _short(fullname)
        if short in CONSTRUCTORS:
            return safe(lambda ctx: self._constructor(short, ctx), default)
        if short is not None or fullname == INPUT:
            return safe(lambda ctx: self._function(fullname, short or "Input", ctx), default)
        if fullname in COLLECTIVES:
            return safe(lambda ctx: self._collective(fullname.rpartition(".")[2], ctx), default)
        if fullname in LOSSES:  # a loss or metric: its own checks, on stand-ins
            name = fullname.rpartition(".")[2]
            return safe(lambda ctx: self._function(fullname, name, ctx), default)
        if fullname in AXIS_RULES:  # ax.nn.rotary_embedding: its declared rule, on stand-ins
            rule = AXIS_RULES[fullname]
            return safe(lambda ctx: self._function(rule, "rule", ctx), default)
        if fullname == CAUSAL_MASK:  # the run's role check of query and key, on stand-ins
            return safe(lambda ctx: mask_type(ctx, lambda: self._env(ctx, "float")), default)
        if fullname in CHAINS:  # Sequential([...]), Stacked([...]): typed by their layers
            return safe(self._layers.sequential, default)
        if fullname == CAST:  # ax.nn.cast: the layer's (or tensor's) dtype replaced
            return safe(self._layers.cast, default)
        if fullname == SCAN_FUNCTION:
            return safe(scan_position, default)
        if fullname == COMPILE:
            return safe(
                lambda ctx: compile_type(
                    ctx, self._info(TENSOR), self._tuple_info(), self.lookup_fully_qualified
                ),
                default,
            )
        if fullname == VMAP:
            return safe(
                lambda ctx: vmap_type(
                    ctx, self._info(TENSOR), self._tuple_info(), self._object(), self._gradual
                ),
                default,
            )
        return None if fullname.startswith(FOREIGN) else safe(no_repeated_axis, default)

    def get_method_signature_hook(
        self, fullname: str
    ) -> Callable[[MethodSigContext], CallableType] | None:
        if self._is_tensor_method(fullname):
            return safe(
                lambda ctx: widen(ctx.default_signature, self._object(), self._gradual()),
                lambda ctx: ctx.default_signature,
            )
        if self._layers.is_layer_call(fullname):  # a layer's call: the layer judges (_layers)
            return safe(
                lambda ctx: (
                    widen(ctx.default_signature, self._object(), self._gradual())
                    if self._layers.judged(ctx.type) and not cache_call(ctx.context)
                    else ctx.default_signature
                ),
                lambda ctx: ctx.default_signature,
            )
        cls, _, method = fullname.rpartition(".")
        if method == "__call__" and cls.rpartition(".")[0] in self._options.op_modules:
            # `Norm(Pixel)(x)`: the op's own infer judges (_user_ops); a held op keeps its type
            return safe(
                lambda ctx: (
                    widen(ctx.default_signature, self._object(), self._gradual())
                    if inline_op(ctx.context)
                    else ctx.default_signature
                ),
                lambda ctx: ctx.default_signature,
            )
        return None

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        if fullname in (
            "builtins.int.__pow__",
            "builtins.float.__pow__",
            "builtins.float.__rpow__",
        ):
            return safe(power_type, default)
        cls, _, method = fullname.rpartition(".")
        if method == "__call__" and cls.rpartition(".")[0] in self._options.op_modules:
            op_call: Callable[[MethodContext], Type] = safe(
                lambda ctx: user_op_call(ctx, self._evaluate), default
            )
            return self._watched(fullname, op_call)
        if method == "__call__" and self._untyped_op(cls):  # typ-sigs (issue 32): a note
            return safe(lambda ctx: untyped_op_note(ctx, self._noted), default)
        return self._watched(fullname, self._method_hook(fullname))

    def _untyped_op(self, cls: str) -> bool:
        sym = self.lookup_fully_qualified(cls) if cls else None
        return untyped_op(sym.node if sym else None, self._options.op_modules)

    def _method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        if self._is_tensor_method(fullname):
            method = fullname.rsplit(".", 1)[-1]
            return safe(lambda ctx: self._method(method, ctx), default)
        if self._layers.is_layer_call(fullname):
            return safe(self._layers.call, default)
        if fullname == POLICY_CAST:  # policy.cast_to_compute(tree): the policy's dtype
            return safe(self._layers.policy_cast, default)
        if self._layers.is_init_state(fullname):  # cell.init_state({Batch: 32})
            return safe(self._layers.init_state, default)
        if fullname in LOOP_CALLS:  # calling ax.fold(...) / ax.scan(...) (_loops)
            return safe(
                lambda ctx: loop_call_type(
                    ctx, lambda: self._env(ctx, "float"), self._info(TENSOR), self._tuple_info()
                ),
                default,
            )
        return None if fullname.startswith(FOREIGN) else safe(no_repeated_axis, default)

    def get_attribute_hook(self, fullname: str) -> Callable[[AttributeContext], Type] | None:
        # a parameter Tensor reached through `stack.layers`: the stacking axis first
        if fullname.startswith(FOREIGN):
            return None
        return safe(self._layers.stacked_attribute, lambda ctx: ctx.default_attr_type)

    def get_type_analyze_hook(self, fullname: str) -> Callable[[AnalyzeTypeContext], Type] | None:
        return check_annotation if fullname in NODES and not analyzing() else None

    def get_base_class_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        # a label subclasses Axis or a role base (`class KPos(ax.KeyOf[Pos])`); the role
        # bases themselves, generic and made to be subclassed, are exempt (check_label_class)
        return check_label_class if fullname == AXIS or fullname in ROLE_BASES else None

    # ------------------------------------------------------------------ lookups
    def _info(self, fullname: str) -> TypeInfo:
        sym = self.lookup_fully_qualified(fullname)
        assert sym is not None and isinstance(sym.node, TypeInfo), fullname
        return sym.node

    def _tuple_info(self) -> TypeInfo:
        return self._info("builtins.tuple")

    def _object(self) -> Instance:
        return Instance(self._info("builtins.object"), [])

    def _marker(self, name: str) -> Type | None:
        sym = self.lookup_fully_qualified(f"{CORE}._dtype.{name}")
        return Instance(sym.node, []) if sym and isinstance(sym.node, TypeInfo) else None

    def _widened(self, fullname: str, default: CallableType) -> CallableType:
        """The implementation's signature with Tensor/axis parameters widened to object."""
        sym = self.lookup_fully_qualified(fullname)
        node: SymbolNode | None = sym.node if sym else None
        drop_self = False
        if isinstance(node, TypeInfo):  # a class: its __init__, without self
            init = node.names.get("__init__")
            node, drop_self = (init.node if init else None), True
        if isinstance(node, OverloadedFuncDef):
            node = node.impl
        if isinstance(node, Decorator):
            node = node.func
        impl = node.type if isinstance(node, FuncDef) else None
        if not isinstance(impl, CallableType):
            impl = default
        elif drop_self:
            impl = impl.copy_modified(
                arg_types=impl.arg_types[1:],
                arg_kinds=impl.arg_kinds[1:],
                arg_names=impl.arg_names[1:],
            )
        ret = self._gradual(self._info(INPUT) if fullname == INPUT else None)
        return widen(impl.copy_modified(fallback=default.fallback), self._object(), ret)

    def _gradual(self, info: TypeInfo | None = None) -> Instance:
        return make_tensor(
            info or self._info(TENSOR),
            TT(AnyType(TypeOfAny.special_form), None),
            self._tuple_info(),
        )

    def _env(self, ctx: FunctionContext | MethodContext, flavour: str, sized: bool = False) -> Env:
        api = ctx.api
        # the type mypy already inferred for a list element (no second evaluation)
        lookup = getattr(api, "lookup_type_or_none", None)

        def type_of(e: Expression) -> Type | None:
            return lookup(e) if lookup is not None else None

        return Env(self._info(TENSOR), type_of, self._marker, flavour, sized=sized)

    # ------------------------------------------------------------------ hooks
    def _function(self, fullname: str, short: str, ctx: FunctionContext) -> Type:
        module, name = fullname.rsplit(".", 1)
        if short in NAMED:  # an op that runs on stand-ins by a function of its own
            module, name = NAMED[short].rsplit(".", 1)
        fn = getattr(importlib.import_module(module), name)

        computed = False  # a computed index (`at=i`): the dtype is known, not the axes

        def run(env: Env) -> object:
            nonlocal computed
            pos: list[object] = []
            kw: dict[str, object] = {}
            for i in range(len(ctx.callee_arg_names)):
                for expr, typ, kind, key in zip(
                    ctx.args[i], ctx.arg_types[i], ctx.arg_kinds[i], ctx.arg_names[i], strict=True
                ):
                    if kind in (ARG_STAR, ARG_STAR2):
                        raise CannotEvaluate
                    value = env.value(expr, typ)
                    if key is None:
                        pos.append(value)
                    else:
                        kw[key] = value
            if short == "Input":
                kw.pop("name", None)
            if fullname in LOSSES and "axis" in ctx.callee_arg_names and "axis" not in kw:
                if len(pos) < ctx.callee_arg_names.index("axis") + 1:
                    kw["axis"] = env.axis(Instance(self._info(CLASS), []))
            if short in BINARY:
                pos, kw = _lift_numbers(env, short, pos, kw)
            if short in POSITIONAL and any(isinstance(v, Named) for v in [*pos, *kw.values()]):
                # a computed index: where the axis goes is unknown, but index 0 is valid at
                # any rank, so what fails there (an axis already present) fails everywhere
                computed = True
                names = [v.text for v in [*pos, *kw.values()] if isinstance(v, Named)]
                pos = [Named(v.text, 0) if isinstance(v, Named) else v for v in pos]
                kw = {k: Named(v.text, 0) if isinstance(v, Named) else v for k, v in kw.items()}
                try:
                    return fn(*pos, **kw)
                except TypeError as e:  # the op names its index: the source's, not 0
                    if len(e.args) == 1 and isinstance(e.args[0], str):
                        e.args = (e.args[0].replace("at=0)", f"at={names[0]})", 1),)
                    raise
            out = fn(*pos, **kw)
            if short in SET_ALGEBRA and (env.variadic or env.any_axis):
                raise CannotEvaluate  # *Ts or an Any axis might be an axis the other shares
            exact = not env.variadic or exact_index(ctx, pos, kw, self._info(TENSOR))
            if short in POSITIONAL and not exact:
                raise CannotEvaluate
            return out

        info = self._info(INPUT) if short == "Input" else None
        out = self._evaluate(ctx, short, run, info)
        p = get_proper_type(out)
        if computed and isinstance(p, Instance) and p.args:  # the rank is known, not the order
            return make_tensor(p.type, TT(p.args[0], None), self._tuple_info())
        return out

    def _collective(self, name: str, ctx: FunctionContext) -> Type:
        """``ax.psum(t, over)`` and the others: ``t``'s type, their rule on axes checked."""
        from ..core import AnyTensor, Axis
        from ..parallel._collective import check_axes

        def run(env: Env) -> object:
            args = {
                n: env.value(ctx.args[i][0], ctx.arg_types[i][0])
                for i, n in enumerate(ctx.callee_arg_names)
                if n in ("t", "over") and ctx.args[i]
            }
            t = cast("AnyTensor", args["t"])  # an Input stand-in
            check_axes(name, t, cast("type[Axis] | tuple[type[Axis], ...]", args["over"]))
            return t

        return self._evaluate(ctx, name, run)

    def _method(self, method: str, ctx: MethodContext) -> Type:
        def run(env: Env) -> object:
            this = env.value(None, ctx.type)
            args = [env.value(e, t) for e, t in zip(ctx.args[0], ctx.arg_types[0], strict=True)]
            args = env.lift([this, *args])[1:]
            return getattr(this, method)(*args)

        return self._evaluate(ctx, "matmul" if method == "__matmul__" else "add", run)

    def _evaluate(
        self,
        ctx: FunctionContext | MethodContext,
        op: str,
        run: Callable[[Env], object],
        info: TypeInfo | None = None,
    ) -> Type:
        env = self._env(ctx, "float")
        try:
            try:
                tt = env.result(run(env))
            except Exception as e:
                if isinstance(e, CannotEvaluate | Joined) or deliberate(e):
                    raise
                env = self._env(ctx, "float", sized=True)  # a rule that needs sizes
                tt = env.result(run(env))
        except CannotEvaluate:
            return self._gradual(info)
        except Joined as j:
            ctx.api.fail(
                f"{j.what} is an operand widened to a base class, as a join of "
                "different tensors makes it (a list literal, a conditional); annotate "
                "the variable with its exact Tensor[...] type",
                ctx.context,
                code=JOIN_ERROR,
            )
            return self._gradual(info)
        except Exception as e:  # noqa: BLE001 - the op's own error, or a rule we cannot run
            if DEBUG:
                traceback.print_exc()
            if self._reportable(env, op, e) and not self._passes_for_ints(ctx, env, run):
                ctx.api.fail(message(e), ctx.context, code=AXES_ERROR)
                note_origins(ctx)
                self._failed.add(id(ctx.context))  # no axjax-untyped report on top
            return self._gradual(info)
        return make_tensor(info or self._info(TENSOR), tt, self._tuple_info())

    @staticmethod
    def _reportable(env: Env, op: str, e: Exception) -> bool:
        if not isinstance(e, TypeError) or not deliberate(e) or "symbolic graph node" in str(e):
            return False
        if env.uncertain or (env.variadic and op not in STRUCTURAL):
            return False
        return not (env.placeholders and type(e) is TypeError)

    def _passes_for_ints(
        self, ctx: FunctionContext | MethodContext, env: Env, run: Callable[[Env], object]
    ) -> bool:
        """A dtype type variable may be an integer type: is the error only for floats?"""
        if not env.dtype_vars:
            return False
        try:
            run(self._env(ctx, "int"))
        except Exception:  # noqa: BLE001
            return False
        return True

    def _constructor(self, short: str, ctx: FunctionContext) -> Type:
        from ._constructors import constructor_type

        tt = constructor_type(
            short, ctx, self._env(ctx, "float"), CONSTRUCTORS[short], self._marker, AXES_ERROR
        )
        if tt is None:
            return self._gradual()
        return make_tensor(self._info(TENSOR), tt, self._tuple_info())


def _lift_numbers(
    env: Env, short: str, pos: list[object], kw: dict[str, object]
) -> tuple[list[object], dict[str, object]]:
    """The operands ``a`` and ``b`` of an elementwise op (not ``where``'s ``cond``), numbers
    among them made tensors of a stand-in dtype (:meth:`Env.lift`)."""
    params = ("cond", "a", "b") if short == "where" else ("a", "b")
    bound = {**dict(zip(params, pos, strict=False)), **kw}
    names: list[str] = [n for n in ("a", "b") if n in bound]
    lifted: dict[str, object] = dict(zip(names, env.lift([bound[n] for n in names]), strict=True))
    pos = [lifted.get(n, v) for n, v in zip(params, pos, strict=False)] + pos[len(params) :]
    return pos, {k: lifted.get(k, v) for k, v in kw.items()}


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point (``plugins = axjax.mypy``)."""
    return AxjaxPlugin


__all__ = ["AXES_ERROR", "JOIN_ERROR", "AxjaxPlugin", "plugin"]
