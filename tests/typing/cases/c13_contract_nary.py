"""n-ary natural contraction: an axis two operands share is summed, one that three or more
share must be named in ``over=``; the plugin infers the result at any arity."""

from typing import Any, reveal_type

from axes import A, B, C, D, E, N

import axjax as ax
from axjax import F32, Tensor

ab = ax.zeros((2, 3), A, B)
bc = ax.zeros((3, 4), B, C)
cd = ax.zeros((4, 5), C, D)
de = ax.zeros((5, 6), D, E)
ca = ax.zeros((4, 2), C, A)
na = ax.zeros((7, 2), N, A)
nb = ax.zeros((7, 3), N, B)
nab = ax.zeros((7, 2, 3), N, A, B)

reveal_type(ax.contract(ab, bc, cd))  # want[plugin]: Tensor[F32, A, D]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
reveal_type(ax.contract(ab, bc, cd, de))  # want[plugin]: Tensor[F32, A, E]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
reveal_type(ax.contract(ab, bc, ca))  # want[plugin]: Tensor[F32]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
reveal_type(ax.contract(bc, ab, de))  # want[plugin]: Tensor[F32, C, A, D, E]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
reveal_type(ax.contract(na, nb, nab, over=(A, B)))  # want[plugin]: Tensor[F32, N]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
reveal_type(ax.contract(na, nb, nab, over=(N, A)))  # want[plugin]: Tensor[F32, B]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
k1: Tensor[F32, A, D] = ax.contract(ab, bc, cd)  # ok
k2: Tensor[F32, D, A] = ax.contract(ab, bc, cd)  # want-error[plugin]; miss[mypy,pyright]; runs: an annotation is not checked at run time
k3 = ax.contract(na, nb, nab)  # want-error[plugin]: Cannot apply Contract to Tensor[F32, N, A] and Tensor[F32, N, B] and Tensor[F32, N, A, B]: axis N is in 3 operands (first, second and third), so which two sum it is ambiguous; miss[mypy,pyright]
k4 = ax.contract(ab, bc, cd, over=E)  # want-error[plugin]: E is an axis of no operand (contract sums axes the operands share); miss[mypy,pyright]
k5 = ax.contract(ab, bc, ax.zeros((4,), C, dtype=ax.I32))  # want-error[plugin]: dtypes F32 and I32 differ; want-error[mypy,pyright]
k6 = ax.contract(ab, bc, cd) + ax.zeros((5, 2), D, A)  # want-error[plugin]: same axes in a different order; miss[mypy,pyright]


def unknown(t: Tensor[F32, *tuple[Any, ...]]) -> None:
    reveal_type(ax.contract(t, bc, cd))  # want[plugin]: Tensor[Any, *tuple[Any, ...]]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
