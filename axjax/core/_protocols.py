"""What the op pipeline asks of the values it passes between its rooms.

``apply`` (core/_op.py), the op contract (core/_contract.py) and the lowering
(core/_lower.py, core/_placement.py) hand each other operands, results and cotangents. Their
signatures name these types rather than ``Any``:

- :class:`Operand`: an operand once checked (a ``Tensor``; a graph node is a ``Tensor``
  subclass): its array and axis labels, read through the slots for speed;
- :data:`Arrays`: what a forward lowers to, one ``jax.Array`` per declared result;
- :data:`Cotangents`: one array per operand (``float0`` zeros for a non-floating one).

Static types only: nothing here is checked at run time (the contract checks the values).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import jax
import numpy as np

from ._errors import HasType

if TYPE_CHECKING:
    from ._axis import Axis
    from ._tensor_type import TensorType

__all__ = ["Arrays", "Cotangents", "Operand"]


class Operand(HasType, Protocol):
    """An op's operand as the pipeline reads it: a ``Tensor`` satisfies it.

    A type rule reads what :class:`HasType` names (``axes``, ``dtype``, ``shape``) and
    ``type``; the lowering reads the array and the labels through the slots (``_array``,
    ``_axes``), as the hot path does.
    """

    @property
    def _array(self) -> jax.Array: ...

    @property
    def _axes(self) -> tuple[type[Axis], ...]: ...

    @property
    def type(self) -> TensorType: ...


#: An op's result arrays: one ``jax.Array``, or a tuple of them for an op with several results.
Arrays: TypeAlias = jax.Array | tuple[jax.Array, ...]
#: One cotangent per operand: an array of its shape, or ``float0`` zeros (a numpy array) for
#: an operand that takes no gradient.
Cotangents: TypeAlias = tuple[jax.Array | np.ndarray[Any, np.dtype[Any]], ...]
