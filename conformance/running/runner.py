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

One search per implementation: the members of one implementation (its devices)
search together, and every implementation gets its own search and its own time cap, from the
same seed, so that a slow implementation (JAX compiling a program per shape) holds no other
back. Implementations whose strategies agree draw the same cases, and the spec's reference
for a case is evaluated once per distinct input set (a cache keyed by the inputs' digest, for
the (algorithm, dtype) being searched); outputs are kept by the same key, so implementations
are still compared with each other on the cases they share. Within a search a case
Hypothesis draws again (its targeting phase repeats inputs) is not examined again: its score
is given to ``target`` and it is counted in ``RunResult.repeated``, not as an example. A
search's budget counts the examples the spec judged, not draws: a draw the spec refuses (or
cannot bound) or a repeat leaves the budget as it was, and later rounds draw on until the budget is
judged. A search of an entry whose every case can be listed (no inputs, no parameters: the masks
and sinusoid tables, ``case_space``) that has judged every one of them ends there, its cells
``exhausted``: complete below the minimum, and said so in their note. The
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

The steps: ``Runner`` plans the searches (``plan``: members and cells), runs
them in order (``run``) and keeps what they share (the references, the
outputs for the peer comparison, the case files of failures:
``reference_for``, ``record_failure``); ``_Search`` is one implementation's
search of one (algorithm, dtype): rounds of Hypothesis under the time cap
(``_Search.run``, ``_round``), each drawn case examined on every member
(``_Search.example``), then the further distinct failures and the cells'
totals.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, cast

import numpy as np
from hypothesis import HealthCheck, Phase, given, reject, seed, settings, target
from hypothesis.errors import Flaky
from hypothesis.statistics import collector as hypothesis_statistics

from ftspec.impls.api import FLOAT_DTYPES, Implementation, Limits, select_devices
from ftspec.spec import PAPER, SpecError
from ftspec.spec.entry import Kind
from ftspec.spec.registry import REGISTRY, Entry
from ftspec.spec.variants import SWITCHES

from ..core.calling import Prepared
from ..core.case import Case
from ..core.casefile import reproducer, write_case
from ..forensics.diagnosis import DIAGNOSED_CHECKS, FAILING_KEPT, diagnose_failure
from ..forensics.distinct_failures import MAX_DISTINCT, SECONDS as DISTINCT_SECONDS, search_distinct
from ..core.execute import Member, examine
from ..core.interrupts import checkpoint
from ..core.judge import Finding, compare_pair
from ..core.profiles import Profile
from ..core.refusals import answered_refusals, check_refusals_into, expect_refusal, refused_empty_query
from .config import RunConfig
from .local_constants import no_local_constants
from .results import LEFT_OUT, RATIOS_KEPT, SAMPLED_DTYPES, Cell, Failure, RunResult, Status, keep_sample
from ..core.timecap import TimeCap, TimeUp
from ..core.blocks import MAX_BLOCK, block_size, value_sets, varies
from ..core.tolerances import LANES, SCREEN_LANES, Reference, ToleranceModelError, reference, references

__all__ = ["BATCH_CHECKS", "Cell", "Failure", "RunResult", "Runner", "refused_empty_query", "shard_examples",
           "shard_seed"]

#: passing batch checks per (variant, sizes, batch length) in a search (see the module docstring)
BATCH_CHECKS = 3
#: distinct cases whose references (and outputs, for the peer comparison) a runner keeps per
#: (algorithm, dtype): the first ones are kept, later ones not, so an implementation searched
#: after another finds the cases they share in the same order
CACHE_CASES = 4096
#: search rounds at most: a round ends early on a failure, or draws repeats that are not examples
MAX_ROUNDS = 16
#: draws a search round after the first may make beyond its budget (it ends itself once the budget
#: is judged). A later round runs because draws were refused or repeated; asked only for the budget,
#: a mask search (128 distinct cases) ended a few short of 100 when one round drew only repeats
#: (issue 35, finding 3). Measured (seed 0, default budget): 100 distinct mask cases took 944
#: draws, about 5 ms each, most of them repeats
PROBE_DRAWS = 1000
#: the most (variant, sizes) pairs ``case_space`` enumerates (the mask's are 128, a sinusoid's 160)
SPACE_CAP = 4096
#: Hypothesis's reason for ending a run whose every choice sequence has been tried
#: (``ExitReason.finished``, hypothesis 6.170; without a failure only an exhausted tree ends so)
EXHAUSTED = "nothing left to do"
#: the fewest drawn cases (structures) a search makes where it can: its blocks hold at most
#: N // MIN_DRAWS value sets for a search of N examples (conformance/core/blocks.py), so a search
#: of fewer than 64 examples (the quick profile's, the bug zoo's) draws one value set per case, as
#: before blocks, and a default one (400) draws at least 50 cases
MIN_DRAWS = 32
#: how many times the runner's block an implementation that compiles per shape gets
#: (``extra["shapes_per_search"]``: JAX, Flax)
COMPILED_BLOCK = 4


Refs = dict[str, Reference]  # precision (``Implementation.precision_for``) -> the spec's reference under it


class _Enough(BaseException):
    """A round has judged its budget: Hypothesis stops at once (a BaseException, as the time cap's
    ``TimeUp``: not a failure, nothing to shrink)."""


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


