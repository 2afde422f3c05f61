"""The confirmation on other cases: a set that fits the shrunk case must fit the others too.

``_Confirmation`` judges the sets that fit again on the cell's other failing examples and on
fresh cases the implementation is called on, and takes out of each set a change that moves
nothing (``_strip_inert``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

import numpy as np

from ftspec.spec import SpecError
from ftspec.spec.variants import ROUNDING_ONLY

from ...core.blocks import value_sets
from ...core.case import Case
from ...core.values import default_hyper
from .result import _items, _public, _simplest
from .site import _Site

if TYPE_CHECKING:
    from .search import _Search

#: the implementation on another case: its outputs, or None when it raises
Call = Callable[[Case], Optional[Mapping[str, np.ndarray]]]

#: other failing examples of the cell a fitting set must also fit (the worst first)
FAILING_KEPT = 2
#: fresh cases the implementation is called on while a set fits: value sets of the
#: shrunk case's structure, and one case at the entry's default sizes (first, when the shrunk case
#: is smaller: a degenerate case is where unrelated sets give the same numbers)
FRESH_CASES = 3
#: sets the shrunk case could not judge carried into the confirmation (the fewest changes first);
#: every set that fits is confirmed (the first fresh case excludes most of those a degenerate case
#: lets fit)
CONFIRMED_MAX = 12


class _Confirmation:
    """The cases a diagnosis confirms its sets on, built once: the cell's other failing examples
    and the fresh cases, within an allowance of its own as long as the search's."""

    def __init__(self, search: "_Search") -> None:
        self.search = search
        #: the confirmation's cases, built once: the other failing examples (None: not yet), the
        #: fresh cases planned (None: not yet) and those built (index -> site and label, None: unusable)
        self._failing: Optional[list[tuple[_Site, str]]] = None
        self._fresh_planned: Optional[list[Case]] = None
        self._fresh_built: dict[int, Optional[tuple[_Site, str]]] = {}
        self._confirm_until: Optional[float] = None  # when the confirmation's own allowance ends

    def confirm(self, failing: Sequence[tuple[Case, Optional[Mapping[str, np.ndarray]]]], call: Optional[Call],
                admits: Optional[Callable[[Mapping[str, int]], bool]]) -> None:
        """The sets that fit the shrunk case, judged again: on the other failing examples the search
        kept (each must fit them too), then on fresh cases the implementation is called on (a
        single set that fits is confirmed too: on a degenerate shrunk case, H = 1 and a mask all
        True, a dropped head looks exactly like an inverted mask with zeros for empty queries).
        Excluded sets stop fitting (with the case that excluded them); a change that moves nothing
        on any case tried is taken out of a set (``_strip_inert``); more than one set left makes
        the diagnosis ambiguous. Called again after the pairs: the cases built for the first call
        are reused, and a set is judged once on each."""
        tried = self.search.tried.values()
        fits = sorted((r for r in tried if r["fits"]), key=lambda r: (len(r["changes"]), r["ratio"]))
        # within their bound here but no evidence (uninformative on this case): another failing example
        # may give it, as long as no case contradicts them; those that reproduce the departure within a
        # bound wider than it ("cannot tell") before those whose bound is as large as the output
        pending = sorted((r for r in tried if not r["fits"] and r.get("uninformative")),
                         key=lambda r: ("vacuous" in r.get("excluded", ""), len(r["changes"]), r["ratio"]))
        pending = pending[:CONFIRMED_MAX]
        if not fits and not pending:
            return
        info: dict[str, Any] = self.search.d.confirmed or {"failing": 0, "fresh": 0, "excluded": []}
        if self._confirm_until is None:  # its own allowance, as long as the search's
            self._confirm_until = time.perf_counter() + self.search.seconds
        for site, label in self._failing_sites(failing):
            self._sift(site, fits, info, label)
            self._contradict(site, pending, label)
            for r in pending:
                if r.get("evidence") and not r.get("contradicted") and not any(r is f for f in fits):
                    r["fits"], r["excluded"] = True, ""  # evidence here, and no case against it
                    fits.append(r)
        if call is not None:
            for site, label in self._fresh_sites(call, admits, fits):
                self._sift(site, fits, info, label)
                self._contradict(site, pending)
        # a set the cases tried cannot judge and none contradicts stays possible beside those that fit
        possible = ([r for r in pending if not r["fits"] and not r.get("contradicted") and not r.get("_unjudged")]
                    if any(r["fits"] for r in fits) else [])
        for r in possible:
            r["fits"], r["possible"] = True, "no case tried could judge it, and none contradicts it"
        _strip_inert(self._all_sites(), [r for r in fits + possible if r["fits"]])
        live = _simplest([r for r in fits + possible if r["fits"]])
        # a set that fits only with parameters the harness made up for it (γ = 1, β = 0 for a norm the
        # declared set has without them) is the same mathematics as one that needs none
        live = [r for r in live if not r.get("parameters")] or live
        # sets that differ only in switches that change rounding alone are one mathematics
        self.search.d.ambiguous = len({_mathematics(r) for r in live}) > 1
        info["failing"], info["fresh"] = len(self._failing or []), len(self._fresh)
        if (info["failing"] or info["fresh"]) and "confirmation on other cases" not in self.search.d.searched:
            self.search.d.searched.append("confirmation on other cases")
        if info["failing"] or info["fresh"]:
            self.search.d.confirmed = info

    def _confirm_over(self) -> bool:
        """Whether the confirmation's allowance has run out (then the search gave up)."""
        if self._confirm_until is not None and time.perf_counter() > self._confirm_until:
            self.search.d.gave_up = True
            return True
        return False

    def _failing_sites(self, failing: Sequence[tuple[Case, Optional[Mapping[str, np.ndarray]]]]
                       ) -> list[tuple[_Site, str]]:
        """The cell's other failing examples as sites (built once): those that fail the declared set
        the way the shrunk case does (both return, or both raise)."""
        if self._failing is None:
            self._failing = []
            for case, outputs in list(failing)[:FAILING_KEPT]:
                if (outputs is None) != (self.search.impl_outputs is None):
                    continue  # raised where the shrunk case returned (or the reverse): another failure
                site = _Site(self.search, case, outputs)
                if site.declared_ref is None or site.declared_ok:
                    continue  # not a failing example under this declared set: it confirms nothing
                self.search.sites.append(site)
                self._failing.append((site, f"another failing example of the cell ({case.describe()})"))
        return self._failing

    def _fresh_sites(self, call: Call, admits: Optional[Callable[[Mapping[str, int]], bool]],
                     fits: list[dict[str, Any]]) -> Any:
        """The fresh cases as sites, each built (the implementation called) once and only while a set
        still fits; kept for a later call (None: a case that separates nothing, it raised or the
        declared set cannot judge it)."""
        if self._fresh_planned is None:
            self._fresh_planned = self._fresh_cases(admits)
        for i in range(len(self._fresh_planned)):
            if not any(r["fits"] for r in fits):
                return
            built = self._built(i, call)
            if built is not None:
                yield built

    def every_fresh_site(self, call: Call, admits: Optional[Callable[[Mapping[str, int]], bool]]
                         ) -> list[tuple[_Site, str]]:
        """Every fresh case as a site (each built once), whether or not a set fits: where none does, a
        lower precision inside is confirmed on them (``lower``)."""
        if self._fresh_planned is None:
            self._fresh_planned = self._fresh_cases(admits)
        for i in range(len(self._fresh_planned)):
            self._built(i, call)
        return self._fresh

    def _built(self, i: int, call: Call) -> Optional[tuple[_Site, str]]:
        """Fresh case ``i`` as a site and its label, the implementation called on it once (None: a case
        that separates nothing: it raised, or the declared set cannot judge it)."""
        assert self._fresh_planned is not None
        if i not in self._fresh_built:
            fresh = self._fresh_planned[i]
            try:
                outputs = call(fresh)
            except Exception:  # noqa: BLE001 - a fresh case the implementation cannot take separates nothing
                outputs = None
            site = _Site(self.search, fresh, outputs)
            ok = site.declared_ref is not None and outputs is not None
            self._fresh_built[i] = (site, f"a fresh case ({fresh.describe()})") if ok else None
        return self._fresh_built[i]

    @property
    def _fresh(self) -> list[tuple[_Site, str]]:
        return [b for _, b in sorted(self._fresh_built.items()) if b is not None]

    def _sift(self, site: _Site, fits: list[dict[str, Any]], info: dict[str, Any], label: str) -> None:
        """Exclude the sets the outputs at ``site`` contradict (outside their bound, or a failing
        output dropped); a set this case cannot judge (vacuous here) stays."""
        for r in fits:
            if not r["fits"] or id(site) in r.setdefault("_seen", set()):
                continue
            r["_seen"].add(id(site))
            if self._confirm_over():  # a set not confirmed is not named (the report says it gave up)
                r["fits"], r["excluded"] = False, "not confirmed: the time budget ran out"
                continue
            got = site.judge(r["_changes"], r["_reading"])
            info["evaluations"] = info.get("evaluations", 0) + 1
            if got is not None and not got["fits"] and not got.get("uninformative"):
                r["fits"], r["excluded"] = False, f"it does not fit {label}"
                info["excluded"].append({"changes": _public(r)["changes"], "by": label})

    def _contradict(self, site: _Site, pending: list[dict[str, Any]], label: str = "") -> None:
        """Judge the sets no case could judge yet: evidence for them (``label``: a failing example),
        or a contradiction."""
        for r in pending:
            if r.get("contradicted") or r["fits"] or id(site) in r.setdefault("_seen", set()):
                continue
            r["_seen"].add(id(site))
            if self._confirm_over():  # not judged on every case: not "possible" either
                r["_unjudged"] = True
                continue
            got = site.judge(r["_changes"], r["_reading"])
            if got is None:
                continue
            if got["fits"] and label:
                r["evidence"] = label
            elif not got["fits"] and not got.get("uninformative"):
                r["contradicted"] = True

    def _fresh_cases(self, admits: Optional[Callable[[Mapping[str, int]], bool]]) -> list[Case]:
        """Cases of the shrunk case's structure with new values, and one at the entry's default sizes
        (first when the shrunk case is smaller somewhere) where the implementation's limits admit it."""
        s = self.search
        out = value_sets(s.case, 1 + FRESH_CASES, s.dtype)[1:]
        hyper = default_hyper(s.entry, s.declared)
        if hyper != s.case.hyper and (admits is None or admits(hyper)):
            try:
                big = Case.build(s.entry, hyper, s.declared, seed=1, style=s.case.style, dtype=s.dtype)
            except (SpecError, ValueError, KeyError):
                return out
            smaller = any(s.case.hyper.get(k, v) < v for k, v in hyper.items())
            out = [big] + out if smaller else out + [big]
        return out

    def _all_sites(self) -> list[_Site]:
        """The shrunk case's site, then every other case's."""
        return [self.search.site] + [s for s, _ in (self._failing or [])] + [s for s, _ in self._fresh]


