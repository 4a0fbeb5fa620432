"""A model is an argument of a serialized ``jax.export`` function (issue 33: JAX refused
"unregistered type Affine"). Every layer the registry declares is registered with
``jax.export`` by its declaration (``axjax/nn/_export.py``); the round trip below is
generated over the registry, so a new layer without a case here fails. A static field that
cannot be written by name is an ``ax.ExportAxisError`` showing the closure pattern.

Mutation (checked by hand, the registration is process-wide): without ``exportable(cls)``
in ``register_layer``, ``test_every_declared_layer_round_trips`` fails for all 31 layers
with JAX's "Cannot serialize PyTreeDef containing an unregistered type
`<class 'axjax.nn._dropout.Dropout'>`".
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import numpy as np
import pytest

import axjax as ax
from axjax.nn._registry import declared_layers
from tests.nn.helpers import Batch, Chan, Embed, Feature, Height, Hidden, In, Out, Time, Width

#: `make test-quick` leaves these out (every layer through jax.export and back)
pytestmark = pytest.mark.slow

K = jax.random.key(0)
ROOT = Path(__file__).resolve().parents[2]


def _gru() -> ax.nn.GRUCell[Any, In, Hidden]:
    return ax.nn.GRUCell(In, Hidden, 3, 4, key=K)


#: one small instance of every declared layer (the keys must be the registry's names)
BUILDERS: dict[str, Callable[[], Any]] = {
    "Dropout": lambda: ax.nn.Dropout(0.1),
    "MultiheadAttention": lambda: ax.nn.MultiheadAttention(
        Embed, 8, num_heads=2, query_pos=Time, key=K
    ),
    "GroupedQueryAttention": lambda: ax.nn.GroupedQueryAttention(
        Embed, 8, num_heads=2, num_kv_heads=1, query_pos=Time, key=K
    ),
    "SwiGLU": lambda: ax.nn.SwiGLU(Embed, 4, Feature, 3, key=K),
    "Conv": lambda: ax.nn.Conv((Height,), Chan, Feature, 2, 3, 3, key=K),
    "Conv1D": lambda: ax.nn.Conv1D(Height, Chan, Feature, 2, 3, 3, key=K),
    "Conv2D": lambda: ax.nn.Conv2D((Height, Width), Chan, Feature, 2, 3, 3, key=K),
    "Conv3D": lambda: ax.nn.Conv3D((Height, Width, Time), Chan, Feature, 2, 3, 3, key=K),
    "Embedding": lambda: ax.nn.Embedding(In, Embed, 5, 4, key=K),
    "Affine": lambda: ax.nn.Affine(In, Out, 3, 2, key=K),
    "Linear": lambda: ax.nn.Linear(In, Out, 3, 2, key=K),
    "MLP": lambda: ax.nn.MLP(In, Out, 3, 2, hidden={Hidden: 4}, key=K),
    "LayerNorm": lambda: ax.nn.LayerNorm(Embed, 4),
    "RMSNorm": lambda: ax.nn.RMSNorm(Embed, 4),
    "MaxPool": lambda: ax.nn.MaxPool((Height,), 2),
    "AvgPool": lambda: ax.nn.AvgPool((Height,), 2),
    "MaxPool1D": lambda: ax.nn.MaxPool1D(Height, 2),
    "MaxPool2D": lambda: ax.nn.MaxPool2D((Height, Width), 2),
    "AvgPool1D": lambda: ax.nn.AvgPool1D(Height, 2),
    "AvgPool2D": lambda: ax.nn.AvgPool2D((Height, Width), 2),
    "GlobalMaxPool": lambda: ax.nn.GlobalMaxPool((Height, Width)),
    "GlobalAvgPool": lambda: ax.nn.GlobalAvgPool((Height, Width)),
    "RNNCell": lambda: ax.nn.RNNCell(In, Hidden, 3, 4, key=K),
    "GRUCell": _gru,
    "LSTMCell": lambda: ax.nn.LSTMCell(In, Hidden, 3, 4, key=K),
    "Remat": lambda: ax.nn.remat(ax.nn.Affine(In, Out, 3, 2, key=K), policy="dots"),
    "LoRA": lambda: ax.nn.LoRA(ax.nn.Affine(In, Out, 3, 2, key=K), rank=2, key=K),
    "Recurrent": lambda: ax.nn.Recurrent(_gru(), Time),
    "Bidirectional": lambda: ax.nn.Bidirectional(_gru(), _gru(), Time),
    "Stacked": lambda: ax.nn.Stacked([ax.nn.Recurrent(_gru(), Time)]),
    "Lambda": lambda: ax.nn.Lambda(ax.relu),
    "Sequential": lambda: ax.nn.Sequential([ax.nn.Affine(In, Out, 3, 2, key=K), ax.relu]),
    "LayerStack": lambda: ax.nn.LayerStack.init(
        lambda k: ax.nn.Sequential(
            [ax.nn.Affine(Embed, Hidden, 4, 3, key=k), ax.nn.Affine(Hidden, Embed, 3, 4, key=k)]
        ),
        2,
        key=K,
    ),
    "ChildSumTreeLSTMCell": lambda: ax.nn.ChildSumTreeLSTMCell(In, Hidden, 3, 4, key=K),
    "Ensemble": lambda: ax.nn.Ensemble.init(
        lambda k: ax.nn.MLP(In, Out, 3, 2, hidden={Hidden: 4}, key=k), 3, key=K
    ),
}


def double(model: Any) -> Any:
    """A function whose argument and result are the model: both trees are serialized."""
    return jax.tree.map(lambda a: a * 2, model)


def test_every_declared_layer_has_a_case() -> None:
    assert set(BUILDERS) == {s.name for s in declared_layers()}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_declared_layer_round_trips(name: str) -> None:
    model = BUILDERS[name]()
    blob = jax.export.export(jax.jit(double))(model).serialize()
    got = jax.export.deserialize(blob).call(model)
    assert type(got) is type(model)
    assert jax.tree.structure(got) == jax.tree.structure(model)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(double(model)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_model_passed_as_an_argument_loads_in_another_process(tmp_path: Path) -> None:
    """The issue's case: the model is an argument, not a constant; the blob loads in a fresh
    process (which imports the labels' module) and runs there on another model's values."""
    mlp = ax.nn.MLP(In, Out, 3, 2, hidden={Hidden: 4}, key=K)
    x = ax.ones((5, 3), Batch, In)
    exported = jax.export.export(jax.jit(lambda m, x: m(x)))(mlp, x)
    (tmp_path / "mlp.bin").write_bytes(exported.serialize())
    script = textwrap.dedent(
        f"""
        import jax, numpy as np, axjax as ax
        from tests.nn.helpers import Batch, Hidden, In, Out
        from pathlib import Path
        f = jax.export.deserialize(Path({str(tmp_path / "mlp.bin")!r}).read_bytes())
        other = ax.nn.MLP(In, Out, 3, 2, hidden={{Hidden: 4}}, key=jax.random.key(7))
        y = f.call(other, ax.ones((5, 3), Batch, In))
        np.testing.assert_allclose(y.array, other(ax.ones((5, 3), Batch, In)).array, rtol=1e-6)
        print(y.axes == (Batch, Out))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr[-3000:]


@ax.nn.exportable
class TwoLayers(eqx.Module):
    l1: ax.nn.Affine[Any, In, Hidden]
    l2: ax.nn.Affine[Any, Hidden, Out]

    def __call__(self, x: Any) -> Any:
        return self.l2(ax.tanh(self.l1(x)))


class Unregistered(eqx.Module):
    l1: ax.nn.Affine[Any, In, Hidden]


def test_a_module_of_ones_own_is_exportable_when_decorated() -> None:
    k1, k2 = jax.random.split(K)
    model = TwoLayers(
        ax.nn.Affine(In, Hidden, 3, 4, key=k1), ax.nn.Affine(Hidden, Out, 4, 2, key=k2)
    )
    x = ax.ones((5, 3), Batch, In)
    blob = jax.export.export(jax.jit(lambda m, x: m(x)))(model, x).serialize()
    y = jax.export.deserialize(blob).call(model, x)
    np.testing.assert_allclose(y.array, model(x).array, rtol=1e-6)
    assert ax.nn.is_exportable(TwoLayers) and not ax.nn.is_exportable(Unregistered)
    with pytest.raises(TypeError, match="exportable: 3 is not an Equinox module class"):
        ax.nn.exportable(3)  # type: ignore[type-var]  # refused at run time: tested here


def test_a_static_value_without_a_name_shows_the_closure_pattern() -> None:
    model = ax.nn.Sequential([ax.nn.Affine(In, Out, 3, 2, key=K), lambda t: t * 2])
    x = ax.ones((5, 3), Batch, In)
    exported = jax.export.export(jax.jit(lambda m, x: m(x)))(model, x)
    with pytest.raises(ax.ExportAxisError) as e:
        exported.serialize()
    assert "Cannot serialize a Lambda for jax.export: its static field" in str(e.value)
    assert "is not defined at the top level of a module (a lambda" in str(e.value)
    assert "jax.export.export(jax.jit(lambda x: model(x)))(x)" in str(e.value)
    # the closure pattern itself: the model's arrays are constants of the exported function
    closed = jax.export.deserialize(jax.export.export(jax.jit(lambda x: model(x)))(x).serialize())
    np.testing.assert_allclose(closed.call(x).array, model(x).array, rtol=1e-6)
