"""Packed sequences: ``ax.train.pack_documents``, ``ax.nn.segment_mask`` on every attention
path, positions restarting per document (learned and RoPE), the loss without padding, and
the cuDNN fallback of a packed batch (lowered for CUDA with cuDNN pretended)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import axjax as ax
from axjax.train import Batch, Pos


class Vocab(ax.Axis): ...


class Embed(ax.Axis): ...


class Slot(ax.Axis): ...


class KPos(ax.KeyOf[Pos]): ...


def test_documents_pack_into_windows_with_segments_and_positions(tmp_path: Path) -> None:
    docs = [[5, 6, 7], [8, 9], [4], [1, 2, 3, 4, 5, 6, 7]]  # [4]: no pair, skipped
    packed = ax.train.pack_documents(docs, 4, 1)
    got = [[np.asarray(t.array)[0].tolist() for t in b] for b in packed.epoch(0)]
    assert got == [
        [[5, 6, 8, 0], [6, 7, 9, 0], [1, 1, 2, 0], [0, 1, 0, 0]],
        [[1, 2, 3, 4], [2, 3, 4, 5], [1, 1, 1, 1], [0, 1, 2, 3]],  # cut: each piece a segment
        [[5, 6, 0, 0], [6, 7, 0, 0], [1, 1, 0, 0], [0, 1, 0, 0]],
    ]
    assert packed.fill == pytest.approx(9 / 12)
    f = ax.train.write_tokens(tmp_path / "t.bin", docs, separator=0)  # each after a 0
    from_file = ax.train.pack_documents(f, 5, 1, separator=0)
    first = next(from_file.epoch(0))
    assert np.asarray(first.inputs.array)[0].tolist() == [0, 5, 6, 0, 8]
    assert np.asarray(first.segments.array)[0].tolist() == [1, 1, 1, 2, 2]
    with pytest.raises(ValueError, match=r"pass separator="):
        ax.train.pack_documents(f, 5, 1)
    with pytest.raises(ValueError, match=r"fill 3 windows, fewer than a batch of 4"):
        ax.train.pack_documents(docs, 4, 4)


def test_the_segment_mask_keeps_each_query_in_its_document() -> None:
    seg = ax.tensor(np.array([[1, 1, 2, 0], [1, 2, 2, 2]], np.int32), Batch, Pos)
    m = ax.nn.segment_mask(seg, Pos, KPos)
    assert m.axes == (Batch, Pos, KPos)
    s = np.asarray(seg.array)
    np.testing.assert_array_equal(m.array, s[:, :, None] == s[:, None, :])
    with pytest.raises(ax.AxisError, match=r"segments are over the query positions Pos"):
        ax.nn.segment_mask(ax.rename(seg, Pos, Slot), Pos, KPos)
    with pytest.raises(ax.AxisError, match=r"segments are integers"):
        ax.nn.segment_mask(ax.astype(seg, ax.F32), Pos, KPos)


class Tiny(eqx.Module):
    """Token and learned position embeddings, one causal attention (RoPE on its input, to
    check the restarted positions there too), the tied unembedding."""

    emb: ax.nn.Embedding[ax.F32, Vocab, Embed]
    table: ax.Tensor[ax.F32, Slot, Embed]
    attn: ax.nn.MultiheadAttention[ax.F32, Pos, KPos, Embed, ax.nn.Head, ax.nn.HeadDim]
    segmented: bool = eqx.field(static=True, default=True)

    def __init__(self, implementation: ax.nn.AttentionPath, segmented: bool = True) -> None:
        k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
        self.emb = ax.nn.Embedding(Vocab, Embed, 16, 16, key=k1)
        self.table = ax.nn.init.normal(0.5)(k2, {Slot: 8, Embed: 16})
        self.attn = ax.nn.MultiheadAttention(
            Embed, 16, num_heads=2, query_pos=Pos, key_pos=KPos, causal=True,
            implementation=implementation, key=k3,
        )  # fmt: skip
        self.segmented = segmented

    def __call__(self, ids: Any, segments: Any, positions: Any) -> Any:
        x = self.emb(ids)
        x = x + ax.broadcast(ax.take(self.table, Slot, positions), x)
        x = ax.nn.rotary_embedding(x, Pos, Embed, positions=positions)
        mask = ax.nn.segment_mask(segments, Pos, KPos) if self.segmented else None
        x = x + self.attn(x, mask=mask)
        return ax.contract(x, self.emb.weight, over=Embed)


def _per_position(model: Tiny, batch: Any) -> Any:
    ids, targets, segments, positions = batch
    return ax.train.softmax_cross_entropy(model(ids, segments, positions), targets, Vocab)


DOCS = [np.array([3, 1, 4, 1, 5]), np.array([9, 2, 6]), np.array([5, 3, 5, 8])]


def _alone(doc: np.ndarray) -> tuple[Any, ...]:
    n = len(doc) - 1
    row = [doc[:-1], doc[1:], np.ones(n), np.arange(n)]
    return tuple(ax.tensor(np.asarray(r, np.int32)[None], Batch, Pos) for r in row)


def _doc_losses_and_grads(model: Tiny) -> tuple[Any, Any, list[Any], list[Any]]:
    """Each document's summed loss and its gradient, packed (2 windows of 8) and alone."""
    packed = next(ax.train.pack_documents(DOCS, 8, 2).epoch(0))
    params, static = eqx.partition(model, eqx.is_array)
    segs = np.asarray(packed.segments.array)
    where = [(0, 1), (0, 2), (1, 1)]  # DOCS' (window, segment): 4 + 2 pairs fill one
    picks = np.stack([(segs == s) & (np.arange(2)[:, None] == r) for r, s in where])

    def packed_losses(p: Any) -> Any:
        loss = _per_position(eqx.combine(p, static), packed).array
        return jnp.sum(jnp.where(picks, loss[None], 0.0), axis=(1, 2))

    def alone_loss(p: Any, doc: Any) -> Any:
        return jnp.sum(_per_position(eqx.combine(p, static), doc).array)

    got, jac = jax.jit(lambda p: (packed_losses(p), jax.jacrev(packed_losses)(p)))(params)
    want = [jax.jit(jax.value_and_grad(alone_loss))(params, _alone(d)) for d in DOCS]
    g_got = [jax.tree.map(lambda j, i=i: j[i], jac) for i in range(len(DOCS))]
    return got, np.array([w[0] for w in want]), g_got, [w[1] for w in want]


