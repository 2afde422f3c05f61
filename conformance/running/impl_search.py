"""One implementation's search of one (algorithm, dtype) (``_Search``): its members
(the implementation's devices), its budget, time cap and block size, the cells'
totals. It runs Hypothesis rounds (search_rounds.py) while members are left and
examples are owed, each drawn case examined on every member (drawn_case.py);
then the further distinct failures of a failing member
(conformance/forensics/distinct_failures/) and the cells' totals (``_finish``).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from ftspec.impls.api import Limits
from ftspec.spec.registry import Entry

from ..core.blocks import MAX_BLOCK, block_size, varies
from ..core.calling import Prepared
from ..core.case import Case
from ..core.execute import Member
from ..core.judge import Finding
from ..core.refusals import refused_empty_query
from ..forensics.distinct_failures import SECONDS as DISTINCT_SECONDS, search_distinct
from .results import RunResult, Status
from .search_keys import _shapes_per_search, case_space, shard_examples
from .search_rounds import run_round

if TYPE_CHECKING:
    from .runner import Runner

__all__ = ["COMPILED_BLOCK", "Group", "MIN_DRAWS", "_Search", "variant_groups"]

#: the fewest drawn cases (structures) a search makes where it can: its blocks hold at most
#: N // MIN_DRAWS value sets for a search of N examples (conformance/core/blocks.py), so a search
#: of fewer than 64 examples (the quick profile's, the bug zoo's) draws one value set per case, as
#: before blocks, and a default one (400) draws at least 50 cases
MIN_DRAWS = 32
#: how many times the runner's block an implementation that compiles per shape gets
#: (``extra["shapes_per_search"]``: JAX, Flax)
COMPILED_BLOCK = 4


Group = tuple[Any, Limits, list[Member]]  # (variant sets, limits, the members that search together)


def variant_groups(members: list[Member], algorithm: str = "") -> list[Group]:
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


class _Search:
    """One implementation's search of one (algorithm, dtype): its members (the implementation's
    devices) examined on every case Hypothesis draws, in rounds, under the time cap."""

    def __init__(self, runner: Runner, entry: Entry, dtype: str, group: Group, cells: dict,
                 result: RunResult) -> None:
        self.runner, self.entry, self.dtype, self.cells, self.result = runner, entry, dtype, cells, result
        #: the current drawn case's batch of further input sets (``drawn_case.example``)
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
            if not run_round(self, strategy):
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

    # -- a member's failure, a harness error, the end --------------------------------------------
    def _member_failed(self, member: Member, finding: Finding, case: Case, *, shrunk: bool) -> None:
        others = [(r, c) for r, c in self.failing.get(member.key, []) if c is not case]
        self.runner.record_failure(self.cells[member.key], member, finding, case, self.dtype, shrunk=shrunk,
                                   others=others, refusals=list(self.refused.get(member.key, {}).values()))
        self.active = [m for m in self.active if m.key != member.key]

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
