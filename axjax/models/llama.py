"""Llama from and to Hugging Face checkpoints (``from_hf``, ``to_hf``), on named axes:
RoPE, grouped-query attention with its own key-value head axis, SwiGLU, RMSNorm; and its
tokenizer (``tokenizer``: ids ``Tensor[I32, Batch, Pos]``, the BOS added).

Example:
    >>> from axjax.models import llama
    >>> model = llama.from_hf("tests/models/fixtures/llama-kv2")
    >>> tok = llama.tokenizer("tests/models/fixtures/llama-kv2")
    >>> ids, lengths = tok.encode(["Hello world", "and"], batch=Batch)
    >>> logits = model(ids)      # Tensor[I32, Batch, Pos] -> Tensor[F32, Batch, Pos, Vocab]
    >>> llama.to_hf(model, "out/llama")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._llama import Block as Block
from ._llama import Embed as Embed
from ._llama import KPos as KPos
from ._llama import Llama as Llama
from ._llama import LlamaConfig as LlamaConfig
from ._llama import MistralConfig as MistralConfig
from ._llama import Mlp as Mlp
from ._llama import Pos as Pos
from ._llama import Qwen2Config as Qwen2Config
from ._llama import Vocab as Vocab
from ._llama import from_hf as from_hf
from ._llama import table as table
from ._llama import to_hf as to_hf
from ._tokenizer import load_tokenizer as _load_tokenizer

if TYPE_CHECKING:
    import os

    from ._tokenizer import Tokenizer


def tokenizer(folder: str | os.PathLike[str]) -> Tokenizer[Pos]:
    """Llama's tokenizer in ``folder``, its ids along ``Pos``
    (:func:`axjax.models.load_tokenizer`): ``tokenizer(folder).encode(texts, batch=Batch)``
    gives the ids ``Tensor[I32, Batch, Pos]`` that ``from_hf(folder)`` reads, the BOS first
    (``tokenizer.json``'s post-processor adds it, as in ``transformers``).

    Example:
        >>> tok = llama.tokenizer("tests/models/fixtures/llama-kv2")
        >>> ids, lengths = tok.encode(["Hello world", "and"], batch=Batch)
    """
    return _load_tokenizer(folder, pos=Pos)
