"""Identifying an implementation on one entry: its observations, then the search."""

from __future__ import annotations

import time
from typing import Any, Mapping, Optional, Sequence

from ftspec.spec.registry import Entry
from ftspec.spec.variants import PAPER, VariantSet

from ...core.case import Case
from ...core.examining import precision_of, rounded
from ..diagnosis import structure
from ...core.values import EPSILON_CANDIDATES, default_hyper
from .cases import (HEAD_SWITCHES, SEPARATING_KV_HEADS, SEPARATING_LENGTH, SEPARATING_WIDTH, _accepted, designed_cases,
                    _is_length, _separates_heads, separating_hyper)
from .identifier import EVALUATIONS, SECONDS, Identifier, _replace
from .observations import Observation
from .results import GroupResult, Identity
from .switches import IdentifyError, _current, _key
from ...core.tolerances import keeping_references


def observe(member: Any, entry: Entry, cases: Sequence[tuple[str, Case]], dtype: str, *,
            timeout: float = 60.0) -> list[Observation]:
    """Call the implementation once per case (the harness's call machinery: conversions, a timeout,
    a plugin's exception recorded, never raised)."""
    from ...core.execute import CallTimeout, call_member, describe_exception

    out = []
    for label, case in cases:
        prepared = rounded(case, dtype)
        outputs, error = None, ""
        try:
            outputs, _ = call_member(member, entry, prepared.inputs, prepared.params, case, dtype, timeout, False)
        except CallTimeout as exc:
            error = f"timed out: {exc}"
        except Exception as exc:  # noqa: BLE001 - a refusal is an observation
            error = describe_exception(exc)
        out.append(Observation(label, entry, dict(case.hyper), prepared.inputs, prepared.params, outputs, dtype,
                               precision_of(member, dtype), error, structure(entry, case, limit=4)))
    return out


def call_variant(impl: Any, wanted: Optional[VariantSet] = None, algorithm: str = "") -> VariantSet:
    """The set the implementation is called with at ``algorithm``: ``wanted`` if it declares it
    there, else its first set declared there (the paper's for an implementation of every set)."""
    declared = impl.variants_for(algorithm)
    at = f" for {algorithm}" if impl.per_algorithm else ""
    if wanted is not None:
        if not (declared == "all" or wanted in declared):
            raise IdentifyError(f"{impl.name} does not declare the variant set {wanted.describe()}{at}; "
                                f"it declares {_declared(declared)}")
        return wanted
    if declared == "all":
        return PAPER
    if not declared:
        raise IdentifyError(f"{impl.name} declares no variant set{at} to be called with")
    return declared[0]


def _declared(declared: Any) -> str:
    return "every set" if declared == "all" else ", ".join(v.describe() for v in declared)


def case_hyper(impl: Any, entry: Entry, variant: VariantSet = PAPER) -> dict[str, int]:
    """The sizes of the designed cases, within the implementation's limits (``Limits``,
    impls/api.py) as the search's draws are (conformance/core/strategies/_hyper.py): each default
    size moved into [minimum, maximum] (a length also under an ℓ_max maximum), the equalities
    settled by raising sizes; where that leaves the limits, the least sizes they allow (the
    entry's and the limits' minima, settled). So every set of limits under which ``certify`` can
    draw a case gives identify a case; IdentifyError (one line, naming why) when none exists."""
    limits = impl.limits_for(entry.name)
    low = {n: max(int(entry.minimum.get(n, 1)), int(limits.minimum.get(n, 1))) for n in entry.hyper}
    high = _highest(limits, entry)
    near = {n: min(max(v, low[n]), max(high[n], low[n])) for n, v in default_hyper(entry).items()}
    for start in (near, low):
        hyper = _with_context(entry, limits.settle(start), high, variant)
        if limits.admits(hyper) and _accepted(entry, hyper, variant):
            return hyper
    why = "; ".join(limits.problems(list(entry.hyper), entry.minimum)) or "no sizes satisfy them and the entry"
    raise IdentifyError(f"{entry.name}: {impl.name}'s limits ({limits.describe()}) admit no case: {why}")


def _highest(limits: Any, entry: Entry) -> dict[str, int]:
    """The largest value the limits allow each size (a length: also at most an ℓ_max maximum; a
    size that must be a multiple of k: the largest multiple within its maximum)."""
    out = {}
    for n in entry.hyper:
        most = int(limits.maximum.get(n, 1 << 30))
        if _is_length(n) and "ell_max" in limits.maximum:
            most = min(most, int(limits.maximum["ell_max"]))
        k = int(limits.multiple_of.get(n, 1))
        out[n] = most // k * k if most >= k else most
    return out


def _with_context(entry: Entry, hyper: dict[str, int], high: Mapping[str, int],
                  variant: VariantSet) -> dict[str, int]:
    """``hyper`` with ℓ_max raised (within its maximum) until the entry's check accepts the lengths."""
    if "ell_max" not in hyper:
        return hyper
    longest = max([v for n, v in hyper.items() if _is_length(n)], default=1)
    for ell_max in range(max(hyper["ell_max"], longest), high["ell_max"] + 1):
        if _accepted(entry, {**hyper, "ell_max": ell_max}, variant):
            return {**hyper, "ell_max": ell_max}
        if ell_max > longest + sum(hyper.values()):
            break
    return hyper


