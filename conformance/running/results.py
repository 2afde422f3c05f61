"""What a run produces: its cells (algorithm × implementation × dtype × device), their failures,
and the result of a run as a whole.

The runner (conformance/running/runner.py) fills them, the parallel driver merges the shards'
(conformance/running/parallel.py, conformance/running/wire.py), and the session judges the whole
(conformance/session/commands.py: ``verdict``, ``reasons`` and the fields below them).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..core.case import Case
from ..core.status import Status

__all__ = ["LEFT_OUT", "RATIOS_KEPT", "SAMPLED_DTYPES", "SAMPLE_CASES", "SAMPLE_ELEMENTS", "Cell", "Failure",
           "RunResult", "Status", "keep_sample", "merge_samples", "sample_priority"]

#: the note of a cell whose member a search left out (``exclude``: an extra round leaves out the
#: members that hung, failed or have their examples); progress lines do not list it
LEFT_OUT = "left out of this search (exclude)"
#: the dtypes whose cells keep a sample of the value sets they passed (``Cell.sample``): a
#: certificate derives from it what a pass there cannot tell apart (session/separation.py); at
#: float32 and float64 the bound separates every catalogue difference the search can show
SAMPLED_DTYPES = ("bfloat16", "float16")
#: at most this many value sets per cell, of at most this many elements (inputs and parameters)
#: together: 32 value sets of a small layer are a few hundred kilobytes in a worker's answer
SAMPLE_CASES = 32
SAMPLE_ELEMENTS = 1 << 15

#: how many examples' error/bound ratios a cell keeps, the first judged (the HTML report's plot,
#: conformance/session/html_report.py): bounded, so that a thorough run's report stays small
RATIOS_KEPT = 200


@dataclass
class Failure:
    check: str
    message: str
    case: Optional[Case]  # None: no case (the worker that held it was lost) or its case file is unreadable
    case_file: Optional[str]
    reproducer: str
    report: str
    shrunk: bool = True
    diagnosis: Optional[dict] = None  # forensics/diagnosis/: the conventions the output matches (plain data)
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
    status: Status = Status.PASS
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
    #: further failures with other signatures than ``failure``'s, as plain data (forensics/distinct_failures/)
    more_failures: list = field(default_factory=list)
    #: > 0: the search tried every case its strategy can draw (Hypothesis exhausted its choices), and
    #: this many distinct cases were examined: the cell is complete below the minimum examples
    exhausted: int = 0
    #: the error/bound ratio of each of the first ``RATIOS_KEPT`` examples, in the order judged
    ratios: list = field(default_factory=list)
    #: at ``SAMPLED_DTYPES``, when the runner keeps them (``Runner.keep_passing``: certify), a bounded
    #: sample of the value sets this cell passed, each a ``Case`` without its batch (``keep_sample``)
    sample: list = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.status = Status(self.status)  # a cell read back from plain values (wire.py) holds the text

    @property
    def ok(self) -> bool:
        return self.status in (Status.PASS, Status.NOT_IMPLEMENTED)

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
        self.ratios.extend(other.ratios[:max(0, RATIOS_KEPT - len(self.ratios))])
        self.sample = merge_samples(self.sample, other.sample)


def _elements(case: Case) -> int:
    return sum(int(getattr(v, "size", 1)) for v in (*case.inputs.values(), *case.params.values()))


def sample_priority(case: Case) -> int:
    """A value set's place in a cell's sample: the first 8 bytes of a SHA-256 of its hyperparameters
    and values (the lowest are kept). A hash, not the order of drawing: Hypothesis draws the smallest
    cases first, so the first 32 examples of a layer-norm search were all d_e = 1, where no ε can
    be told apart. Cached on the kept copy."""
    cached = case.__dict__.get("_sample_priority")
    if cached is not None:
        return int(cached)
    h = hashlib.sha256(repr(sorted(case.hyper.items())).encode())
    for group in (case.inputs, case.params):
        for k in sorted(group):
            h.update(k.encode() + np.ascontiguousarray(group[k]).tobytes())
    value = int.from_bytes(h.digest()[:8], "little")
    case.__dict__["_sample_priority"] = value
    return value


def keep_sample(sample: list, case: Case, most: int = SAMPLE_CASES, elements: int = SAMPLE_ELEMENTS) -> None:
    """Offer the passing value set ``case`` (its batch left out) to ``sample``, in place: the sample
    keeps the ``most`` value sets of lowest ``sample_priority`` (a bottom-k sample: uniform over every
    value set offered, whenever it came, the same for the same examples, and the same whichever
    shards or rounds they came from), within ``elements`` elements together (a value set larger
    than that alone is never kept; the highest priorities leave first)."""
    size = _elements(case)
    if size > elements:
        return
    kept = dataclasses.replace(case, batch=[])
    rank = sample_priority(case)
    kept.__dict__["_sample_priority"] = rank
    if any(sample_priority(c) == rank for c in sample):  # the same value set again
        return
    sample.append(kept)
    sample.sort(key=sample_priority)
    while len(sample) > most or (len(sample) > 1 and sum(_elements(c) for c in sample) > elements):
        sample.pop()


def merge_samples(first: list, second: list, most: int = SAMPLE_CASES, elements: int = SAMPLE_ELEMENTS) -> list:
    """One sample from two cells' of the same search (shards, rounds): the bottom ``most`` of both."""
    if not second:
        return first
    out = list(first)
    for case in second:
        keep_sample(out, case, most, elements)
    return out


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
