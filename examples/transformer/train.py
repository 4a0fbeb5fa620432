"""Train a byte-level transformer language model on the Python standard library's source.

The corpus is this Python's own standard library (``sysconfig.get_paths()["stdlib"]``),
split into train and validation by file and read as bytes (``Vocab`` = 256): every machine
with Python has it, so nothing is downloaded, and the figures name the Python version. The
model is a decoder-only transformer on named axes, every tensor saying what its axes are:
ids ``[Batch, Pos]``, activations ``[Batch, Pos, Embed]``, projections
``[Head, HeadDim, Embed]``, the MLP's hidden ``[Batch, Pos, Mlp]``, logits
``[Batch, Pos, Vocab]``; pre-norm blocks ``x + attn(ln(x))`` then ``x + mlp(ln(x))``, stacked
along ``ax.nn.Layer`` and run as one scan (``ax.nn.LayerStack``; ``--unroll`` calls them in a
Python loop instead), the unembedding tied to the token embedding. It trains with
``ax.train.fit`` from a token file on disk: the training files are written to
``--logdir``/train.bin (llm.c's format, ``ax.train.write_tokens``, each file after a NUL
byte, which Python source never holds) and read back through a memory map
(``ax.train.TokenWindows``: random windows; ``--data FILE`` trains on a token file of your
own). ``--packed`` packs the files into windows instead (``ax.train.pack_documents``):
attention stays inside each file (``ax.nn.segment_mask``), positions restart at each, and
the loss skips the padding. The run writes curves, TensorBoard files
(``--logdir``/tensorboard) and checkpoints under ``--logdir``, prints the validation bits
per byte next to the unigram baseline, and samples text; ``--stop-after N`` stops a run
early and ``--resume`` continues it from its checkpoint, as if never stopped.

    python examples/transformer/train.py --preset tiny            # CPU, a few minutes
    python examples/transformer/train.py --preset gpt2-small --precision bf16   # a GPU
    python examples/transformer/train.py --devices 8 --parallel data+tensor  # 8 simulated CPUs
    python examples/transformer/train.py --init-from FOLDER  # fine-tune a byte-level GPT-2
    python examples/transformer/train.py --packed             # files packed, no crossing

Two processes on one machine (each with 4 simulated CPU devices; one global mesh of 8)::

    for i in 0 1; do python examples/transformer/train.py --devices 4 --parallel data \
        --coordinator 127.0.0.1:12355 --num-processes 2 --process-id $i & done; wait

``--init-from FOLDER`` starts from a GPT-2 checkpoint in Hugging Face format (``config.json``,
``model.safetensors``; a byte-level one, ``vocab_size`` 256) read by ``axjax.models.gpt2``:
its model replaces ``LM``, the ids renamed to its position axis, and the trained model is
written back as a Hugging Face folder, ``--logdir``/hf.

``--devices N`` simulates N CPU devices (on a GPU or TPU machine the real ones are used) and
``--parallel`` shards the run by axis name over a (data, model) mesh (docs/parallel.md):
``data`` splits ``Batch``; ``tensor`` splits the MLP's hidden axis ``Mlp`` and the
attention heads ``Head`` over 2 devices (Megatron-style: the projections into them are
column-parallel, the ones out of them row-parallel); ``data+tensor`` both; ``fsdp`` also
splits every parameter over ``data`` along ``Embed``.
"""

# JAX annotates its device and process functions with partly unknown parameter types
# (`backend: str | Unknown`), which pyright's strict mode reports at every use.
# pyright: reportUnknownMemberType=false

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import sysconfig
import time
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, final

import equinox as eqx
import jax
import numpy as np
import optax

import axjax as ax
from axjax.models import Caches, gpt2
from axjax.nn import Head, HeadDim

__all__ = [
    "Batch",
    "Block",
    "Config",
    "Decoding",
    "Embed",
    "GPT2Decoding",
    "Head",
    "HeadDim",
    "KPos",
    "LM",
    "Mlp",
    "Pos",
    "Vocab",
    "eval_windows",
    "gpt2_loss",
    "lm_loss",
    "corpus_files",
    "load_corpus",
    "packed_loss",
    "main",
    "sample",
    "unigram_bits",
]


