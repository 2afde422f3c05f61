"""The runner's call (``search_distinct``): rounds until the examples, the failures or the time run out."""

from __future__ import annotations

import time
from typing import Any, Callable

from ftspec.spec import SpecError
from ftspec.spec.registry import Entry
from ftspec.spec.variants import PAPER

from ...core.case import Case
from ...core.judge import Finding
from .rounds import _DistinctSearch
from .signatures import describe, signature_of_failure
from ...core.tolerances import keeping_references


#: further failures reported per cell at most
MAX_DISTINCT = 4
#: wall seconds per cell for the search after the first failure (shrinking included) when the
#: runner has no time cap of its own (its budget is then the examples left; this only bounds a
#: slow implementation); with one (the profiles' ``seconds``), that cap
SECONDS = 30.0
#: examples the search draws at least, whatever the first search left of the cell's budget
MIN_EXAMPLES = 60


#: the variant sets of the round that moves the norms (``search_distinct``). Not "sandwich": it runs
#: pre-LN's input norms and res_post's output norms, each code path one of these already takes, and
#: hides a sublayer behind its output norm as res_post does; a fifth set would only thin the round
PLACEMENTS = tuple(PAPER.replace(norm_placement=p) for p in ("post", "pre", "res_post"))


@keeping_references()  # each failing example is diagnosed and located again
def search_distinct(runner: Any, entry: Entry, dtype: str, variants: Any, limits: Any, member: Any, cell: Any, *,
                    examples: int, seconds: float = SECONDS, max_failures: int = MAX_DISTINCT,
                    refused: Callable[[Entry, Case, SpecError], bool] = lambda e, c, x: False) -> list[dict[str, Any]]:
    """Search ``member`` again for failures whose signature differs from ``cell.failure``'s and from
    each other; each is recorded through ``runner.record_failure`` (case file, report, diagnosis) and returned
    as plain data (the ``Cell.more_failures`` records, with their ``places`` and the ``new_places``
    each was reported for). ``examples``: the examples left (at least ``MIN_EXAMPLES`` are drawn);
    ``refused``: the runner's ``refused_empty_query`` (a refusal the implementation must share).

    Rounds of one Hypothesis search each, every round finding (and shrinking) at most one new failure,
    until the examples, the failures, the time or the member run out."""
    from ...core.strategies import cases

    if cell.failure is None or max_failures <= 0 or member.hung:
        return []
    examples = max(examples, MIN_EXAMPLES)
    deadline = time.monotonic() + seconds
    search = _DistinctSearch(runner, entry, dtype, member, refused, known=set())
    first = search.located(signature_of_failure(cell.failure), getattr(cell.failure, "case", None))
    search.ledger.cover(first, first[4][:1], getattr(cell.failure, "diagnosis", None))
    found: list[dict[str, Any]] = []
    strategy = cases(entry.name, dtype=dtype, variants=variants, max_batch=1, budget=runner.profile.budget,
                     limits=None if limits.unconstrained else limits)
    round_ = 0
    placements_tried = False
    while examples > 0 and len(found) < max_failures and time.monotonic() < deadline and not member.hung:
        outcome = search.round(strategy, examples, runner.seed * 7919 + 104729 + round_, deadline)
        examples = (0 if outcome.broken else examples) - outcome.generated
        round_ += 1
        if outcome.failure is None:
            # new places seen, never alone: take them so
            if search.ledger.unisolated and not search.ledger.lenient:
                search.ledger.lenient = True
                continue
            if not placements_tried and variants == "all" and search.ledger.only_placement_bound() \
                    and "norm_placement" in entry.switches:
                # every failure departs at a residual path or a norm, which can hide every sublayer of a
                # pre-LN layer; such a bug lives in code one norm placement runs: a round of the other
                # placements shows what the sublayers do behind it
                placements_tried = True
                strategy = cases(entry.name, dtype=dtype, variants=PLACEMENTS, max_batch=1,
                                 budget=runner.profile.budget, limits=None if limits.unconstrained else limits)
                continue
            break
        search.ledger.lenient = False
        finding, case, sig = outcome.failure
        sig = search.located(sig, case)
        # the place it is reported for: the first of those it was found for that its case departs at
        own = tuple(p for p in sig[4] if p in outcome.aim)[:1] if outcome.aim else sig[4][:1]
        record = _record(runner, member, cell, finding, case, dtype, sig, outcome.shrunk, own)
        if search.ledger.is_new(record, sig, own, [first, *(signature_of_failure(f) for f in found)]):
            found.append(record)
    if found and first[4] and isinstance(getattr(cell.failure, "report", None), str):
        cell.failure.report = _with_place(cell.failure.report, first[4][:1], first[4])
    return found


def _with_place(report: str, own: tuple[str, ...], places: Any) -> str:
    """``report`` with the place its failure is reported for (its first divergence may name a place
    another failure is reported for, or a walk on another case), before the reproducer (kept last)."""
    others = [p for p in places if p not in own]
    line = (f"  distinct failure: reported for where its case departs at {', '.join(own)}"
            + (f" (it also departs at {', '.join(others)})" if others else ""))
    head, sep, tail = report.rpartition("\n  reproduce:")
    return head + "\n" + line + sep + tail if sep else report + "\n" + line


def _record(runner: Any, member: Any, cell: Any, finding: Finding, case: Case, dtype: str, sig: tuple,
            shrunk: bool, own: tuple[str, ...] = ()) -> dict[str, Any]:
    """One further failure as plain data, written and reported as the runner writes the first one;
    ``places``: where it departs on its case, ``new_places``: the one it is reported for."""
    scratch = type(cell)(cell.algorithm, cell.impl, cell.dtype, cell.device)  # runner.Cell
    runner.record_failure(scratch, member, finding, case, dtype, shrunk=shrunk)
    f = scratch.failure
    places = list(sig[4]) if len(sig) > 4 else []
    report = _with_place(f.report, own, places) if own else f.report
    record = {"check": f.check, "message": f.message, "case_file": f.case_file, "reproducer": f.reproducer,
              "report": report, "shrunk": f.shrunk, "diagnosis": f.diagnosis, "places": places,
              "new_places": list(own)}
    record["signature"] = describe(signature_of_failure(record))
    record["found_as"] = describe(sig) + (f" (reported for: {', '.join(own)})" if own else "")
    return record
