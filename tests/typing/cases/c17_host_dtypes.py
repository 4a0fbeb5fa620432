"""Dtypes from host data (issue 32, class 5): a tensor made from host data without ``dtype=``
has the data's dtype where the data's static type knows it (under the plugin: a numpy array
annotated with its scalar type, nested lists of ``int``, ``float`` or ``bool``), and otherwise
an unknown dtype, which is gradual: every dtype accepts it, so it is never a false error
(not in an argument, not through ``ax.shard``, not at a user op's dtype variable)."""

# typing-class: 5 dtypes from host data

from typing import Any, final, reveal_type

import jax
import numpy as np
import numpy.typing as npt

import axjax as ax
from axjax import F32, I32, Tensor


@final
class Batch(ax.Axis): ...


@final
class Feature(ax.Axis): ...


class Shift(ax.ElementwiseOp):
    """A user op on a typed base: ``Tensor[D, *A] -> Tensor[D, *A]``."""

    def forward(self, x: ax.AnyTensor) -> jax.Array:
        return x.array + 1

    def backward(self, dy: ax.AnyTensor, y: ax.AnyTensor, x: ax.AnyTensor) -> tuple[jax.Array]:
        return (dy.array,)


def count(labels: Tensor[I32, Batch]) -> Tensor[I32]:
    return ax.sum(labels, Batch)


def average(x: Tensor[F32, Batch]) -> Tensor[F32]:
    return ax.mean(x, Batch)


def load() -> Any:
    """Host data of unknown type (read from a file, a data set)."""
    return np.arange(4, dtype=np.int32)


def load_floats() -> Any:
    return np.zeros(4, dtype=np.float32)


# the examples: an unknown dtype is accepted wherever a dtype is wanted
y = ax.tensor(load(), Batch)
reveal_type(y)  # want: Tensor[Any, Batch]
c1 = count(y)  # ok
mesh = jax.make_mesh((1,), ("data",))  # pyright: ignore[reportUnknownMemberType]
with ax.axis_rules(mesh, {Batch: "data"}):
    c2 = count(ax.shard(y))  # ok
reveal_type(Shift()(y))  # want: Tensor[Any, Batch]
c3 = count(Shift()(y))  # ok
reveal_type(y + ax.tensor(np.ones(4, dtype=np.int32), Batch))  # want[plugin]: Tensor[Any, *tuple[Any, ...]]; want[mypy,pyright]: Tensor[Any, Batch]

# the dtype, where the data's type knows it (the plugin asks ax.tensor about a sample)
labels: npt.NDArray[np.int32] = np.arange(4, dtype=np.int32)
reveal_type(ax.tensor(labels, Batch))  # want[plugin]: Tensor[I32, Batch]; want[mypy,pyright]: Tensor[Any, Batch]
reveal_type(ax.tensor(np.zeros((4, 3), dtype=np.float32), Batch, Feature))  # want[plugin]: Tensor[F32, Batch, Feature]; want[mypy,pyright]: Tensor[Any, Batch, Feature]
reveal_type(ax.tensor(np.zeros(4, dtype=np.float16), Batch))  # want[plugin]: Tensor[F16, Batch]; want[mypy,pyright]: Tensor[Any, Batch]
reveal_type(ax.tensor(np.zeros(4, dtype=np.uint8), Batch))  # want[plugin]: Tensor[U8, Batch]; want[mypy,pyright]: Tensor[Any, Batch]
reveal_type(ax.tensor(np.zeros(4, dtype=np.int8), Batch))  # want[plugin]: Tensor[I8, Batch]; want[mypy,pyright]: Tensor[Any, Batch]
reveal_type(ax.tensor(np.zeros(4, dtype=np.uint32), Batch))  # want[plugin]: Tensor[U32, Batch]; want[mypy,pyright]: Tensor[Any, Batch]
reveal_type(ax.tensor(np.zeros(4, dtype=np.bool_), Batch))  # want[plugin]: Tensor[Bool, Batch]; want[mypy,pyright]: Tensor[Any, Batch]
reveal_type(ax.tensor(np.zeros(4), Batch))  # want[plugin]: Tensor[F32, Batch]; want[mypy,pyright]: Tensor[Any, Batch]
reveal_type(ax.tensor(np.arange(4), Batch))  # want[plugin]: Tensor[I32, Batch]; want[mypy,pyright]: Tensor[Any, Batch]
reveal_type(ax.tensor([1, 2, 3], Batch))  # want[plugin]: Tensor[I32, Batch]; want[mypy,pyright]: Tensor[Any, Batch]
reveal_type(ax.tensor([[1.0, 2.0]], Batch, Feature))  # want[plugin]: Tensor[F32, Batch, Feature]; want[mypy,pyright]: Tensor[Any, Batch, Feature]
reveal_type(ax.tensor([True, False], Batch))  # want[plugin]: Tensor[Bool, Batch]; want[mypy,pyright]: Tensor[Any, Batch]
reveal_type(ax.tensor([1, 2.5], Batch))  # want[plugin]: Tensor[F32, Batch]; want[mypy,pyright]: Tensor[Any, Batch]
reveal_type(ax.tensor(3))  # want[plugin]: Tensor[I32]; want[mypy,pyright]: Tensor[Any]
reveal_type(ax.tensor([1, 2], Batch, dtype=ax.F32))  # want: Tensor[F32, Batch]
reveal_type(ax.tensor(np.zeros(4, dtype=np.int16), Batch, dtype=ax.I32))  # want: Tensor[I32, Batch]
reveal_type(ax.tensor(np.zeros(4, dtype=np.float64).astype(np.int32), Batch))  # want[plugin]: Tensor[I32, Batch]; want[mypy,pyright]: Tensor[Any, Batch]
unknown: npt.NDArray[Any] = load_floats()
reveal_type(ax.tensor(unknown, Batch))  # want: Tensor[Any, Batch]
c4 = count(ax.tensor(labels, Batch))  # ok
c5 = average(ax.tensor(unknown, Batch))  # ok

# mistakes the inferred dtype catches
m1 = average(ax.tensor(labels, Batch))  # want-error[plugin]: incompatible type "Tensor[I32, Batch]"; miss[mypy,pyright]: the dtype of host data is the plugin's
m2 = count(ax.tensor([0.5, 1.5], Batch))  # want-error[plugin]: incompatible type "Tensor[F32, Batch]"; miss[mypy,pyright]: the dtype of host data is the plugin's; runs: annotations are not checked at run time
m3 = ax.tensor([1, 2], Batch) + ax.tensor([0.5, 1.5], Batch)  # want-error[plugin]: dtypes F32 and I32 differ; miss[mypy,pyright]: the dtype of host data is the plugin's
