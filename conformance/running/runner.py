"""The conformance search: every implementation × algorithm × dtype × device.

For each (algorithm, dtype) one Hypothesis search draws cases from the
registry-driven strategies; on every example each participating
implementation-on-a-device ("member") is examined (conformance/core/execute.py)
against one shared reference, and members are compared with each other.
``hypothesis.target`` climbs the worst error/bound ratio. When a member
fails, Hypothesis shrinks the case; the minimal case is written to a
replayable case file, that member leaves the search, and the search goes on
with the others on fresh examples. A timeout is recorded at once (shrinking a
hang would mean waiting for it again).

One search per implementation (issue 14): the members of one implementation (its devices)
search together, and every implementation gets its own search and its own time cap, from the
same seed, so that a slow implementation (JAX compiling a program per shape) holds no other
back. Implementations whose strategies agree draw the same cases, and the spec's reference
for a case is evaluated once per distinct input set (a cache keyed by the inputs' digest, for
the (algorithm, dtype) being searched); outputs are kept by the same key, so implementations
are still compared with each other on the cases they share. Within a search a case
Hypothesis draws again (its targeting phase repeats inputs) is not examined again: its score
is given to ``target`` and it is counted in ``RunResult.repeated``, not as an example. The
batch check (a batched call against per-example calls) runs on the first ``BATCH_CHECKS``
passing cases of each (variant, sizes, batch length) of a search, where a batch adds power,
and on every case once a failure is being shrunk. An implementation that declares
``extra["shapes_per_search"] = K`` draws its sizes from at most K per variant in a search
(``strategies.cases(shapes=)``), so the programs it compiles are reused. ``shard=(k, n)``: this
runner makes shard k of n of every search, with a seed of its own and its share of the
examples (conformance/running/parallel.py merges shards).

A case the spec refuses because a query has no key it may attend to, under
``empty_query="error"``, is not rejected like other refused input: the
implementation must refuse it too (raise any exception), or the cell fails
the ``refusal`` check (docs/spec.md).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import numpy as np
from hypothesis import HealthCheck, Phase, given, reject, seed, settings, target
from hypothesis.errors import Flaky

from ftspec.impls.api import FLOAT_DTYPES, Implementation, Limits, select_devices
from ftspec.spec import SpecError
from ftspec.spec.entry import Kind
from ftspec.spec.registry import REGISTRY, Entry

from ..core.calling import Prepared
from ..core.case import Case
from ..core.casefile import reproducer, write_case
from ..forensics.diagnosis import diagnose_failure
from ..forensics.distinct_failures import MAX_DISTINCT, SECONDS as DISTINCT_SECONDS, search_distinct
from ..core.execute import CallTimeout, Member, call_member, examine
from ..core.interrupts import checkpoint
from ..core.judge import Finding, compare_pair
from ..core.profiles import Profile
from .local_constants import no_local_constants
from ..core.timecap import TimeCap, TimeUp
from ..core.tolerances import Reference, ToleranceModelError, reference

__all__ = ["BATCH_CHECKS", "Cell", "Failure", "RunResult", "Runner", "refused_empty_query", "shard_seed"]

#: passing batch checks per (variant, sizes, batch length) in a search (see the module docstring)
BATCH_CHECKS = 3
#: distinct cases whose references (and outputs, for the peer comparison) a runner keeps per
#: (algorithm, dtype): the first ones are kept, later ones not, so an implementation searched
#: after another finds the cases they share in the same order
CACHE_CASES = 4096
#: search rounds at most: a round ends early on a failure, or draws repeats that are not examples
MAX_ROUNDS = 16


@dataclass
class Failure:
    check: str
    message: str
    case: Optional[Case]  # None: no case (the worker that held it was lost) or its case file is unreadable
    case_file: Optional[str]
    reproducer: str
    report: str
    shrunk: bool = True
    diagnosis: Optional[dict] = None  # forensics/diagnosis.py: the conventions the output matches (plain data)


@dataclass
class Cell:
    """One row of the summary: algorithm × implementation × dtype × device."""

    algorithm: str
    impl: str
    dtype: str
    device: str
    status: str = "pass"  # pass | fail | not implemented | no examples | error
    examples: int = 0
    out_of_range: int = 0
    worst_ratio: float = 0.0
    checks: Counter = field(default_factory=Counter)
    failure: Optional[Failure] = None
    note: str = ""
    ambiguous: int = 0  # sampled tokens accepted because u lay within rounding of a CDF boundary
    undetermined: int = 0  # non-finite elements accepted where the dtype cannot determine the value
    #: seconds from the start of this cell's search to its first failing example (before shrinking),
    #: and how many examples the member had run by then (the failing one included)
    first_failure_s: Optional[float] = None
    first_failure_examples: Optional[int] = None
    #: sha256 (hex) over the digests of the cases examined, in order: same seed, same cases
    cases_digest: str = ""
    #: further failures with other signatures than ``failure``'s, as plain data (forensics/distinct_failures.py)
    more_failures: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in ("pass", "not implemented")

    def add_counts(self, other: "Cell") -> None:
        """Add ``other``'s examples and findings to this cell's counts (another shard's or another
        round's search of the same cell); status and failure are the caller's to merge."""
        self.examples += other.examples
        self.out_of_range += other.out_of_range
        self.worst_ratio = max(self.worst_ratio, other.worst_ratio)
        self.checks.update(other.checks)
        self.ambiguous += other.ambiguous
        self.undetermined += other.undetermined


@dataclass
class RunResult:
    cells: list[Cell]
    profile: str
    seed: int
    seconds: float = 0.0
    generated: Counter = field(default_factory=Counter)  # (algorithm, dtype) -> examples drawn
    rejected: Counter = field(default_factory=Counter)  # (algorithm, dtype) -> cases the spec refused
    unmodelled: Counter = field(default_factory=Counter)  # (algorithm, dtype) -> no tolerance could be derived
    time_capped: dict = field(default_factory=dict)  # (algorithm, dtype) -> True if the time cap ended it
    agreement: dict = field(default_factory=dict)  # (algorithm, dtype) -> {(a, b): worst |a-b| / (2 bound)}
    fixtures: list = field(default_factory=list)  # fixture replay results (conformance/replay_fixtures)
    #: which fixtures were replayed ("all", "sample", "none") and over how many worker processes
    #: (0: in this process, ``--in-process``)
    fixture_selection: str = "none"
    jobs: int = 0
    #: seconds spent computing spec references (binary64 + Monte Carlo tolerances, cache misses only)
    reference_seconds: float = 0.0
    #: seconds spent in implementation calls (conversions included), per implementation label
    implementation_seconds: Counter = field(default_factory=Counter)
    #: (algorithm, dtype) -> cases a search drew again and did not examine again
    repeated: Counter = field(default_factory=Counter)
    #: shards each search was split into (conformance/running/parallel.py; 1: not split)
    shards: int = 1
    #: spec references computed (distinct input sets: cache misses), every search together
    reference_evaluations: int = 0
    # -- set by conformance/session/commands.py, which judges the run as a whole ---------------------
    #: conformant | partial | inconclusive | non-conformant ("" until judged)
    verdict: str = ""
    reasons: list = field(default_factory=list)  # why the verdict is not "conformant"
    minimum: int = 0  # examples a cell must run for a verdict
    #: what was asked for: algorithms, dtypes, devices (None: all declared), fixtures, and what that narrows
    selection: dict = field(default_factory=dict)
    #: the extra search round for cells short of the minimum: seed, seconds cap, searches
    extension: dict = field(default_factory=dict)
    #: Ctrl-C: the result holds what ended before it (cells of searches not ended: "no examples")
    interrupted: bool = False
    #: plugins that failed to load: (name, error) pairs
    broken: list = field(default_factory=list)
    #: the (label, Implementation) pairs that ran (for the report's environment)
    plugins: list = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.cells) and all(getattr(f, "ok", True) for f in self.fixtures)

    def failures(self) -> list[Cell]:
        return [c for c in self.cells if not c.ok]


def refused_empty_query(entry: Entry, case: Case, exc: SpecError) -> bool:
    """Whether the spec refused ``case`` because a query has no key under ``empty_query="error"``:
    a refusal an implementation must share (it raises too), unlike input the strategies should not
    have drawn."""
    if "empty_query" not in entry.switches or getattr(case.variant, "empty_query", None) != "error":
        return False
    mask = case.inputs.get("Mask")
    if mask is None or getattr(exc, "argument", None) != "Mask":
        return False
    mask = np.asarray(mask, dtype=bool)
    return mask.ndim == 2 and not mask.any(axis=0).all()


class _MemberFailed(Exception):
    def __init__(self, member: Member, finding: Finding, case: Case) -> None:
        super().__init__(f"{member.label} on {member.device}: {finding.check}: {finding.message}")
        self.member = member
        self.finding = finding
        self.case = case


def _digest(arrays: dict[str, np.ndarray]) -> bytes:
    h = hashlib.sha256()
    for k in sorted(arrays):
        v = np.asarray(arrays[k]).copy(order="C")
        h.update(k.encode() + str(v.dtype).encode() + str(v.shape).encode() + v.tobytes())
    return h.digest()


def _prepared_digests(prepared: Prepared) -> tuple[bytes, bytes]:
    """(inputs, parameters) digests of a prepared case, computed once per object."""
    found = getattr(prepared, "_ftspec_digests", None)
    if found is None:
        found = (_digest(prepared.inputs), _digest(prepared.params))
        prepared._ftspec_digests = found  # type: ignore[attr-defined]
    return found


def shard_seed(seed: int, round_: int, shard: tuple[int, int] = (0, 1)) -> int:
    """The Hypothesis seed of a search round: the unsharded formula for one shard (runs made before
    shards existed draw the same cases), otherwise a hash of (seed, round, shard k, shards n), so
    that shards draw different cases and the same seed and shard count give the same cases."""
    k, n = shard
    if n == 1:
        return seed * 7919 + round_
    text = f"ftspec-shard/{seed}/{round_}/{k}/{n}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big")


def shard_examples(examples: int, shard: tuple[int, int]) -> int:
    """Shard k of n's share of ``examples`` (the shares add up to ``examples``)."""
    k, n = shard
    return examples // n + (1 if k < examples % n else 0)


_PROFILE = object()  # "the profile's time cap"


def _shapes_per_search(impl: Implementation) -> Optional[int]:
    """The bound an implementation declares on the sizes drawn per search and variant
    (``extra["shapes_per_search"]``, a positive whole number), or None."""
    extra = getattr(impl, "extra", None)
    value = extra.get("shapes_per_search") if isinstance(extra, Mapping) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


class Runner:
    """Runs the search; ``progress(event, **info)`` receives progress events."""

    #: further distinct failures searched for per failing cell (conformance/forensics/distinct_failures.py; 0: none)
    distinct_failures = MAX_DISTINCT

    def __init__(self, plugins: Sequence[tuple[str, Implementation]], *, profile: Profile, seed: int = 0,
                 case_dir: Path | str = "reports/cases", examples: Optional[int] = None,
                 call_timeout: Optional[float] = None, devices: Optional[Sequence[str]] = None,
                 progress: Optional[Callable[..., None]] = None, seconds: Any = None,
                 exclude: Iterable[Sequence[str]] = (), shard: tuple[int, int] = (0, 1)) -> None:
        """``seconds``: wall-time cap per implementation search; by default the profile's when
        ``examples`` is not given explicitly (an explicit example count means exactly that many).
        ``exclude``: (label, algorithm, dtype) left out of their search, cells "no examples" (as
        ``run_parallel``'s). ``shard``: (k, n), this runner makes shard k of n of each search."""
        k, n = (int(shard[0]), int(shard[1]))
        if n < 1 or not 0 <= k < n:
            raise ValueError(f"shard must be (k, n) with 0 <= k < n, given {shard!r}")
        self.shard = (k, n)
        self.exclude = {(str(a), str(b), str(c)) for a, b, c in exclude}
        if seconds is None:
            seconds = _PROFILE if examples is None else None
        self.plugins = list(plugins)
        self.profile = profile
        self.seed = seed
        self.case_dir = Path(case_dir)
        self.examples = examples or profile.examples
        self.seconds = profile.seconds if seconds is _PROFILE else seconds
        self.timeout = call_timeout or profile.call_timeout
        self.device_filter = list(devices) if devices else None
        self.progress = progress or (lambda event, **info: None)
        self._refs: dict[tuple, Any] = {}  # references of the (algorithm, dtype) being searched
        #: case key -> {member key: (outputs, reference)}: what each implementation answered
        self._outputs: dict[tuple, dict[tuple[str, str], tuple[dict, Reference]]] = {}
        self._seen: dict[tuple, float] = {}  # case key -> score, for the passing cases of this search
        self._batched: Counter = Counter()  # (variant, sizes, batch length) -> passing batch checks
        self.reference_evaluations = 0  # references computed (cache misses), for tests and reports
        self._devices: dict[str, list[str]] = {}
        self._device_errors: dict[str, str] = {}
        self._reference_seconds = 0.0
        self._search_started = 0.0
        self._found: dict[str, list[str]] = {}
        for label, impl in self.plugins:
            try:
                found = [str(d) for d in impl.devices()]
            except Exception as exc:  # noqa: BLE001 - the plugin's failure, a cell error below
                self._device_errors[label] = f"devices() raised {type(exc).__name__}: {exc}"
                found = []
            self._found[label] = found
            self._devices[label] = select_devices(found, self.device_filter)

    # -- references, cached: every member of a search shares them -------------
    def _reference(self, entry: Entry, prepared: Prepared, case: Case, dtype: str, precision: str) -> Reference:
        key = (entry.name, dtype, precision, case.variant.hash, tuple(sorted(case.hyper.items())),
               *_prepared_digests(prepared))
        if key in self._refs:
            value = self._refs[key]
        else:
            started = time.perf_counter()
            self.reference_evaluations += 1
            try:
                value = reference(entry, prepared.inputs, prepared.params, hyper=case.hyper,
                                  variant=case.variant, dtype=dtype, precision=precision)
            except (SpecError, ToleranceModelError) as exc:
                value = exc
            finally:
                self._reference_seconds += time.perf_counter() - started
            if len(self._refs) < CACHE_CASES:  # the first ones: see CACHE_CASES
                self._refs[key] = value
        if isinstance(value, (SpecError, ToleranceModelError)):
            raise value
        return value

    # -- the run ------------------------------------------------------------------
    def plan(self, algorithms: Optional[Sequence[str]] = None, dtypes: Optional[Sequence[str]] = None,
             result: Optional[RunResult] = None) -> tuple[RunResult, list[tuple[Entry, str, list[Member], dict]]]:
        """The searches a run makes, in order: (entry, dtype, members, their cells). The result holds
        every cell, those of unimplemented algorithms and unusable devices included."""
        names = list(algorithms) if algorithms else list(REGISTRY)
        for n in names:
            if n not in REGISTRY:
                raise ValueError(f"unknown algorithm {n!r}; known: {', '.join(REGISTRY)}")
        result = result if result is not None else RunResult([], self.profile.name, self.seed)
        plan = []
        for name in names:
            entry = REGISTRY[name]
            for dtype in FLOAT_DTYPES:
                if dtypes and dtype not in dtypes:
                    continue
                members, cells = self._members(entry, dtype, result)
                if members:
                    plan.append((entry, dtype, members, cells))
        return result, plan

    def run(self, algorithms: Optional[Sequence[str]] = None, dtypes: Optional[Sequence[str]] = None) -> RunResult:
        start = time.perf_counter()
        result, plan = self.plan(algorithms, dtypes)
        self.progress("plan", searches=len(plan), examples=self.examples)
        for entry, dtype, members, cells in plan:
            self._refs.clear()  # a case of one (algorithm, dtype) never meets another's
            self._outputs.clear()
            for group in self._variant_groups(members, entry.name):
                self._search(entry, dtype, group, cells, result)
        self._refs.clear()
        self._outputs.clear()
        result.seconds = time.perf_counter() - start
        result.shards = self.shard[1]
        result.reference_seconds = self._reference_seconds
        result.reference_evaluations = self.reference_evaluations
        self.progress("done", result=result)
        return result

    def _members(self, entry: Entry, dtype: str, result: RunResult) -> tuple[list[Member], dict]:
        members: list[Member] = []
        cells: dict[tuple[str, str], Cell] = {}
        for label, impl in self.plugins:
            if dtype not in impl.dtypes:
                continue
            if entry.name not in impl.algorithms:
                result.cells.append(Cell(entry.name, label, dtype, "-", status="not implemented"))
                continue
            if label not in self._device_errors and not self._devices[label] and self._found[label]:
                continue  # the --device selection leaves this implementation no device: not part of the run
            if label in self._device_errors or not self._devices[label]:
                note = self._device_errors.get(label, "no device selected")
                result.cells.append(Cell(entry.name, label, dtype, "-", status="error", note=note))
                continue
            for device in self._devices[label]:
                m = Member(label, impl, device)
                cell = Cell(entry.name, label, dtype, device)
                result.cells.append(cell)
                if (label, entry.name, dtype) in self.exclude:  # not called: its cell says so
                    cell.status, cell.note = "no examples", "left out of this search (exclude)"
                    continue
                members.append(m)
                cells[m.key] = cell
        return members, cells

    @staticmethod
    def _variant_groups(members: list[Member], algorithm: str = "") -> list[tuple[Any, Limits, list[Member]]]:
        """Members that share one search: the devices of one implementation (one search per
        implementation, so none holds another back), with its variant sets and its limits for
        ``algorithm`` (each is examined on every case within its own limits and on no case
        outside them)."""
        groups: dict[Any, list[Member]] = {}
        for m in members:
            key = ("all" if m.impl.variants == "all" else tuple(v.hash for v in m.impl.variants),
                   m.impl.limits_for(algorithm).key(), m.label)
            groups.setdefault(key, []).append(m)
        out = []
        for (variants, _, _), ms in groups.items():
            out.append(("all" if variants == "all" else list(ms[0].impl.variants),
                        ms[0].impl.limits_for(algorithm), ms))
        return out

    def _search(self, entry: Entry, dtype: str, group: tuple[Any, Limits, list[Member]], cells: dict,
                result: RunResult) -> None:
        with no_local_constants():  # the same seed draws the same cases in any process (reproducible.py)
            self._search_drawn(entry, dtype, group, cells, result)

    def _search_drawn(self, entry: Entry, dtype: str, group: tuple[Any, Limits, list[Member]], cells: dict,
                      result: RunResult) -> None:
        from ..core.strategies import cases

        variants, limits, members = group
        active = list(members)
        budget = shard_examples(self.examples, self.shard)
        round_ = 0
        cap = float(self.seconds or 0.0)
        deadline = time.monotonic() + cap if cap else None
        references_before = self._reference_seconds
        self._search_started = time.perf_counter()
        self._seen = {}
        self._batched = Counter()
        digests = {m.key: hashlib.sha256() for m in members}
        self.progress("start", algorithm=entry.name, dtype=dtype, members=[f"{m.label}@{m.device}" for m in active],
                      examples=budget)
        # Built once per search (not per round or per draw); the shape pool lives as long as the search.
        shapes = _shapes_per_search(members[0].impl) if members else None
        strategy = cases(entry.name, dtype=dtype, variants=variants, max_batch=self.profile.max_batch,
                         budget=self.profile.budget, limits=None if limits.unconstrained else limits,
                         shapes=shapes)
        while active and budget > 0:
            state: dict[str, Any] = {"generated": 0, "repeated": 0, "digests": digests}

            def over(state: dict[str, Any] = state) -> bool:
                # Never while shrinking a failure: the time cap must not lose a counterexample.
                # The spec's references are shared by the searches of a task, and whichever
                # implementation is searched first would pay for them: their time is not counted
                # against an implementation's cap, up to the cap again (a search whose references
                # dominate, a training loop's, takes at most twice its cap).
                return (deadline is not None and not state.get("failed") and state["generated"] + round_ > 0
                        and time.monotonic() > deadline + min(self._reference_seconds - references_before, cap))

            # Checked before every draw and in the body, and by a watchdog while Hypothesis's own
            # code runs (its targeting phase can run long without drawing: timecap.py), which
            # also raises a held Ctrl-C there.
            timecap = TimeCap(over)

            # Every Hypothesis run draws its minimal case first; after round 0 that case is a
            # repeat, so a later round asks for one more (without it a search of N examples
            # examined N - 1, and a thorough cell ended at 999 of its 1,000).
            @settings(max_examples=budget + (1 if round_ else 0), deadline=None, database=None,
                      report_multiple_bugs=False, derandomize=False, print_blob=False,
                      phases=(Phase.explicit, Phase.generate, Phase.target, Phase.shrink),
                      suppress_health_check=list(HealthCheck))
            @seed(shard_seed(self.seed, round_, self.shard))
            @given(timecap.strategy(strategy))
            def search(case: Case) -> None:
                checkpoint()  # a held Ctrl-C stops the search here, in the test, not in Hypothesis's engine
                with timecap.checked():
                    state["generated"] += 1
                    try:
                        self._example(entry, dtype, case, active, cells, result, state)
                    except _MemberFailed:
                        state["failed"] = True
                        raise

            try:
                with timecap.watching():
                    search()
                # Repeats (Hypothesis's targeting draws a case again) are not examples: a round
                # that drew some goes on with a fresh seed for the examples it lacks, while it
                # still finds new cases (at most MAX_ROUNDS rounds).
                if not (state["repeated"] and state["generated"] > state["repeated"] and round_ + 1 < MAX_ROUNDS):
                    break
            except TimeUp:
                result.time_capped[(entry.name, dtype)] = True
                break
            except _MemberFailed as exc:
                self._fail(cells[exc.member.key], exc.member, exc.finding, exc.case, dtype, shrunk=True)
                active = [m for m in active if m.key != exc.member.key]
            except Flaky as exc:  # failed, then passed when replayed: nondeterminism
                culprit = self._culprit(exc)
                if culprit is None:
                    self._harness_error(active, cells, f"flaky search: {exc}")
                    break
                member, finding, case = culprit
                finding.message = "failed, then passed on an identical replay (nondeterministic): " + finding.message
                self._fail(cells[member.key], member, finding, case, dtype, shrunk=False)
                active = [m for m in active if m.key != member.key]
            except Exception as exc:  # noqa: BLE001 - a harness problem must not end the run
                self._harness_error(active, cells, f"{type(exc).__name__}: {exc}")
                break
            finally:
                budget -= state["generated"] - state["repeated"]
                round_ += 1
            active = [m for m in active if not m.hung]
        for m in members:  # every distinct failure, within what is left of the budget
            if cells[m.key].failure is not None and self.distinct_failures > 0:
                cells[m.key].more_failures = search_distinct(
                    self, entry, dtype, variants, limits, m, cells[m.key], examples=budget,
                    seconds=self.seconds or DISTINCT_SECONDS, max_failures=self.distinct_failures,
                    refused=refused_empty_query)
        for m in members:
            result.implementation_seconds[m.label] += m.seconds  # type: ignore[assignment]  # float seconds
            cell = cells[m.key]
            cell.cases_digest = digests[m.key].hexdigest()
            if cell.status == "pass" and cell.examples == 0:
                cell.status = "no examples"
                cell.note = "every drawn case was refused or out of range"
        self.progress("end", algorithm=entry.name, dtype=dtype, cells=[cells[m.key] for m in members])

    @staticmethod
    def _culprit(exc: BaseException) -> Optional[tuple[Member, Finding, Case]]:
        stack = [exc]
        while stack:
            e = stack.pop()
            if isinstance(e, _MemberFailed):
                return e.member, e.finding, e.case
            stack.extend(getattr(e, "exceptions", []) or [])
            if e.__cause__:
                stack.append(e.__cause__)
            if e.__context__:
                stack.append(e.__context__)
        return None

    def _harness_error(self, active: list[Member], cells: dict, message: str) -> None:
        for m in active:
            cell = cells[m.key]
            if cell.status == "pass":
                cell.status = "error"
                cell.note = message

    def _prepare(self, entry: Entry, case: Case, inputs: dict, dtype: str) -> Prepared:
        return Prepared(entry, inputs, case.params, dtype)

    def _example(self, entry: Entry, dtype: str, case: Case, active: list[Member], cells: dict,
                 result: RunResult, state: Optional[dict] = None) -> None:
        state = state if state is not None else {}
        prepared = self._prepare(entry, case, case.inputs, dtype)
        batched = entry.batchable and bool(case.batch)
        shape = (case.variant.hash, tuple(sorted(case.hyper.items())), len(case.batch) if batched else 0)
        if batched and not (state.get("failed") or self._batched[shape] < BATCH_CHECKS):
            batched = False  # this shape's batch checks have passed often enough in this search
        extras = [self._prepare(entry, case, extra, dtype) for extra in (case.batch if batched else [])]
        # the case as examined: a batch left out is no part of it
        key: tuple[Any, ...] = (case.variant.hash, tuple(sorted(case.hyper.items())), *_prepared_digests(prepared),
               *(_prepared_digests(e)[0] for e in extras))
        if key in self._seen:  # drawn again (targeting): examined already, and it passed
            result.repeated[(entry.name, dtype)] += 1
            state["repeated"] = state.get("repeated", 0) + 1
            if self._seen[key] >= 0:
                target(self._seen[key], label="error/bound")
            return
        result.generated[(entry.name, dtype)] += 1
        precisions = {m.impl.precision for m in active if not m.hung}
        refs: dict[str, Reference] = {}
        try:
            for p in precisions:
                refs[p] = self._reference(entry, prepared, case, dtype, p)
        except SpecError as exc:
            if refused_empty_query(entry, case, exc):
                self._expect_refusal(entry, dtype, case, prepared, active, cells, exc)
                return
            result.rejected[(entry.name, dtype)] += 1
            reject()
        except ToleranceModelError:  # counted and reported, never a silent zero tolerance
            result.unmodelled[(entry.name, dtype)] += 1
            reject()
        if not all(r.in_range for r in refs.values()):
            for m in active:
                cells[m.key].out_of_range += 1
            reject()
        batch: dict[str, list] = {p: [] for p in precisions}
        for extra_prep in extras:
            try:
                extra_refs = {p: self._reference(entry, extra_prep, case, dtype, p) for p in precisions}
            except (SpecError, ToleranceModelError):
                continue
            if all(r.in_range for r in extra_refs.values()):
                for p in precisions:
                    batch[p].append((extra_prep.inputs, extra_refs[p]))
        worst = 0.0
        outputs: dict[tuple[str, str], dict] = {}
        failed: list[tuple[Member, Finding]] = []
        for m in active:
            if m.hung:
                continue
            ref = refs[m.impl.precision]
            outcome = examine(m, case, prepared.inputs, prepared.params, ref, dtype=dtype,
                              timeout=self.timeout, batch=batch[m.impl.precision])
            cell = cells[m.key]
            cell.examples += 1
            if "digests" in state:
                state["digests"][m.key].update(repr(key[:2]).encode() + b"".join(key[2:]))
            cell.worst_ratio = max(cell.worst_ratio, outcome.judgement.ratio)
            cell.checks.update(outcome.checks)
            cell.ambiguous += outcome.judgement.ambiguous
            cell.undetermined += outcome.judgement.undetermined
            worst = max(worst, outcome.judgement.ratio if math.isfinite(outcome.judgement.ratio) else 1e300)
            if not outcome.judgement.ok and cell.first_failure_s is None:
                cell.first_failure_s = time.perf_counter() - self._search_started
                cell.first_failure_examples = cell.examples
            if outcome.timed_out:
                m.hung = True
                self._fail(cell, m, outcome.judgement.findings[0], case, dtype, shrunk=False)
                continue
            if not outcome.judgement.ok:
                failed.append((m, outcome.judgement.findings[0]))
            elif outcome.outputs is not None:
                outputs[m.key] = outcome.outputs
        self._agreement(entry, dtype, outputs, refs, active, result, key)
        self.progress("example", algorithm=entry.name, dtype=dtype)
        # Targeting climbs the error/bound ratio; an entry whose outputs are all exact (tokens, masks)
        # scores 0 on every example, and targeting a constant only makes Hypothesis repeat one case.
        score = -1.0
        if any(spec.kind == Kind.REAL for spec in refs[next(iter(refs))].specs):
            score = min(worst, 1e300)
            target(score, label="error/bound")
        if failed:
            member, finding = failed[0]
            raise _MemberFailed(member, finding, case)
        if not any(m.hung for m in active):  # passed: a repeat of it is not examined again
            self._seen[key] = score
            if any(batch.values()):
                self._batched[shape] += 1

    def _expect_refusal(self, entry: Entry, dtype: str, case: Case, prepared: Prepared, active: list[Member],
                        cells: dict, refusal: SpecError) -> None:
        """A case the spec refuses by definition (a query with no key under ``empty_query="error"``,
        docs/spec.md): every member must raise (any exception) to pass the example."""
        failed: list[tuple[Member, Finding]] = []
        for m in active:
            if m.hung:
                continue
            cell = cells[m.key]
            cell.examples += 1
            try:
                call_member(m, entry, prepared.inputs, prepared.params, case, dtype, self.timeout, False)
            except CallTimeout as exc:
                m.hung = True
                self._fail(cell, m, Finding("timeout", f"call {exc}"), case, dtype, shrunk=False)
                continue
            except Exception:  # noqa: BLE001 - raising is what the spec asks for
                cell.checks["refusal"] += 1
                continue
            finding = Finding("refusal", "returned a result for a case the spec refuses: "
                              f"{refusal.given} of Mask under empty_query='error' (a query with no key it may "
                              "attend to); the implementation must raise")
            if cell.first_failure_s is None:
                cell.first_failure_s = time.perf_counter() - self._search_started
                cell.first_failure_examples = cell.examples
            failed.append((m, finding))
        self.progress("example", algorithm=entry.name, dtype=dtype)
        if failed:
            member, finding = failed[0]
            raise _MemberFailed(member, finding, case)

    def _agreement(self, entry: Entry, dtype: str, outputs: dict, refs: dict, active: list[Member],
                   result: RunResult, key: Optional[tuple] = None) -> None:
        """Implementation vs implementation and device vs device, on the same example: this
        search's members with each other, and with the members of earlier searches (other
        implementations) that answered the same case (``key``)."""
        by_key = {m.key: m for m in active}
        answered = {k: (outputs[k], refs[by_key[k].impl.precision]) for k in outputs}
        earlier = self._outputs.get(key, {}) if key is not None else {}
        mine = set(answered)
        pool = {**earlier, **answered}
        keys = sorted(pool)
        table = result.agreement.setdefault((entry.name, dtype), {})
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                if a not in mine and b not in mine:
                    continue  # compared when the later of them was searched
                ref = pool[a][1]
                kind = "device" if a[0] == b[0] else "peer"
                j = compare_pair(entry, pool[a][0], pool[b][0], ref, f"{a[0]}@{a[1]} vs {b[0]}@{b[1]}", kind)
                pair = (f"{a[0]}@{a[1]}", f"{b[0]}@{b[1]}")
                table[pair] = max(table.get(pair, 0.0), j.ratio)
        if key is not None and answered and (key in self._outputs or len(self._outputs) < CACHE_CASES):
            self._outputs.setdefault(key, {}).update(answered)

    def _fail(self, cell: Cell, m: Member, finding: Finding, case: Case, dtype: str, *, shrunk: bool) -> None:
        cell.status = "fail"
        tag = hashlib.sha256(f"{case.algorithm}{m.label}{dtype}{m.device}{case.size()}".encode()).hexdigest()[:8]
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in m.label)
        device = m.device.replace(":", "_")
        target = self.case_dir / f"{case.algorithm}-{safe}-{dtype}-{device}-{tag}.json"
        path: Optional[Path] = target
        try:
            write_case(case, target, impl=m.label, impl_version=m.impl.version, dtype=dtype, device=m.device,
                       check=finding.check, message=finding.message)
        except Exception as exc:  # noqa: BLE001 - reporting must not end the run
            path = None
            cell.note = f"could not write the case file: {exc}"
        command = reproducer(path, m.label, m.device, dtype) if path else "(no case file)"
        report = (f"{case.algorithm}: implementation {m.label!r} ({m.impl.version}) at {dtype} on {m.device} "
                  f"fails the {finding.check} check.\n"
                  f"  {finding.message}\n"
                  f"  case{' (shrunk)' if shrunk else ''}: {case.describe()}\n"
                  f"  reproduce:\n    {command}")
        diagnosis = diagnose_failure(m, case, finding.check, dtype, timeout=self.timeout)
        if diagnosis is not None:  # its lines go before the reproducer, which stays last
            head, _, tail = report.rpartition("\n  reproduce:")
            report = head + "".join(f"\n  {line}" for line in diagnosis.lines()) + "\n  reproduce:" + tail
        cell.failure = Failure(finding.check, finding.message, case, str(path) if path else None, command, report,
                               shrunk, diagnosis.to_dict() if diagnosis is not None else None)
        self.progress("failure", cell=cell)
