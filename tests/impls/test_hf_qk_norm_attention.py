"""Qwen3's and Gemma 3's attention certified alone (spec 2.12: the causal self-attention entries read
``qk_norm``): ``transformers-qwen3`` and ``transformers-gemma3`` (and their ``-sdpa`` twins) offer
padded_causal_self_attention through Qwen3Attention and Gemma3Attention (Hugging Face transformers 5.24,
models/qwen3/modeling_qwen3.py and models/gemma3/modeling_gemma3.py: q_norm and k_norm, an RMSNorm of each
head's query and key over head_dim before ``apply_rotary_pos_emb``, Gemma3RMSNorm's gain 1 + w). On one
drawn case each at float32 the library's attention conforms under the set written out here from that
source, and fails when declared without QK-norm (the parameters less γ_q, γ_k) and, for Gemma 3, with
the gains γ in place of 1 + γ. The full certification (quick profile, seeds 1 and 2) is ``ftspec certify
transformers-qwen3`` and ``transformers-gemma3`` (docs/libraries.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.tolerances import reference
from ftspec.spec.variants import preset

from .cases import findings_of

pytest.importorskip("torch")
pytest.importorskip("transformers")

ALGORITHM = "padded_causal_self_attention"
#: written out from the libraries' sources (transformers 5.24), not read from the plugins: Qwen3 is Llama's
#: attention with q_norm, k_norm (Qwen3RMSNorm(head_dim, eps=rms_norm_eps): gain w) and rope_theta 1e6;
#: Gemma 3's Gemma3Attention adds q_norm, k_norm (Gemma3RMSNorm(head_dim): gain 1 + w) to Gemma's, the
#: full (global) layer's base default_theta["global"] 1e6; both with two query heads per kv head
SETS = {
    "qwen3": preset("llama").replace(qk_norm="rms", rope_base=1000000.0, kv_group=2),
    "gemma3": preset("gemma").replace(norm_placement="sandwich", qk_norm="rms", rope_base=1000000.0, kv_group=2),
}
#: within the plugins' limits (Qwen3: d_attn = d_mid; Gemma 3: d_e = H·d_attn too); H = 4 over 2 kv heads,
#: d_attn = 4 (two RoPE pairs), ℓ = 4
SIZES = {"H": 4, "d_e": 16, "d_attn": 4, "d_mid": 4, "ell": 4}
QK_GAINS = ("gamma_q", "gamma_k")


def _case(family: str):
    """X with distinct columns (under equal columns every key has the same value, whatever the weights) and
    no padding."""
    X = np.random.default_rng(1).normal(size=(SIZES["d_e"], SIZES["ell"]))
    return Case.build(ALGORITHM, SIZES, SETS[family], seed=1, given={"X": X, "pad": np.ones(SIZES["ell"], bool)})


@pytest.mark.parametrize("family, sdpa", [("qwen3", False), ("qwen3", True), ("gemma3", False), ("gemma3", True)])
def test_the_librarys_attention_conforms_with_qk_norm(family, sdpa):
    from ftspec.impls.discovery import load

    name = f"transformers-{family}" + ("-sdpa" if sdpa else "")
    declared = SETS[family].replace(empty_query="zeros") if sdpa else SETS[family]  # sdpa's keyless query: zeros
    assert declared in load(name).variants_for(ALGORITHM)
    case = _case(family)
    assert set(QK_GAINS) <= set(case.params)
    assert findings_of(name, case, declared) == []


#: (family, label, the wrong declaration, whether the parameters keep γ_q, γ_k)
WRONG = [
    ("qwen3", "no QK-norm", SETS["qwen3"].replace(qk_norm="none"), False),
    ("gemma3", "no QK-norm", SETS["gemma3"].replace(qk_norm="none"), False),
    ("gemma3", "QK-norm gains γ, not 1 + γ", SETS["gemma3"].replace(norm_gain="gamma"), True),
]


@pytest.mark.parametrize("family, label, wrong, gains", WRONG, ids=[f"{r[0]}: {r[1]}" for r in WRONG])
def test_the_librarys_attention_fails_declared_without_its_qk_norm(family, label, wrong, gains):
    from ftspec.impls.discovery import load

    impl = load(f"transformers-{family}")
    case = _case(family)
    p = rounded(case, "float32")
    got = call(impl, case.entry, p.inputs, p.params, hyper=case.hyper, variant=SETS[family], dtype="float32",
               device="cpu")
    # the library's own set passes on the same call (so a failure below is the wrong declaration's)
    assert judge(case.entry, got, reference(case.entry, p.inputs, p.params, hyper=case.hyper,
                                            variant=SETS[family], dtype="float32")).ok
    given = {k: v for k, v in p.params.items() if gains or not k.endswith(QK_GAINS)}
    assert gains or len(given) == len(p.params) - 2
    ref = reference(case.entry, p.inputs, given, hyper=case.hyper, variant=wrong, dtype="float32")
    assert not judge(case.entry, got, ref).ok, label
