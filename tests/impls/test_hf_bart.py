"""BART and Marian certified through Hugging Face transformers (plugins ``transformers-bart`` and
``transformers-marian``, impls/hf/bart.py): encoder_layer (BartEncoderLayer / MarianEncoderLayer), decoder_layer
(BartDecoderLayer / MarianDecoderLayer) and ed_transformer (BartForConditionalGeneration / MarianMTModel).

The sets are written out here from transformers 5.24's source, not read from the plugin: models/bart/
modeling_bart.py and models/marian/modeling_marian.py add each sublayer's output to the residual and then apply
``nn.LayerNorm`` (eps 1e-5): post-LN; ``ACT2FN["gelu"]`` is the erf GELU (activations.py GELUActivation),
``ACT2FN["swish"]`` nn.SiLU; every q/k/v/out_proj and fc1/fc2 has a bias; ``scaling = head_dim**-0.5`` on the
scores; BART normalises the embedding sum (``layernorm_embedding``), Marian does not and multiplies the token
embedding by √d_model (``embed_scale`` under ``scale_embedding``, which the released opus-mt checkpoints set with
activation_function "swish"); both tie lm_head to the shared embedding and add ``final_logits_bias``. On fixed
cases at float32 each library conforms under its set, and fails when declared pre-LN, with the tanh GELU, or
(Marian) without its √d_model scale, with BART's GELU or with the interleaved sinusoid. Marian's position table
is its own sinusoid in halves (sin | cos, ``positions="sinusoidal_halves"``, spec 2.15), not
``sinusoidal_vaswani``'s interleaved rows; it is float32 whatever the model's dtype (``create_weight`` stores
through ``torch.FloatTensor``), so Marian's model is declared at float32 and bfloat16 alone. The full
certification (quick profile, seeds 1 and 2) is ``ftspec certify transformers-bart`` / ``-marian``
(docs/libraries.md); a short search of both runs under FTSPEC_ALL_LIBRARIES=1.
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
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.tolerances import reference
from ftspec.spec import MpNumbers, sinusoidal_halves, sinusoidal_vaswani, using
from ftspec.spec.variants import PAPER, PRESETS

from .cases import findings_of

HEAVY = bool(os.environ.get("FTSPEC_ALL_LIBRARIES"))
heavy = pytest.mark.skipif(not HEAVY, reason="library certifications: FTSPEC_ALL_LIBRARIES=1 (make bench runs them)")

#: BART (BartConfig defaults, transformers 5.24), written out from the source (module docstring)
BART = PAPER.replace(activation="gelu_erf", epsilon=1e-5, epsilon_placement="inside_root", norm_placement="post",
                     embedding_norm=True, unembedding="tied", logit_bias=True)
#: MarianMT as released: swish (SiLU), no embedding LayerNorm, token embedding × √d_model, and
#: MarianSinusoidalPositionalEmbedding's fixed table in halves
MARIAN = BART.replace(activation="silu", embedding_norm=False, embedding_scale="sqrt_d_e",
                      positions="sinusoidal_halves")
SETS = {"transformers-bart": BART, "transformers-marian": MARIAN}
#: BART's model: BartEncoder and BartDecoder each hold a BartLearnedPositionalEmbedding (two tables)
BART_MODEL = BART.replace(ed_positions="separate")
ENTRIES = ("encoder_layer", "decoder_layer", "ed_transformer")
#: BartAttention's head_dim = d_model // num_heads: d_e = H·d_attn, d_attn = d_mid
SIZES = {"encoder_layer": {"H": 2, "d_e": 4, "d_attn": 2, "d_mid": 2, "d_mlp": 6, "ell": 5},
         "decoder_layer": {"H": 2, "d_e": 4, "d_attn": 2, "d_mid": 2, "d_mlp": 6, "ell_x": 5, "ell_z": 4},
         "ed_transformer": {"N_V": 7, "ell_max": 6, "L_enc": 2, "L_dec": 2, "H": 2, "d_e": 4, "d_attn": 2,
                            "d_mid": 2, "d_mlp": 6, "ell_z": 4, "ell_x": 3}}


def test_the_bart_preset_is_the_set_written_out_from_the_source():
    assert PRESETS["hf-bart"] == BART


def _own(name: str, entry: str):
    """The set the plugin declares for ``entry``: BART's model with its two position tables."""
    return BART_MODEL if (name, entry) == ("transformers-bart", "ed_transformer") else SETS[name]


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("name", sorted(SETS))
def test_the_library_conforms_under_its_set(name, entry):
    from ftspec.impls.discovery import load

    own = _own(name, entry)
    assert list(load(name).variants_for(entry)) == [own]
    assert findings_of(name, Case.build(entry, SIZES[entry], own, seed=3), own) == []


