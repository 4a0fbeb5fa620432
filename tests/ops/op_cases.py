"""The op table: one or more :class:`OpCase` per primitive, checked by ``test_op_table.py``.

Oracles are plain ``jax.numpy`` on the canonical axis order of each case's operands
(``A`` is dimension 0 of an operand declared ``(A, B, C)``, and so on).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import axjax as ax
from axjax.ops._shape import BroadcastLike

from .helpers import A, Arg, B, C, D, E, OpCase

AnyT = ax.Tensor[Any, *tuple[Any, ...]]


def _unary(op: str, fn: Any, oracle: Any, kind: str = "normal") -> OpCase:
    return OpCase(op, fn, oracle, (Arg((A, B, C), kind),), (A, B, C))


def _binary(
    op: str, fn: Any, oracle: Any, kinds: tuple[str, str] = ("normal", "normal"), **kw: Any
) -> OpCase:
    args = (Arg((A, B, C), kinds[0], "shared"), Arg((A, B, C), kinds[1], "shared"))
    return OpCase(op, fn, oracle, args, (A, B, C), **kw)


def _rotated(x: AnyT) -> tuple[type[ax.Axis], ...]:
    return x.axes[1:] + x.axes[:1]


def _checked(t: AnyT, axes: tuple[type[ax.Axis], ...]) -> AnyT:
    assert t.axes == axes, f"axes {t.axes}, expected {axes}"
    return t


UNARY = [
    _unary("Negative", ax.negative, jnp.negative),
    _unary("Abs", ax.abs, jnp.abs, "spaced"),
    _unary("Exp", ax.exp, jnp.exp),
    _unary("Log", ax.log, jnp.log, "positive"),
    _unary("Log1p", ax.log1p, jnp.log1p, "positive"),
    _unary("Expm1", ax.expm1, jnp.expm1),
    _unary("Sqrt", ax.sqrt, jnp.sqrt, "positive"),
    _unary("Rsqrt", ax.rsqrt, jax.lax.rsqrt, "positive"),
    _unary("Square", ax.square, jnp.square),
    _unary("Reciprocal", ax.reciprocal, jnp.reciprocal, "nonzero"),
    _unary("Tanh", ax.tanh, jnp.tanh),
    _unary("Sigmoid", ax.sigmoid, jax.nn.sigmoid),
    _unary("Relu", ax.relu, jax.nn.relu, "spaced"),
    _unary("Gelu", ax.gelu, jax.nn.gelu),
    _unary("Softplus", ax.softplus, jax.nn.softplus),
    _unary("Sin", ax.sin, jnp.sin),
    _unary("Cos", ax.cos, jnp.cos),
    _unary("Silu", ax.silu, jax.nn.silu),
    _unary("Erf", ax.erf, jax.scipy.special.erf),
    _unary("Negative", lambda x: -x, jnp.negative),
    _unary("Abs", abs, jnp.abs, "spaced"),
]

INTEGER_UNARY = [
    OpCase(op, fn, oracle, (Arg((A, B), "int", high=7),), (A, B), id=f"{op}-int")
    for op, fn, oracle in [
        ("Negative", ax.negative, jnp.negative),
        ("Abs", ax.abs, jnp.abs),
        ("Square", ax.square, jnp.square),
        ("Relu", ax.relu, jax.nn.relu),
    ]
]

BINARY = [
    _binary("Add", ax.add, jnp.add),
    _binary("Add", lambda a, b: a + b, jnp.add, id="Add-operator"),
    _binary("Subtract", lambda a, b: a - b, jnp.subtract),
    _binary("Multiply", lambda a, b: a * b, jnp.multiply),
    _binary("Divide", lambda a, b: a / b, jnp.divide, ("normal", "nonzero")),
    _binary("Power", lambda a, b: a**b, jnp.power, ("positive", "normal")),
    _binary("Maximum", ax.maximum, jnp.maximum, ("spaced", "spaced")),
    _binary("Minimum", ax.minimum, jnp.minimum, ("spaced", "spaced")),
]

# rank-0 Tensors and Python numbers mix with anything
SCALARS = [
    OpCase("Add", lambda x, s: x + s, jnp.add, (Arg((A, B)), Arg(())), (A, B), id="Add-rank0"),
    OpCase(
        "Multiply",
        lambda s, x: s * x,
        jnp.multiply,
        (Arg(()), Arg((A, B))),
        (A, B),
        id="Multiply-rank0-left",
    ),
    OpCase(
        "Subtract",
        lambda x: 2.5 - x,
        lambda x: 2.5 - x,
        (Arg((A, B)),),
        (A, B),
        id="Subtract-number-left",
    ),
    OpCase(
        "Divide",
        lambda x: 1.0 / x,
        lambda x: 1.0 / x,
        (Arg((A, B), "nonzero"),),
        (A, B),
        id="Divide-number-left",
    ),
    OpCase(
        "Power",
        lambda x: x**3.0,
        lambda x: x**3.0,
        (Arg((A, B)),),
        (A, B),
        id="Power-number-exponent",
    ),
    OpCase(
        "Power", lambda x: 2.0**x, lambda x: 2.0**x, (Arg((A, B)),), (A, B), id="Power-number-base"
    ),
    OpCase(
        "Maximum",
        lambda x: ax.maximum(x, 0.0),
        lambda x: jnp.maximum(x, 0.0),
        (Arg((A, B), "spaced"),),
        (A, B),
        id="Maximum-number",
    ),
    OpCase("Add", lambda s, t: s + t, jnp.add, (Arg(()), Arg(())), (), id="Add-both-rank0"),
    OpCase(
        "Add",
        lambda x: x + 3,
        lambda x: x + 3,
        (Arg((A, B), "int", high=9),),
        (A, B),
        id="Add-int-number",
    ),
    OpCase(
        "Multiply",
        lambda x, y: x * y,
        jnp.multiply,
        (Arg((A, B), "int", "shared"), Arg((A, B), "int", "shared")),
        (A, B),
        id="Multiply-int",
    ),
]

COMPARE = (
    [
        OpCase(
            op,
            fn,
            oracle,
            (Arg((A, B, C), "spaced", "shared"), Arg((A, B, C), "spaced", "shared")),
            (A, B, C),
            out_dtype=ax.Bool,
        )
        for op, fn, oracle in [
            ("Less", lambda a, b: a < b, jnp.less),
            ("LessEqual", lambda a, b: a <= b, jnp.less_equal),
            ("Greater", lambda a, b: a > b, jnp.greater),
            ("GreaterEqual", ax.greater_equal, jnp.greater_equal),
        ]
    ]
    + [
        OpCase(
            op,
            fn,
            oracle,
            (Arg((A, B), "int", "shared", 3), Arg((A, B), "int", "shared", 3)),
            (A, B),
            out_dtype=ax.Bool,
        )
        for op, fn, oracle in [
            ("Equal", ax.equal, jnp.equal),
            ("NotEqual", ax.not_equal, jnp.not_equal),
        ]
    ]
    + [
        OpCase(
            "Greater",
            lambda x: x > 0.0,
            lambda x: x > 0.0,
            (Arg((A, B), "spaced"),),
            (A, B),
            out_dtype=ax.Bool,
            id="Greater-number",
        ),
        OpCase(
            "Equal",
            lambda x, y: ax.equal(x, y),
            jnp.equal,
            (Arg((A,), "bool", "shared"), Arg((A,), "bool", "shared")),
            (A,),
            out_dtype=ax.Bool,
            id="Equal-bool",
        ),
    ]
)

SELECT_VALUES = [
    OpCase(
        "Where",
        ax.where,
        jnp.where,
        (
            Arg((A, B, C), "bool", "shared"),
            Arg((A, B, C), "normal", "shared"),
            Arg((A, B, C), "normal", "shared"),
        ),
        (A, B, C),
        out_dtype=ax.F32,
    ),
    OpCase(
        "Where",
        lambda c, x: ax.where(c, x, 0.0),
        lambda c, x: jnp.where(c, x, 0.0),
        (Arg((A, B), "bool", "shared"), Arg((A, B), "normal", "shared")),
        (A, B),
        out_dtype=ax.F32,
        id="Where-number",
    ),
    OpCase(
        "Where",
        ax.where,
        jnp.where,
        (Arg((A, B), "bool"), Arg(()), Arg(())),
        (A, B),
        out_dtype=ax.F32,
        id="Where-rank0-values",
    ),
    OpCase(
        "AsType",
        lambda x: ax.astype(x, ax.F16 if x.dtype is ax.F32 else ax.F32),
        lambda x: x.astype(jnp.float16),
        (Arg((A, B)),),
        (A, B),
        out_dtype=ax.F16,
        rtol=1e-3,
        fd_tol=3e-2,
    ),
    OpCase(
        "AsType",
        lambda x: x.astype(ax.I32),
        lambda x: x.astype(jnp.int32),
        (Arg((A, B)),),
        (A, B),
        out_dtype=ax.I32,
        id="AsType-to-int",
    ),
    OpCase(
        "AsType",
        lambda x: x.astype(ax.F32),
        lambda x: x.astype(jnp.float32),
        (Arg((A, B), "int"),),
        (A, B),
        out_dtype=ax.F32,
        id="AsType-from-int",
    ),
]

REDUCE = [
    OpCase("Sum", lambda x: ax.sum(x, A), lambda x: jnp.sum(x, 0), (Arg((A, B, C)),), (B, C)),
    OpCase(
        "Sum",
        lambda x: ax.sum(x, (C, A)),
        lambda x: jnp.sum(x, (0, 2)),
        (Arg((A, B, C)),),
        (B,),
        id="Sum-two-axes",
    ),
    OpCase("Sum", lambda x: ax.sum(x, (A, B)), jnp.sum, (Arg((A, B)),), (), id="Sum-all"),
    OpCase(
        "Sum",
        lambda x: ax.sum(x, B),
        lambda x: jnp.sum(x, 1),
        (Arg((A, B), "int"),),
        (A,),
        id="Sum-int",
    ),
    OpCase("Mean", lambda x: ax.mean(x, B), lambda x: jnp.mean(x, 1), (Arg((A, B, C)),), (A, C)),
    OpCase(
        "Max", lambda x: ax.max(x, A), lambda x: jnp.max(x, 0), (Arg((A, B, C), "spaced"),), (B, C)
    ),
    OpCase(
        "Min",
        lambda x: ax.min(x, (B, C)),
        lambda x: jnp.min(x, (1, 2)),
        (Arg((A, B, C), "spaced"),),
        (A,),
    ),
    OpCase(
        "Max",
        lambda x: ax.max(x, B),
        lambda x: jnp.max(x, 1),
        (Arg((A, B), "int"),),
        (A,),
        id="Max-int",
    ),
    OpCase(
        "LogSumExp",
        lambda x: ax.logsumexp(x, (A, C)),
        lambda x: jax.nn.logsumexp(x, (0, 2)),
        (Arg((A, B, C)),),
        (B,),
    ),
    OpCase("Var", lambda x: ax.var(x, C), lambda x: jnp.var(x, 2), (Arg((A, B, C)),), (A, B)),
    OpCase(
        "ArgMax",
        lambda x: ax.argmax(x, B),
        lambda x: jnp.argmax(x, 1),
        (Arg((A, B, C), "spaced"),),
        (A, C),
        out_dtype=ax.I32,
    ),
    OpCase(
        "Softmax",
        lambda x: ax.softmax(x, A),
        lambda x: jax.nn.softmax(x, 0),
        (Arg((A, B, C)),),
        (A, B, C),
    ),
    OpCase(
        "LogSoftmax",
        lambda x: ax.log_softmax(x, C),
        lambda x: jax.nn.log_softmax(x, 2),
        (Arg((A, B, C)),),
        (A, B, C),
    ),
    OpCase(
        "Softmax",
        lambda x: ax.softmax(x, (A, B)),
        lambda x: jax.nn.softmax(x, (0, 1)),
        (Arg((A, B)),),
        (A, B),
        id="Softmax-two-axes",
    ),
]

CONTRACT = [
    OpCase(
        "MatMul",
        ax.matmul,
        jnp.matmul,
        (Arg((A, B), order="fixed"), Arg((B, C), order="fixed")),
        (A, C),
    ),
    OpCase(
        "MatMul",
        lambda a, b: a @ b,
        jnp.matmul,
        (Arg((D, A, B), order="fixed"), Arg((D, B, C), order="fixed")),
        (D, A, C),
        id="MatMul-batched",
    ),
    OpCase(
        "MatMul",
        lambda a, b: a @ b,
        jnp.matmul,
        (Arg((D, E, A, B), order="fixed"), Arg((D, E, B, C), order="fixed")),
        (D, E, A, C),
        id="MatMul-two-batch-axes",
    ),
    OpCase(
        "Contract",
        ax.contract,
        lambda a, b: jnp.einsum("ab,bc->ac", a, b),
        (Arg((A, B)), Arg((B, C))),
        (A, C),
    ),
    OpCase(
        "Contract",
        ax.contract,
        lambda a, b: jnp.einsum("abc,cbd->ad", a, b),
        (Arg((A, B, C)), Arg((C, B, D))),
        (A, D),
        id="Contract-two-shared",
    ),
    OpCase(
        "Contract",
        lambda a, b: ax.contract(a, b, over=C),
        lambda a, b: jnp.einsum("abc,acd->abd", a, b),
        (Arg((A, B, C)), Arg((A, C, D))),
        (A, B, D),
        id="Contract-over-batched",
    ),
    OpCase(
        "Contract",
        ax.contract,
        lambda a, b: jnp.einsum("a,b->ab", a, b),
        (Arg((A,)), Arg((B,))),
        (A, B),
        id="Contract-outer",
    ),
    OpCase(
        "Contract",
        ax.contract,
        lambda a, b: jnp.einsum("ab,ab->", a, b),
        (Arg((A, B)), Arg((A, B))),
        (),
        id="Contract-full",
    ),
]

SHAPE = [
    OpCase(
        "ExpandDims",
        lambda x: ax.expand_dims(x, C, 1),
        lambda x: x[:, :, None],
        (Arg((A, B)),),
        (A, B, C),
    ),
    OpCase(
        "ExpandDims",
        lambda x: _checked(ax.expand_dims(x, C, -1), x.axes + (C,)),
        lambda x: x[:, :, None],
        (Arg((A, B)),),
        (A, B, C),
        id="ExpandDims-last",
    ),
    OpCase(
        "Squeeze",
        lambda x: ax.squeeze(x, B),
        lambda x: x[:, 0],
        (Arg((A, B, C)),),
        (A, C),
        sizes={B: 1},
    ),
    OpCase(
        "Transpose",
        lambda x: _checked(ax.transpose(x, *_rotated(x)), _rotated(x)),
        lambda x: x,
        (Arg((A, B, C)),),
        (A, B, C),
    ),
    OpCase("Rename", lambda x: ax.rename(x, A, D), lambda x: x, (Arg((A, B)),), (D, B)),
    OpCase(
        "Broadcast",
        ax.broadcast,
        lambda x, like: jnp.broadcast_to(x[None, :, None], like.shape),
        (Arg((B,)), Arg((A, B, C))),
        (A, B, C),
    ),
    OpCase(
        "Broadcast",
        lambda x, like: _checked(ax.broadcast(x, like), like.axes),
        lambda x, like: jnp.broadcast_to(x[:, :, None], like.shape),
        (Arg((A, B)), Arg((A, B, C))),
        (A, B, C),
        id="Broadcast-reorders",
    ),
    OpCase(
        "Broadcast",
        lambda x: ax.broadcast(x, (D, B), sizes={D: 2}),
        lambda x: jnp.broadcast_to(x[None], (2, x.shape[0])),
        (Arg((B,)),),
        (D, B),
        id="Broadcast-sizes",
    ),
    OpCase(
        "BroadcastLike",
        BroadcastLike(),
        lambda x, like: jnp.broadcast_to(x[:, :, None], like.shape),
        (Arg((A, B)), Arg((A, B, C))),
        (A, B, C),
    ),
    OpCase(
        "Tile", lambda x: ax.tile(x, B, 3), lambda x: jnp.tile(x, (1, 3)), (Arg((A, B)),), (A, B)
    ),
    OpCase(
        "Concat",
        lambda x, y: ax.concat([x, ax.rename(y, C, B)], B),
        lambda x, y: jnp.concatenate([x, y], 1),
        (Arg((A, B), order="shared"), Arg((A, C), order="shared")),
        (A, B),
    ),
    OpCase(
        "Concat",
        lambda x, y, z: ax.concat([x, y, z], A),
        lambda x, y, z: jnp.concatenate([x, y, z], 0),
        (Arg((A, B), order="shared"),) * 3,
        (A, B),
        id="Concat-three",
    ),
    OpCase(
        "Stack",
        lambda x, y: ax.stack([x, y], C, at=1),
        lambda x, y: jnp.stack([x, y], 2),
        (Arg((A, B), order="shared"), Arg((A, B), order="shared")),
        (A, B, C),
    ),
    # several results: each entry weighted differently through concat / stack
    OpCase(
        "Unstack",
        lambda x: ax.concat(list(ax.unstack(x, B)), A),
        lambda x: jnp.concatenate([x[:, k] for k in range(x.shape[1])], 0),
        (Arg((A, B, C)),),
        (A, C),
        sizes={B: 3},
    ),
    OpCase(
        "Unstack",
        lambda x: ax.stack(list(ax.unstack(x, C)), D),
        lambda x: jnp.moveaxis(x, 2, 0),
        (Arg((A, B, C)),),
        (D, A, B),
        id="Unstack-restack",
    ),
    OpCase(
        "Flatten",
        lambda x: ax.flatten(x, (C, A), D),
        lambda x: jnp.transpose(x, (2, 0, 1)).reshape(-1, x.shape[1]),
        (Arg((A, B, C)),),
        (D, B),
    ),
    OpCase(
        "Flatten",
        lambda x: ax.flatten(x, (A, B), D),
        lambda x: x.reshape(-1, x.shape[2]),
        (Arg((A, B, C), order="fixed"),),
        (D, C),
        id="Flatten-adjacent",
    ),
    OpCase(
        "Unflatten",
        lambda x: ax.unflatten(x, A, (C, D), (2, 3)),
        lambda x: x.reshape(2, 3, x.shape[1]),
        (Arg((A, B)),),
        (C, D, B),
        sizes={A: 6},
    ),
]

SELECT = [
    OpCase(
        "Index",
        lambda x: ax.index(x, A, 1),
        lambda x: x[1],
        (Arg((A, B, C)),),
        (B, C),
        sizes={A: 3},
    ),
    OpCase(
        "Index",
        lambda x: ax.index(x, B, -1),
        lambda x: x[:, -1],
        (Arg((A, B)),),
        (A,),
        id="Index-negative",
    ),
    OpCase(
        "Index",
        lambda x: ax.index(x, A, jnp.int32(1)),
        lambda x: x[1],
        (Arg((A, B)),),
        (B,),
        sizes={A: 2},
        id="Index-array-position",
    ),
    OpCase(
        "Slice",
        lambda x: ax.slice(x, B, 1, None, 2),
        lambda x: x[:, 1::2],
        (Arg((A, B)),),
        (A, B),
        sizes={B: 5},
    ),
    OpCase(
        "Slice",
        lambda x: ax.slice(x, A, None, -1),
        lambda x: x[:-1],
        (Arg((A, B)),),
        (A, B),
        sizes={A: 4},
        id="Slice-stop",
    ),
    OpCase(
        "Take",
        lambda x, i: ax.take(x, A, i),
        lambda x, i: jnp.take(x, i, 0),
        (Arg((A, B)), Arg((C, D), "index", high=A)),
        (C, D, B),
    ),
    OpCase(
        "Take",
        lambda x, i: ax.take(x, B, i),
        lambda x, i: jnp.take(x, i, 1),
        (Arg((A, B, E)), Arg((C,), "index", high=B)),
        (A, C, E),
        id="Take-middle",
    ),
    OpCase(
        "OneHot",
        lambda i: ax.one_hot(i, C, 4),
        lambda i: jax.nn.one_hot(i, 4),
        (Arg((A, B), "int", high=4),),
        (A, B, C),
        out_dtype=ax.F32,
    ),
]


def _conv_oracle(spec: tuple[str, str, str], padding: str = "SAME") -> Any:
    def oracle(x: Any, w: Any) -> Any:
        n = len(spec[0]) - 2
        return jax.lax.conv_general_dilated(x, w, (1,) * n, padding, dimension_numbers=spec)

    return oracle


def _pool_oracle(kind: str, dims: tuple[int, ...], window: int = 2) -> Any:
    def oracle(x: Any) -> Any:
        shape = tuple(window if i in dims else 1 for i in range(x.ndim))
        if kind == "max":
            return jax.lax.reduce_window(
                x, np.array(-np.inf, x.dtype), jax.lax.max, shape, (1,) * x.ndim, "VALID"
            )
        total = jax.lax.reduce_window(
            x, np.array(0, x.dtype), jax.lax.add, shape, (1,) * x.ndim, "VALID"
        )
        return total / window ** len(dims)

    return oracle


# convolution (Batch=A, Height=B, Width=E, Chan=C, Feature=D) and pooling
WINDOWED = [
    OpCase(
        "Conv",
        lambda x, w: ax.conv(x, w, B, padding="SAME"),
        _conv_oracle(("NWC", "OIW", "NWC")),
        (Arg((A, B, C)), Arg((D, C, B))),
        (A, B, D),
    ),
    OpCase(
        "Conv",
        lambda x, w: ax.conv(x, w, (B, E), padding="SAME"),
        _conv_oracle(("NHWC", "OIHW", "NHWC")),
        (Arg((A, B, E, C)), Arg((D, C, B, E))),
        (A, B, E, D),
        id="Conv-2d",
        sizes={A: 2, C: 2, D: 3},
    ),
    OpCase(
        "Conv",
        lambda x, w: ax.conv(x, w, B, padding="VALID"),
        _conv_oracle(("NWC", "OIW", "NWC"), "VALID"),
        (Arg((A, B, C)), Arg((D, C, B))),
        (A, B, D),
        id="Conv-valid",
    ),
    OpCase(
        "Pool",
        lambda x: ax.max_pool(x, B, window=2, stride=1),
        _pool_oracle("max", (1,)),
        (Arg((A, B, C), "spaced"),),
        (A, B, C),
        sizes={B: 4},
    ),
    OpCase(
        "Pool",
        lambda x: ax.avg_pool(x, (A, C), window=2, stride=1),
        _pool_oracle("avg", (0, 2)),
        (Arg((A, B, C)),),
        (A, B, C),
        sizes={A: 3, C: 4},
        id="Pool-avg-2d",
    ),
]


def _labels_like(x: AnyT, labels: AnyT, axis: type[ax.Axis]) -> AnyT:
    """The labels in the logits' order without ``axis`` (the loss wants that order)."""
    return ax.transpose(labels, *[a for a in x.axes if a is not axis])


