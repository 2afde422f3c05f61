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
cases (``runner.shard_seed``). Shards are merged in shard order, so the result
does not depend on which finished first.

Executors. Each task and each chunk of fixture cases goes to a
``concurrent.futures.Executor``:

- by default ``isolation.IsolatedPool``, local worker processes (jobs=1 too:
  one worker, so a plugin that ends its process cannot end the run). It is an
  ``Executor`` subclass written for this project and is kept rather than
  replaced by ``concurrent.futures.ProcessPoolExecutor``, which cannot do what
  a run needs: a worker death breaks a ``ProcessPoolExecutor`` for good
  (``BrokenProcessPool`` for every pending task), it has no way to kill a call
  hung in C code (no per-task watchdog), and it unpickles what workers send;
- with ``--scheduler ADDRESS``, a Dask distributed cluster's executor
  (``Client.get_executor``, optional extra ``ftspec[dask]``): the workers need
  ftspec and the plugins installed; a lost Dask worker fails its task as an
  error (Dask's own exception), and a call hung in C code is not killed there
  (its worker stays busy until Dask's own timeouts): use the local executor to
  find crashes and hangs. A worker process runs one task at a time (Hypothesis
  is not thread-safe): start workers with ``--nthreads 1`` and as many
  processes as cores.

Tasks take plain values (settings, names) and return a JSON string (numbers,
strings, lists and dicts): no plugin object is ever sent back, on any
executor. A failing search's shrunk case is read back from the case file the
worker wrote (on a cluster, ``--case-dir`` must be a directory the workers
and this process share).

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

``--jobs`` is capped at ``MAX_JOBS_PER_CPU`` workers per usable CPU
(``jobs_cap``): each worker imports every framework.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time
from collections import Counter, deque
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from ..core.calling import known_hangs, skipping_hangs, watched
from .fixture_replay import FixtureResult
from ..core.interrupts import POLL_S, checkpoint, held_interrupt, holding
from .isolation import IsolatedPool, WorkerLost
from .runner import Cell, Failure, Runner, RunResult

__all__ = ["ExecutorError", "RunSettings", "dask_executor", "default_jobs", "hangs_of", "jobs_cap", "probe_plugins",
           "replay_fixtures_parallel", "run_parallel", "usable_cpus", "worker_pool"]

#: default ceiling on worker processes: each imports every framework (~1 GB resident with JAX)
MAX_DEFAULT_JOBS = 8
#: ceiling on an explicit --jobs, per usable CPU: searches are CPU-bound, and each worker holds
#: every framework in memory, so more workers only share the CPUs (and the memory runs out)
MAX_JOBS_PER_CPU = 4
#: fixture cases per task: small enough that progress moves, large enough to amortise a task
FIXTURE_CHUNK = 16


def usable_cpus() -> int:
    """The CPUs this process may use (its affinity mask; ``os.cpu_count()`` where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_jobs() -> int:
    """One worker per CPU this process may use, at most ``MAX_DEFAULT_JOBS``."""
    return max(1, min(MAX_DEFAULT_JOBS, usable_cpus()))


def jobs_cap() -> int:
    """The most worker processes a run starts: ``MAX_JOBS_PER_CPU`` per usable CPU."""
    return MAX_JOBS_PER_CPU * usable_cpus()


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
    #: shards each search is split into (by seed; see the module docstring)
    shards: int = 1
    #: seconds loading a plugin, or its devices(), may take in a worker (None: the default)
    load_timeout: Optional[float] = None


# -- worker side ------------------------------------------------------------------

_WORKER: dict[tuple, Any] = {}
_WORKER_LOCK = threading.Lock()  # a Dask worker runs tasks in threads of one process
#: one task at a time per process: Hypothesis and the hang record (calling.skipping_hangs) are
#: per process, not per thread, so the tasks a multi-threaded Dask worker gets wait their turn
_TASK_LOCK = threading.Lock()


def _init_worker() -> None:
    # Several processes share one accelerator: JAX must not claim most of its memory up front.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import warnings

    warnings.filterwarnings("ignore")


def _plugin(label: str, timeout: Optional[float] = None):
    """The implementation ``label``, loaded once per process, with its ``devices()`` called once
    (``discovery.with_devices``). Both are published to the watchdog as the ``stage`` of
    ``label`` with the load timeout, so a hang there, in C code or not, ends this worker (in a
    pool of ours) instead of hanging the task."""
    from ftspec.impls.discovery import DEFAULT_LOAD_TIMEOUT, load_target, with_devices

    key = ("plugin", label)
    limit = timeout or DEFAULT_LOAD_TIMEOUT
    with _WORKER_LOCK:
        if key not in _WORKER:
            _init_worker()  # idempotent; a Dask worker has no initializer of ours
            with watched({"implementation": label, "stage": "loading"}, limit):
                impl = load_target(label)
            with watched({"implementation": label, "stage": "devices()"}, limit):
                _WORKER[key] = with_devices(impl)
        return _WORKER[key]


def _plugins(labels: Sequence[str], timeout: Optional[float] = None):
    """The implementations of ``labels``, each loaded once per process (``_plugin``)."""
    return [(label, _plugin(label, timeout)) for label in labels]


def _runner(s: RunSettings, excluded: tuple[str, ...] = (), shard: int = 0) -> Runner:
    """A runner for one task (its reference cache is the task's: runners are not shared between
    tasks, which a Dask worker may run at the same time in threads). The plugins in ``excluded``
    are not even loaded."""
    from ..core.profiles import profile

    plugins = _plugins([label for label in s.labels if label not in excluded], s.load_timeout)
    return Runner(plugins, profile=profile(s.profile), seed=s.seed, case_dir=s.case_dir, examples=s.examples,
                  call_timeout=s.call_timeout, devices=s.devices, seconds=s.seconds, shard=(shard, s.shards))


def _cell_values(c: Cell) -> dict[str, Any]:
    out = {f.name: getattr(c, f.name) for f in fields(Cell) if f.name not in ("checks", "failure")}
    out["checks"] = dict(c.checks)
    out["failure"] = None if c.failure is None else {
        "check": c.failure.check, "message": c.failure.message, "case_file": c.failure.case_file,
        "reproducer": c.failure.reproducer, "report": c.failure.report, "shrunk": c.failure.shrunk,
        "diagnosis": c.failure.diagnosis}
    return out


def _search_task(settings: dict[str, Any], algorithm: str, dtype: str,
                 excluded: Sequence[str] = (), shard: int = 0) -> str:
    """Shard ``shard`` of one (algorithm, dtype) search, without the implementations in ``excluded``
    (labels); the result as a JSON string of plain values."""
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()}
    s = RunSettings(**values)
    runner = _runner(s, tuple(excluded), shard)
    with _TASK_LOCK:
        res = runner.run([algorithm], [dtype])
    key = (algorithm, dtype)
    return json.dumps({
        "cells": [_cell_values(c) for c in res.cells],
        "generated": res.generated.get(key, 0),
        "repeated": res.repeated.get(key, 0),
        "rejected": res.rejected.get(key, 0),
        "unmodelled": res.unmodelled.get(key, 0),
        "time_capped": bool(res.time_capped.get(key, False)),
        "agreement": [[a, b, r] for (a, b), r in res.agreement.get(key, {}).items()],
        "reference_seconds": res.reference_seconds,
        "reference_evaluations": runner.reference_evaluations,
        "implementation_seconds": dict(res.implementation_seconds),
    })


def _replay_task(labels: Sequence[str], case_ids: Sequence[str], dtypes: Optional[Sequence[str]],
                 devices: Optional[Sequence[str]], directory: Optional[str], timeout: Optional[float] = None,
                 hangs: Sequence[Sequence[str]] = (), load_timeout: Optional[float] = None) -> str:
    """Replay ``case_ids``; (implementation, algorithm, device) in ``hangs`` are not called again."""
    from .fixture_replay import DEFAULT_TIMEOUT, replay_fixtures

    plugins = _plugins(tuple(labels), load_timeout)
    with _TASK_LOCK, skipping_hangs(hangs):
        results = replay_fixtures(plugins, cases=set(case_ids),
                                  dtypes=tuple(dtypes) if dtypes else None,
                                  devices=tuple(devices) if devices else None, directory=directory,
                                  timeout=DEFAULT_TIMEOUT if timeout is None else timeout)
        found = known_hangs()
    return json.dumps({"results": [asdict(r) for r in results], "hangs": found})


def _probe_task(label: str, load_timeout: Optional[float] = None) -> str:
    """Load ``label`` and call its ``devices()`` here (``_plugin``: under the watchdog). An error
    comes back as text; the caller's own loading reports it as usual."""
    try:
        _plugin(label, load_timeout)
    except Exception as exc:  # noqa: BLE001 - e.g. an ImportError: the parent's load says it, with a hint
        return json.dumps({"loaded": False, "error": f"{type(exc).__name__}: {exc}"})
    return json.dumps({"loaded": True})


def _plain(value: Any) -> dict[str, Any]:
    """A task's result: the JSON text it returned, read as plain values (never unpickled objects)."""
    if isinstance(value, (bytes, str)):
        value = json.loads(value)
    if not isinstance(value, dict):
        raise TypeError(f"a task returned a {type(value).__name__}, not the JSON of a dict")
    return value


# -- parent side ------------------------------------------------------------------

def _cell_from(values: dict[str, Any]) -> Cell:
    from ..core.casefile import read_case

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


class ExecutorError(RuntimeError):
    """The executor cannot be had (no Dask installed, no scheduler at the address): one line."""


class _DaskPool(Executor):
    """A Dask client's executor with the ``shutdown``/``terminate`` this module calls: tasks are
    submitted impure (a task sent again after a loss runs again), and the client stays open."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._inner = client.get_executor(pure=False)
        self._futures: list[Future] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future = self._inner.submit(fn, *args, **kwargs)
        self._futures.append(future)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if cancel_futures:
            for f in self._futures:
                f.cancel()
        self._futures = [f for f in self._futures if not f.done()]

    def terminate(self) -> None:
        self.shutdown(cancel_futures=True)

    def threads(self) -> int:
        """Worker threads in the cluster now (what shards can keep busy)."""
        try:
            return max(1, sum(self.client.nthreads().values()))
        except Exception:  # noqa: BLE001 - a cluster that cannot say: one
            return 1


@contextmanager
def dask_executor(address: str, *, timeout: float = 10.0) -> Iterator[_DaskPool]:
    """An executor on the Dask scheduler at ``address`` (e.g. ``tcp://host:8786``); the client is
    closed on exit. Raises ExecutorError with one line when Dask is missing or nobody answers."""
    try:
        from distributed import Client
    except ImportError:
        raise ExecutorError("--scheduler needs Dask: pip install 'ftspec[dask]'") from None
    try:
        client = Client(address, timeout=timeout, set_as_default=False)
    except Exception as exc:  # noqa: BLE001 - OSError, TimeoutError, ValueError from an address
        raise ExecutorError(f"cannot reach a Dask scheduler at {address!r} within {timeout:g} s: "
                            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    try:
        yield _DaskPool(client)
    finally:
        client.close()


def worker_pool(jobs: int) -> IsolatedPool:
    """``jobs`` local worker processes (an ``IsolatedPool``), for ``executor=``: the caller shuts it
    down (which ends every worker's process group)."""
    return IsolatedPool(jobs, initializer=_init_worker)


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
    if len(parts) == 1 and cell.status == "pass" and cell.examples == 0 and cell.failure is None:
        merged = _cell_from(got[0][1])  # one shard: its cell as it is (the serial run's)
        if merged.failure is not None:
            progress("failure", cell=merged)
        return merged
    empty_note = ""
    for k, v in got:
        part = _cell_from(v)
        before = cell.examples
        cell.add_counts(part)
        if hasattr(cell, "more_failures"):  # conformance/forensics/distinct_failures.py: each shard's further failures
            cell.more_failures = list(cell.more_failures) + list(getattr(part, "more_failures", []))
        if part.status == "fail" and cell.status != "fail":
            cell.status, cell.failure, cell.note = "fail", part.failure, part.note
            if part.first_failure_examples is not None:
                cell.first_failure_examples = before + part.first_failure_examples
                cell.first_failure_s = part.first_failure_s
            progress("failure", cell=cell)
        elif part.status == "error" and cell.status not in ("fail", "error"):
            cell.status, cell.note = "error", f"shard {k}: {part.note}"
        elif part.status == "no examples" and not empty_note:
            empty_note = part.note
    if cell.status in ("pass", "no examples"):
        cell.status = "pass" if cell.examples else "no examples"
        cell.note = "" if cell.examples else empty_note
    h = hashlib.sha256()
    for _, v in got:
        h.update(str(v.get("cases_digest", "")).encode())
    cell.cases_digest = h.hexdigest()
    return cell


def run_parallel(settings: RunSettings, plugins, *, jobs: int, algorithms: Optional[Sequence[str]] = None,
                 dtypes: Optional[Sequence[str]] = None,
                 progress: Optional[Callable[..., None]] = None,
                 exclude: Iterable[Sequence[str]] = (), executor: Optional[Executor] = None) -> RunResult:
    """The same run as ``Runner(...).run(algorithms, dtypes)``, its searches spread over ``jobs`` worker
    processes (1: one worker, still isolated from this process), or over ``executor`` when given
    (e.g. ``dask_executor``'s; it is left open), each search in ``settings.shards`` shards.

    ``plugins`` are the parent's loaded implementations (for the plan: which cells exist);
    the workers load their own from ``settings.labels``. ``exclude``: (label, algorithm, dtype)
    triples left out of their search (e.g. an extra round must not call again an implementation
    whose call hung or crashed); their cells come back as "no examples". On Ctrl-C the workers
    are killed and ``KeyboardInterrupt`` propagates with the results so far as its
    ``partial_result``."""
    from ..core.profiles import profile

    progress = progress or (lambda event, **info: None)
    started = time.perf_counter()
    planner = Runner(plugins, profile=profile(settings.profile), seed=settings.seed, case_dir=settings.case_dir,
                     examples=settings.examples, call_timeout=settings.call_timeout, devices=settings.devices,
                     seconds=settings.seconds)
    shards = max(1, min(int(settings.shards), planner.examples))  # no shard without an example
    settings = replace(settings, shards=shards)
    result, plan = planner.plan(algorithms, dtypes)
    result.shards = shards
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
    #: per search: each shard's values (None until it ends) and, per shard, the labels it left out
    parts: list[list[Optional[dict[str, Any]]]] = [[None] * shards for _ in plan]
    shard_excluded: list[list[list[str]]] = [[list(excluded[i]) for _ in range(shards)] for i in range(len(plan))]
    remaining = [shards] * len(plan)
    reference_evaluations = [0]

    def submit(t: int) -> Future:
        i, k = divmod(t, shards)
        entry, dtype, members, _ = plan[i]
        # an implementation with no member here (no device, not implemented) is not even loaded there:
        # its cells are the plan's, and its loading or devices() cannot cost the others their search
        idle = [label for label in settings.labels if label not in {m.label for m in members}]
        return pool.submit(_search_task, plain, entry.name, dtype, list(shard_excluded[i][k]) + idle, k)

    def finish(i: int) -> None:
        """Every shard of search ``i`` ended: its cells, merged in shard order."""
        entry, dtype, members, _ = plan[i]
        key = (entry.name, dtype)
        by_cell: dict[int, list[Optional[dict[str, Any]]]] = {}
        for k, values in enumerate(parts[i]):
            if values is None:
                continue
            for v in values["cells"]:
                slot = slots.get((v["algorithm"], v["impl"], v["dtype"], v["device"]))
                if slot is None:  # e.g. "not implemented": the parent's plan has it already
                    continue
                by_cell.setdefault(slot, [None] * shards)[k] = v
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
            reference_evaluations[0] += values.get("reference_evaluations", 0)
            result.implementation_seconds.update(values["implementation_seconds"])
        for slot, cell_parts in by_cell.items():
            result.cells[slot] = _merge_shards(result.cells[slot], cell_parts, progress)
        progress("end", algorithm=entry.name, dtype=dtype, cells=current(i))

    def current(i: int) -> list[Cell]:
        entry, dtype, members, _ = plan[i]
        return [result.cells[slots[(entry.name, m.label, dtype, m.device)]] for m in members]

    def fail(i: int, message: str) -> None:
        entry, dtype, members, _ = plan[i]
        for m in members:
            if m.label in excluded[i]:
                continue  # its verdict is in already
            cell = result.cells[slots[(entry.name, m.label, dtype, m.device)]]
            if cell.status != "fail":
                cell.status, cell.note = "error", message

    def lost(i: int, k: int, exc: WorkerLost) -> bool:
        """The culprit's cell fails; True: search shard ``k`` again without it."""
        entry, dtype, members, _ = plan[i]
        call = exc.call or {}
        label, device = call.get("implementation"), call.get("device")
        labels = {m.label for m in members if m.label not in shard_excluded[i][k]}
        if label not in labels:
            fail(i, f"{exc} (outside any implementation call: a harness or plugin-loading failure)")
            return False
        if call.get("stage"):  # its loading or devices() in this worker: its cells error, the others go on
            for m in members:
                cell = result.cells[slots[(entry.name, m.label, dtype, m.device)]]
                if m.label == label and cell.status != "fail":
                    cell.status, cell.note = "error", f"not searched: {exc}"
            if label not in excluded[i]:
                excluded[i].append(label)
            shard_excluded[i][k].append(label)
            return bool(labels - {label})
        check = "timeout" if exc.deadline else "crash"
        command = (f"ftspec run --impl {label} --algorithm {entry.name} --dtype {dtype} --seed {settings.seed} "
                   f"--call-timeout {timeout:g} --jobs 1" + (f" --shards {shards}" if shards > 1 else ""))
        for m in members:
            if m.label != label:
                continue
            cell = result.cells[slots[(entry.name, m.label, dtype, m.device)]]
            if cell.status == "fail":
                continue  # another shard's loss came first
            if m.device == device:
                cell.status = "fail"
                cell.failure = Failure(check, str(exc), None, None, command,
                                       _lost_report(entry.name, label, dtype, m.device, exc, check, command),
                                       shrunk=False)
                progress("failure", cell=cell)
            else:
                cell.status, cell.note = "error", f"not searched: on {device}, {exc}"
        if label not in excluded[i]:
            excluded[i].append(label)
        shard_excluded[i][k].append(label)
        return bool(labels - {label})

    def done(t: int, f: Future) -> bool:
        i, k = divmod(t, shards)
        try:
            parts[i][k] = _plain(f.result())
        except WorkerLost as exc:
            if lost(i, k, exc):
                return True
        except Exception as exc:  # noqa: BLE001 - a harness or plugin-loading error, or a lost Dask worker
            fail(i, f"worker error: {type(exc).__name__}: {exc}")
        remaining[i] -= 1
        if remaining[i] == 0:
            finish(i)
        return False

    runnable = [i for i, (_, _, members, _) in enumerate(plan) if {m.label for m in members} - set(excluded[i])]
    tasks = [i * shards + k for i in runnable for k in range(shards)]
    pool: Executor = executor if executor is not None else worker_pool(jobs)
    try:
        _drive(pool, len(tasks), lambda n: submit(tasks[n]), lambda n, f: done(tasks[n], f),
               window=max(len(tasks), 1))
    except KeyboardInterrupt as exc:
        result.seconds = time.perf_counter() - started
        exc.partial_result = result  # type: ignore[attr-defined]
        raise
    finally:
        if executor is None:
            pool.shutdown(wait=True, cancel_futures=True)
    for i in range(len(plan)):  # every member left out: nothing ran
        if i not in runnable:
            entry, dtype, _, _ = plan[i]
            progress("end", algorithm=entry.name, dtype=dtype, cells=current(i))
    result.seconds = time.perf_counter() - started
    result.jobs = jobs
    result.reference_evaluations = reference_evaluations[0]
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
                             hangs: Iterable[Sequence[str]] = (),
                             executor: Optional[Executor] = None,
                             load_timeout: Optional[float] = None) -> list[FixtureResult]:
    """``replay_fixtures`` over ``cases`` ((id, algorithm) pairs), in chunks of ``FIXTURE_CHUNK`` cases
    spread over ``jobs`` worker processes; results in case order. ``progress(cases_done, cases_total)``
    after each chunk. ``timeout``: the call timeout (default: ``replay_fixtures``'s). ``hangs``
    (``hangs_of(search result)``) and every hang or crash met here are not called again, so a hung
    algorithm costs its timeout once; a chunk whose worker is lost in a call runs again without
    that call. ``load_timeout``: seconds a worker may take to load each plugin (or call its
    ``devices()``). On Ctrl-C, ``KeyboardInterrupt`` propagates with the chunks that ended as its
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
    #: plugins whose loading or devices() was lost in a worker here: left out of later tasks
    dropped: dict[str, str] = {}
    sent: dict[int, list[str]] = {}  # the labels each chunk's latest task was given

    def submit(i: int) -> Future:
        sent[i] = [label for label in labels_t if label not in dropped]
        return pool.submit(_replay_task, sent[i], list(chunks[i]), list(dtypes) if dtypes else None,
                           list(devices) if devices else None, directory, timeout, list(known.values()),
                           load_timeout)

    def finish(i: int, results: list[FixtureResult]) -> None:
        results = results + [FixtureResult(cid, algorithm_of[cid], label, "-", "-", False, math.inf, dropped[label])
                             for label in labels_t if label in dropped and label not in sent.get(i, labels_t)
                             for cid in chunks[i]]
        parts[i] = results
        count[0] += len(chunks[i])
        if progress is not None:
            progress(count[0], len(ids))

    def fail(i: int, message: str) -> None:
        finish(i, [FixtureResult(cid, algorithm_of[cid], label, "-", "-", False, math.inf, message)
                   for cid in chunks[i] for label in labels_t])

    def done(i: int, f: Future) -> bool:
        try:
            values = _plain(f.result())
        except WorkerLost as exc:
            call = exc.call or {}
            label = call.get("implementation")
            if call.get("stage") and label in labels_t and label not in dropped:  # lost loading a plugin
                dropped[label] = f"not replayed: {exc}"
                if any(other not in dropped for other in labels_t):
                    return True  # again, without that plugin
                fail(i, f"worker lost: {exc}")
                return False
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

    pool: Executor = executor if executor is not None else worker_pool(jobs)
    try:
        _drive(pool, len(chunks), submit, done, window=jobs)
    except KeyboardInterrupt as exc:  # the chunks replayed so far, for the interrupted report
        exc.partial_result = [r for i in sorted(parts) for r in parts[i]]  # type: ignore[attr-defined]
        raise
    finally:
        if executor is None:
            pool.shutdown(wait=True, cancel_futures=True)
    return [r for i in range(len(chunks)) for r in parts[i]]