def case_space(entry: Entry, variants: Any, limits: Limits, budget: str) -> Optional[frozenset[tuple]]:
    """Every case a search of ``entry`` can draw, as (variant projection, sizes) pairs (``_space_key``),
    where that is few and known: the entry takes no input and no parameter (a mask, a sinusoid
    table), so a case is its variant set and its sizes, and the sizes lie within the budget's bounds
    (conformance/core/strategies/_hyper.py draws each size within [its minimum, its bound], ℓ_max
    within the context; the entry's check decides the rest). None otherwise: an implementation's
    limits settle sizes (they may move), inputs or parameters vary without end, or the product
    exceeds ``SPACE_CAP``. The set may hold pairs the strategy never draws (it is a superset of its
    draws): a search claims exhaustion only when it has judged every pair of it."""
    from ..core.strategies._budgets import hyper_kind, resolve_budget
    from ..core.values import default_hyper

    if entry.inputs or not limits.unconstrained:
        return None
    switches = sorted(entry.switches)
    if variants == "all":
        projections = set(itertools.product(*(SWITCHES[s].choices for s in switches)))
    else:
        projections = {tuple(getattr(v, s) for s in switches) for v in variants}
    b = resolve_budget(budget, entry)
    names = list(entry.hyper)
    top = {n: max(b.bound(n), entry.minimum.get(n, 1)) for n in names if n != "ell_max"}
    if "ell_max" in names:
        lengths = [top[n] for n in names if n != "ell_max" and hyper_kind(n) == "length"]
        top["ell_max"] = max([b.context, entry.minimum.get("ell_max", 1), *lengths])
    if len(projections) * math.prod(top.values()) > SPACE_CAP:
        return None
    space = set()
    for projection in projections:
        variant = PAPER.replace(**dict(zip(switches, projection)))
        if entry.param_schema(default_hyper(entry, variant), variant):
            return None
        for sizes in itertools.product(*(range(1, top[n] + 1) for n in names)):
            hyper = dict(zip(names, sizes))
            if entry.check is not None:
                try:
                    entry.check(hyper, variant)
                except SpecError:
                    continue
            space.add(_space_key(entry, variant, hyper))
    return frozenset(space)


def _space_key(entry: Entry, variant: Any, hyper: Mapping[str, int]) -> tuple:
    """A case of an entry without inputs or parameters: its variant set's switches that the entry
    reads, and its sizes."""
    return (tuple(getattr(variant, s) for s in sorted(entry.switches)), tuple(sorted(hyper.items())))


def _shapes_per_search(impl: Implementation) -> Optional[int]:
    """The bound an implementation declares on the sizes drawn per search and variant
    (``extra["shapes_per_search"]``, a positive whole number), or None."""
    extra = getattr(impl, "extra", None)
    value = extra.get("shapes_per_search") if isinstance(extra, Mapping) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _culprit(exc: BaseException) -> Optional[tuple[Member, Finding, Case]]:
    """The member failure inside a Hypothesis error (e.g. ``Flaky``), if there is one."""
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


def _refusal_lines(answered: Sequence[Finding]) -> str:
    """The report's lines on the refusals a member answers: one line per refusal kind (its name; the
    first finding's message is the report's second line)."""
    if not answered:
        return ""
    names = [f.refusal or f.message for f in answered]
    return (f"  refusals it answers instead of refusing ({len(names)}):\n"
            + "".join(f"    - {n}\n" for n in names))


Group = tuple[Any, Limits, list[Member]]  # (variant sets, limits, the members that search together)


