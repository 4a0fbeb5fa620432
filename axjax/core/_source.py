"""Where user code built something: the ``file:line`` of the innermost frame outside axjax.

One mechanism for every report that points at user code: the source line of a graph node,
the op named by a NaN report (:func:`axjax.debug_nans`) and the axis provenance of an
:class:`~axjax.AxisError`.
"""

from __future__ import annotations

import os
import sys
from types import FrameType

__all__ = ["PACKAGE_DIR", "user_frame", "user_site"]

#: the axjax package's directory (with a trailing separator): frames under it are the library's
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_frame(skip: int = 1) -> FrameType | None:
    """The innermost frame outside the axjax package, starting ``skip`` frames above the
    caller's own (``skip=1``: the caller's caller)."""
    try:
        frame: FrameType | None = sys._getframe(skip + 1)
    except ValueError:
        return None
    while frame is not None and frame.f_code.co_filename.startswith(PACKAGE_DIR):
        frame = frame.f_back
    return frame


def user_site(skip: int = 1) -> str:
    """``file:line`` of the innermost caller outside the axjax package (``"?"`` if none).

    >>> user_site()  # doctest: +SKIP
    'model.py:41'
    """
    frame = user_frame(skip + 1)
    if frame is None:
        return "?"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
