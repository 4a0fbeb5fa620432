"""NaN provenance: find the first op whose forward or backward result is not finite.

Inside :func:`debug_nans` (and while :func:`check_finite` or ``fit``'s guard replays a
failing computation) every op checks its result as it runs, op by op with ``jax.jit``
disabled, and the first non-finite one raises :class:`NonFiniteError`. The report names the
op, whether its forward or its backward (the cotangents it returned) went non-finite, its
operands' ranges and the source line that applied it (:mod:`._source`; for a compiled
graph, the line that built the node). Outside these contexts nothing is checked and the
compiled programs are unchanged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar, cast

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt

from ._choices import check_choice
from ._context import current, switched
from ._dtype import is_inexact
from ._errors import describe
from ._jax_typed import PyTree
from ._source import user_site

if TYPE_CHECKING:  # the checks sit below Op (core/_lower.py calls them): types only
    from ._op import Op

__all__ = [
    "NonFiniteError",
    "NonFiniteReport",
    "check_finite",
    "debug_nans",
    "checking_finite",
    "check_forward",
    "check_backward",
    "op_site",
    "node_site",
]

P = ParamSpec("P")
R = TypeVar("R")
Phase = Literal["forward", "backward"]


@dataclasses.dataclass(frozen=True)
class NonFiniteReport:
    """Where the first non-finite value appeared.

    Attributes:
        op: the op, as :meth:`Op.describe` writes it (``"Log"``, ``"Sum(over=Batch)"``).
        phase: ``"forward"`` (its result) or ``"backward"`` (the cotangents it returned).
        site: ``file:line`` that applied the op (for a graph node, that built it).
        values: one line per value involved: the result (or cotangents), the incoming
            cotangent for a backward, and each operand, with its type and range.
    """

    op: str
    phase: Phase
    site: str
    values: tuple[str, ...]

    def __post_init__(self) -> None:
        check_choice("NonFiniteReport", "phase", self.phase, ("forward", "backward"))

    def __str__(self) -> str:
        where = "forward" if self.phase == "forward" else "backward (its cotangents)"
        lines = [f"the first non-finite value came from the {where} of {self.op} at {self.site}"]
        lines += [f"  {v}" for v in self.values]
        return "\n".join(lines)


class NonFiniteError(FloatingPointError):
    """An op produced NaN or infinity while its results were being checked.

    Attributes:
        report: the :class:`NonFiniteReport` (``None`` when no op produced the value: it
            came from the inputs or from code outside axjax's ops).
    """

    __module__ = "axjax"

    def __init__(self, message: str, report: NonFiniteReport | None = None) -> None:
        super().__init__(message)
        self.report = report


class _State(threading.local):
    """What :func:`debug_nans` found (whether it is on, and the node's line: core/_context.py)."""

    def __init__(self) -> None:
        self.found: list[tuple[int, NonFiniteReport]] = []  # from traced checks
        self.counter = 0


_STATE = _State()
_effects_barrier = cast(Callable[[], None], jax.effects_barrier)


def checking_finite() -> bool:
    """Whether ops check their results now (inside :func:`debug_nans`)."""
    return current().finite


@contextlib.contextmanager
def node_site(site: str) -> Generator[None, None, None]:
    """Report ops applied inside as built at ``site`` (a compiled graph's node)."""
    with switched(site=site):
        yield


def op_site(site: str | None) -> str:
    """The line to report for the op being applied now: the graph node's ``site`` (the
    switch core/_context.py holds), else the user's."""
    return site if site is not None else user_site(2)


@contextlib.contextmanager
def debug_nans() -> Generator[None, None, None]:
    """Run op by op (``jax.jit`` disabled) and raise at the first op whose forward or
    backward result holds NaN or infinity, with the op, its operands' ranges and its line.

    Slow (every op runs on its own and is checked): use it to find where a NaN comes from,
    not to train. ``ax.train.fit`` does the same automatically when its guard stops a run.

    Example:
        >>> with ax.debug_nans():
        ...     grads = ax.grad(loss)(params, batch)  # doctest: +SKIP
        axjax.NonFiniteError: the first non-finite value came from the backward (its
        cotangents) of Sqrt at model.py:12
          cotangent 0 Tensor[F32, Batch=4]: 1 inf of 4 (finite range [0.25, 0.5])
          ...
    """
    if current().finite:
        yield
        return
    _STATE.found, _STATE.counter = [], 0
    try:
        with switched(finite=True), jax.disable_jit():
            yield
            _effects_barrier()  # traced checks (jax.debug.callback) have all run
        if _STATE.found:
            _, report = min(_STATE.found, key=lambda f: f[0])
            raise NonFiniteError(str(report), report)
    finally:
        _STATE.found = []


def check_finite(fun: Callable[P, R]) -> Callable[P, R]:
    """Wrap ``fun`` so that a NaN or infinity in its results is explained, not returned.

    ``fun`` runs as usual (jitted if it is); only when a floating result is not finite is
    it run again under :func:`debug_nans`, which raises :class:`NonFiniteError` naming the
    first op that produced the value.

    Example:
        >>> step = ax.check_finite(jax.jit(train_step))
        >>> params = step(params, batch)  # doctest: +SKIP
    """

    @functools.wraps(fun)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        out = fun(*args, **kwargs)
        if all_finite(out):
            return out
        with debug_nans():
            fun(*args, **kwargs)
        bad_inputs = not all_finite((args, kwargs))
        raise NonFiniteError(
            f"{getattr(fun, '__name__', 'the function')} returned NaN or infinity, but no "
            "axjax op produced it when run again op by op: "
            + (
                "its inputs already hold non-finite values"
                if bad_inputs
                else "it came from code outside axjax's ops (plain jax.numpy, an optimizer) or "
                "from a non-deterministic computation"
            )
        )

    return checked


def all_finite(tree: PyTree) -> bool:
    """Whether every floating leaf of ``tree`` (Tensors included) is finite (one sync)."""
    arrays: list[Any] = [getattr(x, "_array", x) for x in jax.tree_util.tree_leaves(tree)]
    leaves = [x for x in arrays if is_inexact(x)]
    if not leaves:
        return True
    return bool(jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves])))


