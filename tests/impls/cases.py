"""Fixed, deterministic small cases for every registry entry and variant.

Used by the implementation tests (the full Hypothesis harness lives in
``conformance/``). A case is the harness's ``Case`` built by the one value
builder (``conformance/core/values.py``) at the entry's ``DEFAULT_HYPER`` row,
for each variant set of the one enumeration (``variant_enumeration``), so a
new entry is covered without touching this file.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Optional

import numpy as np

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.values import default_hyper, stated_by_twin, variant_enumeration
from ftspec.fixtures.cases import ONLY_AT
from ftspec.spec import PAPER, VariantSet
from ftspec.spec.entry import Kind
from ftspec.spec.registry import REGISTRY, Entry

__all__ = ["FORWARD", "TAUS", "TRAINING", "Case", "accepted_case", "all_cases", "findings_of", "hyper_for", "make_case",
           "variants_for"]


def hyper_for(entry: Entry) -> dict[str, int]:
    """The entry's row of ``DEFAULT_HYPER``."""
    return default_hyper(entry)


def variants_for(entry: Entry) -> list[VariantSet]:
    """The variant sets of ``variant_enumeration`` (the paper's, presets, single switches, combinations),
    less a padded entry's copies of its unpadded twin's switches (``stated_by_twin``) and the single
    switches the fixtures keep at a few entries only (``ONLY_AT``: their code path is taken at every
    entry by another value of the switch, or is one function every attention calls)."""
    return [v for slug, v in variant_enumeration(entry)
            if not stated_by_twin(entry, slug, v) and entry.name in ONLY_AT.get(slug, (entry.name,))]


#: every temperature regime: the argmax limit, below and above 1, 1, the uniform limit
TAUS = (0.0, 0.7, 1.0, 2.5, float("inf"))


def make_case(entry: Entry, variant: VariantSet, seed: int = 0, hyper: Optional[dict[str, int]] = None,
              empty_query: bool = False, tau: Optional[float] = None) -> Case:
    """Well-scaled inputs and parameters for ``entry`` under ``variant`` (``Case.build``).

    ``empty_query``: the mask's last query column all False; ``tau``: the
    temperature (default: ``TAUS[seed % 5]``)."""
    given: dict[str, Any] = {}
    if any(s.kind == Kind.TEMPERATURE for s in entry.inputs):
        given["tau"] = TAUS[seed % len(TAUS)] if tau is None else tau
    case = Case.build(entry, hyper or default_hyper(entry, variant), variant, seed=seed, given=given)
    if empty_query:
        for spec in entry.inputs:
            if spec.kind == Kind.MASK:
                case.inputs[spec.name][:, -1] = False
    return case


def first_accepted(entry: Entry, variant: VariantSet, candidates: Iterator[Case]) -> Case:
    """The first of ``candidates`` (at most 20) that the spec accepts under ``variant``."""
    from ftspec.spec import SpecError, evaluate

    for _, case in zip(range(20), candidates):
        try:
            evaluate(entry.name, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=variant)
        except SpecError:
            continue
        return case
    raise AssertionError(f"no accepted case for {entry.name} under {variant.describe()}")


def accepted_case(entry: Entry, variant: VariantSet, seed: int = 0, **kw: Any) -> Case:
    """A case the spec accepts: the next seed when it refuses one (e.g. a ReLU
    column that is all zeros before an ε-free layer norm)."""
    return first_accepted(entry, variant, (make_case(entry, variant, seed=seed + 1000 * attempt, **kw)
                                           for attempt in range(20)))


FORWARD = ("component", "layer", "architecture")
TRAINING = ("training", "inference")


def all_cases(families: tuple[str, ...] = FORWARD) -> Iterator[Case]:
    """Fixed cases of every registry entry of the given families."""
    for entry in REGISTRY.values():
        if entry.family not in families:
            continue
        sampled = any(spec.kind == Kind.TEMPERATURE for spec in entry.inputs)
        for variant in variants_for(entry):
            if sampled:  # every τ regime, for the paper's set at least
                for tau in (TAUS if variant == PAPER else TAUS[1:2]):
                    yield accepted_case(entry, variant, tau=tau)
                continue
            yield accepted_case(entry, variant)
            if "empty_query" in entry.switches and variant.empty_query != "error":
                yield accepted_case(entry, variant, seed=1, empty_query=True)


