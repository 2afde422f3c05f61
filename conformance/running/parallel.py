"""Running the search and the fixture replay as tasks on an executor (``ftspec run --jobs N``,
``--scheduler ADDRESS``, ``--shards N``).

The searches of a run are independent: each (algorithm, dtype) search draws
its own cases from its own seed, so running them in separate processes gives
the same examples as running them one after another (up to each search's
wall-time cap, which counts the same in both). A task is one shard of one
(algorithm, dtype): the search of every implementation in turn (one search per
implementation, conformance/running/runner.py), in one process, so that the spec's
reference for a case they share is evaluated once. ``shards`` splits every
search by seed (shard k of n draws from a seed of its own and runs its share
of the examples, and under a time cap each shard has the whole cap): examples
per cell grow with the workers. The same seed and shard count give the same
cases (``search_keys.shard_seed``). Shards are merged in shard order, so the result
does not depend on which finished first.

Executors (conformance/running/executors.py, re-exported here): the local
``IsolatedPool`` (``worker_pool``) by default, a Dask cluster's
(``dask_executor``) with ``--scheduler``.

Tasks take plain values (the run's configuration as JSON text,
``config.RunConfig.to_json``; names) and return a JSON string (numbers,
strings, lists and dicts): no plugin object is ever sent back, on any
executor. A failing search's shrunk case comes back in its task's result
(conformance/running/wire.py), so this process needs no directory shared
with the workers; the workers still write the case files into ``--case-dir``
(on a cluster, a directory the workers and the user share) for ``ftspec
replay``.

A task whose worker is lost (``isolation.WorkerLost``: a call past its
deadline killed by the watchdog, ``os._exit``, a segfault) fails only the
implementation whose call was in progress: its cell gets a failed verdict
(check ``timeout`` or ``crash``) and the task runs again without it, so the
other implementations in that search are still searched. A loss outside any
call (the harness, plugin loading) fails the task's cells as an error. Hangs
and crashes found are passed on to the fixture replay, which does not call
that (implementation, algorithm, device) again (``calling.skipping_hangs``):
a hang costs its timeout once.

Plugin loading. A worker loads each plugin it needs once, and calls its
``devices()`` once (``discovery.with_devices``: later calls get that first
answer), each under the watchdog with the load timeout (``--load-timeout``)
in place of a call's: a load that hangs, holding the GIL or not, or that
takes the worker down, ends as ``WorkerLost`` naming the ``stage``.
``probe_plugins`` does this for every plugin before the run's own process
loads any (``session.run``/``certify``): a plugin whose loading hangs or
crashes is then reported as failed to load, one whose ``devices()`` does
gets an error verdict on its cells, and the run goes on without calling it
in this process. A search task whose worker is lost while loading a plugin
(one that loaded in the probe) gives that plugin's cells an error and runs
again without it.

Ctrl-C kills the workers and raises ``interruption.SearchesInterrupted``
(``run_parallel``) or ``ReplayInterrupted`` (``replay_fixtures_parallel``),
each a ``KeyboardInterrupt`` carrying what had ended as its ``partial``.

The steps: ``_SearchRound`` is one call of ``run_parallel`` (the parent's
plan, a task per shard of each search, the merge of what comes back, and what
a lost worker costs); ``_FixtureChunks`` is one call of
``replay_fixtures_parallel``; ``_drive`` keeps the executor busy for both.
What the workers run (a search shard, a fixture chunk, a plugin's trial load)
is in conformance/running/worker_tasks.py.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import replace
from typing import Any, Callable, Iterable, Optional, Sequence

from ..core.interrupts import POLL_S, checkpoint, held_interrupt, holding
from .config import RunConfig
from .executors import (MAX_DEFAULT_JOBS, MAX_JOBS_PER_CPU, ExecutorError, dask_executor, default_jobs, jobs_cap,
                        usable_cpus, worker_pool)
from .fixture_replay import FixtureResult
from .interruption import ReplayInterrupted, SearchesInterrupted
from .isolation import WorkerLost
from .results import Status
from .runner import Cell, Failure, Runner, RunResult
from .wire import cell_from_plain
from .worker_tasks import _probe_task, _replay_task, _search_task

__all__ = ["MAX_DEFAULT_JOBS", "MAX_JOBS_PER_CPU", "ExecutorError", "RunConfig", "dask_executor",
           "default_jobs", "hangs_of", "jobs_cap", "probe_plugins", "replay_fixtures_parallel", "run_parallel",
           "usable_cpus", "worker_pool"]

#: fixture cases per task: small enough that progress moves, large enough to amortise a task
FIXTURE_CHUNK = 16


# -- parent side (the worker side: worker_tasks.py) -----------------------------------

def _plain(value: Any) -> dict[str, Any]:
    """A task's result: the JSON text it returned, read as plain values (never unpickled objects)."""
    if isinstance(value, (bytes, str)):
        value = json.loads(value)
    if not isinstance(value, dict):
        raise TypeError(f"a task returned a {type(value).__name__}, not the JSON of a dict")
    return value


