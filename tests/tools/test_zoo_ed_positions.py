"""The zoo's ``decoder-reads-encoder-positions`` mutant (the target embedded with the encoder's learned table
where the encoder-decoder declares a table of its own for it, BART's two ``embed_positions``) is caught by a
default float32 search of ``ed_transformer`` by a plugin that declares ``ed_positions="separate"``: every drawn
case has two independently drawn tables, so any learned-position draw shows it.

The mutant is the NumPy plugin with one edit (``tools/zoo/catalogue_families.py``); the correct NumPy plugin
passes the same search, and the mutant is the correct plugin under "shared".
"""

from __future__ import annotations

from ftspec.conformance.running import failures
from ftspec.spec import PAPER
from ftspec.tools.zoo import mutant

from .zoo_search import declared_search

SEPARATE = PAPER.replace(ed_positions="separate")
MUTANT = "decoder-reads-encoder-positions"


def test_the_mutant_is_caught_by_a_default_search_under_separate_tables(tmp_path, monkeypatch):
    monkeypatch.setattr(failures, "diagnose_failure", lambda *a, **k: None)
    m = mutant(MUTANT)
    cell = declared_search(m.id, SEPARATE, m.bench[0], tmp_path)
    assert cell.status.value == "fail", (cell.status, cell.examples)
    assert cell.failure is not None and cell.failure.check == "spec", cell.failure


def test_the_correct_plugin_passes_the_same_search(tmp_path):
    cell = declared_search("numpy", SEPARATE, "ed_transformer", tmp_path, examples=60)
    assert cell.status.value == "pass", (cell.status, cell.failure)


def test_the_mutant_is_the_correct_plugin_under_shared(tmp_path):
    m = mutant(MUTANT)
    cell = declared_search(m.id, PAPER, "ed_transformer", tmp_path, examples=60)
    assert cell.status.value == "pass", (cell.status, cell.failure)
