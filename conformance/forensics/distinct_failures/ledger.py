"""What the search for further failures knows across rounds, and whether a failing example is new."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from ..diagnosis import DIAGNOSED_CHECKS
from ...core.judge import Finding
from .places import _placed
from .signatures import (ALL, confirmed_explanations, _expanded, explanations, fresh_places, _matches, one_bug, same,
                         signature_of_failure)


#: failing examples per cell whose signature is diagnosed (about 1 s each on a model); after that a
#: failure of an already-seen check and exception type counts as known
DIAGNOSED_SIGNATURES = 4
#: failing examples per round passed over for departing at a place already reported as well as at a
#: new one, while one that departs at new places only is looked for
ISOLATION_TRIES = 8
#: ``new_signature``'s level for such an example
_DEFERRED = -1


class _Ledger:
    """What the search for further failures of one member on one cell knows, across rounds: the
    signatures already known, the places and the variant sets that cover them, and the budget of
    diagnosed signatures; it decides whether a failure is new."""

    def __init__(self, algorithm: str, known: set[tuple]) -> None:
        self.known = known
        #: per (check, exception type): the places failures were reported for (``fresh_places``)
        self.covered: dict[tuple, set[str]] = {}
        #: per (check, exception type): the variant sets that explain a known failure (``explanations``)
        self.explained: dict[tuple, set[str]] = {}
        #: of ``explained``, the sets a diagnosis kept (``confirmed_explanations``)
        self.kept: dict[tuple, set[str]] = {}
        #: a model or a layer: places tell failures apart (else the diagnoses do)
        self.placed = _placed(algorithm)
        self.unisolated = 0  # new failures passed over in this round for departing at a reported place too
        self.lenient = False  # a round after one that saw new places only beside reported ones: take them
        self.diagnosed = 0  # signatures diagnosed so far (at most ``DIAGNOSED_SIGNATURES``)

    def only_placement_bound(self) -> bool:
        """Whether every place reported so far is a residual path or a norm (and there is one)."""
        places = set().union(*self.covered.values()) if self.covered else set()
        return bool(places) and places <= {"residual", "norm"}

    def cover(self, sig: tuple, own: tuple[str, ...], diagnosis: Optional[Mapping[str, Any]] = None) -> None:
        """A failure is known: its signature, the place it is reported for (``own``; a value failure
        of a model or layer whose places could not be found covers every place) and the sets that
        explain it (``explanations`` of its ``diagnosis``)."""
        self.known.add(sig)
        self.explained.setdefault(sig[:2], set()).update(explanations(diagnosis))
        self.kept.setdefault(sig[:2], set()).update(confirmed_explanations(diagnosis))
        if sig[0] in DIAGNOSED_CHECKS and self.placed:
            self.covered.setdefault(sig[:2], set()).update(own or (ALL,))

    def new_signature(self, finding: Finding, at: Callable[[int], tuple],
                      diagnose: Callable[[], Optional[dict[str, Any]]]) -> tuple[Optional[tuple], int, tuple[str, ...],
                                                                                  frozenset[str]]:
        """(signature, level, new places, places to avoid) when the failure is new, as cheaply as can
        tell: its check and exception type, else (a model or layer) its places, else where it departs
        and its convention; (None, level, (), ()) when known, level ``_DEFERRED`` when it is new but
        departs at a place already reported too (``ISOLATION_TRIES`` such are passed over in a round,
        for one that shows its new places alone: its shrunk case then shows only the new bug; a round
        that ends with such passed over is followed by one that takes them)."""
        known, none = self.known, frozenset[str]()
        sig = at(0)
        if not any(_matches(0, sig, k) for k in known):
            return sig, 0, (), none
        if finding.check not in DIAGNOSED_CHECKS:
            return None, 0, (), none
        sig = at(1)
        if not self.placed:
            found, level = self._by_diagnosis(sig, at, diagnose)
            return found, level, (), none
        covered = self.covered.get(sig[:2], set())
        fresh = fresh_places(sig[4], covered) if sig[4] else ()  # unknown places: no new failure
        if not fresh:
            return None, 1, (), none
        alone = len(fresh) == len(sig[4])
        if not alone and not self.lenient and self.unisolated < ISOLATION_TRIES:
            self.unisolated += 1
            return None, _DEFERRED, (), none
        if self._explained_by_known(sig, diagnose):
            return None, 1, (), none
        return sig, 1, fresh, frozenset(_expanded(covered)) if alone else none

    def _explained_by_known(self, sig: tuple, diagnose: Callable[[], Optional[dict[str, Any]]]) -> bool:
        """Whether a short diagnosis finds a set that explains a known failure too (one bug in code
        that two places share): only while the diagnosis budget lasts."""
        known = self.explained.get(sig[:2])
        if self.diagnosed >= DIAGNOSED_SIGNATURES or not known:
            return False
        self.diagnosed += 1
        return one_bug(diagnose(), known, self.kept.get(sig[:2], set()))

    def _by_diagnosis(self, sig: tuple, at: Callable[[int], tuple],
                      diagnose: Callable[[], Optional[dict[str, Any]]]) -> tuple[Optional[tuple], int]:
        """No model or layer (no places): where it departs, then its convention."""
        known = self.known
        alike = [k for k in known if _matches(1, sig, k)]
        if not alike:
            if self._explained_by_known(sig, diagnose):  # departs elsewhere: a known convention all the same?
                return None, 1
            return sig, 1
        if self.diagnosed >= DIAGNOSED_SIGNATURES or any(k[2] == "?" for k in alike):
            return None, 1  # no budget left, or a known one of any convention
        self.diagnosed += 1
        sig = at(2)
        return (None if any(_matches(2, sig, k) for k in known) else sig), 2

    def is_new(self, record: Mapping[str, Any], sig: tuple, own: tuple[str, ...], earlier: list[tuple]) -> bool:
        """Whether a recorded failure differs from the ``earlier`` ones (their signatures: the cell's
        first failure and those found before) under the report's full diagnosis; either way it becomes
        known, with the place it is reported for (``own``). At a new place: new unless one definite
        convention explains it and an earlier one; else new unless the full diagnoses say it is the
        same (``same``)."""
        full = signature_of_failure(record)  # with the report's full diagnosis budget
        explained = one_bug(record.get("diagnosis"), self.explained.get(full[:2], set()),
                            self.kept.get(full[:2], set()))
        self.cover(sig, own, record.get("diagnosis"))
        self.cover(full, own)
        if own and self.placed:
            return not explained
        # the short budget may tell it apart where the full diagnosis does not: then the same failure
        return not explained and not any(same(full, e) for e in earlier)
