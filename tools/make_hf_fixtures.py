"""Make the small Hugging Face checkpoints that tests/models/ reads (offline, from a config).

Each fixture is a folder ``tests/models/fixtures/<name>/`` with what ``save_pretrained``
writes for a model and its tokenizer, and what ``transformers`` computes with them:

- ``config.json``, ``generation_config.json``, ``model.safetensors``: a random (seeded)
  model, its biases and norm parameters perturbed away from 0 and 1 so that a wrong mapping
  shows in the logits; its ``vocab_size`` is the tokenizer's (:data:`VOCAB`).
- the tokenizer: a byte-level BPE trained here on :data:`CORPUS` (English and a little
  accented Latin, Greek, CJK and emoji): the 256 bytes, :data:`VOCAB` - 256 - its special
  tokens merges, and the special tokens at the end of the vocabulary. GPT-2 has
  ``<|endoftext|>`` (BOS = EOS, no pad token, as the real GPT-2), in ``tokenizer.json``,
  ``vocab.json`` + ``merges.txt`` and ``tokenizer_config.json`` as the hub's folders; the
  Llamas and the Mistral share a Llama-3 style ``tokenizer.json`` (the Llama-3 split
  pattern, a post-processor that adds ``<|begin_of_text|>``) with ``<|end_of_text|>`` (EOS)
  and ``<|pad|>``; the Qwen2 has Qwen2's (no BOS, ``<|endoftext|>`` its EOS and pad).
- ``tokenizer_reference.json``: :data:`TEXTS` (and one with the fixture's EOS string), with
  the ids ``AutoTokenizer.from_pretrained(folder)`` gives (``tok(text)["input_ids"]``), its
  ``decode(ids)`` and ``decode(ids, skip_special_tokens=True)``, and its special token ids.
- ``reference.safetensors``: ``ids`` [2, 12] (random token ids) and their ``logits``;
  ``step_logits``, one cached decode step after the first ``prefix`` (metadata) positions;
  and transformers' ragged greedy generation: ``gen_prompt`` [3, P], three of the texts
  left-padded with ``gen_pad`` (metadata) to P tokens, ``gen_mask`` [3, P] their attention
  mask, ``gen_tokens`` [3, 12] the tokens ``model.generate(gen_prompt,
  attention_mask=gen_mask, do_sample=False, max_new_tokens=12, eos_token_id=gen_eos,
  pad_token_id=gen_pad)`` adds (padded with ``gen_pad`` where it stopped early),
  ``gen_lengths`` [3] each row's generated tokens up to and including its first
  ``gen_eos`` (12 where there is none). All int32.

  ``gen_eos`` is chosen from a first greedy run without an EOS: the first token (in the
  order they come, row by row) that one row emits before its last step and another never
  emits, so the fixture has a row that stops early and one that runs to the end.
  ``gen_pad`` is the tokenizer's pad token (the Llamas' ``<|pad|>``) or, for GPT-2 which
  has none, ``<|endoftext|>``. The script checks that each row is what its prompt alone
  (unpadded) generates.

Needs torch, transformers and tokenizers (not axjax's dependencies; the checked-in
fixtures let the test suite run without them), besides numpy and safetensors. Install them
in an environment of their own, then run the script from the checkout's root::

    python -m venv .venv-hf
    .venv-hf/bin/pip install torch transformers tokenizers safetensors numpy
    .venv-hf/bin/python tools/make_hf_fixtures.py            # every fixture
    .venv-hf/bin/python tools/make_hf_fixtures.py gpt2       # one

A new architecture adds a builder to ``BUILDERS`` (a function of the seed that returns an
``(eval-mode) transformers`` model) and a tokenizer to ``TOKENIZERS``; :func:`make` does
the rest. Every file is the same bytes from one run to the next.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "models" / "fixtures"
#: token ids of the reference logits: [batch, positions]
BATCH, LENGTH = 2, 12
#: the decode step's reference: the first PREFIX positions are the cached prompt, the
#: next one is the step
PREFIX = 8
SEED = 0
#: the tokenizers' vocabulary (bytes, merges and special tokens): the models' vocab_size
VOCAB = 384
#: GPT-2's one special token (its last id), as the real GPT-2's 50256
ENDOFTEXT = "<|endoftext|>"
#: the Llamas' special tokens, the last ids in this order
LLAMA_SPECIALS = ("<|begin_of_text|>", "<|end_of_text|>", "<|pad|>")
#: Llama 3's pre-tokenizer split (tokenizer.json of meta-llama/Meta-Llama-3-8B)
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: Qwen2's special tokens (the last ids) and its split (Llama 3's, digits one by one)
QWEN2_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: ragged generation: new tokens per row, and the texts (of TEXTS) that are the prompts
GEN_STEPS = 12
GEN_TEXTS = (0, 1, 2)

#: the tokenizers' training text, paragraph by paragraph
CORPUS = """\
Named axes say what each dimension of a tensor means. A batch of token ids has a batch axis
and a position axis; the logits add a vocabulary axis. When two tensors meet, their axes are
matched by name, not by position, so a transposed weight is an error and not a silent bug.

