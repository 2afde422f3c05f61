"""The model families after LLaMA (issue 38): sizes are not presets, Mistral's sliding window, Gemma's
norm gain and embedding scale, each checked against its source or its definition, not spec code.

- Sizes (``kv_group``, ``window``): any whole number from the least is a value (a 70B Llama's 8,
  Mistral 7B's 4096), and no preset fixes one.
- ``window``: Hugging Face's own mask functions (transformers ``masking_utils``:
  ``sliding_window_overlay`` and-ed with ``causal_mask_function``) give the spec's mask, index by
  index; the mask keeps W keys per query, itself counted.
- ``norm_gain``: a column whose RMS is 1 exactly comes out as e ⊙ (1 + γ) exactly (Gemma's
  ``output * (1.0 + weight)``), where "gamma" gives e ⊙ γ.
- ``gemma``'s embedding scale: with d_e = 4, √d_e = 2 exactly, so each column is 2·W_e[:, x[t]].
"""

from __future__ import annotations

import pytest
from hypothesis import find

from ftspec.conformance.core.strategies import variant_sets
from ftspec.spec import SpecError, evaluate
from ftspec.spec.attention import unidirectional_mask
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER, PRESETS, SIZES, SWITCHES, parse, preset

from .helpers import flat_params, small_hyper


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_no_preset_fixes_a_size(name):
    v = PRESETS[name]
    assert all(getattr(v, size) == SWITCHES[size].paper for size in SIZES), (name, v.differences())


def test_a_size_takes_any_whole_number_from_its_least():
    v = parse("meta-llama2+kv_group=8,window=4096")
    assert (v.kv_group, v.window) == (8, 4096)
    assert v.differences(preset("meta-llama2")) == {"kv_group": 8, "window": 4096}
    for bad in ("kv_group=0", "window=-1", "kv_group=2.5", "window=two"):
        with pytest.raises(ValueError):
            parse(bad)
    with pytest.raises(ValueError):
        PAPER.replace(kv_group=True)  # a bool is not a size


def test_seventy_b_groups_share_one_kv_head_per_eight_query_heads():
    """H = 8 query heads under kv_group = 8: one key/value head, read by all eight (multi-query)."""
    e = REGISTRY["mh_attention"]
    v = PAPER.replace(kv_group=8)
    hyper = small_hyper(e, H=8)
    names = set(e.param_shapes(hyper, v))
    assert {n.split(".")[1] for n in names if n.startswith("kv_heads.")} == {"0"}
    assert not any(n.endswith("W_k") for n in names if n.startswith("heads."))


def test_meta_llama2_states_meta_s_llama2_reference():
    """meta-llama/llama model.py (Llama 2): RoPE theta 10000 on adjacent pairs, norm_eps 1e-5 inside the
    root, SwiGLU, no biases, no additive positions, a separate output projection."""
    v = preset("meta-llama2")
    assert (v.rotary, v.rope_base, v.norm, v.epsilon, v.epsilon_placement) == (
        "interleaved", 10000.0, "rms_norm", 1e-5, "inside_root")
    assert (v.mlp, v.activation, v.attn_bias, v.mlp_bias, v.positions, v.unembedding) == (
        "gated", "silu", False, False, "none", "separate")
    assert v.differences(preset("meta-llama3")) == {"rope_base": 10000.0}


#: Hugging Face Falcon-7B as docs/spec.md writes it (FalconConfig defaults), kv_group aside
FALCON = parse("nanogpt+residual=parallel_shared,attn_bias=False,mlp_bias=False,positions=none,rotary=half,"
               "empty_query=uniform")


def test_falcon_shares_one_norm_between_its_parallel_branches():
    """Falcon-7B (parallel_attn, one input_layernorm): its GPT-2 layer has γ¹, β¹ and no γ², β²; with
    residual=parallel (Falcon-40B's ln_attn, ln_mlp) it has both; a BERT layer ignores the switch."""
    e = REGISTRY["gpt2_layer"]
    hyper = small_hyper(e)
    shared = set(e.param_shapes(hyper, FALCON))
    two = set(e.param_shapes(hyper, FALCON.replace(residual="parallel")))
    assert set(REGISTRY["bert_layer"].param_shapes(hyper, FALCON)) == two
    assert {"gamma1", "beta1"} <= shared and not {"gamma2", "beta2"} & shared
    assert two - shared == {"gamma2", "beta2"}


