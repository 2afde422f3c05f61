"""Partial rotary (``rotary_fraction`` f < 1: GPT-NeoX/Pythia ``rotary_pct``, GPT-J ``rotary_dim``, Phi
``partial_rotary_factor``), checked against its definition, not spec code: the first r = ⌊f·d_attn⌋
rows are a RoPE of width r (angles t·base^(−2i/r), not base^(−2i/d_attn)), the other rows pass bit for
bit; widths whose r is odd are refused; the value is any fraction in (0, 1]; the strategies draw it.
"""

from __future__ import annotations

import pytest
from hypothesis import find

from ftspec.conformance.core.strategies import hyperparameters, variant_sets
from ftspec.spec import SpecError
from ftspec.spec.registry import REGISTRY
from ftspec.spec.rotary import rotate
from ftspec.spec.variants import PAPER, parse

from .helpers import small_hyper

#: an 8×3 Q whose entries are distinct and exact
Q = [[(i + 1) * 0.25 - t * 0.5 for t in range(3)] for i in range(8)]


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
@pytest.mark.parametrize("fraction, r", [(0.5, 4), (0.25, 2)])
def test_the_first_r_rows_are_a_rope_of_width_r_and_the_rest_pass(pairing, fraction, r):
    v = PAPER.replace(rotary=pairing, rotary_fraction=fraction)
    got = rotate(Q, v)
    assert got[r:] == Q[r:]  # untouched
    alone = rotate(Q[:r], v.replace(rotary_fraction=1.0))  # RoPE of width r on those rows alone
    assert got[:r] == alone
    whole_width = rotate(Q, v.replace(rotary_fraction=1.0))[:r]
    if pairing == "half" or r > 2:  # the angles are base^(−2i/r): pair 1 turns at another speed than
        assert got[:r] != whole_width  # at width d_attn (interleaved r = 2: one pair, θ_0 = 1 both ways)


def test_the_rotated_width_must_hold_whole_pairs():
    e = REGISTRY["causal_self_attention"]
    v = PAPER.replace(rotary="half", rotary_fraction=0.5)
    e.check(small_hyper(e, d_attn=8), v)  # r = 4
    for d_attn in (6, 2):  # r = 3 (odd), r = 1
        with pytest.raises(SpecError) as err:
            e.check(small_hyper(e, d_attn=d_attn), v)
        assert err.value.argument == "d_attn"


def test_any_fraction_in_the_unit_interval_is_a_value():
    assert parse("rotary=half,rotary_fraction=0.4").rotary_fraction == 0.4  # Phi-2's partial_rotary_factor
    for bad in ("rotary_fraction=0", "rotary_fraction=1.5", "rotary_fraction=nan", "rotary_fraction=x"):
        with pytest.raises(ValueError):
            parse(bad)
    with pytest.raises(ValueError):
        PAPER.replace(rotary_fraction=True)


@pytest.mark.parametrize("name", ["attention", "causal_self_attention", "d_transformer"])
@pytest.mark.parametrize("fraction", [0.5, 0.25])
def test_the_strategies_draw_partial_rotary_with_two_pairs_and_rows_left_over(name, fraction):
    v = find(variant_sets(name), lambda v: v.rotary_fraction == fraction)
    assert v.rotary != "none"
    h = find(hyperparameters(name, variant=v, budget="quick"), lambda h: True)
    r = int(h["d_attn"] * fraction)
    assert r >= 4 and r % 2 == 0 and r < h["d_attn"]  # two rotated pairs (the pairing shows), rows left
