"""Errors named by the public call: the one way a layer or public function puts its own name
and the argument at fault on the ``AxisError`` raised by an op inside it.

A mistake made at ``MultiheadAttention(x, mask=m)`` used to be reported by the op that
tripped on it (``Cannot apply Where ...: the condition must be Bool``), an op the user never
called. Every public layer (``register_layer`` wraps its call) and public function
(:func:`public_call`) runs its body inside a *call context*; an ``AxisError`` leaving the
body is reworded in place, its first line naming the public call and the argument::

    Cannot apply MultiheadAttention to query=Tensor[BF16, T=3, E=4]: dtypes BF16 and F32
    differ (convert one operand with astype)
      inside: Cannot apply Contract(over=E) to Tensor[BF16, T=3, E=4] and ...

The inner op's message stays below it (a check of the call's own keeps its words, the
argument named in them). The argument is found on the error path only, never on a
successful call: the one a block names (``with argument("mask"):``, where a callable
transforms an argument before the op that fails on it), else the operand the check blamed
(``fail(..., subject=x)``), else the operands ``fail`` recorded, matched by identity against
the call's arguments, else the call's only Tensor argument.

Only the outermost public call is named (``MultiheadAttention``, not the
``dot_product_attention`` it calls): that is the call the user wrote. The function a user
gives ``fold``/``scan`` runs in :func:`user_code`: its public calls are named again, and an
op failing in it keeps its own message (its traceback points at the user's line). The
validators read :func:`calling` to name the layer being built (``Affine (variance_scaling):
dtype must be ...``). The mypy plugin runs a layer's call on stand-ins through the same
context, so its message is the run-time one (sizes left out). ``AxisError.inner`` keeps the
message as the op raised it.

An entry point that calls other public calls declares its own checks (:class:`Checks`),
each with the argument it is about. The context runs them in :data:`STAGES` before the
body: every option check (a string choice: no data needed), then every axes check, every
dtype check, every value check. That is the order a user reads a call, so no call inside
can fail on an argument first, and the entry point's own message is kept word for word.
If a public call *inside* it fails anyway (its context marks the error as raised in it:
``raised_in``), the outermost call re-words the error (:func:`reattribute`). The first
line names that call, the user's argument at fault and what it should be
(``generate_text: max_new_tokens=0: it should be a positive int ...``; an ``AxisError``
as ``Cannot apply <call> to <argument>=...: ...``). The inner message follows
(``inside:``) as the reason. An op's ``AxisError`` keeps the rewording above. The code a
call runs for the user (a ``fold`` body, the loss ``fit`` runs) is never re-attributed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import re
from collections.abc import Callable, Generator, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, TypeVar, cast, overload

from ._axis import Axis, axis_name
from ._dtype import Bool
from ._errors import AxisError, HasType, describe, fail
from ._source import transparent

__all__ = [
    "NAMED",
    "STAGES",
    "Checks",
    "argument",
    "calling",
    "check_mask",
    "name_error",
    "public_call",
    "public_init",
    "public_method",
    "reattribute",
    "user_code",
]

F = TypeVar("F", bound=Callable[..., Any])

#: The public call running now, in this thread (``None``: the user's own code).
_CALL: ContextVar[str | None] = ContextVar("axjax_public_call", default=None)
#: every function wrapped in a call context, and the name it is reported by (tests read it)
NAMED: dict[Callable[..., Any], str] = {}


def calling() -> str | None:
    """The name of the public call running now (``None`` in the user's own code)."""
    return _CALL.get()


@contextlib.contextmanager
def argument(name: str) -> Generator[None, None, None]:
    """Inside the block, an ``AxisError`` is about argument ``name`` of the public call (a
    callable that transforms an argument before the op that may fail on it says so)."""
    try:
        yield
    except (TypeError, ValueError) as e:
        _tag(e, "argument", name)  # the innermost block names it
        raise


@contextlib.contextmanager
def user_code(owner: str) -> Generator[None, None, None]:
    """Inside the block runs code of the user's that public call ``owner`` was given (a
    ``fold`` body): when ``owner`` is the call the user made, the public calls inside are
    named again and an error of the user's own ops is left as it is (its traceback points
    at the user's line). Inside another public call (a layer running ``fold`` over its
    cell) the body is that call's own code: an error leaving it is that call's own, never
    re-attributed as ``owner``'s (an inner public call's) error."""
    outer = _CALL.get()
    if outer != owner:
        try:
            yield
        except (TypeError, ValueError) as e:
            _tag(e, "raised_in", outer)  # before owner's exit tags it as owner's
            raise
        return
    token = _CALL.set(None)
    try:
        yield
    except AxisError as e:
        if e.call is None:
            e.call = ""  # the user's own: named by its traceback, not by the call around it
        raise
    finally:
        _CALL.reset(token)


def check_mask(
    where: str,
    mask: object,
    sizes: Mapping[type[Axis], int | None] | None = None,
    *,
    name: str = "mask",
    target: str = "the scores",
) -> None:
    """The one check of a mask argument: a Bool Tensor (true = keep) whose axes are among
    ``sizes`` (when given) with those sizes; an ``AxisError`` about argument ``name``
    otherwise."""
    with argument(name):
        if not _is_tensor_like(mask):
            raise TypeError(f"{where}: {name} must be a Bool Tensor, got {type(mask).__name__}")
        mask = cast(HasType, mask)
        if mask.dtype is not Bool:
            raise fail(
                where,
                (mask,),
                f"the {name} must be Bool (true = keep), got {mask.dtype.__name__} "
                "(make one with a comparison, e.g. m > 0, or astype(ax.Bool))",
                subject=mask,
            )
        if sizes is None:
            return
        for a, n in zip(mask.axes, mask.shape, strict=True):
            if a not in sizes:
                have = ", ".join(axis_name(b) for b in sizes)
                raise fail(
                    where,
                    (mask,),
                    f"the {name} has axis {axis_name(a)}, which {target} lack (they have "
                    f"{have}; a {name} may have any of them)",
                    subject=mask,
                )
            want = sizes[a]
            if n is not None and want is not None and n != want:
                raise fail(
                    where,
                    (mask,),
                    f"axis {axis_name(a)} of the {name} has size {n}, {target} {want}",
                    subject=mask,
                )


def _is_tensor_like(value: object) -> bool:
    """A Tensor, a graph node or a type: something with axes and a dtype."""
    return hasattr(value, "axes") and hasattr(value, "dtype")


def _leaves(value: object) -> Iterator[HasType]:
    """The Tensors (and graph nodes) of an argument: itself, or those of a tuple, list or
    dict of them."""
    if _is_tensor_like(value):
        yield cast(HasType, value)
    elif isinstance(value, tuple | list):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)


