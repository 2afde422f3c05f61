"""The phases of one run under its configuration: the searches, the extra round, the fixture replay, the verdict.

``commands.run`` and ``certify`` load the plugins, build the run's one
``RunConfig`` (``commands._configure``) and hand both to ``RunPhases``, whose
``execute`` is the run:

1. ``_search``: every (algorithm, dtype) search, in worker processes
   (``parallel.run_parallel``) or, ``in_process``, here (``Runner``);
2. ``_extend``: one extra round for the searches whose cells ran fewer examples
   than the minimum, from seed ``seed + EXTENSION_SEED``, at most the
   profile's ``ceiling`` seconds per search, without the members whose call
   hung or crashed. Examples are what the spec judged (a draw it refuses is
   not one: conformance/running/runner.py); a cell whose search tried every
   case its strategy can draw (``Cell.exhausted``) is complete, and is not
   searched again;
3. ``_replay``: the golden fixture replay, which does not call again an
   (implementation, algorithm, device) that hung or crashed in the searches;
4. ``_judge``: the run's record and its verdict (conformance/core/verdict.py).

Ctrl-C (held, then raised at a checkpoint: conformance/core/interrupts.py)
ends the run with what had ended: the ``partial`` of
``interruption.SearchesInterrupted`` or ``ReplayInterrupted``, the cells of
searches not ended marked "no examples"; the result is marked interrupted.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional, Sequence

from ftspec.impls.api import FLOAT_DTYPES, Implementation
from ftspec.impls.discovery import PluginRecord

from ..core.interrupts import held_interrupt
from ..core.verdict import derive
from ..running.config import RunConfig
from ..running.fixture_replay import DTYPES as FIXTURE_DTYPES
from ..running.interruption import ReplayInterrupted, SearchesInterrupted, search_here
from ..running.results import Status
from ..running.runner import Cell, RunResult, Runner

__all__ = ["EXTENSION_SEED", "RunPhases"]

#: the extra round's seed is the run's seed plus this (recorded in the result, reproducible)
EXTENSION_SEED = 104_729


class _Collector:
    """Passes progress events on and keeps every cell of a search that ended (for Ctrl-C)."""

    def __init__(self, progress: Optional[Callable[..., None]]) -> None:
        self.progress = progress
        self.ended: list[Cell] = []

    def __call__(self, event: str, **info: Any) -> None:
        if event == "end":
            self.ended.extend(info.get("cells", []))
        if self.progress is not None:
            self.progress(event, **info)


def _not_ended(result: RunResult, ended: Sequence[Cell]) -> RunResult:
    """An interrupted round's result with the cells of the searches that had not ended marked as
    not run (they are planned with status "pass" and no examples)."""
    done = {id(c) for c in ended}
    for c in result.cells:
        if id(c) not in done and c.status == Status.PASS and c.failure is None:
            c.status, c.note = Status.NO_EXAMPLES, "not run: interrupted before this search ended"
    return result


def _left_out(result: RunResult) -> list[tuple[str, str, str]]:
    """(label, algorithm, dtype) an extra round must not search again: every member whose call hung
    or crashed (a second call would hang or crash again), and every member none of whose cells an
    extra round could change (all failed already)."""
    by: dict[tuple[str, str, str], list[Cell]] = {}
    for c in result.cells:
        if c.status != Status.NOT_IMPLEMENTED:
            by.setdefault((c.impl, c.algorithm, c.dtype), []).append(c)
    out = []
    for key, cells in by.items():
        hung = any(c.failure is not None and c.failure.check in ("timeout", "crash") for c in cells)
        if hung or not any(c.status in (Status.PASS, Status.NO_EXAMPLES) for c in cells):
            out.append(key)
    return out


def _enough(result: RunResult, short: Sequence[Cell]) -> list[tuple[str, str, str]]:
    """(label, algorithm, dtype) of every member with none of its cells ``short``: an extra round
    leaves it out, so that the round costs what the short cells need (in `make run` of
    2026-12-06 a JAX cell short of 50 made NumPy and PyTorch search 49 more examples beside it,
    at 400 already)."""
    needed = {(c.impl, c.algorithm, c.dtype) for c in short}
    return list(dict.fromkeys((c.impl, c.algorithm, c.dtype) for c in result.cells
                              if c.status != Status.NOT_IMPLEMENTED and (c.impl, c.algorithm, c.dtype) not in needed))


def _merge(result: RunResult, extra: RunResult) -> int:
    """Add an extra round's examples to the cells that had not failed; returns the cells extended."""
    index = {(c.algorithm, c.impl, c.dtype, c.device): c for c in result.cells}
    extended = 0
    for e in extra.cells:
        c = index.get((e.algorithm, e.impl, e.dtype, e.device))
        if c is None or c.status not in (Status.PASS, Status.NO_EXAMPLES) or e.status == Status.NOT_IMPLEMENTED:
            continue
        extended += 1
        before = c.examples
        c.add_counts(e)
        if e.status == Status.NO_EXAMPLES:  # nothing judged in this round (or left out of it)
            if c.examples and c.status == Status.NO_EXAMPLES:
                c.status, c.note = Status.PASS, ""
            continue
        c.status, c.note, c.failure = e.status, e.note or c.note, e.failure
        if e.first_failure_examples is not None:
            c.first_failure_examples = before + e.first_failure_examples
            c.first_failure_s = e.first_failure_s
    for key, n in extra.generated.items():
        result.generated[key] += n
    result.rejected.update(extra.rejected)
    result.unmodelled.update(extra.unmodelled)
    for key, table in extra.agreement.items():
        mine = result.agreement.setdefault(key, {})
        for pair, r in table.items():
            mine[pair] = max(mine.get(pair, 0.0), r)
    result.implementation_seconds.update(extra.implementation_seconds)
    result.reference_seconds += extra.reference_seconds
    result.seconds += extra.seconds
    return extended


