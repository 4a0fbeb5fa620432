"""Tokenizers read from a Hugging Face folder, bound to a model family's position axis.

A :class:`Tokenizer` wraps a ``tokenizers.Tokenizer`` (the Rust library under
``transformers``' fast tokenizers, the ``text`` extra: ``pip install "axjax[text]"``) and
knows the model family it feeds: ``gpt2.tokenizer(folder)`` is a ``Tokenizer[gpt2.Pos]``,
whose :meth:`~Tokenizer.encode` gives ids ``Tensor[I32, Batch, gpt2.Pos]`` (right-padded)
and their lengths, and whose :meth:`~Tokenizer.decode` reads them (or generated tokens)
back to text. The ids are those ``transformers.AutoTokenizer.from_pretrained(folder)``
gives, special tokens included (Llama's BOS).

The folder's files, in this order: ``tokenizer.json``; else GPT-2's ``vocab.json`` +
``merges.txt`` (byte-level BPE, as ``transformers``' ``GPT2Tokenizer``). A SentencePiece
``tokenizer.model`` alone is not read. The special tokens come from
``generation_config.json``, ``tokenizer_config.json``, ``special_tokens_map.json`` and
``config.json``, the first that names each.
"""

from __future__ import annotations

import json
import operator
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import numpy as np

from ..core import I32, Axis, AxisError, Tensor
from ..core._internal import Feature, check_axis_label, describe
from ..ops import tensor
from ._hf import ConversionError

if TYPE_CHECKING:
    import tokenizers

__all__ = ["Tokenizer", "load_tokenizer"]

P = TypeVar("P", bound=Axis)
Bt = TypeVar("Bt", bound=Axis)

_LOAD = Feature("tokenizers", "axjax.models.load_tokenizer (gpt2.tokenizer, llama.tokenizer)")

TOKENIZER_JSON = "tokenizer.json"
VOCAB_JSON = "vocab.json"
MERGES_TXT = "merges.txt"
SENTENCEPIECE = "tokenizer.model"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
GENERATION_CONFIG = "generation_config.json"
MODEL_CONFIG = "config.json"