def probe_plugins(labels: Sequence[str], executor: Executor, *,
                  load_timeout: Optional[float] = None) -> dict[str, WorkerLost]:
    """Load each of ``labels`` and call its ``devices()`` in a worker process of ``executor`` (one
    task per plugin, under the watchdog with the load timeout) before this process loads any.
    Returns {label: the ``WorkerLost``} for each plugin whose loading or ``devices()`` hung or took
    its worker down; ``exc.call["stage"]`` says which ("loading" or "devices()"). Errors that
    are plain exceptions are left for this process's own loading to report. On Ctrl-C the
    workers are killed and ``KeyboardInterrupt`` propagates."""
    names = list(dict.fromkeys(labels))
    lost: dict[str, WorkerLost] = {}

    def done(i: int, f: Future) -> bool:
        try:
            _plain(f.result())
        except WorkerLost as exc:
            call = dict(exc.call or {})
            call.setdefault("implementation", names[i])
            call.setdefault("stage", "loading")
            exc.call = call
            lost[names[i]] = exc
        except Exception:  # noqa: BLE001 - not the plugin's hang: this process's loading will say
            pass
        return False

    _drive(executor, len(names), lambda i: executor.submit(_probe_task, names[i], load_timeout), done,
           window=max(1, len(names)))
    return lost


def _drive(pool: Executor, count: int, submit: Callable[[int], Future], done: Callable[[int, Future], bool],
           window: int) -> None:
    """Submit tasks ``0..count-1`` (at most ``window`` in flight, so that each is built with what
    the finished ones taught: hangs, exclusions); ``done(i, future)`` returns True to run task
    ``i`` again. Ctrl-C kills the workers at once and propagates (raised between waits, never
    inside one: conformance/core/interrupts.py)."""
    waiting = deque(range(count))
    running: dict[Future, int] = {}
    try:
        with held_interrupt():
            poll = POLL_S if holding() else None
            while waiting or running:
                checkpoint()
                while waiting and len(running) < window:
                    i = waiting.popleft()
                    running[submit(i)] = i
                finished, _ = wait(running, timeout=poll, return_when=FIRST_COMPLETED)
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


def _merge_shards(cell: Cell, parts: list[Optional[dict[str, Any]]], progress: Callable[..., None]) -> Cell:
    """``cell`` (the parent's: fresh, or failed by a lost worker) with the shards' values of it,
    in shard order (``parts[k]``: shard k's cell values, None when shard k did not search it)."""
    got = [(k, v) for k, v in enumerate(parts) if v is not None]
    if not got:
        return cell
    if len(parts) == 1 and cell.status == Status.PASS and cell.examples == 0 and cell.failure is None:
        merged = cell_from_plain(got[0][1])  # one shard: its cell as it is (the serial run's)
        if merged.failure is not None:
            progress("failure", cell=merged)
        return merged
    empty_note = ""
    for k, v in got:
        part = cell_from_plain(v)
        before = cell.examples
        cell.add_counts(part)
        cell.more_failures = list(cell.more_failures) + list(part.more_failures)  # each shard's further failures
        if part.status == Status.FAIL and cell.status != Status.FAIL:
            cell.status, cell.failure, cell.note = Status.FAIL, part.failure, part.note
            if part.first_failure_examples is not None:
                cell.first_failure_examples = before + part.first_failure_examples
                cell.first_failure_s = part.first_failure_s
            progress("failure", cell=cell)
        elif part.status == Status.ERROR and cell.status not in (Status.FAIL, Status.ERROR):
            cell.status, cell.note = Status.ERROR, f"shard {k}: {part.note}"
        elif part.status == Status.NO_EXAMPLES and not empty_note:
            empty_note = part.note
    if cell.status in (Status.PASS, Status.NO_EXAMPLES):
        cell.status = Status.PASS if cell.examples else Status.NO_EXAMPLES
        cell.note = "" if cell.examples else empty_note
        if cell.exhausted and cell.status == Status.PASS:  # one shard judged every case its search can draw
            cell.note = f"exhausted: all {cell.exhausted} distinct cases examined"
    h = hashlib.sha256()
    for _, v in got:
        h.update(str(v.get("cases_digest", "")).encode())
    cell.cases_digest = h.hexdigest()
    return cell


