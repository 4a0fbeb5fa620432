"""The attention path: which one a call takes (the einsums, or ``jax.nn.dot_product_attention``
with the XLA or cuDNN kernel), and why cuDNN flash attention cannot run a call.

Which path ``implementation="auto"`` takes is :func:`default_attention_path`: cuDNN flash
attention on an NVIDIA GPU when it can run the call (BF16/F16, head dim a multiple of 8 up
to 128, or 256 from compute capability 9.0; no dropout; no mask but key lengths and
causality, causal only with as many queries as keys), the einsum path otherwise. Never
``implementation=None``: JAX's default is its XLA attention, unfused (f32 logits and softmax
in memory), which measured slower than the einsum path on an H100 (the transformer step of
``benchmarks/transformer.py``: 64 ms against 55 ms); ``"fused"`` remains an explicit choice
that leaves the kernel to JAX. A kernel of ``jax.nn.dot_product_attention`` is a name in
:data:`AttentionPath`, what refuses it and its place in :func:`choose_path`: this module
alone (the fused op passes the name on).
"""

from __future__ import annotations

import warnings
from typing import Literal

import jax

from ..core import BF16, F16, AnyTensor, Axis, DType
from ..core._internal import optional_positive_int

__all__ = [
    "AttentionPath",
    "compute_capability",
    "cudnn_refusal",
    "default_attention_path",
]

#: ``"einsum"``: contractions and a softmax (has dropout); ``"xla"`` / ``"cudnn"``: the fused
#: ``jax.nn.dot_product_attention`` with that ``implementation``; ``"fused"``: fused, JAX
#: chooses (its XLA attention today); ``"auto"``: cuDNN where it can run the call, else the
#: einsums (:func:`default_attention_path`).
AttentionPath = Literal["auto", "einsum", "fused", "xla", "cudnn"]


def _backend() -> str:
    """``jax.default_backend()`` (one place, so that tests can pretend to be on a GPU)."""
    return jax.default_backend()


def compute_capability() -> str | None:
    """The CUDA compute capability of the first device (``"9.0"`` on an H100), or ``None``
    where it has none (a CPU, a TPU, a ROCm GPU).

    Example:
        >>> ax.nn.compute_capability()  # on a CPU
        None
    """
    cap = getattr(jax.devices()[0], "compute_capability", None)
    return None if cap is None else str(cap)


def _at_least(capability: str, major: int) -> bool:
    try:
        return int(capability.split(".")[0]) >= major
    except ValueError:
        return False


def cudnn_refusal(
    dtype: type[DType],
    head_dim: int | None,
    *,
    causal: bool = False,
    n_query: int | None = None,
    n_key: int | None = None,
    masked: bool = False,
    dropout: bool = False,
) -> tuple[str, str] | None:
    """Why cuDNN flash attention cannot run a call: ``(what prevents it, why)``, or ``None``
    when it can. ``what`` is the argument to change: ``"backend"``, ``"dtype"``,
    ``"head dim"``, ``"dropout"``, ``"mask"`` or ``"causal"``.

    The conditions are JAX's (``check_is_flash_attention``) and those under which the call
    needs no ``[B, N, T, S]`` tensor: a general mask goes into cuDNN as a bias of that size
    (padding belongs in ``key_lengths=``, causality in ``causal=``), and a causal call with
    fewer queries than keys is refused: cuDNN's causal flag aligns top-left, while
    :func:`axjax.nn.causal_mask` (and every other path) aligns lower-right.

    Example:
        >>> ax.nn.cudnn_refusal(ax.F32, 64)  # on a GPU
        ('dtype', 'the dtype is F32; cuDNN flash attention takes BF16 or F16 ...')
    """
    head_dim = optional_positive_int("cudnn_refusal", "head_dim", head_dim)
    n_query = optional_positive_int("cudnn_refusal", "n_query", n_query)
    n_key = optional_positive_int("cudnn_refusal", "n_key", n_key)
    backend = _backend()
    if backend != "gpu":
        return "backend", f"cuDNN runs on an NVIDIA GPU; the default backend is {backend}"
    cap = compute_capability()
    if cap is None:
        return "backend", "cuDNN runs on an NVIDIA GPU; this GPU has no CUDA compute capability"
    if dtype not in (BF16, F16):
        return "dtype", (
            f"the dtype is {dtype.__name__}; cuDNN flash attention takes BF16 or F16 "
            "(compute in BF16, e.g. with ax.nn.Policy.mixed(ax.BF16))"
        )
    limit = 256 if _at_least(cap, 9) else 128
    if head_dim is None:
        return "head dim", "the head dim is not known yet (an open size)"
    if head_dim % 8 or head_dim > limit:
        return "head dim", (
            f"the head dim is {head_dim}; cuDNN flash attention needs a multiple of 8 up to "
            f"{limit} on compute capability {cap}"
        )
    if dropout:
        return "dropout", "attention dropout is on; the fused call has none"
    if masked:
        return "mask", (
            "a general mask would go into cuDNN as a [batch, heads, queries, keys] tensor; "
            "give padding as key_lengths= and causality as causal="
        )
    if causal and (n_query is None or n_query != n_key):
        return "causal", (
            f"causal attention with {n_query} queries and {n_key} keys; cuDNN runs causal "
            "attention with as many queries as keys (its causal flag aligns top-left, "
            "ax.nn.causal_mask lower-right)"
        )
    return None


