"""What a run produces: its cells (algorithm × implementation × dtype × device), their failures,
and the result of a run as a whole.

The runner (conformance/running/runner.py) fills them, the parallel driver merges the shards'
(conformance/running/parallel.py, conformance/running/wire.py), and the session judges the whole
(conformance/session/commands.py: ``verdict``, ``reasons`` and the fields below them).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

from ..core.case import Case

__all__ = ["Cell", "Failure", "RunResult"]


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
    #: a ``refusal`` failure: every refusal the implementation answered instead of raising, each kind
    #: once, as {"refusal": name (spec/refusals.py), "message": the finding's}; empty for other checks
    refusals: list = field(default_factory=list)


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
    #: > 0: the search tried every case its strategy can draw (Hypothesis exhausted its choices), and
    #: this many distinct cases were examined: the cell is complete below the minimum examples
    exhausted: int = 0

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
        self.exhausted = max(self.exhausted, other.exhausted)  # one search that tried every case suffices


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