class _SearchRound:
    """One round of searches spread over an executor: the parent's plan (which cells exist), one
    task per shard of each search, the shards' results merged into the plan's cells in shard
    order, and what a lost worker costs (only the implementation whose call was in progress)."""

    def __init__(self, config: RunConfig, plugins: Sequence[Any], algorithms: Optional[Sequence[str]],
                 dtypes: Optional[Sequence[str]], exclude: Iterable[Sequence[str]],
                 progress: Callable[..., None]) -> None:
        self.progress = progress
        self.shards = max(1, min(config.shards, config.examples))  # no shard without an example
        self.config = replace(config, shards=self.shards)
        self.wire = self.config.to_json()  # what every task gets
        # what ``exclude`` leaves out is planned as the in-process runner plans it: its cells say so, and
        # a search with no member left is not planned (an extra round listed 30 such searches)
        left: list[tuple[str, str, str]] = [(str(a), str(b), str(c)) for a, b, c in exclude]
        planner = Runner(plugins, self.config, exclude=left)
        self.result, self.plan = planner.plan(algorithms, dtypes)
        self.result.shards = self.shards
        progress("plan", searches=len(self.plan), examples=self.config.examples)
        # Cells of the planned searches come back from the workers; keep the parent's order.
        self.slots: dict[tuple[str, str, str, str], int] = {}
        for entry, dtype, members, cells in self.plan:
            for m in members:
                self.slots[(entry.name, m.label, dtype, m.device)] = self.result.cells.index(cells[m.key])
        #: per search, the labels left out of it (asked for, or lost in it), and per shard as well
        self.excluded = self._left_out(left)
        self.shard_excluded = [[list(self.excluded[i]) for _ in range(self.shards)] for i in range(len(self.plan))]
        #: per search: each shard's values (None until it ends)
        self.parts: list[list[Optional[dict[str, Any]]]] = [[None] * self.shards for _ in self.plan]
        self.remaining = [self.shards] * len(self.plan)
        self.reference_evaluations = 0
        self.runnable = [i for i, (_, _, members, _) in enumerate(self.plan)
                         if {m.label for m in members} - set(self.excluded[i])]

    def _left_out(self, exclude: Sequence[tuple[str, str, str]]) -> list[list[str]]:
        """Per search, the labels ``exclude`` leaves out of it (the planner left their cells "no
        examples"); the workers are told, so that they load and call only the others."""
        return [sorted({label for label, a, d in exclude if (a, d) == (entry.name, dtype)})
                for entry, dtype, _, _ in self.plan]

    def cell(self, i: int, m: Any) -> Cell:
        """The parent's cell of member ``m`` in search ``i``."""
        entry, dtype, _, _ = self.plan[i]
        return self.result.cells[self.slots[(entry.name, m.label, dtype, m.device)]]

    def current(self, i: int) -> list[Cell]:
        return [self.cell(i, m) for m in self.plan[i][2]]

    # -- tasks ---------------------------------------------------------------------------------
    def drive(self, pool: Executor) -> None:
        tasks = [i * self.shards + k for i in self.runnable for k in range(self.shards)]
        _drive(pool, len(tasks), lambda n: self.submit(pool, tasks[n]), lambda n, f: self.done(tasks[n], f),
               window=max(len(tasks), 1))

    def submit(self, pool: Executor, t: int) -> Future:
        i, k = divmod(t, self.shards)
        entry, dtype, members, _ = self.plan[i]
        # an implementation with no member here (no device, not implemented) is not even loaded there:
        # its cells are the plan's, and its loading or devices() cannot cost the others their search
        idle = [label for label in self.config.labels if label not in {m.label for m in members}]
        return pool.submit(_search_task, self.wire, entry.name, dtype, list(self.shard_excluded[i][k]) + idle, k)

    def done(self, t: int, f: Future) -> bool:
        """Task ``t`` ended; True: run it again (without the implementation its worker lost)."""
        i, k = divmod(t, self.shards)
        try:
            self.parts[i][k] = _plain(f.result())
        except WorkerLost as exc:
            if self.lost(i, k, exc):
                return True
        except Exception as exc:  # noqa: BLE001 - a harness or plugin-loading error, or a lost Dask worker
            self.fail(i, f"worker error: {type(exc).__name__}: {exc}")
        self.remaining[i] -= 1
        if self.remaining[i] == 0:
            self.finish(i)
        return False

    # -- results -------------------------------------------------------------------------------
    def finish(self, i: int) -> None:
        """Every shard of search ``i`` ended: its cells, merged in shard order."""
        entry, dtype, _, _ = self.plan[i]
        by_cell: dict[int, list[Optional[dict[str, Any]]]] = {}
        for k, values in enumerate(self.parts[i]):
            if values is None:
                continue
            for v in values["cells"]:
                slot = self.slots.get((v["algorithm"], v["impl"], v["dtype"], v["device"]))
                if slot is None:  # e.g. "not implemented": the parent's plan has it already
                    continue
                by_cell.setdefault(slot, [None] * self.shards)[k] = v
            self._add_counts((entry.name, dtype), values)
        for slot, cell_parts in by_cell.items():
            self.result.cells[slot] = _merge_shards(self.result.cells[slot], cell_parts, self.progress)
        self.progress("end", algorithm=entry.name, dtype=dtype, cells=self.current(i))

    def _add_counts(self, key: tuple[str, str], values: dict[str, Any]) -> None:
        """A shard's search-wide counts added to the result's."""
        result = self.result
        result.generated[key] += values["generated"]
        result.repeated[key] += values.get("repeated", 0)
        result.rejected[key] += values["rejected"]
        result.unmodelled[key] += values["unmodelled"]
        if values["time_capped"]:
            result.time_capped[key] = True
        table = result.agreement.setdefault(key, {})
        for a, b, r in values["agreement"]:
            table[(a, b)] = max(table.get((a, b), 0.0), r)
        result.reference_seconds += values["reference_seconds"]
        self.reference_evaluations += values.get("reference_evaluations", 0)
        result.implementation_seconds.update(values["implementation_seconds"])

    def fail(self, i: int, message: str) -> None:
        """Search ``i`` could not be made: its cells err (those that failed or were left out keep theirs)."""
        for m in self.plan[i][2]:
            if m.label in self.excluded[i]:
                continue  # its verdict is in already
            cell = self.cell(i, m)
            if cell.status != Status.FAIL:
                cell.status, cell.note = Status.ERROR, message

    def end_unrunnable(self) -> None:
        """The searches with every member left out: nothing ran, their cells are as planned."""
        for i in range(len(self.plan)):
            if i not in self.runnable:
                entry, dtype, _, _ = self.plan[i]
                self.progress("end", algorithm=entry.name, dtype=dtype, cells=self.current(i))

    # -- a lost worker -------------------------------------------------------------------------
    def lost(self, i: int, k: int, exc: WorkerLost) -> bool:
        """The culprit's cell fails; True: search shard ``k`` again without it."""
        call = exc.call or {}
        label = call.get("implementation")
        labels = {m.label for m in self.plan[i][2] if m.label not in self.shard_excluded[i][k]}
        if label not in labels:
            self.fail(i, f"{exc} (outside any implementation call: a harness or plugin-loading failure)")
            return False
        if call.get("stage"):  # its loading or devices() in this worker: its cells error, the others go on
            self._lost_loading(i, label, exc)
        else:
            self._lost_in_call(i, label, call.get("device"), exc)
        if label not in self.excluded[i]:
            self.excluded[i].append(label)
        self.shard_excluded[i][k].append(label)
        return bool(labels - {label})

    def _lost_loading(self, i: int, label: str, exc: WorkerLost) -> None:
        for m in self.plan[i][2]:
            cell = self.cell(i, m)
            if m.label == label and cell.status != Status.FAIL:
                cell.status, cell.note = Status.ERROR, f"not searched: {exc}"

    def _lost_in_call(self, i: int, label: str, device: Optional[str], exc: WorkerLost) -> None:
        """The member whose call hung or crashed fails (``timeout`` or ``crash``, no case file: the
        process that held the case is gone); the implementation's other devices err."""
        entry, dtype, members, _ = self.plan[i]
        check = "timeout" if exc.deadline else "crash"
        command = (f"ftspec run --impl {label} --algorithm {entry.name} --dtype {dtype} --seed {self.config.seed} "
                   f"--call-timeout {self.config.call_timeout:g} --jobs 1"
                   + (f" --shards {self.shards}" if self.shards > 1 else ""))
        for m in members:
            if m.label != label:
                continue
            cell = self.cell(i, m)
            if cell.status == Status.FAIL:
                continue  # another shard's loss came first
            if m.device == device:
                cell.status = Status.FAIL
                cell.failure = Failure(check, str(exc), None, None, command,
                                       _lost_report(entry.name, label, dtype, m.device, exc, check, command),
                                       shrunk=False)
                self.progress("failure", cell=cell)
            else:
                cell.status, cell.note = Status.ERROR, f"not searched: on {device}, {exc}"


