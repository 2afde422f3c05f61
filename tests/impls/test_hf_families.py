"""Hugging Face families beyond GPT-2, BERT and Llama, each a plugin with an ``-sdpa`` twin:
``transformers-mistral`` (MistralForCausalLM, MistralAttention: a sliding window),
``transformers-qwen2`` (Qwen2ForCausalLM, Qwen2Attention: q/k/v biases without an output bias),
``transformers-qwen2-window`` (the same with use_sliding_window on every layer),
``transformers-gpt-neox`` (GPTNeoXForCausalLM, GPTNeoXAttention, GPTNeoXLayer: parallel residual,
partial rotary, fused qkv) and ``transformers-gemma`` (GemmaForCausalLM, GemmaAttention: gains
1 + γ, embeddings × √d_e, GeGLU, its own head width).

Always on, one case per family (a few CPU-seconds): the adapter's weights give the library's
module the spec's output under the declared set, judged by the harness at float32 with its
derived tolerance, on a case that shows the family's convention (the spec without it is judged
wrong there), so a pass means the library applied it.

Behind ``FTSPEC_ALL_LIBRARIES=1`` (the heavy-library switch; ``make bench`` certifies them): a few
harness draws of every entry of the four plugins at float32 and bfloat16, and a wrong declaration
of each family's own switch (a window one off either way, biases at every projection) must fail,
with the diagnosis naming that switch and the library's true value.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ftspec.conformance.core.case import Case  # noqa: E402
from ftspec.conformance.session.commands import Settings, run  # noqa: E402
from ftspec.impls.discovery import load  # noqa: E402
from ftspec.spec.variants import preset  # noqa: E402

from .cases import findings_of  # noqa: E402

HEAVY = bool(os.environ.get("FTSPEC_ALL_LIBRARIES"))
heavy = pytest.mark.skipif(not HEAVY, reason="library certifications: FTSPEC_ALL_LIBRARIES=1 (make bench runs them)")

#: The sets each family is declared under, written out from the library's sources (transformers
#: 5.24: MistralConfig.sliding_window and masking_utils.sliding_window_overlay; Qwen2Attention's
#: q/k/v Linears with bias=True, o_proj bias=False, and Qwen2Config's sliding window (every layer
#: "sliding_attention" under max_window_layers = 0); GPTNeoXConfig's use_parallel_residual and
#: partial_rotary_factor 0.25; GemmaRMSNorm's 1 + weight, GemmaTextScaledWordEmbedding's
#: √hidden_size, gelu_pytorch_tanh), not read from the plugins.
LLAMA = preset("llama").replace(kv_group=2)
SETS = {
    "mistral": LLAMA.replace(window=2),
    "qwen2": LLAMA.replace(attn_bias=True, attn_bias_at="qkv"),
    "qwen2-window": LLAMA.replace(attn_bias=True, attn_bias_at="qkv", window=2),
    "gpt-neox": preset("gpt-neox"),
    "gemma": preset("gemma").replace(kv_group=2),
}
ENTRIES = ("padded_d_transformer", "cached_decoding", "padded_causal_self_attention")
_ATTENTION = ("padded_causal_self_attention", dict(H=4, d_e=8, d_attn=2, d_mid=2, ell=5))
#: per family: the entry and sizes of the always-on case, and a change of the declared set the
#: case shows (None: none checked). Mistral: ℓ = 5 > W + 1, keys fall out of the window; GPT-NeoX:
#: d_attn = 8 turns 2 of 8 rows, not all 8; Gemma: d_e = 6 is not H·d_attn = 8 (its own head width)
#: and the whole model runs every RMSNorm's gain.
CHEAP = {
    "mistral": (*_ATTENTION, dict(window=0)),
    "qwen2": (*_ATTENTION, None),
    "qwen2-window": (*_ATTENTION, dict(window=0)),
    "gpt-neox": ("padded_causal_self_attention", dict(H=2, d_e=16, d_attn=8, d_mid=8, ell=4),
                 dict(rotary_fraction=1.0)),
    "gemma": ("padded_d_transformer", dict(N_V=7, ell_max=6, L=1, H=2, d_e=6, d_attn=4, d_mid=4, d_mlp=5, ell=4),
              dict(norm_gain="gamma")),
}


@pytest.mark.parametrize("family", SETS)
def test_the_library_gives_the_spec_output(family: str) -> None:
    """One case through the library's own module with ftspec's weights loaded: no finding under
    the declared set, eager and sdpa, every token real. Where ``CHEAP`` names a change, the same
    output judged under it fails, so the case shows the family's convention (the window, the
    rotary fraction, the gain 1 + γ) and a pass means the library applied it. Qwen2's biases
    are drawn non-zero, so the q/k/v biases are in the output."""
    variant = SETS[family]
    algorithm, hyper, contrast = CHEAP[family]
    names = (f"transformers-{family}", f"transformers-{family}-sdpa")
    for name in names:
        assert load(name).variants_for(algorithm)[0].replace(empty_query="uniform") == variant
    case = Case.build(algorithm, hyper, variant, seed=5)
    case.inputs["pad"] = np.ones(hyper["ell"], dtype=bool)  # no empty query: eager and sdpa agree
    if family.startswith("qwen2"):
        assert all(np.any(v != 0) for k, v in case.params.items() if k.rsplit(".", 1)[-1] in ("b_q", "b_k", "b_v"))
    for name in names:
        assert findings_of(name, case, variant) == [], name
    if contrast is not None:
        assert findings_of(names[0], case, variant.replace(**contrast))


# -- heavy: behind FTSPEC_ALL_LIBRARIES ------------------------------------------------------------

def _settings(tmp_path, **kw) -> Settings:
    return Settings(profile="quick", fixtures="none", in_process=True, case_dir=str(tmp_path / "cases"), **kw)


@heavy
@pytest.mark.parametrize("family", SETS)
def test_family_entries_conform(tmp_path, family: str) -> None:
    """A few harness draws of every entry, eager and sdpa, at float32 and bfloat16."""
    names, dtypes = [f"transformers-{family}", f"transformers-{family}-sdpa"], ("float32", "bfloat16")
    result = run(names, _settings(tmp_path, examples=3, dtypes=dtypes))
    assert not result.broken
    cells = {(c.impl, c.algorithm, c.dtype): c for c in result.cells if c.status != "not implemented"}
    entries = ENTRIES + (("gpt2_layer",) if family == "gpt-neox" else ())
    assert set(cells) == {(n, a, d) for n in names for a in entries for d in dtypes}
    bad = {k: (c.status, c.note) for k, c in cells.items() if c.status != "pass" or c.examples < 3}
    assert not bad


#: (plugin, entry, the wrong declaration, the library's true value of that switch[, least sizes]).
#: GPT-NeoX's rotary fraction: under a declared 1/2 the harness draws d_attn a multiple of 4, and at
#: d_attn = 4 the library's int(4 · 0.25) = 1 still rotates one pair (one frequency, cos/sin
#: cat(freqs, freqs) two rows wide), the 2 rows the spec's ⌊4 · 0.5⌋ gives: only d_attn ≥ 8 tells
#: the two apart. A window W and W + 1 differ from ℓ = W + 2 on (the harness draws ℓ up to that
#: bound, not from it).
WRONG = {
    "mistral-window-plus-one": ("transformers-mistral", "padded_causal_self_attention", {"window": 3}, 2,
                                {"ell": 4}),
    "mistral-window-minus-one": ("transformers-mistral-sdpa", "padded_d_transformer", {"window": 1}, 2, {"ell": 3}),
    "qwen2-window-plus-one": ("transformers-qwen2-window-sdpa", "padded_d_transformer", {"window": 3}, 2, {"ell": 4}),
    "qwen2-bias-everywhere": ("transformers-qwen2", "padded_causal_self_attention", {"attn_bias_at": "all"}, "qkv"),
    "neox-sequential": ("transformers-gpt-neox", "gpt2_layer", {"residual": "sequential"}, "parallel"),
    "neox-rotary-half": ("transformers-gpt-neox-sdpa", "padded_causal_self_attention", {"rotary_fraction": 0.5}, 0.25,
                         {"d_attn": 8}),
    "gemma-gain-gamma": ("transformers-gemma", "padded_d_transformer", {"norm_gain": "gamma"}, "one_plus_gamma"),
    "gemma-no-embedding-scale": ("transformers-gemma-sdpa", "padded_d_transformer", {"embedding_scale": "one"},
                                 "sqrt_d_e"),
}


@heavy
@pytest.mark.parametrize("label", WRONG)
def test_a_wrong_declaration_is_caught(tmp_path, label: str) -> None:
    """Each family's own switch declared wrong fails the entry, and the diagnosis finds the
    library's own value of that switch as the convention the output matches: a window one off
    (W + 1 or W − 1 for the library's W = 2), Qwen2's biases declared on every projection,
    GPT-NeoX's residual declared sequential or its rotary fraction 0.5, Gemma's gain γ (the
    1 + γ missing) or its embeddings unscaled."""
    name, algorithm, wrong, truth, *least = WRONG[label]
    impl = load(name)
    declared = impl.variants_for(algorithm)[0].replace(**wrong)
    limits = dataclasses.replace(impl.limits_for(algorithm), minimum=least[0] if least else {})
    liar = dataclasses.replace(impl, name=f"{name}-wrong", variants={**impl.declared_variants(), algorithm: [declared]},
                               limits={**impl.limits, algorithm: limits})
    assert not liar.problems()
    result = run([liar], _settings(tmp_path, examples=3, algorithms=(algorithm,), dtypes=("float32",)))
    (cell,) = [c for c in result.cells if c.algorithm == algorithm]
    assert cell.status == "fail", (cell.status, cell.note)
    (switch,) = wrong
    diagnosis = cell.failure.diagnosis if cell.failure else None
    assert diagnosis is not None
    assert {switch: truth} in [m["changes"] for m in diagnosis["matches"]], diagnosis["matches"]
