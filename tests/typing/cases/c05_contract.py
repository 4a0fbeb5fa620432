"""The paper's natural contraction: shared axes are summed, the rest kept (symmetric
difference); with ``over=`` only the named shared axes are summed, the others batched."""

from typing import Any, TypeVarTuple, reveal_type

from axes import A, B, C, D, N

import axjax as ax
from axjax import F32, Tensor

Ts = TypeVarTuple("Ts")

ab = ax.zeros((2, 3), A, B)
ba = ax.zeros((3, 2), B, A)
bc = ax.zeros((3, 4), B, C)
ac = ax.zeros((2, 4), A, C)
ca = ax.zeros((4, 2), C, A)
cd = ax.zeros((4, 5), C, D)
abc = ax.zeros((2, 3, 4), A, B, C)
nab = ax.zeros((6, 2, 3), N, A, B)
nbc = ax.zeros((6, 3, 4), N, B, C)

reveal_type(ax.contract(ab, bc))  # want[plugin]: Tensor[F32, A, C]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
reveal_type(ax.contract(abc, cd))  # want[plugin]: Tensor[F32, A, B, D]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
reveal_type(ax.contract(ab, ba))  # want[plugin]: Tensor[F32]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
reveal_type(ax.contract(ab, cd))  # want[plugin]: Tensor[F32, A, B, C, D]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
reveal_type(ax.contract(nab, nbc, over=B))  # want[plugin]: Tensor[F32, N, A, C]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
reveal_type(ax.contract(nab, nbc))  # want[plugin]: Tensor[F32, A, C]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
k1: Tensor[F32, A, C] = ax.contract(ab, bc)  # ok
k2: Tensor[F32, C, A] = ax.contract(ab, bc)  # want-error[plugin]; miss[mypy,pyright]; runs: annotations are not checked at run time
k3 = ax.contract(ab, bc) + ac  # ok
k4 = ax.contract(ab, bc) + ca  # want-error[plugin]: Cannot apply Add to Tensor[F32, A, C] and Tensor[F32, C, A]: same axes in a different order; miss[mypy,pyright]
k5 = ax.contract(ab, bc) @ ax.zeros((5, 6), D, N)  # want-error[plugin]: inner axes C and D differ; miss[mypy]; limit[pyright]: strict mode finds the result partly unknown
k6 = ax.contract(ab, bc, over=C)  # miss[mypy,pyright]; want-error[plugin]: Cannot apply Contract(over=C) to Tensor[F32, A, B] and Tensor[F32, B, C]: C is not an axis of the first operand (contract sums axes the operands share)
k7 = ax.contract(ab, ax.zeros((3,), B, dtype=ax.I32))  # want-error[plugin]: dtypes F32 and I32 differ; want-error[mypy,pyright]


def unknown(t: Tensor[F32, *tuple[Any, ...]], u: Tensor[F32, A, Any]) -> None:
    reveal_type(ax.contract(t, bc))  # want[plugin]: Tensor[Any, *tuple[Any, ...]]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
    reveal_type(ax.contract(u, bc))  # want[plugin]: Tensor[Any, *tuple[Any, ...]]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]


def generic(x: Tensor[F32, *Ts, B], w: Tensor[F32, B, C]) -> Tensor[F32, *Ts, C]:
    return ax.contract(x, w)  # ok