def _same(a: object, b: object) -> bool:
    if a is b:
        return True
    arr = getattr(a, "_array", None)
    return arr is not None and arr is getattr(b, "_array", None)


def _arguments(
    fn: Callable[..., object],
    args: tuple[object, ...],
    kwargs: dict[str, object],
    *,
    defaults: bool = False,
) -> dict[str, object]:
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return {}
    if defaults:
        bound.apply_defaults()
    out: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if name == "self":
            continue
        if kind is inspect.Parameter.VAR_POSITIONAL:
            out.update({f"{name}[{i}]": v for i, v in enumerate(value)})
        elif kind is inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        else:
            out[name] = value
    return out


def _at_fault(error: AxisError, arguments: dict[str, object]) -> list[tuple[str, HasType | None]]:
    """``(argument, the Tensor of it shown)`` for the arguments the error is about: the one
    a block named (:func:`argument`), else the one its check named (``subject``), else
    those among its operands, else the call's only Tensor argument."""
    tensors = {n: ts for n, v in arguments.items() if (ts := list(_leaves(v)))}
    explicit = error.argument
    if explicit is not None and explicit in arguments:
        shown = tensors.get(explicit)
        return [(explicit, shown[0] if shown else None)]
    for wanted in ((error.subject,) if error.subject is not None else (), error.operands):
        named: list[tuple[str, HasType | None]] = []
        for n, ts in tensors.items():
            hit = next((t for t in ts for o in wanted if _same(t, o)), None)
            if hit is not None:
                named.append((n, hit))
        if named:
            return named
    if len(tensors) == 1:
        ((n, ts),) = tensors.items()
        return [(n, ts[0])]
    return []