def _extension_rounds(short: Sequence[Cell]) -> list[tuple[list[str], list[str]]]:
    """The (algorithms, dtypes) calls of an extra round for the ``short`` cells: one call when their
    algorithms × dtypes are at most half again as many searches as they need (one set of worker
    processes, which import every framework); otherwise one call per dtype. Only the members
    with a short cell search (``_enough`` leaves the others out)."""
    searches = list(dict.fromkeys((c.algorithm, c.dtype) for c in short))
    algorithms = list(dict.fromkeys(a for a, _ in searches))
    dtypes = [d for d in FLOAT_DTYPES if any(d == x for _, x in searches)]
    if len(algorithms) * len(dtypes) <= 1.5 * len(searches):
        return [(algorithms, dtypes)]
    return [(list(dict.fromkeys(a for a, x in searches if x == d)), [d]) for d in dtypes]


def _fixture_cases(config: RunConfig) -> Optional[list[tuple[str, str]]]:
    """The (id, algorithm) of every golden fixture case ``config`` replays (all of the chosen
    algorithms, or the fixed sample of them); None when the fixture set cannot be read."""
    from ..core.fixture_files import FixtureError, load_manifest
    from ..running.fixture_replay import sample_cases

    try:
        records = load_manifest()["cases"]
    except FixtureError:
        return None
    if config.algorithms:
        records = [r for r in records if r["algorithm"] in config.algorithms]
    chosen = set(sample_cases(records)) if config.fixtures == "sample" else {r["id"] for r in records}
    return [(r["id"], r["algorithm"]) for r in records if r["id"] in chosen]


