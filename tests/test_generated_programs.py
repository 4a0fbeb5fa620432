"""Property tests over generated programs: axjax against a plain ``jax.numpy`` twin.

A hypothesis strategy builds random programs over a fixed pool of axis labels (``A``..``E``),
sizes and dtypes (F32 mostly, some I32; Bool from
comparisons). Each axis label has one size in every program (A=2, B=3, C=4, D=2, E=3; 1
through ``expand_dims`` or a slice), so eagerly compiled primitives are reused across
examples: compiling, not running, is what costs here. A program is 1-3 input
tensors, then a chain of 2-6 ops applied to the current tensor (partners come from earlier
values, or are new leaves for ``@``, ``conv`` and some contractions). Every step records the
type the oracle tracks (axes as a list, sizes, dtype); the twin computes each step with
``jax.numpy`` (einsum letters for contractions, explicit windows for conv) in that order.

- Valid programs: the result's axes, dtype and values equal the twin's, and (float
  programs) ``jax.grad`` of the sum of the result matches ``jax.grad`` of the twin's, under
  ``jax.jit`` for about a tenth of the programs and eagerly for the rest.
- Invalid programs: a valid prefix, then exactly one mistaken step (wrong axis order, wrong
  inner axis for ``@``, an absent axis, a duplicate axis, a size or a dtype mismatch). It
  must raise ``ax.AxisError`` naming the failing op, at that step, eagerly, under
  ``jax.jit`` and under ``jax.eval_shape`` (trace time); nothing else may escape.

Profiles: ``programs-ci`` (the default, also when ``CI`` is set; derandomized, >= 1,000
programs) and ``programs-thorough`` (``HYPOTHESIS_PROFILE=thorough``; random, 10,000).
``AXJAX_PROGRAMS=N`` overrides the number of programs. The counts are printed at the end.
"""

from __future__ import annotations

import math
import operator
import os
import string
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import axjax as ax
from tests.ops.helpers import A, B, C, D, E  # the op tests' shared labels

AXES = (A, B, C, D, E)
NAMES = "ABCDE"
FIXED_SIZES = (2, 3, 4, 2, 3)  # one size per axis label, the same in every program
MAX_RANK = 3
CAP = {"f32": 1e3, "i32": 1e6}  # no op is generated whose result may exceed this magnitude
DTYPES = {"f32": ax.F32, "i32": ax.I32, "bool": ax.Bool}
NP_DTYPES = {"f32": np.float32, "i32": np.int32, "bool": np.bool_}

_SUPPRESS = list(HealthCheck)
settings.register_profile(
    "programs-ci",
    max_examples=1000,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=_SUPPRESS,
    print_blob=False,
)
settings.register_profile(
    "programs-thorough",
    max_examples=10_000,
    deadline=None,
    suppress_health_check=_SUPPRESS,
    print_blob=True,
)


def _profile() -> settings:
    thorough = os.environ.get("HYPOTHESIS_PROFILE", "") in ("thorough", "programs-thorough")
    base = settings.get_profile("programs-thorough" if thorough else "programs-ci")
    n = os.environ.get("AXJAX_PROGRAMS")
    return settings(base, max_examples=int(n)) if n else base


MIN_PROGRAMS = int(os.environ.get("AXJAX_PROGRAMS", "1000"))


# ----------------------------------------------------------------------------- types
@dataclass(frozen=True)
class T:
    """A value's type as the oracle tracks it, plus an interval bounding its entries."""

    axes: tuple[int, ...]
    shape: tuple[int, ...]
    dtype: str
    lo: float = -2.0
    hi: float = 2.0

    def size(self, a: int) -> int:
        return self.shape[self.axes.index(a)]

    @property
    def mag(self) -> float:
        return max(abs(self.lo), abs(self.hi))

    def __str__(self) -> str:
        inner = ", ".join(f"{NAMES[a]}={n}" for a, n in zip(self.axes, self.shape))
        return f"Tensor[{DTYPES[self.dtype].__name__}{', ' if inner else ''}{inner}]"


def _names(axes: Sequence[int]) -> str:
    return ", ".join(NAMES[a] for a in axes)


def _over(axes: tuple[int, ...]) -> str:
    return NAMES[axes[0]] if len(axes) == 1 else f"({_names(axes)})"


def _num(v: Any) -> str:
    return repr(v)


@dataclass(frozen=True)
class Step:
    """``t<i> = <kind>(t<ins>..., params)``; ``out`` is None for the mistaken step."""

    kind: str
    ins: tuple[int, ...]
    p: tuple[Any, ...]
    out: T | None

    def expr(self) -> str:
        k, p = self.kind, self.p
        x = [f"t{i}" for i in self.ins]
        if k == "input":
            return f"input({DTYPES[self.p[0]].__name__}, {_names(self.p[1])})"
        if k == "unary":
            return f"ax.{p[0]}({x[0]})"
        if k in ("binary", "compare"):
            op = p[0]
            if op in ("maximum", "minimum"):
                return f"ax.{op}({x[0]}, {x[1]})"
            return f"{x[0]} {SYMBOL[op]} {x[1] if len(x) > 1 else _num(p[1])}"
        if k == "scalar":
            op, v, side = p
            return (
                f"{x[0]} {SYMBOL[op]} {_num(v)}"
                if side == "right"
                else f"{_num(v)} {SYMBOL[op]} {x[0]}"
            )
        if k == "where":
            return f"ax.where({x[0]}, {x[1]}, {x[2] if len(x) > 2 else _num(p[0])})"
        if k == "astype":
            return f"{x[0]}.astype(ax.{DTYPES[p[0]].__name__})"
        if k == "matmul":
            return f"{x[0]} @ {x[1]}"
        if k == "contract":
            return (
                f"ax.contract({x[0]}, {x[1]})"
                if p[0] is None
                else f"ax.contract({x[0]}, {x[1]}, over={_over(p[0])})"
            )
        if k == "transpose":
            return f"ax.transpose({x[0]}{', ' if p[0] else ''}{_names(p[0])})"
        if k == "rename":
            return f"ax.rename({x[0]}, {NAMES[p[0]]}, {NAMES[p[1]]})"
        if k == "expand":
            return f"ax.expand_dims({x[0]}, {NAMES[p[0]]}, at={p[1]})"
        if k == "squeeze":
            return f"ax.squeeze({x[0]}, {NAMES[p[0]]})"
        if k == "broadcast":
            if p[0] == "like":
                return f"ax.broadcast({x[0]}, {x[1]})"
            sizes = ", ".join(f"{NAMES[a]}: {n}" for a, n in p[2])
            return f"ax.broadcast({x[0]}, ({_names(p[1])},), sizes={{{sizes}}})"
        if k in ("reduce", "softmax"):
            return f"ax.{p[0]}({x[0]}, {_over(p[1])})"
        if k == "conv":
            return f"ax.conv({x[0]}, {x[1]}, {NAMES[p[0]]}, padding={p[1]!r})"
        if k == "pool":
            return f"ax.{p[0]}({x[0]}, {NAMES[p[1]]}, window={p[2]}, stride={p[3]})"
        if k == "slice":
            return f"ax.slice({x[0]}, {NAMES[p[0]]}, {p[1]}, {p[2]}, {p[3]})"
        if k == "index":
            return f"ax.index({x[0]}, {NAMES[p[0]]}, {p[1]})"
        raise AssertionError(k)


