"""Hugging Face families Qwen3, Phi-3, GPT-J, OPT and Falcon, each a plugin with an ``-sdpa`` twin:
``transformers-qwen3`` (Qwen3ForCausalLM, Qwen3DecoderLayer: QK-norm), ``transformers-phi3``
(Phi3ForCausalLM, Phi3Attention, Phi3DecoderLayer: fused qkv_proj and gate_up_proj),
``transformers-gpt-j`` (GPTJForCausalLM, GPTJAttention, GPTJBlock: one shared LayerNorm, adjacent
pairs on a quarter of each head) and ``transformers-opt`` (OPTForCausalLM, OPTAttention,
OPTDecoderLayer: learned positions read at an offset of 2, ReLU, the scale on the query) and
``transformers-falcon`` (FalconForCausalLM, FalconAttention, FalconDecoderLayer in the new decoder
architecture with two norms: parallel residual, grouped query_key_value).

Always on and cheap (in-process, one case or three draws of one entry at float32 each):

- one case per family through the library's module, eager and sdpa, passes under the set written
  out here from the library's source, and fails under a set without the family's convention, so a
  pass means the library applied it and the adapter's layout is right;
- per family, one wrong declaration of a convention the plugin fixes is caught (the harness's
  judgement has findings) and named (the diagnosis on that case matches the library's true value),
  on one case rather than a search: a search's distinct-failure hunt and divergence walk cost
  10-25 CPU-seconds a declaration here.

The certifications themselves (``ftspec certify transformers-<family> --profile quick``, seeds 1
and 2) are recorded in docs/libraries.md.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ftspec.conformance.core.case import Case  # noqa: E402
from ftspec.conformance.core.examining import precision_of  # noqa: E402
from ftspec.conformance.forensics.diagnosis import diagnose  # noqa: E402
from ftspec.impls.discovery import load  # noqa: E402
from ftspec.spec.variants import preset  # noqa: E402

from .cases import findings_of, outputs_of  # noqa: E402

#: The sets each family is declared under, written out from the library's sources (transformers 5.24:
#: Qwen3Attention's q_norm/k_norm = Qwen3RMSNorm(head_dim) before apply_rotary_pos_emb; Phi3Config's
#: rms_norm_eps 1e-5; GPTJBlock's one ln_1 and ``attn_output + feed_forward_hidden_states + residual``,
#: rotate_every_two on rotary_dim = head_dim/4, gelu_new, no attention biases, lm_head with a bias;
#: OPTDecoderLayer's pre-LN with ReLU, ``q_proj(x) * scaling``, the tied lm_head) and docs/spec.md's
#: compositions, not read from the plugins.
LLAMA = preset("llama").replace(kv_group=2)
SETS = {
    "qwen3": LLAMA.replace(qk_norm="rms", rope_base=1000000.0),
    "phi3": LLAMA.replace(epsilon=1e-5),
    "gpt-j": preset("gpt-neox").replace(residual="parallel_shared", activation="gelu_tanh", rotary="interleaved",
                                        attn_bias=False, logit_bias=True),
    "opt": preset("hf-gpt2").replace(activation="relu", scale_placement="query", empty_query="uniform"),
    "falcon": preset("nanogpt").replace(residual="parallel", attn_bias=False, mlp_bias=False, positions="none",
                                        rotary="half", empty_query="uniform", kv_group=2),
}
_LAYER = dict(H=2, d_e=16, d_attn=8, d_mid=8, d_mlp=5, ell=5)
#: per family: the entry and sizes of the always-on case, and a change of the declared set the case
#: shows. Qwen3: its layer with the QK-norm gains as 1 + γ (Gemma 3's), which every norm of the layer
#: reads; Phi-3: its layer, H = 4 over 2 kv heads, so the fused qkv_proj's q, k and v slices have
#: unequal widths and a strided kv order differs from the consecutive one, and the fused gate_up_proj's
#: halves (gate, then up) are both read; GPT-J: d_attn = 16, four rows of each head
#: rotated in two pairs, where a half-split pairing differs from the adjacent one (at d_attn = 8 the
#: one pair (0, 1) is both); OPT: the whole model, ℓ = 5 positions
#: of ℓ_max = 6 read (a wrong offset reads other rows), ReLU against exact GELU; Falcon: its layer, H = 4
#: over 2 kv heads, so the grouped query_key_value layout (each group's queries, then its k and v) is
#: read and a strided kv order differs.
CHEAP = {
    "qwen3": ("gpt2_layer", dict(_LAYER, d_e=6), dict(norm_gain="one_plus_gamma")),
    "phi3": ("gpt2_layer", dict(H=4, d_e=8, d_attn=2, d_mid=2, d_mlp=5, ell=4), dict(kv_order="strided")),
    "gpt-j": ("gpt2_layer", dict(H=1, d_e=16, d_attn=16, d_mid=16, d_mlp=4, ell=4), dict(rotary="half")),
    "opt": ("d_transformer", dict(N_V=7, ell_max=6, L=1, H=2, d_e=8, d_attn=4, d_mid=4, d_mlp=5, ell=5),
            dict(activation="gelu_erf")),
    "falcon": ("gpt2_layer", dict(H=4, d_e=8, d_attn=2, d_mid=2, d_mlp=5, ell=4), dict(kv_order="strided")),
}


@pytest.mark.parametrize("family", SETS)
def test_the_library_gives_the_spec_output(family: str) -> None:
    """One case through the library's own module with ftspec's weights loaded: no finding under the
    declared set, eager and sdpa; the same output judged under ``CHEAP``'s change fails, so the case
    shows the family's convention (QK-norm's gain γ, the kv heads' order inside the fused qkv_proj,
    GPT-J's adjacent pairs, OPT's ReLU and learned positions). The QK-norm gains are drawn away from
    1 and from each other, so the library's norms are applied with them."""
    variant = SETS[family]
    algorithm, hyper, contrast = CHEAP[family]
    names = (f"transformers-{family}", f"transformers-{family}-sdpa")
    for name in names:
        declared = load(name).variants_for(algorithm)[0]
        assert declared.replace(empty_query=variant.empty_query) == variant, name
    case = Case.build(algorithm, hyper, variant, seed=5)
    if "pad" in case.inputs:
        case.inputs["pad"] = np.ones(hyper["ell"], dtype=bool)  # no empty query: eager and sdpa agree
    if family == "qwen3":
        assert not np.allclose(case.params["attn.gamma_q"], case.params["attn.gamma_k"])
    for name in names:
        assert findings_of(name, case, variant) == [], name
    assert findings_of(names[0], case, variant.replace(**contrast))