def _close(a: Any, b: Any) -> bool:
    return all(
        np.allclose(x, y, rtol=2e-5, atol=2e-6)
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


@pytest.mark.parametrize("implementation", ["einsum", "xla"])
def test_each_packed_document_has_its_loss_and_gradients_alone(implementation: Any) -> None:
    got, want, g_got, g_want = _doc_losses_and_grads(Tiny(implementation))
    np.testing.assert_allclose(got, want, rtol=2e-5)
    assert all(_close(a, b) for a, b in zip(g_got, g_want, strict=True))


def test_without_the_segment_mask_the_documents_see_each_other() -> None:
    """The mutation the test above catches: attention over the whole window."""
    got, want, _, _ = _doc_losses_and_grads(Tiny("einsum", segmented=False))
    assert not np.allclose(got[1], want[1], rtol=2e-5)  # the second document sees the first


def test_the_loss_weighted_by_segments_ignores_the_padding() -> None:
    model = Tiny("einsum")
    packed = next(ax.train.pack_documents(DOCS, 8, 2).epoch(0))

    @jax.jit
    def masked_mean(m: Tiny, batch: Any) -> Any:
        per = _per_position(m, batch)
        weight = ax.astype(ax.greater(batch.segments, 0), ax.F32)
        return ax.sum(per * weight, (Batch, Pos)).array / ax.sum(weight, (Batch, Pos)).array

    each = jax.jit(lambda m, b: _per_position(m, b).array.ravel())
    pairs = np.concatenate([np.asarray(each(model, _alone(d))) for d in DOCS])
    assert float(masked_mean(model, packed)) == pytest.approx(float(pairs.mean()), rel=2e-5)


def test_a_packed_batch_falls_back_from_cudnn_with_the_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On an H100 (pretended, lowered for CUDA) a bf16 packed batch takes the einsum path:
    no cuDNN flash attention in the program, and the once-per-reason warning (``mask``)."""
    from axjax.nn import _attention_paths
    from benchmarks._structure import custom_calls, pretend_cuda

    monkeypatch.setattr(_attention_paths, "_WARNED", set())
    model = jax.tree.map(
        lambda a: a.astype(jnp.bfloat16) if eqx.is_inexact_array(a) else a, Tiny("auto")
    )
    packed = tuple(next(ax.train.pack_documents(DOCS, 8, 2).epoch(0)))
    step = jax.jit(lambda m, b: _per_position(m, b).array.sum())
    try:
        with pretend_cuda("9.0"), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            text = step.trace(model, packed).lower(lowering_platforms=("cuda",)).as_text()
            unmasked = jax.jit(lambda m, x: m.attn(m.emb(x)).array.sum())
            plain = unmasked.trace(model, packed[0]).lower(lowering_platforms=("cuda",))
    except LookupError as e:  # JAX's private cuDNN queries moved (another JAX version)
        pytest.skip(f"cannot pretend to lower for CUDA with this JAX: {e}")
    assert not any("cudnn" in name for name in custom_calls(text)), custom_calls(text)
    assert custom_calls(plain.as_text())["__cudnn$fmhaSoftmax"] == 1  # the same call unmasked
    said = [str(w.message) for w in caught if "instead of cuDNN" in str(w.message)]
    assert len(said) == 1 and "(mask)" in said[0], said


def test_rope_with_positions_rotates_each_document_from_zero() -> None:
    x = ax.tensor(
        np.random.default_rng(0).normal(size=(2, 5, 4)).astype(np.float32), Batch, Pos, Embed
    )
    pos = ax.tensor(np.array([[0, 1, 2, 0, 1], [0, 1, 0, 1, 2]], np.int32), Batch, Pos)
    got = np.asarray(ax.nn.rotary_embedding(x, Pos, Embed, positions=pos).array)
    for row, cuts in ((0, (0, 3, 5)), (1, (0, 2, 5))):
        for a, b in zip(cuts, cuts[1:], strict=False):
            piece = ax.tensor(np.asarray(x.array)[row : row + 1, a:b], Batch, Pos, Embed)
            alone = ax.nn.rotary_embedding(piece, Pos, Embed)  # offset 0
            np.testing.assert_allclose(got[row, a:b], np.asarray(alone.array)[0], rtol=1e-6)
    with pytest.raises(ValueError, match=r"give positions= or offset=, not both"):
        ax.nn.rotary_embedding(x, Pos, Embed, positions=pos, offset=2)
    with pytest.raises(ax.AxisError, match=r"positions are over Pos and some of x's other axes"):
        ax.nn.rotary_embedding(x, Pos, Embed, positions=ax.rename(pos, Pos, Slot))
