"""Axis roles (issue 34, section 1): ``ax.KeyOf[Q]`` key roles and ``ax.Out[E]`` output roles.

The two attention mistakes (M1: a softmax over the query axis, M2: a causal mask with query
and key swapped) and a key declared for another query are ``AxisError``s whose text names
both axes and what to write; every public attention callable that takes a key axis checks
it against its query (generated from ``axjax.nn``'s public names, with a mutation proof).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, final

import jax
import numpy as np
import pytest

import axjax as ax
import axjax.nn._attention_masks as attention_module
import axjax.nn._fused_attention as fused_module
import axjax.nn._gqa as gqa_module
import axjax.nn._multihead as multihead_module
import axjax.ops._reduce as reduce_module


@final
class Pos(ax.Axis): ...


@final
class KPos(ax.KeyOf[Pos]): ...


@final
class Other(ax.Axis): ...


@final
class KOther(ax.KeyOf[Other]): ...


@final
class Plain(ax.Axis): ...  # a key axis declared without a role


@final
class Head(ax.Axis): ...


@final
class HeadDim(ax.Axis): ...


@final
class Embed(ax.Axis): ...


@final
class Batch(ax.Axis): ...


KEY = jax.random.key(0)


# ----------------------------------------------------------------------------- declarations
def test_key_roles_record_their_query() -> None:
    assert attention_module.query_of(KPos) is Pos
    assert attention_module.query_of(ax.nn.KeyOfAnyQuery) is None  # the key of any query
    assert attention_module.is_key_role(ax.nn.KeyOfAnyQuery)
    assert not attention_module.is_key_role(Plain)
    assert attention_module.query_of(ax.KeyOf[Pos]) is Pos  # the derived key of Pos


def test_keyof_a_query_is_one_class_per_query() -> None:
    assert ax.KeyOf[Pos] is ax.KeyOf[Pos] and ax.KeyOf[Pos] is not ax.KeyOf[Embed]
    assert ax.KeyOf[Pos].__name__ == "KeyOf[Pos]"
    with pytest.raises(TypeError, match="KPos is itself a key axis"):
        ax.KeyOf[KPos]


def test_the_old_name_of_the_key_of_any_query_warns() -> None:
    with pytest.warns(DeprecationWarning, match="ax.nn.KeyPos is renamed ax.nn.KeyOfAnyQuery"):
        old = ax.nn.KeyPos
    assert old is ax.nn.KeyOfAnyQuery


@pytest.mark.parametrize("layer", ["MultiheadAttention", "GroupedQueryAttention"])
def test_the_layers_default_key_is_tied_to_the_query(layer: str) -> None:
    """No ``key_pos``: the key axis is ``ax.KeyOf[query_pos]``, so a softmax over the queries
    of scores built with the library's names is refused (issue 44, class 0)."""
    kw = {"num_kv_heads": 1} if layer == "GroupedQueryAttention" else {}
    attn = getattr(ax.nn, layer)(Embed, 8, num_heads=2, query_pos=Pos, key=KEY, **kw)
    assert attn.key_pos is ax.KeyOf[Pos]
    scores = ax.ones((3, 3), Pos, attn.key_pos)
    with pytest.raises(ax.AxisError, match="a softmax over the query axis Pos of scores"):
        ax.softmax(scores, Pos)


def test_a_key_of_a_key_is_refused() -> None:
    with pytest.raises(TypeError, match="KPos is itself a key axis"):

        class KK(ax.KeyOf[KPos]): ...


def test_out_role_is_one_class_per_axis() -> None:
    assert ax.Out[Embed] is ax.Out[Embed]
    assert ax.Out[Embed].__name__ == "Out[Embed]"
    assert ax.Out[Embed] is not ax.Out[Head]
    with pytest.raises(TypeError, match="already an output role"):
        ax.Out[ax.Out[Embed]]


# ----------------------------------------------------------------------------- M2 and pairing
def test_causal_mask_accepts_its_key_a_generic_key_and_a_plain_key() -> None:
    want = np.tril(np.ones((3, 3), bool))
    for key in (KPos, ax.KeyOf[Pos], ax.nn.KeyOfAnyQuery, Plain):
        m = ax.nn.causal_mask(Pos, key, 3, 3)
        assert m.axes == (Pos, key)
        np.testing.assert_array_equal(m.array, want)


def test_m2_swapped_mask_names_both_axes() -> None:
    with pytest.raises(ax.AxisError) as e:
        ax.nn.causal_mask(KPos, Pos, 3, 3)
    assert str(e.value) == (
        "causal_mask(KPos, Pos, ...): query and key are swapped: the query axis KPos is a key "
        "role and the key axis is Pos (KPos is declared the key of Pos); pass Pos as the "
        "query axis and KPos as the key axis"
    )


def test_m2_with_the_generic_key_pos() -> None:
    """The issue's example: ``causal_mask(KeyOfAnyQuery, Time, 3, 3)``."""
    with pytest.raises(ax.AxisError) as e:
        ax.nn.causal_mask(ax.nn.KeyOfAnyQuery, Pos, 3, 3)
    assert str(e.value) == (
        "causal_mask(KeyOfAnyQuery, Pos, ...): query and key are swapped: the query axis "
        "KeyOfAnyQuery is a key role and the key axis is Pos (KeyOfAnyQuery is declared a key "
        "axis (ax.KeyOf)); pass Pos as the query axis and KeyOfAnyQuery as the key axis"
    )