def run_parallel(config: RunConfig, plugins: Sequence[Any], *, jobs: Optional[int] = None,
                 algorithms: Optional[Sequence[str]] = None, dtypes: Optional[Sequence[str]] = None,
                 progress: Optional[Callable[..., None]] = None,
                 exclude: Iterable[Sequence[str]] = (), executor: Optional[Executor] = None) -> RunResult:
    """The same run as ``Runner(plugins, config).run(algorithms, dtypes)``, its searches
    spread over ``jobs`` worker processes (None: ``config.jobs``; 1: one worker, still isolated from
    this process), or over ``executor`` when given (e.g. ``dask_executor``'s; it is left open),
    each search in ``config.shards`` shards. ``algorithms``, ``dtypes``: None for the
    configuration's selection (``config.algorithms``, ``config.dtypes``; None there: all).

    ``plugins`` are the parent's loaded implementations (for the plan: which cells exist);
    the workers load their own from ``config.labels``. ``exclude``: (label, algorithm, dtype)
    triples left out of their search (e.g. an extra round must not call again an implementation
    whose call hung or crashed); their cells come back as "no examples". On Ctrl-C the workers
    are killed and ``SearchesInterrupted`` (a ``KeyboardInterrupt``) is raised with the results so
    far as its ``partial``."""
    started = time.perf_counter()
    jobs = jobs or config.jobs
    round_ = _SearchRound(config, plugins, config.algorithms if algorithms is None else algorithms,
                          config.dtypes if dtypes is None else dtypes, exclude,
                          progress or (lambda event, **info: None))
    pool: Executor = executor if executor is not None else worker_pool(jobs)
    try:
        round_.drive(pool)
    except KeyboardInterrupt:
        round_.result.seconds = time.perf_counter() - started
        raise SearchesInterrupted(round_.result) from None
    finally:
        if executor is None:
            pool.shutdown(wait=True, cancel_futures=True)
    round_.end_unrunnable()
    result = round_.result
    result.seconds = time.perf_counter() - started
    result.jobs = jobs
    result.reference_evaluations = round_.reference_evaluations
    round_.progress("done", result=result)
    return result


