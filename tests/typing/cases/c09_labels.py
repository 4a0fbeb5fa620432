"""What may be an axis: @final subclasses of ax.Axis, each once per tensor; joins widen."""

from typing import Any, TypeVarTuple, final, reveal_type

from axes import A, B, C

import axjax as ax
from axjax import F32, Tensor


class Height(ax.Axis): ...  # want-error[plugin]: Axis label Height must be decorated with @final (mypy treats Tensor axes covariantly, so a sub-axis would be accepted in its place); miss[mypy,pyright]


class SubHeight(Height): ...  # ok


@final
class Width(ax.Axis): ...  # ok


def labels(ok: Tensor[F32, A, Width],  # ok
           bad: Tensor[F32, int],  # want-error[plugin]: "int" is not an axis label; miss[mypy,pyright]
           base: Tensor[F32, ax.Axis],  # want-error[plugin]: Tensor: `Axis` itself is not an axis label; miss[mypy,pyright]
           twice: Tensor[F32, A, A],  # want-error[plugin]: Tensor: axis A occurs twice in (A, A); miss[mypy,pyright]
           nodtype: Tensor[A, B],  # want-error
           dt: Tensor[ax.DType, A],  # want-error[plugin]: DType itself is not a dtype marker; miss[mypy,pyright]
           ) -> None:
    pass


# mypy checks Tensor axes covariantly: without @final labels a sub-axis passes for its parent
sub = ax.zeros((2,), SubHeight)
up: Tensor[F32, Height] = sub  # want-error[pyright]; miss[mypy]; ok[plugin]; runs: annotations are not checked at run time

# a list literal of different tensors joins their axes to Axis in mypy
ab = ax.zeros((2, 3), A, B)
ac = ax.zeros((2, 4), A, C)
bc = ax.zeros((3, 4), B, C)


def joins(flag: bool) -> None:
    both = [ab, ac]
    reveal_type(both)  # want[mypy,plugin]: list[Tensor[F32, A, Axis]]; want[pyright]: list[Tensor[F32, A, B] | Tensor[F32, A, C]]
    j1 = both[0] @ bc  # want-error[plugin]: Tensor[F32, A, Axis] is an operand widened to a base class; want-error[pyright]; miss[mypy]
    j2 = both[0] + ab  # want-error[plugin]: widened to a base class; want-error[pyright]; miss[mypy]
    exact: list[Tensor[F32, A, B]] = [ab, ab]  # ok
    j3 = exact[0] @ bc  # ok
    mixed = [ab, ax.zeros((2,), A, dtype=ax.I32)]
    j4 = mixed[0] + ab  # want-error[plugin]: object is an operand widened to a base class; want-error[mypy,pyright]


# Any and bare Tensor: gradual
def gradual(t: Tensor[F32, *tuple[Any, ...]], u: Any) -> None:
    back: Tensor[F32, B, C] = t  # ok
    reveal_type(ax.matmul(t, bc))  # want[plugin]: Tensor[Any, *tuple[Any, ...]]; want[mypy]: Tensor[F32, *tuple[Any, ...], Any, C]; want[pyright]: Tensor[F32, Any, C]
    reveal_type(u + ab)  # want: Any


def bare(x: Tensor) -> Tensor:  # want-error
    return x  # ok[mypy,plugin]; show[pyright]


# a label held in a variable: `type[Axis]` may hold any label (and `type[Height]` any
# subclass of a label that is not @final), so the plugin gives the gradual type, as the
# ops' catch-all overloads do; their exact overloads need the label's class
Ts = TypeVarTuple("Ts")


def held(x: Tensor[F32, A, B], axis: type[ax.Axis], b: type[B], h: type[Height]
         ) -> Tensor[F32, *tuple[Any, ...]]:
    reveal_type(ax.sum(x, b))  # want: Tensor[F32, A]
    reveal_type(ax.sum(x, axis))  # want[plugin]: Tensor[Any, *tuple[Any, ...]]; limit[mypy,pyright]: no overload takes a label of type type[Axis]
    reveal_type(ax.sum(ax.zeros((2,), Height), h))  # want[plugin]: Tensor[Any, *tuple[Any, ...]]; want[mypy,pyright]: Tensor[F32]
    reveal_type(ax.zeros((2, 3), axis, C))  # want[plugin]: Tensor[F32, Any, C]; want[mypy,pyright]: Tensor[F32, Axis, C]
    reveal_type(ax.arange(axis, 3, dtype=ax.I32))  # want[plugin]: Tensor[I32, Any]; want[mypy,pyright]: Tensor[I32, Axis]
    m = ax.broadcast(ax.arange(axis, 3), (axis, C), {C: 4})  # ok
    return ax.softmax(x, axis)  # ok


def held_generic(x: Tensor[F32, *Ts], axis: type[ax.Axis]) -> Tensor[F32, *tuple[Any, ...]]:
    return ax.sum(x, axis)  # ok[plugin]; limit[mypy,pyright]: no overload takes a label of type type[Axis]
