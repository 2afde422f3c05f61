"""The zoo's sandwich-norm mutants are caught by a default search of a plugin that declares Gemma 2's
sandwich (``norm_placement="sandwich"``): what a Gemma 2 port with the slip would meet on its first
``ftspec run``; and a port that leaves the output norms out altogether is caught and the diagnosis
names the placement it computes.

Each mutant is the NumPy plugin with one edit (``tools/zoo/catalogue_families.py``), declared under
the sandwich, searched on the GPT-2 layer (its bench entry) at float32 with the default profile's
examples: the search fails by the spec check (a value outside the derived bound), not by an
exception. The correct NumPy plugin passed the same searches when this test was written.
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

SANDWICH = PAPER.replace(norm_placement="sandwich")


@pytest.mark.parametrize("mutant_id", ["sandwich-output-norm-after-residual", "sandwich-output-norm-gain-reused"])
def test_the_mutant_is_caught_by_a_default_search_under_the_sandwich(mutant_id, tmp_path, monkeypatch):
    monkeypatch.setattr(failures, "diagnose_failure", lambda *a, **k: None)
    m = mutant(mutant_id)
    impl = dataclasses.replace(build(m), variants=(SANDWICH,))
    runner = Runner([(f"mutant:{m.id}", impl)], RunConfig(case_dir=str(tmp_path)))
    runner.distinct_failures = 0  # the first failure is the verdict
    cell = runner.run([m.targets[0]], ["float32"]).cells[0]
    assert m.targets[0] == "gpt2_layer"
    assert cell.status.value == "fail", (mutant_id, cell.status, cell.examples)
    assert cell.failure is not None and cell.failure.check == "spec", (mutant_id, cell.failure)


def test_output_norms_left_out_are_caught_and_named_at_float32():
    """The NumPy plugin run as pre-LN on the sandwich's parameters (the output norms' γ, β ignored):
    caught at float32, and the diagnosis names norm_placement = pre with those parameters dropped."""
    hyper = {"H": 2, "d_e": 4, "d_attn": 2, "d_mid": 2, "d_mlp": 6, "ell": 4}
    case = Case.build("gpt2_layer", hyper, SANDWICH, seed=2)
    p = rounded(case, "float32")
    params = {k: v for k, v in p.params.items() if not k.endswith("_out")}
    wrong = call(load("numpy"), case.entry, p.inputs, params, hyper=case.hyper,
                 variant=SANDWICH.replace(norm_placement="pre"), dtype="float32", device="cpu")
    ref = reference(case.entry, p.inputs, p.params, hyper=case.hyper, variant=SANDWICH, dtype="float32")
    assert not judge(case.entry, wrong, ref).ok
    d = diagnose(case.entry, case, wrong, "float32", evaluations=80)
    assert any(m["changes"].get("norm_placement") == "pre" for m in d.matches), d.summary()
