"""A plugin that declares one of the issue-38 conventions and computes the paper's is caught at
float32, and the diagnosis names the convention it computes: Gemma's gain 1 + γ computed as γ, a
sliding window not applied, a parallel residual computed sequentially, BLOOM's ALiBi left out,
GPT-NeoX's partial rotary applied to the whole head, Qwen3's QK-norm left out, Gemma 2's attention
soft cap left out, Llama 3.1's rotary scaling left out.

The wrong plugin is the bundled NumPy one run under the other value: what a port that reuses a
Llama RMSNorm for Gemma, drops Mistral's ``sliding_window`` or GPT-NeoX's ``use_parallel_residual``
computes.
"""

from __future__ import annotations

import pytest

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.tolerances import reference
from ftspec.conformance.forensics.diagnosis import diagnose
from ftspec.impls.discovery import load
from ftspec.spec.variants import PAPER, parse

NUMPY = load("numpy")
#: ℓ = 4 > W = 2: the window drops a key of the last two queries
HYPER = {"H": 2, "d_e": 4, "d_attn": 2, "d_mid": 2, "d_mlp": 6, "ell": 4}
DECLARED = {"norm_gain": parse("gemma"), "window": PAPER.replace(window=2),
            "residual": PAPER.replace(residual="parallel"), "position_bias": parse("bloom"),
            "rotary_fraction": PAPER.replace(rotary="half", rotary_fraction=0.5), "qk_norm": parse("llama+qk_norm=rms"),
            "attn_softcap": PAPER.replace(attn_softcap=2.0),
            # Llama 3.1: base 500000 puts the second rotated pair of a width-4 head in the blended band
            "rope_scaling": parse("meta-llama3+rope_scaling=llama3")}
#: ... with room for a rotated pair and an unrotated one under rotary_fraction = 1/2
WIDER = {"rotary_fraction": {"d_attn": 4}, "rope_scaling": {"d_attn": 4}}


@pytest.mark.parametrize("switch", sorted(DECLARED))
def test_a_missing_family_convention_is_caught_and_named_at_float32(switch):
    declared = DECLARED[switch]
    computed = declared.replace(**{switch: getattr(PAPER, switch)})
    case = Case.build("gpt2_layer", {**HYPER, **WIDER.get(switch, {})}, declared, seed=2)
    p = rounded(case, "float32")
    wrong = call(NUMPY, case.entry, p.inputs, p.params, hyper=case.hyper, variant=computed, dtype="float32",
                 device="cpu")
    ref = reference(case.entry, p.inputs, p.params, hyper=case.hyper, variant=declared, dtype="float32")
    assert not judge(case.entry, wrong, ref).ok  # caught
    d = diagnose(case.entry, case, wrong, "float32", evaluations=80)
    assert any(m["changes"].get(switch) == getattr(PAPER, switch) for m in d.matches), d.summary()


def test_a_stack_without_its_global_layers_is_caught_and_named_at_float32():
    """Gemma 2's alternation (``global_every=2``: layer 1 global) computed as every layer local, as a
    port that applies ``sliding_window`` to every layer does: caught on a 2-layer model whose
    sequence is longer than the window, and named ``global_every = 0``."""
    import numpy as np

    declared = parse("llama+window=1,global_every=2")
    computed = declared.replace(global_every=0)
    hyper = {"N_V": 7, "ell_max": 5, "L": 2, "H": 2, "d_e": 4, "d_attn": 2, "d_mid": 2, "d_mlp": 6, "ell": 4}
    case = Case.build("d_transformer", hyper, declared, seed=2, given={"x": np.array([1, 3, 5, 2])})
    p = rounded(case, "float32")
    wrong = call(NUMPY, case.entry, p.inputs, p.params, hyper=case.hyper, variant=computed, dtype="float32",
                 device="cpu")
    ref = reference(case.entry, p.inputs, p.params, hyper=case.hyper, variant=declared, dtype="float32")
    assert not judge(case.entry, wrong, ref).ok
    d = diagnose(case.entry, case, wrong, "float32", evaluations=80)
    assert any(m["changes"].get("global_every") == 0 for m in d.matches), d.summary()
