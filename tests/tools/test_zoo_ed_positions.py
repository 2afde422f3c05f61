"""The zoo's ``decoder-reads-encoder-positions`` mutant (the target embedded with the encoder's learned table
where the encoder-decoder declares a table of its own for it, BART's two ``embed_positions``) is caught by a
default float32 search of ``ed_transformer`` by a plugin that declares ``ed_positions="separate"``: every drawn
case has two independently drawn tables, so any learned-position draw shows it.

The mutant is the NumPy plugin with one edit (``tools/zoo/catalogue_families.py``); the correct NumPy plugin
passes the same search, and the mutant is the correct plugin under "shared".
"""

from __future__ import annotations

import dataclasses

from ftspec.conformance.running import failures
from ftspec.impls.discovery import load
from ftspec.spec import PAPER
from ftspec.tools.zoo import build, mutant

from .zoo_search import first_failure

SEPARATE = PAPER.replace(ed_positions="separate")
MUTANT = "decoder-reads-encoder-positions"


def test_the_mutant_is_caught_by_a_default_search_under_separate_tables(tmp_path, monkeypatch):
    monkeypatch.setattr(failures, "diagnose_failure", lambda *a, **k: None)
    m = mutant(MUTANT)
    impl = dataclasses.replace(build(m), variants=(SEPARATE,))
    cell = first_failure(impl, f"mutant:{m.id}", m.bench[0], tmp_path)
    assert cell.status.value == "fail", (cell.status, cell.examples)
    assert cell.failure is not None and cell.failure.check == "spec", cell.failure


def test_the_correct_plugin_passes_the_same_search(tmp_path):
    impl = dataclasses.replace(load("numpy"), variants=(SEPARATE,))
    cell = first_failure(impl, "numpy", "ed_transformer", tmp_path, examples=60)
    assert cell.status.value == "pass", (cell.status, cell.failure)


def test_the_mutant_is_the_correct_plugin_under_shared(tmp_path):
    m = mutant(MUTANT)
    impl = dataclasses.replace(build(m), variants=(PAPER,))
    cell = first_failure(impl, f"mutant:{m.id}", "ed_transformer", tmp_path, examples=60)
    assert cell.status.value == "pass", (cell.status, cell.failure)
