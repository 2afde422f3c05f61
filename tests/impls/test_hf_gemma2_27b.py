"""The ``transformers-gemma2-27b`` plugin (Hugging Face transformers 5.24's Gemma2Attention,
Gemma2DecoderLayer and Gemma2ForCausalLM, eager, built with Gemma 2 9B's and 27B's query scale:
``query_pre_attn_scalar = hidden_size / num_attention_heads``, 3584/16 and 4608/32 in the released
configs, and ``Gemma2Attention.scaling = query_pre_attn_scalar**-0.5``) on one drawn case per entry at
float32, at sizes where d_e/H = 6 and d_attn = 4 differ: judged conformant under docs/spec.md's Gemma 2
27B, ``gemma+norm_placement=sandwich,attn_scale=sqrt_d_model_per_head,attn_softcap=50.0,logit_softcap=30.0``
with two kv heads (the models ``+window=2,global_every=2``), and not conformant against the same set at the
paper's scale 1/√d_attn (Gemma 2 2B's), nor at 1/√d_e: the library divides by √(d_e/H), and the search
has something to tell apart. The full certification (quick profile, seeds 1 and 2) is ``ftspec certify
transformers-gemma2-27b`` (docs/libraries.md "Gemma 2").
"""

from __future__ import annotations

import pytest

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.tolerances import reference
from ftspec.spec.variants import preset

from .cases import findings_of, layer_or_model_case

pytest.importorskip("torch")
pytest.importorskip("transformers")

#: written out from docs/spec.md's Gemma 2 27B (not read from the plugin), with two kv heads' grouping
LAYER = preset("gemma").replace(norm_placement="sandwich", attn_scale="sqrt_d_model_per_head", attn_softcap=50.0,
                                logit_softcap=30.0, kv_group=2)
MODEL = LAYER.replace(window=2, global_every=2)
#: within the plugin's limits (d_e a multiple of 12, H ≤ 4, d_attn = d_mid): d_e/H = 6, d_attn = 4 (√6 against
#: √4: a wrong scale changes every score by a fifth); the models two layers long, ℓ = 4
SIZES = {"H": 2, "d_e": 12, "d_attn": 4, "d_mid": 4, "d_mlp": 5, "ell": 4}
MODEL_SIZES = {**SIZES, "N_V": 7, "ell_max": 5, "L": 2}
ALGORITHMS = ["padded_causal_self_attention", "gpt2_layer", "padded_d_transformer", "cached_decoding"]


def _case(algorithm: str):
    return layer_or_model_case(algorithm, LAYER, SIZES, MODEL, MODEL_SIZES)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_librarys_gemma2_divides_by_the_root_of_d_e_over_h(algorithm):
    from ftspec.impls.hf import implementation_gemma2_27b as impl

    declared, case = _case(algorithm)
    assert declared in impl.variants_for(algorithm)
    assert impl.limits[algorithm].admits(case.hyper)
    assert findings_of(impl.name, case, declared) == []
    p = rounded(case, "float32")
    got = call(impl, case.entry, p.inputs, p.params, hyper=case.hyper, variant=declared, dtype="float32",
               device="cpu")
    for wrong in ("sqrt_d_attn", "sqrt_d_model"):
        ref = reference(case.entry, p.inputs, p.params, hyper=case.hyper, variant=declared.replace(attn_scale=wrong),
                        dtype="float32")
        assert not judge(case.entry, got, ref).ok, wrong
