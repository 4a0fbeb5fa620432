"""axjax: typesafe named-axis deep learning on JAX.

Every tensor's type names what each axis means (``Tensor[F32, Batch, Pixel]``); axis
mistakes are type errors for mypy/pyright and clear ``AxisError``s at trace time.

Example:
    >>> import axjax as ax
    >>> from typing import final
    >>> @final
    ... class Batch(ax.Axis): ...
    >>> ax.ones((2,), Batch) + ax.ones((2,), Batch)
    Tensor[F32, Batch=2]([2., 2.])
"""

from .core import *  # noqa: F403

__version__ = "0.1.0"

from . import nn as nn  # noqa: E402
from . import train as train
from .nn import fold as fold  # the paper's foldLeft/scanLeft over a named axis
from .nn import scan as scan
