"""ALiBi (``position_bias="alibi"``; Press et al. 2022), checked against its sources and its definition,
not against spec code:

- the slopes are Hugging Face BLOOM's (``_get_alibi_slopes``) and MPT's (``build_mpt_alibi_tensor``)
  for H = 1 .. 8 (every one a power of two there, so equal bit for bit), and for H a power of two the
  paper's geometric sequence 2^(−8/H), 2^(−16/H), ...; H = 3, worked by hand from the rule, is not
  the paper's closed form (the slip the zoo's ``alibi-slopes-power-of-two`` makes);
- the bias is added after the 1/√d scale and before the mask: scores read back from the spec's
  intermediates on a case whose every number is exact;
- only causal self-attention reads it (Press et al. define it there): the entries that list the
  switch are those with one, and a decoder layer's cross-attention is unchanged by it;
- the strategies draw H not a power of two first under ALiBi.
"""

from __future__ import annotations

import pytest
from hypothesis import find

from ftspec.conformance.core.strategies import hyperparameters, variant_sets
from ftspec.conformance.core.values import default_hyper
from ftspec.conformance.core.case import Case
from ftspec.spec import evaluate
from ftspec.spec.evaluation import intermediates
from ftspec.spec.position_bias import alibi_exponents, alibi_slopes
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER, parse

ALIBI = PAPER.replace(position_bias="alibi")


def _hf_slopes(H: int) -> tuple[list[float], list[float]]:
    """BLOOM's and MPT's slopes for H heads, from Hugging Face's own functions (transformers 5.24)."""
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    mpt = pytest.importorskip("transformers.models.mpt.modeling_mpt")
    b = [float(x) for x in bloom._get_alibi_slopes(H, "cpu")]
    # MPT's tensor over 2 positions is m_h·(t_z − 1) for t_z = 0, 1: its first column is −m_h
    m = [-float(x) for x in mpt.build_mpt_alibi_tensor(H, 2)[:, 0, 0]]
    return b, m


@pytest.mark.parametrize("H", range(1, 9))
def test_slopes_are_bloom_s_and_mpt_s(H):
    bloom, mpt = _hf_slopes(H)
    assert alibi_slopes(H) == bloom == mpt


@pytest.mark.parametrize("H", [1, 2, 4, 8, 16, 32])
def test_for_a_power_of_two_the_slopes_are_the_paper_s_geometric_sequence(H):
    """Press et al. §3: for n heads, the sequence that starts at 2^(−8/n) with that ratio."""
    assert alibi_exponents(H) == [-8 * k / H for k in range(1, H + 1)]


def test_three_heads_take_two_heads_slopes_then_the_first_of_four():
    """n = 2: 2^(−4), 2^(−8); then every other slope of 4 heads (2^(−2), 2^(−4), ...) from the first:
    2^(−2). The closed form for H = 3 would give 2^(−8/3), 2^(−16/3), 2^(−8)."""
    assert alibi_exponents(3) == [-4.0, -8.0, -2.0]
    assert alibi_slopes(3) == [1 / 16, 1 / 256, 1 / 4]
    assert alibi_exponents(3) != [-8 * k / 3 for k in (1, 2, 3)]


