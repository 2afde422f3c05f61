"""The sizes of a mixture of experts (``moe_mlp``, spec 2.11): k chosen experts are drawn within
[1, E] for the E drawn (``strategies._budgets.AT_MOST``), not drawn freely and discarded, and the
simplest draw is E = 3, k = 2: one expert left out, so that the chosen weights' renormalisation
(``moe_topk_norm``) and the choice itself show in Hypothesis's first example."""

from __future__ import annotations

from hypothesis import Phase, find, given, seed, settings

from ftspec.conformance.core.strategies import hyperparameters
from ftspec.conformance.core.strategies._budgets import BUDGETS


def test_k_is_drawn_within_the_experts_drawn():
    seen: list[tuple[int, int]] = []

    @settings(max_examples=80, database=None, deadline=None, phases=(Phase.generate,))
    @seed(3)
    @given(hyperparameters("moe_mlp"))
    def draw(h):
        seen.append((h["E"], h["k"]))

    draw()
    assert len(seen) == 80  # none discarded
    assert all(1 <= k <= E <= BUDGETS["default"].experts for E, k in seen), seen
    assert any(k < E for E, k in seen) and any(k == E for E, k in seen), seen
    assert {E for E, _ in seen} >= {2, 3, 4}, seen


def test_the_simplest_draw_leaves_one_expert_out():
    h = find(hyperparameters("moe_mlp"), lambda h: True,
             settings=settings(database=None, phases=(Phase.generate, Phase.shrink)))
    assert (h["E"], h["k"]) == (3, 2)
