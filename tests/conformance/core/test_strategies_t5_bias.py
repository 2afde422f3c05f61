"""T5's relative bias drawn at the self-attention entries (spec 2.13): the bucket parameters are read there
under rel_bias="t5_buckets" alone (``Entry.read_with``), so they are drawn with it (group "rel_bias", one of
``T5_BUCKETS``: T5's 32/128 and the small pairs 6/5 and 8/10) and never moved without it; under a small pair
the drawn lengths reach the logarithmic buckets (a structural length: ℓ = 5 causally and 4 bidirectionally at
6/5), where 32/128 would need ℓ ≥ 9 (bidirectional) or 17 (causal)."""

from __future__ import annotations

import pytest
from hypothesis import Phase, find, given, seed, settings

from ftspec.conformance.core.strategies import hyperparameters, variant_sets
from ftspec.conformance.core.strategies._variants import T5_BUCKETS
from ftspec.spec.position_bias import t5_bucket
from ftspec.spec.variants import PAPER

ENTRIES = ("self_attention", "causal_self_attention", "padded_self_attention", "padded_causal_self_attention")


@pytest.mark.parametrize("name", ENTRIES)
def test_every_bucket_pair_is_drawn_with_the_bias_and_none_without(name):
    seen: list = []

    @settings(max_examples=400, database=None, deadline=None, phases=(Phase.generate,))
    @seed(7)
    @given(variant_sets(name))
    def draw(v):
        seen.append(v)

    draw()
    pairs = {(v.rel_buckets, v.rel_max_distance) for v in seen if v.rel_bias == "t5_buckets"}
    assert pairs == set(T5_BUCKETS)
    moved = [v for v in seen if v.rel_bias == "none" and (v.rel_buckets, v.rel_max_distance) != (32, 128)]
    assert not moved, [v.describe() for v in moved[:3]]


@pytest.mark.parametrize("name, causal, least", [("causal_self_attention", True, 5), ("self_attention", False, 4)])
def test_the_first_draw_under_a_small_pair_reaches_a_logarithmic_bucket(name, causal, least):
    v = PAPER.replace(rel_bias="t5_buckets", rel_buckets=6, rel_max_distance=5)
    simplest = find(hyperparameters(name, variant=v), lambda h: True)
    assert simplest["ell"] == least
    n = 6 if causal else 3
    far = t5_bucket(1 - least, not causal, 6, 5) % n  # the farthest key's bucket on its side
    assert far > n // 2  # past max_exact = n // 2: a logarithmic bucket beyond the first
    # and both sides of the query bidirectionally: a key after it takes the upper half
    assert causal or t5_bucket(least - 1, True, 6, 5) >= 3
