"""Gemma 2's and Gemma 3's local and global layers (``global_every``) and Gemma 3's local RoPE base
(``rope_local_base``), checked against Algorithm 10 composed by hand from the spec's own steps
(embedding, the GPT-2 layer under a stated variant set each, final norm, unembedding), not against
``architectures.layer_variant``:

- under window W and global_every = 2 a two-layer model is layer 0 with the window, then layer 1
  without it (transformers 5.24 Gemma2Config.layer_types: layer i is "full_attention" iff
  (i + 1) % 2 == 0), and that differs from every layer windowed (global_every = 0);
- with rope_local_base, layer 0 (local) rotates with that base and layer 1 (global) with rope_base
  (Gemma 3: 10000 and 1000000), which differs from one base throughout;
- a stack shorter than k is all local (Gemma 3's k = 6 at L = 2), and k = 1 makes every layer global:
  the model without a window;
- the switches' values: any whole k ≥ 0, a local base of 0 or one of rope_base's values.
"""

from __future__ import annotations

import pytest
from hypothesis import find

from ftspec.conformance.core.strategies import hyperparameters, variant_sets
from ftspec.spec import params as params_module
from ftspec.spec import evaluate
from ftspec.spec.embedding import embed
from ftspec.spec.functions import softmax_columns
from ftspec.spec.layers import gpt2_layer
from ftspec.spec.normalization import norm_columns
from ftspec.spec.registry import REGISTRY
from ftspec.spec.unembedding import logits, unembedding_matrix
from ftspec.spec.variants import PAPER, SWITCHES, VariantSet, parse

from .helpers import flat_params, small_hyper

#: a token sequence longer than the window + 1, so that a window of 1 or 2 drops keys
X_TOKENS = [3, 0, 5, 1]
GEMMA3_BASES = dict(rotary="half", rope_base=1000000.0, rope_local_base=10000.0)


def _model(variant: VariantSet, seed: int = 3) -> tuple[dict, dict]:
    e = REGISTRY["d_transformer"]
    hyper = small_hyper(e, L=2, d_attn=4, ell=len(X_TOKENS))
    return hyper, flat_params(e, hyper, variant, seed)


def _by_hand(flat: dict, hyper: dict, layer_sets: list[VariantSet], model_set: VariantSet) -> list:
    """Algorithm 10, lines 1-11, with layer l computed under ``layer_sets[l]`` (each with
    global_every = 0: one set for its one layer)."""
    theta = params_module.from_flat(params_module.DTransformerParams, flat)
    X = embed(X_TOKENS, theta.W_e, theta.W_p, ell_max=hyper["ell_max"], variant=model_set,
              gamma=theta.gamma_emb, beta=theta.beta_emb)  # lines 1-3
    for layer, v in zip(theta.layers, layer_sets, strict=True):  # lines 4-8
        assert v.global_every == 0
        X = gpt2_layer(X, layer, variant=v)
    if model_set.resolved_final_norm("gpt2"):
        X = norm_columns(X, theta.gamma, theta.beta, model_set)  # line 10
    return softmax_columns(logits(X, unembedding_matrix(theta.W_u, theta.W_e, model_set), theta.b_u, model_set))


def _model_p(flat: dict, hyper: dict, variant: VariantSet) -> list:
    return evaluate("d_transformer", {"x": X_TOKENS}, flat, hyper=hyper, variant=variant)["P"]


def _apart(a: list, b: list) -> float:
    return max(abs(float(x) - float(y)) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


@pytest.mark.parametrize("window", [1, 2])
def test_global_every_two_is_a_windowed_layer_then_a_full_one(window):
    v = PAPER.replace(window=window, global_every=2)
    hyper, flat = _model(v)
    local, full = v.replace(global_every=0), v.replace(global_every=0, window=0)
    got = _model_p(flat, hyper, v)
    assert got == _by_hand(flat, hyper, [local, full], local)
    every_layer_windowed = _model_p(flat, hyper, local)
    assert every_layer_windowed == _by_hand(flat, hyper, [local, local], local)
    assert _apart(got, every_layer_windowed) > 1e-9


def test_the_local_base_turns_the_local_layers_and_the_global_base_the_global_ones():
    v = parse("gemma+window=2,global_every=2").replace(**GEMMA3_BASES)
    hyper, flat = _model(v)
    plain = v.replace(global_every=0, rope_local_base=0.0)
    local, full = plain.replace(rope_base=10000.0), plain.replace(window=0)
    got = _model_p(flat, hyper, v)
    assert got == _by_hand(flat, hyper, [local, full], plain)
    one_base = _model_p(flat, hyper, v.replace(rope_local_base=0.0))
    assert one_base == _by_hand(flat, hyper, [plain, full], plain)
    assert _apart(got, one_base) > 1e-9


def test_a_stack_shorter_than_k_is_all_local_and_k_one_all_global():
    v = PAPER.replace(window=1, **GEMMA3_BASES)
    hyper, flat = _model(v)
    local = v.replace(rope_base=10000.0, rope_local_base=0.0)
    # Gemma 3's k = 6 at L = 2: both layers sliding, at the local base (its layer_types for 2 layers)
    assert _model_p(flat, hyper, v.replace(global_every=6)) == _model_p(flat, hyper, local)
    # k = 1: every layer full, at rope_base: the model without a window (the local base unread)
    assert _model_p(flat, hyper, v.replace(global_every=1)) == \
        _model_p(flat, hyper, v.replace(window=0, rope_local_base=0.0))
    # no window: nothing alternates, the local base is unread
    assert _model_p(flat, hyper, v.replace(window=0, global_every=2)) == \
        _model_p(flat, hyper, v.replace(window=0, rope_local_base=0.0))


def test_the_values_of_the_switches():
    assert parse("window=4096,global_every=6").global_every == 6
    assert parse("rope_local_base=10000").rope_local_base == 10000.0
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="global_every"):
            PAPER.replace(global_every=bad)
    for bad in (-1.0, 5.0, float("nan")):
        with pytest.raises(ValueError, match="rope_local_base"):
            PAPER.replace(rope_local_base=bad)
    with pytest.raises(ValueError, match="global_every"):
        parse("global_every=two")
    # switches of spec 2.10: every set stated before keeps its hash (left out at their defaults)
    assert "global_every" not in PAPER.to_json() and "rope_local_base" not in PAPER.to_json()
    assert SWITCHES["global_every"].choices == (0, 2) and SWITCHES["rope_local_base"].choices == (0.0, 10000.0)


def test_only_the_decoder_only_models_read_them():
    readers = {name for name, e in REGISTRY.items() if "global_every" in e.switches}
    assert readers == {name for name, e in REGISTRY.items() if "rope_local_base" in e.switches}
    assert {"d_transformer", "padded_d_transformer", "cached_decoding", "d_loss", "d_gradient", "d_sgd_step",
            "d_training", "d_inference"} == readers


@pytest.mark.parametrize("switch, value", [("global_every", 2), ("rope_local_base", 10000.0)])
def test_the_strategies_draw_each_value_with_what_it_is_read_with(switch, value):
    found = find(variant_sets("d_transformer"), lambda v: getattr(v, switch) == value)
    assert found.window >= 1 and found.global_every >= 1
    if switch == "rope_local_base":
        assert found.rotary != "none" and found.rope_base != found.rope_local_base


def test_the_strategies_draw_a_global_layer_after_a_local_one():
    v = PAPER.replace(window=2, global_every=2)
    for name in ("d_transformer", "d_gradient"):  # the training budget's models have one layer, often
        found = find(hyperparameters(name, variant=v), lambda h: True)
        assert found["L"] >= 2, (name, found)
