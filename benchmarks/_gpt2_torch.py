"""The PyTorch row of ``benchmarks.gpt2``: the example's model as a PyTorch expert writes it.

``torch.compile``, ``F.scaled_dot_product_attention`` (flash attention on a GPU in bf16),
bf16 autocast over float32 weights, fused AdamW, TF32 allowed; the weights are the axjax
model's, copied. torch is never a dependency of axjax: this module imports it only when the
row runs.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

from .gpt2 import BETAS, EPS, LR, WEIGHT_DECAY, Row

__all__ = ["torch_row", "torch_unavailable"]


def torch_unavailable() -> str | None:
    """Why the row cannot run here (``None``: it can): torch importable, with CUDA when JAX
    runs on a GPU (the two rows must share the device to compare)."""
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed (pip install torch; never an axjax dependency)"
    import jax
    import torch

    if jax.default_backend() == "gpu" and not torch.cuda.is_available():
        return f"torch {torch.__version__} has no CUDA here"
    return None


def _model_class() -> Any:
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self, embed: int, heads: int, mlp: int) -> None:
            super().__init__()
            self.heads = heads
            self.ln_1, self.ln_2 = nn.LayerNorm(embed), nn.LayerNorm(embed)
            self.c_attn = nn.Linear(embed, 3 * embed, bias=False)
            self.c_proj = nn.Linear(embed, embed, bias=False)
            self.c_fc, self.mlp_proj = nn.Linear(embed, mlp), nn.Linear(mlp, embed)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, e = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(e, dim=2)
            q, k, v = (z.view(b, t, self.heads, e // self.heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, e))
            h = F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
            return x + self.mlp_proj(h)

    class GPT(nn.Module):
        def __init__(self, cfg: Any) -> None:
            super().__init__()
            self.wte = nn.Embedding(cfg.vocab, cfg.embed)
            self.wpe = nn.Embedding(cfg.context, cfg.embed)
            self.h = nn.ModuleList(Block(cfg.embed, cfg.heads, cfg.mlp) for _ in range(cfg.layers))
            self.ln_f = nn.LayerNorm(cfg.embed)

        def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.ln_f(x) @ self.wte.weight.T  # tied
            return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())

    return GPT


def _load(model: Any, lm: Any) -> None:
    """The axjax model's weights into the torch model (the expert's layout in between)."""
    import torch

    from .transformer import jax_weights

    w = jax_weights(lm)

    def t(a: Any) -> torch.Tensor:
        return torch.from_numpy(np.array(a, dtype=np.float32))

    sd = {"wte.weight": t(w["tok"]), "wpe.weight": t(w["pos"])}
    sd |= {"ln_f.weight": t(w["ln_f"][0]), "ln_f.bias": t(w["ln_f"][1])}
    for i, b in enumerate(w["blocks"]):
        qkv, o = np.asarray(b["qkv"]), np.asarray(b["o"])  # [3, H, D, E], [E, H, D]
        p = f"h.{i}."
        sd |= {
            p + "ln_1.weight": t(b["ln1"][0]),
            p + "ln_1.bias": t(b["ln1"][1]),
            p + "ln_2.weight": t(b["ln2"][0]),
            p + "ln_2.bias": t(b["ln2"][1]),
            p + "c_attn.weight": t(qkv.reshape(-1, qkv.shape[-1])),
            p + "c_proj.weight": t(o.reshape(o.shape[0], -1)),
            p + "c_fc.weight": t(np.asarray(b["up"][0]).T),
            p + "c_fc.bias": t(b["up"][1]),
            p + "mlp_proj.weight": t(np.asarray(b["down"][0]).T),
            p + "mlp_proj.bias": t(b["down"][1]),
        }
    model.load_state_dict(sd, strict=True)


def torch_row(lm: Any, cfg: Any, batch: tuple[np.ndarray, np.ndarray], *, compile: bool) -> Row:
    """The row: one compiled forward+backward under bf16 autocast, then fused AdamW."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model = _model_class()(cfg).to(device)
    _load(model, lm)
    opt = torch.optim.AdamW(
        model.parameters(),
        lr=LR,
        betas=BETAS,
        eps=EPS,
        weight_decay=WEIGHT_DECAY,
        fused=device == "cuda",
    )
    run_model = torch.compile(model) if compile else model
    x, y = (torch.from_numpy(a.astype(np.int64)).to(device) for a in batch)

    def step() -> Any:
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = run_model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    def wait(_: Any) -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    name = "pytorch (compiled)" if compile else "pytorch (eager)"
    return Row(name, step, lambda loss: float(loss), wait, None, note=device)