class Tokenizer(Generic[P]):
    """Text to token ids ``Tensor[I32, Batch, P]`` and back, ``P`` the position axis of the
    model family it feeds (``gpt2.Pos``, ``llama.Pos``).

    Made by :func:`load_tokenizer` (or ``gpt2.tokenizer(folder)``, ``llama.tokenizer``),
    or from a ``tokenizers.Tokenizer`` and the special ids.

    Args:
        backend: the ``tokenizers.Tokenizer`` (:attr:`backend`); its own padding and
            truncation are switched off (:meth:`encode` pads).
        pos: the position axis of the ids.
        bos_id: the beginning-of-sequence id, if any (informative: ``tokenizer.json``'s
            post-processor is what adds it, as in ``transformers``).
        eos_ids: the ids that end a sequence (generation stops at any of them).
        pad_id: the id :meth:`encode` pads with. ``None``: the first of ``eos_ids`` (as
            ``transformers`` pads a model without a pad token, GPT-2), or none at all
            without an EOS (then rows of different lengths cannot be encoded together).
        source: where it was read from, for ``repr``.

    Example:
        >>> tok = gpt2.tokenizer("tests/models/fixtures/gpt2")
        >>> ids, lengths = tok.encode(["Hello world", "and"], batch=Batch)
        >>> ids.axes, lengths.axes            # (Batch, Pos), (Batch,)
        >>> tok.decode(ids, lengths)          # ['Hello world', 'and']
    """

    __slots__ = ("_backend", "_bos", "_eos", "_pad", "_pad_is_eos", "_pos", "_source")

    def __init__(
        self,
        backend: tokenizers.Tokenizer,
        pos: type[P],
        *,
        bos_id: int | None = None,
        eos_ids: Sequence[int] = (),
        pad_id: int | None = None,
        source: str = "",
    ) -> None:
        check_axis_label(pos, "Tokenizer: pos")
        self._pos = pos
        backend.no_padding()
        backend.no_truncation()
        self._backend = backend
        size = backend.get_vocab_size(with_added_tokens=True)
        eos = tuple(dict.fromkeys(_token_id(i, "eos_ids", size) for i in eos_ids))
        self._bos = None if bos_id is None else _token_id(bos_id, "bos_id", size)
        self._eos = eos
        self._pad_is_eos = pad_id is None and bool(eos)
        self._pad = eos[0] if self._pad_is_eos else pad_id
        if self._pad is not None:
            self._pad = _token_id(self._pad, "pad_id", size)
        self._source = source

    # ------------------------------------------------------------------ properties
    @property
    def backend(self) -> tokenizers.Tokenizer:
        """The ``tokenizers.Tokenizer`` (``token_to_id``, ``id_to_token``, ...)."""
        return self._backend

    @property
    def pos(self) -> type[P]:
        """The position axis of the ids."""
        return self._pos

    @property
    def bos_id(self) -> int | None:
        """The beginning-of-sequence id, or ``None``."""
        return self._bos

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """The end-of-sequence ids (``generation_config.json`` may list several)."""
        return self._eos

    @property
    def pad_id(self) -> int | None:
        """The padding id: the folder's pad token, else the first EOS id (GPT-2 has no pad
        token), else ``None``."""
        return self._pad

    @property
    def vocab_size(self) -> int:
        """The number of ids, added (special) tokens included."""
        return self._backend.get_vocab_size(with_added_tokens=True)

    def __repr__(self) -> str:
        def shown(i: int | None) -> str:
            return "None" if i is None else f"{i} {self._backend.id_to_token(i)!r}"

        pad = shown(self._pad) + (" (the first EOS)" if self._pad_is_eos else "")
        eos = ", ".join(shown(i) for i in self._eos)
        where = f"{self._source}, " if self._source else ""
        return (
            f"Tokenizer[{_axis_text(self._pos)}]({where}vocab_size={self.vocab_size}, "
            f"bos_id={shown(self._bos)}, eos_ids=({eos}), pad_id={pad})"
        )

    # ------------------------------------------------------------------ encode
    def encode(
        self,
        texts: str | Sequence[str],
        *,
        batch: type[Bt],
        add_special_tokens: bool = True,
    ) -> tuple[Tensor[I32, Bt, P], Tensor[I32, Bt]]:
        """The ids of ``texts`` (one string: a batch of one), each row right-padded with
        :attr:`pad_id` to the longest, and each row's length.

        ``add_special_tokens`` runs the tokenizer's post-processor (Llama's BOS), as
        ``transformers``' ``tok(text)`` does.

        Raises:
            ValueError: no texts; or rows of different lengths and no pad id.
            TypeError: a text that is not a string, or ``batch`` not an axis label.
            AxisError: ``batch`` is the position axis.

        Example:
            >>> ids, lengths = tok.encode(["Hello world", "and"], batch=Batch)
            >>> ids                         # Tensor[I32, Batch=2, Pos=3], pad_id after "and"
        """
        rows = [texts] if isinstance(texts, str) else list(texts)
        if not rows:
            raise ValueError("Tokenizer.encode: no texts (an empty list); pass one or more")
        for i, text in enumerate(rows):
            if not isinstance(text, str):
                raise TypeError(f"Tokenizer.encode: texts[{i}] is a {type(text).__name__}")
        check_axis_label(batch, "Tokenizer.encode: batch")
        if batch is self._pos:
            raise AxisError(
                f"Tokenizer.encode: batch is {_axis_text(batch)}, the position axis; a tensor "
                "never has the same axis twice (name the batch axis apart)"
            )
        encoded = self._backend.encode_batch(rows, add_special_tokens=add_special_tokens)
        lengths = np.array([len(e.ids) for e in encoded], np.int32)
        width = int(lengths.max())
        if self._pad is None and (lengths != width).any():
            raise ValueError(
                "Tokenizer.encode: the texts have different lengths and the tokenizer has no "
                "pad token nor EOS to pad with (pass pad_id= to Tokenizer)"
            )
        ids = np.full((len(rows), width), 0 if self._pad is None else self._pad, np.int32)
        for i, e in enumerate(encoded):
            ids[i, : lengths[i]] = e.ids
        return tensor(ids, batch, self._pos, dtype=I32), tensor(lengths, batch, dtype=I32)

    # ------------------------------------------------------------------ decode
    @overload
    def decode(
        self,
        ids: Tensor[I32, Bt, P],
        lengths: Tensor[I32, Bt] | None = None,
        *,
        skip_special_tokens: bool = False,
    ) -> list[str]: ...
    @overload
    def decode(
        self,
        ids: Tensor[I32, P] | Sequence[int],
        lengths: None = None,
        *,
        skip_special_tokens: bool = False,
    ) -> str: ...
    def decode(
        self,
        ids: Tensor[I32, Bt, P] | Tensor[I32, P] | Sequence[int],
        lengths: Tensor[I32, Bt] | None = None,
        *,
        skip_special_tokens: bool = False,
    ) -> list[str] | str:
        """The text of ``ids``: a ``Tensor[I32, Batch, P]`` gives one string per row (each
        cut at its length in ``lengths``, when given: :meth:`encode`'s, or a generation's),
        a ``Tensor[I32, P]`` or a sequence of ints one string. ``skip_special_tokens``
        leaves out the special tokens (BOS, EOS, padding), as ``transformers``' does.

        Raises:
            AxisError: ids whose last axis is not :attr:`pos`, or ``lengths`` not along
                the ids' batch axis.
            ValueError: an id outside the vocabulary, or a length beyond the row.

        Example:
            >>> tok.decode(ids, lengths)             # ['Hello world', 'and']
            >>> tok.decode([39, 68, 75, 75, 78])      # 'Hello'
        """
        if not isinstance(ids, Tensor):
            if lengths is not None:
                raise TypeError("Tokenizer.decode: lengths go with a Tensor[I32, Batch, Pos]")
            row = [operator.index(i) for i in ids]
            return self._decode_rows([row], skip_special_tokens)[0]
        array = self._check_ids(ids)
        if array.ndim == 1:
            if lengths is not None:
                raise TypeError("Tokenizer.decode: lengths go with a Tensor[I32, Batch, Pos]")
            return self._decode_rows([array.tolist()], skip_special_tokens)[0]
        ends = self._check_lengths(ids, lengths, array.shape[1])
        rows = [list(r[:n]) for r, n in zip(array.tolist(), ends, strict=True)]
        return self._decode_rows(rows, skip_special_tokens)

    def _check_ids(self, ids: Tensor[Any, *tuple[Any, ...]]) -> np.ndarray:
        array = np.asarray(ids.array)
        if (
            ids.ndim not in (1, 2)
            or ids.axes[-1] is not self._pos
            or not np.issubdtype(array.dtype, np.integer)
        ):
            raise AxisError(
                f"Tokenizer.decode: ids are a Tensor[I32, {_axis_text(self._pos)}] or "
                f"Tensor[I32, Batch, {_axis_text(self._pos)}] (integers, the position axis "
                f"last), got {describe(ids)}"
            )
        return array

    def _check_lengths(
        self, ids: Tensor[Any, *tuple[Any, ...]], lengths: object, width: int
    ) -> list[int]:
        if lengths is None:
            return [width] * ids.shape[0]
        if not isinstance(lengths, Tensor) or lengths.axes != ids.axes[:1]:
            shown = describe(lengths) if isinstance(lengths, Tensor) else type(lengths).__name__
            raise AxisError(
                f"Tokenizer.decode: lengths are a Tensor[I32, {_axis_text(ids.axes[0])}] (one "
                f"per row of the ids {describe(ids)}), got {shown}"
            )
        ends = np.asarray(lengths.array)
        if not np.issubdtype(ends.dtype, np.integer) or (ends < 0).any() or (ends > width).any():
            raise ValueError(
                f"Tokenizer.decode: lengths are integers from 0 to the rows' {width} "
                f"positions, got {ends.tolist()}"
            )
        return [int(n) for n in ends]

    def _decode_rows(self, rows: list[list[int]], skip_special_tokens: bool) -> list[str]:
        size = self.vocab_size
        bad = [i for row in rows for i in row if not 0 <= i < size]
        if bad:
            raise ValueError(
                f"Tokenizer.decode: id {bad[0]} is not in the vocabulary (0 to {size - 1})"
            )
        return self._backend.decode_batch(rows, skip_special_tokens=skip_special_tokens)


