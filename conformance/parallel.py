"""Running the search and the fixture replay in worker processes (``ftspec run --jobs N``).

The searches of a run are independent: each (algorithm, dtype) search draws
its own cases from its own seed, so running them in separate processes gives
the same examples as running them one after another (up to each search's
wall-time cap, which counts the same in both). Each worker process loads the
implementations by their labels (a registered name or ``module:object``),
keeps one ``Runner`` for the searches it is given, and exchanges only plain
values with the parent (settings in; numbers, strings, lists and dicts out);
a failing search's shrunk case is read back from the case file the worker
wrote. Fixture cases are replayed in chunks the same way.

A worker that dies (a plugin that crashes the interpreter) breaks the pool
and every unfinished task with it; those are run again one at a time, so
only the search or fixture chunk that crashes is reported (as an error) and
the run goes on.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, fields
from multiprocessing import get_context
from typing import Any, Callable, Optional, Sequence

from .fixture_replay import FixtureResult
from .runner import Cell, Failure, Runner, RunResult

__all__ = ["RunSettings", "default_jobs", "replay_fixtures_parallel", "run_parallel"]

#: default ceiling on worker processes: each imports every framework (~1 GB resident with JAX)
MAX_DEFAULT_JOBS = 8
#: fixture cases per task: small enough that progress moves, large enough to amortise a task
FIXTURE_CHUNK = 16


def default_jobs() -> int:
    """One worker per CPU this process may use, at most ``MAX_DEFAULT_JOBS``."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_DEFAULT_JOBS, cpus))


@dataclass(frozen=True)
class RunSettings:
    """Everything a worker needs to rebuild the parent's ``Runner`` (plain values only)."""

    labels: tuple[str, ...]
    profile: str
    seed: int = 0
    case_dir: str = "reports/cases"
    examples: Optional[int] = None
    call_timeout: Optional[float] = None
    devices: Optional[tuple[str, ...]] = None
    #: wall-time cap per search, as ``Runner``'s ``seconds`` (None: the profile's)
    seconds: Optional[float] = None


# -- worker side ------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _init_worker() -> None:
    # Several processes share one accelerator: JAX must not claim most of its memory up front.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import warnings

    warnings.filterwarnings("ignore")


def _plugins(labels: Sequence[str]):
    from ftspec.impls.discovery import load_target

    key = ("plugins", tuple(labels))
    if key not in _WORKER:
        _WORKER[key] = [(label, load_target(label)) for label in labels]
    return _WORKER[key]


def _runner(s: RunSettings) -> Runner:
    from .profiles import profile

    key = ("runner", s)
    if key not in _WORKER:
        _WORKER[key] = Runner(_plugins(s.labels), profile=profile(s.profile), seed=s.seed, case_dir=s.case_dir,
                              examples=s.examples, call_timeout=s.call_timeout, devices=s.devices,
                              seconds=s.seconds)
    return _WORKER[key]


def _cell_values(c: Cell) -> dict[str, Any]:
    out = {f.name: getattr(c, f.name) for f in fields(Cell) if f.name not in ("checks", "failure")}
    out["checks"] = dict(c.checks)
    out["failure"] = None if c.failure is None else {
        "check": c.failure.check, "message": c.failure.message, "case_file": c.failure.case_file,
        "reproducer": c.failure.reproducer, "report": c.failure.report, "shrunk": c.failure.shrunk}
    return out


def _search_task(settings: dict[str, Any], algorithm: str, dtype: str) -> dict[str, Any]:
    s = RunSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()})
    res = _runner(s).run([algorithm], [dtype])
    key = (algorithm, dtype)
    return {
        "cells": [_cell_values(c) for c in res.cells],
        "generated": res.generated.get(key, 0),
        "rejected": res.rejected.get(key, 0),
        "unmodelled": res.unmodelled.get(key, 0),
        "time_capped": bool(res.time_capped.get(key, False)),
        "agreement": [[a, b, r] for (a, b), r in res.agreement.get(key, {}).items()],
        "reference_seconds": res.reference_seconds,
        "implementation_seconds": dict(res.implementation_seconds),
    }


def _replay_task(labels: tuple[str, ...], case_ids: tuple[str, ...], dtypes: Optional[tuple[str, ...]],
                 devices: Optional[tuple[str, ...]], directory: Optional[str]) -> list[dict[str, Any]]:
    from .fixture_replay import replay_fixtures

    results = replay_fixtures(_plugins(labels), cases=set(case_ids), dtypes=dtypes, devices=devices,
                              directory=directory)
    return [asdict(r) for r in results]


# -- parent side ------------------------------------------------------------------

def _cell_from(values: dict[str, Any]) -> Cell:
    from .casefile import read_case

    values = dict(values)
    failure = values.pop("failure")
    cell = Cell(**{**values, "checks": Counter(values["checks"])})
    if failure is not None:
        case = None
        if failure["case_file"]:
            try:
                case, _ = read_case(failure["case_file"])
            except Exception:  # the report still has the message and the reproducer
                case = None
        cell.failure = Failure(failure["check"], failure["message"], case, failure["case_file"],
                               failure["reproducer"], failure["report"], failure["shrunk"])
    return cell