@dataclass(frozen=True)
class Program:
    dtype: str
    steps: tuple[Step, ...]
    seed: int
    mode: str  # "eager" / "jit" (valid); "eager" / "jit" / "eval_shape" (invalid)
    mistake: tuple[str, str] | None  # (kind of mistake, op name the error must give)

    def __repr__(self) -> str:
        head = (
            f"Program({self.dtype}, mode={self.mode}, seed={self.seed}"
            + (
                f", mistake={self.mistake[0]} -> AxisError from {self.mistake[1]}"
                if self.mistake
                else ""
            )
            + "):"
        )
        lines = [head]
        for i, s in enumerate(self.steps):
            note = str(s.out) if s.out is not None else "<- the mistake"
            lines.append(f"    t{i} = {s.expr():<48} # {note}")
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # hypothesis prints the repr
        p.text(repr(self))

    def leaves(self) -> list[np.ndarray]:
        rng = np.random.default_rng(self.seed)
        out = []
        for s in self.steps:
            if s.kind == "input":
                shape = s.p[2]
                if s.p[0] == "f32":
                    out.append(rng.uniform(-2.0, 2.0, size=shape).astype(np.float32))
                else:
                    out.append(rng.integers(-3, 4, size=shape).astype(np.int32))
        return out


# ----------------------------------------------------------------------------- op tables
SYMBOL = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "gt": ">",
    "lt": "<",
    "ge": ">=",
    "le": "<=",
}
PY_OP: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "gt": operator.gt,
    "lt": operator.lt,
    "ge": operator.ge,
    "le": operator.le,
    "maximum": ax.maximum,
    "minimum": ax.minimum,
}
JNP_OP: dict[str, Callable[[Any, Any], Any]] = {
    "add": jnp.add,
    "sub": jnp.subtract,
    "mul": jnp.multiply,
    "div": jnp.divide,
    "gt": jnp.greater,
    "lt": jnp.less,
    "ge": jnp.greater_equal,
    "le": jnp.less_equal,
    "maximum": jnp.maximum,
    "minimum": jnp.minimum,
}
OP_NAME = {
    "add": "Add",
    "sub": "Subtract",
    "mul": "Multiply",
    "div": "Divide",
    "maximum": "Maximum",
    "minimum": "Minimum",
    "gt": "Greater",
    "lt": "Less",
    "ge": "GreaterEqual",
    "le": "LessEqual",
}


def _sig(v: float) -> float:
    return 0.5 * (1.0 + math.tanh(0.5 * v))


def _softplus(v: float) -> float:
    return max(v, 0.0) + math.log1p(math.exp(-abs(v)))


def _mono(f: Callable[[float], float]) -> Callable[[float, float], tuple[float, float]]:
    return lambda lo, hi: (f(lo), f(hi))


def _even(f: Callable[[float], float]) -> Callable[[float, float], tuple[float, float]]:
    return lambda lo, hi: (0.0 if lo <= 0 <= hi else min(f(lo), f(hi)), max(f(lo), f(hi)))


_ALWAYS = (-math.inf, math.inf)
#: name -> (jnp twin, interval of the result, allowed input interval (lo >= , hi <=))
UNARY: dict[
    str,
    tuple[Callable[[Any], Any], Callable[[float, float], tuple[float, float]], tuple[float, float]],
] = {
    "negative": (jnp.negative, lambda lo, hi: (-hi, -lo), _ALWAYS),
    "abs": (jnp.abs, _even(abs), _ALWAYS),
    "square": (jnp.square, _even(lambda v: v * v), _ALWAYS),
    "relu": (jax.nn.relu, lambda lo, hi: (max(lo, 0.0), max(hi, 0.0)), _ALWAYS),
    "exp": (jnp.exp, _mono(math.exp), (-math.inf, 5.0)),
    "expm1": (jnp.expm1, _mono(math.expm1), (-math.inf, 5.0)),
    "tanh": (jnp.tanh, _mono(math.tanh), _ALWAYS),
    "sigmoid": (jax.nn.sigmoid, _mono(_sig), _ALWAYS),
    "softplus": (jax.nn.softplus, _mono(_softplus), _ALWAYS),
    "silu": (
        jax.nn.silu,
        lambda lo, hi: (-0.28 if lo < 0 else lo * _sig(lo), max(hi, 0.0)),
        _ALWAYS,
    ),
    "gelu": (jax.nn.gelu, lambda lo, hi: (-0.17 if lo < 0 else 0.0, max(hi, 0.0)), _ALWAYS),
    "sin": (jnp.sin, lambda lo, hi: (-1.0, 1.0), _ALWAYS),
    "cos": (jnp.cos, lambda lo, hi: (-1.0, 1.0), _ALWAYS),
    "erf": (jax.scipy.special.erf, _mono(math.erf), _ALWAYS),
    "log": (jnp.log, _mono(math.log), (0.25, math.inf)),
    "log1p": (jnp.log1p, _mono(math.log1p), (-0.5, math.inf)),
    "sqrt": (jnp.sqrt, _mono(math.sqrt), (0.25, math.inf)),
    "rsqrt": (jax.lax.rsqrt, lambda lo, hi: (hi**-0.5, lo**-0.5), (0.25, math.inf)),
    "reciprocal": (jnp.reciprocal, lambda lo, hi: (1 / hi, 1 / lo), (0.25, math.inf)),
}
INT_UNARY = ("negative", "abs", "square", "relu")


def _prod(a: T, b: T) -> tuple[float, float]:
    c = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
    return min(c), max(c)


