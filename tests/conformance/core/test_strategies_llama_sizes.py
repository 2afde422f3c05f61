"""Llama 2 and 3.1 in the strategies (issue 38).

The Llama 2/3 70B group size (kv_group 8), where a plugin declares it, is drawn with a head count it
divides, and cheaply: H = 8, one key/value head, not the 16 heads two kv heads of 8 would need
(``_hyper.MOST_SHOWN_HEADS``); the order of kv heads is shown by the groups of 2 to 4.

Llama 3.1's RoPE scaling (``rope_scaling="llama3"``) is drawn where it changes a frequency: at a base
of 500000 or more with a rotated width of 4 or more, some pair's wavelength is 2048 or more (at base
10000 and width 4 none is, and a wrong declaration would pass unseen).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from ftspec.conformance.core.strategies import cases, hyperparameters, variant_sets
from ftspec.conformance.core.strategies._hyper import structural_size
from ftspec.conformance.core.strategies._variants import _changed
from ftspec.spec import REGISTRY
from ftspec.spec.entry import rotary_rows
from ftspec.spec.variants import PAPER, SWITCHES

_FIND = settings(database=None, max_examples=400, derandomize=True)


def test_kv_group_8_is_searched_where_it_is_declared():
    """kv_group 8 is not among the values a search of every set draws (1-4: the same rule ⌊h/G⌋, and
    8 drawn at H = 8 cost a sixth more per attention example); a plugin that declares it is searched
    under it (its declared sets are the ones drawn)."""
    assert 8 not in SWITCHES["kv_group"].choices
    declared = PAPER.replace(kv_group=8)
    c = find(cases("mh_attention", variants=[declared]), lambda c: True, settings=_FIND)
    assert c.variant.kv_group == 8 and c.hyper["H"] % 8 == 0, (c.variant.describe(), c.hyper)


_CASES = (("mh_attention", {}), ("causal_self_attention", {"position_bias": "alibi"}))


@pytest.mark.parametrize("name, changes", _CASES)
def test_kv_group_8_is_drawn_with_eight_heads(name, changes):
    """Every default draw under G = 8 has H = 8 (a multiple of G, the least): the entry's check accepts it
    and no example pays for 16 heads; ALiBi's non-power-of-two rule is left to the smaller groups too."""
    e = REGISTRY[name]
    v = PAPER.replace(kv_group=8, **changes)
    assert structural_size(e, "H", v) == 8
    seen = []

    @given(hyperparameters(e, variant=v, budget="default"))
    @settings(database=None, max_examples=10, derandomize=True)
    def draw(h):
        e.check(h, v)
        seen.append(h["H"])

    draw()
    assert set(seen) == {8}, (name, seen)


def test_smaller_groups_keep_two_kv_heads():
    e = REGISTRY["mh_attention"]
    assert [structural_size(e, "H", PAPER.replace(kv_group=g)) for g in (2, 3, 4)] == [4, 6, 8]


def test_llama3_scaling_is_drawn():
    e = REGISTRY["causal_self_attention"]
    v = find(variant_sets(e), lambda v: v.rope_scaling == "llama3", settings=_FIND)
    assert v.rotary != "none"


def _scaled_pairs(r: int, base: float) -> int:
    """Pairs of a width-r RoPE whose wavelength 2π·base^(2i/r) is 2048 or more (llama3 moves them)."""
    return sum(2 * math.pi * base ** (2 * i / r) >= 2048 for i in range(r // 2))


@pytest.mark.parametrize("name", ["causal_self_attention", "gpt2_layer"])
def test_llama3_scaling_is_drawn_where_it_moves_a_frequency(name):
    e = REGISTRY[name]
    drawn = []

    # the rotary group as variant_sets draws it (with a pairing: base, share, scaling), llama3's draws
    llama3 = _changed("rotary").filter(lambda c: c["rope_scaling"] == "llama3").map(lambda c: PAPER.replace(**c))

    @given(llama3.flatmap(lambda v: st.tuples(st.just(v), hyperparameters(e, variant=v, budget="default"))))
    @settings(database=None, max_examples=15, derandomize=True)
    def draw(pair):
        v, h = pair
        drawn.append((v.rope_base, rotary_rows(h["d_attn"], v.rotary_fraction)))

    draw()
    assert drawn
    for base, r in drawn:
        assert base >= 500000.0 and r >= 4 and _scaled_pairs(r, base) >= 1, (base, r)
