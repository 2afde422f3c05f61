"""The zoo's local/global-layer mutants are caught by a default search of a plugin that declares
Gemma's alternating layers: what a Gemma 2 or Gemma 3 port with the slip would meet on its first
``ftspec run``.

Each mutant is the NumPy plugin with one edit (``tools/zoo/catalogue_families.py``: the alternation
counted from layer 0; the local base given to the global layers too), declared under the set its
witness names (Gemma 2's alternation, with Gemma 3's two bases for the second), searched on
Algorithm 10 (its bench entry) at float32 with the default profile's examples: the search fails by
the spec check (a value outside the derived bound), not by an exception. The correct NumPy plugin
passes the same searches (the last test).
"""

from __future__ import annotations

import dataclasses

import pytest

from ftspec.conformance.running import failures
from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import Runner
from ftspec.impls.discovery import load
from ftspec.spec.variants import PAPER
from ftspec.tools.zoo import build, mutant

MUTANTS = ["global-layers-off-by-one", "local-rope-base-on-global-layers"]


def _declared(mutant_id: str):
    return PAPER.replace(**mutant(mutant_id).witness.variant)


def _search(name: str, impl, variant, tmp_path):
    impl = dataclasses.replace(impl, variants=(variant,))
    runner = Runner([(name, impl)], RunConfig(case_dir=str(tmp_path)))
    runner.distinct_failures = 0  # the first failure is the verdict
    return runner.run(["d_transformer"], ["float32"]).cells[0]


@pytest.mark.parametrize("mutant_id", MUTANTS)
def test_the_mutant_is_caught_by_a_default_search_of_the_decoder_only_model(mutant_id, tmp_path, monkeypatch):
    monkeypatch.setattr(failures, "diagnose_failure", lambda *a, **k: None)
    m = mutant(mutant_id)
    assert m.targets[0] == "d_transformer"
    cell = _search(f"mutant:{m.id}", build(m), _declared(mutant_id), tmp_path)
    assert cell.status.value == "fail", (mutant_id, cell.status, cell.examples)
    assert cell.failure is not None and cell.failure.check == "spec", (mutant_id, cell.failure)


def test_the_correct_plugin_passes_the_same_search(tmp_path):
    cell = _search("numpy", load("numpy"), _declared("local-rope-base-on-global-layers"), tmp_path)
    assert cell.status.value == "pass", (cell.status, cell.failure)