def _pool(jobs: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"), initializer=_init_worker)


def _map(jobs: int, tasks: list[tuple[Callable, tuple]], on_result: Callable[[int, Any], None],
         on_error: Callable[[int, str], None]) -> None:
    """Run ``tasks`` on ``jobs`` processes; each outcome goes to ``on_result`` or ``on_error`` by index.

    When a worker dies the pool breaks and every unfinished task fails with it, so those are run
    again one at a time, each in a pool of its own making: a task that breaks that pool is the
    culprit and is reported; the others complete."""
    pending = list(range(len(tasks)))
    pool = _pool(jobs)
    futures: dict[Future, int] = {}
    try:
        for i in pending:
            fn, args = tasks[i]
            futures[pool.submit(fn, *args)] = i
        suspects: list[int] = []
        while futures:
            done, _ = wait(futures, return_when=FIRST_COMPLETED)
            for f in done:
                i = futures.pop(f)
                try:
                    on_result(i, f.result())
                except BrokenProcessPool:
                    suspects.append(i)
                except Exception as exc:  # noqa: BLE001 - a harness or plugin-loading error in the worker
                    on_error(i, f"worker error: {type(exc).__name__}: {exc}")
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    for i in sorted(suspects):
        solo = _pool(1)
        try:
            fn, args = tasks[i]
            try:
                on_result(i, solo.submit(fn, *args).result())
            except BrokenProcessPool as exc:
                on_error(i, f"the worker process died (did the implementation crash the interpreter?): {exc}")
            except Exception as exc:  # noqa: BLE001
                on_error(i, f"worker error: {type(exc).__name__}: {exc}")
        finally:
            solo.shutdown(wait=False, cancel_futures=True)


def run_parallel(settings: RunSettings, plugins, *, jobs: int, algorithms: Optional[Sequence[str]] = None,
                 dtypes: Optional[Sequence[str]] = None,
                 progress: Optional[Callable[..., None]] = None) -> RunResult:
    """The same run as ``Runner(...).run(algorithms, dtypes)``, its searches spread over ``jobs`` processes.

    ``plugins`` are the parent's loaded implementations (for the plan: which cells exist);
    the workers load their own from ``settings.labels``."""
    import time

    from .profiles import profile

    progress = progress or (lambda event, **info: None)
    started = time.perf_counter()
    planner = Runner(plugins, profile=profile(settings.profile), seed=settings.seed, case_dir=settings.case_dir,
                     examples=settings.examples, call_timeout=settings.call_timeout, devices=settings.devices,
                     seconds=settings.seconds)
    result, plan = planner.plan(algorithms, dtypes)
    progress("plan", searches=len(plan), examples=planner.examples)
    # Cells of the planned searches come back from the workers; keep the parent's order.
    slots: dict[tuple[str, str, str, str], int] = {}
    for entry, dtype, members, cells in plan:
        for m in members:
            slots[(entry.name, m.label, dtype, m.device)] = result.cells.index(cells[m.key])
    plain = asdict(settings)
    tasks = [(_search_task, (plain, entry.name, dtype)) for entry, dtype, _, _ in plan]

    def place(i: int, values: dict[str, Any]) -> None:
        entry, dtype, members, _ = plan[i]
        key = (entry.name, dtype)
        ended = []
        for v in values["cells"]:
            slot = slots.get((v["algorithm"], v["impl"], v["dtype"], v["device"]))
            if slot is None:  # e.g. "not implemented": the parent's plan has it already
                continue
            cell = _cell_from(v)
            result.cells[slot] = cell
            ended.append(cell)
            if cell.failure is not None:
                progress("failure", cell=cell)
        result.generated[key] += values["generated"]
        result.rejected[key] += values["rejected"]
        result.unmodelled[key] += values["unmodelled"]
        if values["time_capped"]:
            result.time_capped[key] = True
        result.agreement[key] = {(a, b): r for a, b, r in values["agreement"]}
        result.reference_seconds += values["reference_seconds"]
        result.implementation_seconds.update(values["implementation_seconds"])
        progress("end", algorithm=entry.name, dtype=dtype, cells=ended)

    def fail(i: int, message: str) -> None:
        entry, dtype, members, cells = plan[i]
        for m in members:
            cell = cells[m.key]
            cell.status, cell.note = "error", message
        progress("end", algorithm=entry.name, dtype=dtype, cells=[cells[m.key] for m in members])

    _map(jobs, tasks, place, fail)
    result.seconds = time.perf_counter() - started
    progress("done", result=result)
    return result


def replay_fixtures_parallel(labels: Sequence[str], *, jobs: int, cases: Sequence[tuple[str, str]],
                             dtypes: Optional[Sequence[str]] = None, devices: Optional[Sequence[str]] = None,
                             directory: Optional[str] = None,
                             progress: Optional[Callable[[int, int], None]] = None) -> list[FixtureResult]:
    """``replay_fixtures`` over ``cases`` ((id, algorithm) pairs), in chunks of ``FIXTURE_CHUNK`` cases
    spread over ``jobs`` processes; results in case order. ``progress(cases_done, cases_total)`` after
    each chunk."""
    algorithm_of = dict(cases)
    ids = [cid for cid, _ in cases]
    chunks = [tuple(ids[i:i + FIXTURE_CHUNK]) for i in range(0, len(ids), FIXTURE_CHUNK)]
    labels_t = tuple(labels)
    tasks = [(_replay_task, (labels_t, chunk, tuple(dtypes) if dtypes else None,
                             tuple(devices) if devices else None, directory)) for chunk in chunks]
    parts: dict[int, list[FixtureResult]] = {}
    done = [0]

    def collect(i: int, values: list[dict[str, Any]]) -> None:
        parts[i] = [FixtureResult(**v) for v in values]
        done[0] += len(chunks[i])
        if progress is not None:
            progress(done[0], len(ids))

    def fail(i: int, message: str) -> None:
        parts[i] = [FixtureResult(cid, algorithm_of[cid], label, "-", "-", False, math.inf, message)
                    for cid in chunks[i] for label in labels_t]
        done[0] += len(chunks[i])
        if progress is not None:
            progress(done[0], len(ids))

    _map(jobs, tasks, collect, fail)
    return [r for i in range(len(chunks)) for r in parts[i]]
