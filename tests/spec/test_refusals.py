"""Refusals as data (spec/refusals.py) agree with the spec's code.

Every refusal of every entry is applied to a case the spec accepts, under
every variant set of the one enumeration where it applies: the case before
the transform is accepted, the case after it is refused with a ``SpecError``
that names the argument the refusal says. So the data cannot drift from the
code: a refusal the spec stopped making, or one it makes for another
reason, fails here. The table in docs/spec.md ("What the spec refuses") is
the registry's, generated, and compared here.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from tests.impls.cases import first_accepted
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.values import variant_enumeration
from ftspec.spec import PAPER, SpecError, evaluate
from ftspec.spec.entry import Kind
from ftspec.spec.registry import REGISTRY, Entry
from ftspec.spec.refusals import Refused, refusal_table
from ftspec.spec.variants import VariantSet

DOCS = Path(__file__).resolve().parents[2] / "docs" / "spec.md"


def _accepted(entry: Entry, variant: VariantSet) -> Case:
    """The value builder's case, the next seed where the spec refuses one (a ReLU column of zeros)."""
    return first_accepted(entry, variant, (Case.build(entry, variant=variant, seed=seed) for seed in range(20)))


def _refuses(entry: Entry, refused: Refused, variant: VariantSet) -> SpecError:
    with pytest.raises(SpecError) as info:
        evaluate(entry.name, refused.inputs, refused.params, hyper=refused.hyper, variant=variant)
    return info.value


@pytest.mark.parametrize("name", [n for n, e in REGISTRY.items() if e.refusals])
def test_every_refusal_is_the_spec_s(name):
    """Under every variant set of the enumeration where a refusal applies, the spec accepts the
    case and refuses its transform, naming the refusal's argument; each refusal is exercised."""
    entry = REGISTRY[name]
    exercised: set[str] = set()
    for _, variant in variant_enumeration(entry):
        refusals = [r for r in entry.refusals if r.applies(variant)]
        if not refusals:
            continue
        case = _accepted(entry, variant)
        for refusal in refusals:
            refused = refusal.apply(entry, case.hyper, variant, case.spec_inputs(), case.spec_params())
            if refused is None:
                continue
            exc = _refuses(entry, refused, variant)
            assert exc.argument == refused.argument, (
                f"{name} under {variant.describe()}: {refusal.name!r} is refused for {exc.argument!r}, "
                f"not {refused.argument!r}: {exc}")
            exercised.add(refusal.name)
    listed = {r.name for r in entry.refusals}
    assert exercised == listed, f"never exercised: {listed - exercised}"


def test_a_transform_leaves_its_arguments_alone():
    entry = REGISTRY["ed_training"]
    case = _accepted(entry, PAPER)
    inputs, params = case.spec_inputs(), case.spec_params()
    before = copy.deepcopy((dict(case.hyper), inputs, params))
    for refusal in entry.refusals:
        assert refusal.apply(entry, case.hyper, PAPER, inputs, params) is not None, refusal.name
    assert (dict(case.hyper), inputs, params) == before


def test_a_refusal_outside_its_switches_is_the_spec_accepting():
    """``when`` is no wider than the spec: with ε, a constant column is normalised (to β); under
    empty_query='zeros' a query with no key is answered. The transforms are the same."""
    for name, variant, which in (("layer_norm", PAPER.replace(epsilon=1e-5, epsilon_placement="inside_root"),
                                  "zero-variance"),
                                 ("gpt2_layer", PAPER.replace(epsilon=1e-6, epsilon_placement="outside_root"),
                                  "zero-variance"),
                                 ("mh_attention", PAPER.replace(empty_query="zeros"), "no key")):
        entry = REGISTRY[name]
        refusal = next(r for r in entry.refusals if which in r.name)
        assert not refusal.applies(variant)
        assert refusal.apply(entry, entry.sizes, variant, {}, {}) is None  # outside its switches: nothing
        case = _accepted(entry, variant)
        made = refusal.transform(entry, dict(case.hyper), variant, case.spec_inputs(), case.spec_params())
        assert made is not None
        evaluate(name, made.inputs, made.params, hyper=made.hyper, variant=variant)  # no SpecError


def _named(entry: Entry, fragment: str) -> bool:
    return any(fragment in r.name for r in entry.refusals)


def test_the_refusals_follow_what_each_entry_declares():
    """Read off the spec's code (every ``raise SpecError``): each entry lists the refusals its inputs,
    switches and checks imply (docs/spec.md, "What the spec refuses", says which are left out)."""
    for entry in REGISTRY.values():
        for spec in entry.inputs:
            if spec.kind in (Kind.TOKEN, Kind.POSITION, Kind.LENGTH, Kind.VARIATE, Kind.PROBABILITY,
                             Kind.TEMPERATURE, Kind.DISTRIBUTION):
                assert any(r.argument == spec.name for r in entry.refusals), (entry.name, spec.name)
        if "empty_query" in entry.switches:
            assert _named(entry, "no key"), entry.name
        if "epsilon_placement" in entry.switches and entry.family != "component" or entry.name in (
                "layer_norm", "rms_norm", "embedding"):
            assert _named(entry, "zero-variance"), entry.name
        if "ell_max" in entry.hyper and any(s.name in ("x", "z") for s in entry.inputs):
            assert _named(entry, "ℓ_max"), entry.name
        if entry.name == "layer_norm" or entry.family == "layer" or entry.name == "embedding":
            assert _named(entry, "unbiased variance"), entry.name


def test_the_docs_list_what_the_spec_refuses():
    """docs/spec.md's table is ``refusal_table(REGISTRY)``: regenerate it with
    ``python -c "from ftspec.spec.registry import REGISTRY; from ftspec.spec.refusals import refusal_table;
    print(refusal_table(list(REGISTRY.values())))"``."""
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(r"<!-- refusals: begin -->\n(.*?)<!-- refusals: end -->", text, re.S)
    assert found, "docs/spec.md lacks the refusal table's markers"
    assert found.group(1) == refusal_table(list(REGISTRY.values()))
