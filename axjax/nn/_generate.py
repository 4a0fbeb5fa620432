"""Autoregressive generation with a KV cache: one jitted program, a prefill of the prompts
and a decode loop inside ``jax.lax.while_loop`` (the decode step is traced once for any
number of steps, and the loop ends early once every row has stopped).

Greedy or sampled (temperature, then top-k, then top-p, as transformers applies them) with a
reproducible key; prompts of different lengths in one batch (stored from position 0 of each
row's cache, so each row decodes as its prompt would alone); stop tokens (a row that emits
one stops, its later positions hold the pad id); streaming through a host callback every
``stream_every`` steps, which does not re-trace the program.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import (
    Any,
    Generic,
    Literal,
    NamedTuple,
    Protocol,
    TypeVar,
    TypeVarTuple,
    cast,
    overload,
)

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import I32, AnyTensor, Axis, AxisError, Tensor
from ..core._internal import (
    Checks,
    axes_names,
    axis_name,
    check_choice,
    check_indices,
    check_int,
    check_not_donated,
    effects_barrier,
    positive_int,
    public_call,
)
from ..ops import transpose
from ._kv_cache import KVCache
from ._sampling import check_sampler, sample_tokens

__all__ = ["Decoder", "Generation", "generate"]

C = TypeVar("C")
B = TypeVarTuple("B")

#: what a stream receives: the new tokens ``[*batch, n]`` (numpy, the batch axes in the
#: prompt's order) and the step of the first of them
StreamCallback = Callable[[np.ndarray, int], object]


class Decoder(Protocol[C]):
    """What :func:`generate` runs: a model with a cache of its own.

    ``init_cache(batch, max_len)`` makes an empty cache (a pytree: a ``KVCache`` per
    attention layer, say) for ``max_len`` positions and the ``batch`` axes (``{Batch: 16}``);
    ``model(ids, cache=cache)`` maps token ids ``[*batch, Pos]`` (the positions after those
    cached in each row) to logits ``[*batch, Pos, Vocab]`` and the cache with them written.
    A model of :class:`MultiheadAttention` layers passes ``cache=`` on to them, and takes
    each row's positions from ``cache.positions(Pos, n)`` (``examples/transformer/train.py``'s
    ``LM`` is one).

    A decoder may also declare, and ``generate`` then checks before compiling anything:
    ``position_axis`` (the axis its ids' positions are on), ``max_positions`` (its context
    length) and ``vocab_size`` (concrete prompt ids past it are an error, not clamped).
    ``GPT2`` declares all three, ``Llama`` the axis and the vocabulary (RoPE has no
    context length of its own).
    """

    def init_cache(self, batch: Mapping[type[Axis], int], max_len: int) -> C: ...

    def __call__(self, ids: AnyTensor, *, cache: C) -> tuple[AnyTensor, C]: ...


class Generation(NamedTuple, Generic[*B]):
    """What :func:`generate` returns with ``stop=``: the new ``tokens`` (the prompt's axes,
    the position axis of size ``steps``; after a row's stop token, the pad id) and each
    row's ``lengths`` (``[*Batch]``: the tokens up to and including its first stop token,
    ``steps`` where it never stopped)."""

    tokens: Tensor[I32, *B]
    lengths: Tensor[I32, *tuple[Any, ...]]


class _Sampler(NamedTuple):
    temperature: float
    top_k: int | None
    top_p: float | None


class _Stop(NamedTuple):
    ids: tuple[int, ...]
    pad: int


class _Config(NamedTuple):
    """The static part of a generation: one compiled program for each."""

    steps: int
    pos: type[Axis]
    batch: tuple[type[Axis], ...]
    max_len: int
    sampler: _Sampler
    stop: _Stop | None
    every: int  # stream every this many tokens (0: no stream)
    left: bool  # the prompts are left-padded: moved to the start of each row first


# Streams: the compiled loop calls one host function with a stream's number (a traced
# argument), so that a new callback runs the same program.
_STREAMS: dict[int, tuple[StreamCallback, int]] = {}
_STREAM_IDS = itertools.count(1)
_STREAMS_LOCK = threading.Lock()


def _emit(stream: np.ndarray, tokens: np.ndarray, start: np.ndarray, count: np.ndarray) -> None:
    callback, _ = _STREAMS[int(stream)]
    n = int(count)
    if n:
        callback(np.asarray(tokens)[..., :n], int(start))


def _stream_out(
    every: int, stream: jax.Array, out: jax.Array, start: jax.Array, count: jax.Array
) -> None:
    """Send ``count`` tokens of ``out`` (``[*batch, steps + every]``) from ``start``."""
    chunk = jax.lax.dynamic_slice_in_dim(out, start, every, axis=out.ndim - 1)
    jax.debug.callback(_emit, stream, chunk, start, count, ordered=True)


def _first_step(
    model: Decoder[Any],
    ids: jax.Array,
    lengths: jax.Array,
    batch: tuple[type[Axis], ...],
    pos: type[Axis],
    max_len: int,
) -> tuple[jax.Array, Any]:
    """The prefill of the right-padded prompts ``ids`` ``[*batch, P]``: each row's last
    logits ``[*batch, vocab]`` and the cache with each row's true length."""
    cache = model.init_cache(dict(zip(batch, ids.shape[:-1], strict=True)), max_len)
    logits, cache = model(Tensor(ids, (*batch, pos)), cache=cache)
    extra = [a for a in logits.axes if a not in (*batch, pos)]
    if len(extra) != 1 or (set(batch) | {pos}) - set(logits.axes):
        raise AxisError(
            f"generate: the logits ({axes_names(logits.axes)}) are the prompt's axes "
            f"({axes_names((*batch, pos))}) and one vocabulary axis"
        )
    cache = jax.tree.map(
        lambda c: c.with_lengths(lengths) if isinstance(c, KVCache) else c,
        cache,
        is_leaf=lambda c: isinstance(c, KVCache),
    )
    a = transpose(logits, *batch, pos, extra[0]).array
    last = jnp.take_along_axis(a, (lengths - 1)[..., None, None], axis=-2)[..., 0, :]
    return last, cache


