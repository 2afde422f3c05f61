"""The bug zoo: big enough, covering every registry entry, and every mutant a real bug.

A mutant that builds but computes what the correct implementation computes
would inflate the mutation score's denominator with a bug that is not one;
each non-behaviour mutant therefore has a fixed witness case on which its
output differs from the correct plugin's (tools/zoo/witness.py), unless it is
declared equivalent there.
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.impls.api import FLOAT_DTYPES
from ftspec.impls.discovery import load
from ftspec.spec.registry import REGISTRY
from ftspec.tools.zoo import MUTANTS, build
from ftspec.tools.zoo.injection import active_patches
from ftspec.tools.zoo.witness import _call, differs, fixed_case, witness_case

ALL_ENTRIES = set(REGISTRY)
NUMERIC = [m for m in MUTANTS.values() if m.kind != "behaviour"]


def test_the_zoo_has_at_least_40_mutants():
    assert len(MUTANTS) >= 40
    assert len({m.id for m in MUTANTS.values()}) == len(MUTANTS)


def test_every_registry_entry_is_broken_and_searched_by_some_mutant():
    broken = {name for m in MUTANTS.values() for name in m.breaks}
    searched = {name for m in MUTANTS.values() for name in m.targets}
    assert ALL_ENTRIES - broken == set(), "entries no mutant breaks"
    assert ALL_ENTRIES - searched == set(), "entries no mutant's bench run searches"


@pytest.mark.parametrize("m", MUTANTS.values(), ids=list(MUTANTS))
def test_each_mutant_is_well_formed_and_builds(m):
    assert set(m.breaks) <= ALL_ENTRIES
    assert set(m.targets) <= set(m.breaks)
    assert set(m.dtypes) <= set(FLOAT_DTYPES) and set(m.equivalent) <= set(FLOAT_DTYPES)
    assert m.source or m.kind == "behaviour", "say where the bug comes from"
    assert not (set(m.equivalent) & set(m.dtypes)) or m.equivalence, "an equivalence needs its reason"
    impl = build(m)
    base = load(m.base)
    assert impl.name == f"mutant:{m.id}"
    for name in m.breaks:
        assert impl.algorithms[name] is not base.algorithms[name]
    for name in set(base.algorithms) - set(m.breaks):
        assert impl.algorithms[name] is base.algorithms[name]


@pytest.mark.parametrize("m", NUMERIC, ids=[m.id for m in NUMERIC])
def test_each_mutant_differs_from_the_correct_implementation_on_its_witness(m):
    outcome = differs(m)
    assert outcome.differs, f"{m.id}: {outcome.detail}"


def test_source_edits_are_undone_after_each_call():
    m = MUTANTS["softmax-over-queries"]
    case = witness_case(m)
    base = load("numpy")
    before = _call(base, case)
    assert differs(m).differs
    assert active_patches() == 0
    after = _call(base, case)  # the correct plugin is correct again
    for k in before:
        np.testing.assert_array_equal(before[k], after[k])


def test_a_helper_bug_reaches_the_algorithms_built_on_it():
    # one edit of components.attention_fwd shows in Algorithm 4 and in a whole GPT-2 layer
    m = MUTANTS["mask-polarity-inverted"]
    assert differs(m, case=fixed_case("gpt2_layer")).differs
    assert differs(m, case=fixed_case("attention", inputs={"Mask": np.ones((4, 3), bool)},
                                      variant={"empty_query": "zeros"})).differs
