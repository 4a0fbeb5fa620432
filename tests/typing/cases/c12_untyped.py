"""No silent Any: attention scaled by D**-0.5 stays typed under the plugin, causal_mask is
typed, and with warn_untyped (on for this module in [tool.axjax-mypy]) the plugin reports
each call whose Tensor result has degraded, naming the cause."""

from typing import reveal_type

from axes import A, B, N

import axjax as ax
from axjax import F32, Tensor

q = ax.ones((4, 8), N, A)
k = ax.ones((6, 8), B, A)
d: int = q.shape[1]
reveal_type(d**-0.5)  # want[plugin]: float; want[mypy,pyright]: Any
scores = ax.contract(q, k, over=A) * d**-0.5  # ok
reveal_type(scores)  # want[plugin]: Tensor[F32, N, B]; want[mypy,pyright]: Any
mask = ax.nn.causal_mask(N, B, 4, 6)  # ok
reveal_type(mask)  # want: Tensor[Bool, N, B]
masked: Tensor[F32, N, B] = ax.where(mask, scores, ax.full((4, 6), N, B, value=-1e9))  # ok


def load(path: str) -> ax.AnyTensor:
    """Untyped data: a bare Tensor annotation is Tensor[Any, *tuple[Any, ...]]."""
    return ax.ones((4, 8), N, A)


batch = load("data.npy")  # want-error[plugin]: load returns Tensor[Any, *tuple[Any, ...]] (rank unknown): the axes are no longer checked after this call; ok[mypy,pyright]; runs: a report, not a mistake
h = ax.softmax(batch, A)  # want-error[plugin]: ax.softmax returns Tensor[Any, *tuple[Any, ...]] (rank unknown): the axes are no longer checked after this call; its argument batch is Tensor[Any, *tuple[Any, ...]] (rank unknown); ok[mypy,pyright]; runs: a report, not a mistake
typed: Tensor[F32, N, A] = load("data.npy")  # ok
g = ax.softmax(typed, A)  # ok
bad = ax.softmax(typed, B)  # want-error: Cannot apply Softmax(B) to Tensor[F32, N, A]: B is not an axis of the tensor
