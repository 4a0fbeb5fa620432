"""Llama from and to Hugging Face checkpoints (``from_hf``, ``to_hf``), on named axes:
RoPE, grouped-query attention with its own key-value head axis, SwiGLU, RMSNorm.

Example:
    >>> from axjax.models import llama
    >>> model = llama.from_hf("tests/models/fixtures/llama-kv2")
    >>> logits = model(ids)      # Tensor[I32, Batch, Pos] -> Tensor[F32, Batch, Pos, Vocab]
    >>> llama.to_hf(model, "out/llama")
"""

from ._llama import Block as Block
from ._llama import Embed as Embed
from ._llama import KPos as KPos
from ._llama import Llama as Llama
from ._llama import LlamaConfig as LlamaConfig
from ._llama import Mlp as Mlp
from ._llama import Pos as Pos
from ._llama import Vocab as Vocab
from ._llama import from_hf as from_hf
from ._llama import table as table
from ._llama import to_hf as to_hf