def _binary_interval(op: str, a: T, b: T) -> tuple[float, float] | None:
    if op == "add":
        return a.lo + b.lo, a.hi + b.hi
    if op == "sub":
        return a.lo - b.hi, a.hi - b.lo
    if op == "mul":
        return _prod(a, b)
    if op == "div":
        if b.lo >= 0.25 or b.hi <= -0.25:
            return _prod(a, T((), (), "f32", 1 / b.hi, 1 / b.lo))
        return None
    if op == "maximum":
        return max(a.lo, b.lo), max(a.hi, b.hi)
    return min(a.lo, b.lo), min(a.hi, b.hi)


def _letters(axes: Sequence[int]) -> str:
    return "".join(string.ascii_lowercase[a] for a in axes)


# ----------------------------------------------------------------------------- generation
class Gen:
    """Builds one program step by step, tracking each value's type."""

    def __init__(self, draw: Any, dtype: str, sizes: tuple[int, ...]) -> None:
        self.draw, self.dtype, self.sizes = draw, dtype, sizes
        self.steps: list[Step] = []

    # helpers
    def pick(self, seq: Sequence[Any]) -> Any:
        return self.draw(st.sampled_from(list(seq)))

    def perm(self, seq: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(self.draw(st.permutations(list(seq))))

    def ty(self, i: int) -> T:
        out = self.steps[i].out
        assert out is not None
        return out

    def emit(self, kind: str, ins: Sequence[int], p: Sequence[Any], out: T | None) -> int:
        self.steps.append(Step(kind, tuple(ins), tuple(p), out))
        return len(self.steps) - 1

    def fits(self, lo: float, hi: float, dtype: str | None = None) -> bool:
        return max(abs(lo), abs(hi)) <= CAP[dtype or self.dtype]

    def leaf(self, axes: Sequence[int], shape: Sequence[int], dtype: str | None = None) -> int:
        dtype = dtype or self.dtype
        lo, hi = (-2.0, 2.0) if dtype == "f32" else (-3.0, 3.0)
        return self.emit(
            "input",
            (),
            (dtype, tuple(axes), tuple(shape)),
            T(tuple(axes), tuple(shape), dtype, lo, hi),
        )

    def fresh_leaf(self) -> int:
        r = self.draw(st.integers(1, 3))
        axes = self.perm(range(5))[:r]
        return self.leaf(axes, [self.sizes[a] for a in axes])

    def same(self, t: T, u: T) -> bool:
        return (
            sorted(t.axes) == sorted(u.axes)
            and u.dtype == t.dtype
            and all(u.size(a) == t.size(a) for a in t.axes)
        )

    def aligned(self, c: int, pred: Callable[[T], bool] = lambda u: True) -> int:
        """A value with ``c``'s axes, sizes and order: an earlier one transposed or
        broadcast to it, or ``c`` itself."""
        t = self.ty(c)
        cands: list[tuple[str, int]] = [("self", c)]
        for i, s in enumerate(self.steps):
            u = s.out
            if u is None or i == c or u.dtype != t.dtype or not pred(u):
                continue
            if self.same(t, u):
                cands.append(("same", i))
            elif set(u.axes) < set(t.axes) and all(u.size(a) == t.size(a) for a in u.axes):
                cands.append(("bcast", i))
        how, i = self.pick(cands)
        u = self.ty(i)
        if how == "self" or u.axes == t.axes:
            return i
        if how == "same":
            return self.emit("transpose", (i,), (t.axes,), T(t.axes, t.shape, u.dtype, u.lo, u.hi))
        if self.draw(st.booleans()):
            return self.emit(
                "broadcast", (i, c), ("like",), T(t.axes, t.shape, u.dtype, u.lo, u.hi)
            )
        new = tuple((a, t.size(a)) for a in t.axes if a not in u.axes)
        return self.emit(
            "broadcast", (i,), ("sizes", t.axes, new), T(t.axes, t.shape, u.dtype, u.lo, u.hi)
        )

    # ------------------------------------------------------------------ valid ops
    def ops_for(self, c: int) -> list[str]:
        t = self.ty(c)
        r, fl = len(t.axes), t.dtype == "f32"
        free = [a for a in range(5) if a not in t.axes]
        big = [a for a, n in zip(t.axes, t.shape) if n >= 2]
        ops = ["unary", "scalar", "binary", "where", "contract"]
        if r >= 2:
            ops += ["transpose", "matmul"]
        if r >= 1:
            ops += ["rename", "reduce", "index"]
        if r < MAX_RANK and free:
            ops += ["expand", "broadcast"]
        if 1 in t.shape:
            ops += ["squeeze", "squeeze"]
        if big:
            ops.append("slice")
        if fl and r >= 1:
            ops.append("softmax")
        if fl and big:
            ops.append("pool")
            if r >= 2:
                ops += ["conv"]
        return ops

    def op(self, c: int, name: str) -> int | None:
        t = self.ty(c)
        r, fl = len(t.axes), t.dtype == "f32"
        free = [a for a in range(5) if a not in t.axes]
        if name == "unary":
            cands = []
            for f in UNARY if fl else INT_UNARY:
                _, iv, (lo_ok, hi_ok) = UNARY[f]
                if t.lo >= lo_ok and t.hi <= hi_ok and self.fits(*iv(t.lo, t.hi)):
                    cands.append(f)
            f = self.pick(cands)
            lo, hi = UNARY[f][1](t.lo, t.hi)
            return self.emit("unary", (c,), (f,), T(t.axes, t.shape, t.dtype, lo, hi))
        if name == "scalar":
            op = self.pick(["add", "sub", "mul", "div"] if fl else ["add", "sub", "mul"])
            v = self.pick([0.5, 2.0, -1.5] if fl else [2, -1, 3])
            side = self.pick(["right", "left"])
            if op == "div" and side == "left" and not (t.lo >= 0.25 or t.hi <= -0.25):
                side = "right"
            k = T((), (), t.dtype, v, v)
            iv = _binary_interval(op, t, k) if side == "right" else _binary_interval(op, k, t)
            if iv is None or not self.fits(*iv):
                return None
            return self.emit("scalar", (c,), (op, v, side), T(t.axes, t.shape, t.dtype, *iv))
        if name == "binary":
            op = self.pick(
                ["add", "sub", "mul", "div", "maximum", "minimum"]
                if fl
                else ["add", "sub", "mul", "maximum"]
            )
            pred = (lambda u: u.lo >= 0.25 or u.hi <= -0.25) if op == "div" else (lambda u: True)
            if (
                op == "div"
                and not pred(t)
                and not any(
                    s.out is not None and pred(s.out) and self.same(t, s.out) for s in self.steps
                )
            ):
                return None
            if op == "mul" and t.mag**2 > CAP[self.dtype]:
                return None
            u = self.aligned(c, pred)
            iv = _binary_interval(op, t, self.ty(u))
            if iv is None or not self.fits(*iv):
                return None
            return self.emit("binary", (c, u), (op,), T(t.axes, t.shape, t.dtype, *iv))
        if name == "where":
            op = self.pick(["gt", "lt", "ge", "le"])
            if self.draw(st.booleans()):
                u = self.aligned(c)
                cond = self.emit("compare", (c, u), (op,), T(t.axes, t.shape, "bool", 0, 1))
                ut = self.ty(u)
                return self.emit(
                    "where",
                    (cond, c, u),
                    (),
                    T(t.axes, t.shape, t.dtype, min(t.lo, ut.lo), max(t.hi, ut.hi)),
                )
            v = self.pick([0.0, 0.5] if fl else [0, 1])
            cond = self.emit("compare", (c,), (op, v), T(t.axes, t.shape, "bool", 0, 1))
            w = self.pick([0.0, -1.0] if fl else [0, -1])
            return self.emit(
                "where", (cond, c), (w,), T(t.axes, t.shape, t.dtype, min(t.lo, w), max(t.hi, w))
            )
        if name == "contract":
            if self.draw(st.integers(0, 3)) == 0:
                u = self.fresh_leaf()
            else:
                u = self.pick(
                    [
                        i
                        for i, s in enumerate(self.steps)
                        if s.out is not None and s.out.dtype == t.dtype
                    ]
                )
            ut = self.ty(u)
            shared = [a for a in t.axes if a in ut.axes]
            if any(t.size(a) != ut.size(a) for a in shared):
                return None
            over: tuple[int, ...] | None = None
            if shared and self.draw(st.booleans()):
                k = self.draw(st.integers(1, len(shared)))
                over = self.perm(shared)[:k]
            summed = shared if over is None else list(over)
            out = tuple(a for a in t.axes if a not in summed) + tuple(
                a for a in ut.axes if a not in t.axes
            )
            if len(out) > MAX_RANK:
                return None
            n = math.prod(t.size(a) for a in summed)
            lo, hi = _prod(t, ut)
            lo, hi = n * min(lo, 0.0) if n > 1 else lo, n * max(hi, 0.0) if n > 1 else hi
            if not self.fits(lo, hi):
                return None
            shape = tuple(t.size(a) if a in t.axes else ut.size(a) for a in out)
            return self.emit("contract", (c, u), (over,), T(out, shape, t.dtype, lo, hi))
        if name == "matmul":
            k_axis = self.pick(free) if free else None
            if k_axis is None or t.mag * 2 * t.shape[-1] > CAP[self.dtype]:
                return None
            w_axes = t.axes[:-2] + (t.axes[-1], k_axis)
            w = self.leaf(w_axes, t.shape[:-2] + (t.shape[-1], self.sizes[k_axis]))
            n = t.shape[-1]
            lo, hi = _prod(t, self.ty(w))
            out = t.axes[:-1] + (k_axis,)
            return self.emit(
                "matmul",
                (c, w),
                (),
                T(out, t.shape[:-1] + (self.sizes[k_axis],), t.dtype, n * lo, n * hi),
            )
        if name == "transpose":
            order = self.perm(t.axes)
            return self.emit(
                "transpose",
                (c,),
                (order,),
                T(order, tuple(t.size(a) for a in order), t.dtype, t.lo, t.hi),
            )
        if name == "rename":
            old, new = self.pick(t.axes), self.pick(free) if free else None
            if new is None:
                return None
            axes = tuple(new if a == old else a for a in t.axes)
            return self.emit("rename", (c,), (old, new), T(axes, t.shape, t.dtype, t.lo, t.hi))
        if name == "expand":
            a = self.pick(free)
            at = self.pick(list(range(r + 1)) + [-1])
            pos = r if at == -1 else at
            return self.emit(
                "expand",
                (c,),
                (a, at),
                T(
                    t.axes[:pos] + (a,) + t.axes[pos:],
                    t.shape[:pos] + (1,) + t.shape[pos:],
                    t.dtype,
                    t.lo,
                    t.hi,
                ),
            )
        if name == "squeeze":
            a = self.pick([a for a, n in zip(t.axes, t.shape) if n == 1])
            p = t.axes.index(a)
            return self.emit(
                "squeeze",
                (c,),
                (a,),
                T(
                    t.axes[:p] + t.axes[p + 1 :],
                    t.shape[:p] + t.shape[p + 1 :],
                    t.dtype,
                    t.lo,
                    t.hi,
                ),
            )
        if name == "broadcast":
            k = self.draw(st.integers(1, min(2, MAX_RANK - r, len(free))))
            new = self.perm(free)[:k]
            target = self.perm(t.axes + new)
            shape = tuple(t.size(a) if a in t.axes else self.sizes[a] for a in target)
            out = T(target, shape, t.dtype, t.lo, t.hi)
            likes = [
                i
                for i, s in enumerate(self.steps)
                if s.out is not None
                and s.out.axes
                and set(s.out.axes) == set(target)
                and all(s.out.size(a) == t.size(a) for a in t.axes)
            ]
            if likes and self.draw(st.booleans()):
                like = self.pick(likes)
                lt = self.ty(like)
                return self.emit(
                    "broadcast", (c, like), ("like",), T(lt.axes, lt.shape, t.dtype, t.lo, t.hi)
                )
            return self.emit(
                "broadcast", (c,), ("sizes", target, tuple((a, self.sizes[a]) for a in new)), out
            )
        if name in ("reduce", "softmax"):
            fn = self.pick(
                (["sum", "mean", "max", "min", "logsumexp"] if fl else ["sum", "max", "min"])
                if name == "reduce"
                else ["softmax", "log_softmax"]
            )
            k = self.draw(st.integers(1, min(2, r)))
            over = self.perm(t.axes)[:k]
            n = math.prod(t.size(a) for a in over)
            if name == "softmax":
                lo, hi = (0.0, 1.0) if fn == "softmax" else (t.lo - t.hi - math.log(n), 0.0)
                return self.emit("softmax", (c,), (fn, over), T(t.axes, t.shape, t.dtype, lo, hi))
            lo, hi = {"sum": (n * t.lo, n * t.hi), "logsumexp": (t.lo, t.hi + math.log(n))}.get(
                fn, (t.lo, t.hi)
            )
            if not self.fits(lo, hi):
                return None
            keep = tuple(a for a in t.axes if a not in over)
            return self.emit(
                "reduce", (c,), (fn, over), T(keep, tuple(t.size(a) for a in keep), t.dtype, lo, hi)
            )
        if name == "index":
            a = self.pick(t.axes)
            n, p = t.size(a), t.axes.index(a)
            i = self.draw(st.integers(-n, n - 1))
            return self.emit(
                "index",
                (c,),
                (a, i),
                T(
                    t.axes[:p] + t.axes[p + 1 :],
                    t.shape[:p] + t.shape[p + 1 :],
                    t.dtype,
                    t.lo,
                    t.hi,
                ),
            )
        if name == "slice":
            a = self.pick([a for a, n in zip(t.axes, t.shape) if n >= 2])
            n = t.size(a)
            combos = [
                (s0, s1, s2)
                for s0 in (None, 0, 1, -2)
                for s1 in (None, -1, 2, 3)
                for s2 in (1, 2)
                if len(range(*slice(s0, s1, s2).indices(n))) >= 1
            ]
            s0, s1, s2 = self.pick(combos)
            m = len(range(*slice(s0, s1, s2).indices(n)))
            shape = tuple(m if b == a else k for b, k in zip(t.axes, t.shape))
            return self.emit("slice", (c,), (a, s0, s1, s2), T(t.axes, shape, t.dtype, t.lo, t.hi))
        if name == "pool":
            a = self.pick([a for a, n in zip(t.axes, t.shape) if n >= 2])
            kind, stride = self.pick(["max_pool", "avg_pool"]), self.pick([1, 2])
            m = (t.size(a) - 2) // stride + 1
            shape = tuple(m if b == a else k for b, k in zip(t.axes, t.shape))
            return self.emit(
                "pool", (c,), (kind, a, 2, stride), T(t.axes, shape, t.dtype, t.lo, t.hi)
            )
        if name == "conv":
            if not free:
                return None
            s_ax = self.pick([a for a, n in zip(t.axes, t.shape) if n >= 2])
            cin = self.pick([a for a in t.axes if a != s_ax])
            cout = self.pick(free)
            n = t.size(s_ax)
            k = self.draw(st.integers(1, 3))
            pad = self.pick(["SAME", "VALID"]) if k <= n else "SAME"
            terms = k * t.size(cin)
            lo, hi = terms * -2.0 * t.mag, terms * 2.0 * t.mag
            if not self.fits(lo, hi):
                return None
            w_axes = self.perm((s_ax, cin, cout))
            sz = {s_ax: k, cin: t.size(cin), cout: self.sizes[cout]}
            w = self.leaf(w_axes, [sz[a] for a in w_axes])
            m = n if pad == "SAME" else n - k + 1
            axes = tuple(cout if a == cin else a for a in t.axes)
            shape = tuple(
                self.sizes[cout] if a == cin else m if a == s_ax else t.size(a) for a in t.axes
            )
            return self.emit("conv", (c, w), (s_ax, pad), T(axes, shape, t.dtype, lo, hi))
        raise AssertionError(name)

    # ------------------------------------------------------------------ mistakes
    def mistakes_for(self, c: int) -> list[str]:
        t = self.ty(c)
        r = len(t.axes)
        free = [a for a in range(5) if a not in t.axes]
        ms = ["dtype"]
        if free:
            ms += ["missing", "missing"]
        if r >= 2:
            ms += ["order", "matmul-inner", "duplicate"]
        elif r == 1:
            ms += ["duplicate"]
        if any(n >= 2 for n in t.shape):
            ms += ["size"]
        return ms

    def mistake(self, c: int, kind: str) -> str:
        """Emit the mistaken step (last); return the op name its AxisError must give."""
        t = self.ty(c)
        r, fl = len(t.axes), t.dtype == "f32"
        free = [a for a in range(5) if a not in t.axes]
        bin_ops = ["add", "sub", "mul", "div", "maximum"] if fl else ["add", "sub", "mul"]
        if kind == "order":
            order = self.perm(t.axes)
            if order == t.axes:
                order = order[::-1]
            u = self.emit(
                "transpose",
                (c,),
                (order,),
                T(order, tuple(t.size(a) for a in order), t.dtype, t.lo, t.hi),
            )
            op = self.pick(bin_ops)
            self.emit("binary", (c, u) if self.draw(st.booleans()) else (u, c), (op,), None)
            return OP_NAME[op]
        if kind == "matmul-inner":
            bs, j = t.axes[:-2], t.axes[-1]
            j2 = self.pick([a for a in range(5) if a not in bs and a != j])
            k = self.pick([a for a in range(5) if a not in bs and a != j2])
            w = self.leaf(bs + (j2, k), t.shape[:-2] + (self.sizes[j2], self.sizes[k]))
            self.emit("matmul", (c, w), (), None)
            return "MatMul"
        if kind == "missing":
            x = self.pick(free)
            what = self.pick(
                [
                    "sum",
                    "max",
                    "min",
                    "squeeze",
                    "transpose",
                    "index",
                    "slice",
                    "rename",
                    "contract",
                ]
                + (
                    ["mean", "logsumexp", "softmax", "log_softmax", "max_pool", "conv"]
                    if fl
                    else []
                )
            )
            if what in ("sum", "max", "min", "mean", "logsumexp", "softmax", "log_softmax"):
                over = (x,)
                if r >= 1 and self.draw(st.booleans()):
                    over = self.perm((x, self.pick(t.axes)))
                self.emit("softmax" if "softmax" in what else "reduce", (c,), (what, over), None)
                return {
                    "sum": "Sum",
                    "max": "Max",
                    "min": "Min",
                    "mean": "Mean",
                    "logsumexp": "LogSumExp",
                    "softmax": "Softmax",
                    "log_softmax": "LogSoftmax",
                }[what]
            if what == "squeeze":
                self.emit("squeeze", (c,), (x,), None)
                return "Squeeze"
            if what == "transpose":
                order = list(self.perm(t.axes)) or [x]
                order[self.draw(st.integers(0, len(order) - 1))] = x
                self.emit("transpose", (c,), (tuple(order),), None)
                return "Transpose"
            if what == "index":
                self.emit("index", (c,), (x, 0), None)
                return "Index"
            if what == "slice":
                self.emit("slice", (c,), (x, 0, 1, 1), None)
                return "Slice"
            if what == "rename":
                self.emit("rename", (c,), (x, self.pick(range(5))), None)
                return "Rename"
            if what == "contract":
                self.emit("contract", (c, c), ((x,),), None)
                return "Contract"
            if what == "max_pool":
                self.emit("pool", (c,), ("max_pool", x, 2, 1), None)
                return "MaxPool"
            # conv over an absent spatial axis: the kernel itself is well formed
            if r == 0 or len(free) < 2:
                self.emit("reduce", (c,), ("sum", (x,)), None)
                return "Sum"
            cin = self.pick(t.axes)
            cout = self.pick([a for a in free if a != x])
            w_axes = self.perm((x, cin, cout))
            sz = {x: 2, cin: t.size(cin), cout: self.sizes[cout]}
            w = self.leaf(w_axes, [sz[a] for a in w_axes])
            self.emit("conv", (c, w), (x, "SAME"), None)
            return "Conv"
        if kind == "duplicate":
            what = self.pick(["rename", "expand"] + (["matmul"] if r >= 2 else []))
            if what == "rename" and r >= 2:
                old = self.pick(t.axes)
                self.emit("rename", (c,), (old, self.pick([a for a in t.axes if a != old])), None)
                return "Rename"
            if what == "matmul":
                # (*B, I, J) @ (*B, J, I): the result would have I twice
                w_axes = t.axes[:-2] + (t.axes[-1], t.axes[-2])
                w = self.leaf(w_axes, t.shape[:-2] + (t.shape[-1], t.shape[-2]))
                self.emit("matmul", (c, w), (), None)
                return "MatMul"
            self.emit("expand", (c,), (self.pick(t.axes), self.pick(range(r + 1))), None)
            return "ExpandDims"
        if kind == "size":
            a = self.pick([a for a, n in zip(t.axes, t.shape) if n >= 2])
            n = t.size(a)
            what = self.pick(
                ["binary", "contract", "squeeze", "index"]
                + (["matmul"] if r >= 2 and a == t.axes[-1] else [])
            )
            if what == "squeeze":
                self.emit("squeeze", (c,), (a,), None)
                return "Squeeze"
            if what == "index":
                self.emit("index", (c,), (a, self.pick([n, -n - 1])), None)
                return "Index"
            if what == "matmul":
                k = self.pick([b for b in range(5) if b not in t.axes])
                w = self.leaf(t.axes[:-2] + (a, k), t.shape[:-2] + (n + 1, self.sizes[k]))
                self.emit("matmul", (c, w), (), None)
                return "MatMul"
            shape = tuple(1 if b == a else k for b, k in zip(t.axes, t.shape))
            u = self.emit("slice", (c,), (a, 0, 1, 1), T(t.axes, shape, t.dtype, t.lo, t.hi))
            if what == "contract":
                over = None if self.draw(st.booleans()) else (a,)
                self.emit("contract", (c, u) if self.draw(st.booleans()) else (u, c), (over,), None)
                return "Contract"
            op = self.pick(bin_ops)
            self.emit("binary", (c, u) if self.draw(st.booleans()) else (u, c), (op,), None)
            return OP_NAME[op]
        if kind == "dtype":
            if fl:
                what = self.pick(["binary", "where", "matmul"] if r >= 2 else ["binary", "where"])
                if what == "binary":
                    u = self.emit("astype", (c,), ("i32",), T(t.axes, t.shape, "i32", t.lo, t.hi))
                    op = self.pick(["add", "sub", "mul", "maximum"])
                    self.emit("binary", (c, u) if self.draw(st.booleans()) else (u, c), (op,), None)
                    return OP_NAME[op]
                if what == "where":  # a float condition
                    self.emit("where", (c, c, c), (), None)
                    return "Where"
                k = self.pick([b for b in range(5) if b not in t.axes])
                w = self.leaf(
                    t.axes[:-2] + (t.axes[-1], k),
                    t.shape[:-2] + (t.shape[-1], self.sizes[k]),
                    dtype="i32",
                )
                self.emit("matmul", (c, w), (), None)
                return "MatMul"
            what = self.pick(
                ["exp", "tanh", "log", "div", "mean", "softmax", "max_pool"]
                if r >= 1
                else ["exp", "tanh", "log", "div"]
            )
            if what in ("exp", "tanh", "log"):
                self.emit("unary", (c,), (what,), None)
                return {"exp": "Exp", "tanh": "Tanh", "log": "Log"}[what]
            if what == "div":
                self.emit("binary", (c, c), ("div",), None)
                return "Divide"
            if what == "max_pool":
                self.emit("pool", (c,), ("max_pool", t.axes[0], 1, 1), None)
                return "MaxPool"
            self.emit("reduce" if what == "mean" else "softmax", (c,), (what, (t.axes[0],)), None)
            return "Mean" if what == "mean" else "Softmax"
        raise AssertionError(kind)


@st.composite
def programs(draw: Any) -> Program:
    dtype = draw(st.sampled_from(["f32"] * 6 + ["i32"]))
    sizes = FIXED_SIZES
    g = Gen(draw, dtype, sizes)
    for _ in range(draw(st.integers(1, 3))):
        r = draw(st.integers(0, 3) if _ else st.integers(1, 3))
        axes = g.perm(range(5))[:r]
        g.leaf(axes, [sizes[a] for a in axes])
    invalid = draw(st.integers(0, 4)) < 3  # 60 %: mistakes are cheap (no compiling)
    n_ops = draw(st.integers(1, 5) if invalid else st.integers(2, 6))
    current = draw(st.integers(0, len(g.steps) - 1))
    for _ in range(n_ops):
        name = g.pick(g.ops_for(current))
        out = g.op(current, name)
        if out is None:  # over the magnitude cap (or no partner): a bounded op instead
            out = g.op(current, "unary") if dtype == "f32" else None
            if out is None:
                t = g.ty(current)
                out = g.emit(
                    "unary", (current,), ("negative",), T(t.axes, t.shape, t.dtype, -t.hi, -t.lo)
                )
        current = out
    mistake = None
    if invalid:
        kind = g.pick(g.mistakes_for(current))
        mistake = (kind, g.mistake(current, kind))
        mode = draw(st.sampled_from(["eager", "jit", "jit", "eval_shape", "eval_shape"]))
    else:
        mode = draw(st.sampled_from(["eager", "eager", "eager", "jit"]))
    seed = draw(st.integers(0, 2**16))
    return Program(dtype, tuple(g.steps), seed, mode, mistake)


# ----------------------------------------------------------------------------- interpreters
def _ax(axes: Sequence[int]) -> tuple[type[ax.Axis], ...]:
    return tuple(AXES[a] for a in axes)


def _over_arg(axes: tuple[int, ...]) -> Any:
    return AXES[axes[0]] if len(axes) == 1 else _ax(axes)


def ax_step(s: Step, xs: list[Any], leaf: Any) -> Any:
    """Apply one step with axjax."""
    k, p = s.kind, s.p
    if k == "input":
        return ax.tensor(leaf, *_ax(p[1]))
    if k == "unary":
        return getattr(ax, p[0])(xs[0])
    if k in ("binary", "compare"):
        return PY_OP[p[0]](xs[0], xs[1] if len(xs) > 1 else p[1])
    if k == "scalar":
        op, v, side = p
        return PY_OP[op](xs[0], v) if side == "right" else PY_OP[op](v, xs[0])
    if k == "where":
        return ax.where(xs[0], xs[1], xs[2] if len(xs) > 2 else p[0])
    if k == "astype":
        return xs[0].astype(DTYPES[p[0]])
    if k == "matmul":
        return xs[0] @ xs[1]
    if k == "contract":
        return (
            ax.contract(xs[0], xs[1])
            if p[0] is None
            else ax.contract(xs[0], xs[1], over=_over_arg(p[0]))
        )
    if k == "transpose":
        return ax.transpose(xs[0], *_ax(p[0]))
    if k == "rename":
        return ax.rename(xs[0], AXES[p[0]], AXES[p[1]])
    if k == "expand":
        return ax.expand_dims(xs[0], AXES[p[0]], p[1])
    if k == "squeeze":
        return ax.squeeze(xs[0], AXES[p[0]])
    if k == "broadcast":
        if p[0] == "like":
            return ax.broadcast(xs[0], xs[1])
        return ax.broadcast(xs[0], _ax(p[1]), sizes={AXES[a]: n for a, n in p[2]})
    if k in ("reduce", "softmax"):
        return getattr(ax, p[0])(xs[0], _over_arg(p[1]))
    if k == "conv":
        return ax.conv(xs[0], xs[1], AXES[p[0]], padding=p[1])
    if k == "pool":
        return getattr(ax, p[0])(xs[0], AXES[p[1]], window=p[2], stride=p[3])
    if k == "slice":
        return ax.slice(xs[0], AXES[p[0]], p[1], p[2], p[3])
    if k == "index":
        return ax.index(xs[0], AXES[p[0]], p[1])
    raise AssertionError(k)


def run_axjax(prog: Program, arrays: Sequence[Any], at: list[int] | None = None) -> Any:
    vals: list[Any] = []
    leaves = iter(arrays)
    for i, s in enumerate(prog.steps):
        if at is not None:
            at[0] = i
        vals.append(
            ax_step(s, [vals[j] for j in s.ins], next(leaves) if s.kind == "input" else None)
        )
    return vals[-1]


def twin_step(s: Step, xs: list[Any], ts: list[T], leaf: Any) -> Any:
    """The same step in plain jax.numpy, laid out in the oracle's tracked order."""
    k, p = s.kind, s.p
    assert s.out is not None
    out = s.out
    if k == "input":
        return jnp.asarray(leaf)
    if k == "unary":
        return UNARY[p[0]][0](xs[0])
    if k in ("binary", "compare"):
        return JNP_OP[p[0]](xs[0], xs[1] if len(xs) > 1 else p[1])
    if k == "scalar":
        op, v, side = p
        return JNP_OP[op](xs[0], v) if side == "right" else JNP_OP[op](v, xs[0])
    if k == "where":
        return jnp.where(xs[0], xs[1], xs[2] if len(xs) > 2 else p[0])
    if k == "astype":
        return xs[0].astype(NP_DTYPES[p[0]])
    if k in ("matmul", "contract"):
        spec = f"{_letters(ts[0].axes)},{_letters(ts[1].axes)}->{_letters(out.axes)}"
        return jnp.einsum(spec, xs[0], xs[1])
    if k == "transpose":
        return jnp.transpose(xs[0], [ts[0].axes.index(a) for a in out.axes])
    if k == "rename":
        return xs[0]
    if k == "expand":
        return jnp.expand_dims(xs[0], out.axes.index(p[0]))
    if k == "squeeze":
        return jnp.squeeze(xs[0], ts[0].axes.index(p[0]))
    if k == "broadcast":
        src = ts[0].axes
        x = jnp.transpose(xs[0], [src.index(a) for a in out.axes if a in src])
        x = x.reshape([n if a in src else 1 for a, n in zip(out.axes, out.shape)])
        return jnp.broadcast_to(x, out.shape)
    if k == "reduce":
        pos = tuple(ts[0].axes.index(a) for a in p[1])
        fn = {
            "sum": jnp.sum,
            "mean": jnp.mean,
            "max": jnp.max,
            "min": jnp.min,
            "logsumexp": jax.nn.logsumexp,
        }[p[0]]
        return fn(xs[0], axis=pos)
    if k == "softmax":
        pos = tuple(ts[0].axes.index(a) for a in p[1])
        return (jax.nn.softmax if p[0] == "softmax" else jax.nn.log_softmax)(xs[0], axis=pos)
    if k == "conv":
        # explicit windows: y[..., s, o] = sum_j sum_c xpad[..., s + j, c] w[j, c, o]
        s_ax, pad = p
        tx, tw = ts
        cin = next(a for a in tw.axes if a in tx.axes and a != s_ax)
        cout = next(a for a in tw.axes if a not in tx.axes)
        batch = [a for a in tx.axes if a not in (s_ax, cin)]
        x = jnp.transpose(xs[0], [tx.axes.index(a) for a in batch + [s_ax, cin]])
        w = jnp.transpose(xs[1], [tw.axes.index(a) for a in (s_ax, cin, cout)])
        kk = w.shape[0]
        lo = (kk - 1) // 2 if pad == "SAME" else 0
        hi = (kk - 1) - lo if pad == "SAME" else 0
        x = jnp.pad(x, [(0, 0)] * len(batch) + [(lo, hi), (0, 0)])
        m = x.shape[-2] - kk + 1
        y = sum(jnp.einsum("...sc,co->...so", x[..., j : j + m, :], w[j]) for j in range(kk))
        cur = batch + [s_ax, cout]
        return jnp.transpose(y, [cur.index(a) for a in out.axes])
    if k == "pool":
        kind, s_ax, window, stride = p
        pos = ts[0].axes.index(s_ax)
        x = xs[0]
        if kind == "max_pool":  # the same reduce_window (its gradient picks one of tied maxima)
            dims = [window if i == pos else 1 for i in range(x.ndim)]
            strides = [stride if i == pos else 1 for i in range(x.ndim)]
            return jax.lax.reduce_window(
                x, np.array(-np.inf, x.dtype), jax.lax.max, dims, strides, "VALID"
            )
        m = out.shape[pos]
        parts = [
            jax.lax.slice_in_dim(x, j, j + (m - 1) * stride + 1, stride, pos) for j in range(window)
        ]
        return sum(parts) / window
    if k == "slice":
        pos = ts[0].axes.index(p[0])
        return xs[0][(slice(None),) * pos + (slice(p[1], p[2], p[3]),)]
    if k == "index":
        pos = ts[0].axes.index(p[0])
        return xs[0][(slice(None),) * pos + (p[1],)]
    raise AssertionError(k)


def run_twin(prog: Program, arrays: Sequence[Any]) -> Any:
    vals: list[Any] = []
    leaves = iter(arrays)
    for s in prog.steps:
        ts = [prog.steps[j].out for j in s.ins]
        vals.append(
            twin_step(
                s,
                [vals[j] for j in s.ins],
                ts,  # type: ignore[arg-type]
                next(leaves) if s.kind == "input" else None,
            )
        )
    return vals[-1]


# ----------------------------------------------------------------------------- checks
def _close(got: Any, want: Any, rtol: float, atol: float, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def check_valid(prog: Program, stats: Counter[str]) -> None:
    arrays = [jnp.asarray(a) for a in prog.leaves()]
    out = prog.steps[-1].out
    assert out is not None
    floats = prog.dtype == "f32"
    argnums = tuple(range(len(arrays)))

    def loss(*a: Any) -> Any:
        return jnp.sum(run_axjax(prog, a).array)

    def twin_loss(*a: Any) -> Any:
        return jnp.sum(run_twin(prog, a))

    def both(*a: Any) -> Any:
        return run_axjax(prog, a), (jax.grad(loss, argnums)(*a) if floats else ())

    def twin(*a: Any) -> Any:
        return run_twin(prog, a), (jax.grad(twin_loss, argnums)(*a) if floats else ())

    y, grads = jax.jit(both)(*arrays) if prog.mode == "jit" else both(*arrays)
    assert isinstance(y, ax.Tensor), f"the program returned {type(y).__name__}"
    want_axes = _ax(out.axes)
    assert y.axes == want_axes, f"result axes {y.axes}, the oracle tracked {want_axes}"
    assert y.dtype is DTYPES[out.dtype], f"dtype {y.dtype.__name__}, expected {out.dtype}"
    # the oracle as one compiled program: eagerly, its gradient compiled each jnp call's
    # linearised pieces apart (half the file's time); axjax's own path stays as drawn
    want, want_grads = jax.jit(twin)(*arrays)
    scale = max([1.0] + [s.out.mag for s in prog.steps if s.out is not None])
    _close(y.array, want, 1e-5, 1e-5 * scale, "forward")
    if floats:
        for i, (g, h) in enumerate(zip(grads, want_grads)):
            gs = max(1.0, float(np.max(np.abs(np.asarray(h)), initial=0.0)))
            _close(g, h, 1e-4, 1e-4 * gs, f"gradient of leaf {i}")
        stats["gradients checked"] += 1
    stats[f"valid ({prog.mode})"] += 1


def check_invalid(prog: Program, stats: Counter[str]) -> None:
    assert prog.mistake is not None
    kind, name = prog.mistake
    arrays = [jnp.asarray(a) for a in prog.leaves()]
    at = [-1]

    def f(*a: Any) -> Any:
        return run_axjax(prog, a, at)

    runner = {"eager": f, "jit": jax.jit(f), "eval_shape": lambda *a: jax.eval_shape(f, *a)}
    try:
        result = runner[prog.mode](*arrays)
    except ax.AxisError as e:
        msg = str(e)
        assert at[0] == len(prog.steps) - 1, (
            f"AxisError at step t{at[0]}, not at the mistake t{len(prog.steps) - 1}: {msg}"
        )
        assert name in msg, f"the AxisError does not name {name}: {msg}"
    else:
        raise AssertionError(f"no AxisError: the mistake gave {result!r}")
    stats[f"mistake: {kind}"] += 1
    stats[f"mistake op: {name}"] += 1


def check_program(prog: Program, stats: Counter[str]) -> None:
    stats["programs"] += 1
    for s in prog.steps:
        stats[
            f"op: {s.kind}"
            + (
                f" {s.p[0]}"
                if s.kind in ("unary", "binary", "reduce", "softmax", "pool", "scalar", "compare")
                else ""
            )
        ] += 1
    if prog.mistake is None:
        check_valid(prog, stats)
    else:
        check_invalid(prog, stats)


# ----------------------------------------------------------------------------- the tests
KNOWN_BUGS: list[tuple[Program, str]] = []  # (program, reason): xfail(strict=True) cases


def test_generated_programs(record_property: Callable[[str, object], None]) -> None:
    stats: Counter[str] = Counter()

    @_profile()
    @given(programs())
    def run(prog: Program) -> None:
        check_program(prog, stats)

    # the programs are small: compiling them is what costs, and the suite compiles with
    # little effort (tests/conftest.py)
    run()
    valid = sum(v for k, v in stats.items() if k.startswith("valid"))
    mistakes = sum(v for k, v in stats.items() if k.startswith("mistake:"))
    ops = sorted((k[4:], v) for k, v in stats.items() if k.startswith("op: "))
    # printed at the end of the run (tests/conftest.py), from a worker of pytest-xdist too
    record_property(
        "summary",
        f"generated programs: {stats['programs']} run, {valid} valid "
        f"({stats['valid (jit)']} under jit, {stats['valid (eager)']} eager; "
        f"{stats['gradients checked']} with gradients), {mistakes} with an injected "
        "mistake ("
        + ", ".join(f"{k[9:]}: {v}" for k, v in sorted(stats.items()) if k.startswith("mistake:"))
        + ")\nops applied: "
        + ", ".join(f"{k} {v}" for k, v in ops),
    )
    assert stats["programs"] >= MIN_PROGRAMS
    assert mistakes >= MIN_PROGRAMS // 4 and valid >= MIN_PROGRAMS // 4


@pytest.mark.parametrize(
    "prog",
    [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=r)) for p, r in KNOWN_BUGS]
    or [None],
)
def test_known_library_bugs(prog: Program | None) -> None:
    """Generated programs that reproduce a library bug (none known: this case passes)."""
    if prog is not None:
        check_program(prog, Counter())
