"""Axis provenance in the checker: after an axis error the plugin notes, for each Tensor
variable among the operands, its type and the line that gave it (test_typing.py reads the
notes: ``test_plugin_notes_where_each_operand_was_typed``)."""

from axes import H, W

import axjax as ax
from axjax import F32, Tensor


def to_hw(t: Tensor[F32, W, H]) -> Tensor[F32, H, W]:
    return ax.transpose(t, H, W)


wh = ax.zeros((2, 3), W, H)
hw = to_hw(wh)
ok = wh + ax.transpose(hw, W, H)
r1 = wh + hw  # want-error: Cannot apply Add to Tensor[F32, W, H] and Tensor[F32, H, W]: same axes in a different order
r2 = ax.softmax(wh, W) * hw  # want-error: Cannot apply Multiply to Tensor[F32, W, H] and Tensor[F32, H, W]: same axes in a different order