# ----------------------------------------------------------------------------- loading
def load_tokenizer(folder: str | os.PathLike[str], *, pos: type[P]) -> Tokenizer[P]:
    """The tokenizer in a Hugging Face ``folder``, its ids along ``pos``.

    Reads ``tokenizer.json``, else GPT-2's ``vocab.json`` + ``merges.txt`` (byte-level BPE
    as ``transformers``' ``GPT2Tokenizer``: no prefix space unless ``tokenizer_config.json``
    says ``add_prefix_space``); the special tokens the files below name (by token or by id)
    are matched whole in the text, as ``transformers`` does. SentencePiece's
    ``tokenizer.model`` is not read (convert it: ``transformers`` writes a
    ``tokenizer.json`` with ``save_pretrained``). The special ids, each from the first file
    that names it: ``generation_config.json`` (``bos_token_id``, ``eos_token_id``, an int
    or a list, ``pad_token_id``), ``tokenizer_config.json`` then
    ``special_tokens_map.json`` (``bos_token``, ``eos_token``, ``pad_token``: a string or
    ``{"content": ...}``), ``config.json``. Without a pad token, :attr:`Tokenizer.pad_id`
    is the first EOS id.

    Raises:
        ImportError: the ``tokenizers`` package is not installed (``pip install
            "axjax[text]"``).
        FileNotFoundError: no ``tokenizer.json`` nor ``vocab.json`` + ``merges.txt`` in
            the folder (or only a SentencePiece ``tokenizer.model``).
        ConversionError: a file that cannot be read (not JSON, not a tokenizer), or a
            special token that is not in the vocabulary.

    Example:
        >>> tok = load_tokenizer("tests/models/fixtures/gpt2", pos=gpt2.Pos)
        >>> tok = gpt2.tokenizer("tests/models/fixtures/gpt2")   # the same
    """
    tk = _LOAD.require()
    where = Path(folder)
    check_axis_label(pos, "load_tokenizer: pos")
    backend, kind = _read_backend(tk, where)
    specials = _Specials.read(where)
    _add_special_tokens(tk, backend, specials.tokens(backend.id_to_token), where)
    vocab = backend.get_vocab(with_added_tokens=True)
    return Tokenizer(
        backend,
        pos,
        bos_id=specials.first("bos", vocab),
        eos_ids=specials.all("eos", vocab),
        pad_id=specials.first("pad", vocab),
        source=f"{os.fspath(folder)}: {kind}",
    )