def test_a_parallel_residual_is_refused_after_the_norm():
    """No source defines a post-LN parallel layer: the spec refuses it, naming the switch."""
    e = REGISTRY["gpt2_layer"]
    v = PAPER.replace(residual="parallel", norm_placement="post")
    hyper = small_hyper(e)
    params = flat_params(e, hyper, v, seed=0)
    X = [[float(i + t) for t in range(hyper["ell"])] for i in range(hyper["d_e"])]
    with pytest.raises(SpecError) as err:
        evaluate(e.name, {"X": X}, params, hyper=hyper, variant=v)
    assert err.value.argument == "residual"


def _hf_sliding_window_mask(ell: int, window: int) -> list[list[int]]:
    """Hugging Face's mask, [t_z][t_x] like the spec's, from its own functions (transformers 5.x)."""
    masking = pytest.importorskip("transformers.masking_utils")
    causal, overlay = masking.causal_mask_function, masking.sliding_window_overlay(window)
    # and_masks(causal, overlay) as create_sliding_window_causal_mask builds it, on plain indices
    return [[int(causal(0, 0, tx, tz) and overlay(0, 0, tx, tz)) for tx in range(ell)] for tz in range(ell)]


@pytest.mark.parametrize("window", [1, 2, 3, 5])
def test_window_is_hugging_face_s_sliding_window(window):
    ell = 5
    got = unidirectional_mask(ell, ell, variant=PAPER.replace(window=window))
    assert got == _hf_sliding_window_mask(ell, window)
    for tx in range(ell):  # W keys per query (fewer at the start), itself the newest
        keys = [tz for tz in range(ell) if got[tz][tx]]
        assert keys == list(range(max(0, tx - window + 1), tx + 1))


def test_window_changes_a_model_only_past_its_width():
    """A window as wide as the sequence is no window; a narrower one changes the last column."""
    e = REGISTRY["causal_self_attention"]
    hyper = small_hyper(e, ell=3)
    params = flat_params(e, hyper, PAPER, seed=1)
    X = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [0.0, 1.0, 1.0], [-2.0, 0.5, 0.125]][: hyper["d_e"]]
    out = {w: evaluate(e.name, {"X": X}, params, hyper=hyper, variant=PAPER.replace(window=w))["V_tilde"]
           for w in (0, 2, 3)}
    assert out[3] == out[0]
    assert [row[:2] for row in out[2]] == [row[:2] for row in out[0]]
    assert [row[2] for row in out[2]] != [row[2] for row in out[0]]


def test_norm_gain_one_plus_gamma_is_gemma_s():
    e = REGISTRY["rms_norm"]
    gamma = [0.5, -0.25, 0.0, 2.0]
    X = [[1.0], [-1.0], [1.0], [1.0]]  # mean square 1: the RMS divides by 1 exactly
    v = PAPER.replace(affine="scale")
    one_plus = evaluate(e.name, {"X": X}, {"gamma": gamma}, variant=v.replace(norm_gain="one_plus_gamma"))
    plain = evaluate(e.name, {"X": X}, {"gamma": gamma}, variant=v)
    assert one_plus["X_hat"] == [[1.5], [-0.75], [1.0], [3.0]]
    assert plain["X_hat"] == [[0.5], [0.25], [0.0], [2.0]]


def test_gemma_scales_embeddings_by_the_root_of_d_e():
    e = REGISTRY["embedding"]
    hyper = small_hyper(e, d_e=4)
    params = flat_params(e, hyper, preset("gemma"), seed=2)
    x = [t % hyper["N_V"] for t in range(hyper["ell"])]
    got = evaluate(e.name, {"x": x}, params, hyper=hyper, variant=preset("gemma"))["X"]
    want = [[2.0 * params["W_e"][i][v] for v in x] for i in range(hyper["d_e"])]  # √4 = 2 exactly
    assert got == want


@pytest.mark.parametrize("name, switch, value", [("causal_self_attention", "window", 2),
                                                 ("rms_norm", "norm_gain", "one_plus_gamma"),
                                                 ("d_transformer", "window", 2)])
def test_the_strategies_draw_each_value(name, switch, value):
    found = find(variant_sets(name), lambda v: getattr(v, switch) == value)
    assert getattr(found, switch) == value
