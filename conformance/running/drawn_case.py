"""One drawn case examined on every member of a search (``example``): its block
of value sets (conformance/core/blocks.py) and its batch prepared, their
references taken (``Runner.references_for``, at the screen's lanes; a failure is
confirmed on the value set's reference alone, ``Runner.alone``, as its case file
replays it), each value set examined on every active member, the members
compared with each other and with earlier searches' (``_agreement``), and
``hypothesis.target`` given the worst error/bound. A case the spec refuses by
definition is examined for the members' refusal (``_expect_refusal``).

These are the search's steps on one draw (impl_search.py holds the search's
state, search_rounds.py the Hypothesis rounds that draw).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Mapping, Optional

from hypothesis import reject, target

from ftspec.spec import SpecError
from ftspec.spec.entry import Kind

from ..core.blocks import value_sets
from ..core.calling import Prepared
from ..core.case import Case
from ..core.examining import precision_of, rounded
from ..core.execute import Member, examine
from ..core.judge import Finding, compare_pair
from ..core.refusals import check_refusals_into, expect_refusal, refused_empty_query
from ..core.tolerances import Reference, ToleranceModelError
from ..forensics.diagnosis import DIAGNOSED_CHECKS, FAILING_KEPT
from .reference_cache import CACHE_CASES
from .results import RATIOS_KEPT, SAMPLED_DTYPES, keep_sample
from .search_keys import _digest, _prepared_digests, _space_key

if TYPE_CHECKING:
    from .impl_search import _Search

__all__ = ["BATCH_CHECKS", "example"]

#: passing batch checks per (variant, sizes, batch length) in a search (see the runner's docstring)
BATCH_CHECKS = 3


Refs = dict[str, Reference]  # precision (``Implementation.precision_for``) -> the spec's reference under it


class _MemberFailed(Exception):
    def __init__(self, member: Member, finding: Finding, case: Case) -> None:
        super().__init__(f"{member.label} on {member.device}: {finding.check}: {finding.message}")
        self.member = member
        self.finding = finding
        self.case = case


def example(search: "_Search", case: Case, state: dict[str, Any]) -> None:
    """Examine the block of ``case`` (``blocks.value_sets``: the case and further value sets of
    its structure) on every active member; raises ``_MemberFailed`` for the first member that
    fails one of them (Hypothesis then shrinks the drawn case), and Hypothesis's rejection for a
    case whose every value set the spec refuses or cannot bound."""
    runner, entry, dtype = search.runner, search.entry, search.dtype
    prepared = rounded(case, dtype)
    batched = entry.batchable and bool(case.batch)
    shape = (case.variant.hash, tuple(sorted(case.hyper.items())), len(case.batch) if batched else 0)
    if batched and not (state.get("failed") or search.batched[shape] < BATCH_CHECKS):
        batched = False  # this shape's batch checks have passed often enough in this search
    extras = [rounded(case, dtype, inputs=extra) for extra in (case.batch if batched else [])]
    precisions = {precision_of(m, dtype) for m in search.active if not m.hung}
    # a block never takes the search beyond its budget: the last one is cut to what is left
    block = value_sets(case, max(1, min(search.block, search.budget - state["judged"])), dtype)
    preps = [prepared] + [rounded(c, dtype) for c in block[1:]]
    # the block's value sets and the batch's input sets share one evaluation of the spec
    # (``tolerances.references`` groups them by what they share); cached, so a repeat costs none
    found = {p: runner.references_for(entry, preps + extras, case, dtype, p) for p in precisions}
    # the batch as judged: the further input sets whose references the spec gives in range
    batch = _batch_references(search, case, extras, precisions, found={p: v[len(preps):] for p, v in found.items()})
    search._extras = extras  # a failure is confirmed on the batch's references evaluated alone
    judged = next(iter(batch.values()), [])
    # the case as examined: a batch left out, or an input set of it the spec did not judge, is no
    # part of it (a key with the batch as drawn let the same examination happen twice)
    key: tuple[Any, ...] = (case.variant.hash, tuple(sorted(case.hyper.items())), *_prepared_digests(prepared),
                            *(_digest(inputs) for inputs, _ in judged))
    if key in search.seen:  # drawn again (targeting): examined already, and it passed
        search.result.repeated[(entry.name, dtype)] += 1
        state["repeated"] = state.get("repeated", 0) + 1
        if search.seen[key] >= 0:
            target(search.seen[key], label="error/bound")
        return
    shrinking = bool(state.get("failed"))
    if shrinking:  # a shrinking step is one step of the budget, as before blocks
        state["shrink"] += 1
    search.result.generated[(entry.name, dtype)] += len(block)
    refs = _references(search, block, preps, {p: v[:len(preps)] for p, v in found.items()}, state)
    if refs is None:  # a refusal the members had to share: examined already
        return
    worst = 0.0
    failed: list[tuple[Member, Finding, Case]] = []
    for i, (c, p, r) in enumerate(zip(block, preps, refs)):
        if r is None:
            continue
        k = key if i == 0 else (key[0], key[1], *_prepared_digests(p))
        if not shrinking:  # judged: an example of the budget
            state["judged"] += 1
            search.distinct.add(k[:4])
            if search.space is not None and _space_key(entry, c.variant, c.hyper) in search.space:
                search.covered.add(_space_key(entry, c.variant, c.hyper))
        # the batch and the determinism re-call on the drawn case alone: its further value sets
        # share its structure (a nondeterministic kernel shows on the first), and a re-call per
        # value set cost as much as the example's own call (docs/benchmarks.md, "Against a plain check")
        w, outputs, f = _examine(search, c, p, r, batch if i == 0 else {q: [] for q in precisions}, k,
                                 repeat=i == 0)
        if not shrinking:
            _keep_passing(search, c, outputs)
        _agreement(search, outputs, r, k)
        worst, failed = max(worst, w), failed + f
        runner.progress("example", algorithm=entry.name, dtype=dtype)
        if failed:  # the rest of the block waits: Hypothesis shrinks the first failure
            break
    # Targeting climbs the error/bound ratio; an entry whose outputs are all exact (tokens, masks)
    # scores 0 on every example, and targeting a constant only makes Hypothesis repeat one case.
    score = -1.0
    first = next(r for r in refs if r is not None)
    if any(spec.kind == Kind.REAL for spec in first[next(iter(first))].specs):
        score = min(worst, 1e300)
        target(score, label="error/bound")
    if failed:
        raise _MemberFailed(*failed[0])
    if not any(m.hung for m in search.active):  # passed: a repeat of it is not examined again
        search.seen[key] = score
        if any(batch.values()):
            search.batched[shape] += 1


def _references(search: "_Search", block: list[Case], preps: list[Prepared], each: dict[str, list[Any]],
                state: dict[str, Any]) -> Optional[list[Optional[Refs]]]:
    """Each value set's reference at each precision the members compute in (``each``: per
    precision, ``references_for`` of ``preps``), or None for a value set the spec refuses,
    cannot bound or finds out of range (counted, not examined); None when the drawn case is
    one the spec refuses by definition (the members were examined for their refusal). A block
    with no value set left is rejected."""
    entry, dtype, case = search.entry, search.dtype, block[0]
    precisions = set(each)
    head = next(iter(each.values()))[0]
    if isinstance(head, SpecError) and refused_empty_query(entry, case, head):
        if not state.get("failed"):  # judged: the spec's answer is its refusal
            state["judged"] += 1
            search.distinct.add((case.variant.hash, tuple(sorted(case.hyper.items())),
                               *_prepared_digests(preps[0])))
        _expect_refusal(search, case, preps[0], head)  # masks are shared: the whole block is refused
        return None
    out: list[Optional[Refs]] = []
    for i in range(len(block)):
        got = {p: each[p][i] for p in precisions}
        if any(isinstance(r, SpecError) for r in got.values()):
            search.result.rejected[(entry.name, dtype)] += 1
            out.append(None)
        elif any(isinstance(r, ToleranceModelError) for r in got.values()):
            search.result.unmodelled[(entry.name, dtype)] += 1  # counted and reported, never a zero tolerance
            out.append(None)
        elif not all(r.in_range for r in got.values()):
            for m in search.active:
                search.cells[m.key].out_of_range += 1
            out.append(None)
        else:
            out.append(got)
    if all(r is None for r in out):
        reject()
    return out


def _batch_references(search: "_Search", case: Case, extras: list[Prepared], precisions: set[str], *,
                      found: Optional[dict[str, list[Any]]] = None) -> dict[str, list]:
    """Per precision, the batch's further input sets with their references (those the spec
    takes and finds in range): ``found``, their references as the search evaluated them
    (``references_for``, with the block's), or else each evaluated alone, as a case file's
    replay evaluates it (``_examine`` confirms a failure so)."""
    batch: dict[str, list] = {p: [] for p in precisions}
    if not extras:
        return batch
    if found is None:
        each = {p: [search.runner.alone(search.entry, x, case, search.dtype, p) for x in extras] for p in precisions}
    else:
        each = found
    for i, extra_prep in enumerate(extras):
        extra_refs = {p: each[p][i] for p in precisions}
        refs = [r for r in extra_refs.values() if isinstance(r, Reference)]
        if len(refs) == len(extra_refs) and all(r.in_range for r in refs):
            for p in precisions:
                batch[p].append((extra_prep.inputs, extra_refs[p]))
    return batch


def _examine(search: "_Search", case: Case, prepared: Prepared, refs: Refs, batch: dict[str, list], key: tuple,
             *, repeat: bool = True) -> tuple[float, dict[tuple[str, str], dict], list[tuple[Member, Finding, Case]]]:
    """Every active member on one value set: (the worst error/bound ratio, the outputs of those
    that passed, the members that failed with their first finding and the value set). A member
    whose call timed out fails at once (no shrinking: that would wait for the hang again).
    ``repeat``: with the determinism re-call (``execute.examine``).

    A failure against the block's reference is confirmed against the value set's reference
    evaluated alone, as its case file replays it (``Runner.alone``): the two differ only in
    the Monte Carlo draws, and a verdict must reproduce from the case file. Where the value set
    alone cannot be bounded (its lanes turn NaN: a float16 mean square that underflows under
    ε = 0, `make run` of 2026-12-06), it is counted unmodelled, as a block's would be."""
    worst = 0.0
    outputs: dict[tuple[str, str], dict] = {}
    failed: list[tuple[Member, Finding, Case]] = []
    for m in search.active:
        if m.hung:
            continue
        precision = precision_of(m, search.dtype)
        ref = refs[precision]
        outcome = examine(m, case, prepared.inputs, prepared.params, ref, dtype=search.dtype,
                          timeout=search.runner.timeout, batch=batch[precision], repeat=repeat)
        if not outcome.judgement.ok and not outcome.timed_out:
            alone = search.runner.alone(search.entry, prepared, case, search.dtype, precision)
            if alone is None:  # its case file could not judge it: unmodelled alone, never a failure
                search.result.unmodelled[(search.entry.name, search.dtype)] += 1
                continue
            each = batch[precision]
            if each:  # the batch's input sets too, alone: the references their replay takes
                each = _batch_references(search, case, search._extras, {precision})[precision]
            outcome = examine(m, case, prepared.inputs, prepared.params, alone, dtype=search.dtype,
                              timeout=search.runner.timeout, batch=each, repeat=repeat)
        if search.runner.refusals:  # what the spec refuses, the member must refuse
            check_refusals_into(outcome, m, case, search.dtype, timeout=search.runner.timeout)
        cell = search.cells[m.key]
        cell.examples += 1
        search.digests[m.key].update(repr(key[:2]).encode() + b"".join(key[2:]))
        cell.worst_ratio = max(cell.worst_ratio, outcome.judgement.ratio)
        if len(cell.ratios) < RATIOS_KEPT:  # the HTML report's plot (session/html_report.py)
            cell.ratios.append(outcome.judgement.ratio)
        cell.checks.update(outcome.checks)
        cell.ambiguous += outcome.judgement.ambiguous
        cell.undetermined += outcome.judgement.undetermined
        worst = max(worst, outcome.judgement.ratio if math.isfinite(outcome.judgement.ratio) else 1e300)
        if not outcome.judgement.ok and cell.first_failure_s is None:
            cell.first_failure_s = time.perf_counter() - search.started
            cell.first_failure_examples = cell.examples
        if outcome.timed_out:
            m.hung = True
            search.runner.record_failure(cell, m, outcome.judgement.findings[0], case, search.dtype, shrunk=False)
            continue
        if not outcome.judgement.ok:
            failed.append((m, outcome.judgement.findings[0], case))
            _keep_failing(search, m, outcome.judgement.ratio, outcome.judgement.findings[0], case)
            refused = search.refused.setdefault(m.key, {})
            for f in outcome.judgement.findings:  # every refusal answered, for the failure's report
                if f.check == "refusal":
                    refused.setdefault(f.refusal or f.message, f)
        elif outcome.outputs is not None:
            outputs[m.key] = outcome.outputs
    return worst, outputs, failed


def _keep_passing(search: "_Search", case: Case, passed: Mapping[tuple[str, str], Any]) -> None:
    """Add a judged value set to the sample of each cell whose member passed it (``passed``: the
    members' outputs, keyed by member), where the runner keeps samples (``Runner.keep_passing``)."""
    if search.runner.keep_passing and search.dtype in SAMPLED_DTYPES:
        for key in passed:
            keep_sample(search.cells[key].sample, case)


def _keep_failing(search: "_Search", m: Member, ratio: float, finding: Finding, case: Case) -> None:
    """Keep ``case`` among ``m``'s ``FAILING_KEPT`` worst failing examples of a value check (and note
    the example's error/bound on its finding, which the report compares with the worst)."""
    finding.ratio = ratio
    if finding.check not in DIAGNOSED_CHECKS:
        return
    kept = search.failing.setdefault(m.key, [])
    if any(c is case for _, c in kept):
        return
    kept.append((ratio if math.isfinite(ratio) else math.inf, case))
    kept.sort(key=lambda rc: -rc[0])
    del kept[FAILING_KEPT + 1:]  # the shrunk case may be among them: it is not one of the others


def _expect_refusal(search: "_Search", case: Case, prepared: Prepared, refusal: SpecError) -> None:
    """A case the spec refuses by definition (a query with no key under ``empty_query="error"``,
    docs/spec.md): every member must raise (any exception) to pass the example
    (``refusals.expect_refusal``, which the replay of its case file uses too)."""
    failed: list[tuple[Member, Finding]] = []
    for m in search.active:
        if m.hung:
            continue
        cell = search.cells[m.key]
        cell.examples += 1
        check = expect_refusal(m, case, prepared, refusal, search.dtype, timeout=search.runner.timeout)
        if check.finding is None:
            cell.checks["refusal"] += 1
            continue
        if check.finding.check == "timeout":
            m.hung = True
            search.runner.record_failure(cell, m, check.finding, case, search.dtype, shrunk=False)
            continue
        if cell.first_failure_s is None:
            cell.first_failure_s = time.perf_counter() - search.started
            cell.first_failure_examples = cell.examples
        failed.append((m, check.finding))
    search.runner.progress("example", algorithm=search.entry.name, dtype=search.dtype)
    if failed:
        member, finding = failed[0]
        raise _MemberFailed(member, finding, case)


def _agreement(search: "_Search", outputs: dict, refs: Refs, key: tuple) -> None:
    """Implementation vs implementation and device vs device, on the same example: this
    search's members with each other, and with the members of earlier searches (other
    implementations) that answered the same case (``key``)."""
    known = search.runner.cache.outputs  # the runner's, for the (algorithm, dtype): every search adds to it
    by_key = {m.key: m for m in search.active}
    answered = {k: (outputs[k], refs[precision_of(by_key[k], search.dtype)]) for k in outputs}
    earlier = known.get(key, {})
    mine = set(answered)
    pool = {**earlier, **answered}
    keys = sorted(pool)
    table = search.result.agreement.setdefault((search.entry.name, search.dtype), {})
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            if a not in mine and b not in mine:
                continue  # compared when the later of them was searched
            ref = pool[a][1]
            kind = "device" if a[0] == b[0] else "peer"
            j = compare_pair(search.entry, pool[a][0], pool[b][0], ref, f"{a[0]}@{a[1]} vs {b[0]}@{b[1]}", kind)
            pair = (f"{a[0]}@{a[1]}", f"{b[0]}@{b[1]}")
            table[pair] = max(table.get(pair, 0.0), j.ratio)
    if answered and (key in known or len(known) < CACHE_CASES):
        known.setdefault(key, {}).update(answered)