def _passes(name: str, entry: str, declared) -> bool:
    """The plugin run under its own set, judged against the spec under ``declared`` on the same parameters (those
    of the declared schema: a second position table the declared set does not have is left out)."""
    from ftspec.impls.discovery import load

    impl, own = load(name), _own(name, entry)
    case = Case.build(entry, SIZES[entry], own, seed=3)
    p = rounded(case, "float32")
    got = call(impl, case.entry, p.inputs, p.params, hyper=case.hyper, variant=own, dtype="float32", device="cpu")
    names = case.entry.param_shapes(case.hyper, declared)
    ref = reference(case.entry, p.inputs, {k: v for k, v in p.params.items() if k in names}, hyper=case.hyper,
                    variant=declared, dtype="float32")
    return judge(case.entry, got, ref).ok


WRONG = [("transformers-bart", e, label, change) for e in ENTRIES
         for label, change in (("pre-LN", dict(norm_placement="pre")), ("tanh GELU", dict(activation="gelu_tanh")))]
WRONG += [("transformers-marian", "ed_transformer", "no √d_model embedding scale", dict(embedding_scale="one")),
          ("transformers-marian", "encoder_layer", "BART's erf GELU", dict(activation="gelu_erf")),
          ("transformers-marian", "decoder_layer", "pre-LN", dict(norm_placement="pre")),
          ("transformers-marian", "ed_transformer", "interleaved sinusoid", dict(positions="sinusoidal_vaswani"))]


@pytest.mark.parametrize("name, entry, label, change", WRONG, ids=[f"{n[13:]}-{e}-{lab}" for n, e, lab, _ in WRONG])
def test_a_wrong_declaration_fails(name, entry, label, change):
    assert _passes(name, entry, _own(name, entry))  # the same call passes under the library's set
    assert not _passes(name, entry, _own(name, entry).replace(**change)), label


def test_bart_declared_with_one_position_table_fails():
    """The library's truth is two tables (BartEncoder.embed_positions, BartDecoder.embed_positions): on a case
    whose W_p and W_p_dec differ, the paper's one table for both is caught."""
    case = Case.build("ed_transformer", SIZES["ed_transformer"], BART_MODEL, seed=3)
    assert not np.array_equal(case.params["W_p"], case.params["W_p_dec"])
    assert _passes("transformers-bart", "ed_transformer", BART_MODEL)
    assert not _passes("transformers-bart", "ed_transformer", BART)


def _spec_table(fn, n: int, d: int) -> np.ndarray:
    """The spec's W_p (d×n) at 40 digits, as the library's layout (positions, d) in float64."""
    with using(MpNumbers(40)):
        return np.array([[float(x) for x in row] for row in fn(d, n)]).T


@pytest.mark.parametrize("d", [1, 5, 6])
def test_marians_sinusoid_is_in_halves_not_interleaved(d):
    """MarianSinusoidalPositionalEmbedding.create_weight is the spec's sinusoidal_halves rounded once to float32
    (it stores through torch.FloatTensor), and not sinusoidal_vaswani's interleaved rows (for d > 2)."""
    import torch
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    n = 7
    table = MarianSinusoidalPositionalEmbedding(n, d).create_weight()  # (positions, d)
    assert table.dtype == torch.float32
    halves = _spec_table(sinusoidal_halves, n, d)
    np.testing.assert_array_equal(table.numpy(), halves.astype(np.float32))
    if d > 2:
        assert np.abs(table.double().numpy() - _spec_table(sinusoidal_vaswani, n, d)).max() > 0.5


def test_marians_model_is_not_declared_at_float64():
    """A float64 MarianMTModel's position table holds float32 values: the model is declared below float64."""
    from ftspec.impls.discovery import load

    impl = load("transformers-marian")
    assert impl.dtypes_for("ed_transformer") == ("float32", "bfloat16")
    assert impl.dtypes_for("encoder_layer") == ("float64", "float32", "bfloat16")


@heavy
def test_a_short_search_passes_and_a_wrong_declaration_fails(tmp_path):
    from ftspec.conformance.session.commands import Settings, run
    from ftspec.impls.discovery import load

    def settings(**kw):
        return Settings(profile="quick", fixtures="none", in_process=True, case_dir=str(tmp_path / "cases"), **kw)

    result = run(list(SETS), settings(examples=5, dtypes=("float32",)))
    assert not result.broken
    cells = [c for c in result.cells if c.status != "not implemented"]
    assert {(c.impl, c.algorithm) for c in cells} == {(n, e) for n in SETS for e in ENTRIES}
    assert all(c.status == "pass" for c in cells), [(c.impl, c.algorithm, c.status) for c in cells]
    impl = load("transformers-bart")
    liar = dataclasses.replace(impl, name="transformers-bart-pre-ln",
                               variants={a: [BART.replace(norm_placement="pre")] for a in impl.algorithms})
    result = run([liar], settings(examples=5, algorithms=("encoder_layer",), dtypes=("float32",)))
    (cell,) = [c for c in result.cells if c.algorithm == "encoder_layer"]
    assert cell.status == "fail", (cell.status, cell.note)
