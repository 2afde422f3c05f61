"""A Ctrl-C that carries what its phase of the run had finished.

The parallel driver stops on Ctrl-C (conformance/core/interrupts.py: held,
then raised at a checkpoint), kills its workers and raises one of these with
the results so far, so that the session can still write the interrupted
report: the searches that ended (``SearchesInterrupted``) or the fixture
replays that ended (``ReplayInterrupted``). Each is a ``KeyboardInterrupt``:
code that does not look for the partial result stops as for any Ctrl-C (the
``ftspec`` command exits 130).
"""

from __future__ import annotations

from .fixture_replay import FixtureResult
from .runner import RunResult

__all__ = ["ReplayInterrupted", "RunInterrupted", "SearchesInterrupted"]


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C in a phase of a run; ``partial`` is what that phase had finished."""

    partial: object


class SearchesInterrupted(RunInterrupted):
    """Ctrl-C in a round of searches: ``partial`` holds every planned cell, those of the searches that
    ended with their counts and the others as planned (no examples)."""

    def __init__(self, partial: RunResult) -> None:
        super().__init__("interrupted during the searches")
        self.partial: RunResult = partial


class ReplayInterrupted(RunInterrupted):
    """Ctrl-C in the golden fixture replay: ``partial`` holds the replays that ended, in case order."""

    def __init__(self, partial: list[FixtureResult]) -> None:
        super().__init__("interrupted during the fixture replay")
        self.partial: list[FixtureResult] = partial
