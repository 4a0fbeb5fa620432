"""The op-test helper: one primitive, checked four ways on random inputs.

An :class:`OpCase` describes a primitive by its operands (canonical axes and a value
domain), an axjax function of Tensors and a plain ``jax.numpy`` oracle written for the
canonical axis order. :func:`check_op` draws sizes (1-5), a storage order (permutation)
for each operand and values, then checks

a. the forward against the oracle (the result is compared by axis name, whatever its
   order), and that the result's dtype marker is the documented one;
b. the op's own backward (``jax.grad`` through the ``custom_vjp``) against ``jax.grad`` of
   the oracle;
c. that backward against finite differences (``jax.test_util.check_grads``, reverse mode,
   in float64);
d. that under ``ax.jax_autodiff()`` values and gradients agree, and ``jax.jvp`` and
   ``jax.hessian`` work and agree with the oracle's.

Integer and Bool results are compared exactly and must have a zero gradient.
"""

from __future__ import annotations

import contextlib
import string
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, final

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from jax.test_util import check_grads

import axjax as ax
from axjax.core import _op

Array = Any


# axis labels shared by the op tests (sizes are drawn per example)
@final
class A(ax.Axis): ...


@final
class B(ax.Axis): ...


@final
class C(ax.Axis): ...


@final
class D(ax.Axis): ...


@final
class E(ax.Axis): ...


ALL_AXES = (A, B, C, D, E)


@dataclass(frozen=True)
class Arg:
    """One operand: canonical axes, how values are drawn, and how its order may vary.

    ``kind``: ``normal``, ``positive`` (0.5-2), ``nonzero`` (|x| in 0.5-2), ``spaced``
    (all ``spaced`` values of a case distinct and away from 0: for max, relu, abs),
    ``int`` (0..high-1), ``index`` (0..size of the ``high`` axis - 1), ``bool``.
    ``order``: ``free`` (own random permutation), ``shared`` (one permutation for all
    shared operands), ``fixed`` (canonical order).
    """

    axes: tuple[type[ax.Axis], ...]
    kind: str = "normal"
    order: str = "free"
    high: Any = 5

    @property
    def floating(self) -> bool:
        return self.kind not in ("int", "index", "bool")


@dataclass(frozen=True)
class OpCase:
    """A primitive under test (``op`` is the ``Op`` subclass name it must apply)."""

    op: str
    fn: Callable[..., Any]
    oracle: Callable[..., Array]
    args: tuple[Arg, ...]
    out: tuple[type[ax.Axis], ...]
    out_dtype: type[ax.DType] | None = None  # default: the first operand's dtype
    sizes: dict[type[ax.Axis], int] = field(default_factory=dict)
    hessian: bool = True
    rtol: float = 1e-5
    fd_tol: float | None = None  # finite-difference tolerance (None: check_grads' default)
    id: str = ""

    @property
    def name(self) -> str:
        return self.id or self.op


# ----------------------------------------------------------------------------- drawing
@dataclass
class Drawn:
    sizes: dict[type[ax.Axis], int]
    perms: list[tuple[int, ...]]
    values: list[np.ndarray]  # canonical order, float64 / int32 / bool


def draw_inputs(case: OpCase, data: st.DataObject) -> Drawn:
    sizes = {a: data.draw(st.integers(1, 5), label=a.__name__) for a in ALL_AXES}
    sizes.update(case.sizes)
    shared: tuple[int, ...] | None = None
    perms = []
    for arg in case.args:
        n = len(arg.axes)
        if arg.order == "fixed" or n < 2:
            perm = tuple(range(n))
        elif arg.order == "shared":
            if shared is None:
                shared = tuple(data.draw(st.permutations(range(n)), label="shared order"))
            perm = shared
        else:
            perm = tuple(data.draw(st.permutations(range(n)), label="order"))
        perms.append(perm)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    shapes = [tuple(sizes[a] for a in arg.axes) for arg in case.args]
    spaced_total = sum(int(np.prod(s)) for s, arg in zip(shapes, case.args) if arg.kind == "spaced")
    # distinct values on a grid that avoids 0: away from every kink and tie
    grid = np.arange(-spaced_total, spaced_total) + 0.5
    step = 3.0 / max(spaced_total, 1)
    pool = iter(rng.choice(grid, size=spaced_total, replace=False) * step)
    values = []
    for shape, arg in zip(shapes, case.args):
        values.append(_values(rng, arg, shape, sizes, pool))
    return Drawn(sizes, perms, values)


