"""The zoo's LongRoPE mutants (Phi-3's factors multiplying the frequencies where they divide them; the attention
factor on the cosine table alone) are caught by a default float32 search of ``causal_self_attention`` by a plugin
that declares Phi-3's 128k set (``transformers-phi3``'s ``VARIANT_PHI3_LONGROPE``: rope_factors="longrope"):
every drawn case has its own factors (log-uniform over [1, 64]) and attention factor (over [1, 1.5]).

Each mutant is the NumPy plugin with one edit (``tools/zoo/catalogue_families.py``), by the spec check (a value
outside the derived bound), not an exception; the correct NumPy plugin passes the same search, and each mutant
is the correct plugin under rope_factors="none". The diagnosis is left out: the kill is what is tested here.
"""

from __future__ import annotations


import pytest

from ftspec.conformance.running import failures
from ftspec.impls.hf import VARIANT_PHI3_LONGROPE
from ftspec.tools.zoo import mutant

from .zoo_search import declared_search

MUTANTS = ("longrope-factors-multiplied", "longrope-attention-factor-on-cos-only")


@pytest.mark.parametrize("mutant_id", MUTANTS)
def test_the_mutant_is_caught_by_a_default_search_under_longrope(mutant_id, tmp_path, monkeypatch):
    monkeypatch.setattr(failures, "diagnose_failure", lambda *a, **k: None)
    m = mutant(mutant_id)
    cell = declared_search(m.id, VARIANT_PHI3_LONGROPE, m.bench[0], tmp_path)
    assert cell.status.value == "fail", (mutant_id, cell.status, cell.examples)
    assert cell.failure is not None and cell.failure.check == "spec", (mutant_id, cell.failure)


def test_the_correct_plugin_passes_the_same_search(tmp_path):
    cell = declared_search("numpy", VARIANT_PHI3_LONGROPE, "causal_self_attention", tmp_path)
    assert cell.status.value == "pass", (cell.status, cell.failure)


@pytest.mark.parametrize("mutant_id", MUTANTS)
def test_the_mutant_is_the_correct_plugin_without_longrope(mutant_id, tmp_path):
    cell = declared_search(mutant_id, VARIANT_PHI3_LONGROPE.replace(rope_factors="none"), "causal_self_attention",
                           tmp_path, examples=60)
    assert cell.status.value == "pass", (cell.status, cell.failure)
