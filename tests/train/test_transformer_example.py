"""The transformer example (``examples/transformer``) in a handful of steps on a small part
of the standard library: it trains, writes curves, checkpoints and safetensors weights,
samples, and its bf16 run reaches the f32 loss. The tiny preset's full run is not a test
(README: its figures)."""

from __future__ import annotations

import json
import math
import sysconfig
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest

import axjax as ax

CORPUS = str(Path(sysconfig.get_paths()["stdlib"]) / "email")  # ~500 kB of real source


@pytest.fixture(scope="module")
def example() -> Any:
    from benchmarks.transformer import example as load

    return load()  # examples/transformer/train.py, imported as a module


def _run(example: Any, tmp: Path, *extra: str) -> dict[str, Any]:
    return example.main(
        [
            "--preset",
            "test",
            "--stdlib",
            CORPUS,
            "--eval-batches",
            "2",
            "--sample-bytes",
            "8",
            "--log-every",
            "5",
            "--logdir",
            str(tmp),
            "--no-progress",
            *extra,
        ]
    )


def test_the_example_trains_checkpoints_and_samples(
    example: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Batch, Pos, LM = example.Batch, example.Pos, example.LM
    out = _run(example, tmp_path, "--steps", "6", "--log-every", "3", "--generate", "6")
    assert out["steps"] == 6 and len(out["sample"]) == 8 and math.isfinite(out["bits"])
    assert len(out["continuation"]) == 6
    assert out["baseline"] > 3.0  # bytes of Python source carry 4-5 bits each
    text = capsys.readouterr().out
    assert "unigram baseline" in text and "sample:" in text and "bits/byte" in text
    assert "continuation:" in text
    assert (tmp_path / "curves.png").exists() and any((tmp_path / "checkpoints").iterdir())
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "train_loss" in r] == [3, 6]
    loaded = ax.nn.load_safetensors(
        LM(example.PRESETS["test"], key=jax.random.key(9)), tmp_path / "model.safetensors"
    )
    assert loaded.tokens.weight.axes == out["model"].tokens.weight.axes
    train, valid = example.load_corpus(CORPUS)
    assert len(valid) > 0 and example.unigram_bits(train, valid) == out["baseline"]
    (x, y), *_ = example.eval_windows(valid, 4, 16, 1)
    assert x.axes == (Batch, Pos) and (x.array[:, 1:] == y.array[:, :-1]).all()
    # it trained from its token file: the training files, each after a NUL byte
    files = example.corpus_files(CORPUS)[0]
    want = np.concatenate([np.concatenate([[0], f]) for f in files])
    np.testing.assert_array_equal(ax.train.TokenFile(tmp_path / "train.bin").ids, want)
    assert any((tmp_path / "tensorboard").iterdir())


