"""The zoo's RoPE scaling mutants are caught by a default search of a plugin that declares the
convention: what a Llama 3.1 port (``meta-llama3+rope_scaling=llama3``, Llama 3's base 500000 with
Llama 3.1's scaling) or a linearly scaled one with the slip would meet on its first ``ftspec run``.

Each mutant is the NumPy plugin with one edit (``tools/zoo/catalogue_families.py``), declared here
under the set the convention belongs to (a plugin's ``variants``), and searched on the entry its bench
run searches first, at float32, with the default profile's examples: the search fails, by the spec
check (a value outside the derived bound), not by an exception. A mutant the search did not reach, or
one equal to the correct plugin under that set, would pass and fail this test (the correct NumPy
plugin passes the same searches: the last test). The diagnosis is left out: the kill is what is
tested here.
"""

from __future__ import annotations


import pytest

from ftspec.conformance.running import failures
from ftspec.spec.variants import parse
from ftspec.tools.zoo import mutant

from .zoo_search import declared_search

#: Llama 3.1 as docs/spec.md declares it (its kv heads a size left at 1)
LLAMA31 = parse("meta-llama3+rope_scaling=llama3")
#: Hugging Face Llama with rope_scaling {"rope_type": "linear", "factor": 2}
LINEAR = parse("llama+rope_scaling=linear-2")
DECLARED = {
    "llama3-rope-smoothing-missing": LLAMA31,
    "llama3-rope-factor-on-high-frequencies": LLAMA31,
    "linear-rope-scaling-inverted": LINEAR,
}


@pytest.mark.parametrize("mutant_id", sorted(DECLARED))
def test_the_mutant_is_caught_by_a_default_search_under_its_convention(mutant_id, tmp_path, monkeypatch):
    monkeypatch.setattr(failures, "diagnose_failure", lambda *a, **k: None)
    m = mutant(mutant_id)
    cell = declared_search(m.id, DECLARED[mutant_id], m.targets[0], tmp_path)
    assert cell.status.value == "fail", (mutant_id, cell.status, cell.examples)
    assert cell.failure is not None and cell.failure.check == "spec", (mutant_id, cell.failure)


def test_the_correct_plugin_passes_the_same_search(tmp_path):
    """The searches above fail for the mutants' sake: the NumPy plugin they edit passes Llama 3.1's
    (about 2 CPU-seconds; the linear set passed likewise when this test was written)."""
    cell = declared_search("numpy", LLAMA31, "causal_self_attention", tmp_path)
    assert cell.status.value == "pass", (cell.status, cell.failure)
