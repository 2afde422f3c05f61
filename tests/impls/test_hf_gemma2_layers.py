"""The ``transformers-gemma2`` plugin's whole models (Hugging Face transformers 5.24's
Gemma2ForCausalLM, eager, with Gemma2Config's own ``layer_types``: layer 0 sliding, layer 1 full)
on one drawn two-layer case per entry at float32: judged conformant under the set the plugin
declares for them (docs/spec.md's Gemma 2 2B with ``window=2,global_every=2``), and not conformant
against the same set with every layer windowed (``global_every=0``) nor with no window at all: the
library alternates as the spec's ``global_every`` says, and the search has something to tell apart.
The full certification (quick profile, seeds 1 and 2) is ``ftspec certify transformers-gemma2``.
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.tolerances import reference

from .cases import findings_of

pytest.importorskip("torch")
pytest.importorskip("transformers")

#: within the plugin's limits (d_e = H·d_attn, d_attn = d_mid); two layers and ℓ = 4, so that a key two
#: places back is in layer 1's (full) view and out of layer 0's window of 2
HYPER = {"N_V": 7, "ell_max": 5, "L": 2, "H": 2, "d_e": 8, "d_attn": 4, "d_mid": 4, "d_mlp": 5, "ell": 4}
TOKENS = np.array([3, 0, 5, 1])


@pytest.mark.parametrize("algorithm", ["padded_d_transformer", "cached_decoding"])
def test_the_librarys_gemma2_alternates_sliding_and_full_layers(algorithm):
    from ftspec.impls.hf import FAMILY_MODEL_SETS, implementation_gemma2 as impl

    declared = FAMILY_MODEL_SETS["gemma2"][0]
    assert (declared.window, declared.global_every) == (2, 2)
    assert impl.variants_for(algorithm)[0] == declared
    # distinct tokens: under one token repeated every key has the same value, which no window changes
    given = {"x": TOKENS} | ({"n_prefill": np.array(1)} if algorithm == "cached_decoding" else {})
    case = Case.build(algorithm, HYPER, declared, seed=1, given=given)
    assert findings_of(impl.name, case, declared) == []
    p = rounded(case, "float32")
    got = call(impl, case.entry, p.inputs, p.params, hyper=case.hyper, variant=declared, dtype="float32",
               device="cpu")
    for wrong in (declared.replace(global_every=0), declared.replace(window=0)):
        ref = reference(case.entry, p.inputs, p.params, hyper=case.hyper, variant=wrong, dtype="float32")
        assert not judge(case.entry, got, ref).ok, wrong.describe()
