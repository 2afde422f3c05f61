"""Ctrl-C during a run: held until a point where stopping is safe, then raised there.

Python raises ``KeyboardInterrupt`` at whatever bytecode the main thread is running. Two places
in a run cannot take that:

- ``concurrent.futures.wait`` acquires every future's lock in a loop with no ``finally``
  (CPython 3.11, ``_AcquireFutures``). Interrupted inside that loop, the main thread kept some of
  those locks, and the pool's thread, setting the result of the task the interrupt had just
  killed, waited on one of them for ever: ``ftspec run --jobs 1`` hung instead of writing its
  report (about once in fifty Ctrl-Cs sent just after a search ended).
- Hypothesis's engine: interrupted in its own bookkeeping rather than in the test, it ended the
  search with an internal ``AssertionError``, which the runner took for a harness error of that
  search; the run then carried on and gave a correct implementation an "error" verdict.

So a run holds Ctrl-C (``held_interrupt``) and raises it at ``checkpoint()``: before each
example, and every ``POLL_S`` while waiting on an implementation's call or on worker processes.
Hypothesis's targeting phase can run for minutes without calling the test; there the search's
watchdog (conformance/core/timecap.py) raises the held Ctrl-C, and whatever the engine makes of it
comes out of the search as ``KeyboardInterrupt``.
Only where Python's own handler is in place, in the main thread; a handler a caller installed
(or SIGINT ignored) is left alone, and ``checkpoint()`` is then a no-op."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional

__all__ = ["POLL_S", "checkpoint", "held_interrupt", "holding", "pending", "take_pending"]

#: seconds between looks for a held Ctrl-C while waiting (on a call, on workers)
POLL_S = 0.1


class _Held:
    """Whether a Ctrl-C came while the main thread held it."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.pressed = False

    def press(self, signum: int, frame: Any) -> None:
        self.pressed = True


_active: Optional[_Held] = None


def _held_here() -> Optional[_Held]:
    """The hold, seen from the thread that holds it (the main thread); None from any other: a
    search in a Dask thread of this process must not take the main thread's Ctrl-C."""
    held = _active
    return held if held is not None and held.thread == threading.get_ident() else None


def holding() -> bool:
    """True while this thread holds Ctrl-C: waits should then wake every ``POLL_S`` to
    ``checkpoint()``."""
    return _held_here() is not None


def pending() -> bool:
    """True when a Ctrl-C held by this thread waits for the next ``checkpoint()``."""
    held = _held_here()
    return held is not None and held.pressed


def take_pending(thread_id: int) -> bool:
    """For a watchdog in another thread (conformance/core/timecap.py): whether the thread
    ``thread_id`` holds a Ctrl-C; if so it is taken (the caller raises it in that thread)."""
    held = _active
    if held is None or held.thread != thread_id or not held.pressed:
        return False
    held.pressed = False
    return True


def checkpoint() -> None:
    """Raise a held Ctrl-C here (``KeyboardInterrupt``), a point where no lock is held; a no-op
    when nothing is held, and in every thread but the one that holds it."""
    held = _held_here()
    if held is not None and held.pressed:
        held.pressed = False  # raised once; a later press is raised at a later checkpoint
        raise KeyboardInterrupt


@contextmanager
def held_interrupt() -> Iterator[None]:
    """Hold Ctrl-C inside the block until a ``checkpoint()`` (nested blocks share the outer one).

    A Ctrl-C still held when the outermost block ends is dropped: what it would have stopped
    has ended."""
    global _active
    if (_active is not None or threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    held = _Held()
    signal.signal(signal.SIGINT, held.press)
    _active = held
    try:
        yield
    finally:
        _active = None
        signal.signal(signal.SIGINT, signal.default_int_handler)
