"""``ax.nn.Ensemble``: models of one structure stacked along a ``Member`` axis, called with
``ax.vmap(over=Member)``.

The call must equal the members called one by one (values and gradients), member ``i`` must
be ``make(jax.random.split(key, n)[i])``, members must draw their own dropout masks, training
on the sum of the members' losses must leave each member where it would be trained alone,
the stacked parameters must round-trip through safetensors and ``Checkpoints``, and bad
input must get axjax's own errors.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import axjax as ax
from tests.nn.helpers import Batch, Hidden, In, Out, close, orders, rand

Member = ax.nn.Member
KEY = jax.random.key(3)


def is_tensor(x: object) -> bool:
    return isinstance(x, ax.Tensor)


def _mlp(k: jax.Array) -> ax.nn.MLP[ax.F32, In, Out]:
    return ax.nn.MLP(In, Out, 3, 2, hidden={Hidden: 5}, activation=ax.tanh, key=k)


class Noisy(eqx.Module):
    """An affine map followed by dropout: shows which key each member got."""

    lin: ax.nn.Affine[ax.F32, In, Out]
    drop: ax.nn.Dropout

    def __init__(self, key: jax.Array) -> None:
        self.lin = ax.nn.Affine(In, Out, 3, 64, key=key)
        self.drop = ax.nn.Dropout(0.5)

    def __call__(self, x: Any, *, key: jax.Array | None = None) -> Any:
        return self.drop(self.lin(x), key=key, inference=key is None)


def _loss(model: Any, x: Any, y: Any) -> Any:
    d = model(x) - y
    return ax.mean(ax.mean(d * d, Batch), Out)


def _arrays(tree: Any) -> list[jax.Array]:
    return [t.array for t in jax.tree.leaves(tree, is_leaf=is_tensor) if is_tensor(t)]


def test_members_are_made_with_the_split_keys_and_stacked_along_member() -> None:
    ens = ax.nn.Ensemble.init(_mlp, 4, Member, key=KEY)
    assert len(ens) == 4
    for leaf in jax.tree.leaves(ens.members, is_leaf=is_tensor):
        if is_tensor(leaf):
            assert leaf.axes[0] is Member and leaf.shape[0] == 4
    for i, k in enumerate(jax.random.split(KEY, 4)):
        alone = _mlp(k)
        for got, want in zip(_arrays(ens[i]), _arrays(alone), strict=True):
            np.testing.assert_array_equal(got, want)
    assert [type(m) for m in ens.unstack()] == [ax.nn.MLP] * 4
    assert ens[-1].layers[0].weight.axes == ens[3].layers[0].weight.axes  # noqa: PLR2004


@pytest.mark.parametrize("n", [1, 3])
def test_call_equals_the_loop_over_members_in_any_input_order(n: int) -> None:
    ens = ax.nn.Ensemble.init(_mlp, n, key=KEY)
    for x in orders(rand((4, 3), Batch, In, seed=1)):
        y = ens(x)
        want = jnp.stack([ax.transpose(m(x), *y.axes[1:]).array for m in ens.unstack()])
        assert y.axes[0] is Member and y.shape[0] == n
        close(y.array, want, 1e-6)


def test_gradient_equals_jax_grad_of_the_loop() -> None:
    ens = ax.nn.Ensemble.init(_mlp, 3, key=KEY)
    x = rand((4, 3), Batch, In, seed=2)
    w = rand((3, 4, 2), Member, Batch, Out, seed=3)

    def ours(e: Any) -> jax.Array:
        return ax.sum(ax.sum(ax.sum(e(x) * w, Member), Batch), Out).array

    def oracle(e: Any) -> jax.Array:
        total = jnp.zeros(())
        for i, m in enumerate(e.unstack()):
            total += jnp.sum(ax.transpose(m(x), Batch, Out).array * w.array[i])
        return total

    g = eqx.filter_grad(ours)(ens)
    want = eqx.filter_grad(oracle)(ens)
    for a, b in zip(_arrays(g), _arrays(want), strict=True):
        close(a, b, 1e-5)
    assert any(float(jnp.abs(a).max()) > 0 for a in _arrays(g))


def test_each_member_gets_its_own_key_and_dropout_mask() -> None:
    ens = ax.nn.Ensemble.init(Noisy, 3, key=KEY)
    x = rand((2, 3), Batch, In, seed=4)
    call_key = jax.random.key(7)
    y = ens(x, key=call_key)
    masks = np.asarray(y.array) == 0
    assert masks.any()
    assert not (masks[0] == masks[1]).all() and not (masks[1] == masks[2]).all()
    for i, k in enumerate(jax.random.split(call_key, 3)):  # member i gets key i
        close(y.array[i], ens[i](x, key=k).array, 1e-6)
    no_noise = ens(x)  # no key: dropout off
    assert not (np.asarray(no_noise.array) == 0).any()


def _batches() -> list[tuple[Any, Any]]:
    return [
        (rand((8, 3), Batch, In, seed=10 + s), rand((8, 2), Batch, Out, seed=20 + s))
        for s in range(3)
    ]


@pytest.mark.parametrize("optimizer", [optax.sgd(0.1), optax.adam(0.05)], ids=["sgd", "adam"])
def test_training_the_sum_equals_each_member_trained_alone(optimizer: Any) -> None:
    n, data = 3, _batches()
    ens = ax.nn.Ensemble.init(_mlp, n, key=KEY)
    trained = ax.train.fit(
        ens, optimizer, ax.nn.ensemble_loss(_loss), data, epochs=2, progress=False
    ).model
    moved = False
    for i, k in enumerate(jax.random.split(KEY, n)):
        alone = ax.train.fit(_mlp(k), optimizer, _loss, data, epochs=2, progress=False).model
        for got, want, start in zip(
            _arrays(trained[i]), _arrays(alone), _arrays(_mlp(k)), strict=True
        ):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
            moved |= bool(jnp.abs(got - start).max() > 1e-3)
    assert moved  # training changed the parameters


def test_ensemble_loss_sums_losses_and_averages_metrics() -> None:
    ens = ax.nn.Ensemble.init(_mlp, 3, key=KEY)
    x, y = _batches()[0]

    def with_metrics(m: Any, x: Any, y: Any) -> Any:
        loss = _loss(m, x, y)
        return loss, {"twice": loss * 2.0, "raw": loss.array}

    loss, metrics = ax.nn.ensemble_loss(with_metrics)(ens, x, y)
    each = [float(_loss(m, x, y).array) for m in ens.unstack()]
    close(loss.array, sum(each), 1e-6)
    assert loss.axes == ()
    close(metrics["twice"].array, 2 * np.mean(each), 1e-6)
    close(metrics["raw"], np.mean(each), 1e-6)
    bare = ax.nn.ensemble_loss(lambda m, x, y: _loss(m, x, y).array)(ens, x, y)
    close(bare, sum(each), 1e-6)


def test_ensemble_loss_gives_each_member_its_own_key() -> None:
    ens = ax.nn.Ensemble.init(Noisy, 2, key=KEY)
    x = rand((2, 3), Batch, In, seed=5)
    seen: list[Any] = []

    def loss(m: Any, x: Any, *, key: jax.Array | None = None) -> Any:
        seen.append(key)
        return ax.mean(ax.mean(m(x, key=key), Batch), Out)

    k = jax.random.key(1)
    got = ax.nn.ensemble_loss(loss)(ens, x, key=k)
    want = sum(float(loss(ens[i], x, key=ki).array) for i, ki in enumerate(jax.random.split(k, 2)))
    close(got.array, want, 1e-6)
    no_key = ax.nn.ensemble_loss(loss)(ens, x, key=None)  # evaluation: no dropout
    want = sum(float(loss(m, x, key=None).array) for m in ens.unstack())
    close(no_key.array, want, 1e-6)


def test_safetensors_and_checkpoints_round_trip(tmp_path: Any) -> None:
    ens = ax.nn.Ensemble.init(_mlp, 3, key=KEY)
    path = tmp_path / "ens.safetensors"
    ax.nn.save_safetensors(ens, path)
    template = ax.nn.Ensemble.init(_mlp, 3, key=jax.random.key(99))
    back = ax.nn.load_safetensors(template, path)
    for a, b in zip(_arrays(back), _arrays(ens), strict=True):
        np.testing.assert_array_equal(a, b)
    assert back.members.layers[0].weight.axes == ens.members.layers[0].weight.axes
    smaller = ax.nn.Ensemble.init(_mlp, 2, key=KEY)
    with pytest.raises(ax.nn.SafetensorsError, match="Member"):
        ax.nn.load_safetensors(smaller, path)

    ckpts = ax.train.Checkpoints(tmp_path / "ckpt", keep=2)
    ckpts.save(5, ens)
    restored = ckpts.restore(template)
    assert restored.step == 5  # noqa: PLR2004
    for a, b in zip(_arrays(restored.tree), _arrays(ens), strict=True):
        np.testing.assert_array_equal(a, b)


def test_jit_and_from_members() -> None:
    models = [_mlp(k) for k in jax.random.split(KEY, 2)]
    ens = ax.nn.Ensemble.from_members(models, Member)
    x = rand((4, 3), Batch, In, seed=6)
    y = eqx.filter_jit(lambda e, x: e(x))(ens, x)
    close(y.array[1], ax.transpose(models[1](x), Batch, Out).array, 1e-6)


# ---------------------------------------------------------------------------- errors
def test_errors_name_what_is_wrong() -> None:
    with pytest.raises(
        ValueError, match=r"Ensemble.init: n must be a positive int \(1, 2, ...\), got 0"
    ):
        ax.nn.Ensemble.init(_mlp, 0, key=KEY)
    with pytest.raises(
        ValueError,
        match=r"Ensemble.from_members: member 1 differs from member 0 in its structure, its "
        r"settings or its parameters' axes, dtypes or sizes; an ensemble holds models of one",
    ):
        ax.nn.Ensemble.from_members([_mlp(KEY), ax.nn.MLP(In, Out, 3, 2, key=KEY)])
    sizes = iter([4, 5])
    with pytest.raises(ValueError, match=r"Ensemble.init: member 1 differs from member 0"):
        ax.nn.Ensemble.init(lambda k: ax.nn.Affine(In, Out, 3, next(sizes), key=k), 2, key=KEY)
    with pytest.raises(ValueError, match=r"Ensemble.init: member 0 \(Dropout\) has no parameter"):
        ax.nn.Ensemble.init(lambda k: ax.nn.Dropout(0.1), 2, key=KEY)
    with pytest.raises(ValueError, match=r"Ensemble.from_members: give a non-empty list"):
        ax.nn.Ensemble.from_members([])
    with pytest.raises(TypeError, match=r"Ensemble.init: <class 'int'> is not an axis label"):
        ax.nn.Ensemble.init(_mlp, 2, int, key=KEY)  # type: ignore[arg-type]

    ens = ax.nn.Ensemble.init(_mlp, 2, key=KEY)
    with pytest.raises(
        ax.AxisError,
        match=r"Ensemble\(over=Member\): the input x already has the ensemble's axis Member "
        r"\(Tensor\[F32, Member=2, Batch=4, In=3\]\); every member gets the same input",
    ):
        ens(rand((2, 4, 3), Member, Batch, In))
    with pytest.raises(IndexError, match=r"Ensemble: member 2 is out of range for 2 members"):
        ens[2]
    with pytest.raises(
        ax.AxisError, match=r"Ensemble: the parameter layers.0.weight is Tensor\[F32, Hidden=5"
    ):
        ax.nn.Ensemble(_mlp(KEY), Member)
    with pytest.raises(TypeError, match=r"Ensemble: the model's field w is a bare array"):
        ax.nn.Ensemble({"w": jnp.zeros((2, 3))}, Member)
    with pytest.raises(ax.AxisError, match=r"Hidden"):  # the member's own error, by name
        ens(rand((4, 3), Batch, Hidden))


def test_ensemble_loss_errors() -> None:
    ens = ax.nn.Ensemble.init(_mlp, 2, key=KEY)
    x, y = _batches()[0]
    with pytest.raises(TypeError, match=r"ensemble_loss: the model must be an ax.nn.Ensemble"):
        ax.nn.ensemble_loss(_loss)(_mlp(KEY), x, y)
    with pytest.raises(TypeError, match=r"ensemble_loss: loss_fn must be a function"):
        ax.nn.ensemble_loss(3)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError,
        match=r"ensemble_loss\(over=Member\): loss_fn must return a scalar Tensor \(or \(loss, "
        r"metrics\)\) for one member, got Tensor\[F32, Member=2, Out=2\]",
    ):
        ax.nn.ensemble_loss(lambda m, x, y: ax.mean(m(x) - y, Batch))(ens, x, y)
    with pytest.raises(
        ax.AxisError,
        match=r"the input batch\[0\] already has the ensemble's axis Member \(Tensor\[F32, Mem",
    ):
        ax.nn.ensemble_loss(_loss)(ens, rand((2, 8, 3), Member, Batch, In), y)


def test_an_ensemble_as_an_argument_of_a_serialized_jax_export_function() -> None:
    ens = ax.nn.Ensemble.init(_mlp, 3, key=KEY)
    x = rand((4, 3), Batch, In, seed=7)
    blob = jax.export.export(jax.jit(lambda e, x: e(x)))(ens, x).serialize()
    other = ax.nn.Ensemble.init(_mlp, 3, key=jax.random.key(11))  # new weights, same shape
    got = jax.export.deserialize(blob).call(other, x)
    assert got.axes == (Member, Batch, Out)
    close(got.array, other(x).array, 1e-6)
