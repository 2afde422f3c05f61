"""Multi-query attention at any H (``kv_heads="one"``: one key/value head shared by every query head;
Shazeer 2019) on all three bundled implementations, judged by the harness (``examine_case``) at float64
and float32, at H = 1, 3, 5 and 6 (3 and 5: no grouped set with a fixed kv_group ≤ 4 states one kv head
there), on Algorithm 5 alone, a causal self-attention under RoPE, the GPT-2 layer, the whole decoder
decoded with a key/value cache (Falcon-7B's paths: the one kv head cached once) and its gradient.

Each case is checked first to differ from every head reading keys of its own (kv_group 1 with head 0's
key/value maps copied to every head would be the same: here the other heads' own maps are the drawn ones),
so a plugin that ignored the switch, or read kv_group alone, would fail here.
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import examine_case
from ftspec.conformance.core.execute import Member
from ftspec.impls.discovery import load
from ftspec.spec import evaluate
from ftspec.spec.variants import PAPER, parse

IMPLS = {name: load(name) for name in ("numpy", "torch", "jax")}
ONE = PAPER.replace(kv_heads="one")
#: (algorithm, H, set): d_attn even under RoPE; the cached decoder prefills one token
CASES = {
    "mh_attention+3": ("mh_attention", 3, ONE),
    "mh_attention+1": ("mh_attention", 1, ONE),
    "causal_self_attention+5": ("causal_self_attention", 5, ONE.replace(rotary="half")),
    "gpt2_layer+6": ("gpt2_layer", 6, ONE.replace(attn_bias_at="qkv")),
    "cached_decoding+3": ("cached_decoding", 3, parse("llama+kv_heads=one")),
    # the gradient: NumPy's hand-written backward sums the heads' key/value gradients into the one kv head
    "d_gradient+3": ("d_gradient", 3, ONE),
}


def _case(label: str) -> Case:
    algorithm, H, variant = CASES[label]
    sizes = dict(Case.build(algorithm, variant=variant, seed=4).hyper) | {"H": H}
    if variant.rotary != "none":
        sizes["d_attn"] = 2
    given = {"n_prefill": np.array(1)} if algorithm == "cached_decoding" else None
    return Case.build(algorithm, sizes, variant, seed=4, given=given)


def _own_heads(case: Case) -> dict[str, np.ndarray]:
    """The case's parameters with every head its own keys' and values' maps: head h > 0 drawn afresh."""
    rng = np.random.default_rng(0)
    out = {}
    for k, v in case.spec_params().items():
        if ".kv_heads.0." in f".{k}":
            prefix, _, leaf = k.rpartition("kv_heads.0.")
            for h in range(case.hyper["H"]):
                out[f"{prefix}heads.{h}.{leaf}"] = v if h == 0 else rng.normal(size=np.shape(v)).tolist()
        else:
            out[k] = v
    return out


@pytest.mark.parametrize("label", sorted(CASES))
def test_one_kv_head_moves_the_result(label):
    case = _case(label)
    if case.hyper["H"] == 1:  # one head: the head's own W_k, W_v (kv_group = H = 1's names), nothing to share
        assert not any("kv_heads." in k for k in case.spec_params())
        return
    assert any("kv_heads.0." in k for k in case.spec_params()) and not any("kv_heads.1." in k
                                                                          for k in case.spec_params())
    got = evaluate(case.algorithm, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=case.variant)
    own = evaluate(case.algorithm, case.spec_inputs(), _own_heads(case), hyper=case.hyper,
                   variant=case.variant.replace(kv_heads="grouped"))
    assert got != own


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("impl_name", sorted(IMPLS))
@pytest.mark.parametrize("label", sorted(CASES))
def test_each_implementation_shares_one_kv_head(impl_name, label, dtype):
    case = _case(label)
    outcome = examine_case(Member(impl_name, IMPLS[impl_name], "cpu"), case, dtype, timeout=120.0)
    assert not outcome.judgement.findings, [f"{f.check}: {f.message}" for f in outcome.judgement.findings[:2]]