def _softmax_xent(x: Any, labels: Any, p: int) -> Any:
    picked = jnp.take_along_axis(jax.nn.log_softmax(x, p), jnp.expand_dims(labels, p), p)
    return -jnp.squeeze(picked, p)


#: the losses of ``axjax.train`` (``register_op(..., namespace="axjax.train")``), checked by
#: ``tests/train/test_losses.py`` with the same helper (finite differences in float64)
LOSSES = [
    OpCase(
        "SoftmaxCrossEntropy",
        lambda x, i: ax.train.softmax_cross_entropy(x, _labels_like(x, i, B), B),
        lambda x, i: _softmax_xent(x, i, 1),
        (Arg((A, B, C)), Arg((A, C), "index", high=B)),
        (A, C),
    ),
    OpCase(
        "SoftmaxCrossEntropy",
        lambda x, i: ax.train.softmax_cross_entropy(x, i, A),
        lambda x, i: _softmax_xent(x, i, 0),
        (Arg((A, B), order="fixed"), Arg((B,), "index", high=A)),
        (B,),
        id="SoftmaxCrossEntropy-first-axis",
    ),
    OpCase(
        "LinearCrossEntropy",
        # chunks of 2 positions of B (size 2-5: padded when odd), the class axis D
        lambda h, w, i: ax.train.linear_cross_entropy(h, w, _labels_like(h, i, C), D, chunk=2),
        lambda h, w, i: _softmax_xent(jnp.einsum("abc,dc->abd", h, w), i, 2),
        (Arg((A, B, C)), Arg((D, C)), Arg((A, B), "index", high=D)),
        (A, B),
    ),
    OpCase(
        "LinearCrossEntropy",
        # the default chunk (one), the weight [over, class], one position axis
        lambda h, w, i: ax.train.linear_cross_entropy(h, w, i, A),
        lambda h, w, i: _softmax_xent(jnp.einsum("bc,ca->ba", h, w), i, 1),
        (Arg((B, C), order="fixed"), Arg((C, A), order="fixed"), Arg((B,), "index", high=A)),
        (B,),
        id="LinearCrossEntropy-one-chunk",
    ),
    OpCase(
        "BinaryCrossEntropy",
        ax.train.binary_cross_entropy,
        lambda x, t: -t * jax.nn.log_sigmoid(x) - (1 - t) * jax.nn.log_sigmoid(-x),
        (Arg((A, B, C), order="shared"), Arg((A, B, C), order="shared")),
        (A, B, C),
    ),
]

#: every case, in table order
CASES = (
    UNARY
    + INTEGER_UNARY
    + BINARY
    + SCALARS
    + COMPARE
    + SELECT_VALUES
    + REDUCE
    + CONTRACT
    + SHAPE
    + SELECT
    + WINDOWED
)