class Runner:
    """Runs the search; ``progress(event, **info)`` receives progress events."""

    #: further distinct failures searched for per failing cell (conformance/forensics/distinct_failures.py; 0: none)
    distinct_failures = MAX_DISTINCT
    #: whether every member is checked to refuse what the spec refuses (conformance/core/refusals.py),
    #: once per algorithm, dtype and variant set, after its first passing example; the diagnosis
    #: tests turn it off to see the value failure a convention bug causes
    refusals = True
    def __init__(self, plugins: Sequence[tuple[str, Implementation]], config: RunConfig, *,
                 progress: Optional[Callable[..., None]] = None, exclude: Iterable[Sequence[str]] = (),
                 shard: int = 0) -> None:
        """The runner of ``config`` (its one configuration, resolved: conformance/running/config.py)
        over ``plugins``, the loaded implementations (those of ``config.labels`` in a worker).
        ``exclude``: (label, algorithm, dtype) left out of their search, cells "no examples" (as
        ``run_parallel``'s). ``shard``: this runner makes shard ``shard`` of ``config.shards`` of
        each search."""
        if not 0 <= shard < config.shards:
            raise ValueError(f"shard must be k with 0 <= k < {config.shards} (the shards), given {shard!r}")
        self.config = config
        self.shard = (int(shard), config.shards)
        self.exclude = {(str(a), str(b), str(c)) for a, b, c in exclude}
        self.plugins = list(plugins)
        self.profile: Profile = config.hypothesis_profile
        self.case_dir = Path(config.case_dir)
        self.device_filter = list(config.devices) if config.devices else None
        #: whether cells at ``results.SAMPLED_DTYPES`` keep a bounded sample of the value sets they pass
        #: (``Cell.sample``): a certificate lists what no example run separated (session/separation.py),
        #: so ``certify`` is the one command whose searches keep them
        self.keep_passing = config.command == "certify"
        self.progress = progress or (lambda event, **info: None)
        self._refs: dict[tuple, Any] = {}  # references of the (algorithm, dtype) being searched
        #: case key -> {member key: (outputs, reference)}: what each implementation answered
        self._outputs: dict[tuple, dict[tuple[str, str], tuple[dict, Reference]]] = {}
        self.reference_evaluations = 0  # references computed (cache misses), for tests and reports
        self._reference_seconds = 0.0
        self._devices: dict[str, list[str]] = {}
        self._device_errors: dict[str, str] = {}
        self._found: dict[str, list[str]] = {}
        self._discover_devices()

    # -- the configuration's values, under the names the searches and the forensics read ---------------
    @property
    def seed(self) -> int:
        return self.config.seed

    @property
    def examples(self) -> int:
        """Examples per search (each shard makes its share: ``shard_examples``)."""
        return self.config.examples

    @property
    def seconds(self) -> float:
        """The wall-time cap per implementation search (``config.NO_CAP``: none)."""
        return self.config.seconds

    @property
    def timeout(self) -> float:
        """Seconds one implementation call may take."""
        return self.config.call_timeout

    @property
    def block(self) -> int:
        """Value sets per drawn case (1: one example per draw)."""
        return self.config.block

    def _discover_devices(self) -> None:
        """Each implementation's devices (one ``devices()`` call), and those the selection keeps."""
        for label, impl in self.plugins:
            try:
                found = [str(d) for d in impl.devices()]
            except Exception as exc:  # noqa: BLE001 - the plugin's failure, a cell error below
                self._device_errors[label] = f"devices() raised {type(exc).__name__}: {exc}"
                found = []
            self._found[label] = found
            self._devices[label] = select_devices(found, self.device_filter)

    # -- references, cached: every member of a search shares them -------------
    def reference_for(self, entry: Entry, prepared: Prepared, case: Case, dtype: str, precision: str) -> Reference:
        """The spec's reference (value and tolerance) of a prepared case, evaluated once per distinct
        input set of the (algorithm, dtype) being searched; raises the spec's refusal (SpecError,
        ToleranceModelError) as the first evaluation did."""
        key = (entry.name, dtype, precision, LANES, case.variant.hash, tuple(sorted(case.hyper.items())),
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

    def references_for(self, entry: Entry, prepared: Sequence[Prepared], case: Case, dtype: str,
                       precision: str, lanes: int = SCREEN_LANES) -> list[Any]:
        """``reference_for`` of every value set of a block (``case``: its structure), each a Reference
        or the exception it raises; those not cached are evaluated together
        (``tolerances.references``). ``lanes``: the search's screen by default (``SCREEN_LANES``:
        a pass there is a pass at ``LANES``; a failure is judged again by ``alone``)."""
        keys = [(entry.name, dtype, precision, lanes, case.variant.hash, tuple(sorted(case.hyper.items())),
                 *_prepared_digests(p)) for p in prepared]
        missing = [i for i, k in enumerate(keys) if k not in self._refs]
        if missing:
            started = time.perf_counter()
            self.reference_evaluations += len(missing)
            try:
                found = references(entry, [(prepared[i].inputs, prepared[i].params) for i in missing],
                                   hyper=case.hyper, variant=case.variant, dtype=dtype, precision=precision,
                                   lanes=lanes)
            finally:
                self._reference_seconds += time.perf_counter() - started
            fresh = dict(zip(missing, found))
            for i, value in fresh.items():
                if len(self._refs) < CACHE_CASES:
                    self._refs[keys[i]] = value
        return [self._refs[k] if k in self._refs else fresh[i] for i, k in enumerate(keys)]

    def alone(self, entry: Entry, prepared: Prepared, case: Case, dtype: str, precision: str) -> Optional[Reference]:
        """The reference of one value set evaluated alone (not cached: a block's is cached), as a case
        file's replay evaluates it; None where the spec refuses or cannot bound it alone."""
        started = time.perf_counter()
        try:
            return reference(entry, prepared.inputs, prepared.params, hyper=case.hyper, variant=case.variant,
                             dtype=dtype, precision=precision)
        except (SpecError, ToleranceModelError):
            return None
        finally:
            self._reference_seconds += time.perf_counter() - started

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
            if dtype not in impl.dtypes_for(entry.name):
                continue
            if entry.name not in impl.algorithms:
                result.cells.append(Cell(entry.name, label, dtype, "-", status=Status.NOT_IMPLEMENTED))
                continue
            if label not in self._device_errors and not self._devices[label] and self._found[label]:
                continue  # the --device selection leaves this implementation no device: not part of the run
            if label in self._device_errors or not self._devices[label]:
                note = self._device_errors.get(label, "no device selected")
                result.cells.append(Cell(entry.name, label, dtype, "-", status=Status.ERROR, note=note))
                continue
            for device in self._devices[label]:
                m = Member(label, impl, device)
                cell = Cell(entry.name, label, dtype, device)
                result.cells.append(cell)
                if (label, entry.name, dtype) in self.exclude:  # not called: its cell says so
                    cell.status, cell.note = Status.NO_EXAMPLES, LEFT_OUT
                    continue
                members.append(m)
                cells[m.key] = cell
        return members, cells

    @staticmethod
    def _variant_groups(members: list[Member], algorithm: str = "") -> list[Group]:
        """Members that share one search: the devices of one implementation (one search per
        implementation, so none holds another back), with its variant sets and its limits for
        ``algorithm`` (``Implementation.variants_for``: a plugin declaring sets per algorithm is
        searched under this algorithm's; each is examined on every case within its own limits and
        on no case outside them)."""
        groups: dict[Any, list[Member]] = {}
        for m in members:
            declared = m.impl.variants_for(algorithm)
            key = ("all" if declared == "all" else tuple(v.hash for v in declared),
                   m.impl.limits_for(algorithm).key(), m.label)
            groups.setdefault(key, []).append(m)
        out = []
        for (variants, _, _), ms in groups.items():
            declared = ms[0].impl.variants_for(algorithm)
            out.append(("all" if declared == "all" else list(declared), ms[0].impl.limits_for(algorithm), ms))
        return out

    def _search(self, entry: Entry, dtype: str, group: Group, cells: dict, result: RunResult) -> None:
        with no_local_constants():  # the same seed draws the same cases in any process (local_constants.py)
            _Search(self, entry, dtype, group, cells, result).run()

    def _prepare(self, entry: Entry, case: Case, inputs: dict, dtype: str) -> Prepared:
        return Prepared(entry, inputs, case.params, dtype)

    # -- failures ------------------------------------------------------------------
    def record_failure(self, cell: Cell, m: Member, finding: Finding, case: Case, dtype: str, *,
                       shrunk: bool, others: Sequence[tuple[float, Case]] = (),
                       refusals: Sequence[Finding] = ()) -> None:
        """``cell`` fails on ``case``: its case file written, its report (diagnosis included) and
        reproducer set, the ``failure`` progress event sent. ``others``: further failing examples
        of the cell, (error/bound, case) each, the worst first: the worst is shown beside the
        shrunk case (with its own case file) when it fails by more, and the diagnosis uses them.

        A ``refusal`` failure (the member answered what the spec refuses) has no values to explain:
        no diagnosis, first divergence or worst example is sought around it. Its report lists every
        refusal the member answers, each kind once (``refusals.answered_refusals``: ``refusals``, the
        search's refusal findings, and a fresh check of every refusal on ``case``), so one run names
        every refusal gap of the cell."""
        cell.status = Status.FAIL
        path = self._write_case_file(cell, m, finding, case, dtype)
        command = reproducer(path, m.label, m.device, dtype) if path else "(no case file)"
        refusal = finding.check == "refusal"
        worst = [] if refusal else self._worst_line(cell, m, finding, case, dtype, others)
        answered = (answered_refusals(m, case, dtype, timeout=self.timeout, found=[finding, *refusals])
                    if refusal else [])
        report = (f"{case.algorithm}: implementation {m.label!r} ({m.impl.version}) at {dtype} on {m.device} "
                  f"fails the {finding.check} check.\n"
                  f"  {finding.message}\n"
                  f"  case{' (shrunk)' if shrunk else ''}: {case.describe()}\n"
                  + "".join(f"  {line}\n" for line in worst)
                  + _refusal_lines(answered) +
                  f"  reproduce:\n    {command}")
        diagnosis = None if refusal else diagnose_failure(m, case, finding.check, dtype, timeout=self.timeout,
                                                          failing=[c for _, c in others])
        if diagnosis is not None:  # its lines go before the reproducer, which stays last
            head, _, tail = report.rpartition("\n  reproduce:")
            report = head + "".join(f"\n  {line}" for line in diagnosis.lines()) + "\n  reproduce:" + tail
        cell.failure = Failure(finding.check, finding.message, case, str(path) if path else None, command, report,
                               shrunk, diagnosis.to_dict() if diagnosis is not None else None,
                               [{"refusal": f.refusal, "message": f.message} for f in answered])
        self.progress("failure", cell=cell)

    def _worst_line(self, cell: Cell, m: Member, finding: Finding, case: Case, dtype: str,
                    others: Sequence[tuple[float, Case]]) -> list[str]:
        """The report's lines on the cell's worst failing example, when it is another case than the
        shrunk one and fails by more (its case file written beside the shrunk one's)."""
        if not others or finding.check not in DIAGNOSED_CHECKS:
            return []
        ratio, worst = others[0]
        shown = finding.ratio
        if not ratio > shown:  # an unknown ratio (inf: not a value check's) is never exceeded
            return []
        path = self._write_case_file(cell, m, finding, worst, dtype, suffix="-worst")
        how = f"error/bound {ratio:.3g}" if math.isfinite(ratio) else "a non-finite error"
        lines = [f"worst example of this cell: {how} (the shrunk case: "
                 f"{shown:.3g}): {worst.describe()}"]
        if path is not None:
            lines.append(f"  reproduce it: {reproducer(path, m.label, m.device, dtype)}")
        return lines

    def _write_case_file(self, cell: Cell, m: Member, finding: Finding, case: Case, dtype: str,
                         suffix: str = "") -> Optional[Path]:
        """The failing case's replayable file in ``case_dir`` (None, with a note on the cell, when it
        cannot be written: reporting must not end the run)."""
        # the failure's check and message too: two distinct failures of a cell may shrink to one size
        tag = hashlib.sha256(f"{case.algorithm}{m.label}{dtype}{m.device}{case.size()}{finding.check}"
                             f"{finding.message}".encode()).hexdigest()[:8]
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in m.label)
        device = m.device.replace(":", "_")
        path = self.case_dir / f"{case.algorithm}-{safe}-{dtype}-{device}-{tag}{suffix}.json"
        try:
            write_case(case, path, impl=m.label, impl_version=m.impl.version, dtype=dtype, device=m.device,
                       check=finding.check, message=finding.message)
        except Exception as exc:  # noqa: BLE001 - reporting must not end the run
            cell.note = f"could not write the case file: {exc}"
            return None
        return path


