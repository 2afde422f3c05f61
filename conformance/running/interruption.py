"""A Ctrl-C that carries what its phase of the run had finished.

The parallel driver stops on Ctrl-C (conformance/core/interrupts.py: held,
then raised at a checkpoint), kills its workers and raises one of these with
the results so far, so that the session can still write the interrupted
report: the searches that ended (``SearchesInterrupted``) or the fixture
replays that ended (``ReplayInterrupted``). ``search_here`` gives a round of
searches in this process (``--in-process``) the same: on Ctrl-C, every cell
the round planned, so that the report lists the searches that did not end as
the parallel path's does. Each is a ``KeyboardInterrupt``:
code that does not look for the partial result stops as for any Ctrl-C (the
``ftspec`` command exits 130).
"""

from __future__ import annotations

from typing import Optional, Sequence

from .fixture_replay import FixtureResult
from .runner import Cell, Runner, RunResult

__all__ = ["ReplayInterrupted", "RunInterrupted", "SearchesInterrupted", "search_here"]


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


def search_here(runner: Runner, algorithms: Optional[Sequence[str]], dtypes: Optional[Sequence[str]],
                ended: Sequence[Cell]) -> RunResult:
    """``runner.run(algorithms, dtypes)`` in this process; on Ctrl-C, ``SearchesInterrupted`` whose
    ``partial`` holds every cell the round planned (``Runner.plan``, as the parallel path's
    ``_SearchRound`` does): the cells of the searches that ended in this round, as they ended, and
    the others as planned, with no examples. ``ended`` is the live list the "end" progress events
    fill (``phases._Collector.ended``); only what it gains during this call counts, so an extra
    round never takes an earlier round's cell for its own. Without this an interrupted in-process
    run reported only the searches that had ended: those it never finished vanished from the
    report instead of reading "not run"."""
    start = len(ended)
    planned, _ = runner.plan(algorithms, dtypes)  # the cells only: planning calls no implementation
    try:
        return runner.run(algorithms, dtypes)
    except KeyboardInterrupt:
        done = {(c.algorithm, c.impl, c.dtype, c.device): c for c in ended[start:]}
        planned.cells = [done.get((c.algorithm, c.impl, c.dtype, c.device), c) for c in planned.cells]
        raise SearchesInterrupted(planned) from None
