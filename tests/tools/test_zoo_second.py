"""The second zoo (tools/zoo/second.py) and the wrong-names measurement of ``ftspec bench diagnosis``.

The second zoo is the held-out yardstick of issue 25: at least 40 mutants, at
least 35 of them bugs no catalogue convention describes, each a real bug (a
fixed witness case on which its output differs from the correct plugin's),
with expectations that are well formed. The classifier of the measurement
(``tools/bench/diagnosis.classify``) is tested on hand-made diagnoses, one per
class, built from the definitions of the classes, not from a run.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ftspec.impls.discovery import load
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER
from ftspec.tools.bench.diagnosis import (
    CLASSES, CONVENTIONS, DIVERGES, FIRST_EXPECTED, NAMES_LEFT_OUT, classify, markdown, names_plan, place_for,
    summarise_names,
)
from ftspec.tools.zoo import MUTANTS, build
from ftspec.tools.zoo.second import EXPECTED, PLACES, SECOND, second_mutant
from ftspec.tools.zoo.witness import differs

MODELS = ("ed_transformer", "e_transformer", "d_transformer")
SWITCHES = {f.name for f in dataclasses.fields(PAPER)}


def test_the_second_zoo_is_big_mostly_non_catalogue_and_separate():
    assert len(SECOND) >= 45
    assert set(EXPECTED) == set(SECOND), "every mutant states what its failure must be said to match"
    assert sum(v is None for v in EXPECTED.values()) >= 35
    assert not set(SECOND) & set(MUTANTS), "ids shared with the first zoo"
    assert all(m.id not in MUTANTS for m in SECOND.values())
    families = {REGISTRY[m.targets[0]].family for m in SECOND.values()}
    assert {"component", "layer", "architecture"} <= families


def test_an_unknown_id_is_a_one_line_error():
    with pytest.raises(ValueError, match="unknown second-zoo mutant 'nope'"):
        second_mutant("nope")
    assert second_mutant("mha-heads-reversed") is SECOND["mha-heads-reversed"]


@pytest.mark.parametrize("m", SECOND.values(), ids=list(SECOND))
def test_each_mutant_is_well_formed_and_builds(m):
    assert set(m.breaks) <= set(REGISTRY)
    assert set(m.targets) <= set(m.breaks)
    assert m.source, "say where such a bug is seen"
    impl = build(m)
    base = load(m.base)
    for name in m.breaks:
        assert impl.algorithms[name] is not base.algorithms[name]
    for name in set(base.algorithms) - set(m.breaks):
        assert impl.algorithms[name] is base.algorithms[name]


@pytest.mark.parametrize("m", SECOND.values(), ids=list(SECOND))
def test_each_mutant_differs_from_the_correct_implementation_on_its_witness(m):
    outcome = differs(m)
    assert outcome.differs, f"{m.id}: {outcome.detail}"


@pytest.mark.parametrize("mutant_id", [i for i, w in EXPECTED.items() if w is not None])
def test_each_expected_change_is_a_catalogue_change(mutant_id):
    want = dict(EXPECTED[mutant_id] or {})
    if "input Mask" in want:
        assert want == {"input Mask": "inverted (True = blocked)"}
        return
    assert set(want) <= SWITCHES
    declared = PAPER.replace(**dict(SECOND[mutant_id].witness.variant))  # where the witness shows the bug
    declared.replace(**want)  # values the switches admit together (VariantSet validates them)
    assert any(v != getattr(declared, k) for k, v in want.items()), "the declared value itself is no bug"


@pytest.mark.parametrize("mutant_id", list(PLACES))
def test_each_place_names_a_model_the_mutant_breaks(mutant_id):
    model, where = PLACES[mutant_id]
    assert mutant_id in SECOND and model in MODELS
    assert model in SECOND[mutant_id].breaks
    for part in where.split("|"):
        place, _, sub = part.partition("/")
        assert place.strip() and place == place.strip()
        assert sub in ("", "norm", "self-attention", "cross-attention", "residual", "MLP", "MLP activation")
    assert names_plan("second")[mutant_id]["entries"][-1] == model


def test_place_for_fills_in_the_last_layer():
    assert place_for("layer {last}", {"L": 3}) == "layer 2"
    assert place_for("layer 0|layer {last}", {"L": 1}) == "layer 0|layer 0"
    assert place_for("layer {last}", None) is None
    assert place_for("final norm", None) == "final norm"


def test_the_first_zoo_plan_covers_its_convention_and_divergence_mutants():
    plan = names_plan("first")
    assert set(CONVENTIONS) - set(NAMES_LEFT_OUT) <= set(plan)
    assert set(DIVERGES) - set(NAMES_LEFT_OUT) <= set(plan)
    assert plan["variance-unbiased"]["want"] == {"variance": "unbiased"}
    assert plan["layer-norm-naive-variance"]["want"] == FIRST_EXPECTED["layer-norm-naive-variance"]
    assert plan["heads-interleaved"]["want"] is None
    assert plan["heads-interleaved"]["entries"] == ("mh_attention", "bert_layer", "d_transformer")
    # gradients, steps, loops and samplers are not searched; a loss is
    assert "loss-wrong-column" not in plan and plan["loss-mean"]["entries"] == ("e_loss",)
    assert not any(m.kind == "behaviour" for i, m in MUTANTS.items() if i in plan)
    with pytest.raises(ValueError, match="unknown zoo"):
        names_plan("third")


# -- the classifier, on hand-made diagnoses (Diagnosis.to_dict's shape) --------------------------

def _diag(*changes, ambiguous=None):
    d = {"matches": [{"changes": dict(c), "declared": {}, "presets": [], "ratio": 0.5} for c in changes]}
    if ambiguous is not None:
        d["ambiguous"] = ambiguous
    return d


UNBIASED = {"variance": "unbiased"}
EPS6 = {"epsilon": 1e-6, "epsilon_placement": "inside_root"}


def test_the_five_classes():
    assert classify(_diag(UNBIASED, {"variance": "one_pass"}), UNBIASED) == "right-first"
    assert classify(_diag({"variance": "one_pass"}, UNBIASED, ambiguous=True), UNBIASED) == "right-ambiguous"
    assert classify(_diag({"variance": "one_pass"}, UNBIASED), UNBIASED) == "right-not-first"
    assert classify(_diag({"attn_bias": False}), UNBIASED) == "wrong"
    assert classify(_diag(), UNBIASED) == "nothing-fits"
    assert set(CLASSES) == {"right-first", "right-ambiguous", "right-not-first", "wrong", "nothing-fits"}


def test_a_non_catalogue_bug_with_any_match_is_a_wrong_name():
    assert classify(_diag({"empty_query": "zeros", "input Mask": "inverted (True = blocked)"}), None) == "wrong"
    assert classify(_diag(UNBIASED, ambiguous=True), None) == "wrong"
    assert classify(_diag(), None) == "nothing-fits"
    assert classify(None, None) == "nothing-fits"  # no diagnosis at all names nothing


def test_the_classifier_reads_changes_as_a_superset_and_numbers_by_value():
    # the match may change more than the bug; the bug's own change must be there whole
    assert classify(_diag({**EPS6, "affine": "scale"}), EPS6) == "right-first"
    assert classify(_diag({"epsilon": 1e-6}), EPS6) == "wrong"
    assert classify(_diag({"epsilon": 1.0000000000000002e-6, "epsilon_placement": "inside_root"}), EPS6) == \
        "right-first"
    assert classify(_diag({"epsilon": 1e-5, "epsilon_placement": "inside_root"}), EPS6) == "wrong"
    assert classify(_diag({"logit_bias": 0}), {"logit_bias": False}) == "right-first"


def test_an_ambiguous_diagnosis_without_the_bug_is_wrong_and_missing_ambiguity_is_false():
    assert classify(_diag({"attn_bias": False}, {"positions": "none"}, ambiguous=True), UNBIASED) == "wrong"
    assert classify(_diag(UNBIASED, ambiguous=False), UNBIASED) == "right-first"
    assert classify(_diag(UNBIASED, ambiguous=True), UNBIASED) == "right-ambiguous"


def test_the_summary_and_markdown_count_each_class_and_list_wrong_names():
    def cell(algorithm, dtype, cls, matches=(), check="spec", place=None, hit=None):
        c = {"algorithm": algorithm, "dtype": dtype, "status": "fail" if check else "pass", "check": check,
             "class": cls, "diagnosed": cls is not None, "summary": "", "ambiguous": False,
             "matches": list(matches), "seconds": 1.0 if cls else None, "evaluated": 10 if cls else None}
        if place:
            c.update(place=place, got="layer 0/norm", place_hit=hit)
        return c

    records: list[dict[str, Any]] = [
        {"kind": "names", "zoo": "second", "id": "a", "want": None, "cells": [
            cell("layer_norm", "float64", "wrong", ["variance=one_pass"]),
            cell("layer_norm", "float32", "nothing-fits"),
            cell("e_transformer", "float64", "nothing-fits", place="layer 0/norm", hit=True),
            cell("bert_layer", "float64", None, check="exception")]},
        {"kind": "names", "zoo": "second", "id": "b", "want": UNBIASED, "cells": [
            cell("layer_norm", "float64", "right-first", ["variance=unbiased"]),
            cell("layer_norm", "float32", None, check=None)]},
        {"kind": "names", "zoo": "first", "id": "c", "error": "boom", "seconds": 0.0},
    ]
    n = summarise_names(records)
    row = n["table"]["second"]["float64"]
    assert row["value"] == 3 and row["cells"] == 4 and row["failing"] == 4
    assert row["other"]["wrong"] == 1 and row["other"]["nothing-fits"] == 1 and row["catalogue"]["right-first"] == 1
    assert (row["places"], row["place_hits"]) == (1, 1)
    assert n["table"]["second"]["float32"]["value"] == 1
    assert n["wrong"] == [{"zoo": "second", "id": "a", "algorithm": "layer_norm", "dtype": "float64",
                           "check": "spec", "summary": "variance=one_pass", "want": "(no convention)"}]
    assert n["times"]["diagnoses"] == 4 and n["times"]["median_s"] == 1.0
    assert n["errors"] == ["names first c: boom"]
    out: list[str] = []
    markdown(out, {"records": records, "summary": {}, "examples": 5, "seed": 0, "seconds": 1.0})
    text = "\n".join(out)
    assert "## Diagnosis: is the convention named the bug?" in text
    assert "## Diagnosis: does a failure name its cause?" not in text  # the first three did not run
    assert "| second | float64 | 3 | 0 | 1 / 0 | 0 / 0 | 0 / 0 | **0 / 1** | 0 / 1 | 1 of 1 |" in text
    assert "| second | a | layer_norm float64 | spec | (no convention) | variance=one_pass |" in text


@pytest.mark.slow
def test_a_real_names_search_on_a_second_zoo_mutant():
    """One search of the measurement, end to end: the mutant fails on its component entry and
    every failing value cell gets a class (which one is what the bench reports, not asserted)."""
    from ftspec.tools.bench.diagnosis import _task

    rec = _task(("names", "second", "ln-gamma-beta-swapped", 6, 0))
    assert "error" not in rec, rec
    cells = {(c["algorithm"], c["dtype"]): c for c in rec["cells"]}
    assert cells[("layer_norm", "float64")]["status"] == "fail"
    for c in rec["cells"]:
        if c["status"] == "fail" and c["check"] in ("spec", "nan", "overflow", "refusal"):
            assert c["class"] in CLASSES
    model = [c for c in rec["cells"] if c["algorithm"] == "e_transformer" and c["status"] == "fail"]
    assert all(c["place"] == "layer 0/norm" and isinstance(c["place_hit"], bool) for c in model)


def test_a_convention_an_entry_cannot_express_counts_as_no_convention():
    """A mask read the wrong way inside a layer that builds its own causal mask has no "input Mask"
    reading to name there; a switch the entry does not read cannot be named either."""
    from ftspec.tools.bench.diagnosis import expressible

    mask = {"input Mask": "inverted (True = blocked)"}
    assert expressible("attention", mask) and not expressible("gpt2_layer", mask)
    assert expressible("layer_norm", {"variance": "unbiased"})
    assert not expressible("rms_norm", {"variance": "unbiased"})
