"""GPT-2 on named axes, and its Hugging Face checkpoint table.

Token and learned position embeddings, pre-norm blocks ``x + attn(ln_1(x))`` then
``x + mlp(ln_2(x))`` (``gelu_new``: GELU's tanh approximation), a final norm and the LM
head tied to the token embedding. Every tensor names its axes: ids ``[*B, Pos]``, logits
``[*B, Pos, Vocab]``, the attention projections ``[Head, HeadDim, Embed]``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Generic, Literal, TypeVarTuple, cast, final, overload

import equinox as eqx
import jax
import numpy as np
from typing_extensions import TypeVar

from ..core import F32, I32, AnyTensor, Axis, Floating, KeyOf, Tensor
from ..core._internal import checks_choices, public_method
from ..nn import (
    Affine,
    AttentionPath,
    Embedding,
    Head,
    HeadDim,
    KVCache,
    Layer,
    LayerNorm,
    LayerStack,
    MultiheadAttention,
)
from ..nn.init import normal
from ..ops import arange, astype, broadcast, contract, gelu
from ._blocks import (
    Blocks,
    Caches,
    cache_lengths,
    check_ids,
    init_caches,
    make_blocks,
    run_blocks,
    run_cached,
)
from ._hf import (
    ConversionError,
    Entry,
    Table,
    load_model,
    read_config,
    save_weights,
    write_config,
)

__all__ = [
    "GPT2",
    "TABLE",
    "Block",
    "Ctx",
    "Embed",
    "GPT2Config",
    "KPos",
    "Mlp",
    "Pos",
    "QKV",
    "Vocab",
    "from_hf",
    "to_hf",
]

B = TypeVarTuple("B")


@final
class Vocab(Axis):
    """The token vocabulary (the logits' last axis)."""


@final
class Embed(Axis):
    """The model's feature axis (``n_embd``)."""


@final
class Pos(Axis):
    """Token positions (the query positions of attention)."""


@final
class KPos(KeyOf[Pos]):
    """The key positions of the queries ``Pos``."""


@final
class Ctx(Axis):
    """The rows of the learned position table (``n_positions``)."""


@final
class Mlp(Axis):
    """The hidden axis of each block's MLP (``n_inner``, 4 x ``n_embd`` by default)."""


@final
class QKV(Axis):
    """Query, key and value, stacked in HF's ``c_attn`` (split apart on loading)."""


@dataclasses.dataclass(frozen=True)
class GPT2Config:
    """GPT-2's sizes, named as in Hugging Face's ``config.json`` (the defaults: GPT-2 small).

    Example:
        >>> GPT2Config(vocab_size=256, n_positions=64, n_embd=48, n_layer=2, n_head=4)
    """

    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    n_inner: int | None = None
    activation_function: str = "gelu_new"
    layer_norm_epsilon: float = 1e-5
    scale_attn_weights: bool = True
    scale_attn_by_inverse_layer_idx: bool = False
    reorder_and_upcast_attn: bool = False
    tie_word_embeddings: bool = True

    @property
    def mlp_size(self) -> int:
        return 4 * self.n_embd if self.n_inner is None else self.n_inner

    def check(self, where: str = "GPT2Config") -> None:
        """``ConversionError`` for a configuration this implementation does not compute."""
        unsupported = {
            "activation_function": self.activation_function
            not in ("gelu_new", "gelu_pytorch_tanh"),
            "scale_attn_weights": not self.scale_attn_weights,
            "scale_attn_by_inverse_layer_idx": self.scale_attn_by_inverse_layer_idx,
            "tie_word_embeddings": not self.tie_word_embeddings,
        }
        bad = [k for k, v in unsupported.items() if v]
        if bad:
            raise ConversionError(
                f"{where}: {bad[0]}={getattr(self, bad[0])!r} is not supported (GPT-2 uses "
                "gelu_new, scaled attention and a tied LM head)"
            )
        if self.n_embd % self.n_head:
            raise ConversionError(
                f"{where}: n_embd={self.n_embd} does not divide into n_head={self.n_head} heads"
            )


class Block(eqx.Module):
    """One GPT-2 block: ``x + attn(ln_1(x))``, then ``x + proj(gelu(fc(ln_2(x))))``;
    ``implementation``: the attention path (as for ``ax.nn.MultiheadAttention``)."""

    ln_1: LayerNorm[F32, Embed]
    attn: MultiheadAttention[F32, Pos, KPos, Embed, Head, HeadDim]
    ln_2: LayerNorm[F32, Embed]
    fc: Affine[F32, Embed, Mlp]
    proj: Affine[F32, Mlp, Embed]

    @checks_choices
    def __init__(
        self, config: GPT2Config, *, implementation: AttentionPath = "auto", key: jax.Array
    ) -> None:
        k1, k2, k3 = jax.random.split(key, 3)
        e, eps = config.n_embd, config.layer_norm_epsilon
        self.ln_1 = LayerNorm(Embed, e, eps=eps)
        self.attn = MultiheadAttention(
            Embed,
            e,
            num_heads=config.n_head,
            query_pos=Pos,
            key_pos=KPos,
            causal=True,
            use_bias=True,
            implementation=implementation,
            key=k1,
        )
        self.ln_2 = LayerNorm(Embed, e, eps=eps)
        self.fc = Affine(Embed, Mlp, e, config.mlp_size, key=k2)
        self.proj = Affine(Mlp, Embed, config.mlp_size, e, key=k3)

    def _mlp(self, x: Tensor[F32, *B, Pos, Embed]) -> Tensor[F32, *B, Pos, Embed]:
        return x + self.proj(gelu(self.fc(self.ln_2(x))))

    @overload
    def __call__(
        self, x: Tensor[F32, *B, Pos, Embed], cache: None = None
    ) -> Tensor[F32, *B, Pos, Embed]: ...
    @overload
    def __call__(
        self, x: Tensor[F32, *B, Pos, Embed], cache: KVCache
    ) -> tuple[Tensor[F32, *B, Pos, Embed], KVCache]: ...
    @public_method  # a block called by the model: re-attributed to the model
    def __call__(
        self, x: Tensor[F32, *B, Pos, Embed], cache: KVCache | None = None
    ) -> Tensor[F32, *B, Pos, Embed] | tuple[Tensor[F32, *B, Pos, Embed], KVCache]:
        """The block; with ``cache`` the positions after those cached, and the new cache."""
        if cache is None:
            return self._mlp(x + self.attn(self.ln_1(x)))
        y, cache = self.attn(self.ln_1(x), cache=cache)
        return self._mlp(x + y), cache


#: a model's blocks, as ``unroll`` makes them: ``GPT2[tuple[Block, ...]]`` (the default,
#: ``unroll=True``) or ``GPT2[LayerStack[Block, Layer]]`` (``unroll=False``)
BS = TypeVar("BS", bound=Blocks[Block], default=Blocks[Block], covariant=True)


class GPT2(eqx.Module, Generic[BS]):
    """GPT-2: ids ``Tensor[I32, *B, Pos]`` -> logits ``Tensor[F32, *B, Pos, Vocab]``.

    ``model(ids, cache=cache)`` runs the positions after those in ``cache`` (from
    :meth:`init_cache`) and returns ``(logits, cache)``: the model is an ``ax.nn.Decoder``,
    so ``ax.nn.generate(model, prompt, steps)`` decodes with a KV cache.

    ``unroll=True`` (the default) keeps the blocks as a tuple, called in a Python loop;
    ``unroll=False`` stacks them in one ``ax.nn.LayerStack`` over ``ax.nn.Layer``
    (``blocks.layers.fc.weight: Tensor[F32, Layer, Embed, Mlp]``), called as one scan: the
    same values, a program and compile time that do not grow with depth. The logits are
    float32 whatever the parameters' dtype (``from_hf(..., dtype=ax.BF16)``).

    ``implementation`` is the attention path of every block (``ax.nn.AttentionPath``, as
    for ``ax.nn.dot_product_attention``; ``"auto"``: cuDNN flash attention on an NVIDIA GPU
    where it can run the call, else the einsums). It is a choice of this process, not of
    the checkpoint: ``config.json`` does not hold it.

    Example:
        >>> model = GPT2(GPT2Config(vocab_size=256, n_positions=64, n_embd=48, n_layer=2,
        ...                         n_head=4), key=jax.random.key(0))
        >>> model(ids)               # Tensor[I32, Batch, Pos] -> Tensor[F32, Batch, Pos, Vocab]
        >>> GPT2(config, key=key, unroll=False).blocks   # a LayerStack[Block, Layer]
    """

    wte: Embedding[F32, Vocab, Embed]
    wpe: Embedding[F32, Ctx, Embed]
    blocks: BS
    ln_f: LayerNorm[F32, Embed]
    config: GPT2Config = eqx.field(static=True)

    @overload
    def __init__(
        self: GPT2[tuple[Block, ...]],
        config: GPT2Config,
        *,
        implementation: AttentionPath = ...,
        key: jax.Array,
        unroll: Literal[True] = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: GPT2[LayerStack[Block, Layer]],
        config: GPT2Config,
        *,
        implementation: AttentionPath = ...,
        key: jax.Array,
        unroll: Literal[False],
    ) -> None: ...
    @overload
    def __init__(
        self: GPT2[Blocks[Block]],
        config: GPT2Config,
        *,
        implementation: AttentionPath = ...,
        key: jax.Array,
        unroll: bool,
    ) -> None: ...
    @checks_choices
    def __init__(
        self,
        config: GPT2Config,
        *,
        implementation: AttentionPath = "auto",
        key: jax.Array,
        unroll: bool = True,
    ) -> None:
        config.check()
        kt, kp, kb = jax.random.split(key, 3)
        init = normal(0.02)
        e = config.n_embd
        self.wte = Embedding(Vocab, Embed, config.vocab_size, e, weight_init=init, key=kt)
        self.wpe = Embedding(Ctx, Embed, config.n_positions, e, weight_init=init, key=kp)
        blocks = make_blocks(
            lambda k: Block(config, implementation=implementation, key=k),
            config.n_layer,
            kb,
            unroll,
            "GPT2",
        )
        self.blocks = cast("BS", blocks)  # the form unroll asks for
        self.ln_f = LayerNorm(Embed, e, eps=config.layer_norm_epsilon)
        self.config = config

    @property
    def position_axis(self) -> type[Pos]:
        """The axis of the ids' positions (``ax.nn.generate`` checks its ``pos`` against it)."""
        return Pos

    @property
    def max_positions(self) -> int:
        """The context length (``config.n_positions``)."""
        return self.config.n_positions

    @property
    def vocab_size(self) -> int:
        """The vocabulary's size (``generate`` checks concrete prompt ids against it)."""
        return self.config.vocab_size

    @overload
    def __call__(self, ids: Tensor[I32, *B, Pos]) -> Tensor[F32, *B, Pos, Vocab]: ...
    @overload
    def __call__(
        self, ids: Tensor[I32, *B, Pos], *, cache: Caches
    ) -> tuple[Tensor[F32, *B, Pos, Vocab], Caches]: ...
    @public_method  # its own checks name it; an inner call's error is re-attributed
    def __call__(
        self, ids: Tensor[I32, *B, Pos], *, cache: Caches | None = None
    ) -> Tensor[F32, *B, Pos, Vocab] | tuple[Tensor[F32, *B, Pos, Vocab], Caches]:
        """Logits of ``ids`` (with ``cache``: of the positions after those cached)."""
        check_ids("GPT2", ids, Pos, self.config.vocab_size)
        n = ids.size(Pos)
        if cache is None and n > self.config.n_positions:
            raise ValueError(
                f"GPT2: {n} positions, the model has embeddings for {self.config.n_positions}"
            )
        tokens: Tensor[F32, *B, Pos, Embed] = self.wte(ids)
        where: AnyTensor = arange(Pos, n)
        if cache is not None:  # each row's positions follow its own cached ones
            cache_lengths(self.blocks, cache, "GPT2", ids)
            where = (cache if isinstance(cache, KVCache) else cache[0]).positions(Pos, n)
        positions: Tensor[F32, *B, Pos, Embed] = broadcast(self.wpe(where), tokens)
        x = tokens + positions
        if cache is None:
            return self._logits(run_blocks(self.blocks, x))
        x, new = run_cached(self.blocks, x, cache)
        return self._logits(x), new

    def _logits(self, x: Tensor[F32, *B, Pos, Embed]) -> Tensor[F32, *B, Pos, Vocab]:
        out: Tensor[F32, *B, Pos, Vocab] = contract(self.ln_f(x), self.wte.weight, over=Embed)
        return astype(out, F32)  # float32 logits from a low-precision model too

    @public_method(method="init_cache")  # a mistake made through generate names it
    def init_cache(self, batch: Mapping[type[Axis], int], max_len: int) -> Caches:
        """An empty KV cache per block for ``max_len`` positions (at most ``n_positions``)
        and the ``batch`` axes (``{Batch: 4}``)."""
        if max_len > self.config.n_positions:
            raise ValueError(
                f"GPT2.init_cache: max_len {max_len} exceeds the {self.config.n_positions} "
                "positions the model has embeddings for"
            )
        return init_caches(self.blocks, batch, max_len)


def _entries() -> tuple[Entry, ...]:
    h, b = "transformer.h.{i}.", "blocks.{i}."
    qkv = tuple(f"{b}attn.{p}_proj" for p in ("query", "key", "value"))
    qkv_bias = tuple(f"{b}attn.biases.{n}" for n in range(3))
    return (
        Entry("transformer.wte.weight", "wte.weight", (Vocab, Embed)),
        Entry("transformer.wpe.weight", "wpe.weight", (Ctx, Embed)),
        Entry(h + "ln_1.weight", b + "ln_1.weight", (Embed,)),
        Entry(h + "ln_1.bias", b + "ln_1.bias", (Embed,)),
        # Conv1D: [in, out], out = [q | k | v], each [Head, HeadDim]
        Entry(h + "attn.c_attn.weight", qkv, (Embed, (QKV, Head, HeadDim)), split=QKV),
        Entry(h + "attn.c_attn.bias", qkv_bias, ((QKV, Head, HeadDim),), split=QKV),
        Entry(h + "attn.c_proj.weight", b + "attn.output_proj", ((Head, HeadDim), Embed)),
        Entry(h + "attn.c_proj.bias", b + "attn.biases.3", (Embed,)),
        Entry(h + "ln_2.weight", b + "ln_2.weight", (Embed,)),
        Entry(h + "ln_2.bias", b + "ln_2.bias", (Embed,)),
        Entry(h + "mlp.c_fc.weight", b + "fc.weight", (Embed, Mlp)),
        Entry(h + "mlp.c_fc.bias", b + "fc.bias", (Mlp,)),
        Entry(h + "mlp.c_proj.weight", b + "proj.weight", (Mlp, Embed)),
        Entry(h + "mlp.c_proj.bias", b + "proj.bias", (Embed,)),
        Entry("transformer.ln_f.weight", "ln_f.weight", (Embed,)),
        Entry("transformer.ln_f.bias", "ln_f.bias", (Embed,)),
    )


#: GPT-2's checkpoint table (``transformer.`` may be absent, as in the hub's ``gpt2``)
TABLE = Table(
    "gpt2",
    _entries(),
    ignore=("*.attn.bias", "*.attn.masked_bias"),
    architectures=("GPT2LMHeadModel",),
    optional_prefix="transformer.",
    # GPT-2's head is its token embedding: a stored lm_head.weight must be its copy
    copies=(("lm_head.weight", "transformer.wte.weight", "GPT-2 ties its head to wte"),),
)


@overload
def from_hf(
    folder: str | os.PathLike[str],
    *,
    unroll: Literal[True] = ...,
    dtype: type[Floating] | None = ...,
    implementation: AttentionPath = ...,
) -> GPT2[tuple[Block, ...]]: ...
@overload
def from_hf(
    folder: str | os.PathLike[str],
    *,
    unroll: Literal[False],
    dtype: type[Floating] | None = ...,
    implementation: AttentionPath = ...,
) -> GPT2[LayerStack[Block, Layer]]: ...
@overload
def from_hf(
    folder: str | os.PathLike[str],
    *,
    unroll: bool,
    dtype: type[Floating] | None = ...,
    implementation: AttentionPath = ...,
) -> GPT2: ...
@checks_choices
def from_hf(
    folder: str | os.PathLike[str],
    *,
    unroll: bool = True,
    dtype: type[Floating] | None = None,
    implementation: AttentionPath = "auto",
) -> GPT2:
    """A :class:`GPT2` read from a Hugging Face folder (``config.json``,
    ``model.safetensors``); unknown config keys are ignored. ``implementation``: the
    attention path of its blocks (:class:`GPT2`).

    ``unroll=False`` loads the blocks into one ``ax.nn.LayerStack`` (see :class:`GPT2`).
    ``dtype`` (``ax.BF16``, ...) is the parameters' dtype, each read straight into it;
    ``None`` keeps float32.

    Raises:
        FileNotFoundError: a file is missing.
        ConversionError: another architecture or size (the first mismatching key is
            named), a partial checkpoint (the missing keys are listed), an entry of the
            wrong shape or transposed (the HF key and its expected axes are named).

    Example:
        >>> model = gpt2.from_hf("tests/models/fixtures/gpt2")
        >>> deep = gpt2.from_hf(folder, unroll=False, dtype=ax.BF16)
    """
    config = read_config(folder, GPT2Config, TABLE)
    config.check(f"gpt2: {os.fspath(folder)}/config.json")
    return load_model(
        folder,
        lambda k: GPT2(config, implementation=implementation, key=k, unroll=unroll),
        TABLE,
        layers=config.n_layer,
        dtype=dtype,
        where="gpt2.from_hf",
    )


def to_hf(model: GPT2, folder: str | os.PathLike[str]) -> None:
    """Write ``model`` to ``folder`` as Hugging Face does (``config.json``,
    ``model.safetensors``): ``transformers.GPT2LMHeadModel.from_pretrained`` loads it.
    A stacked model (``unroll=False``) writes the keys, shapes and bytes of the unstacked
    one; the parameters are written in their own dtype.

    Example:
        >>> gpt2.to_hf(model, "out/gpt2")
    """
    if not isinstance(model, GPT2):
        raise TypeError(f"to_hf: model is a GPT2, got {type(model).__name__}")
    save_weights(folder, model, TABLE, layers=model.config.n_layer)
    dtype = np.dtype(model.wte.weight.array.dtype).name  # "float32", "bfloat16"
    write_config(folder, model.config, TABLE, dtype=dtype)