The quick brown fox jumps over the lazy dog. The five boxing wizards jump quickly. How
vexingly quick daft zebras jump! Pack my box with five dozen liquor jugs.

A tokenizer turns text into token ids and back. Byte-level BPE starts from the 256 bytes, so
every string can be encoded, and learns merges of frequent pairs: "th", "the", " the",
"ing", " and". The model reads the ids; the tokenizer decodes the ids it generates.

In 2024 the model was trained for 3 epochs on 1,000,000 tokens at a learning rate of 3e-4.
Numbers like 42, 3.14 and 2718 are split into digits and groups of digits.

Café crème, naïve résumé, déjà vu, Zürich and São Paulo. Ελληνικά: αλφα, βήτα, γάμμα.
日本語のテキスト、中文文本。Emoji too: 🙂 🚀 ✨.

Hello world! Hello, tokenizer. Hello again, world: the end of the text is near, and then
it ends.
"""

#: the texts of tokenizer_reference.json (a text with the fixture's EOS string is added).
#: The first three are the prompts of the ragged generation (GEN_TEXTS), of different
#: lengths; chosen so that every fixture's greedy run has a token that stops one row early
#: and never comes in another (GPT-2's random model falls into one token from most prompts)
TEXTS = (
    "and",
    "zebras jump",
    "日本語",
    " the model reads the ids and the tokenizer decodes them",
    "The quick brown fox jumps over the lazy dog.",
    "Café crème, naïve résumé — Ελληνικά, 日本語 🙂🚀",
    "Numbers: 42, 3.14 and 1,000,000.\nA new line,\ttab and  two spaces.",
    "",
    "unseen words: xylophone qwertz ÆØÅ ß €",
)


def gpt2(seed: int) -> Any:
    """GPT-2: 2 layers, width 48, 4 heads, vocabulary VOCAB, context 64; BOS = EOS =
    ``<|endoftext|>`` (the last id)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(
        n_layer=2,
        n_embd=48,
        n_head=4,
        vocab_size=VOCAB,
        n_positions=64,
        # weights 5x GPT-2's initial scale: attention far from uniform, so that a
        # mapping that swaps queries and keys shows in the logits
        initializer_range=0.1,
        bos_token_id=VOCAB - 1,
        eos_token_id=VOCAB - 1,
        attn_implementation="eager",
    )
    return GPT2LMHeadModel(config)


def llama(kv_heads: int, tied: bool, theta: float) -> Callable[[int], Any]:
    """Llama: 2 layers, hidden 48, 4 heads of which ``kv_heads`` key-value heads,
    intermediate 96, vocabulary VOCAB, context 64; ``tie_word_embeddings=tied`` and
    ``rope_theta=theta`` (the variants cover both ties and a theta other than the default);
    BOS and EOS the tokenizer's (no pad token in the config: its embedding row would be
    zeroed)."""

    def build(seed: int) -> Any:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(seed)
        first = VOCAB - len(LLAMA_SPECIALS)
        config = LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=48,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=kv_heads,
            max_position_embeddings=64,
            rms_norm_eps=1e-5,
            rope_theta=theta,
            tie_word_embeddings=tied,
            initializer_range=0.2,  # logits of order 1, so that a wrong mapping shows
            bos_token_id=first,
            eos_token_id=first + 1,
            attn_implementation="eager",
        )
        return LlamaForCausalLM(config)

    return build


