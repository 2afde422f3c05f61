"""Running the search and the fixture replay in worker processes (``ftspec run --jobs N``).

The searches of a run are independent: each (algorithm, dtype) search draws
its own cases from its own seed, so running them in separate processes gives
the same examples as running them one after another (up to each search's
wall-time cap, which counts the same in both). Each search, and each chunk of
fixture cases, is a task on a ``concurrent.futures`` executor: by default an
``isolation.IsolatedPool`` of local worker processes (jobs=1 too: one worker,
so a plugin that ends its process cannot end the run); a Dask cluster's
executor can take its place, since tasks take and return plain values
(settings in; numbers, strings, lists and dicts out). A failing search's
shrunk case is read back from the case file the worker wrote.

A task whose worker is lost (``isolation.WorkerLost``: a call past its
deadline killed by the watchdog, ``os._exit``, a segfault) fails only the
implementation whose call was in progress: its cell gets a failed verdict
(check ``timeout`` or ``crash``) and the task runs again without it, so the
other implementations in that search are still searched. A loss outside any
call (the harness, plugin loading) fails the task's cells as an error. Hangs
and crashes found are passed on to the fixture replay, which does not call
that (implementation, algorithm, device) again (``calling.skipping_hangs``):
a hang costs its timeout once.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter, deque
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, Iterable, Optional, Sequence

from .calling import known_hangs, skipping_hangs
from .fixture_replay import FixtureResult
from .isolation import IsolatedPool, WorkerLost
from .runner import Cell, Failure, Runner, RunResult

__all__ = ["RunSettings", "default_jobs", "hangs_of", "replay_fixtures_parallel", "run_parallel"]

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

_WORKER: dict[tuple, Any] = {}


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


def _runner(s: RunSettings, excluded: tuple[str, ...] = ()) -> Runner:
    from .profiles import profile

    key = ("runner", s, excluded)
    if key not in _WORKER:
        plugins = [(label, impl) for label, impl in _plugins(s.labels) if label not in excluded]
        _WORKER[key] = Runner(plugins, profile=profile(s.profile), seed=s.seed, case_dir=s.case_dir,
                              examples=s.examples, call_timeout=s.call_timeout, devices=s.devices,
                              seconds=s.seconds)
    return _WORKER[key]


def _cell_values(c: Cell) -> dict[str, Any]:
    out = {f.name: getattr(c, f.name) for f in fields(Cell) if f.name not in ("checks", "failure")}
    out["checks"] = dict(c.checks)
    out["failure"] = None if c.failure is None else {
        "check": c.failure.check, "message": c.failure.message, "case_file": c.failure.case_file,
        "reproducer": c.failure.reproducer, "report": c.failure.report, "shrunk": c.failure.shrunk,
        "diagnosis": c.failure.diagnosis}
    return out


def _search_task(settings: dict[str, Any], algorithm: str, dtype: str,
                 excluded: Sequence[str] = ()) -> dict[str, Any]:
    """One (algorithm, dtype) search, without the implementations in ``excluded`` (labels)."""
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()}
    s = RunSettings(**values)
    res = _runner(s, tuple(excluded)).run([algorithm], [dtype])
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


def _replay_task(labels: Sequence[str], case_ids: Sequence[str], dtypes: Optional[Sequence[str]],
                 devices: Optional[Sequence[str]], directory: Optional[str], timeout: Optional[float] = None,
                 hangs: Sequence[Sequence[str]] = ()) -> dict[str, Any]:
    """Replay ``case_ids``; (implementation, algorithm, device) in ``hangs`` are not called again."""
    from .fixture_replay import DEFAULT_TIMEOUT, replay_fixtures

    with skipping_hangs(hangs):
        results = replay_fixtures(_plugins(tuple(labels)), cases=set(case_ids),
                                  dtypes=tuple(dtypes) if dtypes else None,
                                  devices=tuple(devices) if devices else None, directory=directory,
                                  timeout=DEFAULT_TIMEOUT if timeout is None else timeout)
        found = known_hangs()
    return {"results": [asdict(r) for r in results], "hangs": found}


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
            except Exception:  # noqa: BLE001 - the report still has the message and the reproducer
                case = None
        cell.failure = Failure(failure["check"], failure["message"], case,
                               failure["case_file"], failure["reproducer"], failure["report"], failure["shrunk"],
                               failure.get("diagnosis"))
    return cell


def _executor(jobs: int) -> IsolatedPool:
    return IsolatedPool(jobs, initializer=_init_worker)


def _drive(pool: Executor, count: int, submit: Callable[[int], Future], done: Callable[[int, Future], bool],
           window: int) -> None:
    """Submit tasks ``0..count-1`` (at most ``window`` in flight, so that each is built with what
    the finished ones taught: hangs, exclusions); ``done(i, future)`` returns True to run task
    ``i`` again. Ctrl-C kills the workers at once and propagates."""
    waiting = deque(range(count))
    running: dict[Future, int] = {}
    try:
        while waiting or running:
            while waiting and len(running) < window:
                i = waiting.popleft()
                running[submit(i)] = i
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in finished:
                i = running.pop(f)
                if done(i, f):
                    waiting.appendleft(i)
    except BaseException:
        terminate = getattr(pool, "terminate", None)
        if terminate is not None:
            terminate()
        raise


def _lost_report(algorithm: str, label: str, dtype: str, device: str, exc: WorkerLost, check: str,
                 command: str) -> str:
    cause = ("a hang in native code that holds the GIL (a Python-level hang is timed out in the worker)"
             if check == "timeout" else "the implementation ended its process (os._exit, a segfault or an abort "
                                        "in native code)")
    return (f"{algorithm}: implementation {label!r} at {dtype} on {device} fails the {check} check.\n"
            f"  {exc}\n"
            f"  likely cause: {cause}; no case file (the process that held the case is gone)\n"
            f"  reproduce:\n    {command}")


def run_parallel(settings: RunSettings, plugins, *, jobs: int, algorithms: Optional[Sequence[str]] = None,
                 dtypes: Optional[Sequence[str]] = None,
                 progress: Optional[Callable[..., None]] = None,
                 exclude: Iterable[Sequence[str]] = ()) -> RunResult:
    """The same run as ``Runner(...).run(algorithms, dtypes)``, its searches spread over ``jobs`` worker
    processes (1: one worker, still isolated from this process).

    ``plugins`` are the parent's loaded implementations (for the plan: which cells exist);
    the workers load their own from ``settings.labels``. ``exclude``: (label, algorithm, dtype)
    triples left out of their search (e.g. an extra round must not call again an implementation
    whose call hung or crashed); their cells come back as "no examples". On Ctrl-C the workers
    are killed and ``KeyboardInterrupt`` propagates with the results so far as its
    ``partial_result``."""
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
    left_out = {(str(a), str(b), str(c)) for a, b, c in exclude}
    excluded: list[list[str]] = [sorted({m.label for m in members if (m.label, entry.name, dtype) in left_out})
                                 for entry, dtype, members, _ in plan]
    for i, (entry, dtype, members, _) in enumerate(plan):
        for m in members:
            if m.label in excluded[i]:
                cell = result.cells[slots[(entry.name, m.label, dtype, m.device)]]
                cell.status, cell.note = "no examples", "left out of this search (exclude)"
    timeout = planner.timeout

    def submit(i: int) -> Future:
        entry, dtype, _, _ = plan[i]
        return pool.submit(_search_task, plain, entry.name, dtype, list(excluded[i]))

    def place(i: int, values: dict[str, Any]) -> None:
        entry, dtype, members, _ = plan[i]
        key = (entry.name, dtype)
        for v in values["cells"]:
            slot = slots.get((v["algorithm"], v["impl"], v["dtype"], v["device"]))
            if slot is None:  # e.g. "not implemented": the parent's plan has it already
                continue
            cell = _cell_from(v)
            result.cells[slot] = cell
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

    def current(i: int) -> list[Cell]:
        entry, dtype, members, _ = plan[i]
        return [result.cells[slots[(entry.name, m.label, dtype, m.device)]] for m in members]

    def fail(i: int, message: str) -> None:
        entry, dtype, members, _ = plan[i]
        for m in members:
            if m.label in excluded[i]:
                continue  # its verdict is in already
            cell = result.cells[slots[(entry.name, m.label, dtype, m.device)]]
            cell.status, cell.note = "error", message

    def lost(i: int, exc: WorkerLost) -> bool:
        """The culprit's cell fails; True: search again without it."""
        entry, dtype, members, _ = plan[i]
        call = exc.call or {}
        label, device = call.get("implementation"), call.get("device")
        labels = {m.label for m in members if m.label not in excluded[i]}
        if label not in labels:
            fail(i, f"{exc} (outside any implementation call: a harness or plugin-loading failure)")
            return False
        check = "timeout" if exc.deadline else "crash"
        command = (f"ftspec run --impl {label} --algorithm {entry.name} --dtype {dtype} --seed {settings.seed} "
                   f"--call-timeout {timeout:g} --jobs 1")
        for m in members:
            if m.label != label:
                continue
            cell = result.cells[slots[(entry.name, m.label, dtype, m.device)]]
            if m.device == device:
                cell.status = "fail"
                cell.failure = Failure(check, str(exc), None, None, command,
                                       _lost_report(entry.name, label, dtype, m.device, exc, check, command),
                                       shrunk=False)
                progress("failure", cell=cell)
            else:
                cell.status, cell.note = "error", f"not searched: on {device}, {exc}"
        excluded[i].append(label)
        return bool(labels - {label})

    def done(i: int, f: Future) -> bool:
        entry, dtype, _, _ = plan[i]
        try:
            place(i, f.result())
        except WorkerLost as exc:
            if lost(i, exc):
                return True
        except Exception as exc:  # noqa: BLE001 - a harness or plugin-loading error in the worker
            fail(i, f"worker error: {exc}")
        progress("end", algorithm=entry.name, dtype=dtype, cells=current(i))
        return False

    runnable = [i for i, (_, _, members, _) in enumerate(plan) if {m.label for m in members} - set(excluded[i])]
    order = runnable + [i for i in range(len(plan)) if i not in runnable]
    pool = _executor(jobs)
    try:
        _drive(pool, len(runnable), lambda k: submit(order[k]), lambda k, f: done(order[k], f),
               window=max(len(runnable), 1))
    except KeyboardInterrupt as exc:
        result.seconds = time.perf_counter() - started
        exc.partial_result = result  # type: ignore[attr-defined]
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    for i in order[len(runnable):]:  # every member left out: nothing ran
        entry, dtype, _, _ = plan[i]
        progress("end", algorithm=entry.name, dtype=dtype, cells=current(i))
    result.seconds = time.perf_counter() - started
    result.jobs = jobs
    progress("done", result=result)
    return result


