"""What pyright and plain mypy can be given by overloads (issue 44, class 4), no plugin.

``ax.contract(..., out=(A, B))`` is ``Tensor[D, A, B]`` in every checker (one generated
overload per length of ``out``; whether ``out`` is a permutation of the result's axes stays
the plugin's and the run time's). So is ``ax.rearrange(..., out=(A, B))`` (whether the
pattern gives those axes is the plugin's and the run time's). A reduction's result over a
literal tuple of axes is exact up to rank 3 (one overload per rank and per ordered choice of the axes; rank 4 and up
is gradual without the plugin); an axis the tensor lacks takes the catch-all of computed
tuples (``tuple(x.axes)``), which no type tells from a literal one: the plugin's. Left to the plugin, each with the reason (docs/typing.md): ``ax.tensor`` of a
numpy array of a known dtype, ``rearrange``'s result without ``out=``, ``stack`` along an
axis already present; an ``Ensemble`` input that already has its member axis is in c21_ensemble.py.
"""

from typing import Any, final, reveal_type

import numpy as np
import numpy.typing as npt

import axjax as ax
from axjax import F32, Tensor


@final
class Batch(ax.Axis): ...


@final
class Pos(ax.Axis): ...


@final
class Embed(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


x = ax.zeros((2, 5, 8), Batch, Pos, Embed)
w = ax.zeros((8, 3), Embed, Hidden)

# contract(out=): the result's axes are out='s
reveal_type(ax.contract(x, w, out=(Hidden, Batch, Pos)))  # want: Tensor[F32, Hidden, Batch, Pos]
reveal_type(ax.contract(x, w, over=Embed, out=(Batch, Pos, Hidden)))  # want: Tensor[F32, Batch, Pos, Hidden]
reveal_type(ax.contract(x, w))  # want[plugin]: Tensor[F32, Batch, Pos, Hidden]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
k0: Tensor[F32, Batch, Pos, Hidden] = ax.contract(x, w, out=(Batch, Pos, Hidden))  # ok
k1: Tensor[F32, Batch, Pos, Hidden] = ax.contract(x, w, out=(Pos, Batch, Hidden))  # want-error: Incompatible types in assignment; want-error[mypy]; want-error[pyright]; runs: annotations are not checked at run time
k2 = ax.contract(x, w, out=(Batch, Pos, Hidden)) + ax.zeros((5, 2, 3), Pos, Batch, Hidden)  # want-error: same axes in a different order; want-error[mypy,pyright]
k3 = ax.sum(ax.contract(x, w, out=(Batch, Pos, Hidden)), Embed)  # want-error: Embed is not an axis of the tensor; want-error[mypy,pyright]
k4 = ax.contract(x, w, out=(Batch, Pos, Hidden)) @ ax.zeros((8, 2), Embed, Batch)  # want-error: inner axes Hidden and Embed differ; want-error[mypy,pyright]
k5 = ax.contract(x, w, out=(Batch, Hidden))  # want-error[plugin]: out=(Batch, Hidden); miss[mypy,pyright]: whether out= is a permutation of the result's axes is set algebra

# a reduction over a tuple of axes, in any order
bph = ax.zeros((2, 5, 3), Batch, Pos, Hidden)
reveal_type(ax.sum(bph, (Pos, Batch)))  # want: Tensor[F32, Hidden]
reveal_type(ax.mean(bph, (Hidden, Batch, Pos)))  # want: Tensor[F32]
reveal_type(ax.logsumexp(bph, (Pos,)))  # want: Tensor[F32, Batch, Hidden]
reveal_type(ax.softmax(bph, (Hidden, Pos)))  # want: Tensor[F32, Batch, Pos, Hidden]
pooled: Tensor[F32, Batch] = ax.max(bph, (Hidden, Pos))  # ok
r1 = ax.sum(bph, (Pos, Embed))  # want-error[plugin]: Embed is not an axis of the tensor; miss[mypy,pyright]: no type tells a literal tuple from a computed one (tuple(x.axes)), whose catch-all takes it
r2 = ax.softmax(bph, (Embed, Pos))  # want-error[plugin]: Embed is not an axis of the tensor; miss[mypy,pyright]: as above
r3: Tensor[F32, Batch] = ax.sum(bph, (Batch, Pos))  # want-error[plugin]: Incompatible types in assignment; want-error[pyright]; miss[mypy]: mypy tries the next overload against the annotation, the catch-all; runs: annotations are not checked at run time
r4 = ax.var(bph, (Pos, Hidden)) + ax.zeros((5,), Pos)  # want-error: Cannot apply Add; want-error[mypy,pyright]
wide = ax.zeros((2, 5, 3, 8), Batch, Pos, Hidden, Embed)
reveal_type(ax.sum(wide, (Pos, Embed)))  # want[plugin]: Tensor[F32, Batch, Hidden]; want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]
r5 = ax.sum(wide, (Pos, Pos))  # want-error[plugin]: axis named twice; miss[mypy,pyright]: rank 4 is outside the tuples' window; raises: TypeError
some: Tensor[F32, *tuple[Any, ...]] = bph
reveal_type(ax.sum(some, (Pos, Batch)))  # show
reveal_type(ax.sum(bph, tuple(bph.axes)))  # want[mypy,pyright]: Tensor[F32, *tuple[Any, ...]]; show[plugin]

# left to the plugin: the dtype of a typed numpy array (an overload per numpy dtype would
# make every array of unknown type Any, axes included, in both checkers: the ambiguity rule)
floats: npt.NDArray[np.float32] = np.zeros((2, 5), dtype=np.float32)
reveal_type(ax.tensor(floats, Batch, Pos))  # want[plugin]: Tensor[F32, Batch, Pos]; want[mypy,pyright]: Tensor[Any, Batch, Pos]
t1 = ax.tensor(floats, Batch, Pos) + ax.zeros((2, 5), Batch, Pos, dtype=ax.I32)  # want-error[plugin]: dtypes F32 and I32 differ; miss[mypy,pyright]: the dtype of host data is the plugin's

# rearrange(out=): the result's axes are out='s (whether the pattern gives them stays the
# plugin's, which reads a literal pattern, and the run time's)
reveal_type(ax.rearrange(x, "Batch Pos Embed -> Batch Hidden=(Pos Embed)", Hidden, out=(Batch, Hidden)))  # want: Tensor[F32, Batch, Hidden]
reveal_type(ax.rearrange(x, "Batch Pos Embed -> Pos Batch Embed", out=(Pos, Batch, Embed)))  # want: Tensor[F32, Pos, Batch, Embed]
g0: Tensor[F32, Pos, Batch, Embed] = ax.rearrange(x, "Batch Pos Embed -> Pos Batch Embed", out=(Pos, Batch, Embed))  # ok
g1 = ax.rearrange(x, "Batch Pos Embed -> Pos Batch Embed", out=(Pos, Batch, Embed)) + x  # want-error: same axes in a different order; want-error[mypy,pyright]
g2: Tensor[F32, Batch, Pos, Embed] = ax.rearrange(x, "Batch Pos Embed -> Pos Batch Embed", out=(Pos, Batch, Embed))  # want-error: Incompatible types in assignment; want-error[mypy]; want-error[pyright]; runs: annotations are not checked at run time
g3 = ax.rearrange(x, "Batch Pos Embed -> Pos Batch Embed", out=(Batch, Pos, Embed))  # want-error[plugin]: out=(Batch, Pos, Embed) says the result's axes, but the pattern gives (Pos, Batch, Embed); miss[mypy,pyright]: a string's contents are no type

# left to the plugin: rearrange's result without out= (its axes are in the pattern string)
r6 = ax.rearrange(x, "Batch Pos Embed -> Pos Batch Embed") + x  # want-error[plugin]: same axes in a different order; miss[mypy,pyright]: a string's contents are no type

# left to the plugin: stack along an axis the tensors already have ("without Pos" is no type)
s1 = ax.stack([bph, bph], Pos)  # want-error[plugin]: Pos; miss[mypy,pyright]: PEP 646 cannot exclude an axis

unknown: Any = bph
reveal_type(ax.sum(unknown, (Pos, Batch)))  # show