def test_the_example_trains_packed_and_resumes_as_if_never_stopped(
    example: Any, tmp_path: Path
) -> None:
    """``--packed`` (the files packed into windows, segment masks, restarted positions),
    stopped after 3 of 6 steps and resumed: the model of the run through, bit for bit, and
    TensorBoard's scalars the JSONL rows."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    args = ("--steps", "6", "--log-every", "3", "--packed", "--sample-bytes", "0")
    through = _run(example, tmp_path / "through", *args)
    _run(example, tmp_path / "cut", *args, "--stop-after", "3")
    resumed = _run(example, tmp_path / "cut", *args, "--resume")
    assert through["steps"] == resumed["steps"] == 6
    for a, b in zip(
        jax.tree.leaves(through["model"]), jax.tree.leaves(resumed["model"]), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    rows = [json.loads(r) for r in (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()]
    events = EventAccumulator(str(tmp_path / "cut" / "tensorboard"))
    events.Reload()  # both runs' files; the resumed one purged the steps after 3
    got = [(e.step, e.value) for e in events.Scalars("train_loss")]
    want = [(r["step"], r["train_loss"]) for r in rows if "train_loss" in r]
    assert [s for s, _ in got] == [s for s, _ in want] == [3, 6]
    np.testing.assert_allclose([v for _, v in got], [v for _, v in want], rtol=1e-6)


GPT2_FIXTURE = Path(__file__).resolve().parents[1] / "models" / "fixtures" / "gpt2"


def _byte_gpt2(tmp_path: Path) -> Path:
    """The GPT-2 fixture cut to a vocabulary of the 256 bytes (its token table's first 256
    rows): the fixture's own vocabulary is a BPE of 384 tokens, which the example refuses."""
    from safetensors.numpy import load_file, save_file

    folder = tmp_path / "bytes"
    folder.mkdir()
    arrays = load_file(GPT2_FIXTURE / "model.safetensors")
    arrays["transformer.wte.weight"] = np.ascontiguousarray(arrays["transformer.wte.weight"][:256])
    save_file(arrays, folder / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((GPT2_FIXTURE / "config.json").read_text())
    config.update(vocab_size=256, bos_token_id=0, eos_token_id=0)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_the_example_starts_from_a_hugging_face_gpt2(
    example: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from axjax.models import gpt2

    folder = _byte_gpt2(tmp_path)
    out = _run(example, tmp_path, "--steps", "4", "--init-from", str(folder))
    assert out["steps"] == 4 and len(out["sample"]) == 8 and math.isfinite(out["bits"])
    assert f"starting from {folder}" in capsys.readouterr().out
    trained, start = out["model"], gpt2.from_hf(folder)
    assert isinstance(trained, gpt2.GPT2)
    # its blocks in one scan, as the example's own model (--unroll: a tuple)
    assert isinstance(trained.blocks, ax.nn.LayerStack)
    moved = np.abs(np.asarray(trained.wte.weight.array) - np.asarray(start.wte.weight.array))
    assert moved.max() > 0  # it trained the pretrained weights
    again = gpt2.from_hf(tmp_path / "hf", unroll=False)  # written back as it came in
    for a, b in zip(jax.tree.leaves(trained), jax.tree.leaves(again), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_init_from_refuses_a_vocabulary_that_is_not_bytes(example: Any) -> None:
    """The GPT-2 fixture's vocabulary is a byte-level BPE of 384 tokens, not the bytes."""
    with pytest.raises(
        SystemExit, match=r"a vocabulary of 384; this example reads bytes and needs 256"
    ):
        example.pretrained(str(GPT2_FIXTURE), example.PRESETS["test"])


def test_bf16_training_reaches_the_f32_loss(example: Any, tmp_path: Path) -> None:
    f32 = _run(example, tmp_path / "f32", "--steps", "40", "--sample-bytes", "0")
    bf16 = _run(
        example, tmp_path / "bf16", "--steps", "40", "--sample-bytes", "0", "--precision", "bf16"
    )
    assert f32["bits"] < 6.5  # it learned: 8 bits/byte at initialisation (uniform bytes)
    # bf16 compute, f32 weights: within 0.05 bits/byte of f32 after 40 steps
    assert abs(bf16["bits"] - f32["bits"]) < 0.05, (bf16["bits"], f32["bits"])


#: how many more compiled instructions of a kind the axjax step may have than the expert
#: step (``benchmarks/transformer.py``: three einsum projections, the MLP on ``[b*t, e]``),
#: per layer: none. Its attention scores come out of ``dot_general`` as laid out
#: (``[Batch, Head, Pos, KeyPos]``), so it compiles to fewer transposes, copies and loop
#: fusions than the expert (measured at 1 and 2 layers: 19 and 38 transposes against 24
#: and 47), and the same dots.
TRANSFORMER_ALLOWANCE: dict[str, int] = {}


@pytest.mark.parametrize("layers", [1, 2])
def test_remat_gives_the_transformers_gradients(example: Any, layers: int) -> None:
    """``ax.nn.remat`` on every block of the language model (``--remat``), at two depths:
    the same loss and gradients, and less kept for the backward (the memory figures:
    ``python -m benchmarks.transformer``)."""
    import dataclasses

    import equinox as eqx
    import numpy as np

    cfg = dataclasses.replace(example.PRESETS["test"], layers=layers)
    ids = jax.random.randint(jax.random.key(1), (2, cfg.context + 1), 0, cfg.vocab)
    x = ax.tensor(ids[:, :-1], example.Batch, example.Pos, dtype=ax.I32)
    y = ax.tensor(ids[:, 1:], example.Batch, example.Pos, dtype=ax.I32)
    results = {}
    for remat in (False, True):
        lm = example.LM(cfg, key=jax.random.key(0), remat=remat)
        params, static = eqx.partition(lm, eqx.is_array)

        def loss(p: Any, static: Any = static) -> jax.Array:
            return example.lm_loss(eqx.combine(p, static), x, y).array

        value, grads = jax.jit(jax.value_and_grad(loss))(params)
        kept = jax.eval_shape(lambda p, f=loss: jax.vjp(f, p)[1], params)
        results[remat] = (
            value,
            jax.tree.leaves(grads),
            sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(kept)),
        )
    (v0, g0, kept0), (v1, g1, kept1) = results[False], results[True]
    np.testing.assert_allclose(v1, v0, rtol=1e-6)
    assert len(g0) == len(g1)
    for a, b in zip(g0, g1, strict=True):
        np.testing.assert_allclose(b, a, rtol=2e-5, atol=1e-6)
    assert kept1 < kept0


@pytest.mark.parametrize("layers", [1, 3])
def test_the_scanned_blocks_give_the_unrolled_loss_and_gradients(example: Any, layers: int) -> None:
    """The example's ``ax.nn.LayerStack`` (one scan over ``Layer``) against the same blocks
    in a Python loop (``unroll=True``): the loss and every gradient, to f32 rounding."""
    import dataclasses

    import equinox as eqx
    import numpy as np

    cfg = dataclasses.replace(example.PRESETS["test"], layers=layers)
    ids = jax.random.randint(jax.random.key(1), (2, cfg.context + 1), 0, cfg.vocab)
    x = ax.tensor(ids[:, :-1], example.Batch, example.Pos, dtype=ax.I32)
    y = ax.tensor(ids[:, 1:], example.Batch, example.Pos, dtype=ax.I32)
    out = {}
    for unroll in (False, True):
        lm = example.LM(cfg, key=jax.random.key(0), unroll=unroll)
        params, static = eqx.partition(lm, eqx.is_array)

        def loss(p: Any, static: Any = static) -> jax.Array:
            return example.lm_loss(eqx.combine(p, static), x, y).array

        out[unroll] = jax.jit(jax.value_and_grad(loss))(params)
    (v_scan, g_scan), (v_loop, g_loop) = out[False], out[True]
    assert isinstance(g_scan.blocks, ax.nn.LayerStack) and isinstance(g_loop.blocks, tuple)
    np.testing.assert_allclose(v_scan, v_loop, rtol=1e-6)
    per_layer = g_scan.blocks.unstack()  # the stacked gradients, one block per layer
    pairs = [(per_layer, list(g_loop.blocks))] + [
        (getattr(g_scan, f), getattr(g_loop, f)) for f in ("tokens", "positions", "ln_f")
    ]
    for a, b in pairs:
        leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
        assert len(leaves_a) == len(leaves_b) > 0
        for ga, gb in zip(leaves_a, leaves_b, strict=True):
            np.testing.assert_allclose(ga, gb, rtol=2e-5, atol=1e-6)


@pytest.fixture(scope="module")
def quick_steps() -> dict[str, Any]:
    """Both versions' steps at the quick preset, compiled fully optimised once for the module
    (XLA:CPU's kinds: ``on_cpu``): each one's cost kinds, and its loss over two steps."""
    from benchmarks._structure import cost_kinds, on_cpu
    from benchmarks.transformer import PRESETS, build
    from tests.conftest import set_compile_effort

    set_compile_effort(cheap=False)  # as the tests that read it are marked
    kinds, loss = {}, {}
    with on_cpu():  # the kinds and allowances are XLA:CPU's, whatever the default backend
        # the plain head, as the expert's: like for like (the blockwise head has fewer kinds)
        bench = build(PRESETS["quick"], "f32", implementation="einsum", head="plain")
        for k, step in bench.steps.items():
            x, y = bench.batch
            args = (x.array, y.array) if k == "jax" else (x, y)
            compiled = step.lower(*bench.states[k], *args).compile()
            kinds[k] = cost_kinds(compiled.as_text())
            p, s, first = compiled(*bench.states[k], *args)  # donates the start state
            loss[k] = [float(first), float(compiled(p, s, *args)[2])]
    return {"kinds": kinds, "loss": loss, "batch": bench.batch}


@pytest.mark.optimized  # reads what XLA compiles
def test_the_step_agrees_with_the_expert_and_compiles_to_its_kinds(
    quick_steps: dict[str, Any],
) -> None:
    from benchmarks._structure import COST_KINDS
    from benchmarks.transformer import PRESETS

    kinds, loss = quick_steps["kinds"], quick_steps["loss"]
    assert loss["axjax"] == pytest.approx(loss["jax"], rel=1e-5)  # same model, same steps
    layers = PRESETS["quick"].layers
    excess = {
        kind: (kinds["axjax"][kind], kinds["jax"][kind])
        for kind in COST_KINDS
        if kinds["axjax"][kind] > kinds["jax"][kind] + layers * TRANSFORMER_ALLOWANCE.get(kind, 0)
    }
    assert not excess, f"axjax step has more of these kinds (axjax, expert): {excess}"


@pytest.mark.optimized  # reads what XLA compiles
@pytest.mark.parametrize("kind", ["einsum", "transpose", "no custom backward"])
def test_a_slower_lowering_of_the_transformer_fails_its_guard(
    quick_steps: dict[str, Any], kind: str
) -> None:
    """Each mutation of ``benchmarks._structure.mutation`` (contractions through
    ``jnp.einsum``, an extra transpose per product, JAX's autodiff instead of the ops' own
    backward) gives the transformer step more of some costly kind than the allowance."""
    from benchmarks._structure import COST_KINDS, cost_kinds, mutation, on_cpu
    from benchmarks.transformer import PRESETS, build

    cfg = PRESETS["quick"]
    ref = quick_steps["kinds"]["jax"]  # the expert's, compiled once for the module
    with on_cpu():
        x, y = quick_steps["batch"]
        with mutation(kind):
            mutated = build(cfg, "f32", implementation="einsum", head="plain")
            got = cost_kinds(
                mutated.steps["axjax"].lower(*mutated.states["axjax"], x, y).compile().as_text()
            )
    excess = [
        k for k in COST_KINDS if got[k] > ref[k] + cfg.layers * TRANSFORMER_ALLOWANCE.get(k, 0)
    ]
    assert excess, f"{kind}: no kind above the expert's {dict(got)}"


# ------------------------------------------------------------------ attention in StableHLO
#: a context length that no other size of the model shares (vocabulary 256, width 32,
#: MLP 64, batch 4, head dim 16, 2 heads): a tensor with two dimensions of this size is
#: the attention scores (or their mask, softmax, cotangent)
CONTEXT = 24
LAYERS = 2
CUDNN_FORWARD, CUDNN_BACKWARD = "__cudnn$fmhaSoftmax", "__cudnn$fmhaSoftmaxBackward"


def _stablehlo(who: str, dtype: str, platform: str = "cpu", **kwargs: Any) -> str:
    """The StableHLO of one training step (``who``: ``"axjax"`` or the expert ``"jax"``)
    at :data:`CONTEXT` and :data:`LAYERS`, lowered for ``platform``."""
    import dataclasses

    from benchmarks.transformer import PRESETS, build

    cfg = dataclasses.replace(PRESETS["quick"], context=CONTEXT, layers=LAYERS)
    b = build(cfg, dtype, **kwargs)
    x, y = b.batch
    args = (x, y) if who == "axjax" else (x.array, y.array)
    lowered = b.steps[who].trace(*b.states[who], *args).lower(lowering_platforms=(platform,))
    return str(lowered.as_text())


def _cuda_step(**kwargs: Any) -> str:
    """The axjax bf16 step lowered for CUDA, as traced on an H100 (``pretend_cuda``)."""
    from benchmarks._structure import pretend_cuda

    try:
        with pretend_cuda("9.0"):
            return _stablehlo("axjax", "bf16", "cuda", **kwargs)
    except LookupError as e:  # JAX's private cuDNN queries moved (another JAX version)
        pytest.skip(f"cannot pretend to lower for CUDA with this JAX: {e}")


def test_on_a_gpu_the_step_runs_one_cudnn_flash_attention_each_way_per_layer() -> None:
    """``implementation="auto"`` in bf16 on an NVIDIA GPU: per layer one cuDNN flash-attention
    forward and one backward (JAX's VJP of the fused op, not a forward again inside axjax's
    backward), and no tensor anywhere with both position axes."""
    from benchmarks._structure import custom_calls, score_census

    text = _cuda_step()
    calls = custom_calls(text)
    assert calls[CUDNN_FORWARD] == LAYERS and calls[CUDNN_BACKWARD] == LAYERS, calls
    assert score_census(text, CONTEXT, CONTEXT).lines == 0


def test_with_axjaxs_own_backward_the_gpu_step_runs_the_forward_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The mutation that the count above catches: ``FusedAttention`` wrapped in axjax's
    ``custom_vjp`` (``jax_vjp`` off) re-runs the flash-attention forward in its backward."""
    from axjax.nn._fused_attention import FusedAttention
    from benchmarks._structure import custom_calls

    monkeypatch.setattr(FusedAttention, "jax_vjp", False)
    calls = custom_calls(_cuda_step())
    assert calls[CUDNN_FORWARD] == 2 * LAYERS and calls[CUDNN_BACKWARD] == LAYERS, calls


def _score_guard(dtype: str) -> list[str]:
    """What is wrong with the axjax einsum step's attention scores against the expert's
    einsum step (empty: the guard passes): a transpose of a score-shaped tensor, a product
    over the scores whose batch dimensions are not leading, more score-shaped ops."""
    from benchmarks._structure import score_census

    mine = score_census(_stablehlo("axjax", dtype, implementation="einsum"), CONTEXT, CONTEXT)
    expert = score_census(
        _stablehlo("jax", dtype, implementation="einsum", jax_attention="einsum"),
        CONTEXT,
        CONTEXT,
    )
    assert len(expert.dots) == 4 * LAYERS and not expert.transposes and not expert.non_leading
    problems = [f"transpose of the scores: {t}" for t in mine.transposes]
    problems += [f"batch dims not leading: {d}" for d in mine.non_leading]
    if mine.total > expert.total:
        problems.append(f"{mine.total} score-shaped ops, the expert has {expert.total}")
    if len(mine.dots) != len(expert.dots):
        problems.append(f"{len(mine.dots)} products over the scores, expert {len(expert.dots)}")
    return problems


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_the_einsum_attention_never_transposes_its_scores(dtype: str) -> None:
    assert _score_guard(dtype) == []


def test_query_major_scores_fail_the_score_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layout before: scores in the query's order, ``[Batch, Pos, Head, KeyPos]`` (the
    query contracted as it comes): a transpose of the scores each way per layer."""
    from axjax.nn import _attention_kernels

    monkeypatch.setattr(_attention_kernels, "_score_layout", lambda q, k, over: q.axes)
    problems = _score_guard("f32")
    assert sum(p.startswith("transpose") for p in problems) == 2 * LAYERS, problems
    assert any(p.startswith("batch dims") for p in problems), problems


@pytest.mark.parametrize("unroll", [False, True])
def test_the_example_generates_with_the_cache_as_recomputing_would(
    example: Any, unroll: bool
) -> None:
    """Greedy ``sample`` (``ax.nn.generate``, a KV cache per block) gives the bytes that
    recomputing the whole window each step gives, with a LayerStack and unrolled."""
    cfg = example.PRESETS["test"]
    model = example.LM(cfg, key=jax.random.key(3), unroll=unroll)
    prompt, n = b"def f(x):", 6
    got = example.sample(model, prompt, n, cfg.context, jax.random.key(0), 0.0)
    ids = list(prompt[-(cfg.context - n) :])
    for _ in range(n):
        logits = model(ax.tensor(np.array([ids], np.int32), example.Batch, example.Pos))
        last = ax.transpose(logits, example.Batch, example.Pos, example.Vocab).array[0, -1]
        ids.append(int(np.argmax(np.asarray(last))))
    assert got == bytes(ids[-n:])
