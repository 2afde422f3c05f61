"""Hypothesis profiles of the conformance run: ``quick`` (CI and ``make test``),
``default`` (``make run``) and ``thorough`` (the calibration run).

``examples`` is per (algorithm, dtype) search of each implementation (every
implementation has its own search, and its devices see every example of
it; conformance/running/runner.py). ``seconds`` caps such a search's wall time
(``None``: no cap): the search stops after the example in progress, and the
report gives each cell's exact count. ``budget`` bounds the sizes the
strategies draw (conformance/strategies).

Minimum examples per cell. A verdict on a handful of examples says little (a
cold-start run once passed a cell on 3 examples that fails at example 26), so
each profile sets the examples a cell must run for a verdict: ``minimum`` for
``ftspec run`` and ``certify_minimum`` for ``ftspec certify`` (which also
searches for at least that many). A cell that the time cap leaves short gets
one more search round of the examples it lacks, from a fresh seed, for at most
``ceiling`` seconds; a cell still short is ``inconclusive``
(conformance/session/commands.py, docs/reports.md). The figures:

- quick (CI, ``make test``): run 2, certify 10, ceiling 20 s.
- default (``make run``): run 50, certify 100, ceiling 120 s. A search judges
  its examples in blocks (``block``: value sets per drawn case, sharing one
  evaluation of the spec; conformance/core/blocks.py, docs/tolerances.md
  "Blocks"), so a cell reaches 50 examples in about the time one example per
  draw reached 5 to 10, and the minimum is where a verdict starts to say
  something. On a loaded machine the cap leaves more cells short, and their
  extra round makes the run longer, not the verdict shallower.
- thorough: run and certify 1000, ceiling 600 s: no time cap, so a cell is
  short only when the spec refuses most drawn cases.

Quick: at most 2 s per implementation search. Default: 400 examples per
implementation search, at most 1 s each (the references' time not counted
against it, up to the cap again: runner.py ``_over``). docs/benchmarks.md
records ``make run``'s time and examples per cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["PROFILES", "Profile", "profile"]


@dataclass(frozen=True)
class Profile:
    name: str
    examples: int
    budget: str
    max_batch: int
    call_timeout: float  # seconds a single implementation call may take
    seconds: Optional[float] = None  # wall-time cap per search
    #: golden fixtures ``ftspec run`` replays: "all", or "sample" (``fixture_replay.sample_cases``);
    #: ``ftspec certify`` always replays all of them
    fixtures: str = "all"
    #: examples a cell must run for a verdict under ``ftspec run`` and under ``ftspec certify``
    minimum: int = 1
    certify_minimum: int = 1
    #: seconds the extra round of a search with cells short of the minimum may take
    ceiling: float = 60.0
    #: value sets per drawn case: a block of examples sharing one evaluation of the spec
    #: (conformance/core/blocks.py)
    block: int = 1


PROFILES = {
    "quick": Profile("quick", examples=10, budget="quick", max_batch=2, call_timeout=60.0, seconds=2.0,
                     fixtures="sample", minimum=2, certify_minimum=10, ceiling=20.0, block=4),
    "default": Profile("default", examples=400, budget="default", max_batch=3, call_timeout=60.0, seconds=1.0,
                       fixtures="sample", minimum=50, certify_minimum=100, ceiling=120.0, block=8),
    "thorough": Profile("thorough", examples=10_000, budget="thorough", max_batch=3, call_timeout=120.0,
                        minimum=1000, certify_minimum=1000, ceiling=600.0, block=16),
}


def profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)}") from None
