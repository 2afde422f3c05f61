"""The zoo's mixture-of-experts mutants (tools/zoo/catalogue_families.py) are caught by a default
search of ``moe_mlp``: what a Mixtral or Qwen2-MoE port with the slip would meet on its first
``ftspec run``; and a port that computes the other weight convention is named by the diagnosis.

Each mutant is the NumPy plugin with one edit of ``impls/numpy/moe.router_weights``, declared under
the set its witness names (Mixtral's renormalised weights for the first, Qwen2-MoE's plain ones for
the others) and searched at float32 with the default profile's examples: the search fails by the
spec check (a value outside the derived bound), not by an exception; the one that settles a router
tie instead of refusing it fails by the refusal check (a number for a case the spec refuses). The
correct NumPy plugin passes the same searches (tests/impls/test_moe_impls.py searches it under every
switch).
"""

from __future__ import annotations

import dataclasses

import pytest

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.tolerances import reference
from ftspec.conformance.forensics.diagnosis import diagnose
from ftspec.conformance.running import failures
from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import Runner
from ftspec.impls.discovery import load
from ftspec.spec.variants import PAPER
from ftspec.tools.zoo import build, mutant

#: each mutant and the check that catches it: a wrong value (spec), or a tie answered with a number (refusal)
MUTANTS = {"moe-topk-not-renormalised": "spec", "moe-softmax-over-chosen": "spec", "moe-top-k-off-by-one": "spec",
           "moe-tie-picked": "refusal"}


@pytest.mark.parametrize("mutant_id", sorted(MUTANTS))
def test_the_mutant_is_caught_by_a_default_search_under_its_convention(mutant_id, tmp_path, monkeypatch):
    monkeypatch.setattr(failures, "diagnose_failure", lambda *a, **k: None)
    m = mutant(mutant_id)
    assert m.targets == ("moe_mlp",)
    impl = dataclasses.replace(build(m), variants=(PAPER.replace(**m.witness.variant),))
    runner = Runner([(f"mutant:{m.id}", impl)], RunConfig(case_dir=str(tmp_path)))
    runner.distinct_failures = 0  # the first failure is the verdict
    cell = runner.run(["moe_mlp"], ["float32"]).cells[0]
    assert cell.status.value == "fail", (mutant_id, cell.status, cell.examples)
    assert cell.failure is not None and cell.failure.check == MUTANTS[mutant_id], (mutant_id, cell.failure)


@pytest.mark.parametrize("declared,computed", [(True, False), (False, True)], ids=["mixtral", "qwen2-moe"])
def test_the_other_weight_convention_is_caught_and_named(declared, computed):
    """The NumPy plugin run under the other ``moe_topk_norm`` than the one declared: caught at
    float32, and the diagnosis names the switch at the value computed."""
    variant = PAPER.replace(moe_topk_norm=declared)
    case = Case.build("moe_mlp", {"E": 4, "k": 2, "d_e": 4, "d_mlp": 6, "ell": 3}, variant, seed=2)
    p = rounded(case, "float32")
    wrong = call(load("numpy"), case.entry, p.inputs, p.params, hyper=case.hyper,
                 variant=variant.replace(moe_topk_norm=computed), dtype="float32", device="cpu")
    ref = reference(case.entry, p.inputs, p.params, hyper=case.hyper, variant=variant, dtype="float32")
    assert not judge(case.entry, wrong, ref).ok
    d = diagnose(case.entry, case, wrong, "float32", evaluations=80)
    assert any(m["changes"].get("moe_topk_norm") is computed for m in d.matches), d.summary()
