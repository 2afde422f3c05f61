"""The zoo's ``pad-positions-by-index`` mutant (positions counted by the column's index where the padded
model declares them counted among the real tokens, OPT's and BLOOM's convention) is caught by a default
search of a plugin that declares ``pad_positions="real"``: the padding strategy draws padding before and
between real tokens, where the two counts differ.

The mutant is the NumPy plugin with one edit (``tools/zoo/catalogue_families.py``), declared here under
OPT's set (learned positions; uniform weights for a query with no key, so left padding is drawn), and
searched on its bench entry (``padded_d_transformer``) at float32 with the default profile's 400 examples: the
search fails by the spec check, not by an exception. The correct NumPy plugin passes the same search.
"""

from __future__ import annotations

from ftspec.conformance.running import failures
from ftspec.spec import PAPER
from ftspec.tools.zoo import mutant

from .zoo_search import declared_search

REAL = PAPER.replace(pad_positions="real", empty_query="uniform")
MUTANT = "pad-positions-by-index"


def test_the_mutant_is_caught_by_a_default_search_under_real_positions(tmp_path, monkeypatch):
    monkeypatch.setattr(failures, "diagnose_failure", lambda *a, **k: None)
    m = mutant(MUTANT)
    # the default profile's 400 examples without its wall-time cap: on a loaded machine the cap could end
    # the search before a draw with padding before or between real tokens (it stops at the first failure)
    cell = declared_search(m.id, REAL, m.bench[0], tmp_path, examples=400)
    assert cell.status.value == "fail", (cell.status, cell.examples)
    assert cell.failure is not None and cell.failure.check == "spec", cell.failure


def test_the_correct_plugin_passes_the_same_search(tmp_path):
    cell = declared_search("numpy", REAL, "padded_d_transformer", tmp_path)
    assert cell.status.value == "pass", (cell.status, cell.failure)


def test_the_mutant_is_the_correct_plugin_under_index(tmp_path):
    """The edit is on the "real" path alone: under "index" the mutant is the correct plugin."""
    m = mutant(MUTANT)
    cell = declared_search(m.id, PAPER.replace(empty_query="uniform"), "padded_d_transformer", tmp_path)
    assert cell.status.value == "pass", (cell.status, cell.failure)
