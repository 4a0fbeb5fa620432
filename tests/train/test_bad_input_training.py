"""Bad input to training: losses, fit, the loader and the layers give a specific error (or a
warning, or a documented result), never a raw JAX error or a silently wrong number."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import axjax as ax
from axjax.train import Batch, Class, Dataset, Loader, Pixel
from tests.axes import Hidden
from tests.train.models import TinyMLP, classify

# ----------------------------------------------------------------------------- cross-entropy


def _logits() -> ax.Tensor[ax.F32, Batch, Class]:
    return ax.normal(jax.random.key(0), (4, 5), Batch, Class)


def _labels(values: list[int]) -> ax.Tensor[ax.I32, Batch]:
    return ax.tensor(jnp.array(values, jnp.int32), Batch)


def test_concrete_labels_out_of_range_are_an_error():
    logits = _logits()
    with pytest.raises(
        ValueError,
        match=(
            r"softmax_cross_entropy: label -1 \(at Batch=1\) is not a class: labels must lie in "
            r"\[0, 5\) for Class of size 5 \(negative labels are not class indices"
        ),
    ):
        ax.train.softmax_cross_entropy(logits, _labels([0, -1, 2, 3]), Class)
    with pytest.raises(
        ValueError,
        match=(
            r"softmax_cross_entropy: label 7 \(at Batch=2\) is not a class: labels must lie in "
            r"\[0, 5\) for Class of size 5; 2 of 4 labels are out of range \(fix the labels, or "
            r"give the logits 10 classes if they are right\)"
        ),
    ):
        ax.train.softmax_cross_entropy(logits, _labels([0, 1, 7, 9]), Class)
    # labels closed over by jax.grad are concrete too
    with pytest.raises(ValueError, match=r"label 5 \(at Batch=0\) is not a class"):
        jax.grad(
            lambda a: (
                ax.sum(
                    ax.train.softmax_cross_entropy(
                        ax.tensor(a, Batch, Class), _labels([5, 0, 0, 0]), Class
                    ),
                    Batch,
                ).array
            )
        )(logits.array)


def _loss(a: jax.Array, lab: jax.Array) -> jax.Array:
    loss = ax.train.softmax_cross_entropy(ax.tensor(a, Batch, Class), ax.tensor(lab, Batch), Class)
    return ax.sum(loss, Batch).array


@pytest.mark.parametrize("bad", [-1, -5, 5, 100])
def test_under_jit_an_out_of_range_label_adds_no_loss_and_no_gradient(bad):
    logits = _logits().array
    lab = jnp.array([0, bad, 2, 3], jnp.int32)
    per_example = jax.jit(
        lambda a, y: (
            ax.train.softmax_cross_entropy(
                ax.tensor(a, Batch, Class), ax.tensor(y, Batch), Class
            ).array
        )
    )(logits, lab)
    assert per_example[1] == 0 and np.all(np.isfinite(per_example))
    value, grad = jax.jit(jax.value_and_grad(_loss))(logits, lab)
    with ax.jax_autodiff():  # jax.grad of the forward: the same value and gradient
        value_jax, grad_jax = jax.jit(jax.value_and_grad(_loss))(logits + 0, lab)
    np.testing.assert_allclose(value, value_jax, rtol=1e-6)
    np.testing.assert_allclose(grad, grad_jax, atol=1e-6)
    assert np.all(grad[1] == 0)
    # the valid examples are unchanged: the loss of the other three alone
    keep = np.array([0, 2, 3])
    np.testing.assert_allclose(value, _loss(logits[keep], lab[keep]), rtol=1e-6)
    np.testing.assert_allclose(grad[keep], jax.grad(_loss)(logits[keep], lab[keep]), atol=1e-6)


# ----------------------------------------------------------------------------- fit and eval


def _dataset(n: int = 32, nan_at: int | None = None) -> Dataset:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    y = np.argmax(x @ rng.normal(size=(6, 3)), axis=1).astype(np.uint8)
    if nan_at is not None:
        x[nan_at, 0] = np.nan
    return Dataset(x, y, name="synthetic")


def test_nan_only_in_eval_data_warns():
    model = TinyMLP(jax.random.key(0), n_in=6, n_hidden=8, n_out=3)
    with pytest.warns(
        RuntimeWarning,
        match=(
            r"fit: the evaluation after epoch 1 \(step 2\) gave eval_loss nan, while training "
            r"was finite \(the model's parameters and the training loss are "
            r"finite\): look for NaN or Inf in eval_data"
        ),
    ):
        result = ax.train.fit(
            model,
            optax.sgd(0.1),
            classify,
            Loader(_dataset(), 16),
            epochs=1,
            eval_data=Loader(_dataset(nan_at=3), 16),
            progress=False,
        )
    assert np.isnan(result.history[-1]["eval_loss"])


def test_finite_eval_data_does_not_warn(recwarn):
    model = TinyMLP(jax.random.key(0), n_in=6, n_hidden=8, n_out=3)
    ax.train.fit(
        model,
        optax.sgd(0.1),
        classify,
        Loader(_dataset(), 16),
        epochs=1,
        eval_data=Loader(_dataset(), 16),
        progress=False,
    )
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


# ----------------------------------------------------------------------------- loader


@pytest.mark.parametrize(
    "normalize, problem",
    [
        (
            (0.5, 0.0),
            r"std must be positive \(a std of 0 divides by zero: the images would be "
            r"-inf, \+inf or nan\)",
        ),
        ((0.5, -1.0), r"std must be positive \(a std of -1 flips the images' sign\)"),
        ((float("nan"), 1.0), r"mean and std must be finite numbers"),
        ((0.5, float("inf")), r"mean and std must be finite numbers"),
    ],
)
def test_loader_rejects_a_bad_normalization(normalize, problem):
    with pytest.raises(
        ValueError,
        match=r"Loader: normalize=\(.*\): " + problem + r"; pass the mean and standard deviation",
    ):
        Loader(_dataset(), 8, normalize=normalize)
    with pytest.raises(
        ValueError,
        match=r"Loader: normalize must be a pair \(mean, std\) of "
        r"numbers, got 0.5",
    ):
        Loader(_dataset(), 8, normalize=0.5)


def test_loader_rejects_labels_that_are_no_class():
    images = np.zeros((4, 3), np.uint8)
    with pytest.raises(
        ValueError,
        match=(
            r"Dataset: label -1 \(at example 1\) is not a class: labels must lie in \[0, "
            r"2147483647\] \(they become int32\) \(negative labels are not class indices"
        ),
    ):
        Loader(Dataset(images, np.array([0, -1, 2, 1])), 2)
    with pytest.raises(
        ValueError,
        match=(
            r"Dataset digits: label 5 \(at example 2\) is not a class: labels must lie in "
            r"\[0, 3\) for its 3 classes \(fix the labels, or list every class in "
            r"Dataset\(classes=...\)\)"
        ),
    ):
        Loader(Dataset(images, np.array([0, 1, 5, 1]), classes=("a", "b", "c"), name="digits"), 2)
    ds = Dataset(images, np.array([0, 1, 2, 1]), classes=("a", "b", "c"))
    ds.labels[2] = 7  # changed after the Dataset checked it: the Loader checks again
    with pytest.raises(ValueError, match=r"Loader: label 7 \(at example 2\) is not a class"):
        Loader(ds, 2)


# ----------------------------------------------------------------------------- layers


def test_a_layer_called_on_a_raw_array_says_to_wrap_it():
    mlp = ax.nn.MLP(Pixel, Class, 6, 3, hidden={Hidden: 4}, key=jax.random.key(0))
    msg = (
        r"Affine\(Pixel=6 -> Hidden=4\) takes a Tensor as its input, got a jax.Array of "
        r"shape \(2, 6\): a layer reads axes by name \(it reads axis Pixel\), so wrap the "
        r"array with ax.tensor\(array, \*axes\)"
    )
    with pytest.raises(TypeError, match=msg):
        mlp(jnp.ones((2, 6)))
    with pytest.raises(TypeError, match=msg):
        jax.jit(mlp)(jnp.ones((2, 6)))
    affine = ax.nn.Affine(Pixel, Hidden, 6, 4, key=jax.random.key(0))
    with pytest.raises(
        TypeError,
        match=r"takes a Tensor as its input, got a numpy.ndarray of "
        r"shape \(6,\)",
    ):
        affine(np.ones(6))
    assert mlp(ax.ones((2, 6), Batch, Pixel)).axes == (Batch, Class)
