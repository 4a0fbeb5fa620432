"""Types the new APIs lost (issue 44, class 2).

A square ``Linear(Model, Model)``'s weight is ``[Out[Model], Model]`` at run time; the
plugin types it so (the class declares ``[Out, In]``, which no generic can turn into a role
when ``In`` is ``Out``). The models are generic over their blocks (``GPT2[tuple[Block,
...]]``, ``GPT2[LayerStack[Block, Layer]]``, by ``unroll``): c19_models.py, c22_llama.py.
"""

from typing import final, reveal_type

import jax

import axjax as ax
from axjax import F32, Tensor


@final
class Batch(ax.Axis): ...


@final
class Model(ax.Axis): ...


@final
class Hidden(ax.Axis): ...


key = jax.random.key(0)
square = ax.nn.Linear(Model, Model, 4, 4, key=key)
reveal_type(square.weight)  # want[plugin]: Tensor[F32, Out[Model], Model]; want[mypy,pyright]: Tensor[F32, Model, Model]
w: Tensor[F32, ax.Out[Model], Model] = square.weight  # ok[plugin]; limit[mypy,pyright]: the field is declared [Out, In]
affine = ax.nn.Affine(Model, Model, 4, 4, key=key)
reveal_type(affine.weight)  # want[plugin]: Tensor[F32, Out[Model], Model]; want[mypy,pyright]: Tensor[F32, Model, Model]
wrong: Tensor[F32, Model, Model] = affine.weight  # want-error[plugin]: Incompatible types in assignment; miss[mypy,pyright]; runs: annotations are not checked at run time
wide = ax.nn.Linear(Model, Hidden, 4, 8, key=key)
reveal_type(wide.weight)  # want: Tensor[F32, Hidden, Model]
reveal_type(ax.zeros((4, 4), ax.Out[Model], Model))  # want[plugin]: Tensor[F32, Out[Model], Model]; show[mypy,pyright]
stack = ax.nn.LayerStack.init(lambda k: ax.nn.Linear(Model, Model, 4, 4, key=k), 2, key=key)
reveal_type(stack.layers.weight)  # want[plugin]: Tensor[F32, Layer, Out[Model], Model]; show[mypy,pyright]