def mistral(window: int | None) -> Callable[[int], Any]:
    """Mistral: Llama's sizes (2 layers, hidden 48, 4 heads of which 2 key-value heads,
    intermediate 96, vocabulary VOCAB, context 64), untied, and ``sliding_window=window``:
    shorter than the recorded ids (LENGTH positions) and the cached step's prefix, so that
    the window shows in the logits."""

    def build(seed: int) -> Any:
        import torch
        from transformers import MistralConfig, MistralForCausalLM

        torch.manual_seed(seed)
        first = VOCAB - len(LLAMA_SPECIALS)
        config = MistralConfig(
            vocab_size=VOCAB,
            hidden_size=48,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            rms_norm_eps=1e-5,
            sliding_window=window,
            initializer_range=0.2,
            bos_token_id=first,
            eos_token_id=first + 1,
            attn_implementation="eager",
        )
        return MistralForCausalLM(config)

    return build


def qwen2(seed: int) -> Any:
    """Qwen2: Llama's sizes (2 layers, hidden 48, 4 heads of which 2 key-value heads,
    intermediate 96, vocabulary VOCAB, context 64), q/k/v biases (perturbed off 0 as every
    1-D parameter), the head tied to the embedding as Qwen2's small models, no sliding
    window; no BOS, ``<|endoftext|>`` the EOS (:func:`qwen2_tokenizer`)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    eot = VOCAB - len(QWEN2_SPECIALS)  # <|endoftext|>
    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        initializer_range=0.2,
        bos_token_id=None,
        eos_token_id=eot,
        attn_implementation="eager",
    )
    return Qwen2ForCausalLM(config)


# ----------------------------------------------------------------------------- tokenizers
def train_bpe(pre_tokenizer: Any, specials: tuple[str, ...]) -> Any:
    """A byte-level BPE ``tokenizers.Tokenizer`` trained on :data:`CORPUS`: the 256 bytes
    and merges up to ``VOCAB - len(specials)``, then ``specials`` (the last ids)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB - len(specials),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS.split("\n\n"), trainer)
    assert tok.get_vocab_size() == VOCAB - len(specials), "the corpus gives too few merges"
    tok.add_special_tokens(list(specials))
    assert [tok.token_to_id(s) for s in specials] == list(range(VOCAB - len(specials), VOCAB))
    merges = json.loads(tok.to_str())["model"]["merges"]
    assert len(merges) >= 100 and tok.get_vocab_size() == VOCAB, len(merges)
    return tok


def gpt2_tokenizer(folder: Path) -> None:
    """GPT-2's tokenizer in ``folder``: ``tokenizer.json``, ``tokenizer_config.json`` (by
    transformers), and ``vocab.json`` (``<|endoftext|>`` included) + ``merges.txt`` as the
    hub's GPT-2 has them (transformers 5 no longer writes them)."""
    from tokenizers import pre_tokenizers
    from transformers import GPT2TokenizerFast

    tok = train_bpe(pre_tokenizers.ByteLevel(add_prefix_space=False), (ENDOFTEXT,))
    fast = GPT2TokenizerFast(
        tokenizer_object=tok, bos_token=ENDOFTEXT, eos_token=ENDOFTEXT, unk_token=ENDOFTEXT
    )
    fast.save_pretrained(folder)
    model = json.loads(tok.to_str())["model"]
    vocab = {**model["vocab"], ENDOFTEXT: tok.token_to_id(ENDOFTEXT)}
    by_id = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
    (folder / "vocab.json").write_text(json.dumps(by_id, ensure_ascii=False) + "\n")
    merges = [" ".join(m) if isinstance(m, list) else m for m in model["merges"]]
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")


def llama_tokenizer(folder: Path) -> None:
    """The Llamas' tokenizer in ``folder``: a Llama-3 style ``tokenizer.json`` (split
    pattern, byte-level, a post-processor adding ``<|begin_of_text|>``) and
    ``tokenizer_config.json``, by transformers' ``PreTrainedTokenizerFast``."""
    from tokenizers import Regex, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    split = pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False)
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok = train_bpe(pre_tokenizers.Sequence([split, byte_level]), LLAMA_SPECIALS)
    bos, eos, pad = LLAMA_SPECIALS
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{bos} $A",
                pair=f"{bos} $A {bos}:1 $B:1",
                special_tokens=[(bos, tok.token_to_id(bos))],
            ),
        ]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=bos, eos_token=eos, pad_token=pad
    )
    fast.save_pretrained(folder)


def qwen2_tokenizer(folder: Path) -> None:
    """Qwen2's tokenizer in ``folder``: byte-level BPE with Qwen2's split (digits one by
    one), its special tokens (``<|endoftext|>``: EOS and pad, no BOS: nothing is added to
    the ids), written by ``transformers``' ``PreTrainedTokenizerFast``."""
    from tokenizers import Regex, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    split = pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False)
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok = train_bpe(pre_tokenizers.Sequence([split, byte_level]), QWEN2_SPECIALS)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    eot = QWEN2_SPECIALS[0]
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eot, pad_token=eot)
    fast.save_pretrained(folder)