def _values(
    rng: np.random.Generator,
    arg: Arg,
    shape: tuple[int, ...],
    sizes: dict[type[ax.Axis], int],
    pool: Iterator[float],
) -> np.ndarray:
    if arg.kind == "normal":
        return rng.normal(size=shape)
    if arg.kind == "positive":
        return rng.uniform(0.5, 2.0, size=shape)
    if arg.kind == "nonzero":
        return rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    if arg.kind == "spaced":
        return np.array([next(pool) for _ in range(int(np.prod(shape)))]).reshape(shape)
    if arg.kind == "int":
        return rng.integers(0, arg.high, size=shape).astype(np.int32)
    if arg.kind == "index":
        return rng.integers(0, sizes[arg.high], size=shape).astype(np.int32)
    if arg.kind == "bool":
        return rng.random(size=shape) < 0.5
    raise ValueError(arg.kind)


# ----------------------------------------------------------------------------- plumbing
@contextlib.contextmanager
def record_ops() -> Iterator[list[str]]:
    """Collect the class names of the ops applied inside the block."""
    seen: list[str] = []
    original = _op.apply

    def recording(op: ax.Op, xs: Sequence[Any]) -> Any:
        seen.append(type(op).__name__)
        return original(op, xs)

    _op.apply = recording
    try:
        yield seen
    finally:
        _op.apply = original


def _stored(case: OpCase, drawn: Drawn, float_dtype: Any) -> list[np.ndarray]:
    """Operand arrays in storage order (each transposed by its drawn permutation)."""
    out = []
    for arg, perm, v in zip(case.args, drawn.perms, drawn.values):
        v = np.transpose(v, perm)
        out.append(v.astype(float_dtype) if arg.floating else v)
    return out


def _axes(case: OpCase, drawn: Drawn) -> list[tuple[type[ax.Axis], ...]]:
    return [tuple(arg.axes[i] for i in perm) for arg, perm in zip(case.args, drawn.perms)]


def _canonical(case: OpCase, out: ax.Tensor[Any, *tuple[Any, ...]]) -> Array:
    assert isinstance(out, ax.Tensor), f"{case.name} returned {type(out).__name__}"
    assert len(set(out.axes)) == len(out.axes), f"{case.name}: an axis twice in {out.axes}"
    assert sorted(a.__name__ for a in out.axes) == sorted(a.__name__ for a in case.out), (
        f"{case.name}: result axes {out.axes}, expected a permutation of {case.out}"
    )
    return jnp.transpose(out.array, [out.axes.index(a) for a in case.out])


def make_functions(case: OpCase, drawn: Drawn) -> tuple[Callable[..., Array], Callable[..., Array]]:
    """``(axjax_fn, oracle_fn)`` on storage-order arrays, both returning canonical order."""
    axes = _axes(case, drawn)

    def ax_fn(*arrays: Array) -> Array:
        return _canonical(case, case.fn(*[ax.tensor(a, *x) for a, x in zip(arrays, axes)]))

    def oracle_fn(*arrays: Array) -> Array:
        canon = [jnp.transpose(a, np.argsort(p)) for a, p in zip(arrays, drawn.perms)]
        return case.oracle(*canon)

    return ax_fn, oracle_fn


def _float_argnums(case: OpCase) -> tuple[int, ...]:
    return tuple(i for i, arg in enumerate(case.args) if arg.floating)


def _loss(
    f: Callable[..., Array], args: list[Array], nums: tuple[int, ...], cot: Array
) -> Callable[..., Array]:
    """A scalar function of the float operands: ``sum(f(...) * cot)``."""

    def loss(*floats: Array) -> Array:
        full = list(args)
        for i, v in zip(nums, floats):
            full[i] = v
        y = f(*full)
        return jnp.sum(y.astype(cot.dtype) * cot)

    return loss


def _close(got: Array, want: Array, rtol: float, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if got.dtype.kind in "biu" or want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, err_msg=what)


