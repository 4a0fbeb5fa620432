"""Mistral from and to Hugging Face checkpoints (``from_hf``, ``to_hf``): Llama's model and
checkpoint table (:mod:`axjax.models.llama`) with a sliding-window attention
(``MistralConfig.sliding_window``), on named axes; and its tokenizer (``tokenizer``).

A variant, not a copy: ``from_hf`` reads a :class:`MistralConfig` (``model_type:
"mistral"``) into the same :class:`~axjax.models.llama.Llama` by the same table, and
``to_hf`` is Llama's (it writes the family of the model's config).

Example:
    >>> from axjax.models import mistral
    >>> model = mistral.from_hf("tests/models/fixtures/mistral-sw4")
    >>> logits = model(ids)      # Tensor[I32, Batch, Pos] -> Tensor[F32, Batch, Pos, Vocab]
    >>> mistral.to_hf(model, "out/mistral")
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
from ._llama import MistralConfig as MistralConfig
from ._llama import Mlp as Mlp
from ._llama import Pos as Pos
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
    """A Mistral (a :class:`~axjax.models.llama.Llama` of a :class:`MistralConfig`) read
    from a Hugging Face folder; the options and errors are ``llama.from_hf``'s.

    Example:
        >>> model = mistral.from_hf("tests/models/fixtures/mistral-sw4", unroll=False)
    """
    return _load(folder, MistralConfig, unroll=unroll, dtype=dtype, implementation=implementation)


def tokenizer(folder: str | os.PathLike[str]) -> Tokenizer[Pos]:
    """Mistral's tokenizer in ``folder``, its ids along ``Pos``
    (:func:`axjax.models.load_tokenizer`).

    Example:
        >>> tok = mistral.tokenizer("tests/models/fixtures/mistral-sw4")
        >>> ids, lengths = tok.encode(["Hello world", "and"], batch=Batch)
    """
    return _load_tokenizer(folder, pos=Pos)
