"""The ``transformers-falcon-7b`` and ``-sdpa`` plugins (Hugging Face transformers 5.24's FalconAttention,
FalconDecoderLayer and FalconForCausalLM in the old decoder architecture, FalconConfig's defaults:
multi_query, one input_layernorm) on one drawn case per entry at float32, H = 3 and 5 (no kv_group ≤ 4 states
one kv head at either): judged conformant under docs/spec.md's Falcon-7B written out here,
``nanogpt+residual=parallel_shared,attn_bias=False,mlp_bias=False,positions=none,rotary=half,
empty_query=uniform,kv_heads=one``, and not conformant against the same set with more key/value heads: two
(kv_group 2 at H = 4: heads 2 and 3 given a second kv head, which the library, with one, never reads) or one
per query head (grouped, kv_group 1, at H = 3: the library reads head 0's keys and values for all three), nor
with the layer's two sublayers in sequence (pre-LN, the shared norm's γ¹, β¹ copied to γ², β²). A declared
kv head per query head is refused by the plugin's weights. The full certification (seeds 1 and 2) is
``ftspec certify transformers-falcon-7b`` (docs/libraries.md "Qwen3, Phi-3, GPT-J, OPT and Falcon").
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

#: from models/falcon/modeling_falcon.py (transformers 5.24): FalconDecoderLayer's ``mlp_layernorm_out =
#: attention_layernorm_out`` under parallel_attn, ``mlp_output += attention_output``; FalconAttention's one kv
#: head under multi_query; bias False, exact GELU, rotate_half, tied lm_head (not read from the plugin)
FALCON7B = preset("nanogpt").replace(residual="parallel_shared", attn_bias=False, mlp_bias=False, positions="none",
                                     rotary="half", empty_query="uniform", kv_heads="one")
ALGORITHMS = ["padded_causal_self_attention", "gpt2_layer", "padded_d_transformer", "cached_decoding"]


def _sizes(H: int) -> dict[str, int]:
    """Within the plugin's limits (d_e = H·d_attn, d_attn = d_mid), d_attn = 4: two RoPE pairs."""
    return {"H": H, "d_e": 4 * H, "d_attn": 4, "d_mid": 4, "d_mlp": 5, "ell": 4}


def _case(algorithm: str, declared, H: int = 3):
    sizes = _sizes(H)
    if algorithm == "padded_causal_self_attention":
        sizes = {k: v for k, v in sizes.items() if k != "d_mlp"}
        return Case.build(algorithm, sizes, declared, seed=1, given={"pad": np.ones(4, dtype=bool)})
    if algorithm == "gpt2_layer":
        return Case.build(algorithm, sizes, declared, seed=1)
    given = {"x": np.array([3, 0, 5, 1])} | ({"n_prefill": np.array(1)} if algorithm == "cached_decoding" else
                                             {"pad": np.ones(4, dtype=bool)})
    return Case.build(algorithm, {**sizes, "N_V": 7, "ell_max": 5, "L": 2}, declared, seed=1, given=given)


def _declared(name: str, algorithm: str):
    sdpa = name.endswith("-sdpa") and algorithm.startswith("padded_")
    return FALCON7B.replace(empty_query="zeros") if sdpa else FALCON7B  # torch's CPU kernel: zero weights


@pytest.mark.parametrize("name", ["transformers-falcon-7b", "transformers-falcon-7b-sdpa"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_librarys_falcon_7b_conforms_under_its_set(name, algorithm):
    declared = _declared(name, algorithm)
    assert list(load(name).variants_for(algorithm)) == [declared]
    assert findings_of(name, _case(algorithm, declared), declared) == []


@pytest.mark.parametrize("H", [5])
def test_the_librarys_falcon_7b_conforms_at_more_heads_than_a_drawn_group(H):
    assert findings_of("transformers-falcon-7b", _case("gpt2_layer", FALCON7B, H), FALCON7B) == []


def _one_kv_head(params: dict, H: int) -> dict:
    """The parameters with head 0's keys' and values' maps as the one kv head (``kv_heads.0``), the
    other heads' own dropped: what a multi-query model is given of a set with a kv head per query head."""
    out = {}
    for k, v in params.items():
        prefix, _, rest = k.rpartition("heads.")
        h, _, leaf = rest.partition(".")
        if prefix.endswith("kv_") or not h.isdigit() or leaf not in ("W_k", "W_v"):
            out[k] = v
        elif h == "0":
            out[f"{prefix}kv_heads.0.{leaf}"] = v
    return out


@pytest.mark.parametrize("wrong, H", [(FALCON7B.replace(kv_heads="grouped", kv_group=2), 4),
                                      (FALCON7B.replace(kv_heads="grouped"), 3)])
@pytest.mark.parametrize("algorithm", ["padded_causal_self_attention", "cached_decoding"])
def test_the_librarys_falcon_7b_has_one_kv_head(algorithm, wrong, H):
    """Drawn under more kv heads, called with the first alone (the library's one): judged against them all."""
    impl = load("transformers-falcon-7b")
    case = _case(algorithm, wrong, H)
    p = rounded(case, "float32")
    if wrong.kv_group == 2:
        assert any("kv_heads.1." in k for k in p.params)
        one = {k: v for k, v in p.params.items() if "kv_heads.1." not in k}
    else:
        assert not any("kv_heads." in k for k in p.params)
        one = _one_kv_head(p.params, H)
    got = call(impl, case.entry, p.inputs, one, hyper=case.hyper, variant=FALCON7B, dtype="float32", device="cpu")
    right = reference(case.entry, p.inputs, one, hyper=case.hyper, variant=FALCON7B, dtype="float32")
    assert judge(case.entry, got, right).ok
    assert not judge(case.entry, got, reference(case.entry, p.inputs, p.params, hyper=case.hyper, variant=wrong,
                                                dtype="float32")).ok


def test_the_librarys_falcon_7b_refuses_a_declared_kv_head_per_query_head():
    """Declared grouped with kv_group 1 (every head its own keys): the plugin's weights refuse, not guess."""
    impl = load("transformers-falcon-7b")
    wrong = FALCON7B.replace(kv_heads="grouped")
    case = _case("gpt2_layer", wrong)
    p = rounded(case, "float32")
    with pytest.raises(ValueError, match="one key/value head"):
        call(impl, case.entry, p.inputs, p.params, hyper=case.hyper, variant=wrong, dtype="float32", device="cpu")


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
