"""Every distinct failure, not only the smallest (conformance/distinct.py).

The bug zoo's ``two-bugs-short-crash-epsilon`` has two independent bugs (its catalogue entry): a
crash whenever ℓ < ℓ_max, and layer norm's ε = 1e-5 inside the root. The first failure the search
shrinks reaches one of them; both must be reported, each with its own case file and reproducer, in
the report's JSON and in the verdict's reasons. A single-bug mutant reports one failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftspec.conformance.distinct import describe, same, signature
from ftspec.conformance.report import cell_dict
from ftspec.conformance.verdict import derive

from .support import run_mutant


def test_signatures_tell_checks_exceptions_conventions_and_places_apart():
    eps = {"matches": [{"changes": {"epsilon": 1e-5, "epsilon_placement": "inside_root"}}],
           "divergence": {"where": "layer 0", "sublayer": "norm"}}
    a = signature("spec", "output 'P': ...", eps)
    assert a == ("spec", "", "epsilon=1e-05, epsilon_placement=inside_root", "layer 0 / norm")
    assert signature("exception", "raised ValueError: shapes (2,) (3,)", None)[:2] == ("exception", "ValueError")
    unknown = signature("spec", "", {"matches": [], "gave_up": True, "divergence": eps["divergence"]})
    assert same(a, unknown)  # a convention the short search had no time to find is no new failure
    other = signature("spec", "", {"matches": [], "gave_up": False, "divergence": eps["divergence"]})
    assert not same(a, other)
    elsewhere = signature("spec", "", {**eps, "divergence": {"where": "unembedding", "sublayer": ""}})
    assert not same(a, elsewhere)
    assert "first departs at layer 0 / norm" in describe(a)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_two_independent_bugs_are_both_reported(tmp_path):
    result = run_mutant("two-bugs-short-crash-epsilon", ["d_transformer"], ["float64"], tmp_path, examples=20)
    cell = next(c for c in result.cells if c.algorithm == "d_transformer")
    assert cell.status == "fail" and cell.failure is not None
    failures = [{"check": cell.failure.check, "message": cell.failure.message,
                 "diagnosis": cell.failure.diagnosis, "case_file": cell.failure.case_file}] + cell.more_failures
    checks = {f["check"] for f in failures}
    assert checks == {"exception", "spec"}, [f["check"] for f in failures]
    crash = next(f for f in failures if f["check"] == "exception")
    assert "shorter than ell_max" in crash["message"]
    eps = next(f for f in failures if f["check"] == "spec")
    assert any(m["changes"].get("epsilon") == 1e-5 for m in eps["diagnosis"]["matches"])
    assert eps["diagnosis"]["divergence"]["sublayer"] == "norm"
    # each its own shrunk case file, and a reproducer naming it
    files = {f["case_file"] for f in failures}
    assert len(files) == 2 and all(Path(p).is_file() for p in files)
    for more in cell.more_failures:
        assert more["case_file"] in more["reproducer"] and more["reproducer"] in more["report"]
    doc = json.loads(json.dumps(cell_dict(cell)))
    assert [m["check"] for m in doc["more_failures"]] == [m["check"] for m in cell.more_failures]
    verdict, reasons = derive([doc], [], minimum=1, selection={}, declared={})
    assert verdict == "non-conformant" and "(2 distinct failures)" in reasons[0]


def test_one_bug_is_one_failure(tmp_path):
    result = run_mutant("variance-unbiased", ["layer_norm"], ["float64"], tmp_path, examples=30)
    cell = next(c for c in result.cells if c.algorithm == "layer_norm")
    assert cell.status == "fail" and cell.more_failures == []
