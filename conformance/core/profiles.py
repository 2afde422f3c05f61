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

- quick (CI, ``make test``) and default (``make run``): run 2, certify 10
  (quick) and 100 (default), ceiling 20 s (quick) and 120 s (default).
  ``ftspec run`` is the quick look: on an idle 2-core machine ``make run``
  measured 2 to 60 examples per cell (median 7) under the 3 s cap, so a
  minimum of 2 costs nothing there; on a loaded machine (other jobs on the
  cores) 98 of 351 cells ran a single example, and a minimum of 5 added an
  extra round of about 3 minutes per dtype, so the run's minimum only rules
  out single-example cells. A certificate is what people publish and must
  rest on at least 100 examples per cell at the default profile.
- thorough: run and certify 1000, ceiling 600 s: no time cap, so a cell is
  short only when the spec refuses most drawn cases.

Quick: at most 2 s per implementation search (the one search all implementations shared
had 6 s; per implementation, 6 s made a JAX or Transformers search alone as long as that).
Default: 100 examples per implementation search, at most 1 s each. The speed
target is ``make run`` within 150 s on 2 cores with a median of at least 100
examples per cell for NumPy and PyTorch and 20 for JAX; measured on a loaded
2-core machine: 842 s, medians 36.5, 43 and 3 (docs/scaleout.md). The figures
above (median 7) are from one shared search of every implementation at 60
examples and 3 s.
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


PROFILES = {
    "quick": Profile("quick", examples=10, budget="quick", max_batch=2, call_timeout=60.0, seconds=2.0,
                     fixtures="sample", minimum=2, certify_minimum=10, ceiling=20.0),
    "default": Profile("default", examples=100, budget="default", max_batch=3, call_timeout=60.0, seconds=1.0,
                       fixtures="sample", minimum=2, certify_minimum=100, ceiling=120.0),
    "thorough": Profile("thorough", examples=10_000, budget="thorough", max_batch=3, call_timeout=120.0,
                        minimum=1000, certify_minimum=1000, ceiling=600.0),
}


def profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)}") from None