# ----------------------------------------------------------------------------- the check
def check_op_once(case: OpCase, drawn: Drawn, hessian: bool = True) -> None:
    """Run checks (a)-(d) on one drawn input (``hessian=False`` skips the costly hessian).

    Everything but the finite differences runs inside one ``jax.jit`` (one compilation
    instead of one per primitive and shape, which is what makes eager checks slow). The
    ``ax.jax_autodiff()`` switch is read while tracing, so one trace holds both lowerings.
    """
    args = _stored(case, drawn, np.float32)
    ax_fn, oracle_fn = make_functions(case, drawn)
    axes = _axes(case, drawn)
    nums = _float_argnums(case)
    argnums = tuple(range(len(nums)))
    out_shape = jax.eval_shape(oracle_fn, *args)
    floating_out = bool(jnp.issubdtype(out_shape.dtype, jnp.inexact))
    hess = hessian and case.hessian and floating_out
    cot = jnp.asarray(np.random.default_rng(1).normal(size=out_shape.shape), jnp.float32)
    ax_loss = _loss(ax_fn, args, nums, cot)
    oracle_loss = _loss(oracle_fn, args, nums, cot)

    def everything(*full: Array) -> Any:
        # (a) the forward: the op is applied, the dtype marker is the documented one
        with record_ops() as seen:
            out = case.fn(*[ax.tensor(a, *x) for a, x in zip(full, axes)])
        assert case.op in seen, f"{case.name}: applied {seen}, not {case.op}"
        want = case.out_dtype or ax.tensor(full[0], *axes[0]).dtype
        assert out.dtype is want, f"{case.name}: dtype {out.dtype.__name__}, not {want.__name__}"
        results: dict[str, Any] = {"y": _canonical(case, out), "oracle": oracle_fn(*full)}
        if not nums:
            return results
        fl = [full[i] for i in nums]
        # (b) the op's own backward, and the oracle's (zero for Bool / integer results)
        results["grad"] = jax.grad(ax_loss, argnums)(*fl)
        results["grad_oracle"] = (
            jax.grad(oracle_loss, argnums)(*fl)
            if floating_out
            else tuple(jnp.zeros_like(f) for f in fl)
        )
        # (d) plain JAX autodiff: same values and gradients, and forward mode works
        tangents = tuple(jnp.ones_like(f) for f in fl)
        with ax.jax_autodiff():
            results["y_plain"] = ax_fn(*full)
            results["grad_plain"] = jax.grad(ax_loss, argnums)(*fl)
            results["jvp"] = jax.jvp(ax_loss, tuple(fl), tangents)[1]
            if hess:
                results["hessian"] = jax.hessian(ax_loss)(*fl)
        results["jvp_oracle"] = jax.jvp(oracle_loss, tuple(fl), tangents)[1]
        if hess:
            results["hessian_oracle"] = jax.hessian(oracle_loss)(*fl)
        return results

    r = jax.jit(everything)(*args)
    _close(r["y"], r["oracle"], case.rtol, f"{case.name} forward")
    if not nums:
        return
    for i, (g, h) in enumerate(zip(r["grad"], r["grad_oracle"])):
        _close(g, h, 1e-4, f"{case.name} backward of operand {nums[i]}")
    _close(r["y_plain"], r["y"], 0.0, f"{case.name} jax_autodiff forward")
    for i, (g, h) in enumerate(zip(r["grad_plain"], r["grad"])):
        _close(g, h, 1e-5, f"{case.name} jax_autodiff gradient of operand {nums[i]}")
    _close(r["jvp"], r["jvp_oracle"], 1e-4, f"{case.name} jvp")
    if hess:
        _close(r["hessian"], r["hessian_oracle"], 1e-3, f"{case.name} hessian")

    # (c) finite differences in float64 through the op's own backward
    if floating_out:
        with jax.enable_x64(True):
            args64 = _stored(case, drawn, np.float64)
            ax64, _ = make_functions(case, drawn)
            f64 = jax.jit(_loss(ax64, args64, nums, jnp.asarray(cot, jnp.float64)))
            check_grads(
                f64,
                [args64[i] for i in nums],
                order=1,
                modes=["rev"],
                atol=case.fd_tol,
                rtol=case.fd_tol,
            )


def check_op(case: OpCase, max_examples: int = 3) -> None:
    """Check ``case`` on ``max_examples`` random draws (sizes, orders, values).

    The hessian is compared on the second draw only (the first is usually the smallest:
    every size 1); it costs as much to compile as all the other checks together.
    """
    count = [0]

    # no shrinking: a failure reports the drawn sizes, orders and seed as they came
    @settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        phases=(Phase.explicit, Phase.generate),
    )
    @given(st.data())
    def run(data: st.DataObject) -> None:
        count[0] += 1
        check_op_once(case, draw_inputs(case, data), hessian=count[0] == 2)

    run()


def letters(axes: Sequence[type[ax.Axis]]) -> str:
    """Einsum letters for canonical axes (``A`` -> ``a``), for oracles."""
    return "".join(string.ascii_lowercase[ALL_AXES.index(a)] for a in axes)
