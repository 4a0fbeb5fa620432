"""Where the LSTM's gap to hand-written JAX came from: the weights' storage order.

``python -m benchmarks.lstm_layout`` times, interleaved, the LSTM of ``models/_lstm.py``:

- ``jax [in, out]``: the reference (``x @ W`` with ``W[in, 4H]``, the JAX/Flax habit);
- ``jax [out, in]``: the same hand-written JAX with PyTorch's and Equinox's layout
  (``x @ W.T``, ``W[4H, in]``);
- ``axjax [In, Gate, Hidden]``: ``ax.nn.LSTMCell`` as it stores its weights (input-major);
- ``axjax [Gate, Hidden, In]``: the same cell with its weights stored output-major
  (PyTorch's order, as the cell stored them before).

On XLA's CPU backend hand-written JAX in the output-major layout gets a transposed copy of
the weight on every step of the scan (not hoisted out of the loop): 0.84x. axjax's
``contract`` lowers either layout without that copy (both axjax variants about 1.09x).
Both split the gates with one ``ax.unstack`` (its backward: one concatenate, as
``jnp.split``'s); four ``ax.index`` ops were slower, their backward padding each gate's
cotangent into a zero tensor of the gates' size.
"""

from __future__ import annotations

import statistics
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

import axjax as ax

from ._common import Runner, jit_train_step, load_mnist, window
from .models import _lstm
from .models._frameworks import put_jax


def _loss_out_in(p: Any, x: Any, y: Any) -> Any:
    def cell(carry: Any, xt: Any) -> tuple[Any, None]:
        h, c = carry
        z = xt @ p["wih"].T + h @ p["whh"].T + p["bias"]
        i, f, g, o = jnp.split(z, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        return (jax.nn.sigmoid(o) * jnp.tanh(c), c), None

    zero = jnp.zeros((x.shape[0], _lstm.HIDDEN), x.dtype)
    (h, _), _ = jax.lax.scan(cell, (zero, zero), jnp.swapaxes(x, 0, 1))
    return optax.softmax_cross_entropy_with_integer_labels(h @ p["w"].T + p["b"], y).mean()


def runners() -> dict[str, Runner]:
    """The four variants, from the same weights."""
    p = _lstm.init(0)
    model = _lstm.AxLSTM(p)
    gate, prev, hid = ax.nn.Gate, ax.nn.Prev, _lstm.Hidden
    out_major = eqx.tree_at(
        lambda m: (m.cell.weight_ih, m.cell.weight_hh),
        model,
        (
            ax.transpose(model.cell.weight_ih, gate, hid, _lstm.Feat),
            ax.transpose(model.cell.weight_hh, gate, hid, prev),
        ),
    )

    def loss(m: Any, x: Any, y: Any) -> Any:
        return _lstm.axjax_loss(m, x, y).array

    return {
        "jax [in, out]": _lstm.build_jax(p),
        "jax [out, in]": jit_train_step(
            _loss_out_in, {k: jnp.asarray(v) for k, v in p.items()}, put_jax
        ),
        "axjax [In, Gate, Hidden]": jit_train_step(loss, model, _lstm.put_axjax, split=True),
        "axjax [Gate, Hidden, In]": jit_train_step(loss, out_major, _lstm.put_axjax, split=True),
    }


def main(rounds: int = 7, steps: int = 40) -> dict[str, float]:
    data = load_mnist()
    idx = data.batches(seed=1, count=1)[0]
    rs = runners()
    fixed = {k: r.put(data.images[idx], data.labels[idx]) for k, r in rs.items()}
    states = {k: r.state for k, r in rs.items()}
    for k, r in rs.items():
        states[k] = window(r, states[k], 10, lambda i, k=k: fixed[k])[0]
    sps: dict[str, list[float]] = {k: [] for k in rs}
    ratios: dict[str, list[float]] = {k: [] for k in rs}
    for _ in range(rounds):
        for k, r in rs.items():
            states[k], v, _ = window(r, states[k], steps, lambda i, k=k: fixed[k])
            sps[k].append(v)
        for k in rs:  # against the reference of the same round (the machine's load drifts)
            ratios[k].append(sps[k][-1] / sps["jax [in, out]"][-1])
    out = {}
    for k, v in sps.items():
        out[k] = statistics.median(v)
        r = ratios[k]
        print(
            f"{k:26s} {out[k]:6.1f} steps/s  {statistics.median(r):.2f} "
            f"[{min(r):.2f}-{max(r):.2f}] x jax [in, out]"
        )
    return out


if __name__ == "__main__":
    main()
