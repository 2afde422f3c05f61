"""The ``transformers-bloom`` and ``transformers-mpt`` plugins (Hugging Face transformers 5.24's
BloomAttention, BloomBlock and BloomForCausalLM, BloomConfig's defaults; MptAttention, MptBlock and
MptForCausalLM, MptConfig's defaults; eager only: the library has no sdpa path for either).

Always on and cheap (in-process, one fixed case per entry and dtype):

- one case per entry at float32 and at each lower dtype the plugin declares, H = 3 (not a power of
  two, so ALiBi's slopes include the ones past the power-of-two list) and padding before and between
  real tokens in the padded entries: judged conformant under the sets written out here from
  models/bloom/modeling_bloom.py and models/mpt/modeling_mpt.py (BLOOM's padded model with
  ``pad_positions="real"``, ``build_alibi_tensor``'s positions among the real tokens; MPT's on index
  distances, ``build_mpt_alibi_tensor`` never sees the mask; BLOOM's padded attention, given the ALiBi
  tensor of index positions, under the preset as it stands);
- wrong declarations of conventions the plugins fix (BLOOM: ALiBi, the embedding LayerNorm, the padded
  model's ALiBi positions, the tanh GELU; MPT: positions among the real tokens, the tanh GELU): caught
  (findings) and named (the diagnosis on that case matches the library's own value of the switch);
- the ALiBi slopes of ``_get_alibi_slopes`` against the spec's exponents, and a declared grouped
  set refused by the weights.

With ``FTSPEC_ALL_LIBRARIES=1``, a short search of every entry. The certifications (seeds 1 and 2,
default profile) are recorded in docs/libraries.md "BLOOM and MPT".
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import precision_of, rounded
from ftspec.conformance.forensics.diagnosis import diagnose
from ftspec.impls.discovery import load
from ftspec.spec.position_bias import alibi_exponents
from ftspec.spec.variants import PAPER, preset

from .cases import findings_of, outputs_of

HEAVY = bool(os.environ.get("FTSPEC_ALL_LIBRARIES"))
heavy = pytest.mark.skipif(not HEAVY, reason="library certifications: FTSPEC_ALL_LIBRARIES=1 (make bench runs them)")

NAME = "transformers-bloom"
#: from models/bloom/modeling_bloom.py (transformers 5.24), not read from the plugin: BloomBlock's
#: input_layernorm before the attention and post_attention_layernorm before the MLP (apply_residual_connection_
#: post_layernorm False), nn.LayerNorm at layer_norm_epsilon 1e-5, BloomModel's word_embeddings_layernorm and
#: ln_f, bloom_gelu_forward (tanh), no position table, ``alibi.baddbmm(Q, Kᵀ, alpha=inv_norm_factor)``, the
#: tied lm_head, masked scores at finfo(dtype).min (create_causal_mask's eager mask)
BLOOM = PAPER.replace(epsilon=1e-5, epsilon_placement="inside_root", norm_placement="pre", final_norm="final",
                      embedding_norm=True, activation="gelu_tanh", positions="none", position_bias="alibi",
                      unembedding="tied", empty_query="uniform")
#: BloomModel.forward with an attention mask: ``build_alibi_tensor``'s (attention_mask.cumsum(-1) − 1)·mask
BLOOM_PADDED = BLOOM.replace(pad_positions="real")
#: from models/mpt/modeling_mpt.py (transformers 5.24): no_bias (no bias on any Linear), norm_1, norm_2 and norm_f
#: with ``bias = None``, MptMLP's nn.GELU(approximate="none"), wte straight into the blocks (no embedding norm),
#: ``attention_scores * softmax_scale + position_bias``, ``masked_fill(mask, finfo.min)``; the padded model on
#: index distances (docs/spec.md's bloom+affine=scale,attn_bias=False,mlp_bias=False,activation=gelu_erf,
#: embedding_norm=False)
MPT = BLOOM.replace(affine="scale", attn_bias=False, mlp_bias=False, activation="gelu_erf", embedding_norm=False)
#: each plugin's set for its entries, and for its padded model
SETS = {NAME: (BLOOM, BLOOM_PADDED), "transformers-mpt": (MPT, MPT)}
ALGORITHMS = ("padded_causal_self_attention", "gpt2_layer", "d_transformer", "padded_d_transformer",
              "cached_decoding")
#: within the plugin's limits (d_e = H·d_attn, d_attn = d_mid, d_mlp = 4·d_e); H = 3: slopes 2^-4, 2^-8 and 2^-2
LAYER = {"H": 3, "d_e": 6, "d_attn": 2, "d_mid": 2, "d_mlp": 24, "ell": 5}
MODEL = {**LAYER, "N_V": 7, "ell_max": 6, "L": 2}
#: padding before a real token (position 0) and between two (position 2): index and real positions differ
PAD = np.array([False, True, False, True, True])


def _case(algorithm: str, declared, seed: int = 1) -> Case:
    if algorithm == "padded_causal_self_attention":
        sizes = {k: v for k, v in LAYER.items() if k != "d_mlp"}
        return Case.build(algorithm, sizes, declared, seed=seed, given={"pad": PAD.copy()})
    if algorithm == "gpt2_layer":
        return Case.build(algorithm, LAYER, declared, seed=seed)
    given = {"x": np.array([3, 0, 5, 1, 6])} | ({"n_prefill": np.array(2)} if algorithm == "cached_decoding" else
                                                {} if algorithm == "d_transformer" else {"pad": PAD.copy()})
    return Case.build(algorithm, MODEL, declared, seed=seed, given=given)


@pytest.mark.parametrize("name", SETS)
def test_the_plugin_declares_the_librarys_set(name):
    """The spec's ``bloom`` preset says what the source says (written out above), and each plugin declares
    its set, BLOOM's padded model with its positions among the real tokens."""
    assert preset("bloom") == BLOOM
    impl = load(name)
    assert set(impl.algorithms) == set(ALGORITHMS)
    plain, padded = SETS[name]
    for a in ALGORITHMS:
        assert list(impl.variants_for(a)) == [padded if a == "padded_d_transformer" else plain], a


