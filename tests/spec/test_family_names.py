"""Family names (spec/variants.py ``FAMILIES``): one name per model family people ship, read by ``parse`` and ``preset``
as a preset is, holding conventions and no size, listed by ``ftspec spec families``.

The sets themselves are tested against what each family's plugin declares in
tests/impls/test_hf_family_names.py; here, the names' behaviour.
"""

from __future__ import annotations

import json

import pytest

from ftspec.spec.variants import FAMILIES, LATER, PAPER, PRESETS, parse, preset
from ftspec.tools.cli import main

#: the families issue 38 lists, each by the name it is declared by
ISSUE_38 = {"mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3", "gpt-neox", "falcon", "mixtral", "opt",
            "bloom", "t5", "t5-v1.1", "bart", "marian"}


def test_every_family_of_the_issue_has_a_name():
    assert ISSUE_38 <= set(FAMILIES)


def test_a_family_name_reads_as_a_preset_with_sizes_after_it():
    v = parse("qwen3+kv_group=4,window=8")
    assert v == FAMILIES["qwen3"].variant.replace(kv_group=4, window=8)
    assert preset("qwen3") == parse("llama+qk_norm=rms,rope_base=1000000.0")
    assert v.qk_norm == "rms" and v.rope_base == 1e6 and v.kv_group == 4


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_family_holds_no_size(name):
    """Presets hold conventions (issue 38): every size at its default; a family's layer pattern, the period
    of its global layers, is the one exception (Gemma 2's 2, Gemma 3's 6: its conventions), and a
    configuration may change it as any size."""
    v = FAMILIES[name].variant
    assert v.kv_group == 1 and v.window == 0, name
    assert v.global_every in (0, 2, 6)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_family_differs_from_the_paper_or_is_a_preset(name):
    f = FAMILIES[name]
    assert f.variant != PAPER
    if name in PRESETS:
        assert f.variant == PRESETS[name]


def test_a_family_does_not_change_any_label():
    """describe() prints presets only: a set equal to a family without a preset keeps its long label."""
    v = preset("qwen3")
    assert v.name is None and v.describe().startswith("phuong-hutter+")
    assert "qwen3" not in PRESETS and LATER  # the presets, and so every fixture's label, are unchanged


def test_an_unknown_name_names_both_lists():
    with pytest.raises(ValueError, match="unknown variant preset or family 'qwen9'.*families: .*qwen3"):
        preset("qwen9")


def test_the_padded_set_adds_the_padded_switches():
    assert FAMILIES["opt"].padded_variant == FAMILIES["opt"].variant.replace(pad_positions="real")
    assert FAMILIES["qwen3"].padded_variant == FAMILIES["qwen3"].variant


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["spec", "families", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_listing_names_every_family_within_80_columns(capsys):
    rc, out, _ = run(capsys)
    assert rc == 0
    for name, f in FAMILIES.items():
        assert f"\n{name}: {f.title}" in out
    assert max(map(len, out.splitlines())) <= 80


def test_the_json_listing_is_the_table(capsys):
    rc, out, _ = run(capsys, "--json")
    rows = json.loads(out)["families"]
    assert rc == 0 and [r["name"] for r in rows] == list(FAMILIES)
    assert all(parse(r["declare"]).hash == r["hash"] for r in rows)


def test_an_unknown_family_is_one_line(capsys):
    rc, out, err = run(capsys, "qwen9")
    assert rc == 2 and not out and len(err.strip().splitlines()) == 1 and "qwen3" in err
