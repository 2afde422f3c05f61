"""A family's name (spec/variants.py ``FAMILIES``) names what its plugin certifies: for every family with a
bundled plugin, each algorithm the plugin offers declares the family's set (its padded entries the
family's padded set), up to the sizes a configuration chooses (kv_group, window, global_every, the
local RoPE base that only a windowed layer pattern reads, T5's bucket parameters), compared on the
switches the entry reads under the family's set. A family row that claimed a convention its certified
plugin does not run (or a plugin that drifted from its family) fails here, naming the switch.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ftspec.impls.discovery import load
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import FAMILIES, PAPER, VariantSet, parse

#: what a configuration chooses (the families' ``sizes``): set to the family's own before comparing
SIZES = ("kv_group", "window", "global_every", "rope_local_base", "rel_buckets", "rel_max_distance")


def _on(v: VariantSet, switches: frozenset[str], sizes_of: VariantSet) -> dict:
    same = v.replace(**{s: getattr(sizes_of, s) for s in SIZES})
    return {s: getattr(same, s) for s in sorted(switches)}


def _mismatch(want: VariantSet, declared: tuple[VariantSet, ...], switches: frozenset[str]) -> str:
    """"" when one declared set is ``want`` on ``switches`` (sizes aside), else the closest one's
    differences."""
    target = _on(want, switches, want)
    best = None
    for d in declared:
        got = _on(d, switches, want)
        diff = {k: (got[k], target[k]) for k in target if got[k] != target[k]}
        if not diff:
            return ""
        if best is None or len(diff) < len(best):
            best = diff
    return ", ".join(f"{k}: declared {g!r}, family {w!r}" for k, (g, w) in sorted((best or {}).items()))


CERTIFIED = sorted(f.name for f in FAMILIES.values() if f.plugin)


@pytest.mark.parametrize("name", CERTIFIED)
def test_the_family_set_is_what_its_plugin_declares(name):
    family = FAMILIES[name]
    impl = load(family.plugin)
    assert set(family.algorithms) <= set(impl.algorithms), (family.plugin, family.algorithms)
    wrong = {}
    for algorithm in family.algorithms or impl.algorithms:
        declared = impl.variants_for(algorithm)
        assert declared != "all", (family.plugin, algorithm)
        want = family.padded_variant if algorithm.startswith("padded_") else family.variant
        entry = REGISTRY[algorithm]  # the switches the entry reads under the family's set (not ε where no norm is)
        found = _mismatch(want, tuple(declared), entry.switches - entry.unread(want))
        if found:
            wrong[algorithm] = found
    assert not wrong, f"{family.plugin} against family {name!r}: {wrong}"


def test_a_changed_convention_is_seen():
    """The comparison can fail: Qwen3's family read without its QK-norm does not match its plugin."""
    impl = load(FAMILIES["qwen3"].plugin)
    algorithm = "gpt2_layer"
    wrong = parse(FAMILIES["qwen3"].text + ",qk_norm=none")
    entry = REGISTRY[algorithm]
    assert "qk_norm" in _mismatch(wrong, tuple(impl.variants_for(algorithm)), entry.switches - entry.unread(wrong))


def test_sizes_are_not_compared_and_conventions_are():
    switches = frozenset({"kv_group", "epsilon"})
    assert _mismatch(PAPER, (PAPER.replace(kv_group=4),), switches) == ""
    assert "epsilon" in _mismatch(PAPER, (PAPER.replace(epsilon=1e-5, epsilon_placement="inside_root"),),
                                  switches)
