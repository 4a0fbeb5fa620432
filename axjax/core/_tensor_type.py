"""``TensorType``: what a tensor is without its values (dtype marker, axes, sizes).

The value an op's type rule returns (:meth:`axjax.Op.infer`) and ``t.type`` gives. It sits
below ``Tensor`` (core/_tensor.py): the rule's checks, placement and graph nodes use it
without the Tensor class.
"""

from __future__ import annotations

from ._axis import Axis
from ._dtype import DType
from ._errors import describe

__all__ = ["TensorType"]


class TensorType:
    """The static description of a tensor: dtype marker, axes and sizes.

    An op's type rule (:meth:`axjax.Op.infer`) maps the operands' types to this. A size
    may be ``None`` in a graph whose sizes are not known until compile.
    """

    __slots__ = ("dtype", "axes", "shape")
    dtype: type[DType]
    axes: tuple[type[Axis], ...]
    shape: tuple[int | None, ...]

    def __init__(
        self, dtype: type[DType], axes: tuple[type[Axis], ...], shape: tuple[int | None, ...]
    ) -> None:
        self.dtype = dtype
        self.axes = axes
        self.shape = shape

    @property
    def sizes(self) -> dict[type[Axis], int | None]:
        return dict(zip(self.axes, self.shape, strict=True))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorType) and (self.dtype, self.axes, self.shape) == (
            other.dtype,
            other.axes,
            other.shape,
        )

    def __hash__(self) -> int:
        return hash((self.dtype, self.axes, self.shape))

    def __repr__(self) -> str:
        return describe(self)
