"""The axjax mypy plugin: exact axis types at any rank, and axjax's own error messages.

Enable it in ``pyproject.toml``::

    [tool.mypy]
    plugins = ["axjax.mypy"]

With it, every op that names an axis is exact at any rank and position, ``ax.contract``
gets the symmetric difference of its operands' axes, and a mistake reads as it would at run
time, without the sizes::

    error: Cannot apply MatMul to Tensor[F32, A, B] and Tensor[F32, C, B]: inner axes B and
    C differ (rename one, or use ax.contract)  [axjax-axes]

Error codes: ``axjax-axes`` (an op's type rule fails), ``axjax-axis-label`` (a label that is
not ``@final``, an annotation naming a non-label or an axis twice), ``axjax-joined-axis``
(an axis widened to ``Axis`` by a join). See docs/typing.md.
"""

from ._plugin import AxjaxPlugin as AxjaxPlugin
from ._plugin import plugin as plugin
