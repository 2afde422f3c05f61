"""``examining.examine_case``: the one call that examines a case takes the spec's reference at the
precision the plugin declares for the dtype, under the variant set asked for, and judges the
case's batch against each input set's own reference; its steps (``rounded``, ``precision_of``,
``judged_for``) do the same for a caller that needs only one."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ftspec.conformance.core import examining
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.execute import Member
from ftspec.impls.discovery import load
from ftspec.spec.variants import PAPER

NUMPY = load("numpy")
#: the NumPy plugin declaring float32 sums at float16 (what it declares is what it is held to)
WIDER = dataclasses.replace(NUMPY, name="wider", accumulation={"float16": {"accumulate": "float32"}})


def _recorded(monkeypatch) -> list[tuple]:
    calls: list[tuple] = []
    original = examining.reference

    def recording(entry, inputs, params, **how):
        calls.append((how["precision"], how["variant"], {k: v.copy() for k, v in inputs.items()}))
        return original(entry, inputs, params, **how)

    monkeypatch.setattr(examining, "reference", recording)
    return calls


def test_the_reference_is_taken_at_the_declared_precision(monkeypatch):
    calls = _recorded(monkeypatch)
    case = Case.build("layer_norm", None, PAPER, seed=3)
    assert WIDER.precision_for("float16") != NUMPY.precision_for("float16")
    for impl in (NUMPY, WIDER):
        outcome = examining.examine_case(Member(impl.name, impl, "cpu"), case, "float16", timeout=30.0)
        assert outcome.judgement.ok, outcome.judgement.findings
    assert [c[0] for c in calls] == [NUMPY.precision_for("float16"), WIDER.precision_for("float16")]


def test_the_batch_is_judged_against_its_own_references_under_the_variant_asked_for(monkeypatch):
    calls = _recorded(monkeypatch)
    case = Case.build("layer_norm", None, PAPER, seed=4)
    case.batch.append(Case.build("layer_norm", case.hyper, PAPER, seed=5).inputs)
    member = Member("numpy", NUMPY, "cpu")
    outcome = examining.examine_case(member, case, "float64", timeout=30.0)
    assert outcome.judgement.ok and "batch" in outcome.checks, (outcome.judgement.findings, outcome.checks)
    assert (calls[1][2]["X"] == case.batch[0]["X"]).all() and not (calls[0][2]["X"] == calls[1][2]["X"]).all()
    other = PAPER.replace(epsilon=1e-5, epsilon_placement="inside_root")
    outcome = examining.examine_case(member, case, "float64", timeout=30.0, variant=other)
    assert [c[1] for c in calls] == [PAPER, PAPER, other, other]
    # the plugin computes the paper's ε-free norm: judged under ε = 1e-5 inside the root it departs
    assert not outcome.judgement.ok


def test_rounded_rounds_the_reals_and_copies_the_rest():
    case = Case.build("gpt2_layer", None, PAPER, seed=1)  # real parameters, token-free inputs
    other = Case.build("gpt2_layer", case.hyper, PAPER, seed=2).inputs
    p = examining.rounded(case, "float16")
    for name, v in case.params.items():  # float16 rounding, by NumPy's own cast
        assert np.array_equal(p.params[name], v.astype(np.float16).astype(np.float64)), name
    assert np.array_equal(p.inputs["X"], case.inputs["X"].astype(np.float16).astype(np.float64))
    q = examining.rounded(case, "float16", inputs=other)  # a batch's input set: the case's parameters
    assert np.array_equal(q.inputs["X"], other["X"].astype(np.float16).astype(np.float64))
    assert all(np.array_equal(q.params[k], p.params[k]) for k in p.params)
    tokens = Case.build("d_transformer", None, PAPER, seed=1)
    t = examining.rounded(tokens.entry, "float16", inputs=tokens.inputs, params=tokens.params)
    assert np.array_equal(t.inputs["x"], tokens.inputs["x"]) and t.inputs["x"] is not tokens.inputs["x"]
    with pytest.raises(TypeError, match="params are both needed"):
        examining.rounded(tokens.entry, "float16", inputs=tokens.inputs)


def test_the_precision_is_the_declared_one_for_a_member_or_a_plugin():
    assert examining.precision_of(WIDER, "float16") == "highest;accumulate=float32"
    assert examining.precision_of(Member("wider", WIDER, "cpu"), "float16") == "highest;accumulate=float32"
    assert examining.precision_of(WIDER, "float64") == "highest"
    assert examining.precision_of(object(), "float16") == "highest"  # declares none: the fixtures' assumption


def test_judged_for_takes_the_reference_at_the_declared_precision_and_judged_case_asks_for_one(monkeypatch):
    calls = _recorded(monkeypatch)
    case = Case.build("layer_norm", None, PAPER, seed=3)
    examining.judged_for(WIDER, case, "float16", batch=False)
    assert [c[0] for c in calls] == ["highest;accumulate=float32"]
    with pytest.raises(TypeError):
        examining.judged_case(case, "float16")  # no default precision: none is left out again
