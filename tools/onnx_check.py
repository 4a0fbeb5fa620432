"""Export axjax models to ONNX with jax2onnx and compare onnxruntime's outputs with axjax's.

jax2onnx and onnxruntime are not axjax dependencies (jax2onnx pins older flax and
orbax-checkpoint than the ``sharded`` extra), so this check runs in its own environment:
``make onnx-check`` creates ``.venv-onnx`` and runs this script there. CI does not run it.

What it exports (each as a function of plain arrays: the Tensors are unwrapped at the
boundary, since ONNX has no axis names):

- an MLP (``ax.nn.MLP``, 16 -> 32 -> 32 -> 4), with an open batch size;
- an ensemble of five such MLPs (``ax.nn.Ensemble``, called with ``ax.vmap``);
- the GPT-2 of ``axjax.models.gpt2`` on its test fixture, when both exist (otherwise it
  says "skipped: no axjax.models.gpt2").

For each, the largest absolute difference between onnxruntime and axjax must be at most
``--atol`` (1e-5). The exit status is 0 when every check passes, 1 otherwise.

Example:
    $ make onnx-check
    $ .venv-onnx/bin/python tools/onnx_check.py --atol 1e-5 --keep out/
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, final

ROOT = Path(__file__).resolve().parents[1]
GPT2_FIXTURE = ROOT / "tests" / "models" / "fixtures" / "gpt2"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="onnx_check",
        description="Export an MLP, an ensemble and (when present) GPT-2 to ONNX with "
        "jax2onnx and compare onnxruntime's outputs with axjax's.",
    )
    p.add_argument("--atol", type=float, default=1e-5, help="largest absolute difference")
    p.add_argument(
        "--gpt2-fixture",
        type=Path,
        default=GPT2_FIXTURE,
        help="the GPT-2 fixture folder (config.json, model.safetensors, reference.safetensors)",
    )
    p.add_argument("--keep", type=Path, default=None, help="write the .onnx files here")
    return p.parse_args(argv)


def _need(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as e:
        sys.exit(
            f"onnx_check: {module} is not installed ({e}); run `make onnx-check`, which "
            "creates .venv-onnx with jax2onnx and onnxruntime"
        )


def export_and_compare(
    name: str,
    fn: Callable[..., Any],
    inputs: list[Any],
    specs: list[Any],
    atol: float,
    keep: Path | None,
) -> bool:
    """Export ``fn`` with jax2onnx, run it in onnxruntime on ``inputs`` and compare."""
    import numpy as np

    to_onnx = _need("jax2onnx").to_onnx
    ort = _need("onnxruntime")
    t0 = time.perf_counter()
    proto = to_onnx(fn, specs, model_name=name)
    seconds = time.perf_counter() - t0
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"{name}.onnx").write_bytes(proto.SerializeToString())
    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: not its notes on unused constants
    session = ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    feed = {i.name: np.asarray(a) for i, a in zip(session.get_inputs(), inputs, strict=True)}
    (got,) = session.run(None, feed)
    want = np.asarray(fn(*inputs))
    if got.shape != want.shape:
        print(f"FAIL {name}: onnxruntime gives shape {got.shape}, axjax {want.shape}")
        return False
    diff = float(np.abs(got - want).max())
    ok = diff <= atol
    print(
        f"{'ok  ' if ok else 'FAIL'} {name}: shape {tuple(want.shape)}, max |onnx - axjax| = "
        f"{diff:.2e} (atol {atol:.0e}); export {seconds:.1f} s, {len(proto.graph.node)} nodes"
    )
    return ok


def check_mlp(atol: float, keep: Path | None) -> bool:
    import jax
    import numpy as np

    import axjax as ax

    @final
    class Batch(ax.Axis): ...

    @final
    class In(ax.Axis): ...

    @final
    class Hidden(ax.Axis): ...

    @final
    class Out(ax.Axis): ...

    key = jax.random.key(0)
    mlp = ax.nn.MLP(In, Out, 16, 4, hidden={Hidden: 32}, activation=ax.gelu, key=key)

    def predict(x: jax.Array) -> jax.Array:
        return mlp(ax.tensor(x, Batch, In)).array

    x = np.random.default_rng(0).normal(size=(8, 16)).astype(np.float32)
    ok = export_and_compare("mlp", predict, [x], [("B", 16)], atol, keep)
    ens = ax.nn.Ensemble.init(
        lambda k: ax.nn.MLP(In, Out, 16, 4, hidden={Hidden: 32}, key=k), 5, key=key
    )

    def ensemble(x: jax.Array) -> jax.Array:
        return ens(ax.tensor(x, Batch, In)).array  # [Member, Batch, Out]

    return export_and_compare("ensemble", ensemble, [x], [x.shape], atol, keep) and ok


def check_gpt2(fixture: Path, atol: float, keep: Path | None) -> bool | None:
    """GPT-2's logits on the fixture's ids; ``None`` (skipped) without the model."""
    try:
        gpt2 = importlib.import_module("axjax.models.gpt2")
    except ImportError:
        print("skipped: no axjax.models.gpt2")
        return None
    if not (fixture / "model.safetensors").exists():
        print(f"skipped: no GPT-2 fixture at {fixture}")
        return None
    import jax
    import numpy as np
    from safetensors.numpy import load_file

    import axjax as ax

    @final
    class Batch(ax.Axis): ...

    model = gpt2.from_hf(fixture)
    ids = load_file(str(fixture / "reference.safetensors"))["ids"].astype(np.int32)

    def logits(i: jax.Array) -> jax.Array:
        out: jax.Array = model(ax.tensor(i, Batch, gpt2.Pos, dtype=ax.I32)).array
        return out

    # the ids themselves give the input's shape and dtype (int32)
    return export_and_compare("gpt2", logits, [ids], [ids], atol, keep)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _need("jax2onnx")
    _need("onnxruntime")
    results = [check_mlp(args.atol, args.keep), check_gpt2(args.gpt2_fixture, args.atol, args.keep)]
    failed = [r for r in results if r is False]
    print("onnx_check: " + ("FAILED" if failed else "all checks passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
