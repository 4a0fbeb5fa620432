"""GPT-2 from and to Hugging Face checkpoints (``from_hf``, ``to_hf``), on named axes, and
its tokenizer (``tokenizer``: ids ``Tensor[I32, Batch, Pos]``).

Example:
    >>> from axjax.models import gpt2
    >>> model = gpt2.from_hf("tests/models/fixtures/gpt2")
    >>> tok = gpt2.tokenizer("tests/models/fixtures/gpt2")
    >>> ids, lengths = tok.encode(["Hello world", "and"], batch=Batch)
    >>> logits = model(ids)      # Tensor[I32, Batch, Pos] -> Tensor[F32, Batch, Pos, Vocab]
    >>> gpt2.to_hf(model, "out/gpt2")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._gpt2 import GPT2 as GPT2
from ._gpt2 import QKV as QKV
from ._gpt2 import TABLE as TABLE
from ._gpt2 import Block as Block
from ._gpt2 import Ctx as Ctx
from ._gpt2 import Embed as Embed
from ._gpt2 import GPT2Config as GPT2Config
from ._gpt2 import KPos as KPos
from ._gpt2 import Mlp as Mlp
from ._gpt2 import Pos as Pos
from ._gpt2 import Vocab as Vocab
from ._gpt2 import from_hf as from_hf
from ._gpt2 import to_hf as to_hf
from ._tokenizer import load_tokenizer as _load_tokenizer

if TYPE_CHECKING:
    import os

    from ._tokenizer import Tokenizer


def tokenizer(folder: str | os.PathLike[str]) -> Tokenizer[Pos]:
    """GPT-2's tokenizer in ``folder``, its ids along ``Pos``
    (:func:`axjax.models.load_tokenizer`): ``tokenizer(folder).encode(texts, batch=Batch)``
    gives the ids ``Tensor[I32, Batch, Pos]`` that ``from_hf(folder)`` reads.

    Example:
        >>> tok = gpt2.tokenizer("tests/models/fixtures/gpt2")
        >>> ids, lengths = tok.encode(["Hello world", "and"], batch=Batch)
    """
    return _load_tokenizer(folder, pos=Pos)
