"""Worker processes that a plugin cannot take down with it: a ``concurrent.futures`` executor.

``ftspec run`` hands each (algorithm, dtype) search and each chunk of fixture
cases to a worker process as a task. Plugins are code we did not write: one
may call ``os._exit``, segfault, or hang inside C code that holds the GIL (no
thread of its process runs again, so no timeout inside it can fire). This
executor keeps each of those to the one task it was running:

- each worker publishes the plugin call in progress (its start, its timeout,
  what it is) in memory it shares with the parent (``calling.CallWatch``); a
  thread in the parent kills a worker whose call is past its timeout plus
  ``grace``: the deadline is enforced from outside the stuck process;
- a worker that dies (killed, crashed, exited) fails only its own task, with
  ``WorkerLost`` naming the call in progress and how the process ended; a new
  worker takes its place and the other tasks go on; healthy workers are
  reused across tasks (each imports the frameworks once: seconds);
- a worker dies with its parent: ``PR_SET_PDEATHSIG`` on Linux (a worker
  stuck in C code is killed by the kernel), and otherwise a thread watching
  the parent's pid and the end of the task pipe;
- each worker leads a process group of its own (POSIX), so the processes a
  plugin starts in it (``subprocess.Popen``, ``os.fork``) are in that group:
  the group is killed whenever its worker ends (retired at shutdown, lost,
  killed by the watchdog or by ``terminate``), and at the latest when the
  parent exits (``atexit``). A process that leaves the group (``setsid``) is
  not followed, nor are a worker's children when the parent is killed with
  SIGKILL (the kernel ends the workers, not what they started);
- plugin loading is watched like a call: a worker publishes it with a
  ``stage`` ("loading", "devices()") in place of an algorithm, and the
  watchdog's message then names the load timeout;
- what comes back is plain values: a worker sends its result as JSON, and
  an error as its type's name, message and traceback text. The parent never
  unpickles what a process running plugin code sends (tasks, which the
  parent writes, go the other way pickled).

Anything written against ``concurrent.futures.Executor`` (``submit`` and
futures) runs on it, so a Dask cluster's executor can take its place
(``executors.dask_executor``, ``ftspec run --scheduler``); there a lost worker
shows up as Dask's own exception instead of ``WorkerLost``.

Why not ``concurrent.futures.ProcessPoolExecutor`` (a hand-written pool should
give way to an existing engine where one does the job): it is the standard engine, but a
worker that dies breaks it for good (every pending and later task fails with
``BrokenProcessPool``, so one segfaulting plugin would end the run), it has no
way to kill one hung task's process (``shutdown`` waits for it; a call stuck in
C code would hang the run), and it unpickles what the workers send. Those three
are what this executor exists for, so it stays an ``Executor`` subclass of its
own; the scheduling around it (``parallel._drive``) is plain ``submit`` and
``wait`` and runs unchanged on Dask.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections import deque
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from itertools import count
from multiprocessing import get_context
from multiprocessing.connection import wait as wait_for
from typing import Any, Callable, Optional

__all__ = ["IsolatedPool", "TaskError", "WorkerLost", "default_grace"]

#: bytes of shared memory naming the call in progress (JSON)
IDENT_BYTES = 512
#: how often the parent looks at the published calls (seconds)
POLL_S = 0.1


def default_grace(timeout: float) -> float:
    """Seconds past a call's timeout before the watchdog kills its worker: enough for the
    worker's own timer to abandon a call that releases the GIL (which costs far less than
    a second even on a loaded machine), so only a truly stuck process is killed."""
    return 1.0 + 0.1 * timeout


class WorkerLost(RuntimeError):
    """The task's worker process ended before the task did.

    ``call``: the plugin call in progress ({implementation, algorithm, device, dtype}) or None;
    ``deadline``: the watchdog killed it, that call being past its timeout; ``seconds``: how long
    the call had run."""

    def __init__(self, message: str, *, call: Optional[dict[str, str]] = None, deadline: bool = False,
                 seconds: Optional[float] = None) -> None:
        super().__init__(message)
        self.call = call
        self.deadline = deadline
        self.seconds = seconds


class TaskError(RuntimeError):
    """The task raised in its worker: its type's name and message (plain text), and the trace."""

    def __init__(self, kind: str, message: str, trace: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.trace = trace


# -- worker side ------------------------------------------------------------------------------------

def _die_with(parent: int, conn: Any) -> None:
    """End this process when the parent ends, even if it is stuck in C code (Linux)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: sent when our creator ends
        except Exception:  # noqa: BLE001 - the watcher thread below still covers the idle case
            pass
    if os.getppid() != parent:  # the parent ended before the signal was armed
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="ftspec-parent-watch").start()


def _own_group() -> None:
    """Lead a process group of our own: what a plugin starts here can be killed with us."""
    try:
        os.setpgid(0, 0)
    except (AttributeError, OSError):  # not POSIX, or the parent did it already
        pass


def _worker(conn: Any, times: Any, ident: Any, parent: int,
            initializer: Optional[Callable[[], None]]) -> None:
    _own_group()
    _die_with(parent, conn)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    from ..core.calling import CallWatch, watch_calls

    watch_calls(CallWatch(times, ident))
    if initializer is not None:
        initializer()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            os._exit(0)
        if message is None:
            return
        task_id, fn, args, kwargs = message
        try:
            value = fn(*args, **kwargs)
            payload = json.dumps({"id": task_id, "ok": True, "value": value}, default=_plain)
        except BaseException as exc:  # noqa: BLE001 - sent back as text; this worker carries on
            payload = json.dumps({"id": task_id, "ok": False, "kind": type(exc).__name__, "message": str(exc),
                                  "trace": traceback.format_exc(limit=8)})
        try:
            conn.send_bytes(payload.encode())
        except (EOFError, OSError):
            os._exit(0)


def _plain(value: Any) -> Any:
    """NumPy scalars and arrays as the plain values they hold; anything else is refused."""
    if hasattr(value, "dtype") and hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"a task returned a {type(value).__name__}, which is not a plain value")


# -- parent side ------------------------------------------------------------------------------------

@dataclass
class _Task:
    future: Future
    id: int
    fn: Callable[..., Any]
    args: tuple
    kwargs: dict


@dataclass
class _Slot:
    process: Any
    conn: Any
    times: Any
    ident: Any
    task: Optional[_Task] = None
    killed: Optional[str] = None  # why the parent killed it
    deadline: bool = False  # killed by the watchdog: its call was past the deadline
    call: Optional[dict[str, str]] = field(default=None)
    call_seconds: Optional[float] = None


def _ended(code: Optional[int]) -> str:
    if code is None:
        return "ended"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        cause = {"SIGSEGV": " (a segmentation fault)", "SIGABRT": " (abort)", "SIGBUS": " (a bus error)",
                 "SIGKILL": " (killed)"}.get(name, "")
        return f"was ended by {name}{cause}"
    return f"exited with status {code} (os._exit, or a crash in C code)"


class IsolatedPool(Executor):
    """``workers`` worker processes (spawned, reused across tasks), with a watchdog.

    ``grace(timeout)`` gives the seconds past a call's own timeout before its worker is
    killed; ``initializer`` runs once in every worker."""

    def __init__(self, workers: int, *, grace: Callable[[float], float] = default_grace,
                 initializer: Optional[Callable[[], None]] = None) -> None:
        if workers < 1:
            raise ValueError("an IsolatedPool needs at least one worker")
        self._size = workers
        self._grace = grace
        self._initializer = initializer
        self._ctx = get_context("spawn")
        self._queue: deque[_Task] = deque()
        self._slots: list[_Slot] = []
        self._ids = count()
        self._lock = threading.Lock()
        self._closing = False
        self._wake_r, self._wake_w = self._ctx.Pipe(duplex=False)
        self.deaths = 0  # workers lost (crashed or killed): for reports and tests
        # Workers are started from the dispatcher thread, which lives as long as the pool:
        # PR_SET_PDEATHSIG fires when the creating *thread* ends.
        self._thread = threading.Thread(target=self._dispatch, daemon=True, name="ftspec-pool")
        self._thread.start()

    # -- Executor ---------------------------------------------------------------------------------
    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        with self._lock:
            if self._closing:
                raise RuntimeError("cannot submit to a pool that is shutting down")
            self._queue.append(_Task(future, next(self._ids), fn, args, kwargs))
        self._wake()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closing = True
            if cancel_futures:
                while self._queue:
                    self._queue.popleft().future.cancel()
        self._wake()
        if wait:
            self._thread.join()

    def terminate(self) -> None:
        """Kill every worker now (Ctrl-C): unfinished tasks fail with ``WorkerLost``."""
        with self._lock:
            self._closing = True
            while self._queue:
                self._queue.popleft().future.cancel()
            slots = list(self._slots)
        for s in slots:
            s.killed = s.killed or "the run was interrupted"
            _kill(s.process)
        self._wake()
        self._thread.join(10)

    def pids(self) -> list[int]:
        """The worker processes alive now."""
        with self._lock:
            return [s.process.pid for s in self._slots if s.process.pid is not None]

    # -- the dispatcher thread ----------------------------------------------------------------------
    def _wake(self) -> None:
        try:
            self._wake_w.send_bytes(b".")
        except OSError:
            pass

    def _dispatch(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - e.g. no process can be started: fail every task
            with self._lock:
                self._closing = True
                queued = list(self._queue)
                self._queue.clear()
            problem = WorkerLost(f"the worker pool failed: {type(exc).__name__}: {str(exc).strip()}")
            for task in queued:
                if task.future.set_running_or_notify_cancel():
                    task.future.set_exception(problem)
            for s in self._slots:
                if s.task is not None:
                    s.task.future.set_exception(problem)
                    s.task = None
        finally:
            for s in list(self._slots):
                _retire(s)
            self._slots.clear()

    def _loop(self) -> None:
        while True:
            with self._lock:
                closing = self._closing
                busy = sum(1 for s in self._slots if s.task is not None)
                if closing and not self._queue and busy == 0:
                    return
                want = min(self._size, busy + len(self._queue))
            while len(self._slots) < want:
                self._slots.append(_spawn(self._ctx, self._initializer))
            self._assign()
            waitables = [self._wake_r] + [s.conn for s in self._slots] + [s.process.sentinel for s in self._slots]
            ready = wait_for(waitables, timeout=POLL_S)
            if self._wake_r in ready:
                while self._wake_r.poll():
                    self._wake_r.recv_bytes()
            for s in list(self._slots):
                if s.conn in ready:
                    _receive(s)
            for s in list(self._slots):
                if s.process.sentinel in ready or not s.process.is_alive():
                    self._lost(s)
            self._watchdog()

    def _assign(self) -> None:
        for s in self._slots:
            if s.task is not None:
                continue
            with self._lock:
                if not self._queue:
                    return
                task = self._queue.popleft()
            if not task.future.set_running_or_notify_cancel():
                continue
            s.task = task
            try:
                s.conn.send((task.id, task.fn, task.args, task.kwargs))
            except (OSError, EOFError):  # the worker died before it got the task: _lost reports it
                pass
            except Exception as exc:  # noqa: BLE001 - the task cannot be sent (not picklable)
                s.task = None
                task.future.set_exception(TaskError(type(exc).__name__, str(exc), ""))

    def _lost(self, s: _Slot) -> None:
        if s.task is not None and not s.killed and _poll(s.conn):  # a reply sent just before the end counts
            _receive(s)
        _end_group(s.process.pid)  # what the plugin started there goes with it
        s.process.join(1)
        task, s.task = s.task, None
        self._slots.remove(s)
        _close(s)
        self.deaths += 1
        if task is None:
            return
        task.future.set_exception(_lost_error(s))

    def _watchdog(self) -> None:
        now = time.monotonic()
        for s in self._slots:
            started, timeout = s.times[0], s.times[1]
            if s.task is None or started <= 0 or s.killed:
                continue
            ran = now - started
            if ran > timeout + self._grace(timeout):
                s.call, s.call_seconds, s.deadline = _read_ident(s.ident), ran, True
                if s.call and s.call.get("stage"):  # plugin loading: no timer of its own in the worker
                    s.killed = f"no result after {ran:.1f} s (load timeout {timeout:g} s)"
                else:
                    s.killed = (f"no result after {ran:.1f} s (call timeout {timeout:g} s), and the process was "
                                "too stuck to time the call out itself")
                _kill(s.process)


# -- one worker's slot: started, read, ended ----------------------------------------------------------

def _spawn(ctx: Any, initializer: Optional[Callable[[], None]]) -> _Slot:
    """A worker process started (a process group of its own where POSIX allows), as a slot."""
    parent_conn, child_conn = ctx.Pipe(duplex=True)
    times = ctx.RawArray("d", 2)
    ident = ctx.RawArray("c", IDENT_BYTES)
    process = ctx.Process(target=_worker, args=(child_conn, times, ident, os.getpid(), initializer),
                          daemon=True, name="ftspec-worker")
    process.start()
    child_conn.close()
    pid = process.pid
    if pid is not None and hasattr(os, "killpg"):
        try:  # both sides set the group (the classic idiom), before any plugin code runs there
            os.setpgid(pid, pid)
        except OSError:  # it did it first, or has already exec'd (EACCES)
            pass
        _GROUPS.add(pid)
    return _Slot(process, parent_conn, times, ident)


def _receive(s: _Slot) -> bool:
    """Take one reply; False when the pipe is closed (the process ended: _lost reports it)."""
    try:
        data = s.conn.recv_bytes()
    except (EOFError, OSError):
        return False
    task, s.task = s.task, None
    if task is None:
        return True
    try:
        doc = json.loads(data.decode())
    except ValueError as exc:
        task.future.set_exception(TaskError("ValueError", f"unreadable reply from the worker: {exc}", ""))
        return True
    if doc.get("ok"):
        task.future.set_result(doc.get("value"))
    else:
        task.future.set_exception(TaskError(str(doc.get("kind")), str(doc.get("message")),
                                            str(doc.get("trace", ""))))
    return True


def _lost_error(s: _Slot) -> WorkerLost:
    """What a task whose worker ended gets: the call in progress, and how the process ended."""
    call, seconds = s.call, s.call_seconds
    if call is None and s.times[0] > 0:
        call, seconds = _read_ident(s.ident), time.monotonic() - s.times[0]
    during = _during(call)
    if s.killed:
        message = f"the worker process was killed{during}: {s.killed}"
    else:
        message = f"the worker process {_ended(s.process.exitcode)}{during}"
    return WorkerLost(message, call=call, deadline=s.deadline, seconds=seconds)


def _retire(s: _Slot) -> None:
    """A worker ended at the pool's end: asked to exit when idle, then killed with its group."""
    try:
        if s.task is None and s.process.is_alive():
            s.conn.send(None)
            # not the sentinel: a process the plugin forked holds a copy of it open
            deadline = time.monotonic() + 2
            while s.process.exitcode is None and time.monotonic() < deadline:
                time.sleep(0.01)
    except (OSError, EOFError, ValueError):
        pass
    _kill(s.process)  # the worker if it is still there, and every process of its group
    if s.task is not None:
        s.task.future.set_exception(WorkerLost("the pool was shut down before the task ended"))
        s.task = None
    _close(s)


def _poll(conn: Any) -> bool:
    try:
        return conn.poll()
    except (EOFError, OSError):
        return False


def _during(call: Optional[dict[str, str]]) -> str:
    if not call:
        return ""
    if call.get("stage"):  # plugin loading or devices(), published by worker_tasks._plugin
        return f" during {call['stage']} of {call.get('implementation')}"
    return (f" during the call of {call.get('algorithm')} by {call.get('implementation')} on "
            f"{call.get('device')} at {call.get('dtype')}")


#: process groups of workers started here and not yet ended (a worker's pid is its group's id)
_GROUPS: set[int] = set()


def _end_group(pgid: Optional[int]) -> None:
    """SIGKILL to every process of a worker's group (the worker and what a plugin started there)."""
    if pgid is None or pgid not in _GROUPS:  # ended already (a second kill could meet a reused id)
        return
    _GROUPS.discard(pgid)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:  # the group is empty already (ESRCH), or the worker never made it (it died first)
        pass


if hasattr(os, "register_at_fork"):  # a process forked from this one owns none of them
    os.register_at_fork(after_in_child=_GROUPS.clear)


@atexit.register
def _end_groups() -> None:
    """At exit, the groups of workers whose pool was never shut down (an error before that)."""
    for pgid in list(_GROUPS):
        _end_group(pgid)


def _kill(process: Any) -> None:
    try:
        _end_group(process.pid)
        process.kill()
        process.join(5)
    except (OSError, ValueError, AttributeError):
        pass


def _close(s: _Slot) -> None:
    try:
        s.conn.close()
    except OSError:
        pass


def _read_ident(ident: Any) -> Optional[dict[str, str]]:
    try:
        doc = json.loads(bytes(ident.value).decode())
    except (ValueError, UnicodeDecodeError):
        return None
    return {str(k): str(v) for k, v in doc.items()} if isinstance(doc, dict) else None