def _strip_inert(sites: list[_Site], live: list[dict[str, Any]]) -> None:
    """Take out of each set a change that moves nothing: with it reverted, the spec's binary64
    values are the same on every case tried (β of a norm that has none, ``norm_placement='paper'``
    where it is ``'pre'``); a set with no change left computes the declared set's numbers there
    and is no alternative at all. Two sets that become one keep one record (the other's presets
    join it). The spec decides what moves, on the cases at hand; no list of inert switches is
    kept by hand."""
    kept: dict[frozenset, dict[str, Any]] = {}
    # a single change or pair before a preset's projection onto the entry: where both are one set,
    # the record kept lists the change as the search made it (ε with its placement)
    for r in sorted(live, key=lambda r: r.get("_origin") == "preset"):
        changes, reading = dict(r["_changes"]), r["_reading"]
        for key in list(changes) + (["input"] if reading else []):
            fewer = {k: v for k, v in changes.items() if k != key}
            less = None if key == "input" else reading
            if _same(sites, changes, reading, fewer, less):
                shown = f"input {reading[0]}" if key == "input" and reading else key
                r["changes"].pop(shown, None)
                r["declared"].pop(shown, None)
                r.setdefault("inert", []).append(shown)
                changes, reading = fewer, less
        r["_changes"], r["_reading"] = changes, reading
        if not changes and reading is None:  # the declared set's own numbers on every case tried
            r["fits"], r["_merged"] = False, True
            continue
        items = _items(r)
        if items in kept:
            other = kept[items]
            other["presets"] += [p for p in r["presets"] if p not in other["presets"]]
            r["fits"], r["_merged"] = False, True
        else:
            kept[items] = r


def _same(sites: list[_Site], a: Mapping[str, Any], ra: Optional[tuple[str, str]],
          b: Mapping[str, Any], rb: Optional[tuple[str, str]]) -> bool:
    """Whether two sets (changes and reading each) give the same binary64 values on every site
    where both apply (the shrunk case at least)."""
    for i, site in enumerate(sites):
        oka, va = site.values(a, ra)
        okb, vb = site.values(b, rb)
        if not (oka and okb):
            if i == 0:
                return False
            continue
        if (va is None) != (vb is None):
            return False
        if va is None or vb is None:
            continue
        if set(va) != set(vb) or not all(
                np.shape(va[k]) == np.shape(vb[k]) and np.array_equal(va[k], vb[k], equal_nan=True)
                for k in va):
            return False
    return True


def _mathematics(rec: Mapping[str, Any]) -> frozenset:
    """A set's changes without the switches that change rounding alone (``ROUNDING_ONLY``)."""
    return frozenset((k, str(v)) for k, v in rec["changes"].items() if k not in ROUNDING_ONLY)
