"""The encoder-decoder's position tables (``ed_positions``): one W_p for source and target (the paper),
or the target's from a second table W_p_dec (BART's two ``BartLearnedPositionalEmbedding``s).

- "separate" with W_p_dec = W_p is "shared";
- with two different tables the decoder's output moves and the encoder's does not;
- a sinusoid is one fixed table: the switch asks for no second parameter and changes nothing;
- no earlier set's hash moves (a later switch at its default is left out of the canonical JSON).
"""

from __future__ import annotations

import numpy as np

from ftspec.conformance.core.case import Case
from ftspec.spec import REGISTRY
from ftspec.spec.architectures import ed_transformer
from ftspec.spec.intermediates import recorded
from ftspec.spec.params import EDTransformerParams, from_flat
from ftspec.spec.variants import PAPER, PRESETS, VariantSet

SEPARATE = PAPER.replace(ed_positions="separate")


def _run(flat, variant: VariantSet, hyper) -> tuple[np.ndarray, dict]:
    case_params = {k: np.asarray(v).tolist() for k, v in flat.items()}
    with recorded() as values:
        P = ed_transformer([1, 0, 3, 2], [2, 4, 1], from_flat(EDTransformerParams, case_params),
                           ell_max=hyper["ell_max"], variant=variant)
    return np.array(P, dtype=float), {k: np.array(v, dtype=float) for k, v in values.items()}


def _case() -> Case:
    return Case.build("ed_transformer", REGISTRY["ed_transformer"].sizes, SEPARATE, seed=5)


def test_the_second_table_is_in_the_schema_under_learned_positions_alone():
    e = REGISTRY["ed_transformer"]
    assert e.param_shapes(e.sizes, SEPARATE)["W_p_dec"] == e.param_shapes(e.sizes, SEPARATE)["W_p"]
    assert "W_p_dec" not in e.param_shapes(e.sizes, PAPER)
    assert "W_p_dec" not in e.param_shapes(e.sizes, SEPARATE.replace(positions="sinusoidal_vaswani"))
    # (T5's bucket parameters are unread too, without its bias: tests/spec/test_t5_model.py)
    assert e.unread(SEPARATE.replace(positions="sinusoidal_vaswani")) == {"ed_positions", "rel_buckets",
                                                                          "rel_max_distance"}
    assert e.unread(SEPARATE) == {"rel_buckets", "rel_max_distance"}


def test_separate_with_equal_tables_is_shared():
    case = _case()
    flat = {**case.params, "W_p_dec": case.params["W_p"]}
    assert np.array_equal(_run(flat, SEPARATE, case.hyper)[0], _run(flat, PAPER, case.hyper)[0])


def test_different_tables_move_the_decoder_and_not_the_encoder():
    case = _case()
    assert not np.array_equal(case.params["W_p"], case.params["W_p_dec"])
    P_sep, sep = _run(case.params, SEPARATE, case.hyper)
    P_one, one = _run(case.params, PAPER, case.hyper)
    assert not np.allclose(P_sep, P_one)
    assert not np.allclose(sep["dec_embedding"], one["dec_embedding"])
    enc = [k for k in sep if k.startswith("enc_")]
    assert enc and all(np.array_equal(sep[k], one[k]) for k in enc)


def test_a_sinusoid_reads_no_second_table():
    case = Case.build("ed_transformer", REGISTRY["ed_transformer"].sizes, PAPER.replace(
        positions="sinusoidal_vaswani"), seed=5)
    v = PAPER.replace(positions="sinusoidal_vaswani")
    assert np.array_equal(_run(case.params, v.replace(ed_positions="separate"), case.hyper)[0],
                          _run(case.params, v, case.hyper)[0])


def test_no_earlier_hash_moves():
    assert "ed_positions" not in PAPER.to_json() and PAPER.hash == "fc2d657e21da4545"
    assert PRESETS["hf-bart"].hash == "8dafd638fad5abe1"
    assert "ed_positions" in SEPARATE.to_json()


def test_listed_by_the_encoder_decoder_forward_entries_alone():
    assert {n for n, e in REGISTRY.items() if "ed_positions" in e.switches} == \
        {"ed_transformer", "padded_ed_transformer"}
