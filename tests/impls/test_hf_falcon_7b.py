"""The ``transformers-falcon-7b`` and ``-sdpa`` plugins (Hugging Face transformers 5.24's FalconAttention,
FalconDecoderLayer and FalconForCausalLM in the old decoder architecture, FalconConfig's defaults:
multi_query, one input_layernorm) on one drawn case per entry at float32, H = 4: judged conformant under
docs/spec.md's Falcon-7B written out here, ``nanogpt+residual=parallel_shared,attn_bias=False,
mlp_bias=False,positions=none,rotary=half,empty_query=uniform,kv_group=H``, and not conformant against
the same set with two key/value heads (kv_group 2: heads 2 and 3 given a second kv head, which the
library, with one, never reads) nor with the layer's two sublayers in sequence (pre-LN, the shared norm's
γ¹, β¹ copied to γ², β²). The full certification (quick profile, seeds 1 and 2) is ``ftspec certify
transformers-falcon-7b`` (docs/libraries.md "Qwen3, Phi-3, GPT-J, OPT and Falcon").
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.tolerances import reference
from ftspec.impls.discovery import load
from ftspec.spec.variants import preset

from .cases import findings_of

pytest.importorskip("torch")
pytest.importorskip("transformers")

H = 4
#: from models/falcon/modeling_falcon.py (transformers 5.24): FalconDecoderLayer's ``mlp_layernorm_out =
#: attention_layernorm_out`` under parallel_attn, ``mlp_output += attention_output``; FalconAttention's one kv
#: head under multi_query; bias False, exact GELU, rotate_half, tied lm_head (not read from the plugin)
FALCON7B = preset("nanogpt").replace(residual="parallel_shared", attn_bias=False, mlp_bias=False, positions="none",
                                     rotary="half", empty_query="uniform", kv_group=H)
#: within the plugin's limits (H = 4, d_e = H·d_attn, d_attn = d_mid), d_attn = 4: two RoPE pairs
SIZES = {"H": H, "d_e": 16, "d_attn": 4, "d_mid": 4, "d_mlp": 5, "ell": 4}
MODEL_SIZES = {**SIZES, "N_V": 7, "ell_max": 5, "L": 2}
ALGORITHMS = ["padded_causal_self_attention", "gpt2_layer", "padded_d_transformer", "cached_decoding"]


def _case(algorithm: str, declared):
    if algorithm == "padded_causal_self_attention":
        sizes = {k: v for k, v in SIZES.items() if k != "d_mlp"}
        return Case.build(algorithm, sizes, declared, seed=1, given={"pad": np.ones(4, dtype=bool)})
    if algorithm == "gpt2_layer":
        return Case.build(algorithm, SIZES, declared, seed=1)
    given = {"x": np.array([3, 0, 5, 1])} | ({"n_prefill": np.array(1)} if algorithm == "cached_decoding" else
                                             {"pad": np.ones(4, dtype=bool)})
    return Case.build(algorithm, MODEL_SIZES, declared, seed=1, given=given)


def _declared(name: str, algorithm: str):
    sdpa = name.endswith("-sdpa") and algorithm.startswith("padded_")
    return FALCON7B.replace(empty_query="zeros") if sdpa else FALCON7B  # torch's CPU kernel: zero weights


@pytest.mark.parametrize("name", ["transformers-falcon-7b", "transformers-falcon-7b-sdpa"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_librarys_falcon_7b_conforms_under_its_set(name, algorithm):
    declared = _declared(name, algorithm)
    assert list(load(name).variants_for(algorithm)) == [declared]
    assert findings_of(name, _case(algorithm, declared), declared) == []


@pytest.mark.parametrize("algorithm", ["padded_causal_self_attention", "cached_decoding"])
def test_the_librarys_falcon_7b_has_one_kv_head(algorithm):
    """Drawn under two kv heads, called with the first alone (the library's one): judged against the two."""
    impl = load("transformers-falcon-7b")
    wrong = FALCON7B.replace(kv_group=2)
    case = _case(algorithm, wrong)
    p = rounded(case, "float32")
    assert any("kv_heads.1." in k for k in p.params)
    one = {k: v for k, v in p.params.items() if "kv_heads.1." not in k}
    got = call(impl, case.entry, p.inputs, one, hyper=case.hyper, variant=FALCON7B, dtype="float32", device="cpu")
    right = reference(case.entry, p.inputs, one, hyper=case.hyper, variant=FALCON7B, dtype="float32")
    assert judge(case.entry, got, right).ok
    assert not judge(case.entry, got, reference(case.entry, p.inputs, p.params, hyper=case.hyper, variant=wrong,
                                                dtype="float32")).ok


def test_the_librarys_falcon_7b_layer_is_parallel_from_one_norm():
    impl = load("transformers-falcon-7b")
    case = _case("gpt2_layer", FALCON7B)
    p = rounded(case, "float32")
    got = call(impl, case.entry, p.inputs, p.params, hyper=case.hyper, variant=FALCON7B, dtype="float32",
               device="cpu")
    sequential = FALCON7B.replace(residual="sequential")
    params = {**p.params, "gamma2": p.params["gamma1"], "beta2": p.params["beta1"]}
    assert not judge(case.entry, got, reference(case.entry, p.inputs, params, hyper=case.hyper, variant=sequential,
                                                dtype="float32")).ok
