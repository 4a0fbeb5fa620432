"""The paper's Add: elementwise ops need identical axes, in the same order, and one dtype."""

from typing import reveal_type

from axes import A, B, H, W

import axjax as ax

a1 = ax.zeros((3,), A)
a2 = ax.ones((3,), A)
b1 = ax.zeros((3,), B)
wh = ax.zeros((2, 3), W, H)
hw = ax.zeros((3, 2), H, W)
s0 = ax.zeros(())
whi = ax.zeros((2, 3), W, H, dtype=ax.I32)

# operators
reveal_type(a1 + a2)  # want: Tensor[F32, A]
reveal_type(wh * wh - wh / wh)  # want: Tensor[F32, W, H]
r1 = a1 + b1  # want-error: Cannot apply Add to Tensor[F32, A] and Tensor[F32, B]: axes differ (elementwise ops need identical axes: use ax.broadcast, ax.transpose or ax.rename to line them up)
r2 = wh + hw  # want-error: Cannot apply Add to Tensor[F32, W, H] and Tensor[F32, H, W]: same axes in a different order (transpose one operand first)
r3 = a1 + wh  # want-error: axes differ
r4 = wh * hw  # want-error: Cannot apply Multiply to Tensor[F32, W, H] and Tensor[F32, H, W]: same axes in a different order
r5 = wh + whi  # want-error: Cannot apply Add to Tensor[F32, W, H] and Tensor[I32, W, H]: dtypes F32 and I32 differ (convert one operand with astype)
r6 = wh - hw  # want-error: Cannot apply Subtract
r7 = wh / hw  # want-error: Cannot apply Divide

# numbers and rank-0 tensors mix with anything
reveal_type(wh + 1.0)  # want: Tensor[F32, W, H]
reveal_type(2 * wh)  # want: Tensor[F32, W, H]
reveal_type(1.0 - wh)  # want: Tensor[F32, W, H]
reveal_type(wh * s0)  # want: Tensor[F32, W, H]
reveal_type(s0 * wh)  # want: Tensor[F32, W, H]
reveal_type(s0 + s0)  # want: Tensor[F32]
reveal_type(-wh)  # want: Tensor[F32, W, H]
r8 = whi * 0.5  # want-error[plugin]: Cannot apply Multiply to Tensor[I32, W, H]: the float 0.5 cannot mix with I32 values (convert the tensor with astype(ax.F32)); miss[mypy,pyright]

# comparisons give Bool
reveal_type(wh < 0.5)  # want: Tensor[Bool, W, H]
reveal_type(wh >= wh)  # want: Tensor[Bool, W, H]
r9 = wh < hw  # want-error: Cannot apply Less to Tensor[F32, W, H] and Tensor[F32, H, W]: same axes in a different order

# the same rules for the functions
reveal_type(ax.add(wh, wh))  # want: Tensor[F32, W, H]
reveal_type(ax.maximum(wh, 0.0))  # want: Tensor[F32, W, H]
reveal_type(ax.add(s0, wh))  # want: Tensor[F32, W, H]
reveal_type(ax.equal(wh, wh))  # want: Tensor[Bool, W, H]
f1 = ax.add(a1, b1)  # want-error: Cannot apply Add to Tensor[F32, A] and Tensor[F32, B]: axes differ
f2 = ax.multiply(wh, hw)  # want-error: Cannot apply Multiply to Tensor[F32, W, H] and Tensor[F32, H, W]: same axes in a different order
f3 = ax.subtract(wh, whi)  # want-error: dtypes F32 and I32 differ
reveal_type(ax.where(wh > 0, wh, 0.0))  # want: Tensor[F32, W, H]
f4 = ax.where(wh > 0, hw, 0.0)  # want-error: Cannot apply Where to Tensor[Bool, W, H] and Tensor[F32, H, W] and Tensor[F32]: the condition's axes differ from the values' axes

# unary math keeps the type; floating-point only where the op says so
reveal_type(ax.tanh(ax.sigmoid(wh)))  # want: Tensor[F32, W, H]
reveal_type(ax.relu(whi))  # want: Tensor[I32, W, H]
u1 = ax.exp(whi)  # want-error[plugin]: Cannot apply Exp to Tensor[I32, W, H]: Exp needs floating-point values, got I32 (convert with astype(ax.F32)); want-error[mypy,pyright]: DR

# plain assignability: a Tensor type is exact
x1: ax.Tensor[ax.F32, A] = b1  # want-error; runs: annotations are not checked at run time
x2: ax.Tensor[ax.F32, W, H] = hw  # want-error; runs: annotations are not checked at run time
x3: ax.Tensor[ax.F32, W, H] = wh  # ok
x4: ax.Tensor[ax.I32, W, H] = wh  # want-error; runs: annotations are not checked at run time
