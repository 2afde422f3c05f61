"""The search for the variant sets a failing output agrees with (``diagnose``), within a budget.

``_Search`` holds the records of the sets evaluated; the confirmation on other cases
(``confirmation``), the pairs (``pairs``) and a lower precision (``lower``) work on it.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from ftspec.spec.registry import Entry
from ftspec.spec.variants import SWITCHES, VariantSet

from ...core.case import Case
from .candidates import _presets, _readings, _record, _singles
from .confirmation import Call, _Confirmation
from .lower import lower_precision
from .pairs import try_pairs
from .result import Diagnosis, _conclude
from .site import _Site
from .structure import structure
from ...core.tolerances import keeping_references

#: the search's budget per failure: wall seconds and spec evaluations (each a binary64 evaluation
#: plus the Monte Carlo lanes of the tolerance), checked before each evaluation
SECONDS = 10.0
EVALUATIONS = 400


# -- the search ----------------------------------------------------------------------------------

@keeping_references()  # a set is judged on the same cases again (confirmation, pairs)
def diagnose(entry: Entry, case: Case, impl_outputs: Optional[Mapping[str, np.ndarray]], dtype: str,
             declared: Optional[VariantSet] = None, *, precision: str = "highest", seconds: float = SECONDS,
             evaluations: int = EVALUATIONS, failing: Sequence[tuple[Case, Optional[Mapping[str, np.ndarray]]]] = (),
             call: Optional[Call] = None, admits: Optional[Callable[[Mapping[str, int]], bool]] = None
             ) -> Diagnosis:
    """Which neighbouring variant sets the implementation's outputs on ``case`` agree with.

    ``impl_outputs``: the implementation's NumPy outputs on the case (inputs rounded to ``dtype``),
    or None when it raised: then the sets under which the spec refuses the case are the matches.
    ``failing``: other failing examples of the cell, (case, outputs) each: a set that fits must fit
    them too. ``call``: the implementation on another case (its outputs; None when it raises),
    to separate the sets that fit on fresh cases, and ``admits``: whether its limits admit sizes
    (the default sizes are tried only then). Stops after ``seconds`` or ``evaluations`` reference
    evaluations (``gave_up``); the confirmation on other cases has its own small allowance
    (``FAILING_KEPT`` failing examples, ``FRESH_CASES`` fresh ones)."""
    declared = declared or case.variant
    started = time.perf_counter()
    search = _Search(entry, case, impl_outputs, dtype, declared, precision, started, seconds, evaluations)
    d = search.d
    if search.declared_fits():  # a repeat call may not fail at all
        d.recurred = False
    else:
        single_recs = search.singles_and_presets()
        search.mask_readings()
        search.confirmation.confirm(failing, call, admits)
        if not search.live():  # nothing fits every case tried: pairs of single changes
            try_pairs(search, single_recs)
            search.confirmation.confirm(failing, call, admits)
        _conclude(d, list(search.tried.values()))
        if not d.matches:
            lower_precision(search, call, admits)
    d.seconds = time.perf_counter() - started
    return d


class _Search:
    """The variant sets evaluated for one diagnosis (by variant hash and input reading), within a
    budget of ``seconds`` from ``started`` and ``evaluations``; ``d``, the ``Diagnosis`` being built,
    counts them and says when the budget ran out."""

    def __init__(self, entry: Entry, case: Case, impl_outputs: Optional[Mapping[str, np.ndarray]], dtype: str,
                 declared: VariantSet, precision: str, started: float, seconds: float, evaluations: int) -> None:
        self.entry, self.case, self.impl_outputs, self.dtype = entry, case, impl_outputs, dtype
        self.declared, self.precision = declared, precision
        self.started, self.seconds, self.evaluations = started, seconds, evaluations
        self.d = Diagnosis(entry.name, dtype, declared.describe(), structure=structure(entry, case),
                           budget={"seconds": seconds, "evaluations": evaluations})
        self.site = _Site(self, case, impl_outputs)
        self.prepared = self.site.prepared
        self.sites = [self.site]  # every failing example judged so far
        self.tried: dict[str, dict[str, Any]] = {}  # variant hash (and reading) -> result record
        self.confirmation = _Confirmation(self)

    def budget_left(self) -> bool:
        return self.d.evaluated < self.evaluations and time.perf_counter() - self.started < self.seconds

    def declared_fits(self) -> bool:
        """Whether the declared set itself fits the outputs (the failure did not recur)."""
        self.d.evaluated += 1
        return self.site.declared_ok

    def singles_and_presets(self) -> list[tuple[str, Optional[dict[str, Any]]]]:
        """Every single-switch change, then every preset; returns the singles' records by group."""
        d, entry, declared = self.d, self.entry, self.declared
        singles = _singles(entry, declared)
        presets = _presets(entry, declared)
        d.candidates = len(singles) + len(presets)
        d.searched.append("single switches")
        single_recs = [(g, self.evaluate(ch)) for g, ch in singles]
        d.searched.append("presets")
        for name, ch in presets:
            self.evaluate(ch, name)
        return single_recs

    def mask_readings(self) -> None:
        """A mask read the other ways real code reads it, with each ``empty_query`` value: cheap, and
        a mask read the other way can look like an empty_query convention."""
        readings = _readings(self.entry, self.prepared.inputs)
        if not readings:
            return
        self.d.searched.append("mask readings")
        eq: list[dict[str, Any]] = [{}]
        if "empty_query" in self.entry.switches:
            eq += [{"empty_query": c} for c in SWITCHES["empty_query"].choices if c != self.declared.empty_query]
        self.d.candidates += len(readings) * len(eq)
        for name, how, _ in readings:
            for ch in eq:
                self.evaluate(ch, reading=(name, how))

    def evaluate(self, changes: dict[str, Any], preset: Optional[str] = None,
                 reading: Optional[tuple[str, str]] = None) -> Optional[dict[str, Any]]:
        """The record of the declared set with ``changes`` (and ``reading`` of an input): evaluated
        once, looked up after; None when it is no variant set or the budget has run out."""
        try:
            variant = self.declared.replace(**changes)
        except ValueError:  # e.g. ε without a placement: not a variant set
            return None
        key = variant.hash + (f"/{reading[0]}:{reading[1]}" if reading else "")
        rec = self.tried.get(key)
        if rec is not None:
            if preset and preset not in rec["presets"]:
                rec["presets"].append(preset)
            return rec
        if not self.budget_left():
            self.d.gave_up = True
            return None
        self.d.evaluated += 1
        rec = _record(changes, preset, reading, self.declared)
        # what other cases apply: only what differs from the declared set (ε = 1e-6 "inside the root"
        # where the root already held ε stays a change of ε alone on a case declared outside it)
        rec["_changes"] = {k: v for k, v in changes.items() if getattr(self.declared, k, None) != v}
        rec["_reading"] = reading
        rec["_origin"] = "preset" if preset else "set"
        self.tried[key] = rec
        rec.update(self.site.judge(changes, reading) or {})
        return rec

    def live(self) -> bool:
        """Whether any set still fits (after the confirmation)."""
        return any(r["fits"] and not r.get("_merged") for r in self.tried.values())