def own_words(error: AxisError, call: str, first: str) -> bool:
    """Whether ``error`` is a message in its own words that names ``call`` already."""
    return error.op is None and re.search(rf"\b{re.escape(call)}\b", first) is not None


def _names_one(first: str, arguments: dict[str, object]) -> bool:
    """Whether a message's first line names one of the call's arguments."""
    return any(re.search(rf"\b{re.escape(n)}\b", first) for n in arguments)


def name_error(error: AxisError, call: str, arguments: dict[str, object]) -> None:
    """Reword ``error`` (in place) so that its first line names ``call`` and the argument at
    fault; the original message follows, indented, unless it is the call's own check."""
    if error.call is not None:
        return
    error.call = call  # named once, by the outermost call
    text = str(error)
    error.inner = text
    named = _at_fault(error, arguments)
    first = text.split("\n", 1)[0]
    if error.op is None and own_words(error, call, first) and _names_one(first, arguments):
        return  # the call's own message, naming its argument: kept as it is
    why = error.why
    if why is None:  # a message of its own words: "Cannot fold over T: <why>"
        why = first.split(": ", 1)[1] if first.startswith("Cannot ") and ": " in first else first
    if not named and own_words(error, call, first):
        return  # its own words name the call already, and no argument is to add
    op = error.op
    if op is None:  # its own words: the call's own check when they name it
        own = re.search(rf"\b{re.escape(call)}\b", first) is not None
    else:
        own = op == call or op.startswith(call + "(")  # the callable's own check
    name = (
        op if own and op is not None else call
    )  # its own check says it best: Embedding(V=10 -> E=4)
    if named:
        shown = " and ".join(f"{n}={describe(t)}" if t is not None else n for n, t in named)
        head = f"Cannot apply {name} to {shown}: {why}"
    else:
        head = f"Cannot apply {name}: {why}"
    if own and op is None and len(named) == 1 and named[0][1] is not None:
        shown_t = describe(named[0][1])  # its own words show it: name it in place
        if shown_t in first:
            head = first.replace(shown_t, f"{named[0][0]}={shown_t}", 1)
    if own:
        rest = text.split("\n", 1)[1:]
        error.args = ("\n".join([head, *rest]),)
    else:
        error.args = (f"{head}\n  inside: {text}",)


#: the order an entry point's checks run in: the order a user reads a call's arguments
#: the order the user thinks in: the options spelled in the code (a string choice), then
#: the data's axes, dtypes and values
STAGES = ("options", "axes", "dtypes", "values")

#: one check of an entry point's arguments (their names to their values, defaults filled)
Check = Callable[[Mapping[str, Any]], None]
#: a stage's checks: each with the argument it is about (named on its error)
Stage = tuple[tuple[str, Check], ...]