# ----------------------------------------------------------------------------- corpus
@final
class Batch(ax.Axis):
    """Windows of text trained on together."""


@final
class Pos(ax.Axis):
    """Byte positions in a window (the query positions of attention)."""


@final
class KPos(ax.KeyOf[Pos]):
    """The key positions of the queries ``Pos`` (a key role: a causal mask or a softmax that
    swaps the two is an error)."""


Window = tuple[ax.Tensor[ax.I32, Batch, Pos], ax.Tensor[ax.I32, Batch, Pos]]


def stdlib_files(root: str | None = None) -> list[Path]:
    """The ``.py`` files of the standard library (not ``site-packages``), in a fixed order."""
    base = Path(root or sysconfig.get_paths()["stdlib"])
    return sorted(
        p
        for p in base.rglob("*.py")
        if "site-packages" not in p.parts and "dist-packages" not in p.parts
    )


def corpus_files(
    root: str | None = None, valid_every: int = 20
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``(train, valid)`` lists of files, each file's bytes (uint8). A file goes to
    validation when the CRC of its relative path is divisible by ``valid_every`` (the split
    is by file and stable; a corpus too small for that holds out its last file)."""
    base = Path(root or sysconfig.get_paths()["stdlib"])
    files = stdlib_files(str(base))
    if len(files) < 2:
        raise FileNotFoundError(f"{base} has {len(files)} .py file(s): need two or more")
    train: list[np.ndarray] = []
    valid: list[np.ndarray] = []
    for p in files:
        rel = str(p.relative_to(base)).encode()
        data = np.frombuffer(p.read_bytes(), np.uint8)
        (valid if zlib.crc32(rel) % valid_every == 0 else train).append(data)
    if not valid or not train:  # a small corpus: hold out its last file
        both = train + valid
        train, valid = both[:-1], both[-1:]
    return train, valid


def load_corpus(
    root: str | None = None, valid_every: int = 20, limit_bytes: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(train, valid)`` byte arrays (uint8): the files of :func:`corpus_files`, joined
    (the first ``limit_bytes`` of each)."""
    out: list[np.ndarray] = []
    for parts in corpus_files(root, valid_every):
        data = np.concatenate(parts)
        out.append(data[:limit_bytes] if limit_bytes else data)
    return out[0], out[1]


#: the id written before each file in the token file: NUL, a byte Python source never holds
SEPARATOR = 0


def write_corpus(path: Path, root: str | None, limit_bytes: int | None) -> ax.train.TokenFile:
    """The training files as one token file (llm.c's format), each after a NUL byte; with
    ``limit_bytes``, the files up to that many bytes."""
    files: list[np.ndarray] = []
    total = 0
    for data in corpus_files(root)[0]:
        if limit_bytes and total >= limit_bytes:
            break
        files.append(data[: limit_bytes - total] if limit_bytes else data)
        total += len(files[-1])
    path.parent.mkdir(parents=True, exist_ok=True)
    return ax.train.write_tokens(path, files, separator=SEPARATOR)


def unigram_bits(train: np.ndarray, valid: np.ndarray) -> float:
    """Cross-entropy of ``valid`` under the byte frequencies of ``train`` (add-one smoothed),
    in bits per byte: what a model that ignores context achieves."""
    counts = np.bincount(train, minlength=256).astype(np.float64) + 1.0
    logp = np.log2(counts / counts.sum())
    return float(-(np.bincount(valid, minlength=256) * logp).sum() / len(valid))


def eval_windows(data: np.ndarray, batch: int, context: int, max_batches: int) -> list[Window]:
    """Non-overlapping windows from the start of ``data`` (at most ``max_batches`` batches),
    the same every evaluation (``ax.train.TokenWindows`` in file order)."""
    windows = ax.train.TokenWindows(data, batch, context, axes=(Batch, Pos))
    return [w for _, w in zip(range(max_batches), windows.epoch(0), strict=False)]


# ----------------------------------------------------------------------------- model
@final
class Embed(ax.Axis):
    """The model's feature axis."""


@final
class Mlp(ax.Axis):
    """The hidden axis of each block's MLP."""


@final
class Vocab(ax.Axis):
    """The 256 byte values."""


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes of the model and of its training run."""

    context: int = 64
    embed: int = 128
    heads: int = 4
    layers: int = 2
    mlp: int = 512
    batch: int = 32
    steps: int = 600
    lr: float = 3e-3
    vocab: int = 256
    attention: ax.nn.AttentionPath = "auto"  # the attention path (ax.nn.dot_product_attention)


class Block(eqx.Module):
    """``x + attn(ln1(x))``, then ``+ mlp(ln2(x))``: one pre-norm transformer block."""

    ln1: ax.nn.LayerNorm[ax.F32, Embed]
    attn: ax.nn.MultiheadAttention[ax.F32, Pos, KPos, Embed, Head, HeadDim]
    ln2: ax.nn.LayerNorm[ax.F32, Embed]
    up: ax.nn.Affine[ax.F32, Embed, Mlp]
    down: ax.nn.Affine[ax.F32, Mlp, Embed]

    def __init__(self, cfg: Config, key: jax.Array) -> None:
        k1, k2, k3 = jax.random.split(key, 3)
        self.ln1 = ax.nn.LayerNorm(Embed, cfg.embed)
        self.attn = ax.nn.MultiheadAttention(
            Embed,
            cfg.embed,
            num_heads=cfg.heads,
            query_pos=Pos,
            key_pos=KPos,
            causal=True,
            implementation=cfg.attention,
            key=k1,
        )
        self.ln2 = ax.nn.LayerNorm(Embed, cfg.embed)
        self.up = ax.nn.Affine(Embed, Mlp, cfg.embed, cfg.mlp, key=k2)
        self.down = ax.nn.Affine(Mlp, Embed, cfg.mlp, cfg.embed, key=k3)

    def __call__(
        self,
        x: ax.Tensor[ax.F32, Batch, Pos, Embed],
        mask: ax.Tensor[ax.Bool, Batch, Pos, KPos] | None = None,
    ) -> ax.Tensor[ax.F32, Batch, Pos, Embed]:
        # typed F32; under a bf16 policy the same code runs on BF16 tensors
        x = x + self.attn(self.ln1(x), mask=mask)  # mask: packed files' segments
        return x + self.down(ax.gelu(self.up(self.ln2(x))))

    def step(
        self, x: ax.Tensor[ax.F32, Batch, Pos, Embed], cache: ax.nn.KVCache
    ) -> tuple[ax.Tensor[ax.F32, Batch, Pos, Embed], ax.nn.KVCache]:
        """The block on the positions after those in ``cache`` (generation): the same
        weights, the attention reading and extending the cache."""
        y, cache = self.attn(self.ln1(x), cache=cache)
        x = x + y
        return x + self.down(ax.gelu(self.up(self.ln2(x)))), cache


class LM(eqx.Module):
    """Token and position embeddings, ``layers`` blocks, a final norm, tied unembedding.

    The blocks are an ``ax.nn.LayerStack``: their parameters stacked along ``ax.nn.Layer``
    (``up.weight: Tensor[F32, Layer, Mlp, Embed]``) and run as one scan, so the program and
    its compile time do not grow with depth; ``unroll=True`` keeps a tuple of blocks called
    in a Python loop instead (the same values: ``--unroll`` compares them).

    Example:
        >>> lm = LM(Config(), key=jax.random.key(0))
        >>> lm(ids)                  # Tensor[I32, Batch, Pos] -> Tensor[F32, Batch, Pos, Vocab]
    """

    tokens: ax.nn.Embedding[ax.F32, Vocab, Embed]
    positions: ax.Tensor[ax.F32, Pos, Embed]
    blocks: ax.nn.LayerStack[Block, ax.nn.Layer] | tuple[Any, ...]
    ln_f: ax.nn.LayerNorm[ax.F32, Embed]

    def __init__(
        self, cfg: Config, *, key: jax.Array, remat: bool = False, unroll: bool = False
    ) -> None:
        kt, kp, kb = jax.random.split(key, 3)
        self.tokens = ax.nn.Embedding(
            Vocab, Embed, cfg.vocab, cfg.embed, weight_init=ax.nn.init.normal(0.02), key=kt
        )
        self.positions = ax.nn.init.normal(0.02)(kp, {Pos: cfg.context, Embed: cfg.embed})
        stack = ax.nn.LayerStack.init(
            lambda k: Block(cfg, k), cfg.layers, ax.nn.Layer, key=kb, remat=remat
        )
        if unroll:  # the same blocks, called one after another
            blocks = stack.unstack()
            self.blocks = tuple(ax.nn.remat(b) for b in blocks) if remat else tuple(blocks)
        else:
            self.blocks = stack
        self.ln_f = ax.nn.LayerNorm(Embed, cfg.embed)

    def __call__(
        self,
        ids: ax.Tensor[ax.I32, Batch, Pos],
        segments: ax.Tensor[ax.I32, Batch, Pos] | None = None,
        positions: ax.Tensor[ax.I32, Batch, Pos] | None = None,
    ) -> ax.Tensor[Any, Batch, Pos, Vocab]:
        """Logits of ``ids``; a packed batch gives each entry's file (``segments``: attention
        stays inside it) and position in it (``positions``: they restart at each file)."""
        return ax.contract(self.hidden(ids, segments, positions), self.tokens.weight, over=Embed)

    def hidden(
        self,
        ids: ax.Tensor[ax.I32, Batch, Pos],
        segments: ax.Tensor[ax.I32, Batch, Pos] | None = None,
        positions: ax.Tensor[ax.I32, Batch, Pos] | None = None,
    ) -> ax.Tensor[ax.F32, Batch, Pos, Embed]:
        """The final hidden states (after ``ln_f``), which the tied head turns into logits."""
        # a precision policy casts the whole model, so the tables are in the compute dtype
        x: ax.Tensor[ax.F32, Batch, Pos, Embed] = self.tokens(ids)
        if positions is None:
            x = x + ax.broadcast(ax.slice(self.positions, Pos, 0, ids.size(Pos)), x)
        else:
            x = x + ax.broadcast(
                ax.take(ax.rename(self.positions, Pos, _Slot), _Slot, positions), x
            )
        mask = None if segments is None else ax.nn.segment_mask(segments, Pos, KPos)
        if isinstance(self.blocks, ax.nn.LayerStack):
            x = self.blocks(x, mask)  # one scan over Layer
        else:
            for block in self.blocks:
                x = block(x, mask)
        return self.ln_f(x)

    # generation (ax.nn.generate): the ax.nn.Decoder protocol
    def init_cache(
        self, batch: Mapping[type[ax.Axis], int], max_len: int
    ) -> tuple[ax.nn.KVCache, ...]:
        """An empty KV cache per block, ``max_len`` positions (at most the context)."""
        if max_len > self.positions.size(Pos):
            raise ValueError(
                f"LM: max_len {max_len} exceeds the {self.positions.size(Pos)} positions the "
                "model has embeddings for"
            )
        return tuple(b.attn.init_cache(batch, max_len) for b in self._blocks())

    def _blocks(self) -> tuple[Block, ...]:
        if isinstance(self.blocks, ax.nn.LayerStack):
            return tuple(self.blocks.unstack())
        # remat only matters for a backward pass: generation runs the blocks themselves
        blocks: list[Block] = []
        for b in self.blocks:
            inner = getattr(b, "module", b)  # an ax.nn.Remat wraps its block
            assert isinstance(inner, Block)
            blocks.append(inner)
        return tuple(blocks)

    def decode(
        self, ids: ax.Tensor[ax.I32, Batch, Pos], *, cache: tuple[ax.nn.KVCache, ...]
    ) -> tuple[ax.Tensor[Any, Batch, Pos, Vocab], tuple[ax.nn.KVCache, ...]]:
        """Logits of the positions after those cached (the prompt, then one at a time)."""
        # each row's positions, after those its cache holds: [Batch, Pos]
        where = cache[0].positions(Pos, ids.size(Pos))
        table = ax.rename(self.positions, Pos, _Slot)  # take's axis, replaced by Pos
        x: ax.Tensor[ax.F32, Batch, Pos, Embed] = self.tokens(ids)
        x = x + ax.broadcast(ax.take(table, _Slot, where), x)
        new: list[ax.nn.KVCache] = []
        for block, c in zip(self._blocks(), cache, strict=True):
            x, c = block.step(x, c)
            new.append(c)
        return ax.contract(self.ln_f(x), self.tokens.weight, over=Embed), tuple(new)


@final
class _Slot(ax.Axis):
    """The rows of the position table, gathered by position during generation."""


class Decoding(eqx.Module):
    """``LM`` seen through ``ax.nn.Decoder``: ``init_cache`` and ``__call__(ids, cache=)``."""

    lm: LM

    def init_cache(
        self, batch: Mapping[type[ax.Axis], int], max_len: int
    ) -> tuple[ax.nn.KVCache, ...]:
        return self.lm.init_cache(batch, max_len)

    def __call__(
        self, ids: ax.Tensor[ax.I32, Batch, Pos], *, cache: tuple[ax.nn.KVCache, ...]
    ) -> tuple[ax.Tensor[Any, Batch, Pos, Vocab], tuple[ax.nn.KVCache, ...]]:
        return self.lm.decode(ids, cache=cache)


class GPT2Decoding(eqx.Module):
    """A pretrained ``axjax.models.gpt2.GPT2`` seen through ``ax.nn.Decoder`` on this file's
    ``Pos`` and ``Vocab`` (the model's own axes renamed)."""

    model: gpt2.GPT2

    def init_cache(self, batch: Mapping[type[ax.Axis], int], max_len: int) -> Caches:
        return self.model.init_cache(batch, max_len)

    def __call__(
        self, ids: ax.Tensor[ax.I32, Batch, Pos], *, cache: Caches
    ) -> tuple[ax.Tensor[ax.F32, Batch, Pos, Vocab], Caches]:
        logits, cache = self.model(ax.rename(ids, Pos, gpt2.Pos), cache=cache)
        return _ours(logits), cache


def _ours(
    logits: ax.Tensor[ax.F32, Batch, gpt2.Pos, gpt2.Vocab],
) -> ax.Tensor[ax.F32, Batch, Pos, Vocab]:
    """GPT-2's logits on this file's axes."""
    out: ax.Tensor[ax.F32, Batch, Pos, Vocab] = ax.rename(
        ax.rename(logits, gpt2.Pos, Pos), gpt2.Vocab, Vocab
    )
    return out


def gpt2_loss(
    model: gpt2.GPT2,
    ids: ax.Tensor[ax.I32, Batch, Pos],
    targets: ax.Tensor[ax.I32, Batch, Pos],
) -> ax.Tensor[ax.F32]:
    """:func:`lm_loss` of a pretrained GPT-2 (``--init-from``)."""
    logits = _ours(ax.astype(model(ax.rename(ids, Pos, gpt2.Pos)), ax.F32))
    per_byte: ax.Tensor[ax.F32, Batch, Pos] = ax.train.softmax_cross_entropy(logits, targets, Vocab)
    loss: ax.Tensor[ax.F32] = ax.mean(ax.mean(per_byte, Pos), Batch)
    return loss


def lm_loss(
    model: LM, ids: ax.Tensor[ax.I32, Batch, Pos], targets: ax.Tensor[ax.I32, Batch, Pos]
) -> ax.Tensor[ax.F32]:
    """Mean next-token cross-entropy (nats) over ``Batch`` and ``Pos``, computed in f32.

    The tied head and the loss are one blockwise op (``ax.train.linear_cross_entropy``):
    the float32 ``[Batch, Pos, Vocab]`` logits are never held whole, which is what matters
    at a real vocabulary (``python -m benchmarks.gpt2``)."""
    per_byte: ax.Tensor[ax.F32, Batch, Pos] = ax.train.linear_cross_entropy(
        model.hidden(ids), model.tokens.weight, targets, Vocab
    )
    loss: ax.Tensor[ax.F32] = ax.mean(ax.mean(per_byte, Pos), Batch)
    return loss


def packed_loss(
    model: LM,
    ids: ax.Tensor[ax.I32, Batch, Pos],
    targets: ax.Tensor[ax.I32, Batch, Pos],
    segments: ax.Tensor[ax.I32, Batch, Pos] | None = None,
    positions: ax.Tensor[ax.I32, Batch, Pos] | None = None,
) -> ax.Tensor[ax.F32]:
    """:func:`lm_loss` of a packed batch (``ax.train.PackedBatch``): the mean over the
    positions that hold a file (segment > 0), the padding left out; a batch of plain
    windows (the evaluation's) is :func:`lm_loss`'s."""
    if segments is None:
        return lm_loss(model, ids, targets)
    per_byte: ax.Tensor[ax.F32, Batch, Pos] = ax.train.linear_cross_entropy(
        model.hidden(ids, segments, positions), model.tokens.weight, targets, Vocab
    )
    weight: ax.Tensor[ax.F32, Batch, Pos] = ax.astype(ax.greater(segments, 0), ax.F32)
    loss: ax.Tensor[ax.F32] = ax.sum(per_byte * weight, (Batch, Pos)) / ax.sum(weight, (Batch, Pos))
    return loss


# ----------------------------------------------------------------------------- training
ROOT = Path(__file__).resolve().parents[2]

PRESETS = {
    "test": Config(context=16, embed=32, heads=2, layers=1, mlp=64, batch=8, steps=4),
    "tiny": Config(),
    "gpt2-small": Config(
        context=1024, embed=768, heads=12, layers=12, mlp=3072, batch=16, steps=20_000, lr=6e-4
    ),
}

PROMPT = b"def main(argv=None):\n    "


def sample(
    model: LM | gpt2.GPT2,
    prompt: bytes,
    n: int,
    context: int,
    key: jax.Array,
    temperature: float = 0.8,
    top_k: int | None = None,
) -> bytes:
    """Continue ``prompt`` by ``n`` bytes with ``ax.nn.generate`` (a KV cache, one jitted
    decode loop): at most ``context - 1`` bytes, after the prompt's last ``context - n``
    (at least one). ``temperature=0`` is greedy."""
    n = min(n, context - 1)
    tail = prompt[-max(context - n, 1) :]
    ids = ax.tensor(
        np.frombuffer(tail, np.uint8).astype(np.int32)[None, :], Batch, Pos, dtype=ax.I32
    )
    decoder = GPT2Decoding(model) if isinstance(model, gpt2.GPT2) else Decoding(model)
    out = ax.nn.generate(
        decoder, ids, n, key, temperature=temperature, top_k=top_k, max_len=context
    )
    return bytes(np.asarray(out.array)[0].astype(np.uint8).tolist())


#: ``--parallel``: the size of mesh axis "model", the compute rules and the parameter rules.
PARALLEL: dict[str, ax.train.ParallelPreset] = {
    "data": ax.train.ParallelPreset(1, {Batch: "data"}),
    "tensor": ax.train.ParallelPreset(2, {Mlp: "model", Head: "model"}),
    "data+tensor": ax.train.ParallelPreset(2, {Batch: "data", Mlp: "model", Head: "model"}),
    "fsdp": ax.train.ParallelPreset(1, {Batch: "data"}, {Embed: "data"}),
}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    p.add_argument("--steps", type=int, default=None, help="training steps (preset's default)")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--layers", type=int, default=None)
    p.add_argument(
        "--precision",
        choices=["f32", "bf16", "f16"],
        default="f32",
        help="compute dtype (parameters stay f32; f16 uses dynamic loss scaling)",
    )
    p.add_argument("--remat", action="store_true", help="recompute each block in backward")
    p.add_argument(
        "--unroll",
        action="store_true",
        help="call the blocks in a Python loop (default: one scan over a LayerStack)",
    )
    p.add_argument("--eval-batches", type=int, default=16)
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--sample-bytes", type=int, default=300)
    p.add_argument(
        "--generate",
        type=int,
        default=None,
        metavar="N",
        help="after training, print a greedy N-byte continuation of the prompt "
        "(ax.nn.generate with a KV cache)",
    )
    p.add_argument(
        "--init-from",
        default=None,
        metavar="FOLDER",
        help="start from a byte-level GPT-2 (vocab_size 256) in Hugging Face format "
        "(config.json, model.safetensors); a BPE checkpoint's text goes through "
        "axjax.models.generate_text instead",
    )
    p.add_argument("--limit-bytes", type=int, default=None, help="use the first N bytes")
    p.add_argument(
        "--data",
        default=None,
        metavar="FILE",
        help="train on this token file of byte ids (.bin, llm.c's format, or .npy) instead of "
        "writing the stdlib's into --logdir/train.bin",
    )
    p.add_argument(
        "--packed",
        action="store_true",
        help="pack the files into windows (ax.train.pack_documents: attention inside each "
        "file, positions restarting, no loss on padding) instead of random windows",
    )
    p.add_argument("--stop-after", type=int, default=None, metavar="N", help="stop after N steps")
    p.add_argument(
        "--resume", action="store_true", help="continue from the newest checkpoint in --logdir"
    )
    p.add_argument("--stdlib", default=None, help="corpus root (default: this Python's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--logdir", default=str(ROOT / "runs" / "transformer"))
    p.add_argument("--no-progress", action="store_true")
    ax.train.add_parallel_args(p, PARALLEL)  # --devices, --parallel, jax.distributed
    return p.parse_args(argv)


def pretrained(folder: str, cfg: Config, *, unroll: bool = False) -> tuple[gpt2.GPT2, Config]:
    """``--init-from``: the GPT-2 in ``folder`` (its blocks stacked in one scan, as this
    example's own model, unless ``unroll``) and the config with its context (at most the
    model's positions); a vocabulary other than the 256 bytes is refused."""
    model = gpt2.from_hf(folder, unroll=unroll)
    if model.config.vocab_size != cfg.vocab:
        raise SystemExit(
            f"--init-from {folder}: a vocabulary of {model.config.vocab_size}; this example "
            f"reads bytes and needs {cfg.vocab}"
        )
    return model, dataclasses.replace(cfg, context=min(cfg.context, model.config.n_positions))


def training_data(
    args: argparse.Namespace, cfg: Config, par: ax.train.Parallel | None, key: jax.Array
) -> tuple[Any, int]:
    """The training batches and the epochs they make ``cfg.steps`` in: random windows of
    the token file (one epoch of ``cfg.steps`` batches, each process reading only its rows
    under ``par``), or with ``--packed`` its files packed into windows (as many epochs as
    the steps need). The file is ``--data``, or the stdlib's training files written to
    ``--logdir``/train.bin (each process its own copy)."""
    if args.data:
        tokens = ax.train.TokenFile(args.data)
        tokens.check_vocab(cfg.vocab)  # a streaming scan: every id a byte
    else:
        name = "train.bin" if jax.process_count() == 1 else f"train-{jax.process_index()}.bin"
        tokens = write_corpus(Path(args.logdir) / name, args.stdlib, args.limit_bytes)
    if not args.packed:
        windows = ax.train.TokenWindows(
            tokens, cfg.batch, cfg.context, key=key, random=True, steps=cfg.steps,
            axes=(Batch, Pos), parallel=par,
        )  # fmt: skip
        return windows, 1
    if args.init_from:
        raise SystemExit("--packed trains this file's LM (segments and positions), not GPT-2")
    packed = ax.train.pack_documents(
        tokens, cfg.context, cfg.batch, separator=SEPARATOR, key=key, axes=(Batch, Pos)
    )
    return packed, math.ceil(cfg.steps / len(packed))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    par = ax.train.parallel_from_args(args, PARALLEL)  # before anything starts JAX's backend
    main_process = jax.process_index() == 0
    cfg = PRESETS[args.preset]
    cfg = dataclasses.replace(
        cfg,
        steps=args.steps or cfg.steps,
        batch=args.batch_size or cfg.batch,
        layers=args.layers or cfg.layers,
    )
    train_bytes, valid_bytes = load_corpus(args.stdlib, limit_bytes=args.limit_bytes)
    baseline = unigram_bits(train_bytes, valid_bytes)

    def say(text: str) -> None:  # only process 0 prints
        if main_process:
            print(text)

    say(
        f"corpus: Python {sys.version.split()[0]} stdlib, {len(train_bytes):,} train bytes, "
        f"{len(valid_bytes):,} validation bytes; unigram baseline {baseline:.3f} bits/byte"
        + (f"; {par!r}" if par is not None else "")
    )
    init_key, run_key, sample_key = jax.random.split(jax.random.key(args.seed), 3)
    model: LM | gpt2.GPT2
    loss_fn: Any = lm_loss
    if args.init_from:
        model, cfg = pretrained(args.init_from, cfg, unroll=args.unroll)
        loss_fn = gpt2_loss
        say(f"starting from {args.init_from}: {model.config}")
    else:
        model = LM(cfg, key=init_key, remat=args.remat, unroll=args.unroll)
    train, epochs = training_data(args, cfg, par, jax.random.fold_in(jax.random.key(args.seed), 7))
    if args.packed:
        loss_fn = packed_loss
    valid = eval_windows(valid_bytes, cfg.batch, cfg.context, args.eval_batches)
    if par is not None:  # fit places the training batches; these are placed here
        valid = [par.place_batch(w) for w in valid]
    schedule = optax.warmup_cosine_decay_schedule(
        0.0, cfg.lr, min(100, cfg.steps // 10 + 1), cfg.steps, cfg.lr / 10
    )
    optimizer = optax.chain(
        optax.clip_by_global_norm(1.0), optax.adamw(schedule, b2=0.99, weight_decay=0.01)
    )
    logdir = Path(args.logdir)
    policy = (
        None
        if args.precision == "f32"
        else ax.nn.Policy.mixed(ax.BF16 if args.precision == "bf16" else ax.F16)
    )
    start = time.perf_counter()
    result = ax.train.fit(
        model,
        optimizer,
        loss_fn,
        train,
        epochs=epochs,
        max_steps=min(args.stop_after or cfg.steps, cfg.steps),
        key=run_key,
        eval_data=valid,
        batch_axis=Batch,  # this file's own Batch axis weights the evaluation's batches
        log_every=args.log_every,
        logdir=logdir,
        checkpoints=ax.train.Checkpoints(
            logdir / "checkpoints", keep=2, sharded=jax.process_count() > 1
        ),  # orbax: shards per process
        resume=args.resume,
        progress=not args.no_progress,
        precision=policy,
        parallel=par,
    )
    seconds = time.perf_counter() - start
    bits = [r for r in result.history if "eval_loss" in r][-1]["eval_loss"] / math.log(2)
    per_step = seconds / max(result.step, 1)
    trained = result.model if par is None else ax.train.unsharded(result.model)
    if main_process:
        ax.nn.save_safetensors(trained, logdir / "model.safetensors")
        if isinstance(trained, gpt2.GPT2):  # back to the format it came in
            gpt2.to_hf(trained, logdir / "hf")
    text = (
        sample(trained, PROMPT, args.sample_bytes, cfg.context, sample_key)
        if args.sample_bytes
        else b""
    )
    say(
        f"validation {bits:.3f} bits/byte (unigram baseline {baseline:.3f}) after "
        f"{result.step} steps, {seconds:.1f} s ({per_step * 1e3:.0f} ms/step); curves: "
        f"{logdir / 'curves.png'}, TensorBoard: {logdir / 'tensorboard'}"
    )
    say("sample:\n" + (PROMPT + text).decode("utf-8", errors="replace"))
    continuation = b""
    if args.generate:
        continuation = sample(trained, PROMPT, args.generate, cfg.context, sample_key, 0.0)
        say("continuation:\n" + (PROMPT + continuation).decode("utf-8", errors="replace"))
    return {
        "bits": bits,
        "baseline": baseline,
        "seconds": seconds,
        "steps": result.step,
        "model": result.model,
        "sample": text,
        "continuation": continuation,
    }


if __name__ == "__main__":
    main()
