"""The zoo's Marian sinusoid mutant (``sinusoid-halves-interleaved``) is caught by a default search of a
plugin that declares ``positions="sinusoidal_halves"``: what a Marian port that reuses the standard,
interleaved sinusoid would meet on its first ``ftspec run``.

The mutant is the NumPy plugin with one edit (``tools/zoo/catalogue_components.py``), declared here under
the halves, and searched on its bench entry (``embedding``) at float32 with the default profile's
examples: the search fails by the spec check, not by an exception. The correct NumPy plugin passes the
same search (the last test), so the failure is the mutant's.
"""

from __future__ import annotations


import pytest

from ftspec.conformance.running import failures
from ftspec.spec import PAPER
from ftspec.tools.zoo import mutant

from .zoo_search import declared_search

HALVES = PAPER.replace(positions="sinusoidal_halves")
MUTANT = "sinusoid-halves-interleaved"


def test_the_mutant_is_caught_by_a_default_search_under_the_halves(tmp_path, monkeypatch):
    monkeypatch.setattr(failures, "diagnose_failure", lambda *a, **k: None)
    m = mutant(MUTANT)
    cell = declared_search(m.id, HALVES, m.targets[0], tmp_path)
    assert cell.status.value == "fail", (cell.status, cell.examples)
    assert cell.failure is not None and cell.failure.check == "spec", cell.failure


def test_the_correct_plugin_passes_the_same_search(tmp_path):
    cell = declared_search("numpy", HALVES, "embedding", tmp_path)
    assert cell.status.value == "pass", (cell.status, cell.failure)


@pytest.mark.parametrize("positions", ["sinusoidal_vaswani", "learned"])
def test_the_mutant_leaves_the_other_positions_alone(positions, tmp_path):
    """The edit is on the halves' path alone: under another value the mutant is the correct plugin."""
    m = mutant(MUTANT)
    cell = declared_search(m.id, PAPER.replace(positions=positions), "embedding", tmp_path)
    assert cell.status.value == "pass", (positions, cell.status, cell.failure)
