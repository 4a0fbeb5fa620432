"""The switches that decide how ops are applied, held in one object: :data:`CONTEXT`.

``apply`` (core/_op.py) reads them once per op, into one ``Dispatch`` (core/_lower.py):

- ``autodiff``: ``"axjax"`` (an op JAX differentiates is a ``jax.custom_vjp`` whose bwd is
  the op's own backward) or ``"jax"`` (JAX differentiates the forward: ``ax.jax_autodiff``);
- ``finite`` and ``site``: inside ``ax.debug_nans`` every op checks its results for NaN and
  infinity (core/_finite.py), reported at ``site`` while a graph node runs, else at the line
  of the user's call;
- ``rules``: the axis -> mesh axes table by which ops place their results on an Explicit
  mesh (core/_placement.py); ``axjax.parallel``'s ``axis_rules`` sets it (:func:`placing`);
- ``provenance``: record where each axis came from (core/_provenance.py).

The first four are per thread (tests flip them safely). ``provenance`` is process-wide: a
class attribute of the thread-local object, the same in every thread (set it with
:func:`set_provenance`; ``AXJAX_PROVENANCE=1`` in the environment turns it on at import).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Generator
from typing import ClassVar, Literal

from ._axis import Axis

__all__ = ["CONTEXT", "Context", "Table", "config", "jax_autodiff", "placing", "set_provenance"]

#: Placement rules after checking: axis label -> the mesh axes that split it (maybe none).
Table = dict[type[Axis], tuple[str, ...]]


def _from_environment() -> bool:
    flag = os.environ.get("AXJAX_PROVENANCE", "").strip().lower()
    return flag not in ("", "0", "false", "no", "off")


class Context(threading.local):
    """How ops are applied now, in this thread (``provenance``: in every thread)."""

    #: record axis provenance: process-wide, so a class attribute (see :func:`set_provenance`)
    provenance: ClassVar[bool] = _from_environment()

    def __init__(self) -> None:
        self.autodiff: Literal["axjax", "jax"] = "axjax"
        self.finite = False  # inside ax.debug_nans
        self.site: str | None = None  # the line of the graph node being run, for NaN reports
        self.rules: Table | None = None  # the compute rules' table (axjax.parallel sets it)


CONTEXT: Context = Context()


def set_provenance(on: bool) -> None:
    """Turn axis provenance on or off, in every thread."""
    Context.provenance = bool(on)


@contextlib.contextmanager
def placing(table: Table) -> Generator[None, None, None]:
    """Inside the block ops on an Explicit mesh shard their results by ``table`` (the current
    compute rules), in this thread."""
    old, CONTEXT.rules = CONTEXT.rules, table
    try:
        yield
    finally:
        CONTEXT.rules = old


class _Config:
    """Process-wide switches (``autodiff`` is per thread, so tests can flip it safely)."""

    __slots__ = ()

    @property
    def autodiff(self) -> Literal["axjax", "jax"]:
        """``"axjax"``: ops JAX differentiates use their own backward (``jax.custom_vjp``);
        ``"jax"``: JAX differentiates their forward (see :func:`jax_autodiff`)."""
        return CONTEXT.autodiff

    @autodiff.setter
    def autodiff(self, mode: Literal["axjax", "jax"]) -> None:
        CONTEXT.autodiff = mode

    @property
    def provenance(self) -> bool:
        """Record where each axis came from and say it in ``AxisError`` messages (a debugging
        mode, process-wide; also ``AXJAX_PROVENANCE=1``). See core/_provenance.py."""
        return Context.provenance

    @provenance.setter
    def provenance(self, on: bool) -> None:
        set_provenance(on)


config: _Config = _Config()


@contextlib.contextmanager
def jax_autodiff() -> Generator[None, None, None]:
    """Lower ops to plain JAX autodiff instead of their own backward.

    ``jax.custom_vjp`` has no forward mode; use this around ``jax.jvp``,
    ``jax.jacfwd`` or ``jax.hessian``. Values and gradients are identical.

    Example:
        >>> with ax.jax_autodiff():
        ...     h = jax.hessian(lambda a: ax.sum(ax.tanh(ax.tensor(a, X)), X).array)(x)
    """
    old = CONTEXT.autodiff
    CONTEXT.autodiff = "jax"
    try:
        yield
    finally:
        CONTEXT.autodiff = old
