"""Qwen2 from and to Hugging Face checkpoints (``from_hf``, ``to_hf``): Llama's model and
checkpoint table (:mod:`axjax.models.llama`) with query, key and value biases and, at small
sizes, the head tied to the embedding, on named axes; and its tokenizer (``tokenizer``).

A variant, not a copy: ``from_hf`` reads a :class:`Qwen2Config` (``model_type: "qwen2"``)
into the same :class:`~axjax.models.llama.Llama` by the same table (with the bias rows),
and ``to_hf`` is Llama's (it writes the family of the model's config).

Example:
    >>> from axjax.models import qwen2
    >>> model = qwen2.from_hf("tests/models/fixtures/qwen2-tied")
    >>> logits = model(ids)      # Tensor[I32, Batch, Pos] -> Tensor[F32, Batch, Pos, Vocab]
    >>> qwen2.to_hf(model, "out/qwen2")
"""

from __future__ import annotations

import os
import typing
from typing import TYPE_CHECKING, Literal

from ..core import Floating
from ..core._internal import checks_choices as _checks_choices
from ..nn import AttentionPath, Layer, LayerStack
from ._llama import Block as Block
from ._llama import Embed as Embed
from ._llama import KPos as KPos
from ._llama import Llama as Llama
from ._llama import Mlp as Mlp
from ._llama import Pos as Pos
from ._llama import Qwen2Config as Qwen2Config
from ._llama import Vocab as Vocab
from ._llama import load as _load
from ._llama import table as table
from ._llama import to_hf as to_hf
from ._tokenizer import load_tokenizer as _load_tokenizer

if TYPE_CHECKING:
    from ._tokenizer import Tokenizer


@typing.overload
def from_hf(
    folder: str | os.PathLike[str],
    *,
    unroll: Literal[True] = ...,
    dtype: type[Floating] | None = ...,
    implementation: AttentionPath = ...,
) -> Llama[tuple[Block, ...]]: ...
@typing.overload
def from_hf(
    folder: str | os.PathLike[str],
    *,
    unroll: Literal[False],
    dtype: type[Floating] | None = ...,
    implementation: AttentionPath = ...,
) -> Llama[LayerStack[Block, Layer]]: ...
@typing.overload
def from_hf(
    folder: str | os.PathLike[str],
    *,
    unroll: bool,
    dtype: type[Floating] | None = ...,
    implementation: AttentionPath = ...,
) -> Llama: ...
@_checks_choices
def from_hf(
    folder: str | os.PathLike[str],
    *,
    unroll: bool = True,
    dtype: type[Floating] | None = None,
    implementation: AttentionPath = "auto",
) -> Llama:
    """A Qwen2 (a :class:`~axjax.models.llama.Llama` of a :class:`Qwen2Config`) read from a
    Hugging Face folder; the options and errors are ``llama.from_hf``'s, and
    ``use_sliding_window: true`` is a ``ConversionError``.

    Example:
        >>> model = qwen2.from_hf("tests/models/fixtures/qwen2-tied", dtype=ax.BF16)
    """
    return _load(folder, Qwen2Config, unroll=unroll, dtype=dtype, implementation=implementation)


def tokenizer(folder: str | os.PathLike[str]) -> Tokenizer[Pos]:
    """Qwen2's tokenizer in ``folder``, its ids along ``Pos``
    (:func:`axjax.models.load_tokenizer`).

    Example:
        >>> tok = qwen2.tokenizer("tests/models/fixtures/qwen2-tied")
        >>> ids, lengths = tok.encode(["Hello world", "and"], batch=Batch)
    """
    return _load_tokenizer(folder, pos=Pos)