class RunPhases:
    """One command's run over its loaded plugins, under its one configuration: the searches, the
    extra round, the golden fixture replay and the verdict (``execute``). ``executor``: the
    command's worker pool or a Dask executor (None in this process); the caller shuts it down."""

    def __init__(self, loaded: Sequence[tuple[str, Implementation]], config: RunConfig, *, executor: Any,
                 declared: dict[str, list[str]], broken: Sequence[PluginRecord],
                 progress: Optional[Callable[..., None]]) -> None:
        self.loaded, self.config, self.executor = list(loaded), config, executor
        self.declared, self.broken = declared, list(broken)
        self.collector = _Collector(progress)

    def execute(self) -> RunResult:
        """Search, extend, replay, judge. Ctrl-C ends it with what is done, marked interrupted."""
        started = time.perf_counter()
        result: Optional[RunResult] = None
        replaying = False
        try:
            with held_interrupt():  # Ctrl-C stops the run at a checkpoint, never inside Hypothesis or a wait
                result = self._search(self.config, algorithms=self.config.algorithms, dtypes=self.config.dtypes)
                self._extend(result)
                if self._replays():
                    replaying = True
                    result.fixtures = self._replay(result)
        except KeyboardInterrupt as exc:
            result = self._interrupted(exc, result, replaying, started)
        return self._judge(result)

    def _interrupted(self, exc: KeyboardInterrupt, result: Optional[RunResult], replaying: bool,
                     started: float) -> RunResult:
        """The result of a run Ctrl-C stopped: what had ended, marked interrupted."""
        if replaying and result is not None:  # keep the fixture replays that ended
            result.fixtures = list(exc.partial) if isinstance(exc, ReplayInterrupted) else []
        elif result is None:  # the searches were interrupted: run_parallel's partial result, or what ended
            if isinstance(exc, SearchesInterrupted):
                result = _not_ended(exc.partial, self.collector.ended)
            else:
                result = RunResult(list(self.collector.ended), self.config.profile, self.config.seed)
            result.seconds = time.perf_counter() - started
        result.interrupted = True
        return result

    def _search(self, config: RunConfig, *, algorithms: Optional[Sequence[str]], dtypes: Optional[Sequence[str]],
                exclude: Sequence[Sequence[str]] = ()) -> RunResult:
        """One round of searches under ``config``; ``exclude`` ((label, algorithm, dtype)) leaves those
        members out (an extra round does not call again a plugin that hung or crashed)."""
        if config.in_process:
            runner = Runner(self.loaded, config, progress=self.collector, exclude=exclude)
            return search_here(runner, algorithms, dtypes, self.collector.ended)
        from ..running.parallel import run_parallel

        return run_parallel(config, self.loaded, algorithms=algorithms, dtypes=dtypes, progress=self.collector,
                            exclude=exclude, executor=self.executor)

    def _extend(self, result: RunResult) -> None:
        """One more round for the searches whose cells are short of the minimum (not when the user
        asked for fewer examples than that: those cells stay short, and the verdict says so)."""
        config = self.config
        minimum = config.minimum
        if config.examples < minimum:
            return
        short = [c for c in result.cells
                 if c.status in (Status.PASS, Status.NO_EXAMPLES) and c.examples < minimum and not c.exhausted]
        if not short:
            return
        ceiling = config.hypothesis_profile.ceiling
        seed = config.seed + EXTENSION_SEED
        result.extension = {"seed": seed, "seconds": ceiling, "searches": []}
        self.collector("extend", cells=len(short), minimum=minimum, seconds=ceiling)
        left_out = _left_out(result) + _enough(result, short)
        for algs, dts in _extension_rounds(short):
            need = max(minimum - c.examples for c in short if c.algorithm in algs and c.dtype in dts)
            ended = len(self.collector.ended)
            try:
                extra = self._search(config.extension(seed=seed, examples=need, seconds=ceiling), algorithms=algs,
                                     dtypes=dts, exclude=left_out)
            except SearchesInterrupted as exc:  # keep the extra examples of the searches that ended
                _merge(result, _not_ended(exc.partial, self.collector.ended[ended:]))
                result.extension["searches"] += [f"{a}/{d}" for (a, d) in exc.partial.generated]
                raise
            _merge(result, extra)
            result.extension["searches"] += [f"{a}/{d}" for (a, d) in extra.generated]

    def _replays(self) -> bool:
        """Whether the run replays golden fixtures: a selection other than none, at a dtype they have."""
        dtypes = self.config.dtypes
        return self.config.fixtures != "none" and (not dtypes or bool(set(dtypes) & set(FIXTURE_DTYPES)))

    def _replay(self, result: RunResult) -> list:
        """The golden fixture replay: every case of the chosen algorithms, or the fixed sample of them,
        under the run's call timeout. An (implementation, algorithm, device) whose call hung or crashed
        in the searches (``parallel.hangs_of``) is not called again: a hang costs its timeout once."""
        from ..running.fixture_replay import applicable_cases, replay_fixtures
        from ..running.parallel import hangs_of, replay_fixtures_parallel

        config = self.config
        cases = _fixture_cases(config)
        if cases is None:  # replay_fixtures reports the unreadable set as a failed result
            return replay_fixtures(self.loaded, algorithms=config.algorithms, dtypes=config.dtypes,
                                   devices=config.devices)
        cases = applicable_cases(self.loaded, cases, dtypes=config.dtypes)
        self.collector("fixtures", done=0, total=len(cases), which=config.fixtures)
        if config.in_process:
            return self._replay_here(cases, hangs_of(result))

        def counted(done: int, total: int) -> None:
            self.collector("fixtures", done=done, total=total, which=config.fixtures)

        return replay_fixtures_parallel(config, cases, progress=counted, hangs=hangs_of(result),
                                        executor=self.executor)

    def _replay_here(self, cases: Sequence[tuple[str, str]], hangs: list[list[str]]) -> list:
        """The fixture replay in this process; on Ctrl-C, ``ReplayInterrupted`` with the replays that ended."""
        from ..core.calling import skipping_hangs
        from ..running.fixture_replay import FixtureResult, replay_fixtures

        config = self.config
        seen: set[str] = set()
        done: list[FixtureResult] = []

        def each(r: FixtureResult) -> None:
            done.append(r)
            if r.case not in seen:
                seen.add(r.case)
                self.collector("fixtures", done=len(seen), total=len(cases), which=config.fixtures)

        try:
            with skipping_hangs(hangs):
                results = replay_fixtures(self.loaded, dtypes=config.dtypes, devices=config.devices,
                                          cases={cid for cid, _ in cases}, progress=each,
                                          timeout=config.call_timeout)
        except KeyboardInterrupt:  # the replays that ended, for the interrupted report
            raise ReplayInterrupted(done) from None
        if len(seen) < len(cases):  # cases nobody covers: finish the count
            self.collector("fixtures", done=len(cases), total=len(cases), which=config.fixtures)
        return results

    def _judge(self, result: RunResult) -> RunResult:
        """The run's record (jobs, selection, plugins, broken) and its verdict."""
        from .report import cell_dict

        config = self.config
        seconds = config.seconds if config.capped else None  # the report's "no cap": null
        result.jobs = 0 if config.in_process else config.jobs  # 0: in this process
        result.fixture_selection = config.fixtures
        result.minimum = config.minimum
        result.broken = [(r.name, f"{r.error}" + (f" (hint: {r.hint})" if r.hint else "")) for r in self.broken]
        result.plugins = list(self.loaded)
        result.selection = {
            "algorithms": list(config.algorithms) if config.algorithms else None,
            "dtypes": list(config.dtypes) if config.dtypes else None,
            "devices": list(config.devices) if config.devices else None,
            "fixtures": config.fixtures,
            "fixtures_required": config.fixtures_required,
            "examples_per_search": config.examples,
            "seconds_per_search": seconds,
            "minimum": config.minimum,
        }
        result.selection["declared"] = self.declared
        result.verdict, result.reasons = derive(  # NothingTested goes to the caller
            [cell_dict(c) for c in result.cells], [f.to_dict() for f in result.fixtures], minimum=config.minimum,
            selection=result.selection, declared=self.declared, interrupted=result.interrupted,
            broken=result.broken)
        return result
