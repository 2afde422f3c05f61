"""The zoo's query-scale mutants are caught by a default search of a plugin that declares Gemma 2 27B's
scale (``attn_scale="sqrt_d_model_per_head"``, 1/√(d_model/H)): what a port with the slip would meet
on its first ``ftspec run``.

Each mutant is the NumPy plugin with one edit (``tools/zoo/catalogue_families.py``: its ``_divisor``
returns d_attn, or d_model, for the per-head value), declared here under that set, and searched on the
entry its bench run searches first (Algorithm 5) at float32 with the default profile's examples: the
search fails, by the spec check. A mutant the search did not reach (a draw with d_model = H·d_attn, where
√d_attn is right, or H = 1) would pass and fail this test (the correct NumPy plugin passed the same
search when this test was written). The diagnosis is left out: the kill is what is tested here.
"""

from __future__ import annotations

import dataclasses

import pytest

from ftspec.conformance.running import failures
from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import Runner
from ftspec.spec.variants import PAPER
from ftspec.tools.zoo import build, mutant

DECLARED = PAPER.replace(attn_scale="sqrt_d_model_per_head")


@pytest.mark.parametrize("mutant_id", ["query-scale-head-dim", "query-scale-heads-forgotten"])
def test_the_mutant_is_caught_by_a_default_search_under_gemma2_27bs_scale(mutant_id, tmp_path, monkeypatch):
    monkeypatch.setattr(failures, "diagnose_failure", lambda *a, **k: None)
    m = mutant(mutant_id)
    assert m.targets[0] == "mh_attention"
    impl = dataclasses.replace(build(m), variants=(DECLARED,))
    runner = Runner([(f"mutant:{m.id}", impl)], RunConfig(case_dir=str(tmp_path)))
    runner.distinct_failures = 0  # the first failure is the verdict
    cell = runner.run([m.targets[0]], ["float32"]).cells[0]
    assert cell.status.value == "fail", (mutant_id, cell.status, cell.examples)
    assert cell.failure is not None and cell.failure.check == "spec", (mutant_id, cell.failure)
