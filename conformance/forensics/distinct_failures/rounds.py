"""One round of the search for further failures: a Hypothesis search until a new failure is found and shrunk."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from hypothesis import HealthCheck, Phase, given, reject, seed, settings, target

from ftspec.spec import SpecError
from ftspec.spec.registry import Entry

from ...core.calling import Prepared
from ...core.case import Case
from ...core.examining import precision_of, rounded
from ..diagnosis import DIAGNOSED_CHECKS
from ...core.judge import Finding
from ...core.timecap import TimeCap, TimeUp
from .ledger import _DEFERRED, _Ledger
from .places import KNOWN_PLACES_SECONDS, places_of
from .signatures import Signature, _matches, signature


#: the variant search's budget when computing a signature (a full diagnosis follows for the report)
SIGNATURE_SECONDS = 1.0
#: known failures in a row after which the search stops (a bug that fails every example would
#: otherwise spend the whole budget proving it is the same bug; a second bug that one example in
#: four shows is missed with chance 0.75^10 = 6%)
SATURATION = 10


class _NewFailure(Exception):
    def __init__(self, finding: Finding, case: Case, sig: tuple) -> None:
        super().__init__(f"{finding.check}: {finding.message}")
        self.finding, self.case, self.sig = finding, case, sig


class _Saturated(BaseException):
    """``SATURATION`` known failures in a row: the search stops (never while shrinking)."""


def _short_diagnosis(member: Any, case: Case, finding: Finding, dtype: str,
                     timeout: float) -> Optional[dict[str, Any]]:
    """A diagnosis of ``SIGNATURE_SECONDS`` (a full one follows for the report), as plain data."""
    from ..diagnosis import diagnose_failure

    d = diagnose_failure(member, case, finding.check, dtype, timeout=timeout, seconds=SIGNATURE_SECONDS)
    return d.to_dict() if d is not None else None


def _signature_at(level: int, member: Any, case: Case, finding: Finding, dtype: str, timeout: float) -> Signature:
    """The signature as far as ``level``: 0 the check and exception type (free); 1 also where a model
    or layer first departs and every place it departs at (``places_of``, 0.1 to 2 s; convention "?");
    2 also the convention the output matches (``_short_diagnosis``; no places)."""
    if level == 0 or finding.check not in DIAGNOSED_CHECKS:
        return signature(finding.check, finding.message, None)
    if level == 1:
        where, found = places_of(member, case, dtype, timeout=timeout)
        where_part, _, sub = where.partition(" / ")
        return signature(finding.check, finding.message,
                         {"gave_up": True, "divergence": {"where": where_part, "sublayer": sub}}, found)
    return signature(finding.check, finding.message, _short_diagnosis(member, case, finding, dtype, timeout))


@dataclass
class _Round:
    """What one round of the search saw: the examples it drew, and the new failure it is shrinking."""

    generated: int = 0  # drawn examples (not shrinking steps): they count against the examples left
    sig: Optional[tuple] = None  # the new failure's signature, once one is found
    level: int = 0  # how far that signature was computed (``_signature_at``)
    aim: tuple[str, ...] = ()  # the new places it was found for (each candidate must depart at one)
    avoid: frozenset[str] = frozenset()  # places reported already (a candidate departs at none of them)
    best: Optional[tuple[Finding, Case, tuple]] = None  # the smallest failing case of that signature


@dataclass
class _Outcome:
    """How a round ended: the failure it found (finding, case, signature) or None, the new places it
    was found for, whether that case was shrunk, whether the search itself broke (no round follows),
    the examples it drew."""

    failure: Optional[tuple[Finding, Case, tuple]]
    shrunk: bool = True
    broken: bool = False
    generated: int = 0
    aim: tuple[str, ...] = ()


class _DistinctSearch:
    """The search for further failures of one member on one cell, round by round: what it knows
    across rounds (the signatures already known, the budget of diagnosed signatures) is its
    ``ledger``; the known failures in a row are its own."""

    def __init__(self, runner: Any, entry: Entry, dtype: str, member: Any,
                 refused: Callable[[Entry, Case, SpecError], bool], known: set[tuple]) -> None:
        self.runner, self.entry, self.dtype, self.member, self.refused = runner, entry, dtype, member, refused
        #: the signatures known, the places and sets that cover them (``_Ledger``)
        self.ledger = _Ledger(entry.name, known)
        self.streak = 0  # known failures in a row (the search stops at ``SATURATION``)

    def round(self, strategy: Any, examples: int, round_seed: int, deadline: float) -> _Outcome:
        """One Hypothesis search of at most ``examples`` examples, until it finds a new failure and
        shrinks it, spends its examples, saturates, or reaches ``deadline``."""
        state = _Round()
        self.ledger.unisolated = 0
        # the whole search, shrinking included, in every phase of Hypothesis (timecap.py)
        timecap = TimeCap(lambda: time.monotonic() > deadline)

        @settings(max_examples=examples, deadline=None, database=None, report_multiple_bugs=False,
                  derandomize=False, print_blob=False, phases=(Phase.generate, Phase.target, Phase.shrink),
                  suppress_health_check=list(HealthCheck))
        @seed(round_seed)
        @given(timecap.strategy(strategy))
        def search(case: Case) -> None:
            with timecap.checked():
                self.example(case, state)

        try:
            with timecap.watching():
                search()
            return _Outcome(None, generated=state.generated)  # the examples ran out with no new failure
        except _Saturated:
            return _Outcome(None, generated=state.generated)
        except _NewFailure as exc:
            return _Outcome((exc.finding, exc.case, exc.sig), generated=state.generated, aim=state.aim)
        except TimeUp:
            return _Outcome(state.best, shrunk=False, generated=state.generated, aim=state.aim)
        except Exception:  # noqa: BLE001 - a flaky or broken extra search ends it, never the run
            # the smallest case seen, unshrunk
            return _Outcome(state.best, shrunk=False, broken=state.best is not None, generated=state.generated,
                            aim=state.aim)

    def example(self, case: Case, state: _Round) -> None:
        """One example: the spec's reference (or its refusal), the member's outputs, the judgement;
        a failure goes to ``judge``, a pass steers the search towards larger error/bound ratios."""
        from ...core.execute import examine
        from ...core.tolerances import ToleranceModelError

        if state.sig is None:  # drawn, not a shrinking step: counts against the examples
            state.generated += 1
        member, dtype, timeout = self.member, self.dtype, self.runner.timeout
        prepared = rounded(case, dtype)
        try:
            ref = self.runner.reference_for(self.entry, prepared, case, dtype, precision_of(member, dtype))
        except SpecError as exc:
            if not self.refused(self.entry, case, exc):
                reject()
            self._refusal(case, prepared, state)
            return
        except ToleranceModelError:
            reject()
        if not ref.in_range:
            reject()
        outcome = examine(member, case, prepared.inputs, prepared.params, ref, dtype=dtype, timeout=timeout, batch=[])
        if outcome.timed_out:
            member.hung = True
            return
        ratio = outcome.judgement.ratio
        if outcome.judgement.ok:
            target(min(ratio, 1e300) if math.isfinite(ratio) else 1e300, label="error/bound")
            return
        self.judge(outcome.judgement.findings[0], case, state)

    def _refusal(self, case: Case, prepared: Prepared, state: _Round) -> None:
        """The spec refuses the case by definition: the implementation must raise."""
        from ...core.execute import CallTimeout, call_member

        member = self.member
        try:
            call_member(member, self.entry, prepared.inputs, prepared.params, case, self.dtype, self.runner.timeout,
                        False)
        except CallTimeout:
            member.hung = True
            return
        except Exception:  # noqa: BLE001 - raising is what the spec asks for
            return
        finding = Finding("refusal", "returned a result for a case the spec refuses (a query with no key "
                          "it may attend to under empty_query='error'); the implementation must raise")
        self.judge(finding, case, state)

    def judge(self, finding: Finding, case: Case, state: _Round) -> None:
        """A failing example: raise ``_NewFailure`` when its signature is new (or, while shrinking, the
        one being shrunk); return (passing, for this search) when it is known."""
        def at(level: int) -> tuple:
            return _signature_at(level, self.member, case, finding, self.dtype, self.runner.timeout)

        def diagnose() -> Optional[dict[str, Any]]:
            return _short_diagnosis(self.member, case, finding, self.dtype, self.runner.timeout)

        sig: Optional[tuple]
        if state.sig is not None:  # shrinking a new failure: the same test that found it
            sig = at(state.level)
            if not _matches(state.level, sig, state.sig, state.aim, state.avoid):
                return  # another failure (found in a later round) or a known one: passing here
        else:
            sig, level, aim, avoid = self.ledger.new_signature(finding, at, diagnose)
            if sig is None and level == _DEFERRED:  # new, but not alone: passing while another is looked for
                return
            if sig is None:  # a failure already reported: passing, for this search
                self.streak += 1
                if self.streak >= SATURATION:
                    raise _Saturated()
                return
            self.streak = 0
            state.sig, state.level, state.aim, state.avoid = sig, level, aim, avoid
        best = state.best
        if best is None or case.size() < best[1].size():
            state.best = (finding, case, sig)
        raise _NewFailure(finding, case, sig)

    def located(self, sig: tuple, case: Any) -> tuple:
        """``sig`` with its places, computed on ``case`` (``KNOWN_PLACES_SECONDS``) when it has none: a
        failure found by its check alone, or the cell's first one."""
        if sig[0] not in DIAGNOSED_CHECKS or sig[4] or not self.ledger.placed:
            return sig
        _, found = places_of(self.member, case, self.dtype, timeout=self.runner.timeout,
                             seconds=KNOWN_PLACES_SECONDS)
        return (*sig[:4], found)