@dataclasses.dataclass(frozen=True)
class Checks:
    """An entry point's own checks of its arguments, run by its call context in
    :data:`STAGES` (every option check, as a string choice, that needs no data; then every
    axes check, every dtype check, every value check)
    before its body, so that no call inside can fail on an argument first. Each check is
    declared with the argument it is about: its error names that argument.

    When an inner public call fails anyway, its error is re-attributed to the entry point
    (:func:`reattribute`); the argument at fault is the inner call's argument as
    ``passes`` renames it (``{"prompt": "prompts"}``), else as ``blame`` names it for the
    inner call (``{"init_cache": "steps"}``: a method's name stands for every class's),
    else the argument a block named, the operand the error blamed, the only Tensor.
    ``expects`` says what each argument should be.

    Example:
        >>> CHECKS = Checks(axes=(("prompt", prompt_axes),), values=(("steps", steps),))
        >>> @public_call(checks=CHECKS)
        ... def generate(model, prompt, steps): ...
    """

    options: Stage = ()
    axes: Stage = ()
    dtypes: Stage = ()
    values: Stage = ()
    blame: Mapping[str, str] = dataclasses.field(default_factory=dict)
    passes: Mapping[str, str] = dataclasses.field(default_factory=dict)
    expects: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def run(
        self, fn: Callable[..., object], args: tuple[object, ...], kw: dict[str, object]
    ) -> None:
        """Every check, stage by stage, on the call's arguments (self left out)."""
        arguments = _arguments(fn, args, kw, defaults=True)
        if not arguments:
            return  # not a valid call: Python's own TypeError says why
        for stage in STAGES:
            for name, check in getattr(self, stage):
                with argument(name):
                    check(arguments)

    def at_fault(self, inner: str, argument: str | None) -> str | None:
        """The entry point's argument an inner call's error is about (None: not known)."""
        if argument is not None and argument in self.passes:
            return self.passes[argument]
        return self.blame.get(inner) or self.blame.get(inner.rsplit(".", 1)[-1])


def _tag(error: BaseException, key: str, value: object) -> None:
    """Record ``value`` on ``error`` unless an inner block recorded one already."""
    if getattr(error, key, None) is None:
        error.__dict__[key] = value


def reattribute(
    error: TypeError | ValueError, call: str, arguments: dict[str, object], checks: Checks | None
) -> None:
    """Reword ``error``, raised by the inner public call ``error.raised_in``, so that its
    first line names ``call`` (the entry point the user called), the argument at fault and
    what it should be; the inner message follows (``inside:``) as the reason."""
    if not (len(error.args) == 1 and isinstance(error.args[0], str)):
        return  # not a message axjax wrote
    inner = cast(str, getattr(error, "raised_in", ""))
    text = str(error)
    first = text.split("\n", 1)[0]
    said = cast("str | None", getattr(error, "argument", None))  # the inner call's argument
    fault = checks.at_fault(inner, said) if checks is not None else None
    if fault is None and said in arguments:
        fault = said
    if fault is None and isinstance(error, AxisError):
        fault = next((n for n, _ in _at_fault(error, arguments)), None)
    if fault is None:
        tensors = [n for n, v in arguments.items() if next(_leaves(v), None) is not None]
        fault = tensors[0] if len(tensors) == 1 else None
    why = _reason(first, inner)
    expects = checks.expects.get(fault) if checks is not None and fault else None
    why = f"it should be {expects}" if expects else why
    if fault is None:
        shown = ""
    else:
        value = arguments.get(fault)
        shown = describe(cast(HasType, value)) if _is_tensor_like(value) else repr(value)
        if not _is_tensor_like(value) and (len(shown) > 40 or "\n" in shown):
            shown = f"<{type(value).__name__}>"  # a model: its class
        shown = f"{fault}={shown}"
    if isinstance(error, AxisError):  # the axis messages' form: Cannot apply <call> to ...
        head = f"Cannot apply {call}" + (f" to {shown}" if shown else "") + f": {why}"
    else:
        head = f"{call}: " + (f"{shown}: " if shown else "") + why
    error.args = (f"{head}\n  inside: {text}",)
    if isinstance(error, AxisError):
        error.inner = text
    _tag(error, "call", call)


def _reason(first: str, inner: str) -> str:
    """The reason of an inner message's first line, without the call it names first
    (``causal_mask: ...``, ``Cannot scan over T: ...``)."""
    if inner and first.startswith(f"{inner}: "):
        return first[len(inner) + 2 :]
    if first.startswith("Cannot ") and ": " in first:
        return first.split(": ", 1)[1]
    return first