@eqx.filter_jit
def _decode(
    model: Decoder[Any],
    ids: jax.Array,
    lengths: jax.Array,
    key: jax.Array,
    stream: jax.Array,
    config: _Config,
) -> tuple[jax.Array, jax.Array]:
    """``[*batch, steps]`` new tokens and ``[*batch]`` lengths, in one program."""
    steps, pos, batch, max_len, sampler, stop, every, left = config
    if left:
        ids = _realigned(ids, lengths)
    last, cache = _first_step(model, ids, lengths, batch, pos, max_len)
    stops = jnp.asarray(stop.ids if stop else (), jnp.int32)
    pad = stop.pad if stop else 0

    def pick(logits: jax.Array, k: jax.Array, done: jax.Array) -> tuple[jax.Array, jax.Array]:
        token = sample_tokens(
            logits, k, temperature=sampler.temperature, top_k=sampler.top_k, top_p=sampler.top_p
        )
        token = jnp.where(done, pad, token)
        return token, done | jnp.isin(token, stops)

    n_rows = ids.shape[:-1]
    # every extra columns: a stream's last chunk is a window of `every` from its start
    out = jnp.full((*n_rows, steps + every), pad, jnp.int32)
    key, k0 = jax.random.split(key)
    token, done = pick(last, k0, jnp.zeros(n_rows, bool))
    out = out.at[..., 0].set(token)
    length = jnp.where(done, 1, steps).astype(jnp.int32)

    def cond(carry: tuple[Any, ...]) -> jax.Array:
        t, done = carry[0], carry[3]
        going: jax.Array = (t < steps) & ~jnp.all(done)
        return going

    def body(carry: tuple[Any, ...]) -> tuple[Any, ...]:
        t, cache, token, done, out, length, key = carry
        if every:
            send = functools.partial(_stream_out, every)
            jax.lax.cond(t % every == 0, send, lambda *_: None, stream, out, t - every, every)
        logits, cache = model(Tensor(token[..., None], (*batch, pos)), cache=cache)
        key, k = jax.random.split(key)
        last = transpose(logits, *batch, pos, *(a for a in logits.axes if a not in (*batch, pos)))
        token, now = pick(last.array[..., 0, :], k, done)
        length = jnp.where(now & ~done, t + 1, length)
        out = jax.lax.dynamic_update_index_in_dim(out, token, t, axis=out.ndim - 1)
        return t + 1, cache, token, now, out, length, key

    carry = (jnp.int32(1), cache, token, done, out, length, key)
    t, _, _, _, out, length, _ = jax.lax.while_loop(cond, body, carry)
    if every:  # what is left since the last chunk
        start = ((t - 1) // every) * every
        _stream_out(every, stream, out, start, t - start)
    return out[..., :steps], length


def _realigned(ids: jax.Array, lengths: jax.Array) -> jax.Array:
    """Left-padded prompts ``[*batch, P]`` moved to the start of each row (right-padded)."""
    n = ids.shape[-1]
    shift = (n - lengths)[..., None]
    where = (jnp.arange(n, dtype=jnp.int32).reshape((1,) * (shift.ndim - 1) + (n,)) + shift) % n
    return jnp.take_along_axis(ids, where, axis=-1)


def _position(model: object, prompt: AnyTensor, pos: type[Axis] | None) -> type[Axis]:
    """The prompt's position axis: ``pos``, else the model's ``position_axis`` when the
    prompt has it, else the prompt's last axis."""
    declared = getattr(model, "position_axis", None)
    if pos is None:
        return cast(type[Axis], declared if declared in prompt.axes else prompt.axes[-1])
    return pos


def _prompt_axes(a: Mapping[str, Any]) -> None:
    """The prompt is a Tensor with axes."""
    if not isinstance(a["prompt"], Tensor) or not a["prompt"].axes:
        raise TypeError("generate: the prompt is a Tensor of token ids [*Batch, Pos]")


def _pos_axis(a: Mapping[str, Any]) -> None:
    """``pos`` is an axis of the prompt's, and the one the model declares."""
    prompt, model = a["prompt"], a["model"]
    pos = _position(model, prompt, a["pos"])
    declared = getattr(model, "position_axis", None)
    if pos not in prompt.axes:
        raise AxisError(
            f"generate: the prompt ({axes_names(prompt.axes)}) has no position axis "
            f"{axis_name(pos)} (pos={axis_name(pos)})"
        )
    if declared is not None and pos is not declared:
        raise AxisError(
            f"generate: pos={axis_name(pos)}, but the model reads its positions on "
            f"{axis_name(declared)} (the prompt: {axes_names(prompt.axes)}); pass "
            f"pos={axis_name(declared)} or leave pos out"
        )


def _prompt_dtype(a: Mapping[str, Any]) -> None:
    """generate's second stage: the prompt holds integers (token ids)."""
    prompt = a["prompt"]
    if not jnp.issubdtype(prompt.array.dtype, jnp.integer):
        raise TypeError(f"generate: the prompt holds token ids, got {prompt.dtype.__name__}")


def _padding(a: Mapping[str, Any]) -> None:
    check_choice("generate", "padding", a["padding"], ("right", "left"))


def _steps(a: Mapping[str, Any]) -> None:
    positive_int("generate", "steps", a["steps"])


def _prompt_sizes(a: Mapping[str, Any]) -> None:
    """At least one token, and at least one row."""
    prompt = a["prompt"]
    pos = _position(a["model"], prompt, a["pos"])
    if prompt.size(pos) == 0:
        raise ValueError(
            f"generate: the prompt has no tokens ({axis_name(pos)}=0); give each row at "
            "least one token to continue"
        )
    empty = [f"{axis_name(a)}=0" for a, n in zip(prompt.axes, prompt.shape, strict=True) if n == 0]
    if empty:
        raise ValueError(f"generate: the prompt has no rows ({', '.join(empty)})")


def _context(a: Mapping[str, Any]) -> None:
    """The prompt and ``steps`` within the model's ``max_positions``, and ``max_len``."""
    model, prompt, steps = a["model"], a["prompt"], a["steps"]
    n_prompt = int(prompt.size(_position(model, prompt, a["pos"])))
    need = n_prompt + steps - 1  # the last token drawn is never fed back
    limit = getattr(model, "max_positions", None)
    if isinstance(limit, int) and need > limit:
        raise ValueError(
            f"generate: a prompt of {n_prompt} tokens and steps={steps} need "
            f"{need} positions (prompt + steps - 1), the model has {limit} "
            f"({type(model).__name__}'s context length): shorten the prompt or lower steps"
        )
    if a["max_len"] is None:
        return
    max_len = positive_int("generate", "max_len", a["max_len"])
    if need > max_len:
        raise ValueError(
            f"generate: a prompt of {n_prompt} and {steps} steps need a cache of {need} "
            f"positions, max_len is {max_len}"
        )


def _prompt_ids(a: Mapping[str, Any]) -> None:
    _check_ids(a["model"], a["prompt"])


#: generate's checks, in the order a user reads its arguments (core/_calls.py runs them)
CHECKS = Checks(
    options=(("padding", _padding),),
    axes=(("prompt", _prompt_axes), ("pos", _pos_axis)),
    dtypes=(("prompt", _prompt_dtype),),
    values=(
        ("steps", _steps),
        ("prompt", _prompt_sizes),
        ("steps", _context),
        ("prompt", _prompt_ids),
    ),
    blame={"init_cache": "steps", "positions": "prompt", "causal_mask": "prompt"},
    expects={
        "prompt": "integer token ids [*Batch, Pos], at least one token per row",
        "steps": "a positive int, the prompt's length + steps - 1 within the model's context",
    },
)


def _check_ids(model: object, prompt: Tensor[Any]) -> None:
    """Concrete prompt ids against the model's ``vocab_size`` before the jit boundary
    (inside, an id past the vocabulary would be clamped to a valid row); traced ones keep
    the documented clamp rule."""
    vocab = getattr(model, "vocab_size", None)
    if isinstance(vocab, int):
        check_indices(
            "generate", prompt, vocab, what="id", noun="a token of the vocabulary",
            of=f"of {type(model).__name__}'s vocabulary of {vocab}",
        )  # fmt: skip


#: token ids are int32 in the program
_MAX_ID = 2**31 - 1


def _check_stop(stop: int | Sequence[int] | None, pad_id: int | None) -> _Stop | None:
    if stop is None:
        if pad_id is not None:
            raise TypeError("generate: pad_id is what follows a stop token: give stop= too")
        return None
    ids: tuple[object, ...] = tuple(stop) if isinstance(stop, Sequence) else (stop,)
    if not ids:
        raise TypeError(f"generate: stop is a token id or a sequence of them, got {stop!r}")
    what = "a token id (an int in [0, 2**31 - 1]) or a sequence of them"
    checked = tuple(check_int("generate", "stop", i, 0, _MAX_ID, what) for i in ids)
    pad = checked[0] if pad_id is None else pad_id
    pad = check_int("generate", "pad_id", pad, 0, _MAX_ID, "a token id (an int >= 0)")
    return _Stop(checked, pad)


def _prompt_lengths(
    lengths: AnyTensor | Sequence[int] | jax.Array | None,
    batch: tuple[type[Axis], ...],
    shape: tuple[int, ...],
    n_prompt: int,
) -> jax.Array:
    """Each row's prompt length, ``[*batch]`` in the prompt's batch order, checked."""
    if lengths is None:
        return jnp.full(shape, n_prompt, jnp.int32)
    if isinstance(lengths, Tensor):
        if set(lengths.axes) != set(batch) or len(lengths.axes) != len(batch):
            raise AxisError(
                f"generate: the lengths are over the prompt's batch axes ({axes_names(batch)}),"
                f" got ({axes_names(lengths.axes)})"
            )
        arr = transpose(lengths, *batch).array
    else:
        arr = jnp.asarray(lengths)
    if arr.shape != shape or not jnp.issubdtype(arr.dtype, jnp.integer):
        raise AxisError(
            f"generate: the lengths are integers of the batch's shape {shape}, got "
            f"{arr.dtype} of shape {arr.shape}"
        )
    check_indices(
        "generate", arr, n_prompt + 1, low=1, what="length", noun="a prompt's length",
        of=f"for a prompt of {n_prompt} positions", at="row",
    )  # fmt: skip
    return arr.astype(jnp.int32)


@overload
def generate(
    model: Decoder[Any],
    prompt: Tensor[I32, *B],
    steps: int,
    key: jax.Array | None = None,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    lengths: AnyTensor | Sequence[int] | jax.Array | None = None,
    padding: Literal["right", "left"] = "right",
    stop: None = None,
    pad_id: None = None,
    max_len: int | None = None,
    pos: type[Axis] | None = None,
    stream: StreamCallback | None = None,
    stream_every: int = 8,
) -> Tensor[I32, *B]: ...
@overload
def generate(
    model: Decoder[Any],
    prompt: Tensor[I32, *B],
    steps: int,
    key: jax.Array | None = None,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    lengths: AnyTensor | Sequence[int] | jax.Array | None = None,
    padding: Literal["right", "left"] = "right",
    stop: int | Sequence[int],
    pad_id: int | None = None,
    max_len: int | None = None,
    pos: type[Axis] | None = None,
    stream: StreamCallback | None = None,
    stream_every: int = 8,
) -> Generation[*B]: ...
@public_call(checks=CHECKS)
def generate(
    model: Decoder[Any],
    prompt: Tensor[I32, *B],
    steps: int,
    key: jax.Array | None = None,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    lengths: AnyTensor | Sequence[int] | jax.Array | None = None,
    padding: Literal["right", "left"] = "right",
    stop: int | Sequence[int] | None = None,
    pad_id: int | None = None,
    max_len: int | None = None,
    pos: type[Axis] | None = None,
    stream: StreamCallback | None = None,
    stream_every: int = 8,
) -> Tensor[I32, *B] | Generation[*B]:
    """Continue each prompt (token ids ``[*Batch, Pos]``) by up to ``steps`` tokens.

    One jitted program: ``model.init_cache(batch, max_len)``, a prefill of the prompts, then
    a decode loop of one position a step inside ``jax.lax.while_loop``: the step is traced
    once whatever ``steps`` is, and every step runs the same weights (the model's
    :class:`Decoder` protocol). ``max_len`` (static; default: the prompt's length plus
    ``steps - 1``) is the cache's size.

    Sampling: ``temperature=0`` decodes greedily (``key`` may be ``None``); otherwise each
    token is drawn with keys split from ``key`` (the same key, the same tokens), from the
    logits divided by ``temperature``, then kept to the ``top_k`` largest, then to the
    smallest set whose probability reaches ``top_p`` (nucleus): transformers' order.

    Ragged prompts: ``lengths`` (``[*Batch]``) gives each row's prompt length, the rest of
    the row being padding, on the right (``padding="right"``, as ``Tokenizer.encode``
    returns) or on the left (``"left"``: moved to the start of the row first). Each row's
    cache holds its tokens from position 0, and its positions count from its own length,
    so each row's tokens are those its prompt gives alone.

    Stop tokens: with ``stop`` (an id or several; a tokenizer's ``eos_ids``) a row that
    emits one stops; its later positions hold ``pad_id`` (default: the first stop id), and
    the loop ends once every row has stopped. The call then returns a :class:`Generation`,
    the tokens and each row's length (up to and including its stop token).

    Streaming: ``stream(tokens, start)`` is called on the host with each ``stream_every``
    new tokens (``[*Batch, n]`` numpy, the batch axes in the prompt's order; the last chunk
    may be shorter) while the program runs; the callback is not part of the compiled
    program, so a new one does not re-trace it.

    Returns the new tokens: the prompt's axes, ``pos`` (default: the prompt's last axis) of
    size ``steps``; with ``stop``, a :class:`Generation`.

    Example:
        >>> out = ax.nn.generate(lm, prompt, 32, jax.random.key(0), temperature=0.8, top_p=0.9)
        >>> tokens, lengths = ax.nn.generate(lm, ids, 32, temperature=0, lengths=n, stop=eos)
    """
    pos = _position(model, prompt, pos)  # the arguments are checked: CHECKS
    steps = positive_int("generate", "steps", steps)
    n_prompt = int(prompt.size(pos))
    max_len = (
        n_prompt + steps - 1 if max_len is None else positive_int("generate", "max_len", max_len)
    )
    sampler = _Sampler(*check_sampler("generate", temperature, top_k, top_p))
    stops = _check_stop(stop, pad_id)
    if key is None:
        if sampler.temperature != 0:
            raise TypeError("generate: sampling (temperature > 0) needs a key")
        key = jax.random.key(0)
    batch = tuple(a for a in prompt.axes if a is not pos)
    given = cast("AnyTensor", prompt)  # any axes: transposed by name
    ids = transpose(given, *batch, pos).array.astype(jnp.int32)
    rows = _prompt_lengths(lengths, batch, ids.shape[:-1], n_prompt)
    every = positive_int("generate", "stream_every", stream_every)
    every = 0 if stream is None else every
    config = _Config(steps, pos, batch, max_len, sampler, stops, every, padding == "left")
    out, length = _run(model, ids, rows, key, config, stream)
    tokens: AnyTensor = transpose(Tensor(out, (*batch, pos)), *prompt.axes)
    if stops is None:
        return cast("Tensor[I32, *B]", tokens)  # the prompt's axes
    return cast("Generation[*B]", Generation(tokens, Tensor(length, batch)))


#: the remedy for a model whose weights a donating step deleted
DONATED = (
    "generate runs the model's current weights: pass the trained model (step.model, or the "
    "params a donating step returned), not the arrays that step was given"
)


def _run(
    model: Decoder[Any],
    ids: jax.Array,
    rows: jax.Array,
    key: jax.Array,
    config: _Config,
    stream: StreamCallback | None,
) -> tuple[jax.Array, jax.Array]:
    """The compiled loop, with ``stream`` registered while it runs and every chunk delivered
    before the call returns."""
    with _registered(stream, config.every) as handle:
        try:
            out, length = _decode(model, ids, rows, key, jnp.int32(handle), config)
        except (ValueError, RuntimeError) as e:  # translated after the fact: donated weights
            try:
                check_not_donated("generate", "model", model, DONATED)
            except ValueError as named:
                raise named from e
            raise
        if stream is not None:
            out.block_until_ready()
            effects_barrier()
    return out, length


class _registered:
    """A stream's number for the compiled loop, while the call runs (0: no stream)."""

    def __init__(self, stream: StreamCallback | None, every: int) -> None:
        self.stream, self.every, self.handle = stream, every, 0

    def __enter__(self) -> int:
        if self.stream is not None:
            if not callable(self.stream):
                raise TypeError(f"generate: stream is a callable, got {self.stream!r}")
            with _STREAMS_LOCK:
                self.handle = next(_STREAM_IDS)
                _STREAMS[self.handle] = (self.stream, self.every)
        return self.handle

    def __exit__(self, *exc: object) -> None:
        with _STREAMS_LOCK:
            _STREAMS.pop(self.handle, None)