def _read_backend(tk: Any, folder: Path) -> tuple[tokenizers.Tokenizer, str]:
    """The ``tokenizers.Tokenizer`` of the folder's files, and which files they are."""
    path = folder / TOKENIZER_JSON
    if path.is_file():
        return _from_file(tk, path), TOKENIZER_JSON
    vocab, merges = folder / VOCAB_JSON, folder / MERGES_TXT
    if vocab.is_file() and merges.is_file():
        return _from_vocab_and_merges(tk, folder), f"{VOCAB_JSON} + {MERGES_TXT}"
    supported = f"{TOKENIZER_JSON}, or {VOCAB_JSON} + {MERGES_TXT} (byte-level BPE)"
    if (folder / SENTENCEPIECE).is_file():
        raise FileNotFoundError(
            f"load_tokenizer: {folder} has only a SentencePiece {SENTENCEPIECE}, which is not "
            f"read; supported: {supported}. Convert it with transformers: "
            "AutoTokenizer.from_pretrained(folder).save_pretrained(folder) writes "
            f"{TOKENIZER_JSON}"
        )
    half = [f.name for f in (vocab, merges) if f.is_file()]
    found = f" (only {half[0]})" if half else ""
    raise FileNotFoundError(
        f"load_tokenizer: no tokenizer in {folder}{found}: looked for {supported}"
    )


def _from_file(tk: Any, path: Path) -> tokenizers.Tokenizer:
    try:
        backend: tokenizers.Tokenizer = tk.Tokenizer.from_file(str(path))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # tokenizers' errors are Exceptions; a Rust panic is not
        raise ConversionError(
            f"load_tokenizer: {path} is not a tokenizer the tokenizers package reads "
            f"({type(e).__name__}: {e})"
        ) from None
    return backend


def _from_vocab_and_merges(tk: Any, folder: Path) -> tokenizers.Tokenizer:
    """GPT-2's byte-level BPE, as ``transformers``' ``GPT2Tokenizer`` builds it."""
    vocab, merges = folder / VOCAB_JSON, folder / MERGES_TXT
    config = _read_json(folder / TOKENIZER_CONFIG)
    prefix = config.get("add_prefix_space", False)
    try:
        model = tk.models.BPE.from_file(str(vocab), str(merges))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        raise ConversionError(
            f"load_tokenizer: {vocab} and {merges} are not a BPE vocabulary and its merges "
            f"({type(e).__name__}: {e})"
        ) from None
    backend: tokenizers.Tokenizer = tk.Tokenizer(model)
    backend.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=prefix is True)
    backend.decoder = tk.decoders.ByteLevel()
    return backend