def _failed(
    error: TypeError | ValueError,
    name: str,
    fn: Callable[..., object],
    call: tuple[tuple[object, ...], dict[str, object]],
    checks: Checks | None,
) -> None:
    """The outermost call's rewording of an error leaving it (the error path only): an
    inner public call's error is re-attributed to it, an op's named by it and the argument
    at fault; its own words are kept."""
    inner = getattr(error, "raised_in", None)
    is_op = isinstance(error, AxisError) and error.op is not None
    if inner is not None and inner != name and not is_op and error.__dict__.get("call") is None:
        reattribute(error, name, _arguments(fn, *call, defaults=True), checks)
    elif isinstance(error, AxisError):
        name_error(error, name, _arguments(fn, *call))


def _run(
    name: str,
    fn: Callable[..., object],
    args: tuple[object, ...],
    kwargs: dict[str, object],
    checks: Checks | None = None,
) -> object:
    token = _CALL.set(name)
    try:
        if checks is not None:
            checks.run(fn, args, kwargs)
        return fn(*args, **kwargs)
    except (TypeError, ValueError) as e:
        _failed(e, name, fn, (args, kwargs), checks)
        raise
    finally:
        _CALL.reset(token)


def _nested(
    name: str,
    fn: Callable[..., object],
    args: tuple[object, ...],
    kwargs: dict[str, object],
    checks: Checks | None = None,
) -> object:
    """A public call made inside another: its checks run, and an error leaving it is marked
    as raised in it (the outermost call re-attributes it: :func:`reattribute`)."""
    try:
        if checks is not None:
            checks.run(fn, args, kwargs)
        return fn(*args, **kwargs)
    except (TypeError, ValueError) as e:
        _tag(e, "raised_in", name)
        raise


def public_call(name: str | None = None, *, checks: Checks | None = None) -> Callable[[F], F]:
    """Run the decorated function in a call context named ``name`` (default: its own name):
    its ``checks`` run first, stage by stage, and an error raised inside names it and the
    argument at fault (see the module)."""

    def decorate(fn: F) -> F:
        label = name or fn.__name__

        @functools.wraps(fn)
        def called(*args: object, **kwargs: object) -> object:
            if _CALL.get() is not None:  # inside another public call: that one is named
                return _nested(label, fn, args, kwargs, checks)
            return _run(label, fn, args, kwargs, checks)

        NAMED[called] = label
        transparent(called)
        return cast(F, called)

    return decorate


@overload
def public_method(fn: F) -> F: ...
@overload
def public_method(
    *, method: str | None = None, checks: Checks | None = None
) -> Callable[[F], F]: ...
def public_method(
    fn: F | None = None, *, method: str | None = None, checks: Checks | None = None
) -> F | Callable[[F], F]:
    """:func:`public_call` for a layer's ``__call__``, named by the layer's class (with
    ``method``: ``GPT2.init_cache``)."""

    def decorate(fn: F) -> F:
        suffix = f".{method}" if method else ""

        @functools.wraps(fn)
        def called(self: object, *args: object, **kwargs: object) -> object:
            label = type(self).__name__ + suffix
            if _CALL.get() is not None:
                return _nested(label, fn, (self, *args), kwargs, checks)
            return _run(label, fn, (self, *args), kwargs, checks)

        NAMED[called] = f"<the layer's class>{suffix}"
        transparent(called)
        return cast(F, called)

    return decorate if fn is None else decorate(fn)


def public_init(fn: F) -> F:
    """A layer's ``__init__`` run in a call context named by its class: the validators name
    the layer being built (``Affine (initializer): dtype must be ...``). Its errors are not
    reworded: a constructor's checks name the layer already (built inside another public
    call, ``lora``'s, they are re-attributed to that call)."""

    @functools.wraps(fn)
    def built(self: object, *args: object, **kwargs: object) -> object:
        if _CALL.get() is not None:  # built by another public call: re-attributed there
            return _nested(type(self).__name__, fn, (self, *args), kwargs)
        token = _CALL.set(type(self).__name__)
        try:
            return fn(self, *args, **kwargs)
        finally:
            _CALL.reset(token)

    NAMED[built] = "<the layer's class>"
    transparent(built)
    return cast(F, built)


transparent(_run)
transparent(_nested)
