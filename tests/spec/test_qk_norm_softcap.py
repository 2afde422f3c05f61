"""QK-norm (``qk_norm``; Qwen3, Gemma 3) and tanh soft-capping (``attn_softcap``, ``logit_softcap``;
Gemma 2), checked against their definitions on cases whose every number is exact, not against
another run of the same spec code:

- the attention cap is c·tanh(s/c) of the *scaled* score s = qᵀk/√d, and a masked score stays −∞
  (capped after the mask it would be −c: transformers 5.24 ``models/gemma2`` caps, then adds the mask);
- the final cap is c·tanh(z/c) of the logit after its bias, and is what the softmax reads;
- QK-norm divides each head's query and key columns by their root mean square over d_attn and
  multiplies by the shared gain (1 + γ under ``norm_gain``), before RoPE: the rotated Q is the
  spec's RoPE (``spec.rotary.rotate``, tested on its own in tests/spec/test_llama.py) of the
  normalised one, the one place here where spec code is the yardstick;
- the gains belong to a layer's attention and, since spec 2.12, to the causal self-attention entries
  (a decoder's attention alone; Algorithm 5's other entries neither list the switch nor have the gains:
  tests/spec/test_qk_norm_attention.py), are present whatever ``affine`` says; the strategies reach
  QK-norm under RoPE and both caps.
"""

from __future__ import annotations

import math

from hypothesis import find

from ftspec.conformance.core.strategies import variant_sets
from ftspec.spec import evaluate
from ftspec.spec.evaluation import intermediates
from ftspec.spec.params import layer_schema
from ftspec.spec.registry import REGISTRY
from ftspec.spec.rotary import rotate
from ftspec.spec.variants import PAPER, parse

INF = float("inf")


def _one_head(d_attn: int) -> dict:
    """One head over d_e = 1 with W_q = W_k = 1 (qᵀk = d_attn for X ≡ 1), W_v = W_o = 1, no biases' effect."""
    ones = [[1.0]] * d_attn
    return {"heads.0.W_q": ones, "heads.0.b_q": [0.0] * d_attn, "heads.0.W_k": ones,
            "heads.0.b_k": [0.0] * d_attn, "heads.0.W_v": [[1.0]], "heads.0.b_v": [0.0], "W_o": [[1.0]],
            "b_o": [0.0]}


def test_the_attention_cap_is_on_the_scaled_scores_and_masked_keys_stay_minus_infinity():
    """qᵀk = 4, scaled by 1/√4 to 2; under c = 2 the softmax reads 2·tanh(2/2) where t_z ≤ t_x and
    −∞ above. Capping before the scale would read tanh(4/2)·2/2, after the mask −2 above."""
    hyper = {"H": 1, "d_e": 1, "d_attn": 4, "d_mid": 1, "ell": 3}
    v = PAPER.replace(attn_softcap=2.0)
    got = intermediates("causal_self_attention", {"X": [[1.0, 1.0, 1.0]]}, _one_head(4), hyper=hyper, variant=v)
    assert got["heads.0.S"] == [[2.0 * math.tanh(1.0) if tz <= tx else -INF for tx in range(3)] for tz in range(3)]
    plain = intermediates("causal_self_attention", {"X": [[1.0, 1.0, 1.0]]}, _one_head(4), hyper=hyper)
    assert plain["heads.0.S"] == [[2.0 if tz <= tx else -INF for tx in range(3)] for tz in range(3)]


def test_the_logit_cap_follows_the_bias_and_is_what_the_softmax_reads():
    """z = W_u x + b_u = (1, −0.5, 1.5) for x = 0.5: the logits are 2·tanh(z/2), and P is their softmax
    (the cap moves P: without it P would be the softmax of z)."""
    v = PAPER.replace(logit_softcap=2.0, logit_bias=True)
    inputs = {"X": [[0.5]]}
    params = {"W_u": [[1.0], [-2.0], [4.0]], "b_u": [0.5, 0.5, -0.5]}
    hyper = {"N_V": 3, "d_e": 1, "ell": 1}
    got = intermediates("unembedding", inputs, params, hyper=hyper, variant=v)
    z = (1.0, -0.5, 1.5)
    assert got["logits"] == [[2.0 * math.tanh(zi / 2.0)] for zi in z]
    P = evaluate("unembedding", inputs, params, hyper=hyper, variant=v)["P"]
    exps = [math.exp(2.0 * math.tanh(zi / 2.0)) for zi in z]
    uncapped = [math.exp(zi) for zi in z]
    assert abs(P[2][0] - exps[2] / sum(exps)) < abs(P[2][0] - uncapped[2] / sum(uncapped))