def _add_special_tokens(
    tk: Any, backend: tokenizers.Tokenizer, tokens: list[tuple[str, str]], folder: Path
) -> None:
    """Make the special tokens the files name (``(file, token)``) match whole, as
    ``transformers`` does (the hub's GPT-2 names ``<|endoftext|>`` by its id only); a token
    the vocabulary lacks is an error."""
    added = {t.content for t in backend.get_added_tokens_decoder().values()}
    new = []
    for file, token in tokens:
        if backend.token_to_id(token) is None:
            raise ConversionError(
                f"load_tokenizer: {folder / file} names the token {token!r}, which is not in "
                "the vocabulary"
            )
        if token not in added:
            added.add(token)
            new.append(tk.AddedToken(token, special=True, normalized=False))
    if new:
        backend.add_special_tokens(new)


# ----------------------------------------------------------------------------- special ids
def _read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (``{}`` when there is no such file)."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ConversionError(f"load_tokenizer: {path} is not JSON ({e})") from None
    if not isinstance(data, dict):
        raise ConversionError(f"load_tokenizer: {path} is not a JSON object")
    return data


class _Specials:
    """The special tokens the folder's files name: for ``kind`` (bos, eos, pad), each
    file's ids (``generation_config.json``, ``config.json``) or token (the tokenizer
    configs), in the order the files are asked."""

    ORDER = (GENERATION_CONFIG, TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP, MODEL_CONFIG)
    BY_ID = (GENERATION_CONFIG, MODEL_CONFIG)

    def __init__(self, folder: Path, files: dict[str, dict[str, Any]]) -> None:
        self.folder = folder
        self.files = files

    @classmethod
    def read(cls, folder: Path) -> _Specials:
        return cls(folder, {name: _read_json(folder / name) for name in cls.ORDER})

    def _named(self, name: str, kind: str) -> tuple[int, ...] | str | None:
        """What file ``name`` says of ``kind``: ids, a token, or nothing."""
        if name in self.BY_ID:
            value: object = self.files[name].get(f"{kind}_token_id")
            values: list[object] = list(value) if isinstance(value, list) else [value]
            if value is None or not values:
                return None
            ids = tuple(v for v in values if isinstance(v, int) and not isinstance(v, bool))
            if len(ids) != len(values):
                raise ConversionError(
                    f"load_tokenizer: {self.folder / name}'s {kind}_token_id is {value!r}, "
                    "expected an id or a list of ids"
                )
            return ids
        token = self.files[name].get(f"{kind}_token")
        if isinstance(token, dict):
            token = token.get("content")
        if token is None:
            return None
        if not isinstance(token, str):
            raise ConversionError(
                f"load_tokenizer: {self.folder / name}'s {kind}_token is {token!r}, expected "
                'a string or {"content": ...}'
            )
        return token

    def tokens(self, id_to_token: Callable[[int], str | None]) -> list[tuple[str, str]]:
        """Every ``(file, token)`` the files name (to match whole in the text): the
        tokenizer configs' tokens, and the tokens of the ids the model configs name."""
        out = []
        for name in self.ORDER:
            for kind in ("bos", "eos", "unk", "pad"):
                found = self._named(name, kind)
                named = [found] if isinstance(found, str) else [id_to_token(i) for i in found or ()]
                out += [(name, token) for token in named if token is not None]
        return out

    def all(self, kind: str, vocab: dict[str, int]) -> tuple[int, ...]:
        """The ids of ``kind`` from the first file that names it (``()``: none does)."""
        for name in self.ORDER:
            found = self._named(name, kind)
            if isinstance(found, str):
                return (vocab[found],)  # in the vocabulary: _add_special_tokens checked
            if found is None:
                continue
            size = max(vocab.values(), default=-1) + 1
            bad = [i for i in found if not 0 <= i < size]
            if bad:
                raise ConversionError(
                    f"load_tokenizer: {self.folder / name}'s {kind}_token_id {bad[0]} is not an "
                    f"id of the tokenizer's vocabulary (0 to {size - 1})"
                )
            return found
        return ()

    def first(self, kind: str, vocab: dict[str, int]) -> int | None:
        found = self.all(kind, vocab)
        return found[0] if found else None


def _token_id(value: object, name: str, size: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < size:
        raise ValueError(f"Tokenizer: {name} holds {value!r}, not an id of the vocabulary")
    return value


def _axis_text(axis: type[Axis]) -> str:
    """``gpt2.Pos`` for a family's axis (``axjax.models._gpt2.Pos``), else its name."""
    family = axis.__module__.removeprefix("axjax.models._")
    return f"{family}.{axis.__qualname__}" if family != axis.__module__ else axis.__qualname__
