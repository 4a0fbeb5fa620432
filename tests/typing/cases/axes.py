"""Axis labels shared by the case files: one @final class per label."""

from typing import final

import axjax as ax


@final
class A(ax.Axis): ...


@final
class B(ax.Axis): ...


@final
class C(ax.Axis): ...


@final
class D(ax.Axis): ...


@final
class E(ax.Axis): ...


@final
class F(ax.Axis): ...


@final
class N(ax.Axis):
    """A batch axis."""


@final
class M(ax.Axis):
    """Another batch axis."""


@final
class W(ax.Axis):
    """Width."""


@final
class H(ax.Axis):
    """Height."""
