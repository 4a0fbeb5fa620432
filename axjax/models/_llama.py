"""Llama on named axes, and its Hugging Face checkpoint table.

Token embeddings, pre-norm blocks ``x + attn(input_layernorm(x))`` then
``x + mlp(post_attention_layernorm(x))`` with RMSNorm, grouped-query attention with rotary
position embeddings (``ax.nn.GroupedQueryAttention``: the key-value heads are their own axis,
``KVHead``) and a SwiGLU MLP (``ax.nn.SwiGLU``), no biases; a final RMSNorm and an LM head,
untied or tied to the embedding (``tie_word_embeddings``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, Literal, TypeVarTuple, cast, final, overload

import equinox as eqx
import jax
import numpy as np
from typing_extensions import TypeVar

from ..core import F32, I32, Axis, Floating, KeyOf, Tensor
from ..core._internal import checks_choices, public_method
from ..nn import (
    AttentionPath,
    Embedding,
    GroupedQueryAttention,
    GroupHead,
    HeadDim,
    KVCache,
    KVHead,
    Layer,
    LayerStack,
    RMSNorm,
    SwiGLU,
)
from ..nn.init import normal
from ..ops import astype, contract
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
    "Block",
    "Embed",
    "KPos",
    "Llama",
    "LlamaConfig",
    "MistralConfig",
    "Mlp",
    "Pos",
    "Qwen2Config",
    "Vocab",
    "from_hf",
    "table",
    "to_hf",
]

B = TypeVarTuple("B")


@final
class Vocab(Axis):
    """The token vocabulary (the logits' last axis)."""


@final
class Embed(Axis):
    """The model's feature axis (``hidden_size``)."""


@final
class Pos(Axis):
    """Token positions (the query positions of attention)."""


@final
class KPos(KeyOf[Pos]):
    """The key positions of the queries ``Pos``."""


@final
class Mlp(Axis):
    """The hidden axis of each block's SwiGLU MLP (``intermediate_size``)."""


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    """Llama's sizes, named as in Hugging Face's ``config.json`` (defaults: Llama 2 7B's).

    ``num_key_value_heads`` (default ``num_attention_heads``) is the number of key-value
    heads; ``rope_theta`` is read from ``rope_parameters`` where a newer ``config.json`` keeps
    it there. Scaled RoPE variants (``rope_type`` other than ``"default"``), biases and
    activations other than SiLU are refused with a ``ConversionError``.

    Example:
        >>> LlamaConfig(vocab_size=256, hidden_size=48, intermediate_size=96,
        ...             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    """

    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 11008
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    max_position_embeddings: int = 2048
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_parameters: dict[str, Any] | None = None
    rope_scaling: dict[str, Any] | None = None
    hidden_act: str = "silu"
    attention_bias: bool = False
    mlp_bias: bool = False
    tie_word_embeddings: bool = False

    #: config.json's ``model_type`` and ``architectures`` of this family
    model_type: ClassVar[str] = "llama"
    architecture: ClassVar[str] = "LlamaForCausalLM"

    @property
    def qkv_bias(self) -> bool:
        """Whether the query, key and value projections have biases (Qwen2's do)."""
        return False

    @property
    def window(self) -> int | None:
        """The attention's sliding window (Mistral's ``sliding_window``), ``None``: none."""
        return None

    @property
    def kv_heads(self) -> int:
        """The number of key-value heads."""
        n = self.num_key_value_heads
        return self.num_attention_heads if n is None else n

    @property
    def head_size(self) -> int:
        """The per-head feature size (``head_dim``, or ``hidden_size // num_attention_heads``)."""
        if self.head_dim is not None:
            return self.head_dim
        return self.hidden_size // self.num_attention_heads

    @property
    def theta(self) -> float:
        """RoPE's base: ``rope_parameters["rope_theta"]`` where given, else ``rope_theta``."""
        params = self.rope_parameters or {}
        return float(params.get("rope_theta", self.rope_theta))

    def check(self, where: str = "LlamaConfig") -> None:
        """``ConversionError`` for a configuration this implementation does not compute."""
        scaling = [p for p in (self.rope_parameters, self.rope_scaling) if p]
        kinds = [p.get("rope_type", p.get("type", "default")) for p in scaling]
        unsupported = {
            "hidden_act": self.hidden_act != "silu",
            "attention_bias": self.attention_bias,
            "mlp_bias": self.mlp_bias,
            "rope_parameters": any(k != "default" for k in kinds),
        }
        bad = [k for k, v in unsupported.items() if v]
        if bad:
            raise ConversionError(
                f"{where}: {bad[0]}={getattr(self, bad[0])!r} is not supported (this Llama "
                "computes SiLU, no biases and unscaled RoPE)"
            )
        if self.num_attention_heads % self.kv_heads:
            raise ConversionError(
                f"{where}: num_attention_heads={self.num_attention_heads} is not a multiple "
                f"of num_key_value_heads={self.kv_heads}"
            )
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ConversionError(
                f"{where}: hidden_size={self.hidden_size} does not divide into "
                f"num_attention_heads={self.num_attention_heads} heads (give head_dim)"
            )
        if self.head_size % 2:
            raise ConversionError(f"{where}: head size {self.head_size} is odd; RoPE rotates pairs")
        if self.window is not None and (isinstance(self.window, bool) or self.window < 1):
            raise ConversionError(
                f"{where}: sliding_window={self.window!r} is not a positive number of positions"
            )


@dataclasses.dataclass(frozen=True)
class MistralConfig(LlamaConfig):
    """Mistral's sizes (defaults: Mistral 7B's, as ``transformers.MistralConfig``): Llama's
    fields and ``sliding_window``, the attention's sliding window (``None``: full causal
    attention, as Mistral 7B v0.2 on). Each query at position ``p`` sees the keys ``j`` with
    ``p - sliding_window < j <= p``, the query's own among them (``transformers``'
    convention), in the full call and in every cached step.

    Example:
        >>> MistralConfig(vocab_size=256, hidden_size=48, intermediate_size=96,
        ...               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        ...               sliding_window=4)
    """

    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 14336
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int | None = 8
    max_position_embeddings: int = 4096 * 32
    sliding_window: int | None = 4096

    model_type: ClassVar[str] = "mistral"
    architecture: ClassVar[str] = "MistralForCausalLM"

    @property
    def window(self) -> int | None:
        """``sliding_window``."""
        return self.sliding_window


@dataclasses.dataclass(frozen=True)
class Qwen2Config(LlamaConfig):
    """Qwen2's sizes (defaults: ``transformers.Qwen2Config``'s): Llama's fields; the query,
    key and value projections have biases (the output projection none), and small models
    tie the head to the embedding (``tie_word_embeddings``). Sliding-window attention
    (``use_sliding_window: true``, on the layers from ``max_window_layers``) is refused with
    a ``ConversionError``; ``sliding_window`` is read and written back, unused without it.

    Example:
        >>> Qwen2Config(vocab_size=256, hidden_size=48, intermediate_size=96,
        ...             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        ...             tie_word_embeddings=True)
    """

    vocab_size: int = 151936
    hidden_size: int = 4096
    intermediate_size: int = 22016
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int | None = 32
    max_position_embeddings: int = 32768
    use_sliding_window: bool = False
    sliding_window: int | None = None
    max_window_layers: int = 28

    model_type: ClassVar[str] = "qwen2"
    architecture: ClassVar[str] = "Qwen2ForCausalLM"

    @property
    def qkv_bias(self) -> bool:
        """Always: Qwen2's q, k and v projections have biases."""
        return True

    def check(self, where: str = "Qwen2Config") -> None:
        """Llama's checks, and sliding-window attention refused."""
        if self.use_sliding_window:
            raise ConversionError(
                f"{where}: use_sliding_window=True is not supported (Qwen2's sliding window "
                f"on the layers from max_window_layers={self.max_window_layers}); this "
                "Qwen2 computes full causal attention on every layer"
            )
        super().check(where)


class Block(eqx.Module):
    """One Llama block: ``x + attn(input_layernorm(x))``, then
    ``x + mlp(post_attention_layernorm(x))``; ``implementation``: the attention path
    (:class:`axjax.nn.GroupedQueryAttention`'s)."""

    input_layernorm: RMSNorm[F32, Embed]
    attn: GroupedQueryAttention[F32, Pos, KPos, Embed]
    post_attention_layernorm: RMSNorm[F32, Embed]
    mlp: SwiGLU[F32, Embed, Mlp]

    @checks_choices
    def __init__(
        self, config: LlamaConfig, *, implementation: AttentionPath = "auto", key: jax.Array
    ) -> None:
        k1, k2 = jax.random.split(key)
        e, eps = config.hidden_size, config.rms_norm_eps
        self.input_layernorm = RMSNorm(Embed, e, eps=eps)
        self.attn = GroupedQueryAttention(
            Embed,
            e,
            num_heads=config.num_attention_heads,
            num_kv_heads=config.kv_heads,
            head_size=config.head_size,
            query_pos=Pos,
            key_pos=KPos,
            rope_theta=config.theta,
            implementation=implementation,
            qkv_bias=config.qkv_bias,
            sliding_window=config.window,
            key=k1,
        )
        self.post_attention_layernorm = RMSNorm(Embed, e, eps=eps)
        self.mlp = SwiGLU(Embed, e, Mlp, config.intermediate_size, key=k2)

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
        h = self.input_layernorm(x)
        if cache is None:
            x = x + self.attn(h)
        else:
            y, cache = self.attn(h, cache=cache)
            x = x + y
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x if cache is None else (x, cache)


#: a model's blocks, as ``unroll`` makes them: ``Llama[tuple[Block, ...]]`` (the default,
#: ``unroll=True``) or ``Llama[LayerStack[Block, Layer]]`` (``unroll=False``)
BS = TypeVar("BS", bound=Blocks[Block], default=Blocks[Block], covariant=True)


class Llama(eqx.Module, Generic[BS]):
    """Llama: ids ``Tensor[I32, *B, Pos]`` -> logits ``Tensor[F32, *B, Pos, Vocab]``.

    ``model(ids, cache=cache)`` runs the positions after those in ``cache`` (from
    :meth:`init_cache`: a ``KVCache`` per block holding the key-value heads only) and
    returns ``(logits, cache)``: the model is an ``ax.nn.Decoder``, so
    ``ax.nn.generate(model, prompt, steps)`` decodes with a KV cache. ``lm_head`` is
    ``None`` when the head is tied to the embedding.

    ``unroll=True`` (the default) keeps the blocks as a tuple, called in a Python loop;
    ``unroll=False`` stacks them in one ``ax.nn.LayerStack`` over ``ax.nn.Layer``, called
    as one scan: the same values, a program and compile time that do not grow with depth.
    The logits are float32 whatever the parameters' dtype (``from_hf(..., dtype=ax.BF16)``).

    ``implementation`` is the attention path of every block (``ax.nn.AttentionPath``, as
    for ``ax.nn.dot_product_attention``; ``"auto"``: cuDNN flash attention on an NVIDIA GPU
    where it can run the call, else the einsums). It is a choice of this process, not of
    the checkpoint: ``config.json`` does not hold it.

    Example:
        >>> model = Llama(LlamaConfig(vocab_size=256, hidden_size=48, intermediate_size=96,
        ...                           num_hidden_layers=2, num_attention_heads=4,
        ...                           num_key_value_heads=2), key=jax.random.key(0))
        >>> model(ids)               # Tensor[I32, Batch, Pos] -> Tensor[F32, Batch, Pos, Vocab]
        >>> Llama(config, implementation="cudnn", key=key)  # BF16 on a GPU: flash attention
    """

    embed_tokens: Embedding[F32, Vocab, Embed]
    blocks: BS
    norm: RMSNorm[F32, Embed]
    lm_head: Tensor[F32, Vocab, Embed] | None
    config: LlamaConfig = eqx.field(static=True)

    @overload
    def __init__(
        self: Llama[tuple[Block, ...]],
        config: LlamaConfig,
        *,
        implementation: AttentionPath = ...,
        key: jax.Array,
        unroll: Literal[True] = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: Llama[LayerStack[Block, Layer]],
        config: LlamaConfig,
        *,
        implementation: AttentionPath = ...,
        key: jax.Array,
        unroll: Literal[False],
    ) -> None: ...
    @overload
    def __init__(
        self: Llama[Blocks[Block]],
        config: LlamaConfig,
        *,
        implementation: AttentionPath = ...,
        key: jax.Array,
        unroll: bool,
    ) -> None: ...
    @checks_choices
    def __init__(
        self,
        config: LlamaConfig,
        *,
        implementation: AttentionPath = "auto",
        key: jax.Array,
        unroll: bool = True,
    ) -> None:
        config.check()
        ke, kb, kh = jax.random.split(key, 3)
        init = normal(0.02)
        e, v = config.hidden_size, config.vocab_size
        self.embed_tokens = Embedding(Vocab, Embed, v, e, weight_init=init, key=ke)
        n = config.num_hidden_layers
        blocks = make_blocks(
            lambda k: Block(config, implementation=implementation, key=k), n, kb, unroll, "Llama"
        )
        self.blocks = cast("BS", blocks)  # the form unroll asks for
        self.norm = RMSNorm(Embed, e, eps=config.rms_norm_eps)
        head: Tensor[F32, Vocab, Embed] = init(kh, {Vocab: v, Embed: e}, dtype=F32)
        self.lm_head = None if config.tie_word_embeddings else head
        self.config = config

    @property
    def position_axis(self) -> type[Pos]:
        """The axis of the ids' positions (``ax.nn.generate`` checks its ``pos`` against it)."""
        return Pos

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
        check_ids("Llama", ids, Pos, self.config.vocab_size)
        if cache is not None:
            cache_lengths(self.blocks, cache, "Llama", ids)
        x: Tensor[F32, *B, Pos, Embed] = self.embed_tokens(ids)
        if cache is None:
            return self._logits(run_blocks(self.blocks, x))
        x, new = run_cached(self.blocks, x, cache)
        return self._logits(x), new

    def _logits(self, x: Tensor[F32, *B, Pos, Embed]) -> Tensor[F32, *B, Pos, Vocab]:
        head = self.embed_tokens.weight if self.lm_head is None else self.lm_head
        logits: Tensor[F32, *B, Pos, Vocab] = contract(self.norm(x), head, over=Embed)
        return astype(logits, F32)  # float32 logits from a low-precision model too

    @public_method(method="init_cache")  # a mistake made through generate names it
    def init_cache(self, batch: Mapping[type[Axis], int], max_len: int) -> Caches:
        """An empty KV cache per block for ``max_len`` positions and the ``batch`` axes
        (``{Batch: 4}``): keys and values ``[*batch, KVHead, KPos, HeadDim]``."""
        return init_caches(self.blocks, batch, max_len)


def _entries(tied: bool, bias: bool) -> tuple[Entry, ...]:
    m, b = "model.layers.{i}.", "blocks.{i}."
    heads = (KVHead, GroupHead, HeadDim)  # q_proj's rows: head h = kv * group + g
    kv = (KVHead, HeadDim)
    rows: tuple[Entry, ...] = (
        Entry("model.embed_tokens.weight", "embed_tokens.weight", (Vocab, Embed)),
        Entry(m + "input_layernorm.weight", b + "input_layernorm.weight", (Embed,)),
        Entry(m + "self_attn.q_proj.weight", b + "attn.query_proj", (heads, Embed)),
        Entry(m + "self_attn.k_proj.weight", b + "attn.key_proj", (kv, Embed)),
        Entry(m + "self_attn.v_proj.weight", b + "attn.value_proj", (kv, Embed)),
        Entry(m + "self_attn.o_proj.weight", b + "attn.output_proj", (Embed, heads)),
        Entry(
            m + "post_attention_layernorm.weight", b + "post_attention_layernorm.weight", (Embed,)
        ),
        Entry(m + "mlp.gate_proj.weight", b + "mlp.gate", (Mlp, Embed)),
        Entry(m + "mlp.up_proj.weight", b + "mlp.up", (Mlp, Embed)),
        Entry(m + "mlp.down_proj.weight", b + "mlp.down", (Embed, Mlp)),
        Entry("model.norm.weight", "norm.weight", (Embed,)),
    )
    if bias:  # Qwen2: q, k and v biases (o has none), after the weights they add to
        rows = (
            *rows[:5],
            Entry(m + "self_attn.q_proj.bias", b + "attn.biases.0", (heads,)),
            Entry(m + "self_attn.k_proj.bias", b + "attn.biases.1", (kv,)),
            Entry(m + "self_attn.v_proj.bias", b + "attn.biases.2", (kv,)),
            *rows[5:],
        )
    return rows if tied else (*rows, Entry("lm_head.weight", "lm_head", (Vocab, Embed)))


_TIED = "config.json's tie_word_embeddings is true: the head is the embedding"
_IGNORE = ("model.rotary_emb.inv_freq", "model.layers.*.self_attn.rotary_emb.inv_freq")
#: the families that are this table's variants: (model_type, architecture, q/k/v biases)
_FAMILIES = (
    ("llama", "LlamaForCausalLM", False),
    ("mistral", "MistralForCausalLM", False),
    ("qwen2", "Qwen2ForCausalLM", True),
)
_TABLES = {
    (kind, tied): Table(
        kind,
        _entries(tied, bias),
        _IGNORE,
        architectures=(arch,),
        # a tied checkpoint may store the head too, only as the embedding's copy
        copies=(("lm_head.weight", "model.embed_tokens.weight", _TIED),) if tied else (),
    )
    for kind, arch, bias in _FAMILIES
    for tied in (False, True)
}


def table(config: LlamaConfig) -> Table:
    """The checkpoint table of ``config``'s family (Llama, Mistral or Qwen2, by the config's
    class): Llama's entries, Qwen2's q/k/v biases, ``lm_head.weight`` unless tied."""
    return _TABLES[config.model_type, config.tie_word_embeddings]


def load(
    folder: str | os.PathLike[str],
    config_type: type[LlamaConfig],
    *,
    unroll: bool,
    dtype: type[Floating] | None,
    implementation: AttentionPath,
) -> Llama:
    """A :class:`Llama` of ``config_type``'s family read from ``folder`` (``from_hf`` of
    ``llama``, ``mistral`` and ``qwen2``: the same loader, the family's table)."""
    kind = config_type.model_type
    config = read_config(folder, config_type, table(config_type()))
    config.check(f"{kind}: {os.fspath(folder)}/config.json")
    return load_model(
        folder,
        lambda k: Llama(config, implementation=implementation, key=k, unroll=unroll),
        table(config),
        layers=config.num_hidden_layers,
        dtype=dtype,
        where=f"{kind}.from_hf",
    )


@overload
def from_hf(
    folder: str | os.PathLike[str],
    *,
    unroll: Literal[True] = ...,
    dtype: type[Floating] | None = ...,
    implementation: AttentionPath = ...,
) -> Llama[tuple[Block, ...]]: ...
@overload
def from_hf(
    folder: str | os.PathLike[str],
    *,
    unroll: Literal[False],
    dtype: type[Floating] | None = ...,
    implementation: AttentionPath = ...,
) -> Llama[LayerStack[Block, Layer]]: ...
@overload
def from_hf(
    folder: str | os.PathLike[str],
    *,
    unroll: bool,
    dtype: type[Floating] | None = ...,
    implementation: AttentionPath = ...,
) -> Llama: ...
@checks_choices
def from_hf(
    folder: str | os.PathLike[str],
    *,
    unroll: bool = True,
    dtype: type[Floating] | None = None,
    implementation: AttentionPath = "auto",
) -> Llama:
    """A :class:`Llama` read from a Hugging Face folder (``config.json``,
    ``model.safetensors``); unknown config keys are ignored. ``implementation``: the
    attention path of its blocks (:class:`Llama`).

    ``unroll=False`` loads the blocks into one ``ax.nn.LayerStack`` (see :class:`Llama`).
    ``dtype`` (``ax.BF16``, as Llama checkpoints ship) is the parameters' dtype, each read
    straight into it; ``None`` keeps float32 (a bf16 file is widened).

    Raises:
        FileNotFoundError: a file is missing.
        ConversionError: another architecture or size (the first mismatching key is
            named), a partial checkpoint (the missing keys are listed), an entry of the
            wrong shape or transposed (the HF key and its expected axes are named: a
            ``num_key_value_heads`` that is not the weights' shows at ``k_proj``), or a
            configuration this implementation does not compute.

    Example:
        >>> model = llama.from_hf("tests/models/fixtures/llama-kv2")
        >>> deep = llama.from_hf(folder, unroll=False, dtype=ax.BF16)
    """
    return load(folder, LlamaConfig, unroll=unroll, dtype=dtype, implementation=implementation)


def to_hf(model: Llama, folder: str | os.PathLike[str]) -> None:
    """Write ``model`` to ``folder`` as Hugging Face does (``config.json``,
    ``model.safetensors``) for its config's family: ``transformers.LlamaForCausalLM``
    (``MistralForCausalLM``, ``Qwen2ForCausalLM``) ``.from_pretrained`` loads it.
    A stacked model (``unroll=False``) writes the keys, shapes and bytes of the unstacked
    one; the parameters are written in their own dtype.

    Example:
        >>> llama.to_hf(model, "out/llama")
    """
    if not isinstance(model, Llama):
        raise TypeError(f"to_hf: model is a Llama, got {type(model).__name__}")
    t = table(model.config)
    save_weights(folder, model, t, layers=model.config.num_hidden_layers)
    dtype = np.dtype(model.embed_tokens.weight.array.dtype).name  # "float32", "bfloat16"
    write_config(folder, model.config, t, dtype=dtype, omit_none=True)
