"""The ``transformers-gemma3-27b`` plugin (Hugging Face transformers 5.24's Gemma3Attention,
Gemma3DecoderLayer and Gemma3ForCausalLM, eager, built as the released Gemma 3 27B: query_pre_attn_scalar
= hidden_size / num_attention_heads, 5376/32 = 168 in its config, and ``rope_scaling = {"rope_type":
"linear", "factor": 8.0}``, which ``Gemma3TextConfig.convert_rope_params_to_dict`` puts in
``rope_parameters["full_attention"]`` alone) on one drawn case per entry at float32, at sizes where d_e/H
= 6 and d_attn = 4 differ: judged conformant under docs/spec.md's Gemma 3 27B, ``gemma+norm_placement=
sandwich,qk_norm=rms,rope_base=1000000.0,attn_scale=sqrt_d_model_per_head,rope_scaling=linear-8`` with two
kv heads (the models ``+window=2,global_every=2,rope_local_base=10000.0``), and not conformant under the same
set with linear-2 (the factor the spec had before 2.14), with no scaling, or with the paper's 1/√d_attn;
and the library's two-layer model fails against a reference that scales its local layer too (the spec's
rule before 2.14: Gemma 3's local layers are unscaled). The plugin's conformance over a search is
``ftspec certify transformers-gemma3-27b`` (docs/libraries.md "Gemma 3"); the harness's own examination of
each entry's case (``findings_of``) runs under FTSPEC_ALL_LIBRARIES=1.
"""

from __future__ import annotations

import os

import pytest

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.tolerances import reference
from ftspec.spec import architectures
from ftspec.spec.variants import preset

from .cases import findings_of, layer_or_model_case

pytest.importorskip("torch")
pytest.importorskip("transformers")

HEAVY = bool(os.environ.get("FTSPEC_ALL_LIBRARIES"))
heavy = pytest.mark.skipif(not HEAVY, reason="library checks: FTSPEC_ALL_LIBRARIES=1 (make bench runs them)")

#: written out from docs/spec.md's Gemma 3 27B and the released config's two values (query_pre_attn_scalar =
#: d_e/H, rope_scaling linear with factor 8), not read from the plugin; two kv heads' grouping
LAYER = preset("gemma").replace(norm_placement="sandwich", qk_norm="rms", rope_base=1000000.0, kv_group=2,
                                attn_scale="sqrt_d_model_per_head", rope_scaling="linear-8")
MODEL = LAYER.replace(window=2, global_every=2, rope_local_base=10000.0)
#: within the plugin's limits (d_e a multiple of 12, H ≤ 4, d_attn = d_mid): d_e/H = 6, d_attn = 4 (two RoPE
#: pairs: θ_0 = 1 against 1/8 at every position t ≥ 1); the models two layers long (0 local, 1 global), ℓ = 4
SIZES = {"H": 2, "d_e": 12, "d_attn": 4, "d_mid": 4, "d_mlp": 5, "ell": 4}
MODEL_SIZES = {**SIZES, "N_V": 7, "ell_max": 5, "L": 2}
ALGORITHMS = ["padded_causal_self_attention", "gpt2_layer", "padded_d_transformer", "cached_decoding"]
#: the wrong declarations a search must tell apart: Gemma 3 27B declared with another scaling or scale
WRONG = {"linear-2": {"rope_scaling": "linear-2"}, "no scaling": {"rope_scaling": "none"},
         "sqrt_d_attn": {"attn_scale": "sqrt_d_attn"}}


def _case(algorithm: str):
    return layer_or_model_case(algorithm, LAYER, SIZES, MODEL, MODEL_SIZES)


def _library(algorithm: str):
    from ftspec.impls.hf import implementation_gemma3_27b as impl

    declared, case = _case(algorithm)
    assert declared in impl.variants_for(algorithm)
    assert impl.limits[algorithm].admits(case.hyper)
    p = rounded(case, "float32")
    got = call(impl, case.entry, p.inputs, p.params, hyper=case.hyper, variant=declared, dtype="float32",
               device="cpu")
    return declared, case, p, got


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_librarys_gemma3_27b_matches_its_declaration_and_no_wrong_one(algorithm):
    declared, case, p, got = _library(algorithm)
    ref = reference(case.entry, p.inputs, p.params, hyper=case.hyper, variant=declared, dtype="float32")
    assert judge(case.entry, got, ref).ok
    for label, wrong in WRONG.items():
        ref = reference(case.entry, p.inputs, p.params, hyper=case.hyper, variant=declared.replace(**wrong),
                        dtype="float32")
        assert not judge(case.entry, got, ref).ok, label


@pytest.mark.parametrize("algorithm", ["padded_d_transformer", "cached_decoding"])
def test_the_librarys_local_layers_are_unscaled(algorithm, monkeypatch):
    declared, case, p, got = _library(algorithm)
    # the spec's rule before 2.14: a local layer takes rope_local_base and keeps rope_scaling (linear-8 there too)
    unscaled_locals = architectures.layer_variant

    def scaled_locals(variant, l):
        return unscaled_locals(variant, l).replace(rope_scaling=variant.rope_scaling)

    assert unscaled_locals(declared, 0).rope_scaling == "none" and unscaled_locals(declared, 1).rope_scaling == \
        "linear-8"
    monkeypatch.setattr(architectures, "layer_variant", scaled_locals)
    ref = reference(case.entry, p.inputs, p.params, hyper=case.hyper, variant=declared, dtype="float32")
    assert not judge(case.entry, got, ref).ok


@heavy
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_harness_finds_nothing_on_the_librarys_gemma3_27b(algorithm):
    declared, case = _case(algorithm)
    assert findings_of("transformers-gemma3-27b", case, declared) == []
