"""Every distinct failure, not only the smallest (conformance/forensics/distinct_failures/).

The bug zoo's ``three-bugs-residual-softmax-crash`` has three independent bugs (its catalogue
entry, after the issue's public implementation): a pre-LN residual taken from the normalised X,
the final softmax over positions, and a crash whenever ℓ < ℓ_max. The first failure the search
shrinks reaches some of them; all must be reported, each as its own failure with its own case
file and reproducer, in the report's JSON and in the verdict's reasons: the crash as an exception,
the two value bugs each as a value failure reported for its place (the first failure's first
divergence, a further one's ``new_places``): the residual path and the unembedding. A single-bug
mutant reports one failure (tests/conformance/forensics/test_distinct_hidden.py: more pairs, more seeds).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftspec.conformance.forensics.distinct_failures import MAX_DISTINCT, describe, same, signature
from ftspec.conformance.session.report import cell_dict
from ftspec.conformance.core.verdict import derive

from ..support import run_mutant


def test_signatures_tell_checks_exceptions_conventions_and_places_apart():
    eps = {"matches": [{"changes": {"epsilon": 1e-5, "epsilon_placement": "inside_root"}}],
           "divergence": {"where": "layer 0", "sublayer": "norm"}}
    a = signature("spec", "output 'P': ...", eps)
    assert a == ("spec", "", "epsilon=1e-05, epsilon_placement=inside_root", "layer 0 / norm", ())
    assert signature("exception", "raised ValueError: shapes (2,) (3,)", None)[:2] == ("exception", "ValueError")
    unknown = signature("spec", "", {"matches": [], "gave_up": True, "divergence": eps["divergence"]})
    assert same(a, unknown)  # a convention the short search had no time to find is no new failure
    other = signature("spec", "", {"matches": [], "gave_up": False, "divergence": eps["divergence"]})
    assert not same(a, other)
    elsewhere = signature("spec", "", {**eps, "divergence": {"where": "unembedding", "sublayer": ""}})
    assert same(a, elsewhere)  # one convention explains both: the same bug, wherever it was first seen
    unexplained = {"matches": [], "gave_up": False}
    here = signature("spec", "", {**unexplained, "divergence": {"where": "layer 0", "sublayer": "residual"}})
    there = signature("spec", "", {**unexplained, "divergence": {"where": "unembedding", "sublayer": ""}})
    assert not same(here, there)
    assert "first departs at layer 0 / norm" in describe(a)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_three_independent_bugs_are_all_reported(tmp_path):
    result = run_mutant("three-bugs-residual-softmax-crash", ["d_transformer"], ["float64"], tmp_path, examples=30,
                        distinct=MAX_DISTINCT)
    cell = next(c for c in result.cells if c.algorithm == "d_transformer")
    assert cell.status == "fail" and cell.failure is not None
    failures = [{"check": cell.failure.check, "message": cell.failure.message,
                 "diagnosis": cell.failure.diagnosis, "case_file": cell.failure.case_file}] + cell.more_failures
    assert {f["check"] for f in failures} == {"exception", "spec"}, [f["check"] for f in failures]
    crash = next(f for f in failures if f["check"] == "exception")
    assert "shorter than ell_max" in crash["message"]
    reported: list[str] = []  # the place each value failure is reported for, as its report says
    said = "distinct failure: reported for where its case departs at "
    for f in failures:
        report = f["report"] if "report" in f else cell.failure.report
        lines = [ln.split(said, 1)[1].split(" (", 1)[0] for ln in report.splitlines() if said in ln]
        if f["check"] == "spec":
            reported += lines
    assert sorted(reported) == ["residual", "unembedding"], reported
    # each its own shrunk case file, and a reproducer naming it
    files = [f["case_file"] for f in failures]
    assert len(set(files)) == len(files) and all(Path(p).is_file() for p in files)
    for more in cell.more_failures:
        assert more["case_file"] in more["reproducer"] and more["reproducer"] in more["report"]
    doc = json.loads(json.dumps(cell_dict(cell)))
    assert [m["check"] for m in doc["more_failures"]] == [m["check"] for m in cell.more_failures]
    verdict, reasons = derive([doc], [], minimum=1, selection={}, declared={})
    assert verdict == "non-conformant" and f"({len(failures)} distinct failures)" in reasons[0]


def test_one_bug_is_one_failure(tmp_path):
    result = run_mutant("variance-unbiased", ["layer_norm"], ["float64"], tmp_path, examples=30,
                        distinct=MAX_DISTINCT)
    cell = next(c for c in result.cells if c.algorithm == "layer_norm")
    assert cell.status == "fail" and cell.more_failures == []
