"""QK-norm drawn at the causal self-attention entries (spec 2.12), as at the layers, with the norm switches
it reads there: ε (and its placement) and the gain are read by that entry under qk_norm="rms" alone
(``Entry.read_with``), so they are drawn with it (group "qk_norm_norms") and a preset's projection leaves
them at the paper's value: no drawn set moves a switch the entry does not read (two sets that mean the
same thing would otherwise carry two hashes). The layers keep ε and the gain as groups of their own."""

from __future__ import annotations

import pytest
from hypothesis import Phase, find, given, seed, settings

from ftspec.conformance.core.strategies import preset_projections, variant_sets
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER

CAUSAL = ("causal_self_attention", "padded_causal_self_attention")
NORMS = ("epsilon", "epsilon_placement", "norm_gain")


@pytest.mark.parametrize("name", CAUSAL)
def test_qk_norm_is_drawn_with_each_norm_switch(name):
    qk = find(variant_sets(name), lambda v: v.qk_norm == "rms")
    assert qk.qk_norm == "rms"
    for wanted in (lambda v: v.epsilon > 0, lambda v: v.epsilon_placement == "outside_root",
                   lambda v: v.norm_gain == "one_plus_gamma"):
        found = find(variant_sets(name), wanted, settings=settings(database=None, max_examples=2000))
        assert found.qk_norm == "rms", found.describe()


@pytest.mark.parametrize("name", CAUSAL)
def test_no_set_moves_a_norm_switch_without_qk_norm(name):
    seen: list = []

    @settings(max_examples=300, database=None, deadline=None, phases=(Phase.generate,))
    @seed(5)
    @given(variant_sets(name))
    def draw(v):
        seen.append(v)

    draw()
    moved = [v for v in seen if v.qk_norm == "none" and any(getattr(v, n) != getattr(PAPER, n) for n in NORMS)]
    assert not moved, [v.describe() for v in moved[:3]]
    assert any(v.qk_norm == "rms" for v in seen)
    # the presets moving ε (hf-gpt2, llama, ...) project to sets without it: none has QK-norm
    for v in preset_projections(REGISTRY[name]):
        assert all(getattr(v, n) == getattr(PAPER, n) for n in NORMS), v.describe()


def test_a_layer_still_draws_epsilon_without_qk_norm():
    v = find(variant_sets("gpt2_layer"), lambda v: v.epsilon > 0 and v.qk_norm == "none")
    assert v.epsilon > 0
