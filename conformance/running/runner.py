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

The steps: ``Runner`` (this module) plans the searches (``plan``: members and
cells), runs them in order (``run``) and keeps what they share: the
references and the outputs for the peer comparison (reference_cache.py:
``reference_for``, ``references_for``, ``alone``) and the case files and
reports of failures (failures.py: ``record_failure``). ``_Search``
(impl_search.py) is one implementation's search of one (algorithm, dtype):
rounds of Hypothesis under the time cap (search_rounds.py), each drawn case
examined on every member (drawn_case.py), then the further distinct failures
and the cells' totals. search_keys.py holds the seeds, shares, digests and
case spaces they key their draws by.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

from ftspec.impls.api import FLOAT_DTYPES, Implementation, select_devices
from ftspec.spec import SpecError
from ftspec.spec.registry import REGISTRY, Entry

from ..core.calling import Prepared
from ..core.case import Case
from ..core.execute import Member
from ..core.judge import Finding
from ..core.profiles import Profile
from ..core.refusals import refused_empty_query
from ..core.tolerances import Reference, SCREEN_LANES, ToleranceModelError, keeping_references
from ..forensics.distinct_failures import MAX_DISTINCT
from .config import RunConfig
from .drawn_case import BATCH_CHECKS
from .failures import record_failure
from .impl_search import Group, _Search, variant_groups
from .local_constants import no_local_constants
from .reference_cache import ReferenceCache
from .results import LEFT_OUT, Cell, Failure, RunResult, Status
from .search_keys import case_space, shard_examples, shard_seed

__all__ = ["BATCH_CHECKS", "Cell", "Failure", "RunResult", "Runner", "case_space", "refused_empty_query",
           "shard_examples", "shard_seed"]


class Runner:
    """Runs the search; ``progress(event, **info)`` receives progress events."""

    #: further distinct failures searched for per failing cell (conformance/forensics/distinct_failures/; 0: none)
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
        #: the references and outputs of the (algorithm, dtype) being searched (reference_cache.py)
        self.cache = ReferenceCache()
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

    @property
    def reference_evaluations(self) -> int:
        """References computed (cache misses), for tests and reports."""
        return self.cache.evaluations

    @property
    def _reference_seconds(self) -> float:
        """Seconds spent evaluating references (not counted against a search's time cap)."""
        return self.cache.seconds

    # -- references, cached: every member of a search shares them -------------
    def reference_for(self, entry: Entry, prepared: Prepared, case: Case, dtype: str, precision: str) -> Reference:
        """The spec's reference (value and tolerance) of a prepared case, evaluated once per distinct
        input set of the (algorithm, dtype) being searched; raises the spec's refusal (SpecError,
        ToleranceModelError) as the first evaluation did."""
        return self.cache.one(entry, prepared, case, dtype, precision)

    def references_for(self, entry: Entry, prepared: Sequence[Prepared], case: Case, dtype: str,
                       precision: str, lanes: int = SCREEN_LANES) -> list[Any]:
        """``reference_for`` of every value set of a block (``case``: its structure), each a Reference
        or the exception it raises; those not cached are evaluated together
        (``tolerances.references``). ``lanes``: the search's screen by default (``SCREEN_LANES``:
        a pass there is a pass at ``LANES``; a failure is judged again by ``alone``)."""
        return self.cache.many(entry, prepared, case, dtype, precision, lanes)

    def alone(self, entry: Entry, prepared: Prepared, case: Case, dtype: str, precision: str) -> Optional[Reference]:
        """The reference of one value set evaluated alone at ``LANES``, as a case file's replay
        evaluates it (``reference_for``'s, cached: the forensics that examine the failing case
        again take the same one); None where the spec refuses or cannot bound it alone."""
        try:
            return self.reference_for(entry, prepared, case, dtype, precision)
        except (SpecError, ToleranceModelError):
            return None

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

    @keeping_references()  # a search and the forensics of its failures: one tolerance model
    def run(self, algorithms: Optional[Sequence[str]] = None, dtypes: Optional[Sequence[str]] = None) -> RunResult:
        start = time.perf_counter()
        result, plan = self.plan(algorithms, dtypes)
        self.progress("plan", searches=len(plan), examples=self.examples)
        for entry, dtype, members, cells in plan:
            self.cache.clear()  # a case of one (algorithm, dtype) never meets another's
            for group in self._variant_groups(members, entry.name):
                self._search(entry, dtype, group, cells, result)
        self.cache.clear()
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

    #: members that share one search (``impl_search.variant_groups``)
    _variant_groups = staticmethod(variant_groups)

    def _search(self, entry: Entry, dtype: str, group: Group, cells: dict, result: RunResult) -> None:
        with no_local_constants():  # the same seed draws the same cases in any process (local_constants.py)
            _Search(self, entry, dtype, group, cells, result).run()

    # -- failures ------------------------------------------------------------------
    def record_failure(self, cell: Cell, m: Member, finding: Finding, case: Case, dtype: str, *,
                       shrunk: bool, others: Sequence[tuple[float, Case]] = (),
                       refusals: Sequence[Finding] = ()) -> None:
        """``cell`` fails on ``case``: its case files, report (diagnosis included) and reproducer, the
        ``failure`` progress event (``failures.record_failure``; ``others``: further failing
        examples of the cell, (error/bound, case) each, the worst first; ``refusals``: the search's
        refusal findings of the member)."""
        record_failure(self, cell, m, finding, case, dtype, shrunk=shrunk, others=others, refusals=refusals)
