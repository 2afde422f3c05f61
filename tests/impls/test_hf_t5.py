"""T5's attention certified alone (spec 2.13: the self-attention entries read ``rel_bias``): ``transformers-t5``
offers self_attention and causal_self_attention through ``T5Attention(config, has_relative_attention_bias=True)``
(Hugging Face transformers 5.24, models/t5/modeling_t5.py: q, k, v, o without bias, ``self.scaling = 1.0``, the
bias table ``relative_attention_bias`` = nn.Embedding(num_buckets, n_heads), bidirectional buckets where
``is_decoder`` is False). On fixed cases at float32 the library's attention conforms under the set written out
here from that source, at T5's 32/128 and at the small bucket pairs; it fails when declared without the bias
(the parameters less the table), and the decoder built with the encoder's bidirectional buckets fails at the
small pairs (at 32/128 and lengths below 9 the two kinds agree on every unmasked key). The library's float32
bucket at a whole-number boundary is one below the spec's real-number one (``spec.position_bias.t5_bucket``'s
decision). The full certification (quick profile, seeds 1 and 2) is ``ftspec certify transformers-t5``
(docs/libraries.md); a short search of it runs under FTSPEC_ALL_LIBRARIES=1. ``transformers-t5-layers`` offers
encoder_layer and decoder_layer through ``T5Block(config, has_relative_attention_bias=True)`` (a stack's first
block) under T5 v1.0's and v1.1's layer sets, also written out here; declared with a LayerNorm (the mean
subtracted), without the bias or post-norm, each fails. The whole model (issue 38): ``transformers-t5`` offers
ed_transformer and padded_ed_transformer through ``T5ForConditionalGeneration`` under T5 v1.0's and v1.1's model
sets, written out here; the model judged against the spec without the tables, with each layer reading a table of
its own, with the decoder reading the encoder's table, or without the head's d_model**-0.5 fails.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.tolerances import reference
from ftspec.spec.position_bias import t5_bucket
from ftspec.spec.variants import PAPER

from .cases import findings_of

HEAVY = bool(os.environ.get("FTSPEC_ALL_LIBRARIES"))
heavy = pytest.mark.skipif(not HEAVY, reason="library certifications: FTSPEC_ALL_LIBRARIES=1 (make bench runs them)")

#: written out from transformers 5.24 models/t5/modeling_t5.py, not read from the plugin: no projection biases,
#: no score scale, the relative bias; T5Config's num_buckets 32 and max_distance 128, and the small pairs
T5 = PAPER.replace(attn_bias=False, attn_scale="none", rel_bias="t5_buckets")
PAIRS = ((32, 128), (6, 5), (8, 10))
ENTRIES = ("self_attention", "causal_self_attention")


def _case(entry: str, v, ell: int = 7, seed: int = 1) -> Case:
    """d_attn = d_mid (T5's d_kv), X with distinct columns."""
    sizes = {"H": 2, "d_e": 5, "d_attn": 3, "d_mid": 3, "ell": ell}
    X = np.random.default_rng(seed).normal(size=(sizes["d_e"], ell))
    return Case.build(entry, sizes, v, seed=seed, given={"X": X})


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("pair", PAIRS, ids=[f"{b}-{d}" for b, d in PAIRS])
def test_the_librarys_attention_conforms_with_its_relative_bias(entry, pair):
    from ftspec.impls.discovery import load

    declared = T5.replace(rel_buckets=pair[0], rel_max_distance=pair[1])
    assert declared in load("transformers-t5").variants_for(entry)
    case = _case(entry, declared)
    assert case.params["rel_bias"].shape == (pair[0], 2)
    assert findings_of("transformers-t5", case, declared) == []


def _judged(fn, entry: str, ran, declared, drop_table: bool = False) -> bool:
    """Whether the output of ``fn`` (run under ``ran``) passes against the spec under ``declared``."""
    from ftspec.impls.discovery import load

    impl = dataclasses.replace(load("transformers-t5"), algorithms={entry: fn})
    case = _case(entry, ran)
    p = rounded(case, "float32")
    got = call(impl, case.entry, p.inputs, p.params, hyper=case.hyper, variant=ran, dtype="float32", device="cpu")
    given = {k: v for k, v in p.params.items() if not (drop_table and k == "rel_bias")}
    ref = reference(case.entry, p.inputs, given, hyper=case.hyper, variant=declared, dtype="float32")
    return judge(case.entry, got, ref).ok


@pytest.mark.parametrize("entry", ENTRIES)
def test_declared_without_the_relative_bias_the_attention_fails(entry):
    from ftspec.impls.hf.t5 import _attention

    v = T5.replace(rel_buckets=6, rel_max_distance=5)
    fn = _attention(entry.startswith("causal"))
    assert _judged(fn, entry, v, v)  # the library's own set passes on the same call
    assert not _judged(fn, entry, v, v.replace(rel_bias="none"), drop_table=True)


def test_the_decoder_with_bidirectional_buckets_fails_at_the_small_pairs():
    """``is_decoder=False`` under the causal mask: T5's encoder buckets in the decoder's attention."""
    from ftspec.impls.hf.t5 import _attention

    wrong = _attention(True, decoder=False)
    for b, d in ((6, 5), (8, 10)):
        v = T5.replace(rel_buckets=b, rel_max_distance=d)
        assert not _judged(wrong, "causal_self_attention", v, v), (b, d)
    # at 32/128 a key before the query takes bucket r < 8 either way, below distance 8: the same weights
    v = T5.replace(rel_buckets=32, rel_max_distance=128)
    assert _judged(wrong, "causal_self_attention", v, v)


def test_the_librarys_float32_bucket_at_a_whole_number_is_one_below_the_spec():
    """num_buckets 17, max_distance 27, causal distance 12: x = (17 − 8)·ln(12/8)/ln(27/8) = 9·ln 1.5/(3·ln 1.5)
    = 3 exactly, bucket 8 + 3 = 11 over the reals; transformers 5.24's float32 quotient falls below 3."""
    import torch
    from transformers.models.t5.modeling_t5 import T5Attention

    assert t5_bucket(-12, False, 17, 27) == 11
    lib = T5Attention._relative_position_bucket(torch.tensor([-12, -11, -13]), bidirectional=False,
                                                num_buckets=17, max_distance=27)
    assert lib.tolist() == [10, 10, 11]  # 11 and 13: the spec's 10 and 11 (x = 2.8, 3.4)
    assert [t5_bucket(r, False, 17, 27) for r in (-11, -13)] == [10, 11]


#: T5 v1.0's layer, written out from transformers 5.24 (T5LayerNorm: ``hidden_states * torch.rsqrt(variance +
#: eps)`` with variance the mean of squares, times the weight: an RMSnorm with γ, ε 1e-6 inside the root;
#: T5LayerSelfAttention and T5LayerFF normalise before their sublayer and add the residual; T5DenseActDense:
#: wo(relu(wi x)), no biases); v1.1's feed_forward_proj "gated-gelu": wo(gelu_new(wi_0 x) ⊙ wi_1 x)
T5_V1_0 = T5.replace(norm="rms_norm", epsilon=1e-6, epsilon_placement="inside_root", affine="scale",
                     norm_placement="pre", activation="relu", mlp_bias=False)
T5_V1_1 = T5_V1_0.replace(mlp="gated", activation="gelu_tanh")
LAYER_SIZES = {"H": 2, "d_e": 4, "d_attn": 3, "d_mid": 3, "d_mlp": 6}


def _layer_case(entry: str, v, seed: int = 1) -> Case:
    ell = {"ell": 5} if entry == "encoder_layer" else {"ell_x": 5, "ell_z": 4}
    return Case.build(entry, {**LAYER_SIZES, **ell}, v, seed=seed)


@pytest.mark.parametrize("entry", ("encoder_layer", "decoder_layer"))
@pytest.mark.parametrize("version", ("v1.0", "v1.1"))
def test_the_librarys_block_conforms(entry, version):
    from ftspec.impls.discovery import load

    for b, d in PAIRS:
        v = (T5_V1_0 if version == "v1.0" else T5_V1_1).replace(rel_buckets=b, rel_max_distance=d)
        assert v in load("transformers-t5-layers").variants_for(entry)
        assert findings_of("transformers-t5-layers", _layer_case(entry, v), v) == [], (b, d)


@pytest.mark.parametrize("entry", ("encoder_layer", "decoder_layer"))
@pytest.mark.parametrize("label, wrong", [("LayerNorm, not T5's RMSnorm", dict(norm="layer_norm")),
                                          ("no relative bias", dict(rel_bias="none")),
                                          ("post-norm", dict(norm_placement="post"))])
def test_the_block_declared_wrong_fails(entry, label, wrong):
    from ftspec.impls.discovery import load

    v = T5_V1_0.replace(rel_buckets=6, rel_max_distance=5)
    impl = load("transformers-t5-layers")
    case = _layer_case(entry, v)
    p = rounded(case, "float32")
    got = call(impl, case.entry, p.inputs, p.params, hyper=case.hyper, variant=v, dtype="float32", device="cpu")
    assert judge(case.entry, got, reference(case.entry, p.inputs, p.params, hyper=case.hyper, variant=v,
                                            dtype="float32")).ok
    given = {k: x for k, x in p.params.items() if not (wrong.get("rel_bias") == "none" and k.endswith("rel_bias"))}
    ref = reference(case.entry, p.inputs, given, hyper=case.hyper, variant=v.replace(**wrong), dtype="float32")
    assert not judge(case.entry, got, ref).ok, label


@heavy
def test_a_short_search_passes_and_a_wrong_declaration_fails(tmp_path):
    from ftspec.conformance.session.commands import Settings, run
    from ftspec.impls.discovery import load
    from ftspec.impls.hf.t5 import _attention

    def settings(**kw):
        return Settings(profile="quick", fixtures="none", in_process=True, case_dir=str(tmp_path / "cases"), **kw)

    result = run(["transformers-t5", "transformers-t5-layers"], settings(examples=5, dtypes=("float32",)))
    assert not result.broken
    cells = [c for c in result.cells if c.status != "not implemented"]
    assert {c.algorithm for c in cells} == set(ENTRIES) | {"encoder_layer", "decoder_layer", "ed_transformer",
                                                           "padded_ed_transformer"}
    assert all(c.status == "pass" for c in cells), [(c.impl, c.algorithm, c.status) for c in cells]
    impl = load("transformers-t5")
    liar = dataclasses.replace(impl, name="transformers-t5-wrong",
                               algorithms={"causal_self_attention": _attention(True, decoder=False)},
                               variants={"causal_self_attention": [T5.replace(rel_buckets=6, rel_max_distance=5)]},
                               limits={"causal_self_attention": impl.limits_for("causal_self_attention")})
    result = run([liar], settings(examples=5, algorithms=("causal_self_attention",), dtypes=("float32",)))
    (cell,) = [c for c in result.cells if c.algorithm == "causal_self_attention"]
    assert cell.status == "fail", (cell.status, cell.note)


# -- the whole model (issue 38): T5ForConditionalGeneration ----------------------------------------------------

#: T5 v1.0's model, written out from transformers 5.24 (T5Stack: no position embeddings, a final T5LayerNorm per
#: stack; T5ForConditionalGeneration: lm_head tied to shared, ``sequence_output * (self.model_dim**-0.5)`` under
#: ``scale_decoder_outputs``, T5Config's default), and v1.1's as 5.24 builds it from tie_word_embeddings=False:
#: no scale, the head still tied (T5Config.__post_init__ sets tie_word_embeddings True)
T5_MODEL = T5_V1_0.replace(final_norm="final", positions="none", unembedding="tied", unembedding_scale="inv_sqrt_d_e")
T5_V1_1_MODEL = T5_V1_1.replace(final_norm="final", positions="none", unembedding="tied")
MODEL_SIZES = {"N_V": 7, "ell_max": 6, "L_enc": 2, "L_dec": 2, "H": 2, "d_e": 4, "d_attn": 3, "d_mid": 3, "d_mlp": 6,
               "ell_z": 5, "ell_x": 5}
TABLES = ("enc_layers.0.attn.rel_bias", "dec_layers.0.self_attn.rel_bias")


def _model_case(entry: str, v, seed: int = 1) -> Case:
    given = {"pad_z": np.array([True, True, False, True, True]),
             "pad_x": np.array([False, True, True, False, True])} if entry.startswith("padded_") else {}
    return Case.build(entry, MODEL_SIZES, v, seed=seed, given=given)


def test_v1_1s_config_gives_a_tied_unscaled_head():
    """What the declarations rest on: T5Config(tie_word_embeddings=False) keeps the head tied, unscaled."""
    from transformers import T5Config, T5ForConditionalGeneration

    for tie, scaled in ((None, True), (False, False)):
        kw = {} if tie is None else {"tie_word_embeddings": tie}
        config = T5Config(vocab_size=7, d_model=4, d_kv=2, d_ff=6, num_layers=1, num_heads=2, **kw)
        model = T5ForConditionalGeneration(config)
        assert config.scale_decoder_outputs is scaled
        assert model.lm_head.weight.data_ptr() == model.shared.weight.data_ptr()
        assert [n for n, _ in model.named_parameters() if n.endswith("relative_attention_bias.weight")] == \
            ["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
             "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]


@pytest.mark.parametrize("entry", ("ed_transformer", "padded_ed_transformer"))
@pytest.mark.parametrize("version", ("v1.0", "v1.1"))
def test_the_librarys_model_conforms(entry, version):
    from ftspec.impls.discovery import load

    v = (T5_MODEL if version == "v1.0" else T5_V1_1_MODEL).replace(rel_buckets=6, rel_max_distance=5)
    if entry.startswith("padded_"):
        v = v.replace(empty_query="uniform")  # pad_x[0] = 0: query 0 has no key; eager adds finfo.min to all
    assert v in load("transformers-t5").variants_for(entry)
    for dtype in ("float32", "bfloat16"):
        assert findings_of("transformers-t5", _model_case(entry, v), v, dtype) == [], dtype


def _model_judged(declared, *, drop: bool = False, params: Any = None, shared: bool = True) -> bool:
    """Whether the library's model (run under T5 v1.0 at 6/5) passes at float32 against the spec under
    ``declared``: the tables dropped (``drop``), other parameters (``params``: name → the name it takes), or
    each layer reading a table of its own (``shared=False``: the later layers, which hold none, add no bias)."""
    from ftspec.impls.discovery import load
    from ftspec.spec import architectures

    v = T5_MODEL.replace(rel_buckets=6, rel_max_distance=5)
    case = _model_case("ed_transformer", v)
    p = rounded(case, "float32")
    got = call(load("transformers-t5"), case.entry, p.inputs, p.params, hyper=case.hyper, variant=v,
               dtype="float32", device="cpu")
    given = {k: x for k, x in p.params.items() if not (drop and k in TABLES)}
    given.update({k: p.params[src] for k, src in (params or {}).items()})
    original = architectures._shared_table
    if not shared:
        architectures._shared_table = lambda layers, variant: list(layers)
    try:
        ref = reference(case.entry, p.inputs, given, hyper=case.hyper, variant=declared, dtype="float32")
    finally:
        architectures._shared_table = original
    return judge(case.entry, got, ref).ok


def test_the_model_declared_wrong_fails():
    v = T5_MODEL.replace(rel_buckets=6, rel_max_distance=5)
    assert _model_judged(v)  # the library's own set passes on the same call
    assert not _model_judged(v.replace(rel_bias="none"), drop=True)  # without the tables
    assert not _model_judged(v, shared=False)  # each layer its own table
    assert not _model_judged(v, params={TABLES[1]: TABLES[0]})  # the decoder reading the encoder's table
    assert not _model_judged(v.replace(unembedding_scale="one"))  # the head without d_model**-0.5
