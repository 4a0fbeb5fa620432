"""Make the PEFT adapter fixtures that tests/models/test_peft.py reads, with peft itself.

For each adapter in :data:`ADAPTERS`, the script loads its base model from the checked-in
Hugging Face fixture (``tests/models/fixtures/<base>``, made by ``make_hf_fixtures.py``),
wraps it with ``peft.get_peft_model`` and a ``LoraConfig`` (a rank and alpha, and a
``rank_pattern`` / ``alpha_pattern`` row so that one module has its own), sets every
``lora_A`` / ``lora_B`` to seeded random values (PEFT starts ``lora_B`` at zero: an adapter
that changes nothing would prove nothing) and writes, in
``tests/models/fixtures/peft-<name>/``:

- ``adapter_config.json`` and ``adapter_model.safetensors``, as ``save_pretrained`` writes
  them (``base_model_name_or_path`` the base fixture's path from the checkout's root);
- ``reference.safetensors``: the base fixture's ``ids`` and the logits transformers + peft
  compute for them with the adapter.

It also writes ``tests/models/fixtures/peft_record.json``: peft's version, the schema of
``adapter_config.json`` (each key and the JSON type of its value as peft writes it), and
for each adapter its key names and shapes. The suite compares the files axjax writes with
this record, so the layout is checked where peft is not installed (it needs torch).

Run it from the checkout's root with torch, transformers and peft installed (the
environment of ``make_hf_fixtures.py`` plus ``pip install peft``)::

    .venv-hf/bin/python tools/make_peft_fixtures.py

Every file is the same bytes from one run to the next.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_hf_fixtures import FIXTURES, ROOT, SEED, save_sorted  # noqa: E402

#: each adapter: its base fixture, target_modules, r, lora_alpha, rank_pattern, alpha_pattern
ADAPTERS: dict[str, dict[str, Any]] = {
    # GPT-2's MLP (Conv1D c_fc and the MLP's c_proj)
    "gpt2-mlp": {
        "base": "gpt2",
        "target_modules": ["c_fc", "mlp.c_proj"],
        "r": 4,
        "lora_alpha": 8,
        "rank_pattern": {"transformer.h.1.mlp.c_fc": 2},
        "alpha_pattern": {"transformer.h.1.mlp.c_fc": 6},
    },
    # every linear map of GPT-2: the fused c_attn (q | k | v), both c_proj, c_fc
    "gpt2": {
        "base": "gpt2",
        "target_modules": ["c_attn", "c_proj", "c_fc"],
        "r": 4,
        "lora_alpha": 8,
        "rank_pattern": {"transformer.h.0.attn.c_attn": 6},
        "alpha_pattern": {"transformer.h.0.attn.c_attn": 3},
    },
    # every linear map of a grouped-query Llama
    "llama": {
        "base": "llama-kv2",
        "target_modules": [
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        ],
        "r": 4,
        "lora_alpha": 8,
        "rank_pattern": {"model.layers.1.self_attn.v_proj": 2},
        "alpha_pattern": {"model.layers.1.self_attn.v_proj": 5},
    },
}
RECORD = FIXTURES / "peft_record.json"


def _json_type(value: object) -> str:
    """The JSON type of a value: null, bool, int, float, str, list or dict."""
    if value is None:
        return "null"
    for kind in (bool, int, float, str, list, dict):
        if isinstance(value, kind):
            return kind.__name__
    raise TypeError(f"not a JSON value: {value!r}")


def make(name: str, out: Path = FIXTURES) -> dict[str, Any]:
    """Write adapter ``name``'s folder ``out/peft-<name>``; return its record (key names,
    shapes, the config's schema). Run from the checkout's root (the base fixtures' paths)."""
    import peft
    import torch
    from safetensors import safe_open
    from safetensors.numpy import load_file
    from transformers import AutoModelForCausalLM

    spec = ADAPTERS[name]
    base = f"tests/models/fixtures/{spec['base']}"
    model = AutoModelForCausalLM.from_pretrained(base, attn_implementation="eager").eval()
    config = peft.LoraConfig(
        task_type="CAUSAL_LM",
        target_modules=spec["target_modules"],
        r=spec["r"],
        lora_alpha=spec["lora_alpha"],
        rank_pattern=spec["rank_pattern"],
        alpha_pattern=spec["alpha_pattern"],
        lora_dropout=0.0,
        fan_in_fan_out=spec["base"] == "gpt2",  # GPT-2's Conv1D stores [in, out]
    )
    tuned = peft.get_peft_model(model, config).eval()
    g = torch.Generator().manual_seed(SEED + 2)
    with torch.no_grad():
        for _, p in sorted(tuned.named_parameters()):
            if ".lora_" in _:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    folder = out / f"peft-{name}"
    tuned.save_pretrained(folder)
    ref = load_file(FIXTURES / spec["base"] / "reference.safetensors")
    with torch.no_grad():
        logits = tuned(torch.from_numpy(ref["ids"].astype(np.int64))).logits.float().numpy()
    save_sorted(
        folder / "reference.safetensors",
        {"ids": ref["ids"], "logits": logits.astype(np.float32)},
        {"base": spec["base"]},
    )
    cfg = folder / "adapter_config.json"
    data = json.loads(cfg.read_text())
    if isinstance(data["target_modules"], list):  # peft writes a set, in a hash's order
        data["target_modules"] = sorted(data["target_modules"])
    cfg.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    (folder / "README.md").unlink(missing_ok=True)  # the model card: not a fixture
    with safe_open(os.fspath(folder / "adapter_model.safetensors"), framework="numpy") as f:
        keys = {k: list(f.get_tensor(k).shape) for k in sorted(f.keys())}
        metadata = f.metadata()
    return {
        "base": spec["base"],
        "keys": keys,
        "metadata": metadata,
        "config": {k: data[k] for k in ("r", "lora_alpha", "fan_in_fan_out", "target_modules")},
        "schema": {k: _json_type(v) for k, v in sorted(data.items())},
    }


def main() -> None:
    import peft

    os.chdir(ROOT)
    adapters = {name: make(name) for name in ADAPTERS}
    schemas = {json.dumps(a.pop("schema"), sort_keys=True) for a in adapters.values()}
    assert len(schemas) == 1, "peft wrote configs of different schemas"
    record = {
        "peft_version": peft.__version__,
        "config_schema": json.loads(schemas.pop()),
        "adapters": adapters,
    }
    RECORD.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    for name in ADAPTERS:
        folder = FIXTURES / f"peft-{name}"
        sizes = ", ".join(f"{f.name} {f.stat().st_size} B" for f in sorted(folder.iterdir()))
        print(f"{folder}: {sizes}")


if __name__ == "__main__":
    main()