def hangs_of(result: RunResult) -> list[list[str]]:
    """The (implementation, algorithm, device) triples that hung or crashed in ``result``'s searches, as
    ``replay_fixtures_parallel``'s ``hangs``: the replay does not call them again."""
    out = []
    for c in result.cells:
        if c.status == "fail" and c.failure is not None and c.failure.check in ("timeout", "crash"):
            what = "hung" if c.failure.check == "timeout" else "crashed"
            out.append([c.impl, c.algorithm, c.device, c.failure.check,
                        f"{what} in the search at {c.dtype}: {c.failure.message}"])
    return out


def replay_fixtures_parallel(labels: Sequence[str], *, jobs: int, cases: Sequence[tuple[str, str]],
                             dtypes: Optional[Sequence[str]] = None, devices: Optional[Sequence[str]] = None,
                             directory: Optional[str] = None,
                             progress: Optional[Callable[[int, int], None]] = None,
                             timeout: Optional[float] = None,
                             hangs: Iterable[Sequence[str]] = ()) -> list[FixtureResult]:
    """``replay_fixtures`` over ``cases`` ((id, algorithm) pairs), in chunks of ``FIXTURE_CHUNK`` cases
    spread over ``jobs`` worker processes; results in case order. ``progress(cases_done, cases_total)``
    after each chunk. ``timeout``: the call timeout (default: ``replay_fixtures``'s). ``hangs``
    (``hangs_of(search result)``) and every hang or crash met here are not called again, so a hung
    algorithm costs its timeout once; a chunk whose worker is lost in a call runs again without
    that call. On Ctrl-C, ``KeyboardInterrupt`` propagates with the chunks that ended as its
    ``partial_result``."""
    algorithm_of = dict(cases)
    ids = [cid for cid, _ in cases]
    chunks = [tuple(ids[i:i + FIXTURE_CHUNK]) for i in range(0, len(ids), FIXTURE_CHUNK)]
    labels_t = list(labels)
    known: dict[tuple[str, str, str], list[str]] = {}
    for h in hangs:
        known.setdefault((h[0], h[1], h[2]), list(h))
    parts: dict[int, list[FixtureResult]] = {}
    count = [0]

    def submit(i: int) -> Future:
        return pool.submit(_replay_task, labels_t, list(chunks[i]), list(dtypes) if dtypes else None,
                           list(devices) if devices else None, directory, timeout, list(known.values()))

    def finish(i: int, results: list[FixtureResult]) -> None:
        parts[i] = results
        count[0] += len(chunks[i])
        if progress is not None:
            progress(count[0], len(ids))

    def fail(i: int, message: str) -> None:
        finish(i, [FixtureResult(cid, algorithm_of[cid], label, "-", "-", False, math.inf, message)
                   for cid in chunks[i] for label in labels_t])

    def done(i: int, f: Future) -> bool:
        try:
            values = f.result()
        except WorkerLost as exc:
            call = exc.call or {}
            parts = (call.get("implementation"), call.get("algorithm"), call.get("device"))
            if parts[0] is None or parts[1] is None or parts[2] is None or parts in known:
                fail(i, f"worker lost: {exc}")  # outside a call, or a record did not prevent it: give up
                return False
            key = (parts[0], parts[1], parts[2])
            check = "timeout" if exc.deadline else "crash"
            known[key] = [*key, check, f"{'hung' if exc.deadline else 'crashed'} in the fixture replay: {exc}"]
            return True  # again, without that call
        except Exception as exc:  # noqa: BLE001
            fail(i, f"worker error: {exc}")
            return False
        for h in values["hangs"]:
            known.setdefault((h[0], h[1], h[2]), list(h))
        finish(i, [FixtureResult(**v) for v in values["results"]])
        return False

    pool = _executor(jobs)
    try:
        _drive(pool, len(chunks), submit, done, window=jobs)
    except KeyboardInterrupt as exc:  # the chunks replayed so far, for the interrupted report
        exc.partial_result = [r for i in sorted(parts) for r in parts[i]]  # type: ignore[attr-defined]
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [r for i in range(len(chunks)) for r in parts[i]]
