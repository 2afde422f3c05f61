"""The sparse mixture-of-experts MLP (``moe_mlp``, spec/moe.py; spec 2.11) against values worked
by hand, its two switches, its tie refusal and its size check.

The hand case: one token x = 1 of width d_e = 1, E = 3 experts of width d_mlp = 1, k = 2. The router
W_g = (0, ln 2, ln 3)ᵀ gives logits (0, ln 2, ln 3), so p = (1, 2, 3)/6: experts 1 and 2 are chosen,
with weights p₁ = 1/3, p₂ = 1/2 (Qwen2-MoE's plain weights) or 2/5, 3/5 (Mixtral's renormalised
ones). Every expert has W_1 = ln 3 (silu(ln 3) = ln 3 · σ(ln 3) = ¾ ln 3, as σ(ln 3) = 3/(3 + 1)),
W_3 = 1 and W_2 = i + 1, so FFN_i(1) = (i + 1)·¾ ln 3:

- plain: (1/3·2 + 1/2·3)·¾ ln 3 = 13/6 · ¾ ln 3 = 1.625 ln 3;
- renormalised: (2/5·2 + 3/5·3)·¾ ln 3 = 13/5 · ¾ ln 3 = 1.95 ln 3;
- with the shared expert (W_1 = ln 3, W_3 = W_2 = 1: ¾ ln 3) and its gate w_s = ln 3 (σ = ¾):
  1.625 ln 3 + ¾·¾ ln 3 = 2.1875 ln 3;
- softmax over the two chosen logits alone (Mistral's reference routing) gives the renormalised
  weights, 2/5 and 3/5: the plain convention is what tells the two apart.
"""

from __future__ import annotations

import math

import pytest

from ftspec.spec import SpecError, evaluate
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import LATER, PAPER, SWITCHES

LN2, LN3 = math.log(2.0), math.log(3.0)
HYPER = {"E": 3, "k": 2, "d_e": 1, "d_mlp": 1, "ell": 1}
X = {"X": [[1.0]]}


def _params(W_g=((0.0,), (LN2,), (LN3,)), shared=False):
    # the experts stacked: expert i's row i of W_1 and W_3 (d_mlp = 1), column i of W_2
    p = {"W_g": [list(r) for r in W_g], "W_1": [[LN3]] * 3, "W_3": [[1.0]] * 3,
         "W_2": [[1.0, 2.0, 3.0]]}
    if shared:
        p.update({"shared.W_1": [[LN3]], "shared.W_3": [[1.0]], "shared.W_2": [[1.0]],
                  "W_shared_gate": [[LN3]]})
    return p


def _y(params, variant=PAPER, hyper=HYPER):
    return evaluate("moe_mlp", X, params, hyper=hyper, variant=variant)["Y"][0][0]


def test_plain_top_k_weights_qwen2_moe_default():
    assert _y(_params()) == pytest.approx(1.625 * LN3, rel=1e-14)


def test_renormalised_top_k_weights_mixtral():
    assert _y(_params(), PAPER.replace(moe_topk_norm=True)) == pytest.approx(1.95 * LN3, rel=1e-14)


def test_shared_expert_with_its_sigmoid_gate_qwen2_moe():
    got = _y(_params(shared=True), PAPER.replace(moe_shared=True))
    assert got == pytest.approx(2.1875 * LN3, rel=1e-14)


def test_one_expert_chosen_and_every_expert_chosen():
    # k = 1: expert 2 alone, weight 1/2 plain, 1 renormalised; k = 3: all, (1·1 + 2·2 + 3·3)/6 = 14/6
    assert _y(_params(), hyper={**HYPER, "k": 1}) == pytest.approx(0.5 * 3 * 0.75 * LN3, rel=1e-14)
    assert _y(_params(), PAPER.replace(moe_topk_norm=True), {**HYPER, "k": 1}) == \
        pytest.approx(3 * 0.75 * LN3, rel=1e-14)
    assert _y(_params(), hyper={**HYPER, "k": 3}) == pytest.approx(14 / 6 * 0.75 * LN3, rel=1e-14)


