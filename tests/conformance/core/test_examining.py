"""``examining.examine_case``: the one call that examines a case takes the spec's reference at the
precision the plugin declares for the dtype, under the variant set asked for, and judges the
case's batch against each input set's own reference."""

from __future__ import annotations

import dataclasses

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
