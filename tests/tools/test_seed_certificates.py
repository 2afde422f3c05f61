"""One call certifies an implementation of a seed's whole model under its preset.

The plugins of tests/tools/seed_plugins.py implement seed 000's G(s) and seed
002's model from the documents alone (NumPy, the documents' notation); their
adapters only map ftspec's parameters onto the documents'. Each is certified
through ``conformance.session.commands.certify``, the call behind ``ftspec
certify``, on the entry ``next_token_encoder`` under the document's preset
(quick profile, 40 examples: the refusal check included, and every golden
fixture of the entry under that preset once the fixtures have them). A copy with one departure from
the document planted must not be certified.

tests/tools/seed_plugins_003_004.py does the same for seed 003's block
(``encoder_layer`` under ``named-tensor-003``, one head: its adapter folds the
harness's W_o into the value map) and seed 004's encoder (``embedding`` and
``encoder_layer`` in one plugin under ``tutorial-004``, one call certifying
both); seed 004's plugin, fed the tutorial's own parameters, reproduces its
printed A(9) only when E goes into its row-reading encoder unchanged, the
tutorial's layout slip, which the algorithm is not.
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.conformance.session.commands import Settings, certify

from .seed_plugins import seed000, seed002
from .seed_plugins_003_004 import embedding_004, encoder_004, seed003, seed004


def _certify(impl, tmp_path, **settings) -> dict:
    return certify(impl, Settings(profile="quick", in_process=True, case_dir=str(tmp_path / "cases"),
                                  **settings)).doc


def _cells(doc: dict) -> list[dict]:
    return [c for c in doc["results"] if c["status"] != "not implemented"]


@pytest.mark.parametrize("make, preset", [(seed000, "compact-000"), (seed002, "thickstun-002")],
                         ids=["seed-000", "seed-002"])
def test_the_document_s_model_is_certified_under_its_preset(make, preset, tmp_path):
    doc = _certify(make(), tmp_path, examples=40)  # the quick profile's 10 at least, about 2 s
    assert doc["verdict"] == "conformant", [c.get("failure") for c in doc["results"]]
    cells = _cells(doc)
    assert [(c["algorithm"], c["dtype"], c["status"]) for c in cells] == [("next_token_encoder", "float64", "pass")]
    assert cells[0]["examples"] == 40 and doc["run"]["minimum"] == 10
    assert all(f["ok"] for f in doc["fixtures"])


@pytest.mark.parametrize("planted", [dict(ddof=1), dict(read=0)], ids=["variance-over-N-1", "first-position"])
def test_a_departure_from_the_document_is_not_certified(planted, tmp_path):
    doc = _certify(seed000(**planted), tmp_path)
    assert doc["verdict"] == "non-conformant"
    assert [c["status"] for c in _cells(doc)] == ["fail"]


# -- seeds 003 and 004 ------------------------------------------------------------------------------


def test_seed_003_s_block_is_certified_under_its_preset(tmp_path):
    """One head (its declared limit): the golden fixtures of encoder_layer have more heads, so none is
    replayed; the certificate counts them as outside the limits."""
    doc = _certify(seed003(), tmp_path, examples=40)  # about 1 s
    assert doc["verdict"] == "conformant", [c.get("failure") for c in doc["results"]]
    cells = _cells(doc)
    assert [(c["algorithm"], c["dtype"], c["status"]) for c in cells] == [("encoder_layer", "float64", "pass")]
    assert cells[0]["examples"] == 40
    assert doc["subject"]["limits"]["encoder_layer"]["maximum"] == {"H": 1}
    assert doc["run"]["fixtures_outside_limits"] > 0
    assert all(f["ok"] for f in doc["fixtures"])


def test_seed_004_s_encoder_is_certified_under_its_preset_in_one_call(tmp_path):
    doc = _certify(seed004(), tmp_path, examples=40)  # both entries, about 2 s
    assert doc["verdict"] == "conformant", [c.get("failure") for c in doc["results"]]
    cells = _cells(doc)
    assert sorted((c["algorithm"], c["dtype"], c["status"]) for c in cells) == [
        ("embedding", "float64", "pass"), ("encoder_layer", "float64", "pass")]
    assert all(c["examples"] >= 40 for c in cells)
    assert all(f["ok"] for f in doc["fixtures"])


@pytest.mark.parametrize("make, planted", [(seed003, dict(post=True)), (seed003, dict(eps_outside=True)),
                                           (seed004, dict(ddof=0)), (seed004, dict(nu_inside=True)),
                                           (seed004, dict(as_printed=True))],
                         ids=["003-post-LN", "003-eps-outside-root", "004-sigma-over-N", "004-nu-inside-root",
                              "004-as-printed"])
def test_a_departure_from_seed_003_or_004_is_not_certified(make, planted, tmp_path):
    """The departure is in the layer: seed 004's embedding still passes."""
    doc = _certify(make(**planted), tmp_path)
    assert doc["verdict"] == "non-conformant"
    assert {c["algorithm"]: c["status"] for c in _cells(doc)} == {
        "encoder_layer": "fail", **({"embedding": "pass"} if make is seed004 else {})}


def test_the_tutorial_s_printed_A9_is_its_encoder_on_E_unchanged():
    """Seed 004's plugin functions on the tutorial's own parameters (MATLAB's default stream at full
    precision, tests/spec/test_seed_004.py) and input "it was the worst of times": E displays as
    printed, and so does A(9) when E, built with tokens as columns, goes into the row-reading encoder
    unchanged, as the tutorial does; the encoder on the tokens as rows (Eᵀ: what ``seed004()``
    certifies) gives other numbers."""
    from ..spec.test_seed_004 import A9_PRINTED, E_PRINTED, FULL, N_V, WORD_IDS, misfits

    table = np.zeros((6, N_V))
    table[:, np.array(WORD_IDS) - 1] = np.array(FULL["W"])  # column k of W is the k-th input word's vector
    E = embedding_004(np.array(WORD_IDS), table)  # (d, ℓ) = (6, 6)
    assert misfits(E.tolist(), E_PRINTED) == []
    heads = [(np.array(FULL["W_Q"]), np.array(FULL["W_K"]), np.array(FULL["W_V"]))]
    rest = (np.array(FULL["W_A"]), np.array(FULL["W_L"]), np.array(FULL["b_L"][0]))
    assert misfits(encoder_004(E, heads, *rest).tolist(), A9_PRINTED) == []  # the slip: rows of E as tokens
    words_as_tokens = encoder_004(E.T, heads, *rest)  # (ℓ, d): a row per word
    for table in (words_as_tokens, words_as_tokens.T):  # every entry differs, either way round
        assert len(misfits(table.tolist(), A9_PRINTED)) == 36