@keeping_references()  # the designed cases are judged under many candidate sets
def identify(member: Any, entry: Entry, dtype: str = "float64", *, variant: Optional[VariantSet] = None,
             seconds: float = SECONDS, evaluations: int = EVALUATIONS, timeout: float = 60.0) -> Identity:
    """Which conventions ``member`` (an ``execute.Member``) follows at ``entry``, at ``dtype``.

    ``variant``: the set to call it with (one it declares; default its first, or the paper's for an
    implementation of every set). ``seconds``: the budget of the whole entry, calls included."""
    started = time.perf_counter()
    impl = member.impl
    called = call_variant(impl, variant, entry.name)
    hyper = case_hyper(impl, entry, called)
    limits = impl.limits_for(entry.name)

    def admits(h: Mapping[str, int]) -> bool:
        return impl.admits(entry.name, h)

    wide = separating_hyper(entry, hyper, called, admits, limits.settle)
    cases = designed_cases(entry, hyper, called, dtype, admits, separating=wide)
    before = member.seconds
    observations = observe(member, entry, cases, dtype, timeout=timeout)
    calls = member.seconds - before
    identity = search(entry, observations, project(called, entry), member.label, dtype,
                      seconds=max(seconds - (time.perf_counter() - started), 1.0), evaluations=evaluations)
    identity.declared = called.describe()
    for r in identity.groups:
        r.declared = _current(r.group, called)
    if all(o.outputs is None for o in observations):
        identity.notes.insert(0, f"the implementation refused every case: {observations[0].error}")
    reads = sorted(entry.switches & HEAD_SWITCHES)
    if reads and not any(_separates_heads(entry, o.hyper, called) for o in observations):
        identity.notes.append(f"no case within {impl.name}'s limits separates {', '.join(reads)} (they need "
                              f"d_attn >= {SEPARATING_WIDTH}, {SEPARATING_KV_HEADS} kv heads, lengths >= "
                              f"{SEPARATING_LENGTH}): they stay undecided")
    identity.seconds_calls = calls
    identity.seconds = time.perf_counter() - started
    return identity


def search(entry: Entry, observations: Sequence[Observation], start: VariantSet, subject: str, dtype: str, *,
           seconds: float = SECONDS, evaluations: int = EVALUATIONS) -> Identity:
    """The search over ``observations`` (``Identifier.run``) as an ``Identity``; ``start`` gives the
    parameter structure of the observations' parameters."""
    started = time.perf_counter()
    engine = Identifier(entry, observations, start, seconds=seconds, evaluations=evaluations)
    found, base, results = engine.run()
    chosen = _prefer_paper(found, results)
    s = engine.score(chosen)
    if s is None or s[0]:  # the paper's values do not fit together: keep the search's own
        chosen = found
        for r in results:
            r.chosen = _current(r.group, found)
            r.same_as = [v for v in r.same_as if _key(v) != _key(r.chosen)]
        s = engine.score(found)
    identity = Identity(entry.name, subject, dtype, "", chosen, groups=results, observations=list(observations),
                        fits=s is not None and s[0] == 0, base=base, presets=list(engine.presets_fitting),
                        cases_fit=len(observations) - (s[0] if s is not None else len(observations)),
                        evaluations=engine.evaluated, gave_up=engine.gave_up, notes=_notes(entry, results),
                        cannot_tell=any(r.cannot_tell or r.status == "cannot tell" for r in results),
                        untested=engine.unknown_seen and not engine.judged_seen)
    identity.seconds = time.perf_counter() - started
    return identity


def project(variant: VariantSet, entry: Entry) -> VariantSet:
    """The paper's set with ``variant``'s values for the switches ``entry`` reads (the others do not
    change its outputs, so nothing about them is identified)."""
    return PAPER.replace(**{k: getattr(variant, k) for k in entry.switches})


def _prefer_paper(found: VariantSet, results: list[GroupResult]) -> VariantSet:
    """The identified set with each switch at the paper's value wherever that is consistent: an
    undecided switch, and a decided one whose value the paper's is here ("paper" and the value it
    stands for; β under RMSNorm). A default is never written as a change: the expression moves only
    what the cases decide or need."""
    out = found
    for r in results:
        paper = _current(r.group, PAPER)
        same = {_key(v) for v in r.same_as} | {_key(r.chosen)}
        if _key(paper) in {_key(v) for v in r.consistent} and (r.status == "undecided" or _key(paper) in same):
            moved = _replace(out, paper)
            if moved is not None:
                out = moved
                if _key(paper) != _key(r.chosen):
                    # the values the same as the old choice are the same as the paper's only if it was one
                    r.same_as = [v for v in r.same_as if _key(v) != _key(paper)] + [r.chosen] if _key(paper) in same \
                        else []
                    r.chosen = paper
        elif r.consistent:
            moved = _replace(out, r.chosen)
            out = moved if moved is not None else out
    return out


def _notes(entry: Entry, results: list[GroupResult]) -> list[str]:
    out = []
    if any(r.group == "epsilon" for r in results):
        out.append("epsilon: a finite candidate list (" + ", ".join(f"{e:g}" for e in EPSILON_CANDIDATES)
                   + ", inside or outside the root, or none)")
    structural = sorted({r.group for r in results if r.untestable})
    if structural:
        out.append("parameter structure (" + ", ".join(structural) + "): values needing parameters that were "
                   "not given are not testable; the structure is that of the parameters given (an "
                   "implementation's: its declared set's)")
    return out