#: name -> builder (a function of the seed returning a transformers model)
BUILDERS: dict[str, Callable[[int], Any]] = {
    "gpt2": gpt2,
    "llama-kv4": llama(4, tied=False, theta=10000.0),
    "llama-kv2": llama(2, tied=False, theta=500000.0),
    "llama-kv1": llama(1, tied=True, theta=10000.0),
    "mistral-sw4": mistral(4),
    "qwen2-tied": qwen2,
}
#: name -> the function that writes its tokenizer into a folder
TOKENIZERS: dict[str, Callable[[Path], None]] = {
    "gpt2": gpt2_tokenizer,
    "llama-kv4": llama_tokenizer,
    "llama-kv2": llama_tokenizer,
    "llama-kv1": llama_tokenizer,
    "mistral-sw4": llama_tokenizer,
    "qwen2-tied": qwen2_tokenizer,
}


def texts(tok: Any) -> list[str]:
    """:data:`TEXTS` and one with the tokenizer's EOS string between two words."""
    return [*TEXTS, f"The end.{tok.eos_token} And a new text"]


def tokenizer_reference(tok: Any) -> dict[str, Any]:
    """What transformers' tokenizer gives for :func:`texts`: ids and the two decodes, and
    its special token ids."""
    rows = []
    for text in texts(tok):
        ids = [int(i) for i in tok(text)["input_ids"]]
        rows.append(
            {
                "text": text,
                "ids": ids,
                "decode": tok.decode(ids),
                "decode_skip_special": tok.decode(ids, skip_special_tokens=True),
            }
        )
    assert any(i >= 256 for r in rows for i in r["ids"]), "no merge in the recorded ids"
    assert any(tok.eos_token in r["text"] for r in rows)
    return {
        "texts": rows,
        "vocab_size": len(tok),
        "bos_token_id": tok.bos_token_id,
        "eos_token_id": tok.eos_token_id,
        "pad_token_id": tok.pad_token_id,
    }


def perturb(model: Any, seed: int) -> None:
    """Move every 1-D parameter (biases, norm weights and biases) off its initial value
    (0 or 1) by a seeded normal perturbation, so that a mapping that swaps or drops one
    changes the logits."""
    import torch

    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            if p.ndim == 1:
                p.add_(0.2 * torch.randn(p.shape, generator=g))


def reference(model: Any, seed: int) -> dict[str, np.ndarray]:
    """Logits of fixed ids, and of one cached decode step after the first ``PREFIX``."""
    import torch

    g = np.random.default_rng(seed)
    vocab = model.config.vocab_size
    ids = g.integers(0, vocab, (BATCH, LENGTH)).astype(np.int32)
    t = torch.from_numpy(ids.astype(np.int64))
    with torch.no_grad():
        logits = model(t).logits.float().numpy()
        prompt = model(t[:, :PREFIX], use_cache=True)
        step = model(t[:, PREFIX : PREFIX + 1], past_key_values=prompt.past_key_values)
    return {
        "ids": ids,
        "logits": logits.astype(np.float32),
        "step_logits": step.logits.float().numpy().astype(np.float32),
    }


# ----------------------------------------------------------------------------- generation
def _greedy(model: Any, ids: Any, mask: Any, eos: int | None, pad: int) -> np.ndarray:
    """transformers' greedy tokens after the prompt, [B, GEN_STEPS] (padded with ``pad``
    where it stopped early); ``eos=None``: no EOS, every row runs to the end."""
    import copy

    import torch

    config = copy.deepcopy(model.generation_config)
    config.eos_token_id, config.pad_token_id = eos, pad
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=mask,
            generation_config=config,
            do_sample=False,
            max_new_tokens=GEN_STEPS,
        )
    new = out[:, ids.shape[1] :].numpy().astype(np.int32)
    padded = np.full((new.shape[0], GEN_STEPS), pad, np.int32)
    padded[:, : new.shape[1]] = new
    return padded


def choose_eos(tokens: np.ndarray, pad: int) -> int:
    """The first token (row by row, in order) that one row emits before its last step and
    another row never emits; one emitted after the first step is preferred."""
    order = list(dict.fromkeys(int(t) for t in tokens.reshape(-1)))
    for earliest in (1, 0):
        for t in order:
            firsts = [list(row).index(t) if t in row else None for row in tokens]
            early = any(f is not None and earliest <= f < GEN_STEPS - 1 for f in firsts)
            if t != pad and early and any(f is None for f in firsts):
                return t
    raise AssertionError(f"no token stops one row early and not another: {tokens}")


