"""Gemma 2 27B's query scale (``attn_scale="sqrt_d_model_per_head"``, spec/attention.py
``_scale_divisor``): every head of a multi-head attention divides its scores by √(d_x/H), checked

- on a case whose every number is exact (d_x = 8, H = 2: the scores are halved, where the paper's
  √d_attn and √d_model would divide by √3 and √8), and where d_x/H is not whole (√(5/2));
- against Hugging Face transformers 5.24's own ``Gemma2Attention`` (models/gemma2/modeling_gemma2.py:
  ``self.scaling = config.query_pre_attn_scalar**-0.5``) with query_pre_attn_scalar = hidden_size /
  num_attention_heads and head_dim ≠ that, as the released 27B config sets them: judged conformant by
  the harness's derived bound, and not conformant under ``sqrt_d_attn`` (so a spec that took head_dim,
  as the 2B config does, would fail here). The library runs at float32 and is judged at float32:
  its eager attention computes the softmax in float32 whatever the input dtype
  (``softmax(attn_weights, dim=-1, dtype=torch.float32)``), so a float64 run would not be float64;
- the strategies draw the value at Algorithm 5 and at a layer.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import find

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.strategies import variant_sets
from ftspec.conformance.core.tolerances import reference
from ftspec.spec.evaluation import intermediates
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER, SWITCHES

PER_HEAD = PAPER.replace(attn_scale="sqrt_d_model_per_head", attn_bias=False)


def _ones(H: int, d_x: int, d_attn: int) -> dict:
    """H heads over X ≡ 1 with every W_q, W_k entry 1 (each query and key entry is d_x, so qᵀk = d_attn·d_x²),
    W_v, W_o of ones."""
    p: dict = {"W_o": [[1.0] * H] * 1}
    for h in range(H):
        p.update({f"heads.{h}.W_q": [[1.0] * d_x] * d_attn, f"heads.{h}.W_k": [[1.0] * d_x] * d_attn,
                  f"heads.{h}.W_v": [[1.0] * d_x]})
    return p


@pytest.mark.parametrize("d_x,exact", [(8, 96.0), (5, 75.0 / math.sqrt(2.5))])
def test_every_head_divides_its_scores_by_the_root_of_the_width_per_head(d_x, exact):
    """qᵀk = 3·d_x² (d_attn = 3) over √(d_x/2): 192/2 = 96 at d_x = 8 (exact in binary64), 75/√2.5 at d_x = 5."""
    hyper = {"H": 2, "d_x": d_x, "d_z": d_x, "d_attn": 3, "d_mid": 1, "d_out": 1, "ell_x": 1, "ell_z": 1}
    X = [[1.0] for _ in range(d_x)]
    got = intermediates("mh_attention", {"X": X, "Z": X, "Mask": [[1]]}, _ones(2, d_x, 3), hyper=hyper,
                        variant=PER_HEAD)
    assert got["heads.0.scores"] == got["heads.1.scores"] == [[3.0 * d_x * d_x]]
    assert got["heads.0.S"] == got["heads.1.S"] == [[pytest.approx(exact, rel=2.0 ** -52, abs=0)]]
    if d_x == 8:
        assert got["heads.0.S"] == [[96.0]]


def test_one_head_alone_has_h_one():
    """Algorithm 4 alone is one head: √(d_x/1) = √d_x, the value ``sqrt_d_model`` gives."""
    hyper = {"d_x": 4, "d_z": 4, "d_attn": 3, "d_out": 1, "ell_x": 1, "ell_z": 1}
    X = [[1.0]] * 4
    params = {"W_q": [[1.0] * 4] * 3, "W_k": [[1.0] * 4] * 3, "W_v": [[1.0] * 4]}
    got = intermediates("attention", {"X": X, "Z": X, "Mask": [[1]]}, params, hyper=hyper, variant=PER_HEAD)
    assert got["S"] == [[48.0 / 2.0]]


def test_gemma2s_attention_is_algorithm_5_under_the_per_head_scale():
    """Gemma2Attention with hidden_size 8, 2 heads of head_dim 3 and query_pre_attn_scalar 8/2 = 4 (27B's
    rule; its own sizes 4608/32 = 144 ≠ 128), no RoPE (cos 1, sin 0), no mask, no cap."""
    torch = pytest.importorskip("torch")
    from transformers import Gemma2Config
    from transformers.models.gemma2.modeling_gemma2 import Gemma2Attention

    H, d_e, d_attn, ell = 2, 8, 3, 4
    hyper = {"H": H, "d_e": d_e, "d_attn": d_attn, "d_mid": d_attn, "ell": ell}
    case = Case.build("self_attention", hyper, PER_HEAD, seed=3)  # Algorithm 5 with Z = X, Mask ≡ 1
    p = rounded(case, "float32")
    config = Gemma2Config(hidden_size=d_e, num_attention_heads=H, num_key_value_heads=H, head_dim=d_attn,
                          query_pre_attn_scalar=d_e // H, attention_bias=False, attn_logit_softcapping=None,
                          attn_implementation="eager")
    layer = Gemma2Attention(config, 0).eval()
    w = {k: torch.tensor(np.asarray(a, dtype=np.float32)) for k, a in p.params.items()}
    state = {"q_proj.weight": torch.cat([w[f"heads.{h}.W_q"] for h in range(H)]),
             "k_proj.weight": torch.cat([w[f"heads.{h}.W_k"] for h in range(H)]),
             "v_proj.weight": torch.cat([w[f"heads.{h}.W_v"] for h in range(H)]), "o_proj.weight": w["W_o"]}
    assert set(layer.state_dict()) == set(state)  # every parameter of the library's module is set, no other
    layer.load_state_dict(state)
    X = torch.tensor(np.asarray(p.inputs["X"], dtype=np.float32)).T[None]  # (1, ℓ, d_e): rows are tokens
    no_rotation = (torch.ones(1, ell, d_attn), torch.zeros(1, ell, d_attn))
    with torch.no_grad():
        out, _ = layer(X, position_embeddings=no_rotation, attention_mask=None)
    got = {"V_tilde": out[0].numpy().T}  # (d_e, ℓ)
    verdicts = []
    for v in (PER_HEAD, PER_HEAD.replace(attn_scale="sqrt_d_attn")):
        ref = reference(case.entry, p.inputs, p.params, hyper=case.hyper, variant=v, dtype="float32")
        verdicts.append(judge(case.entry, got, ref).ok)
    assert verdicts == [True, False]


@pytest.mark.parametrize("entry", ["mh_attention", "gpt2_layer"])
def test_the_strategies_draw_the_value(entry):
    assert "sqrt_d_model_per_head" in SWITCHES["attn_scale"].choices
    assert "attn_scale" in REGISTRY[entry].switches
    find(variant_sets(entry), lambda v: v.attn_scale == "sqrt_d_model_per_head")
