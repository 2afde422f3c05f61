"""The first examples of a search exercise order (issue 35 finding 6).

Hypothesis's first example is its simplest draw, and its early examples extend random prefixes
with the simplest choices; with every size shrinking to 1 the first 16 examples of a causal
attention search had ℓ = 1, where the causal mask, padding and RoPE positions do nothing, and a
wrong mask was first caught at example 17. The simplest sequence length is now 2, the simplest
head count 2 (two kv heads under grouped-query attention), the simplest mask causal and the
simplest padding pads the last position (conformance/core/strategies/_hyper.py, _masks.py),
while ℓ = 1 and H = 1 are drawn as often as before and stay one shrinking step away.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import Phase, given, seed, settings

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.strategies import cases
from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import Runner
from ftspec.impls.numpy import implementation as numpy_impl
from ftspec.spec.variants import PAPER
from ftspec.tools.zoo import build, mutant


def _first(name: str, n: int, variants="all", run_seed: int = 0) -> list[Case]:
    """The first ``n`` cases a search draws, in the runner's phases."""
    got: list[Case] = []

    @settings(max_examples=n, database=None, deadline=None, phases=(Phase.explicit, Phase.generate))
    @seed(run_seed)
    @given(cases(name, variants=variants))
    def search(case: Case) -> None:
        got.append(case)

    search()
    return got[:n]


def _masked_key(case: Case) -> bool:
    """Some query cannot see some key: the causal mask (ℓ ≥ 2), a padded key, a False in a mask."""
    if "causal" in case.algorithm and case.hyper.get("ell", 1) >= 2:
        return True
    return any(not np.asarray(v, dtype=bool).all() for k, v in case.inputs.items() if k in ("pad", "Mask"))


@pytest.mark.parametrize("name, variants", [
    ("causal_self_attention", "all"),
    ("padded_causal_self_attention", "all"),
    ("self_attention", [PAPER.replace(rotary="interleaved", kv_group=2)]),
])
def test_the_first_examples_have_order(name, variants):
    for run_seed in (0, 1):
        first = _first(name, 4, variants, run_seed)
        assert len(first) == 4
        ordered = [c for c in first if min(v for k, v in c.hyper.items() if k.startswith("ell")) > 1
                   and c.hyper["H"] >= 2 and (name == "self_attention" or _masked_key(c))]
        assert ordered, [c.describe() for c in first]
        assert first[0] in ordered  # Hypothesis's simplest draw is the structural one
        if variants != "all":  # RoPE on two pairs at least; two kv heads of two query heads each
            v = first[0].variant
            assert first[0].hyper["d_attn"] >= 4 and first[0].hyper["H"] >= 2 * v.kv_group


def test_the_smallest_sizes_are_still_drawn():
    """ℓ = 1 and H = 1 stay in the random draws (the swap keeps their share)."""
    seen = {"ell=1": 0, "H=1": 0}

    @settings(max_examples=150, database=None, deadline=None, derandomize=True)
    @given(cases("causal_self_attention"))
    def search(case: Case) -> None:
        seen["ell=1"] += case.hyper["ell"] == 1
        seen["H=1"] += case.hyper["H"] == 1

    search()
    assert seen["ell=1"] >= 5 and seen["H=1"] >= 5, seen


def _first_failure(impl, algorithm: str) -> int:
    runner = Runner([("m", impl)], RunConfig(seed=0, examples=16, call_timeout=20))
    runner.distinct_failures = 0
    runner.record_failure = lambda cell, *a, **k: setattr(cell, "status", "fail")  # type: ignore[method-assign]
    cell = runner.run([algorithm], ["float64"]).cells[0]
    assert cell.status == "fail", cell
    return int(cell.first_failure_examples)


@pytest.mark.parametrize("mutant_id, algorithm, declared", [
    ("causal-self-attention-sees-future", "causal_self_attention", None),  # was example 17
    ("padding-masks-queries", "padded_causal_self_attention", None),  # was 17 to 33
    ("rope-pairing-swapped", "causal_self_attention", PAPER.replace(rotary="interleaved")),  # was 17
])
def test_a_bug_seen_only_at_order_is_caught_at_the_first_example(mutant_id, algorithm, declared):
    impl = build(mutant(mutant_id))
    if declared is not None:
        impl = dataclasses.replace(impl, variants=[declared])
    assert _first_failure(impl, algorithm) == 1


def test_a_correct_plugin_passes_the_structural_first_examples():
    runner = Runner([("numpy", numpy_impl)], RunConfig(seed=0, examples=16, call_timeout=20))
    cell = runner.run(["padded_causal_self_attention"], ["float64"]).cells[0]
    assert cell.status == "pass" and cell.examples >= 16


def test_structural_sizes_stay_within_a_plugins_limits():
    """A plugin whose limits allow ℓ = 1 and H = 1 only is drawn those sizes (the plain draw)."""
    from ftspec.impls.api import Limits

    got = []

    @settings(max_examples=20, database=None, deadline=None, derandomize=True)
    @given(cases("causal_self_attention", limits=Limits(maximum={"ell": 1, "H": 1})))
    def search(case: Case) -> None:
        got.append(case)

    search()
    assert got and all(c.hyper["ell"] == 1 and c.hyper["H"] == 1 for c in got)