def test_qk_norm_divides_by_the_root_mean_square_and_multiplies_by_the_shared_gain_before_rope():
    """Two heads, X ≡ 1, every W_q, W_k row 2 (so each query and key column is (2, 2, 2, 2): root mean
    square 2), gains γ_q = (1, 2, 3, 4), γ_k = (0.5, 0.5, 1, 1) under Gemma 3's 1 + γ: the normalised
    columns are 1 + γ exactly, in both heads; RoPE then rotates the normalised columns (position 0 is
    left as it is)."""
    v = parse("gemma+qk_norm=rms").replace(epsilon=0.0, epsilon_placement="none")
    hyper = {"H": 2, "d_e": 1, "d_attn": 4, "d_mid": 1, "d_mlp": 1, "ell": 2}
    case_params = {name: [[1.0] * shape[1] for _ in range(shape[0])] if len(shape) == 2 else [1.0] * shape[0]
                   for name, shape in ((k, _shape(s, hyper)) for k, s in layer_schema(2, v).items())}
    for h in range(2):
        case_params[f"attn.heads.{h}.W_q"] = [[2.0]] * 4
        case_params[f"attn.heads.{h}.W_k"] = [[2.0]] * 4
    case_params["attn.gamma_q"], case_params["attn.gamma_k"] = [1.0, 2.0, 3.0, 4.0], [0.5, 0.5, 1.0, 1.0]
    # a pre-RMSNorm layer: X ≡ 1 is its own norm (rms 1, gain 1 + γ = 2 with γ = 1): the attention reads 2
    got = intermediates("gpt2_layer", {"X": [[1.0, 1.0]]}, case_params, hyper=hyper, variant=v)
    for h in range(2):
        Q, K = got[f"attn.heads.{h}.Q"], got[f"attn.heads.{h}.K"]
        assert Q == [[4.0, 4.0]] * 4 and K == [[4.0, 4.0]] * 4  # W = 2 times the normed input 2
        assert got[f"attn.heads.{h}.q_norm"] == [[1.0 + g] * 2 for g in (1.0, 2.0, 3.0, 4.0)]
        assert got[f"attn.heads.{h}.k_norm"] == [[1.0 + g] * 2 for g in (0.5, 0.5, 1.0, 1.0)]
        assert got[f"attn.heads.{h}.Q_rot"] == rotate(got[f"attn.heads.{h}.q_norm"], v)
        assert got[f"attn.heads.{h}.K_rot"] == rotate(got[f"attn.heads.{h}.k_norm"], v)


def _shape(symbolic: tuple, hyper: dict) -> tuple:
    return tuple(hyper[d] if isinstance(d, str) and d in hyper else (hyper["H"] * hyper["d_mid"]
                 if d == "H*d_mid" else d) for d in symbolic)


def test_the_gains_belong_to_a_layers_attention_and_are_kept_without_affine():
    listing = {n for n, e in REGISTRY.items() if "qk_norm" in e.switches}
    assert {"gpt2_layer", "decoder_layer", "bert_layer", "encoder_layer", "d_transformer", "cached_decoding",
            "d_gradient"} <= listing
    assert not {"attention", "mh_attention", "self_attention", "padded_self_attention"} & listing
    for affine in ("scale_shift", "scale", "none"):
        schema = layer_schema(2, PAPER.replace(qk_norm="rms", affine=affine))
        assert schema["attn.gamma_q"] == ("d_attn",) and schema["attn.gamma_k"] == ("d_attn",)
        assert not any(k.startswith("attn.heads.") and "gamma" in k for k in schema)  # one pair, not per head
    assert "attn.gamma_q" not in layer_schema(2, PAPER)


def test_the_strategies_draw_qk_norm_with_rope_and_the_caps():
    assert find(variant_sets("gpt2_layer"), lambda v: v.qk_norm == "rms" and v.rotary != "none").qk_norm == "rms"
    assert find(variant_sets("attention"), lambda v: v.attn_softcap > 0).attn_softcap == 2.0
    assert find(variant_sets("d_loss"), lambda v: v.logit_softcap > 0).logit_softcap == 2.0