def with_all_four_biases(impl: Any) -> Any:
    """The plugin computing with all four biases where the variant drops some: the missing ones
    added to the parameters (0.5 each) and every algorithm run under attn_bias_at="all"."""
    def wrap(fn: Any) -> Any:
        def wrong(i: Any, p: Any, ctx: Any) -> Any:
            extra = dict(p)
            for name, W in p.items():
                leaf = name.rsplit(".", 1)[-1]
                if leaf in ("W_q", "W_k", "W_v", "W_o"):
                    extra.setdefault(name[:-3] + "b_" + leaf[-1], W[:, 0] * 0 + 0.5)
            return fn(i, extra, dataclasses.replace(ctx, variant=ctx.variant.replace(attn_bias_at="all")))
        return wrong
    return dataclasses.replace(impl, name=impl.name + "-all-biases",
                               algorithms={k: wrap(f) for k, f in impl.algorithms.items()})


def labelled_case(label: str, variants: dict[str, VariantSet], seed: int) -> Case:
    """The case of a test table's ``label`` ("algorithm+what"): its algorithm at its default sizes
    under ``variants[label]``, drawn with ``seed``; a cached decoding prefills one token (so that
    its decoding steps, where the switches under test act, are most of the case)."""
    algorithm = label.partition("+")[0]
    given = {"n_prefill": np.array(1)} if algorithm == "cached_decoding" else None
    return Case.build(algorithm, variant=variants[label], seed=seed, given=given)



def findings_of(name: str, case: Case, variant: VariantSet, dtype: str = "float32") -> list[str]:
    """The harness's findings for plugin ``name`` on ``case`` at ``dtype``, judged against the spec
    under ``variant`` (as ``ftspec replay`` judges one case), each as "check: message"."""
    from ftspec.conformance.core.examining import examine_case
    from ftspec.conformance.core.execute import Member
    from ftspec.impls.discovery import load

    impl = load(name)
    outcome = examine_case(Member(impl.name, impl, "cpu"), case, dtype, timeout=60.0, variant=variant,
                           batch=False)
    return [f"{f.check}: {f.message}" for f in outcome.judgement.findings]


def float64_findings(impl: Any, case: Case) -> list[str]:
    """The harness's findings for ``impl`` (an Implementation) on ``case`` as built (not rounded), at
    float64 against the spec's float64 reference, each as "check: message"."""
    from ftspec.conformance.core.execute import Member, examine
    from ftspec.conformance.core.tolerances import reference

    ref = reference(case.entry, case.inputs, case.params, hyper=case.hyper, variant=case.variant, dtype="float64")
    outcome = examine(Member(impl.name, impl, "cpu"), case, case.inputs, case.params, ref, dtype="float64",
                      timeout=120.0)
    return [f"{f.check}: {f.message}" for f in outcome.judgement.findings]


def answering_as(impl: Any, label: str, **switches: Any) -> Any:
    """``impl`` answering every call as under its declared set with ``switches`` changed (the plugin that
    ignores a switch, named ``<name>-<label>``): what a wrong implementation of that switch computes."""
    def wrap(fn: Any) -> Any:
        def wrong(i: Any, p: Any, ctx: Any) -> Any:
            return fn(i, p, dataclasses.replace(ctx, variant=ctx.variant.replace(**switches)))
        return wrong
    return dataclasses.replace(impl, name=f"{impl.name}-{label}",
                               algorithms={k: wrap(f) for k, f in impl.algorithms.items()})


def outputs_of(name: str, case: Case) -> dict[str, np.ndarray]:
    """Plugin ``name``'s outputs on ``case`` at float32, called as the harness calls it (the declared
    set, ``case.variant``, in the call's context): what a diagnosis reads."""
    from ftspec.conformance.core.examining import rounded
    from ftspec.conformance.core.execute import Member, call_member
    from ftspec.impls.discovery import load

    impl = load(name)
    prepared = rounded(case, "float32")
    outputs, _ = call_member(Member(impl.name, impl, "cpu"), case.entry, prepared.inputs, prepared.params, case,
                             "float32", 60.0, False)
    return outputs


def layer_or_model_case(algorithm: str, layer: VariantSet, sizes: dict[str, int], model: VariantSet,
                        model_sizes: dict[str, int]) -> tuple[VariantSet, Case]:
    """(declared set, case) of a released-size decoder family's four checks (the Gemma 2 and 3
    27B files): its layers under ``layer`` at ``sizes``, unpadded, and its models under ``model``
    on distinct tokens without padding, so that every query reads several keys and the scale and
    the angles of the scores show."""
    if algorithm in ("gpt2_layer", "padded_causal_self_attention"):
        given = {"pad": np.ones(sizes["ell"], dtype=bool)} if algorithm.startswith("padded_") else None
        return layer, Case.build(algorithm, sizes, layer, seed=1, given=given)
    given = {"x": np.array([3, 0, 5, 1])} | ({"n_prefill": np.array(1)} if algorithm == "cached_decoding" else
                                             {"pad": np.ones(4, dtype=bool)})
    return model, Case.build(algorithm, model_sizes, model, seed=1, given=given)
