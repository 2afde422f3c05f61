"""A search's wall-time cap that holds in every phase of Hypothesis's engine.

A cap checked only in the test body holds only while Hypothesis keeps calling
the test. Its targeting phase need not: hill climbing
(``hypothesis.internal.conjecture.optimiser.Optimiser.hill_climb``, 6.170)
tries thousands of mutations of the best case, and an attempt the engine has
cached or can simulate from its tree, or one the strategy rejects before the
body, never reaches the body. A training-loop search of the second thorough
run (docs/tolerances.md) sat there 15 minutes past a 30-second cap.

``TimeCap`` holds the cap in three places:

- ``check()`` in the test body (the runner already did this);
- ``strategy(inner)``: the same check before every draw, so attempts that run
  the strategy but are rejected before the body are capped too (Hypothesis
  then raises ``FlakyStrategyDefinition``: the draw stopped earlier than
  the same draw before; ``watching()`` turns it into ``TimeUp``);
- ``watching()``: a watchdog thread around the Hypothesis call. When the cap
  has been over for ``GRACE_S`` and the searching thread is in Hypothesis's
  own code (not drawing, not in the body), it raises ``TimeUp`` in that thread
  once, with CPython's ``PyThreadState_SetAsyncExc``.

Whatever the engine turns a ``TimeUp`` into on its way out (it may fail an
internal assertion of its own bookkeeping), ``watching()`` re-raises it as
``TimeUp``; searches run inside it.

The watchdog also raises a Ctrl-C the run holds (conformance/core/interrupts.py) in
the search's thread while that thread is in Hypothesis's own code, where no
checkpoint would take it for as long as the engine does not call the test;
whatever the engine makes of it comes out as ``KeyboardInterrupt``.

The watchdog never raises into ftspec's code or a plugin's: the thread marks
the draw and the body as user code under a lock the watchdog takes to decide,
and the watchdog fires at most once. ``over`` decides when the cap is spent;
the runner's never answers True while a failure is being shrunk, so the cap
never loses a counterexample.
"""

from __future__ import annotations

import ctypes
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from hypothesis import strategies as st

from .interrupts import take_pending

__all__ = ["GRACE_S", "POLL_S", "TimeCap", "TimeUp"]

#: seconds the cap may be over, with the thread in Hypothesis's own code, before the watchdog fires
GRACE_S = 2.0
#: seconds between the watchdog's looks
POLL_S = 0.25


class TimeUp(BaseException):
    """The search's wall-time budget is spent (a BaseException: Hypothesis stops at once, no
    shrinking, and no ``except Exception`` in between takes it)."""


def _raise_in(thread_id: int, exc: type[BaseException]) -> None:
    """Raise ``exc`` in the thread ``thread_id`` at its next bytecode boundary."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))


class TimeCap:
    """The cap of one search, decided by ``over()`` (called from the searching thread and from
    the watchdog: it must only read)."""

    def __init__(self, over: Callable[[], bool], *, grace: float = GRACE_S, poll: float = POLL_S) -> None:
        self.over = over
        self.grace = grace
        self.poll = poll
        self.fired = False  # the watchdog raised TimeUp in the searching thread
        self.spent = False  # TimeUp was raised, by check() or by the watchdog
        self.interrupted = False  # the watchdog raised a held Ctrl-C in the searching thread
        self._gate = threading.Lock()
        self._inside = 0  # > 0 while the searching thread runs a draw or the test body
        self._stop = threading.Event()

    def check(self) -> None:
        """Raise ``TimeUp`` when the cap is spent (the searching thread, at a safe point)."""
        if self.over():
            self.spent = True
            raise TimeUp()

    @contextmanager
    def user_code(self) -> Iterator[None]:
        """Mark the block as the search's own code: the watchdog never raises inside it."""
        with self._gate:
            self._inside += 1
        try:
            yield
        finally:
            with self._gate:
                self._inside -= 1

    @contextmanager
    def checked(self) -> Iterator[None]:
        """A draw or a test body: ``check()`` first, then the block as the search's own code."""
        with self.user_code():
            self.check()
            yield

    def strategy(self, inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        """``inner``, with the cap checked before every draw (it draws nothing itself: the same
        seed gives the same cases)."""
        cap = self

        @st.composite
        def capped(draw: st.DrawFn) -> Any:
            with cap.checked():
                return draw(inner)

        return capped()

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Run the block (one Hypothesis search) under the watchdog; ``TimeUp`` out of it when the
        cap stopped it, whichever exception the engine made of that."""
        self._stop.clear()
        dog = threading.Thread(target=self._watch, args=(threading.get_ident(),), daemon=True,
                               name="ftspec-timecap")
        dog.start()
        try:
            yield
        except (TimeUp, KeyboardInterrupt):
            raise
        except BaseException as exc:
            if self.interrupted:
                raise KeyboardInterrupt() from exc
            if self.spent:
                raise TimeUp() from exc
            raise
        finally:
            with self._gate:  # after this the watchdog cannot fire
                self._stop.set()
            dog.join()

    def _watch(self, thread_id: int) -> None:
        since = None  # when the watchdog first saw the cap spent
        while not self._stop.wait(self.poll):
            with self._gate:
                if self._stop.is_set():
                    return
                if self._inside:
                    since = None
                    continue
                if take_pending(thread_id):
                    self.interrupted = True
                    _raise_in(thread_id, KeyboardInterrupt)
                    return
                if not self.over():
                    since = None
                    continue
                now = time.monotonic()
                if since is None:
                    since = now
                if now - since >= self.grace:
                    self.fired = self.spent = True
                    _raise_in(thread_id, TimeUp)
                    return
