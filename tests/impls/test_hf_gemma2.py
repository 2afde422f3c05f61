"""The ``transformers-gemma2`` plugin (Hugging Face transformers 5.24's Gemma2DecoderLayer and
Gemma2ForCausalLM, eager) on one drawn case per entry at float32: judged conformant under the set it
declares (docs/spec.md's Gemma 2 2B, ``gemma+norm_placement=sandwich,attn_softcap=50.0,
logit_softcap=30.0``, with two kv heads), and not conformant against the same set with pre-LN in
place of the sandwich (the parameters less the output norms'): the library's four norms per layer
are the spec's sandwich, and the search has something to tell apart. The full certification (quick
profile, seeds 1 and 2) is ``ftspec certify transformers-gemma2``.
"""

from __future__ import annotations

import pytest

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.tolerances import reference

from .cases import findings_of

pytest.importorskip("torch")
pytest.importorskip("transformers")

#: within the plugin's limits: d_e = H·d_attn, d_attn = d_mid (Gemma2Config refuses a hidden_size the heads
#: do not divide)
HYPER = {"H": 2, "d_e": 8, "d_attn": 4, "d_mid": 4, "d_mlp": 5, "ell": 4}


@pytest.mark.parametrize("algorithm", ["gpt2_layer", "padded_d_transformer"])
def test_the_librarys_gemma2_is_the_sandwich_and_not_pre_ln(algorithm):
    from ftspec.impls.hf import FAMILY_MODEL_SETS, VARIANT_GEMMA2, implementation_gemma2 as impl

    # the whole models keep the library's alternating sliding and global layers (window 2, global_every 2)
    declared = VARIANT_GEMMA2 if algorithm == "gpt2_layer" else FAMILY_MODEL_SETS["gemma2"][0]
    hyper = dict(HYPER) if algorithm == "gpt2_layer" else {**HYPER, "N_V": 7, "L": 2, "ell_max": 5}
    case = Case.build(algorithm, hyper, declared, seed=1)
    assert findings_of(impl.name, case, declared) == []
    p = rounded(case, "float32")
    got = call(impl, case.entry, p.inputs, p.params, hyper=case.hyper, variant=declared, dtype="float32",
               device="cpu")
    pre = declared.replace(norm_placement="pre")
    params = {k: v for k, v in p.params.items() if not k.endswith("_out")}
    assert not judge(case.entry, got, reference(case.entry, p.inputs, params, hyper=case.hyper, variant=pre,
                                                dtype="float32")).ok