class _Search:
    """One implementation's search of one (algorithm, dtype): its members (the implementation's
    devices) examined on every case Hypothesis draws, in rounds, under the time cap."""

    def __init__(self, runner: Runner, entry: Entry, dtype: str, group: Group, cells: dict,
                 result: RunResult) -> None:
        self.runner, self.entry, self.dtype, self.cells, self.result = runner, entry, dtype, cells, result
        #: the current drawn case's batch of further input sets (``example``)
        self._extras: list[Prepared] = []
        self.variants, self.limits, self.members = group
        self.active = list(self.members)
        self.budget = shard_examples(runner.examples, runner.shard)
        self.round = 0
        self.cap = runner.seconds
        self.deadline = time.monotonic() + self.cap if runner.config.capped else None
        self.references_before = runner._reference_seconds
        self.started = time.perf_counter()
        self.seen: dict[tuple, float] = {}  # case key -> score, for the passing cases of this search
        self.batched: Counter = Counter()  # (variant, sizes, batch length) -> passing batch checks
        self.digests = {m.key: hashlib.sha256() for m in self.members}
        #: per member, the failing examples of value checks with the largest error/bound ratios (the
        #: worst first): the report shows the worst beside the shrunk case, and the diagnosis needs a
        #: set that fits to fit them too
        self.failing: dict[tuple[str, str], list[tuple[float, Case]]] = {}
        #: per member, the refusal findings of its failing examples, one per refusal kind
        self.refused: dict[tuple[str, str], dict[str, Finding]] = {}
        #: the distinct value sets judged in this search (variant, sizes, inputs, parameters), and
        #: whether Hypothesis ended a round having tried every case its strategy can draw
        self.distinct: set[tuple] = set()
        self.exhausted = False
        #: every case the strategy can draw, where few and known (``case_space``), and those judged
        self.space = case_space(entry, self.variants, self.limits, runner.profile.budget)
        self.covered: set[tuple] = set()
        #: value sets per drawn case (conformance/core/blocks.py): COMPILED_BLOCK times the runner's
        #: for an implementation that compiles a program per shape (one compile serves the block),
        #: and never so many that the search draws fewer than ``MIN_DRAWS`` structures: a bug in
        #: tokens, masks or sizes needs draws
        compiles = bool(self.members) and _shapes_per_search(self.members[0].impl) is not None
        size = min(runner.block * (COMPILED_BLOCK if compiles else 1), MAX_BLOCK)
        self.block = block_size(entry, max(1, min(size, self.budget // MIN_DRAWS)))

    def run(self) -> None:
        self.runner.progress("start", algorithm=self.entry.name, dtype=self.dtype,
                             members=[f"{m.label}@{m.device}" for m in self.active], examples=self.budget)
        strategy = self._strategy()
        while self.active and self.budget > 0:
            if not self._round(strategy):
                break
            self.active = [m for m in self.active if not m.hung]
        self._distinct_failures()
        self._finish()

    def _strategy(self) -> Any:
        """The case strategy, built once per search (not per round or per draw); the shape pool
        lives as long as the search."""
        from ..core.strategies import cases

        shapes = _shapes_per_search(self.members[0].impl) if self.members else None
        if not varies(self.entry):  # a structure is one case there: a pool of 4 shapes was 4 cases a
            shapes = None  # round (JAX's sinusoids and masks stopped at 8 of 50 in `make run`)
        return cases(self.entry.name, dtype=self.dtype, variants=self.variants,
                     max_batch=self.runner.profile.max_batch, budget=self.runner.profile.budget,
                     limits=None if self.limits.unconstrained else self.limits, shapes=shapes)

    # -- rounds ------------------------------------------------------------------------
    def _round(self, strategy: Any) -> bool:
        """One Hypothesis run; True: search on (another round, with the members left).

        The budget counts the examples the spec judged (``state["judged"]``: value sets examined,
        and cases refused by definition whose refusal was checked), not draws: a draw the spec
        refuses or cannot bound, or a repeat, leaves the budget as it was, and the search goes
        on with a fresh seed for the examples it lacks while rounds still find new cases (at most
        ``MAX_ROUNDS``). A round that ends because Hypothesis has tried every choice its strategy
        can make ("nothing left to do": its tree is exhausted) ends the search: every distinct
        case was examined (``exhausted``)."""
        state: dict[str, Any] = {"generated": 0, "repeated": 0, "judged": 0, "shrink": 0}
        # Checked before every draw and in the body, and by a watchdog while Hypothesis's own
        # code runs (its targeting phase can run long without drawing: timecap.py), which
        # also raises a held Ctrl-C there.
        timecap = TimeCap(lambda: self._over(state))
        search = self._hypothesis_test(strategy, timecap, state)
        stats: list[Mapping[str, Any]] = []
        try:
            try:
                # Hypothesis types its collector as holding None (its default); it takes a callback
                with cast(Any, hypothesis_statistics).with_value(stats.append), timecap.watching():
                    search()
            except _Enough:
                return False  # the budget is spent, or every case judged
            if any(s.get("stopped-because") == EXHAUSTED for s in stats):
                self.exhausted = True
                return False
            # a round that judged nothing new (only repeats or refusals) ends the search: another
            # seed would mostly draw the same
            return bool(state["judged"] and self.budget > state["judged"] and self.round + 1 < MAX_ROUNDS)
        except TimeUp:
            self.result.time_capped[(self.entry.name, self.dtype)] = True
            return False
        except _MemberFailed as exc:
            self._member_failed(exc.member, exc.finding, exc.case, shrunk=True)
            return True
        except Flaky as exc:  # failed, then passed when replayed: nondeterminism
            return self._flaky(exc)
        except Exception as exc:  # noqa: BLE001 - a harness problem must not end the run
            self._harness_error(f"{type(exc).__name__}: {exc}")
            return False
        finally:
            self.budget -= state["judged"] + state["shrink"]
            self.round += 1

    def _over(self, state: dict[str, Any]) -> bool:
        """Whether the time cap is spent. Never while shrinking a failure: the time cap must not
        lose a counterexample. The spec's references are shared by the searches of a task, and
        whichever implementation is searched first would pay for them: their time is not counted
        against an implementation's cap, up to the cap again (a search whose references
        dominate, a training loop's, takes at most twice its cap)."""
        return (self.deadline is not None and not state.get("failed") and state["generated"] + self.round > 0
                and time.monotonic() > self.deadline + min(self.runner._reference_seconds - self.references_before,
                                                           self.cap))

    def _hypothesis_test(self, strategy: Any, timecap: TimeCap, state: dict[str, Any]) -> Callable[[], None]:
        """This round's Hypothesis test. The first round asks Hypothesis for the budget's draws, as
        before the budget counted judged examples (the same seed draws the same cases). A later
        round exists because draws were refused or repeated, so it asks for ``PROBE_DRAWS`` more
        and ends itself (``_Enough``) once the budget is judged: a strategy with few distinct cases
        (a mask, a sinusoid table) is then drawn until Hypothesis has tried every one, rather than
        stopping a few short of its budget by chance."""
        draws = -(-self.budget // self.block) + (PROBE_DRAWS if self.round else 0)

        @settings(max_examples=draws, deadline=None, database=None,
                  report_multiple_bugs=False, derandomize=False, print_blob=False,
                  phases=(Phase.explicit, Phase.generate, Phase.target, Phase.shrink),
                  suppress_health_check=list(HealthCheck))
        @seed(shard_seed(self.runner.seed, self.round, self.runner.shard))
        @given(timecap.strategy(strategy))
        def search(case: Case) -> None:
            checkpoint()  # a held Ctrl-C stops the search here, in the test, not in Hypothesis's engine
            with timecap.checked():
                state["generated"] += 1
                try:
                    self.example(case, state)
                except _MemberFailed:
                    state["failed"] = True
                    raise
                if not state.get("failed"):
                    if self.space is not None and len(self.covered) == len(self.space):
                        self.exhausted = True  # every case the strategy can draw: judged
                    if self.exhausted or state["judged"] >= self.budget:
                        raise _Enough()

        return search

    def _member_failed(self, member: Member, finding: Finding, case: Case, *, shrunk: bool) -> None:
        others = [(r, c) for r, c in self.failing.get(member.key, []) if c is not case]
        self.runner.record_failure(self.cells[member.key], member, finding, case, self.dtype, shrunk=shrunk,
                                   others=others, refusals=list(self.refused.get(member.key, {}).values()))
        self.active = [m for m in self.active if m.key != member.key]

    def _flaky(self, exc: Flaky) -> bool:
        """A failure that passed when Hypothesis replayed it: the member fails as nondeterministic
        (True: search on without it), or, when no member's failure is inside, the search errs."""
        culprit = _culprit(exc)
        if culprit is None:
            self._harness_error(f"flaky search: {exc}")
            return False
        member, finding, case = culprit
        finding.message = "failed, then passed on an identical replay (nondeterministic): " + finding.message
        self._member_failed(member, finding, case, shrunk=False)
        return True

    def _harness_error(self, message: str) -> None:
        for m in self.active:
            cell = self.cells[m.key]
            if cell.status == Status.PASS:
                cell.status = Status.ERROR
                cell.note = message

    def _distinct_failures(self) -> None:
        """Every distinct failure of a failing member, within what is left of the budget."""
        runner = self.runner
        for m in self.members:
            failure = self.cells[m.key].failure
            # a refusal failure's report lists every refusal the member answers; values are not in question
            if failure is not None and failure.check != "refusal" and runner.distinct_failures > 0:
                self.cells[m.key].more_failures = search_distinct(
                    runner, self.entry, self.dtype, self.variants, self.limits, m, self.cells[m.key],
                    examples=self.budget,
                    seconds=runner.seconds if runner.config.capped else DISTINCT_SECONDS,
                    max_failures=runner.distinct_failures, refused=refused_empty_query)

    def _finish(self) -> None:
        for m in self.members:
            self.result.implementation_seconds[m.label] += m.seconds  # type: ignore[assignment]  # float seconds
            cell = self.cells[m.key]
            cell.cases_digest = self.digests[m.key].hexdigest()
            if self.exhausted and cell.status == Status.PASS and cell.examples:
                distinct = len(self.covered) if self.space is not None else len(self.distinct)
                cell.exhausted = distinct
                cell.note = f"exhausted: all {distinct} distinct cases examined"
            if cell.status == Status.PASS and cell.examples == 0:
                cell.status = Status.NO_EXAMPLES
                cell.note = "every drawn case was refused or out of range"
        self.runner.progress("end", algorithm=self.entry.name, dtype=self.dtype,
                             cells=[self.cells[m.key] for m in self.members])

    # -- one drawn case ----------------------------------------------------------------------
    def example(self, case: Case, state: dict[str, Any]) -> None:
        """Examine the block of ``case`` (``blocks.value_sets``: the case and further value sets of
        its structure) on every active member; raises ``_MemberFailed`` for the first member that
        fails one of them (Hypothesis then shrinks the drawn case), and Hypothesis's rejection for a
        case whose every value set the spec refuses or cannot bound."""
        runner, entry, dtype = self.runner, self.entry, self.dtype
        prepared = runner._prepare(entry, case, case.inputs, dtype)
        batched = entry.batchable and bool(case.batch)
        shape = (case.variant.hash, tuple(sorted(case.hyper.items())), len(case.batch) if batched else 0)
        if batched and not (state.get("failed") or self.batched[shape] < BATCH_CHECKS):
            batched = False  # this shape's batch checks have passed often enough in this search
        extras = [runner._prepare(entry, case, extra, dtype) for extra in (case.batch if batched else [])]
        precisions = {m.impl.precision_for(dtype) for m in self.active if not m.hung}
        # a block never takes the search beyond its budget: the last one is cut to what is left
        block = value_sets(case, max(1, min(self.block, self.budget - state["judged"])), dtype)
        preps = [prepared] + [runner._prepare(entry, c, c.inputs, dtype) for c in block[1:]]
        # the block's value sets and the batch's input sets share one evaluation of the spec
        # (``tolerances.references`` groups them by what they share); cached, so a repeat costs none
        found = {p: runner.references_for(entry, preps + extras, case, dtype, p) for p in precisions}
        # the batch as judged: the further input sets whose references the spec gives in range
        batch = self._batch_references(case, extras, precisions, found={p: v[len(preps):] for p, v in found.items()})
        self._extras = extras  # a failure is confirmed on the batch's references evaluated alone
        judged = next(iter(batch.values()), [])
        # the case as examined: a batch left out, or an input set of it the spec did not judge, is no
        # part of it (a key with the batch as drawn let the same examination happen twice)
        key: tuple[Any, ...] = (case.variant.hash, tuple(sorted(case.hyper.items())), *_prepared_digests(prepared),
                                *(_digest(inputs) for inputs, _ in judged))
        if key in self.seen:  # drawn again (targeting): examined already, and it passed
            self.result.repeated[(entry.name, dtype)] += 1
            state["repeated"] = state.get("repeated", 0) + 1
            if self.seen[key] >= 0:
                target(self.seen[key], label="error/bound")
            return
        shrinking = bool(state.get("failed"))
        if shrinking:  # a shrinking step is one step of the budget, as before blocks
            state["shrink"] += 1
        self.result.generated[(entry.name, dtype)] += len(block)
        refs = self._references(block, preps, {p: v[:len(preps)] for p, v in found.items()}, state)
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
                self.distinct.add(k[:4])
                if self.space is not None and _space_key(entry, c.variant, c.hyper) in self.space:
                    self.covered.add(_space_key(entry, c.variant, c.hyper))
            w, outputs, f = self._examine(c, p, r, batch if i == 0 else {q: [] for q in precisions}, k)
            if not shrinking:
                self._keep_passing(c, outputs)
            self._agreement(outputs, r, k)
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
        if not any(m.hung for m in self.active):  # passed: a repeat of it is not examined again
            self.seen[key] = score
            if any(batch.values()):
                self.batched[shape] += 1

    def _references(self, block: list[Case], preps: list[Prepared], each: dict[str, list[Any]], state: dict[str, Any]
                    ) -> Optional[list[Optional[Refs]]]:
        """Each value set's reference at each precision the members compute in (``each``: per
        precision, ``references_for`` of ``preps``), or None for a value set the spec refuses,
        cannot bound or finds out of range (counted, not examined); None when the drawn case is
        one the spec refuses by definition (the members were examined for their refusal). A block
        with no value set left is rejected."""
        entry, dtype, case = self.entry, self.dtype, block[0]
        precisions = set(each)
        head = next(iter(each.values()))[0]
        if isinstance(head, SpecError) and refused_empty_query(entry, case, head):
            if not state.get("failed"):  # judged: the spec's answer is its refusal
                state["judged"] += 1
                self.distinct.add((case.variant.hash, tuple(sorted(case.hyper.items())),
                                   *_prepared_digests(preps[0])))
            self._expect_refusal(case, preps[0], head)  # masks are shared: the whole block is refused
            return None
        out: list[Optional[Refs]] = []
        for i in range(len(block)):
            got = {p: each[p][i] for p in precisions}
            if any(isinstance(r, SpecError) for r in got.values()):
                self.result.rejected[(entry.name, dtype)] += 1
                out.append(None)
            elif any(isinstance(r, ToleranceModelError) for r in got.values()):
                self.result.unmodelled[(entry.name, dtype)] += 1  # counted and reported, never a zero tolerance
                out.append(None)
            elif not all(r.in_range for r in got.values()):
                for m in self.active:
                    self.cells[m.key].out_of_range += 1
                out.append(None)
            else:
                out.append(got)
        if all(r is None for r in out):
            reject()
        return out

    def _batch_references(self, case: Case, extras: list[Prepared], precisions: set[str], *,
                          found: Optional[dict[str, list[Any]]] = None) -> dict[str, list]:
        """Per precision, the batch's further input sets with their references (those the spec
        takes and finds in range): ``found``, their references as the search evaluated them
        (``references_for``, with the block's), or else each evaluated alone, as a case file's
        replay evaluates it (``_examine`` confirms a failure so)."""
        batch: dict[str, list] = {p: [] for p in precisions}
        if not extras:
            return batch
        if found is None:
            each = {p: [self.runner.alone(self.entry, x, case, self.dtype, p) for x in extras] for p in precisions}
        else:
            each = found
        for i, extra_prep in enumerate(extras):
            extra_refs = {p: each[p][i] for p in precisions}
            refs = [r for r in extra_refs.values() if isinstance(r, Reference)]
            if len(refs) == len(extra_refs) and all(r.in_range for r in refs):
                for p in precisions:
                    batch[p].append((extra_prep.inputs, extra_refs[p]))
        return batch

    def _examine(self, case: Case, prepared: Prepared, refs: Refs, batch: dict[str, list], key: tuple
                 ) -> tuple[float, dict[tuple[str, str], dict], list[tuple[Member, Finding, Case]]]:
        """Every active member on one value set: (the worst error/bound ratio, the outputs of those
        that passed, the members that failed with their first finding and the value set). A member
        whose call timed out fails at once (no shrinking: that would wait for the hang again).

        A failure against the block's reference is confirmed against the value set's reference
        evaluated alone, as its case file replays it (``Runner.alone``): the two differ only in
        the Monte Carlo draws, and a verdict must reproduce from the case file. Where the value set
        alone cannot be bounded (its lanes turn NaN: a float16 mean square that underflows under
        ε = 0, `make run` of 2026-12-06), it is counted unmodelled, as a block's would be."""
        worst = 0.0
        outputs: dict[tuple[str, str], dict] = {}
        failed: list[tuple[Member, Finding, Case]] = []
        for m in self.active:
            if m.hung:
                continue
            precision = m.impl.precision_for(self.dtype)
            ref = refs[precision]
            outcome = examine(m, case, prepared.inputs, prepared.params, ref, dtype=self.dtype,
                              timeout=self.runner.timeout, batch=batch[precision])
            if not outcome.judgement.ok and not outcome.timed_out:
                alone = self.runner.alone(self.entry, prepared, case, self.dtype, precision)
                if alone is None:  # its case file could not judge it: unmodelled alone, never a failure
                    self.result.unmodelled[(self.entry.name, self.dtype)] += 1
                    continue
                each = batch[precision]
                if each:  # the batch's input sets too, alone: the references their replay takes
                    each = self._batch_references(case, self._extras, {precision})[precision]
                outcome = examine(m, case, prepared.inputs, prepared.params, alone, dtype=self.dtype,
                                  timeout=self.runner.timeout, batch=each)
            if self.runner.refusals:  # what the spec refuses, the member must refuse
                check_refusals_into(outcome, m, case, self.dtype, timeout=self.runner.timeout)
            cell = self.cells[m.key]
            cell.examples += 1
            self.digests[m.key].update(repr(key[:2]).encode() + b"".join(key[2:]))
            cell.worst_ratio = max(cell.worst_ratio, outcome.judgement.ratio)
            if len(cell.ratios) < RATIOS_KEPT:  # the HTML report's plot (session/html_report.py)
                cell.ratios.append(outcome.judgement.ratio)
            cell.checks.update(outcome.checks)
            cell.ambiguous += outcome.judgement.ambiguous
            cell.undetermined += outcome.judgement.undetermined
            worst = max(worst, outcome.judgement.ratio if math.isfinite(outcome.judgement.ratio) else 1e300)
            if not outcome.judgement.ok and cell.first_failure_s is None:
                cell.first_failure_s = time.perf_counter() - self.started
                cell.first_failure_examples = cell.examples
            if outcome.timed_out:
                m.hung = True
                self.runner.record_failure(cell, m, outcome.judgement.findings[0], case, self.dtype, shrunk=False)
                continue
            if not outcome.judgement.ok:
                failed.append((m, outcome.judgement.findings[0], case))
                self._keep_failing(m, outcome.judgement.ratio, outcome.judgement.findings[0], case)
                refused = self.refused.setdefault(m.key, {})
                for f in outcome.judgement.findings:  # every refusal answered, for the failure's report
                    if f.check == "refusal":
                        refused.setdefault(f.refusal or f.message, f)
            elif outcome.outputs is not None:
                outputs[m.key] = outcome.outputs
        return worst, outputs, failed

    def _keep_passing(self, case: Case, passed: Mapping[tuple[str, str], Any]) -> None:
        """Add a judged value set to the sample of each cell whose member passed it (``passed``: the
        members' outputs, keyed by member), where the runner keeps samples (``Runner.keep_passing``)."""
        if self.runner.keep_passing and self.dtype in SAMPLED_DTYPES:
            for key in passed:
                keep_sample(self.cells[key].sample, case)

    def _keep_failing(self, m: Member, ratio: float, finding: Finding, case: Case) -> None:
        """Keep ``case`` among ``m``'s ``FAILING_KEPT`` worst failing examples of a value check (and note
        the example's error/bound on its finding, which the report compares with the worst)."""
        finding.ratio = ratio
        if finding.check not in DIAGNOSED_CHECKS:
            return
        kept = self.failing.setdefault(m.key, [])
        if any(c is case for _, c in kept):
            return
        kept.append((ratio if math.isfinite(ratio) else math.inf, case))
        kept.sort(key=lambda rc: -rc[0])
        del kept[FAILING_KEPT + 1:]  # the shrunk case may be among them: it is not one of the others

    def _expect_refusal(self, case: Case, prepared: Prepared, refusal: SpecError) -> None:
        """A case the spec refuses by definition (a query with no key under ``empty_query="error"``,
        docs/spec.md): every member must raise (any exception) to pass the example
        (``refusals.expect_refusal``, which the replay of its case file uses too)."""
        failed: list[tuple[Member, Finding]] = []
        for m in self.active:
            if m.hung:
                continue
            cell = self.cells[m.key]
            cell.examples += 1
            check = expect_refusal(m, case, prepared, refusal, self.dtype, timeout=self.runner.timeout)
            if check.finding is None:
                cell.checks["refusal"] += 1
                continue
            if check.finding.check == "timeout":
                m.hung = True
                self.runner.record_failure(cell, m, check.finding, case, self.dtype, shrunk=False)
                continue
            if cell.first_failure_s is None:
                cell.first_failure_s = time.perf_counter() - self.started
                cell.first_failure_examples = cell.examples
            failed.append((m, check.finding))
        self.runner.progress("example", algorithm=self.entry.name, dtype=self.dtype)
        if failed:
            member, finding = failed[0]
            raise _MemberFailed(member, finding, case)

    def _agreement(self, outputs: dict, refs: Refs, key: tuple) -> None:
        """Implementation vs implementation and device vs device, on the same example: this
        search's members with each other, and with the members of earlier searches (other
        implementations) that answered the same case (``key``)."""
        known = self.runner._outputs  # the runner's, for the (algorithm, dtype): every search adds to it
        by_key = {m.key: m for m in self.active}
        answered = {k: (outputs[k], refs[by_key[k].impl.precision_for(self.dtype)]) for k in outputs}
        earlier = known.get(key, {})
        mine = set(answered)
        pool = {**earlier, **answered}
        keys = sorted(pool)
        table = self.result.agreement.setdefault((self.entry.name, self.dtype), {})
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                if a not in mine and b not in mine:
                    continue  # compared when the later of them was searched
                ref = pool[a][1]
                kind = "device" if a[0] == b[0] else "peer"
                j = compare_pair(self.entry, pool[a][0], pool[b][0], ref, f"{a[0]}@{a[1]} vs {b[0]}@{b[1]}", kind)
                pair = (f"{a[0]}@{a[1]}", f"{b[0]}@{b[1]}")
                table[pair] = max(table.get(pair, 0.0), j.ratio)
        if answered and (key in known or len(known) < CACHE_CASES):
            known.setdefault(key, {}).update(answered)
