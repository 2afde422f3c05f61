"""``ftspec spec seeds``: every seed document, its preset, its whole-model entry and its gaps.

A user starts from the document they hold (issue 26): the listing must name all five
documents in ../shared/seeds, point only at presets, entries and test files that exist,
fit 80 columns, and refuse an unknown seed in one line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ftspec.spec.registry import REGISTRY
from ftspec.spec.seeds import NONE_YET, SEEDS, find
from ftspec.spec.variants import PRESETS
from ftspec.tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
SEED_DIR = ROOT.parent / "shared" / "seeds"
#: The five documents as ../shared/seeds/README.md lists them (number → file).
DOCUMENTS = {"000": "000_e559488fd924bfec.txt", "001": "001_e547f0ab3c0ee644.txt",
             "002": "002_08d83349baf90c6e.txt", "003": "003_b13f05831a645e5c.txt",
             "004": "004_633e602a836c2656.txt"}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["spec", "seeds", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_every_document_is_listed_once():
    assert {s.number: s.file for s in SEEDS} == DOCUMENTS
    assert len(SEEDS) == len(DOCUMENTS)


@pytest.mark.skipif(not SEED_DIR.is_dir(), reason="../shared/seeds is not beside this checkout")
def test_the_table_covers_the_seed_directory():
    assert sorted(p.name for p in SEED_DIR.glob("*.txt")) == sorted(DOCUMENTS.values())


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: s.number)
def test_every_name_a_row_gives_exists(seed):
    """Presets, entries and test files are real: a renamed entry or preset fails here."""
    assert seed.preset in PRESETS
    for name in seed.whole_model:
        assert name in REGISTRY
    for entries, what in seed.parts:
        assert what and all(name in REGISTRY for name in entries), entries
    assert (ROOT / seed.tested_in).is_file()
    assert seed.preset.endswith(seed.number) or seed.number == "001"  # named after the document


def test_the_gaps_of_issue_26_are_stated():
    """The issue's table: every seed has its whole model's entries, 000 and 002
    ``next_token_encoder``, 004 ``embedding`` then ``encoder_layer``; 002 names the adapter's
    W_x = I; 003 names W_o = I and ε; 004 names its layout slip, its intermediates and its
    decoder; the paper has no gap."""
    by = {s.number: s for s in SEEDS}
    assert [n for n, s in by.items() if not s.whole_model] == []
    assert by["000"].whole_model == by["002"].whole_model == ("next_token_encoder",)
    assert by["004"].whole_model == ("embedding", "encoder_layer")
    assert by["001"].cannot_express == ()
    gaps = {n: " ".join(s.cannot_express) for n, s in by.items()}
    # seed 000's variations are switches now (tests/spec/test_seed_models.py); only a deeper FFN is not
    assert "G(s)" not in gaps["000"] and "more than three hidden layers" in gaps["000"]
    assert "res_post" in " ".join(what for _, what in by["000"].parts)
    assert "W_x = I" in gaps["002"] and "lookup" in gaps["002"]
    assert "W_o = I" in gaps["003"] and "project's choice" in gaps["003"]
    assert "intermediates" in gaps["004"] and "μ, σ" in gaps["004"]
    assert "encoder_layer on X = Eᵀ" in gaps["004"] and "1×36" in gaps["004"]


def test_listing_names_every_document_within_80_columns(capsys):
    rc, out, err = run(capsys)
    assert rc == 0 and err == ""
    for s in SEEDS:
        for text in (s.name, s.file, s.preset):
            assert text in out, text
    assert out.count(NONE_YET) == 0
    long = [line for line in out.splitlines() if len(line) > 80]
    assert not long, long
    assert "X = Eᵀ" in out  # an equation is not split over two lines


def test_json_lists_every_field(capsys):
    rc, out, _ = run(capsys, "--json")
    assert rc == 0
    data = json.loads(out)
    assert data["directory"] == "../shared/seeds"
    assert [r["seed"] for r in data["seeds"]] == sorted(DOCUMENTS)
    fields = {"seed", "name", "file", "title", "author", "preset", "whole_model", "whole_model_text",
              "parts", "cannot_express", "tested_in"}
    for row in data["seeds"]:
        assert set(row) == fields
        assert row["whole_model_text"] == (", ".join(row["whole_model"]) or NONE_YET)


@pytest.mark.parametrize("key", ["4", "004", "tutorial-004", "004_633e602a836c2656.txt"])
def test_one_seed_by_number_file_or_preset(capsys, key):
    rc, out, _ = run(capsys, key, "--json")
    assert rc == 0
    assert [r["seed"] for r in json.loads(out)["seeds"]] == ["004"]
    assert find(key).number == "004"


@pytest.mark.parametrize("key", ["7", "hf-gpt2", "", "004.txt"])
def test_unknown_seed_is_one_line_error(capsys, key):
    rc, out, err = run(capsys, key)
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and re.match(r"error: unknown seed ", lines[0]), err
