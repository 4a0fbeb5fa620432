"""The switches that decide how ops are applied: one immutable :class:`Switches`, read once
per op (``apply``, core/_op.py: ``now = current()``).

- ``autodiff``: ``"axjax"`` (an op JAX differentiates is a ``jax.custom_vjp`` whose bwd is
  the op's own backward) or ``"jax"`` (JAX differentiates the forward: ``ax.jax_autodiff``);
- ``finite`` and ``site``: inside ``ax.debug_nans`` every op checks its results for NaN and
  infinity (core/_finite.py), reported at ``site`` while a graph node runs, else at the line
  of the user's call;
- ``rules``: the axis -> mesh axes table by which ops place their results on an Explicit
  mesh (core/_placement.py); ``axjax.parallel``'s ``axis_rules`` sets it (:func:`placing`);
- ``provenance``: record where each axis came from (core/_provenance.py).

The first four are per thread (a ``ContextVar``: tests flip them safely); a change makes new
``Switches`` (:func:`switched`), so the ones an op read never change under it.
``provenance`` is process-wide, a class attribute of ``Switches`` (``AXJAX_PROVENANCE=1`` in
the environment turns it on at import).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Generator
from contextvars import ContextVar
from typing import Any, ClassVar, Literal, final

from ._axis import Axis

__all__ = [
    "Switches",
    "Table",
    "config",
    "current",
    "jax_autodiff",
    "placing",
    "set_provenance",
    "switched",
]

#: Placement rules after checking: axis label -> the mesh axes that split it (maybe none).
Table = dict[type[Axis], tuple[str, ...]]


def _from_environment() -> bool:
    flag = os.environ.get("AXJAX_PROVENANCE", "").strip().lower()
    return flag not in ("", "0", "false", "no", "off")


@final
class Switches:
    """How ops are applied now, in this thread (``provenance``: in every thread). Never
    changed: a change makes new ``Switches`` (:meth:`replace`, :func:`switched`)."""

    __slots__ = ("autodiff", "finite", "site", "rules")
    autodiff: Literal["axjax", "jax"]
    finite: bool  # inside ax.debug_nans
    site: str | None  # the line of the graph node being run, for NaN reports
    rules: Table | None  # the compute rules' table (axjax.parallel sets it)
    #: record axis provenance: process-wide, so a class attribute (:func:`set_provenance`)
    provenance: ClassVar[bool] = _from_environment()

    def __init__(
        self,
        autodiff: Literal["axjax", "jax"] = "axjax",
        finite: bool = False,
        site: str | None = None,
        rules: Table | None = None,
    ) -> None:
        for name, value in zip(self.__slots__, (autodiff, finite, site, rules), strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Switches are never changed: use replace({name}=...)")

    def replace(self, **changes: Any) -> Switches:
        """These switches with ``changes`` (field=value)."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        return Switches(**{**fields, **changes})


_DEFAULT = Switches()  # immutable: a new Switches for each change
_SWITCHES: ContextVar[Switches] = ContextVar("axjax_switches", default=_DEFAULT)

#: The switches of this thread: one read (``apply`` takes it once per op).
current = _SWITCHES.get


@contextlib.contextmanager
def switched(**changes: Any) -> Generator[Switches, None, None]:
    """Inside the block this thread's switches have ``changes`` (field=value)."""
    old = _SWITCHES.get()
    new = old.replace(**changes)
    _SWITCHES.set(new)
    try:
        yield new
    finally:
        _SWITCHES.set(old)


def set_provenance(on: bool) -> None:
    """Turn axis provenance on or off, in every thread."""
    Switches.provenance = bool(on)


def placing(table: Table) -> contextlib.AbstractContextManager[Switches]:
    """Inside the block ops on an Explicit mesh shard their results by ``table`` (the current
    compute rules), in this thread."""
    return switched(rules=table)


class _Config:
    """Process-wide switches (``autodiff`` is per thread, so tests can flip it safely)."""

    __slots__ = ()

    @property
    def autodiff(self) -> Literal["axjax", "jax"]:
        """``"axjax"``: ops JAX differentiates use their own backward (``jax.custom_vjp``);
        ``"jax"``: JAX differentiates their forward (see :func:`jax_autodiff`)."""
        return _SWITCHES.get().autodiff

    @autodiff.setter
    def autodiff(self, mode: Literal["axjax", "jax"]) -> None:
        _SWITCHES.set(_SWITCHES.get().replace(autodiff=mode))

    @property
    def provenance(self) -> bool:
        """Record where each axis came from and say it in ``AxisError`` messages (a debugging
        mode, process-wide; also ``AXJAX_PROVENANCE=1``). See core/_provenance.py."""
        return Switches.provenance

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
    with switched(autodiff="jax"):
        yield