def generation(model: Any, tok: Any) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """transformers' ragged greedy generation from three prompts (the ``gen_*`` arrays and
    their ``gen_eos``, ``gen_pad`` metadata); each row checked against its prompt alone."""
    import copy

    import torch

    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    prompts = [texts(tok)[i] for i in GEN_TEXTS]
    padding = copy.deepcopy(tok)
    padding.pad_token = padding.convert_ids_to_tokens(pad)  # GPT-2: <|endoftext|>
    batch = padding(prompts, padding=True, padding_side="left", return_tensors="pt")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    ids = torch.where(mask.bool(), ids, torch.full_like(ids, pad))
    lengths = mask.sum(1).tolist()
    assert len(set(lengths)) == len(lengths), f"prompts of the same length: {lengths}"
    eos = choose_eos(_greedy(model, ids, mask, None, pad), pad)
    tokens = _greedy(model, ids, mask, eos, pad)
    ends = [list(row).index(eos) + 1 if eos in row else GEN_STEPS for row in tokens]
    assert min(ends) < GEN_STEPS and max(ends) == GEN_STEPS and eos not in tokens[:, -1:]
    for i, row in enumerate(tokens):
        assert (row[ends[i] :] == pad).all(), f"row {i} is not padded after its EOS"
        alone = tok(prompts[i], return_tensors="pt")["input_ids"]
        single = _greedy(model, alone, torch.ones_like(alone), eos, pad)[0]
        assert (single == row).all(), f"row {i}: {row} batched, {single} alone"
    arrays = {
        "gen_prompt": ids.numpy().astype(np.int32),
        "gen_mask": mask.numpy().astype(np.int32),
        "gen_tokens": tokens,
        "gen_lengths": np.asarray(ends, np.int32),
    }
    return arrays, {"gen_eos": str(eos), "gen_pad": str(pad)}


# ----------------------------------------------------------------------------- folders
def _drop_version(path: Path) -> None:
    """Rewrite a JSON file with sorted keys and without ``transformers_version``, so that
    any version writes the same bytes."""
    data = json.loads(path.read_text())
    data.pop("transformers_version", None)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def save_sorted(path: Path, arrays: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    """``safetensors``' ``save_file``, its metadata then put in key order: the library
    writes it in a hash map's order, which changes from one run to the next."""
    import struct

    from safetensors.numpy import save_file

    save_file(arrays, str(path), metadata=metadata)
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= n, "the header grew"
    path.write_bytes(data[:8] + text.ljust(n) + data[8 + n :])


def make(name: str, out: Path = FIXTURES, seed: int = SEED) -> Path:
    """Build fixture ``name`` into ``out/name`` and return the folder."""
    from transformers import AutoTokenizer

    model = BUILDERS[name](seed).eval()
    perturb(model, seed)
    folder = out / name
    model.save_pretrained(folder)
    TOKENIZERS[name](folder)
    tok = AutoTokenizer.from_pretrained(folder)
    assert len(tok) == model.config.vocab_size == VOCAB
    words = tokenizer_reference(tok)
    (folder / "tokenizer_reference.json").write_text(
        json.dumps(words, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    )
    refs = reference(model, seed)
    gen, meta = generation(model, tok)
    save_sorted(folder / "reference.safetensors", {**refs, **gen}, {"prefix": str(PREFIX), **meta})
    for file in ("config.json", "generation_config.json", "tokenizer_config.json"):
        _drop_version(folder / file)
    return folder


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("names", nargs="*", help=f"of {', '.join(BUILDERS)} (default: all)")
    p.add_argument("--out", type=Path, default=FIXTURES)
    args = p.parse_args(argv)
    unknown = [n for n in args.names if n not in BUILDERS]
    if unknown:
        p.error(f"no fixture {unknown[0]!r}; the fixtures are {', '.join(BUILDERS)}")
    for name in args.names or list(BUILDERS):
        folder = make(name, args.out)
        sizes = ", ".join(
            f"{f.name} {f.stat().st_size // 1024} KB" for f in sorted(folder.iterdir())
        )
        print(f"{folder}: {sizes}")


if __name__ == "__main__":
    main(sys.argv[1:])
