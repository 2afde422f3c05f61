"""The ``transformers-gemma3`` and ``transformers-gemma3-sdpa`` plugins (Hugging Face transformers 5.24's
Gemma3DecoderLayer and Gemma3ForCausalLM) on one drawn case per entry at float32: judged conformant
under the sets written out here from the library's source (docs/spec.md's Gemma 3, ``gemma+
norm_placement=sandwich,qk_norm=rms,rope_base=1000000.0`` for the lone layer, built global, and for
the two-layer models ``+window=2,global_every=2,rope_local_base=10000.0``: Gemma3TextConfig's
sliding_window_pattern rule at 2, a sliding layer 0 and a full layer 1), and not conformant under a
declaration that drops one of Gemma 3's conventions: no QK-norm (the parameters less γ_q, γ_k), QK-norm
gains γ in place of 1 + γ, pre-LN in place of the sandwich, the global base in the local layer
(rope_local_base 0), every layer local (global_every 0), the local base everywhere (rope_base 10000).
Each is a check that can fail: the library applies the convention, and the search has something to
tell apart. The full certification (quick profile, seeds 1 and 2) is ``ftspec certify
transformers-gemma3`` (docs/libraries.md "Gemma 3").
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

#: written out from models/gemma3/modeling_gemma3.py and configuration_gemma3.py (transformers 5.24), not
#: read from the plugin: Gemma3DecoderLayer's input_layernorm, post_attention_layernorm,
#: pre_feedforward_layernorm, post_feedforward_layernorm (the sandwich); Gemma3Attention's q_norm, k_norm
#: (Gemma3RMSNorm(head_dim): 1 + w) before apply_rotary_pos_emb; default_theta {"global": 1e6, "local":
#: 1e4}; two kv heads' worth of grouping (kv_group 2)
LAYER = preset("gemma").replace(norm_placement="sandwich", qk_norm="rms", rope_base=1000000.0, kv_group=2)
MODEL = LAYER.replace(window=2, global_every=2, rope_local_base=10000.0)
#: within the plugin's limits (d_e = H·d_attn, d_attn = d_mid); H = 4 over 2 kv heads, d_attn = 4 (two
#: RoPE pairs); two layers and ℓ = 4, so that a key two places back is in layer 1's (full) view and out of
#: layer 0's window of 2, and the local layer's base shows at positions up to 3
SIZES = {"H": 4, "d_e": 16, "d_attn": 4, "d_mid": 4, "d_mlp": 5, "ell": 4}
MODEL_SIZES = {**SIZES, "N_V": 7, "ell_max": 5, "L": 2}
TOKENS = np.array([3, 0, 5, 1])
QK_GAINS = ("gamma_q", "gamma_k")

#: (label, algorithm, the wrong declaration, the parameters it takes: "all" or less the QK-norm gains or
#: the output norms' gains)
WRONG = [
    ("no QK-norm", "gpt2_layer", LAYER.replace(qk_norm="none"), "no_qk"),
    ("pre-LN", "gpt2_layer", LAYER.replace(norm_placement="pre"), "no_out"),
    ("no QK-norm", "padded_d_transformer", MODEL.replace(qk_norm="none"), "no_qk"),
    ("global base in the local layers", "padded_d_transformer", MODEL.replace(rope_local_base=0.0), "all"),
    ("the local base in every layer", "padded_d_transformer", MODEL.replace(rope_base=10000.0, rope_local_base=0.0),
     "all"),
    ("every layer local", "cached_decoding", MODEL.replace(global_every=0, rope_local_base=0.0), "all"),
    ("global base in the local layers", "cached_decoding", MODEL.replace(rope_local_base=0.0), "all"),
]


def _case(algorithm: str, declared):
    if algorithm == "gpt2_layer":
        return Case.build(algorithm, SIZES, declared, seed=1)
    # distinct tokens: under one token repeated every key has the same value, which no window changes; no
    # padding: a left-padded sequence of one token attends to itself alone, whatever its window and bases
    given = {"x": TOKENS} | ({"n_prefill": np.array(1)} if algorithm == "cached_decoding" else
                             {"pad": np.ones(len(TOKENS), dtype=bool)})
    return Case.build(algorithm, MODEL_SIZES, declared, seed=1, given=given)


@pytest.mark.parametrize("name", ["transformers-gemma3", "transformers-gemma3-sdpa"])
@pytest.mark.parametrize("algorithm", ["gpt2_layer", "padded_d_transformer", "cached_decoding"])
def test_the_librarys_gemma3_conforms_under_the_sets_written_from_its_source(name, algorithm):
    from ftspec.impls.discovery import load

    declared = LAYER if algorithm == "gpt2_layer" else MODEL
    if name.endswith("-sdpa") and algorithm.startswith("padded_"):
        declared = declared.replace(empty_query="zeros")  # torch's CPU kernel: zero weights for a keyless query
    assert declared in load(name).variants_for(algorithm)
    assert findings_of(name, _case(algorithm, declared), declared) == []


@pytest.mark.parametrize("label, algorithm, wrong, params", WRONG, ids=[f"{r[1]}: {r[0]}" for r in WRONG])
def test_the_librarys_gemma3_fails_without_one_of_its_conventions(label, algorithm, wrong, params):
    from ftspec.impls.hf import implementation_gemma3 as impl

    declared = LAYER if algorithm == "gpt2_layer" else MODEL
    case = _case(algorithm, declared)
    p = rounded(case, "float32")
    got = call(impl, case.entry, p.inputs, p.params, hyper=case.hyper, variant=declared, dtype="float32",
               device="cpu")
    keep = {"all": lambda k: True, "no_qk": lambda k: not k.endswith(QK_GAINS),
            "no_out": lambda k: not k.endswith("_out")}[params]
    given = {k: v for k, v in p.params.items() if keep(k)}
    assert len(given) < len(p.params) or params == "all"
    ref = reference(case.entry, p.inputs, given, hyper=case.hyper, variant=wrong, dtype="float32")
    assert not judge(case.entry, got, ref).ok, label
