"""Where user code built something: the ``file:line`` of the innermost frame outside axjax.

One mechanism for every report that points at user code: the source line of a graph node,
the op named by a NaN report (:func:`axjax.debug_nans`) and the axis provenance of an
:class:`~axjax.AxisError`.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import CodeType, FrameType

__all__ = ["PACKAGE_DIR", "entry_name", "user_frame", "user_site"]

#: the axjax package's directory (with a trailing separator): frames under it are the library's
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _package_dir(name: str) -> str | None:
    spec = importlib.util.find_spec(name)
    origin = spec.origin if spec is not None else None
    return None if origin is None else os.path.dirname(origin) + os.sep


#: directories whose frames are never user code: axjax, and the libraries that call back into
#: it (Equinox's module metaclass runs a layer's ``__init__``; JAX runs traced functions)
LIBRARY_DIRS = (PACKAGE_DIR, *(d for d in map(_package_dir, ("equinox", "jax")) if d))


def user_frame(skip: int = 1) -> FrameType | None:
    """The innermost frame outside the axjax package, starting ``skip`` frames above the
    caller's own (``skip=1``: the caller's caller)."""
    try:
        frame: FrameType | None = sys._getframe(skip + 1)
    except ValueError:
        return None
    while frame is not None and frame.f_code.co_filename.startswith(LIBRARY_DIRS):
        frame = frame.f_back
    return frame


#: the code of wrappers that only add a call context around a public call (core/_calls.py):
#: the entry is the function they wrap, not the wrapper
TRANSPARENT: set[CodeType] = set()


def transparent(fn: object) -> None:
    """Let :func:`entry_name` look through the wrapper ``fn`` (its code)."""
    code = getattr(fn, "__code__", None)
    if isinstance(code, CodeType):
        TRANSPARENT.add(code)


def entry_name(skip: int = 1) -> str:
    """How the user called into axjax: the outermost axjax function between the caller and
    the user's frame (``"ax.zeros"``, ``"Affine"`` for ``Affine.__init__``), ``"?"`` if
    none.

    >>> entry_name()  # doctest: +SKIP
    'ax.tensor'
    """
    try:
        frame: FrameType | None = sys._getframe(skip + 1)
    except ValueError:
        return "?"
    entry = None
    while frame is not None and frame.f_code.co_filename.startswith(LIBRARY_DIRS):
        if frame.f_code.co_filename.startswith(PACKAGE_DIR) and frame.f_code not in TRANSPARENT:
            entry = frame.f_code
        frame = frame.f_back
    if entry is None:
        return "?"
    parts = entry.co_qualname.split(".")
    if len(parts) == 1:
        return f"ax.{parts[0]}"
    if parts[-1] == "__init__" and len(parts) >= 2 and parts[-2] != "<locals>":
        return "ax.Tensor" if parts[-2] == "Tensor" else parts[-2]
    return ".".join(p for p in parts if p != "<locals>")


def user_site(skip: int = 1) -> str:
    """``file:line`` of the innermost caller outside the axjax package (``"?"`` if none).

    >>> user_site()  # doctest: +SKIP
    'model.py:41'
    """
    frame = user_frame(skip + 1)
    if frame is None:
        return "?"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