def test_the_bias_is_added_after_the_scale_and_before_the_mask():
    """One head (slope 2^(−8)), X ≡ 1, W_q = W_k = 1 over d_attn = 4 (√4 = 2): qᵀk = 4, scaled 2, so
    the softmax reads 2 + 2^(−8)·(t_z − t_x) where t_z ≤ t_x and −∞ above (before the scale it
    would read 2 + 2^(−9)·(t_z − t_x))."""
    hyper = {"H": 1, "d_e": 1, "d_attn": 4, "d_mid": 1, "ell": 3}
    ones = [[1.0]] * 4
    params = {"heads.0.W_q": ones, "heads.0.b_q": [0.0] * 4, "heads.0.W_k": ones, "heads.0.b_k": [0.0] * 4,
              "heads.0.W_v": [[1.0]], "heads.0.b_v": [0.0], "W_o": [[1.0]], "b_o": [0.0]}
    got = intermediates("causal_self_attention", {"X": [[1.0, 1.0, 1.0]]}, params, hyper=hyper, variant=ALIBI)
    inf = float("inf")
    want = [[2 + (tz - tx) / 256 if tz <= tx else -inf for tx in range(3)] for tz in range(3)]
    assert got["heads.0.S"] == want
    plain = intermediates("causal_self_attention", {"X": [[1.0, 1.0, 1.0]]}, params, hyper=hyper)
    assert plain["heads.0.S"] == [[2.0 if tz <= tx else -inf for tx in range(3)] for tz in range(3)]


def test_only_causal_self_attention_reads_the_bias():
    listing = {n for n, e in REGISTRY.items() if "position_bias" in e.switches}
    assert {"causal_self_attention", "gpt2_layer", "decoder_layer", "d_transformer", "ed_transformer",
            "cached_decoding"} <= listing
    assert not {"attention", "mh_attention", "self_attention", "bert_layer", "encoder_layer", "e_transformer",
                "unidirectional_mask"} & listing
    hyper = {**default_hyper(REGISTRY["decoder_layer"], ALIBI), "H": 3}
    case = Case.build("decoder_layer", hyper, ALIBI, seed=4)
    with_bias = intermediates("decoder_layer", case.spec_inputs(), case.spec_params(), hyper=hyper, variant=ALIBI)
    without = intermediates("decoder_layer", case.spec_inputs(), case.spec_params(), hyper=hyper)
    assert with_bias["self_attn.heads.2.S"] != without["self_attn.heads.2.S"]  # the causal self-attention
    # post-LN: the cross-attention reads the self-attention's output, so compare its scores' bias alone:
    # its S is its own KᵀQ/√d (no term by distance), recomputed here from its recorded scores
    scaled = [[s / 2 ** 0.5 for s in row] for row in with_bias["cross_attn.heads.0.scores"]]
    assert with_bias["cross_attn.heads.0.S"] == scaled


#: Hugging Face MPT (MptConfig defaults) as docs/spec.md declares it
MPT = "bloom+affine=scale,attn_bias=False,mlp_bias=False,activation=gelu_erf,embedding_norm=False"


def test_bloom_and_mpt_move_a_model_by_alibi_alone():
    """The families with ALiBi off are different functions: the bias is not a no-op at their sizes."""
    for name in ("bloom", MPT):
        v = parse(name)
        hyper = {**default_hyper(REGISTRY["d_transformer"], v), "H": 3}
        case = Case.build("d_transformer", hyper, v, seed=5)
        got = evaluate("d_transformer", case.spec_inputs(), case.spec_params(), hyper=hyper, variant=v)
        off = evaluate("d_transformer", case.spec_inputs(), case.spec_params(), hyper=hyper,
                       variant=v.replace(position_bias="none"))
        assert got != off, name


@pytest.mark.parametrize("name", ["causal_self_attention", "gpt2_layer", "decoder_layer"])
def test_under_alibi_the_first_head_count_drawn_is_not_a_power_of_two(name):
    for G, H in ((1, 3), (2, 6), (4, 12)):
        v = ALIBI.replace(kv_group=G)
        first = find(hyperparameters(name, variant=v, budget="quick"), lambda h: True)
        assert first["H"] == H


@pytest.mark.parametrize("name", ["causal_self_attention", "d_transformer", "d_gradient"])
def test_the_strategies_draw_alibi_with_three_heads(name):
    assert find(variant_sets(name), lambda v: v.position_bias == "alibi").position_bias == "alibi"
    found = find(hyperparameters(name, variant=ALIBI, budget="quick"), lambda h: h["H"] == 3)
    assert found["H"] == 3