@pytest.mark.parametrize("name", SETS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_library_conforms_at_each_declared_dtype(name, algorithm):
    impl = load(name)
    declared = impl.variants_for(algorithm)[0]
    assert "float64" not in impl.dtypes_for(algorithm)  # both softmaxes run in float32
    case = _case(algorithm, declared)
    for dtype in impl.dtypes_for(algorithm):
        assert findings_of(name, case, declared, dtype) == [], dtype


#: (plugin, entry, the wrong declaration, the library's own value): BLOOM with no ALiBi on the layer's
#: scores; no embedding LayerNorm on the model (the case then has no γ_emb, β_emb: the plugin loads 1 and 0,
#: the diagnosis fills in the same); the padded model's ALiBi positions by index (``PAD``: padding between
#: real tokens); the exact GELU on the layer's MLP. MPT's padded model with BLOOM's positions among the real
#: tokens; MPT's MLP with the tanh GELU
WRONG = {
    "no-alibi": (NAME, "gpt2_layer", {"position_bias": "none"}, "alibi"),
    "no-embedding-norm": (NAME, "d_transformer", {"embedding_norm": False}, True),
    "pad-index": (NAME, "padded_d_transformer", {"pad_positions": "index"}, "real"),
    "gelu-erf": (NAME, "gpt2_layer", {"activation": "gelu_erf"}, "gelu_tanh"),
    "mpt-pad-real": ("transformers-mpt", "padded_d_transformer", {"pad_positions": "real"}, "index"),
    "mpt-gelu-tanh": ("transformers-mpt", "gpt2_layer", {"activation": "gelu_tanh"}, "gelu_erf"),
}


@pytest.mark.parametrize("label", WRONG)
def test_a_wrong_declaration_is_caught_and_named(label):
    name, algorithm, wrong, truth = WRONG[label]
    impl = load(name)
    (switch,) = wrong
    assert getattr(impl.variants_for(algorithm)[0], switch) == truth
    liar = impl.variants_for(algorithm)[0].replace(**wrong)
    case = dataclasses.replace(_case(algorithm, liar, seed=7), variant=liar)
    assert findings_of(name, case, liar)
    diagnosis = diagnose(case.entry, case, outputs_of(name, case), "float32", liar,
                         precision=precision_of(impl, "float32"))
    assert {switch: truth} in [m["changes"] for m in diagnosis.to_dict()["matches"]], diagnosis.to_dict()["matches"]


def _library_slopes(H: int) -> dict[str, np.ndarray]:
    """Each library's H slopes in float32, as binary64: BLOOM's ``_get_alibi_slopes``, and MPT's read off
    ``build_mpt_alibi_tensor`` at the key one place before the last (its bias there is −m_h)."""
    import torch
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    return {"bloom": _get_alibi_slopes(H, torch.device("cpu")).double().numpy(),
            "mpt": -build_mpt_alibi_tensor(H, 2)[:, 0, 0].double().numpy()}  # (H, 1, 2): m_h·(−1, 0)


def test_the_librarys_alibi_slopes_are_the_specs():
    """Both libraries' slopes against 2^e_h of the spec's exponents: equal bit for bit up to H = 8 (every
    base a power of two with a whole exponent), within float32's rounding of their irrational bases
    beyond (BLOOM's 2^(−4/n) and 2^(−8/n), 2^−½ at n = 8 and 16, raised to whole powers; MPT's 2^(−k/2)),
    and the classic slip 2^(−8(h+1)/H) is neither library's at H = 3."""
    for H in range(1, 33):
        want = np.exp2(np.array(alibi_exponents(H)))
        for library, got in _library_slopes(H).items():
            if H <= 8:
                assert np.array_equal(got, want), (library, H)
            else:
                assert np.allclose(got, want, rtol=(H + 2) * 2.0 ** -24, atol=0), (library, H)
    slip = np.exp2(-8.0 * np.arange(1, 4) / 3)
    assert all(not np.allclose(got, slip) for got in _library_slopes(3).values())


@pytest.mark.parametrize("name", SETS)
def test_the_library_refuses_grouped_kv_heads(name):
    """Declared with two query heads per key/value head: the weights refuse, not guess."""
    impl = load(name)
    wrong = SETS[name][0].replace(kv_group=2)
    case = Case.build("gpt2_layer", {**LAYER, "H": 2, "d_e": 4, "d_mlp": 16}, wrong, seed=1)
    p = rounded(case, "float32")
    with pytest.raises(ValueError, match="one key/value head per query head"):
        call(impl, case.entry, p.inputs, p.params, hyper=case.hyper, variant=wrong, dtype="float32", device="cpu")


@heavy
def test_a_short_search_passes(tmp_path):
    from ftspec.conformance.session.commands import Settings, run

    result = run(list(SETS), Settings(profile="quick", fixtures="none", in_process=True,
                                      case_dir=str(tmp_path / "cases"), examples=5, dtypes=("float32",)))
    assert not result.broken
    cells = [c for c in result.cells if c.status != "not implemented"]
    assert {(c.impl, c.algorithm) for c in cells} == {(n, a) for n in SETS for a in ALGORITHMS}
    assert all(c.status == "pass" for c in cells), [(c.impl, c.algorithm, c.status, c.note) for c in cells]