def test_a_tie_across_the_top_k_boundary_is_refused():
    # all logits 0: p = 1/3 each, so the 2nd and 3rd largest tie
    with pytest.raises(SpecError) as err:
        _y(_params(W_g=((0.0,), (0.0,), (0.0,))))
    assert err.value.argument == "W_g" and err.value.algorithm == "moe_mlp"
    # logits (ln 3, ln 2, ln 2): the 2nd and 3rd tie again, the 1st apart
    with pytest.raises(SpecError):
        _y(_params(W_g=((LN3,), (LN2,), (LN2,))))


def test_ties_that_do_not_cross_the_boundary_are_accepted():
    # every expert chosen (k = E): the tie decides nothing; (1 + 2 + 3)/3 · ¾ ln 3
    assert _y(_params(W_g=((0.0,), (0.0,), (0.0,))), hyper={**HYPER, "k": 3}) == pytest.approx(1.5 * LN3, rel=1e-14)
    # a tie inside the chosen set, logits (ln 3, ln 3, 0): p = (3, 3, 1)/7, experts 0 and 1 at 3/7 each
    got = _y(_params(W_g=((LN3,), (LN3,), (0.0,))))
    assert got == pytest.approx(3 / 7 * (1 + 2) * 0.75 * LN3, rel=1e-14)


def test_more_experts_chosen_than_there_are_is_refused():
    with pytest.raises(SpecError) as err:
        _y(_params(), hyper={**HYPER, "k": 4})
    assert err.value.argument == "k"


def test_the_entry_declares_its_switches_and_the_tie_refusal():
    e = REGISTRY["moe_mlp"]
    assert e.switches == {"moe_topk_norm", "moe_shared"}
    assert "W_g" in {r.argument for r in e.refusals}
    # the switches of spec 2.11 are LATER: every set stated before keeps its hash
    assert LATER["moe_topk_norm"] is False and LATER["moe_shared"] is False
    assert PAPER.replace(moe_topk_norm=True).hash != PAPER.hash
    assert "moe" not in PAPER.to_json()
    for name in ("moe_topk_norm", "moe_shared"):
        assert SWITCHES[name].paper is False and SWITCHES[name].group == "experts"
    # only moe_mlp reads them
    assert [n for n, x in REGISTRY.items() if x.switches & {"moe_topk_norm", "moe_shared"}] == ["moe_mlp"]


def test_the_tie_refusal_transform_makes_a_case_the_spec_refuses():
    refusal = next(r for r in REGISTRY["moe_mlp"].refusals if r.argument == "W_g")
    made = refusal.apply(REGISTRY["moe_mlp"], HYPER, PAPER, X, _params())
    assert made is not None and made.argument == "W_g"
    with pytest.raises(SpecError):
        evaluate("moe_mlp", made.inputs, made.params, hyper=made.hyper)
    assert refusal.apply(REGISTRY["moe_mlp"], {**HYPER, "k": 3}, PAPER, X, _params()) is None  # k = E


def test_the_named_intermediates():
    from ftspec.spec.evaluation import intermediates

    got = intermediates("moe_mlp", X, _params(shared=True), hyper=HYPER, variant=PAPER.replace(moe_shared=True))
    mlp = ["pre", "act", "lin", "hidden"]
    experts = [name for i in range(3) for name in [f"experts.{i}.{n}" for n in mlp] + [f"experts.{i}"]]
    assert list(got) == ["router", "weights", *experts, "shared_gate", *[f"shared.{n}" for n in mlp], "shared", "Y"]
    assert got["router"] == [[0.0, LN2, LN3][i:i + 1] for i in range(3)]
    # expert 0 is not chosen: weight 0; experts 1 and 2 at p = 1/3 and 1/2
    assert [row[0] for row in got["weights"]] == pytest.approx([0.0, 1 / 3, 0.5], rel=1e-14)
    assert got["shared_gate"] == pytest.approx([0.75], rel=1e-14)