def check_forward(op: Op[Any], operands: Sequence[object], result: object, site: str) -> None:
    """Raise (or record, under a trace) if the op's ``result`` arrays are not finite."""
    results = list(result) if isinstance(result, tuple) else [result]
    _check(
        op,
        "forward",
        site,
        [("result", r) for r in results],
        [(f"operand {i}", x) for i, x in enumerate(operands)],
    )


def check_backward(
    op: Op[Any], cotangent: object, operands: Sequence[object], grads: Sequence[object], site: str
) -> None:
    """Raise (or record) if the cotangents the op's backward returned are not finite."""
    dys = list(cotangent) if isinstance(cotangent, tuple) else [cotangent]
    context = [("incoming cotangent", d) for d in dys]
    context += [(f"operand {i}", x) for i, x in enumerate(operands)]
    _check(op, "backward", site, [(f"cotangent {i}", g) for i, g in enumerate(grads)], context)


def _check(
    op: Op[Any],
    phase: Phase,
    site: str,
    checked: list[tuple[str, object]],
    context: list[tuple[str, object]],
) -> None:
    checked = [(n, v) for n, v in checked if is_inexact(_array(v))]
    if not checked:
        return
    _STATE.counter += 1
    order = _STATE.counter
    names = [n for n, _ in checked + context]
    types = [_type_of(v) for _, v in checked + context]
    arrays = [_array(v) for _, v in checked + context]
    n_checked = len(checked)

    def inspect(*values: npt.ArrayLike) -> None:
        values_np = [np.asarray(v) for v in values]
        if all(np.isfinite(v).all() for v in values_np[:n_checked] if is_inexact(v.dtype)):
            return
        lines = tuple(
            f"{n} {t}: {_range(v)}" for n, t, v in zip(names, types, values_np, strict=True)
        )
        inherited = [
            n
            for n, v in zip(names[n_checked:], values_np[n_checked:], strict=True)
            if n.startswith("operand") and is_inexact(v.dtype) and not np.isfinite(v).all()
        ]
        if phase == "forward" and inherited:
            lines += (
                f"({' and '.join(inherited)} already held non-finite values: they came "
                "from this op's inputs, the data or a parameter, not from the op)",
            )
        report = NonFiniteReport(op.describe(), phase, site, lines)
        if concrete:
            raise NonFiniteError(str(report), report)
        _STATE.found.append((order, report))

    concrete = not any(isinstance(a, jax.core.Tracer) for a in arrays)
    if concrete:
        inspect(*arrays)
    else:
        jax.debug.callback(inspect, *arrays)


def _array(v: object) -> jax.Array | np.ndarray[Any, Any]:
    """A Tensor's array; an array (a cotangent, a float0 zero) as it is."""
    return cast("jax.Array | np.ndarray[Any, Any]", getattr(v, "_array", v))


def _type_of(v: Any) -> str:
    if hasattr(v, "_axes"):
        return describe(v)
    a = _array(v)
    return f"array{tuple(a.shape)} {np.dtype(a.dtype).name}"


def _range(v: np.ndarray[Any, Any]) -> str:
    if v.size == 0:
        return "empty"
    if not is_inexact(v.dtype):
        return f"range [{v.min()}, {v.max()}]"
    finite = np.isfinite(v)
    parts = []
    for what, mask in (("NaN", np.isnan(v)), ("+inf", np.isposinf(v)), ("-inf", np.isneginf(v))):
        if k := int(mask.sum()):
            parts.append(f"{k} {what}")
    bad = f"{', '.join(parts)} of {v.size}" if parts else ""
    if not finite.any():
        return bad or "no finite value"
    f = v[finite].astype(np.float64)
    rng = f"range [{f.min():.4g}, {f.max():.4g}]"
    return f"{bad} (finite {rng})" if bad else rng