#: (plugin, entry, sizes, the wrong declaration, the library's true value of that switch), each on
#: a case the two values differ on. Qwen3: QK-norm (and every norm) gains declared 1 + γ (Gemma 3's);
#: Phi-3: the kv heads read strided (H = 4 over G = 2: query head 1 reads kv head 0, strided 1);
#: GPT-J: the half-split pairing (d_attn = 16: two pairs among the 4 rotated rows), or half of each
#: head rotated (d_attn = 8: 4 rows, not 2); OPT: post-LN (OPT-350m's, not the default's), and its padded model's
#: positions counted by index (``pad_positions``; transformers 5.24 OPTLearnedPositionalEmbedding counts them
#: among the real tokens, ``PADS``); Falcon: its
#: attention and MLP declared one after the other (Falcon's parallel_attn=False). None of
#: these switches is read by the plugin, so the call is what a run under the wrong set makes.
WRONG = {
    "qwen3-qk-gain": ("transformers-qwen3", "gpt2_layer", dict(_LAYER, d_e=6), {"norm_gain": "one_plus_gamma"},
                      "gamma"),
    "phi3-kv-strided": ("transformers-phi3-sdpa", "padded_causal_self_attention",
                        dict(H=4, d_e=8, d_attn=2, d_mid=2, ell=4), {"kv_order": "strided"}, "consecutive"),
    "gpt-j-half-pairs": ("transformers-gpt-j", "gpt2_layer", dict(H=1, d_e=16, d_attn=16, d_mid=16, d_mlp=4, ell=4),
                         {"rotary": "half"}, "interleaved"),
    "gpt-j-rotary-half": ("transformers-gpt-j-sdpa", "padded_causal_self_attention",
                          dict(H=2, d_e=16, d_attn=8, d_mid=8, ell=5), {"rotary_fraction": 0.5}, 0.25),
    "opt-post-ln": ("transformers-opt", "gpt2_layer", dict(H=2, d_e=8, d_attn=4, d_mid=4, d_mlp=5, ell=4),
                    {"norm_placement": "post"}, "pre"),
    "falcon-sequential": ("transformers-falcon-sdpa", "gpt2_layer", dict(H=2, d_e=8, d_attn=4, d_mid=4, d_mlp=5, ell=4),
                          {"residual": "sequential"}, "parallel"),
    "opt-pad-index": ("transformers-opt", "padded_d_transformer",
                      dict(N_V=7, ell_max=6, L=1, H=2, d_e=8, d_attn=4, d_mid=4, d_mlp=5, ell=5),
                      {"pad_positions": "index"}, "real"),
}
#: the padding of a case where the wrong value differs (else none: every position real): OPT's positions
#: counted by index, with padding before a real token (position 0) and between two (position 2)
PADS = {"opt-pad-index": [False, True, False, True, True]}


@pytest.mark.parametrize("label", WRONG)
def test_a_wrong_declaration_is_caught(label: str) -> None:
    """A convention the plugin fixes, declared wrong: the harness's judgement of the library's output
    under it has findings (caught), and the diagnosis, run on that case as the harness runs it on a
    failing cell's shrunk case, finds the library's own value of that switch among the sets the output
    matches (named). The true declaration is the plugin's own (``SETS``, checked above)."""
    name, algorithm, hyper, wrong, truth = WRONG[label]
    impl = load(name)
    declared = impl.variants_for(algorithm)[0]
    (switch,) = wrong
    assert getattr(declared, switch) == truth
    liar = declared.replace(**wrong)
    case = dataclasses.replace(Case.build(algorithm, hyper, liar, seed=7), variant=liar)
    if "pad" in case.inputs:
        case.inputs["pad"] = np.array(PADS[label]) if label in PADS else np.ones(hyper["ell"], dtype=bool)
    assert findings_of(name, case, liar)
    diagnosis = diagnose(case.entry, case, outputs_of(name, case), "float32", liar,
                         precision=precision_of(impl, "float32"))
    assert {switch: truth} in [m["changes"] for m in diagnosis.to_dict()["matches"]], diagnosis.to_dict()["matches"]
