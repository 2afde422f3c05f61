"""Every distinct failure of a cell, not only the smallest one a search shrinks to.

A search stops an implementation at its first failure and shrinks it. An
implementation with several independent bugs then shows one of them: the
one the smallest case reaches (a softmax axis at ℓ = ℓ_max = 1) hides the
others (a residual taken from the normalised input, a crash whenever
ℓ < ℓ_max) until it is fixed.

After the first failure, ``search_distinct`` keeps searching for that
implementation within what is left of the budget, for failures whose
*signature* differs from every failure found so far:

- the check that failed (``spec``, ``nan``, ``exception``, ``refusal``, ...);
- for an exception, its type;
- for a value check, the simplest variant set the output matches
  (``diagnosis.py``) and where a model or layer first departs
  (``divergence.py``: layer and sublayer). Two failures the same
  convention explains are the same wherever they first depart; a
  convention the short diagnosis had no time to find ("?") equals any
  (``same``).

A failing example whose signature is already known counts as passing for
this search, and so does, while one new failure is being shrunk, a failure
with yet another signature (found in the next round): Hypothesis shrinks
each new failure within its own signature, and it is reported with its own
shrunk case file and reproducer.
Whether a failing example is new is decided as cheaply as possible: by
its check and exception type, else by where the model first departs, else
(for at most ``DIAGNOSED_SIGNATURES`` examples) by a short diagnosis
(``SIGNATURE_SECONDS``); while it is shrunk, each candidate is compared by
the same test that found it new;
the search stops after ``MAX_DISTINCT`` further failures, after
``SATURATION`` failing examples in a row that are all known, after
``SECONDS`` (a shrink the time cap interrupts reports the smallest case
seen so far, marked not shrunk), or when its examples are spent. Batched
calls are not made here (the first search already checked batching).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from hypothesis import HealthCheck, Phase, given, reject, seed, settings, target

from ftspec.spec import SpecError
from ftspec.spec.registry import Entry

from ..core.calling import Prepared
from ..core.case import Case
from .diagnosis import DIAGNOSED_CHECKS
from ..core.judge import Finding
from ..core.timecap import TimeCap, TimeUp

__all__ = ["DIAGNOSED_SIGNATURES", "MAX_DISTINCT", "SATURATION", "SECONDS", "SIGNATURE_SECONDS", "describe", "same",
           "search_distinct", "signature", "signature_of_failure"]

#: further failures reported per cell at most
MAX_DISTINCT = 4
#: wall seconds per cell for the search after the first failure (shrinking included) when the
#: runner has no time cap of its own (its budget is then the examples left; this only bounds a
#: slow implementation); with one (the profiles' ``seconds``), that cap
SECONDS = 30.0
#: the variant search's budget when computing a signature (a full diagnosis follows for the report)
SIGNATURE_SECONDS = 1.0
#: known failures in a row after which the search stops (a bug that fails every example would
#: otherwise spend the whole budget proving it is the same bug)
SATURATION = 6
#: failing examples per cell whose signature is diagnosed (about 1 s each on a model); after that a
#: failure of an already-seen check and exception type counts as known
DIAGNOSED_SIGNATURES = 4


def _exception_type(message: str) -> str:
    """``raised ValueError: ...`` -> ``ValueError`` (the execute module's wording)."""
    text = message.split("raised ", 1)[1] if "raised " in message else ""
    name = text.split(":", 1)[0].strip()
    return name if name.isidentifier() else ""


def _convention(diagnosis: Optional[Mapping[str, Any]]) -> str:
    if not diagnosis:
        return ""
    if diagnosis.get("recurred") is False:
        return "did not recur"
    matches = diagnosis.get("matches") or []
    if not matches:  # "?": the search ran out of time before it could say (see ``same``)
        return "?" if diagnosis.get("gave_up") else "no neighbouring set"
    simplest = min(matches, key=lambda m: (len(m["changes"]), str(sorted(m["changes"].items()))))
    return ", ".join(f"{k}={v}" for k, v in sorted(simplest["changes"].items()))


def _where(diagnosis: Optional[Mapping[str, Any]]) -> str:
    div = (diagnosis or {}).get("divergence") or {}
    where, sub = div.get("where", ""), div.get("sublayer", "")
    return f"{where} / {sub}" if sub else where


def signature(check: str, message: str, diagnosis: Optional[Mapping[str, Any]]) -> tuple[str, str, str, str]:
    """(check, exception type, matched convention, first divergence): what makes two failures
    the same or different."""
    valued = check in DIAGNOSED_CHECKS  # an exception is told apart by its type, not where it raises
    return (check, _exception_type(message) if check in ("exception", "determinism") else "",
            _convention(diagnosis) if valued else "", _where(diagnosis) if valued else "")


def _definite(convention: str) -> bool:
    return convention not in ("", "?", "no neighbouring set", "did not recur")


def same(a: tuple[str, str, str, str], b: tuple[str, str, str, str]) -> bool:
    """Whether two signatures name the same failure: the same check and exception type, and either
    the same matched convention (one convention explains both, wherever they were first seen) or the
    same first divergence with conventions that agree (a convention the diagnosis had no time to
    find, "?", agrees with any)."""
    if a[:2] != b[:2]:
        return False
    if _definite(a[2]) and a[2] == b[2]:
        return True
    return a[3] == b[3] and (a[2] == b[2] or "?" in (a[2], b[2]))


def signature_of_failure(failure: Any) -> tuple[str, str, str, str]:
    """The signature of a recorded failure (``runner.Failure`` or its plain-data form)."""
    get = failure.get if isinstance(failure, Mapping) else (lambda k, d=None: getattr(failure, k, d))
    return signature(get("check", ""), get("message", ""), get("diagnosis"))


def describe(sig: tuple[str, str, str, str]) -> str:
    """A signature in words, for reports."""
    check, exc, convention, where = sig
    parts = [f"check {check}"]
    if exc:
        parts.append(f"raises {exc}")
    if convention:
        parts.append(f"matches {convention}")
    if where:
        parts.append(f"first departs at {where}")
    return "; ".join(parts)


class _NewFailure(Exception):
    def __init__(self, finding: Finding, case: Case, sig: tuple) -> None:
        super().__init__(f"{finding.check}: {finding.message}")
        self.finding, self.case, self.sig = finding, case, sig


class _Saturated(BaseException):
    """``SATURATION`` known failures in a row: the search stops (never while shrinking)."""


def _signature_at(level: int, member: Any, case: Case, finding: Finding, dtype: str, timeout: float) -> tuple:
    """The signature as far as ``level``: 0 the check and exception type (free); 1 also where a model
    or layer first departs (a walk, 0.05 to 0.6 s; convention "?"); 2 also the convention the output
    matches (a diagnosis of ``SIGNATURE_SECONDS``)."""
    if level == 0 or finding.check not in DIAGNOSED_CHECKS:
        return signature(finding.check, finding.message, None)
    if level == 1:
        from .divergence import locate_failure

        where = locate_failure(member, case, dtype, timeout=timeout)
        return signature(finding.check, finding.message,
                         {"gave_up": True, "divergence": where.to_dict() if where is not None else None})
    from .diagnosis import diagnose_failure

    d = diagnose_failure(member, case, finding.check, dtype, timeout=timeout, seconds=SIGNATURE_SECONDS)
    return signature(finding.check, finding.message, d.to_dict() if d is not None else None)


def _matches(level: int, a: tuple, b: tuple) -> bool:
    """Whether two signatures agree as far as ``level`` (see ``_signature_at``)."""
    return a[:2] == b[:2] if level == 0 else same(a, b)


def search_distinct(runner: Any, entry: Entry, dtype: str, variants: Any, limits: Any, member: Any, cell: Any, *,
                    examples: int, seconds: float = SECONDS, max_failures: int = MAX_DISTINCT,
                    refused: Callable[[Entry, Case, SpecError], bool] = lambda e, c, x: False) -> list[dict[str, Any]]:
    """Search ``member`` again for failures whose signature differs from ``cell.failure``'s and from
    each other; each is recorded through ``runner.record_failure`` (case file, report, diagnosis) and returned
    as plain data (the ``Cell.more_failures`` records). ``examples``: the examples left; ``refused``:
    the runner's ``refused_empty_query`` (a refusal the implementation must share).

    Rounds of one Hypothesis search each, every round finding (and shrinking) at most one new failure,
    until the examples, the failures, the time or the member run out."""
    from ..core.strategies import cases

    if cell.failure is None or examples <= 0 or max_failures <= 0 or member.hung:
        return []
    search = _DistinctSearch(runner, entry, dtype, member, refused, known={signature_of_failure(cell.failure)})
    found: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    strategy = cases(entry.name, dtype=dtype, variants=variants, max_batch=1, budget=runner.profile.budget,
                     limits=None if limits.unconstrained else limits)
    round_ = 0
    while examples > 0 and len(found) < max_failures and time.monotonic() < deadline and not member.hung:
        outcome = search.round(strategy, examples, runner.seed * 7919 + 104729 + round_, deadline)
        examples = (0 if outcome.broken else examples) - outcome.generated
        round_ += 1
        if outcome.failure is None:
            break
        finding, case, sig = outcome.failure
        record = _record(runner, member, cell, finding, case, dtype, sig, outcome.shrunk)
        if search.is_new(record, sig, [cell.failure, *found]):
            found.append(record)
    return found


@dataclass
class _Round:
    """What one round of the search saw: the examples it drew, and the new failure it is shrinking."""

    generated: int = 0  # drawn examples (not shrinking steps): they count against the examples left
    sig: Optional[tuple] = None  # the new failure's signature, once one is found
    level: int = 0  # how far that signature was computed (``_signature_at``)
    best: Optional[tuple[Finding, Case, tuple]] = None  # the smallest failing case of that signature


@dataclass
class _Outcome:
    """How a round ended: the failure it found (finding, case, signature) or None, whether that case
    was shrunk, whether the search itself broke (no round follows), the examples it drew."""

    failure: Optional[tuple[Finding, Case, tuple]]
    shrunk: bool = True
    broken: bool = False
    generated: int = 0


class _DistinctSearch:
    """The search for further failures of one member on one cell: the signatures already known, and
    the budget of diagnosed signatures and of known failures in a row, across rounds."""

    def __init__(self, runner: Any, entry: Entry, dtype: str, member: Any,
                 refused: Callable[[Entry, Case, SpecError], bool], known: set[tuple]) -> None:
        self.runner, self.entry, self.dtype, self.member, self.refused = runner, entry, dtype, member, refused
        self.known = known
        self.diagnosed = 0  # signatures diagnosed so far (at most ``DIAGNOSED_SIGNATURES``)
        self.streak = 0  # known failures in a row (the search stops at ``SATURATION``)

    def round(self, strategy: Any, examples: int, round_seed: int, deadline: float) -> _Outcome:
        """One Hypothesis search of at most ``examples`` examples, until it finds a new failure and
        shrinks it, spends its examples, saturates, or reaches ``deadline``."""
        state = _Round()
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
            return _Outcome((exc.finding, exc.case, exc.sig), generated=state.generated)
        except TimeUp:
            return _Outcome(state.best, shrunk=False, generated=state.generated)
        except Exception:  # noqa: BLE001 - a flaky or broken extra search ends it, never the run
            # the smallest case seen, unshrunk
            return _Outcome(state.best, shrunk=False, broken=state.best is not None, generated=state.generated)

    def example(self, case: Case, state: _Round) -> None:
        """One example: the spec's reference (or its refusal), the member's outputs, the judgement;
        a failure goes to ``judge``, a pass steers the search towards larger error/bound ratios."""
        from ..core.execute import examine
        from ..core.tolerances import ToleranceModelError

        if state.sig is None:  # drawn, not a shrinking step: counts against the examples
            state.generated += 1
        member, dtype, timeout = self.member, self.dtype, self.runner.timeout
        prepared = Prepared(self.entry, case.inputs, case.params, dtype)
        try:
            ref = self.runner.reference_for(self.entry, prepared, case, dtype, member.impl.precision)
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
        from ..core.execute import CallTimeout, call_member

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

        sig: Optional[tuple]
        if state.sig is not None:  # shrinking a new failure: the same test that found it
            sig = at(state.level)
            if not _matches(state.level, sig, state.sig):
                return  # another failure (found in a later round) or a known one: passing here
        else:
            sig, level = self.new_signature(finding, at)
            if sig is None:  # a failure already reported: passing, for this search
                self.streak += 1
                if self.streak >= SATURATION:
                    raise _Saturated()
                return
            self.streak = 0
            state.sig, state.level = sig, level
        best = state.best
        if best is None or case.size() < best[1].size():
            state.best = (finding, case, sig)
        raise _NewFailure(finding, case, sig)

    def new_signature(self, finding: Finding, at: Callable[[int], tuple]) -> tuple[Optional[tuple], int]:
        """(signature, level) when the failure is new, as cheaply as can tell: its check and
        exception type, else where it departs, else its convention; (None, level) when known."""
        known = self.known
        sig = at(0)
        if not any(_matches(0, sig, k) for k in known):
            return sig, 0
        if finding.check not in DIAGNOSED_CHECKS:
            return None, 0
        sig = at(1)
        alike = [k for k in known if _matches(1, sig, k)]
        if not alike:
            if self.diagnosed < DIAGNOSED_SIGNATURES and any(_definite(k[2]) for k in known):
                self.diagnosed += 1  # departs elsewhere: is it a known convention all the same?
                full = at(2)
                if any(same(full, k) for k in known):
                    return None, 1
            return sig, 1
        if self.diagnosed >= DIAGNOSED_SIGNATURES or any(k[2] == "?" for k in alike):
            return None, 1  # no budget left, or a known one of any convention
        self.diagnosed += 1
        sig = at(2)
        return (None if any(_matches(2, sig, k) for k in known) else sig), 2

    def is_new(self, record: Mapping[str, Any], sig: tuple, earlier: list[Any]) -> bool:
        """Whether a recorded failure differs from the ``earlier`` ones (the cell's first failure and
        those found before) under the report's full diagnosis; both its signatures become known."""
        full = signature_of_failure(record)  # with the report's full diagnosis budget
        self.known.update({sig, full})
        # the short budget may tell it apart where the full diagnosis does not: then the same failure
        return not any(same(full, signature_of_failure(f)) for f in earlier)


def _record(runner: Any, member: Any, cell: Any, finding: Finding, case: Case, dtype: str, sig: tuple,
            shrunk: bool) -> dict[str, Any]:
    """One further failure as plain data, written and reported as the runner writes the first one."""
    scratch = type(cell)(cell.algorithm, cell.impl, cell.dtype, cell.device)  # runner.Cell
    runner.record_failure(scratch, member, finding, case, dtype, shrunk=shrunk)
    f = scratch.failure
    return {"check": f.check, "message": f.message, "case_file": f.case_file, "reproducer": f.reproducer,
            "report": f.report, "shrunk": f.shrunk, "diagnosis": f.diagnosis,
            "signature": describe(signature_of_failure(f)), "found_as": describe(sig)}