def test_a_key_of_another_query_names_the_declaration() -> None:
    with pytest.raises(ax.AxisError) as e:
        ax.nn.causal_mask(Pos, KOther, 3, 3)
    assert str(e.value) == (
        "causal_mask(Pos, KOther, ...): the key axis KOther is declared the key of Other "
        "(ax.KeyOf[Other]), not of the query axis Pos; pass Other as the query, or declare "
        "`@final class KOther(ax.KeyOf[Pos]): ...` for the queries Pos"
    )


# ----------------------------------------------------------------------------- M1
SCORES = ax.ones((2, 3, 3), Head, Pos, KPos)


def test_attention_weights_over_the_keys() -> None:
    w = ax.nn.attention_weights(SCORES, over=KPos)
    assert w.axes == (Head, Pos, KPos)
    np.testing.assert_allclose(np.asarray(w.array).sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(w.array, ax.softmax(SCORES, KPos).array)


def test_m1_softmax_over_the_query_axis() -> None:
    with pytest.raises(ax.AxisError) as e:
        ax.softmax(SCORES, Pos)
    assert str(e.value) == (
        "Cannot apply Softmax(Pos) to Tensor[F32, Head=2, Pos=3, KPos=3]: a softmax over the "
        "query axis Pos of scores that hold its key axis KPos (KPos is declared "
        "ax.KeyOf[Pos]): attention normalises over the keys, write ax.softmax(scores, KPos) "
        "or ax.nn.attention_weights(scores, over=KPos); pass allow_query=True if this model "
        "does normalise over the queries"
    )


@pytest.mark.parametrize("normalise", [ax.softmax, ax.log_softmax], ids=lambda f: f.__name__)
def test_m1_every_normalisation_and_its_switch(normalise: Callable[..., Any]) -> None:
    with pytest.raises(ax.AxisError, match="query axis Pos"):
        normalise(SCORES, Pos)
    with pytest.raises(ax.AxisError, match="query axis Pos"):
        jax.jit(lambda s: normalise(s, Pos))(SCORES)
    with pytest.raises(ax.AxisError, match="query axis Pos"):
        normalise(SCORES, (Head, Pos))
    fine = normalise(SCORES, Pos, allow_query=True)
    np.testing.assert_array_equal(
        fine.array, getattr(jax.nn, normalise.__name__)(SCORES.array, axis=1)
    )
    # a generic key and a plain key carry no query: nothing to refuse
    normalise(ax.ones((3, 3), Pos, ax.nn.KeyOfAnyQuery), Pos)
    normalise(ax.ones((3, 3), Pos, Plain), Pos)


def test_m1_attention_weights_over_the_query_axis() -> None:
    with pytest.raises(ax.AxisError) as e:
        ax.nn.attention_weights(SCORES, over=Pos)  # type: ignore[arg-type]  # M1, on purpose
    assert str(e.value) == (
        "Cannot apply attention_weights(over=Pos) to scores=Tensor[F32, Head=2, Pos=3, KPos=3]: "
        "Pos is not a key axis: the scores' key axis is KPos, and attention normalises over the "
        "keys (over=KPos); a softmax over the queries Pos is ax.softmax(scores, Pos, "
        "allow_query=True)"
    )


# ----------------------------------------------------------------------------- generated
def _q(query: type[ax.Axis]) -> ax.AnyTensor:
    return ax.ones((2, 3, 4), Batch, query, HeadDim)


def _kv(key: type[ax.Axis]) -> ax.AnyTensor:
    return ax.ones((2, 3, 4), Batch, key, HeadDim)


def _mha(query: type[ax.Axis], key: type[ax.Axis]) -> object:
    layer = ax.nn.MultiheadAttention(Embed, 4, num_heads=2, query_pos=query, key_pos=key, key=KEY)
    x = ax.ones((2, 3, 4), Batch, query, Embed)
    return layer(x)


#: every public attention callable that takes a key axis, called with a query and a key
ATTENTION: dict[str, Callable[[type[ax.Axis], type[ax.Axis]], object]] = {
    "causal_mask": lambda q, k: ax.nn.causal_mask(q, k, 3, 3),
    "segment_mask": lambda q, k: ax.nn.segment_mask(
        ax.tensor(np.array([[1, 1, 2], [1, 0, 0]], np.int32), Batch, q), q, k
    ),
    "dot_product_attention": lambda q, k: ax.nn.dot_product_attention(
        _q(q), _kv(k), _kv(k), over=HeadDim, key_pos=k, implementation="einsum"
    ),
    "dot_product_attention(causal)": lambda q, k: ax.nn.dot_product_attention(
        _q(q), _kv(k), _kv(k), over=HeadDim, key_pos=k, causal=True, implementation="einsum"
    ),
    "MultiheadAttention": _mha,
    "GroupedQueryAttention": lambda q, k: ax.nn.GroupedQueryAttention(
        Embed, 4, num_heads=2, num_kv_heads=1, query_pos=q, key_pos=k, key=KEY
    )(ax.ones((2, 3, 4), Batch, q, Embed)),
    "FusedAttention": lambda q, k: ax.nn.FusedAttention(HeadDim, k, implementation="xla")(
        _q(q), _kv(k), _kv(k)
    ),
}


def _takes_a_key_axis(obj: object) -> bool:
    try:
        params = inspect.signature(obj).parameters  # type: ignore[arg-type]  # any callable
    except (TypeError, ValueError):
        return False
    return "key_pos" in params


def test_every_attention_callable_has_a_role_case() -> None:
    """The registry of this test: a public ``ax.nn`` callable with a ``key_pos`` parameter
    fails here until it is listed (and so checked) above."""
    found = {name for name in dir(ax.nn) if _takes_a_key_axis(getattr(ax.nn, name))}
    # KVCache stores keys along the key axis of the attention that fills it (that layer's
    # role check runs): it has no query of its own to pair it with
    found -= {"KVCache"}
    listed = {name.split("(")[0] for name in ATTENTION}
    assert found == listed, f"attention callables without a role case: {found - listed}"


@pytest.mark.parametrize("name", sorted(ATTENTION))
def test_every_attention_callable_checks_its_key_role(name: str) -> None:
    call = ATTENTION[name]
    for key in (KPos, ax.KeyOf[Pos], ax.nn.KeyOfAnyQuery, Plain):
        call(Pos, key)  # the right pairings run
    with pytest.raises(ax.AxisError, match=r"query and key are swapped.*KPos.*Pos"):
        call(KPos, Pos)  # M2
    with pytest.raises(ax.AxisError, match=r"KOther is declared the key of Other"):
        call(Pos, KOther)  # the key of another query


def test_mutation_the_generated_test_fails_without_the_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the mechanism switched off (``check_query_key`` where the attention callables
    use it, and the softmax's role check behind the einsum path), every listed callable
    accepts a swapped query and key: the generated test above would fail for each."""
    for module in (attention_module, fused_module, gqa_module, multihead_module):
        monkeypatch.setattr(module, "check_query_key", lambda *a: None)
    monkeypatch.setattr(reduce_module, "softmax_role_problem", lambda *a: None)
    for name, call in ATTENTION.items():
        try:
            call(KPos, Pos)
        except ax.AxisError as e:  # pragma: no cover - the mutation must silence the check
            raise AssertionError(f"{name} still raised without the check: {e}") from e


# ----------------------------------------------------------------------------- ax.Out[E]
@pytest.mark.parametrize("kind", ["Linear", "Affine"])
def test_square_dense_layer_uses_the_output_role(kind: str) -> None:
    layer = getattr(ax.nn, kind)(Embed, Embed, 4, 4, key=KEY)
    assert layer.weight.axes == (ax.Out[Embed], Embed)
    x = ax.ones((2, 4), Batch, Embed) * 0.5
    y = layer(x)
    assert y.axes == (Batch, Embed)
    want = np.asarray(x.array) @ np.asarray(layer.weight.array).T
    if kind == "Affine":
        want = want + np.asarray(layer.bias.array)[None, :]
    np.testing.assert_allclose(y.array, want, rtol=1e-6)


def test_square_mlp() -> None:
    mlp = ax.nn.MLP(Embed, Embed, 4, 4, hidden={Head: 3}, key=KEY)
    assert mlp(ax.ones((2, 4), Batch, Embed)).axes == (Batch, Embed)
    assert ax.nn.MLP(Embed, Embed, 4, 4, key=KEY).layers[0].weight.axes == (ax.Out[Embed], Embed)


def test_sharding_rules_of_an_axis_apply_to_its_output_role() -> None:
    w = ax.ones((4, 4), ax.Out[Embed], Head)
    assert tuple(ax.partition_spec(w, {Embed: "model"})) == ("model", None)
    assert tuple(ax.partition_spec(w, {Embed: "model", ax.Out[Embed]: None})) == (None, None)
    # [Out[Embed], Embed]: the axis that holds the rule takes it, the role stays whole
    square = ax.ones((4, 4), ax.Out[Embed], Embed)
    assert tuple(ax.partition_spec(square, {Embed: "model"})) == (None, "model")
    assert tuple(ax.partition_spec(square, {Embed: "model", ax.Out[Embed]: "data"})) == (
        "data",
        "model",
    )


def test_checkpoints_keep_the_role(tmp_path: Path) -> None:
    layer = ax.nn.Linear(Embed, Embed, 4, 4, key=KEY)
    path = ax.train.save_checkpoint(tmp_path / "ckpt", layer)
    manifest = ax.train.read_manifest(path)
    assert ["Out[Embed]", "Embed"] in [e.get("axes") for e in manifest["leaves"]]
    back, _ = ax.train.load_checkpoint(path, ax.nn.Linear(Embed, Embed, 4, 4, key=KEY))
    np.testing.assert_array_equal(back.weight.array, layer.weight.array)
    assert back.weight.axes == (ax.Out[Embed], Embed)
