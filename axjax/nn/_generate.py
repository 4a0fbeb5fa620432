"""Autoregressive generation with a KV cache: one jitted program, a prefill of the prompt and
a decode loop inside ``jax.lax.scan`` (the decode step is traced once for any number of
steps), greedy or sampled (temperature, top-k) with a reproducible key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar, TypeVarTuple, cast

import equinox as eqx
import jax
import jax.numpy as jnp

from ..core import I32, AnyTensor, Axis, AxisError, Tensor
from ..core._internal import axes_names, axis_name, non_negative_float, positive_int
from ..ops import expand_dims, index, transpose

__all__ = ["Decoder", "generate"]

C = TypeVar("C")
B = TypeVarTuple("B")
P = TypeVar("P", bound=Axis)


class Decoder(Protocol[C]):
    """What :func:`generate` runs: a model with a cache of its own.

    ``init_cache(batch, max_len)`` makes an empty cache (a pytree: a ``KVCache`` per
    attention layer, say) for ``max_len`` positions and the ``batch`` axes (``{Batch: 16}``);
    ``model(ids, cache=cache)`` maps token ids ``[*batch, Pos]`` (the positions after those
    cached) to logits ``[*batch, Pos, Vocab]`` and the cache with them written. A model of
    :class:`MultiheadAttention` layers passes ``cache=`` on to them
    (``examples/transformer/train.py``'s ``LM`` is one).
    """

    def init_cache(self, batch: Mapping[type[Axis], int], max_len: int) -> C: ...

    def __call__(self, ids: AnyTensor, *, cache: C) -> tuple[AnyTensor, C]: ...


def _pick(
    logits: AnyTensor,
    batch: tuple[type[Axis], ...],
    vocab: type[Axis],
    key: jax.Array,
    temperature: float,
    top_k: int | None,
) -> AnyTensor:
    """One token per sequence: ``[*batch]`` ids, the argmax (``temperature == 0``) or a draw
    from ``softmax(logits / temperature)`` restricted to the ``top_k`` largest."""
    a = transpose(logits, *batch, vocab).array.astype(jnp.float32)
    if temperature == 0:
        ids = jnp.argmax(a, axis=-1)
    else:
        a = a / temperature
        if top_k is not None and top_k < a.shape[-1]:
            kth = jax.lax.top_k(a, top_k)[0][..., -1:]
            a = jnp.where(a < kth, -jnp.inf, a)
        ids = jax.random.categorical(key, a, axis=-1)
    return Tensor(ids.astype(jnp.int32), batch)


@eqx.filter_jit
def _generate(
    model: Decoder[Any],
    prompt: AnyTensor,
    key: jax.Array,
    steps: int,
    pos: type[Axis],
    max_len: int,
    temperature: float,
    top_k: int | None,
) -> jax.Array:
    batch = tuple(a for a in prompt.axes if a is not pos)
    n_prompt = int(prompt.size(pos))
    cache = model.init_cache({a: int(prompt.size(a)) for a in batch}, max_len)
    logits, cache = model(prompt, cache=cache)
    vocab_axes = [a for a in logits.axes if a not in prompt.axes]
    if len(vocab_axes) != 1 or set(prompt.axes) - set(logits.axes):
        raise AxisError(
            f"generate: the logits ({axes_names(logits.axes)}) are the prompt's axes "
            f"({axes_names(prompt.axes)}) and one vocabulary axis"
        )
    vocab = vocab_axes[0]
    keys = jax.random.split(key, steps)
    first = _pick(index(logits, pos, n_prompt - 1), batch, vocab, keys[0], temperature, top_k)

    def step(carry: tuple[Any, AnyTensor], k: jax.Array) -> tuple[tuple[Any, AnyTensor], jax.Array]:
        cache, token = carry
        ids = transpose(expand_dims(token, pos), *prompt.axes)
        logits, cache = model(ids, cache=cache)
        nxt = _pick(index(logits, pos, 0), batch, vocab, k, temperature, top_k)
        return (cache, nxt), nxt.array

    _, rest = jax.lax.scan(step, (cache, first), keys[1:])
    return jnp.concatenate([first.array[None], rest], axis=0)  # [steps, *batch]


def generate(
    model: Decoder[Any],
    prompt: Tensor[I32, *B],
    steps: int,
    key: jax.Array | None = None,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    max_len: int | None = None,
    pos: type[Axis] | None = None,
) -> Tensor[I32, *B]:
    """Continue ``prompt`` (token ids ``[*Batch, Pos]``) by ``steps`` tokens.

    One jitted program: ``model.init_cache(batch, max_len)``, a prefill of the whole prompt,
    then ``steps - 1`` decode steps of one position each inside ``jax.lax.scan``: the decode
    step is traced once whatever ``steps`` is, and every step runs the same weights (the
    model's :class:`Decoder` protocol). ``max_len`` (static; default: the prompt's length
    plus ``steps``) is the cache's size, and a prompt plus ``steps`` that exceeds it is an
    error. ``temperature=0`` decodes greedily (``key`` may be ``None``); otherwise each token
    is drawn from ``softmax(logits / temperature)``, among the ``top_k`` largest where
    given, with keys split from ``key`` (the same key, the same tokens). ``pos`` is the
    position axis (default: the prompt's last axis). Returns the new tokens: the prompt's
    axes, ``pos`` of size ``steps``.

    Example:
        >>> out = ax.nn.generate(lm, prompt, 32, jax.random.key(0), temperature=0.8, top_k=40)
        >>> ax.nn.generate(lm, prompt, 32, temperature=0)      # greedy
    """
    steps = positive_int("generate", "steps", steps)
    if not isinstance(prompt, Tensor) or not prompt.axes:
        raise TypeError("generate: the prompt is a Tensor of token ids [*Batch, Pos]")
    if not jnp.issubdtype(prompt.array.dtype, jnp.integer):
        raise TypeError(f"generate: the prompt holds token ids, got {prompt.dtype.__name__}")
    pos = prompt.axes[-1] if pos is None else pos
    if pos not in prompt.axes:
        raise AxisError(
            f"generate: the prompt ({axes_names(prompt.axes)}) has no position axis "
            f"{axis_name(pos)}"
        )
    n_prompt = int(prompt.size(pos))
    need = n_prompt + steps - 1  # the last token drawn is never fed back
    max_len = need if max_len is None else positive_int("generate", "max_len", max_len)
    if need > max_len:
        raise ValueError(
            f"generate: a prompt of {n_prompt} and {steps} steps need a cache of {need} "
            f"positions, max_len is {max_len}"
        )
    temperature = non_negative_float("generate", "temperature", temperature)
    if top_k is not None:
        top_k = positive_int("generate", "top_k", top_k)
    if key is None:
        if temperature != 0:
            raise TypeError("generate: sampling (temperature > 0) needs a key")
        key = jax.random.key(0)
    out = _generate(model, prompt, key, steps, pos, max_len, float(temperature), top_k)
    batch = tuple(a for a in prompt.axes if a is not pos)
    tokens: AnyTensor = Tensor(out, (pos, *batch))
    return cast("Tensor[I32, *B]", transpose(tokens, *prompt.axes))