def default_attention_path(
    dtype: type[DType],
    head_dim: int | None,
    *,
    causal: bool = False,
    n_query: int | None = None,
    n_key: int | None = None,
    masked: bool = False,
    dropout: bool = False,
) -> Literal["einsum", "cudnn"]:
    """The path ``implementation="auto"`` takes for such a call: ``"cudnn"`` (flash
    attention) where :func:`cudnn_refusal` finds nothing against it, else ``"einsum"``.

    On a CPU the einsums are the faster path (``benchmarks/transformer.py``); on an H100 the
    einsum path also beat JAX's XLA attention, so ``"auto"`` never leaves the kernel to JAX.

    Example:
        >>> ax.nn.default_attention_path(ax.BF16, 64, causal=True, n_query=128, n_key=128)
        'cudnn'                     # on an NVIDIA GPU; 'einsum' on a CPU
    """
    refused = cudnn_refusal(
        dtype,
        head_dim,
        causal=causal,
        n_query=n_query,
        n_key=n_key,
        masked=masked,
        dropout=dropout,
    )
    return "einsum" if refused else "cudnn"


#: the reasons ``"auto"`` already warned about (once each per process)
_WARNED: set[str] = set()

#: reasons that say nothing about the call itself: no warning (an f32 model on a GPU, or any
#: model on a CPU, takes the einsum path as a matter of course)
_SILENT = ("backend", "dtype")


def warn_fallback(refusal: tuple[str, str]) -> None:
    """Warn, once per reason, that ``"auto"`` takes the einsum path on a GPU where cuDNN
    flash attention was to be expected (BF16/F16): the user can change that."""
    what, why = refusal
    if what in _SILENT or why.endswith("(an open size)") or what in _WARNED:
        return
    _WARNED.add(what)
    warnings.warn(
        f"attention implementation='auto' runs the einsum path instead of cuDNN flash "
        f"attention ({what}): {why}. Pass implementation='einsum' to choose it explicitly.",
        UserWarning,
        stacklevel=5,
    )


def choose_path(
    q: AnyTensor,
    k: AnyTensor,
    v: AnyTensor,
    over: type[Axis],
    key_pos: type[Axis],
    masked: bool,
    dropout: bool,
    causal: tuple[type[Axis], int] | None,
    implementation: AttentionPath,
    group: type[Axis] | None = None,
) -> str:
    """The path of one call: ``"einsum"``, or the fused call's ``implementation=``
    (``"xla"``, ``"cudnn"``, ``""`` for JAX's choice). ``"auto"`` warns once per reason when
    it falls back on a GPU; an explicit ``"cudnn"`` that cannot run raises. ``group``: the
    query's second heads axis (grouped-query attention), not a position axis."""
    if implementation == "einsum" or (dropout and implementation != "cudnn"):
        return "einsum"  # dropout: the fused call has none
    sizes = {**dict(zip(k.axes, k.shape, strict=True)), **dict(zip(q.axes, q.shape, strict=True))}
    refused = None
    if implementation in ("auto", "cudnn"):
        refused = cudnn_refusal(
            q.dtype,
            sizes.get(over),
            causal=causal is not None,
            n_query=causal[1] if causal is not None else None,
            n_key=sizes.get(key_pos),
            masked=masked,
            dropout=dropout,
        )
    if implementation == "cudnn":
        if refused is not None:
            what, why = refused
            raise ValueError(
                f"attention: implementation='cudnn' cannot run this call ({what}): {why} "
                "(implementation='auto' falls back to the einsum path)"
            )
        return "cudnn"
    if implementation != "auto":
        return "" if implementation == "fused" else implementation
    own = [a for a in q.axes if a not in k.axes and a != group]
    fits = set(v.axes) == set(k.axes) and over in v.axes and len(own) == 1
    if refused is None and not fits:
        refused = (
            "layout",
            "the value's axes are not the key's, or the query has several position axes of its own",
        )
    if refused is not None:
        warn_fallback(refused)
        return "einsum"
    return "cudnn"