def hangs_of(result: RunResult) -> list[list[str]]:
    """The (implementation, algorithm, device) triples that hung or crashed in ``result``'s searches, as
    ``replay_fixtures_parallel``'s ``hangs``: the replay does not call them again."""
    out = []
    for c in result.cells:
        if c.status == Status.FAIL and c.failure is not None and c.failure.check in ("timeout", "crash"):
            what = "hung" if c.failure.check == "timeout" else "crashed"
            out.append([c.impl, c.algorithm, c.device, c.failure.check,
                        f"{what} in the search at {c.dtype}: {c.failure.message}"])
    return out


class _FixtureChunks:
    """One fixture replay spread over an executor: a task per chunk of ``FIXTURE_CHUNK`` cases,
    results in case order; every hang or crash met is passed on to the later chunks, and a
    chunk whose worker is lost in a call runs again without that call."""

    def __init__(self, config: RunConfig, cases: Sequence[tuple[str, str]], *, directory: Optional[str],
                 hangs: Iterable[Sequence[str]], progress: Optional[Callable[[int, int], None]]) -> None:
        self.config = config
        self.algorithm_of = dict(cases)
        self.ids = [cid for cid, _ in cases]
        self.chunks = [tuple(self.ids[i:i + FIXTURE_CHUNK]) for i in range(0, len(self.ids), FIXTURE_CHUNK)]
        self.labels = list(config.labels)
        self.directory, self.progress = directory, progress
        self.known: dict[tuple[str, str, str], list[str]] = {}
        for h in hangs:
            self.known.setdefault((h[0], h[1], h[2]), list(h))
        self.parts: dict[int, list[FixtureResult]] = {}
        self.count = 0
        #: plugins whose loading or devices() was lost in a worker here: left out of later tasks
        self.dropped: dict[str, str] = {}
        self.sent: dict[int, list[str]] = {}  # the labels each chunk's latest task was given

    def drive(self, pool: Executor, window: int) -> None:
        _drive(pool, len(self.chunks), lambda i: self.submit(pool, i), self.done, window=window)

    def submit(self, pool: Executor, i: int) -> Future:
        self.sent[i] = [label for label in self.labels if label not in self.dropped]
        wire = replace(self.config, labels=tuple(self.sent[i])).to_json()
        return pool.submit(_replay_task, wire, list(self.chunks[i]), self.directory, list(self.known.values()))

    def done(self, i: int, f: Future) -> bool:
        """Chunk ``i``'s task ended; True: run it again (without what its worker lost)."""
        try:
            values = _plain(f.result())
        except WorkerLost as exc:
            return self._lost(i, exc)
        except Exception as exc:  # noqa: BLE001
            self._fail(i, f"worker error: {exc}")
            return False
        for h in values["hangs"]:
            self.known.setdefault((h[0], h[1], h[2]), list(h))
        self._finish(i, [FixtureResult(**v) for v in values["results"]])
        return False

    def _lost(self, i: int, exc: WorkerLost) -> bool:
        call = exc.call or {}
        label = call.get("implementation")
        if call.get("stage") and label in self.labels and label not in self.dropped:  # lost loading a plugin
            self.dropped[label] = f"not replayed: {exc}"
            if any(other not in self.dropped for other in self.labels):
                return True  # again, without that plugin
            self._fail(i, f"worker lost: {exc}")
            return False
        parts = (call.get("implementation"), call.get("algorithm"), call.get("device"))
        if parts[0] is None or parts[1] is None or parts[2] is None or parts in self.known:
            self._fail(i, f"worker lost: {exc}")  # outside a call, or a record did not prevent it: give up
            return False
        key = (parts[0], parts[1], parts[2])
        check = "timeout" if exc.deadline else "crash"
        self.known[key] = [*key, check, f"{'hung' if exc.deadline else 'crashed'} in the fixture replay: {exc}"]
        return True  # again, without that call

    def _finish(self, i: int, results: list[FixtureResult]) -> None:
        given = self.sent.get(i, self.labels)
        results = results + [FixtureResult(cid, self.algorithm_of[cid], label, "-", "-", False, math.inf,
                                           self.dropped[label])
                             for label in self.labels if label in self.dropped and label not in given
                             for cid in self.chunks[i]]
        self.parts[i] = results
        self.count += len(self.chunks[i])
        if self.progress is not None:
            self.progress(self.count, len(self.ids))

    def _fail(self, i: int, message: str) -> None:
        self._finish(i, [FixtureResult(cid, self.algorithm_of[cid], label, "-", "-", False, math.inf, message)
                         for cid in self.chunks[i] for label in self.labels])

    def ended(self) -> list[FixtureResult]:
        """The chunks replayed so far, in case order."""
        return [r for i in sorted(self.parts) for r in self.parts[i]]

    def results(self) -> list[FixtureResult]:
        return [r for i in range(len(self.chunks)) for r in self.parts[i]]


def replay_fixtures_parallel(config: RunConfig, cases: Sequence[tuple[str, str]], *,
                             directory: Optional[str] = None,
                             progress: Optional[Callable[[int, int], None]] = None,
                             hangs: Iterable[Sequence[str]] = (),
                             executor: Optional[Executor] = None) -> list[FixtureResult]:
    """``replay_fixtures`` over ``cases`` ((id, algorithm) pairs) on the implementations of
    ``config.labels``, at its dtypes and devices, with its call and load timeouts, in chunks of
    ``FIXTURE_CHUNK`` cases spread over ``config.jobs`` worker processes (or ``executor``'s);
    results in case order. ``directory``: the fixtures' (None: the committed ones).
    ``progress(cases_done, cases_total)`` after each chunk. ``hangs`` (``hangs_of(search result)``)
    and every hang or crash met here are not called again, so a hung algorithm costs its timeout
    once; a chunk whose worker is lost in a call runs again without that call. On Ctrl-C,
    ``ReplayInterrupted`` (a ``KeyboardInterrupt``) is raised with the chunks that ended as its
    ``partial``."""
    chunks = _FixtureChunks(config, cases, directory=directory, hangs=hangs, progress=progress)
    pool: Executor = executor if executor is not None else worker_pool(config.jobs)
    try:
        chunks.drive(pool, window=config.jobs)
    except KeyboardInterrupt:  # the chunks replayed so far, for the interrupted report
        raise ReplayInterrupted(chunks.ended()) from None
    finally:
        if executor is None:
            pool.shutdown(wait=True, cancel_futures=True)
    return chunks.results()
